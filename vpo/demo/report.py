"""The demo's report: ``report.md`` (tables) and PNG plots drawn with :mod:`vpo.search.plots`.

Every interval in the report includes seed-to-seed variance (the two-level bootstrap of
:mod:`vpo.demo.analysis`); the maze-level SE, which treats the trained models as fixed, appears only
where labelled so.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from vpo.search.plots import draw_bars, draw_curve, new_figure

COLORS = {
    "warmstart_m1": "#999999",
    "warmstart_m3": "#555555",
    "grpo": "#1f77b4",
    "grpo_3x": "#17becf",
    "gdpo": "#2ca02c",
    "max_at_k": "#9467bd",
    "multi_rlvr": "#ff7f0e",
    "vpo": "#d62728",
    "maxrl": "#8c564b",
    "random_weight": "#e377c2",
    "goal_conditioned": "#bcbd22",
}
# distinct markers, largest first: collapsed methods often share one flat curve and must stay visible
MARKERS = {"grpo": ("s", 10), "grpo_3x": ("D", 8), "gdpo": ("^", 6), "max_at_k": ("P", 6), "multi_rlvr": ("v", 5)}


def _fmt(x: float, digits: int = 3, signed: bool = False) -> str:
    if x is None or not np.isfinite(x):
        return "n/a"
    return f"{x:+.{digits}f}" if signed else f"{x:.{digits}f}"


def _ci(s: dict, digits: int = 3, signed: bool = False) -> str:
    return (
        f"{_fmt(s['mean'], digits, signed)} [{_fmt(s['ci_low'], digits, signed)}, {_fmt(s['ci_high'], digits, signed)}]"
    )


def _style(key: str) -> dict:
    marker, ms = MARKERS.get(key, ("o", 5))
    return {
        "color": COLORS.get(key),
        "marker": marker,
        "ms": ms,
        "lw": 2.5 if key == "vpo" else 1.5,
        "ls": "--" if key.startswith("warm") else "-",
    }


def _as_results(agg: dict, metric: str) -> dict:
    """The demo's rows in the ``results`` layout that :mod:`vpo.search.plots` draws."""
    out = {}
    ks = agg["config"]["ks"]
    for key, row in agg["methods"].items():
        entry = row[metric]
        if isinstance(entry, dict) and "mean" in entry:  # a scalar
            m = {"mean": entry["mean"], "ci_low": entry["ci_low"], "ci_high": entry["ci_high"]}
        else:
            m = {
                "k": ks,
                **{
                    f: [entry[str(k)][f] if str(k) in entry else entry[k][f] for k in ks]
                    for f in ("mean", "ci_low", "ci_high")
                },
            }
        out[row["label"]] = {"metrics": {metric: m}, "shape": {"m": row["m"]}, "style": _style(key)}
    return out


def plot_demo(agg: dict, out: Path) -> dict[str, Path]:
    paths: dict[str, Path] = {}
    band = "band: 95 % two-level bootstrap (seeds, then mazes)"
    prog = agg["config"].get("domain", "maze") == "prog"
    unit = "problems" if prog else "mazes"
    fig, (ax,) = new_figure(7.5, 4.8)
    draw_curve(
        ax,
        _as_results(agg, "best_at_k"),
        "best_at_k",
        f"best@k of w*ᵀr (mean over {unit})",
        f"best@k on held-out {unit} vs answer budget\n({band})",
        reference=(
            agg["ceilings"]["w*"],
            "ceiling: the reference program" if prog else "ceiling: best single route (exact search)",
        ),
    )
    paths["best_at_k"] = out / "best_at_k.png"
    fig.savefig(paths["best_at_k"])

    fig, (ax,) = new_figure(7.5, 4.8)
    if prog:
        draw_curve(
            ax,
            _as_results(agg, "pass_at_k"),
            "pass_at_k",
            "fraction of problems with an all-pass answer",
            f"pass@k vs answer budget\n({band})",
        )
        paths["pass_at_k"] = out / "pass_at_k.png"
    else:
        draw_curve(
            ax,
            _as_results(agg, "pareto_coverage"),
            "pareto_coverage",
            "fraction of the exact Pareto front hit",
            f"Pareto coverage vs answer budget\n({band})",
        )
        paths["pareto_coverage"] = out / "pareto_coverage.png"
    fig.savefig(paths["pass_at_k" if prog else "pareto_coverage"])

    prefs = [p for p in agg["preferences"] if p != "w*"]
    fig, axes = new_figure(4.6 * (len(prefs) + 1), 4.4, len(prefs) + 1)
    for ax, p in zip(axes, prefs):
        draw_curve(
            ax,
            _as_results(agg, f"pref_{p}"),
            f"pref_{p}",
            f"best@k under '{p}'",
            f"preference '{p}' w = {agg['preferences'][p]}",
            reference=(agg["ceilings"][p], "ceiling"),
        )
    draw_curve(
        axes[-1],
        _as_results(agg, "ew_best_at_k"),
        "ew_best_at_k",
        "E_w[best@k], w ~ Dir(1)",
        "E_w[best@k] over fixed Dir(1) weightings",
    )
    fig.suptitle(f"Search under other preferences ({band})", fontsize=10)
    paths["preferences"] = out / "preferences.png"
    fig.savefig(paths["preferences"])

    fig, axes = new_figure(12.0, 4.2, 3)
    draw_bars(
        axes[0],
        _as_results(agg, "diversity"),
        "diversity",
        "mean pairwise L1 (all answers)",
        "diversity, all answers (paper's definition)",
    )
    done = "answers passing >= 1 test" if prog else "completed answers"
    draw_bars(
        axes[1],
        _as_results(agg, "completed_diversity"),
        "completed_diversity",
        f"mean pairwise L1 ({done})",
        f"diversity among {done}",
    )
    draw_bars(
        axes[2],
        _as_results(agg, "completion_rate"),
        "completion_rate",
        "fraction of answers",
        "passing >= 1 test" if prog else "completion rate",
    )
    paths["diversity"] = out / "diversity.png"
    fig.savefig(paths["diversity"])

    curves = agg.get("training_curves") or {}
    if curves:
        fig, axes = new_figure(11.0, 4.2, 2)
        for method, c in curves.items():
            for ax, key, ylabel in (
                (axes[0], "diversity", "within-group reward-space diversity"),
                (axes[1], "reward", "mean w*ᵀr per rollout"),
            ):
                runs = [np.asarray(r, dtype=float) for r in c[key] if len(r)]
                if not runs:
                    continue
                n = min(len(r) for r in runs)
                mean = np.stack([r[:n] for r in runs]).mean(0)
                win = max(1, n // 10)  # moving average: one step of one batch is noisy
                smooth = np.convolve(mean, np.ones(win) / win, mode="valid")
                ax.plot(np.arange(win, n + 1), smooth, label=agg["methods"][method]["label"], color=COLORS.get(method))
                ax.set_xlabel("RL step")
                ax.set_ylabel(ylabel)
                ax.grid(alpha=0.3)
        axes[0].set_title("Diversity during training (seed mean, moving average)", fontsize=10)
        axes[1].set_title("Training reward (seed mean, moving average)", fontsize=10)
        axes[1].legend(fontsize=8)
        paths["training"] = out / "training_curves.png"
        fig.savefig(paths["training"])
    return paths


def _k(entry: dict, k) -> dict:
    return entry[str(k)] if str(k) in entry else entry[k]


def markdown(agg: dict) -> str:
    cfg = agg["config"]
    if cfg.get("domain", "maze") == "prog":
        return markdown_prog(agg)
    ks = cfg["ks"]
    kmax = max(ks)
    top = [k for k in (10, 30) if k in ks] or [kmax]
    rows = agg["methods"]
    L = [
        f"# vpo demo: VPO vs GRPO and the baselines on designed-conflict mazes (CPU, {cfg['split']} split)",
        "",
        f"{cfg['maze_size']}x{cfg['maze_size']} mazes, budget slack {cfg['budget_slack']}, items per zone "
        f"{cfg['items_per_zone']}, lava {cfg['lava']}; tiny Qwen2 ({cfg['num_layers']} layers, hidden "
        f"{cfg['hidden_size']}, one token per character); warm start {cfg['warm_steps']} steps on random routes "
        f"(waypoints {cfg['warm_waypoints']}, wander {cfg['warm_wander']}); RL {cfg['rl_steps']} steps x "
        f"{cfg['prompts_per_step']} mazes x {cfg['num_generations']} rollouts at lr {cfg['rl_lr']}; seeds "
        f"{cfg['seeds']}; evaluation on {agg['num_mazes']} {cfg['split']} mazes at T = {cfg['eval_temperature']}, "
        f"{cfg['eval_budget']} answers per maze, best@k at a matched answer budget (multi-answer policies: "
        f"ceil(k/m) rollouts, first k answers), {cfg['eval_seeds']} draws.",
        "",
        "Intervals: [95 % two-level bootstrap: seeds, then mazes]. They include seed-to-seed variance; "
        "with few seeds the seed level is coarse, so every seed's own value is listed below too.",
        "",
        "## Search on w* and what the pools contain",
        "",
        "| method | " + " | ".join(f"best@{k}" for k in ks) + " | reward@1 | pass@1 | completion | "
        "diversity (all) | diversity (completed) | Pareto cov.@"
        + str(kmax)
        + " | distinct routes | union cov. | ρ̄ | tokens/rollout |",
        "|---|" + "---|" * (len(ks) + 10),
    ]
    for r in rows.values():
        L.append(
            f"| {r['label']} | "
            + " | ".join(_fmt(_k(r["best_at_k"], k)["mean"]) for k in ks)
            + f" | {_fmt(r['reward_at_1']['mean'])} | {_fmt(r['pass_at_1']['mean'])} | {_fmt(r['completion_rate']['mean'])}"
            f" | {_fmt(r['diversity']['mean'])} | {_fmt(r['completed_diversity']['mean'])}"
            f" | {_fmt(_k(r['pareto_coverage'], kmax)['mean'])} | {_fmt(r['distinct_routes']['mean'], 2)}"
            f" | {_fmt(r['union_coverage']['mean'])} | {_fmt(r.get('collinearity', {}).get('mean'), 2)} | {_fmt(r['tokens_per_rollout']['mean'], 1)} |"
        )
    L += [
        "",
        f"Ceiling (best single route per maze by exact search, under w*): {agg['ceilings']['w*']:.3f}; the exact "
        f"Pareto front has {agg['front_size']:.2f} trade-offs per maze on average. Completion: fraction of answers "
        "that reach E. Diversity (all): mean pairwise L1 of reward vectors over every answer (the paper's "
        "definition; a failed route is the all-zero vector, so failing raises it). Diversity (completed): the "
        "same over completed answers only (0 for a maze with fewer than two). Pareto cov.: fraction of the "
        "maze's exact Pareto-front vectors that some answer hits. Distinct routes: distinct executed routes "
        "among completed answers in the pool. Union cov.: Σ_j max_i r_ij over the pool. ρ̄: mean pairwise "
        "correlation of the objectives over a pool's valid answers (near 1: the objectives move together and "
        "VPO should not help). pass@1 (all four objectives at 1) is impossible by design with split zones.",
        "",
        "## With intervals",
        "",
        "| method | "
        + " | ".join(f"best@{k}" for k in top)
        + f" | Pareto cov.@{kmax} | diversity (completed) | completion |",
        "|---|" + "---|" * (len(top) + 3),
    ]
    for r in rows.values():
        L.append(
            f"| {r['label']} | "
            + " | ".join(_ci(_k(r["best_at_k"], k)) for k in top)
            + f" | {_ci(_k(r['pareto_coverage'], kmax))} | {_ci(r['completed_diversity'])} | {_ci(r['completion_rate'])} |"
        )
    L += [
        "",
        "## Per seed",
        "",
        "| method | "
        + " | ".join(f"best@{k} per seed" for k in top)
        + f" | Pareto cov.@{kmax} per seed | diversity (completed) per seed |",
        "|---|" + "---|" * (len(top) + 2),
    ]
    per = lambda s: " / ".join(_fmt(x) for x in s["per_seed"])  # noqa: E731
    for r in rows.values():
        L.append(
            f"| {r['label']} | "
            + " | ".join(per(_k(r["best_at_k"], k)) for k in top)
            + f" | {per(_k(r['pareto_coverage'], kmax))} | {per(r['completed_diversity'])} |"
        )
    if agg["paired_vs_vpo"]:
        L += [
            "",
            "## VPO minus each method (paired: same seed index, same mazes)",
            "",
            "mean [95 % two-level bootstrap]; in brackets after the slash, the SE over seeds of the per-seed "
            "differences; the last column is the maze-level SE of best@" + str(top[-1]) + " given the trained models.",
            "",
            "| vs | "
            + " | ".join(f"Δbest@{k}" for k in top)
            + f" | ΔPareto cov.@{kmax} | Δdiversity (completed) | maze-level SE (given models) |",
            "|---|" + "---|" * (len(top) + 3),
        ]
        for other, d in agg["paired_vs_vpo"].items():
            cells = [
                f"{_ci(_k(d['best_at_k'], k), signed=True)} / {_fmt(_k(d['best_at_k'], k)['se_seeds'])}" for k in top
            ]
            L.append(
                f"| {rows[other]['label']} | "
                + " | ".join(cells)
                + f" | {_ci(_k(d['pareto_coverage'], kmax), signed=True)} | {_ci(d['completed_diversity'], signed=True)}"
                + f" | {_fmt(_k(d['best_at_k'], top[-1])['se_mazes_given_models'])} |"
            )
    prefs = [p for p in agg["preferences"] if p != "w*"]
    L += [
        "",
        f"## Search under other preferences (best@{kmax})",
        "",
        "Each column scores the same pools under another deployment weighting of (completion, gold, diamond, "
        "avoid_lava); E_w is the mean over fixed Dir(1) weightings.",
        "",
        "| method | w* | " + " | ".join(prefs) + f" | E_w[best@{kmax}] |",
        "|---|" + "---|" * (len(prefs) + 2),
    ]
    L.append("| ceiling | " + " | ".join(_fmt(agg["ceilings"][p]) for p in ["w*"] + prefs) + " | |")
    for r in rows.values():
        L.append(
            f"| {r['label']} | "
            + " | ".join(_ci(_k(r[f"pref_{p}"], kmax)) for p in ["w*"] + prefs)
            + f" | {_ci(_k(r['ew_best_at_k'], kmax))} |"
        )
    L += ["", "weightings: " + "; ".join(f"{p} = {agg['preferences'][p]}" for p in prefs), ""]
    L += _timing_lines(agg)
    L += [
        "![best@k](best_at_k.png)",
        "",
        "![Pareto coverage](pareto_coverage.png)",
        "",
        "![preferences](preferences.png)",
        "",
        "![diversity](diversity.png)",
        "",
        *_training_link(agg),
        f"Reproduce: `{reproduce_command(cfg)}`.",
    ]
    return "\n".join(L) + "\n"


def _timing_lines(agg: dict) -> list[str]:
    """The report's wall-time and time-per-job lines (none when the run recorded no timing)."""
    cfg = agg["config"]
    L: list[str] = []
    if agg.get("wall_seconds"):
        L += [
            f"Wall time: {agg['wall_seconds'] / 60:.1f} min on this machine ({os.cpu_count()} cores, "
            f"{cfg['jobs']} jobs at a time).",
            "",
        ]
    timing = agg.get("timing") or {}
    if timing.get("jobs_s"):
        per: dict[str, list[float]] = {}
        for name, sec in timing["jobs_s"].items():
            kind, run = name.split(" ", 1)
            key = f"{kind} {run.rsplit(' s', 1)[0] if kind == 'train' else ('warm start' if run.startswith('warmstart') else 'model')}"
            per.setdefault(key, []).append(sec)
        parts = [f"{k} {np.mean(v):.0f} s" for k, v in per.items()]
        L += [
            f"Time per job (mean over seeds, two jobs sharing the cores): warm start {timing['warm_start_s']:.0f} s "
            f"(alone); " + ", ".join(parts) + f"; report {timing.get('report_s', 0):.0f} s.",
            "",
        ]
    return L


def _training_link(agg: dict) -> list[str]:
    """The training-curves image, which exists only when some method was trained (not with --warm-only)."""
    return ["![training](training_curves.png)", ""] if agg.get("training_curves") else []


def _prog_lines(cfg: dict) -> str:
    """The target pieces in words: 'constants 0-9' for slope 0, else 'lines (slopes a-b, intercepts c-d)'."""
    s = list(cfg.get("prog_slope", (0, 3)))
    b = list(cfg.get("prog_intercept", (0, 9)))
    if s == [0, 0]:
        return f"constants ({b[0]}-{b[1]})"
    return f"lines (slopes {s[0]}-{s[1]}, intercepts {b[0]}-{b[1]})"


def markdown_prog(agg: dict) -> str:
    """The prog domain's report: pass@1, pass@k and best@k, ρ̄ of the test components, diversity among
    answers passing at least one test, distinct programs; the ceiling is 1 (the reference passes all)."""
    cfg = agg["config"]
    ks = cfg["ks"]
    kmax = max(ks)
    top = [k for k in (10, 30) if k in ks] or [kmax]
    rows = agg["methods"]
    L = [
        f"# vpo demo --domain prog: VPO vs GRPO and the baselines on piecewise program synthesis (CPU, {cfg['split']} split)",
        "",
        f"Programs in a tiny language checked on {cfg['prog_tests']} tests each (one reward component per test), "
        f"targets of {cfg['prog_pieces']} {_prog_lines(cfg)} split by {cfg['prog_cases']}, at least {cfg['prog_min_piece']} tests "
        f"per piece (docs/prog_task.md); tiny Qwen2 ({cfg['num_layers']} layers, hidden {cfg['hidden_size']}, one "
        f"token per character); warm start {cfg['warm_steps']} steps on random programs; RL {cfg['rl_steps']} steps x "
        f"{cfg['prompts_per_step']} problems x {cfg['num_generations']} rollouts at lr {cfg['rl_lr']}; seeds "
        f"{cfg['seeds']}; evaluation on {agg['num_mazes']} {cfg['split']} problems at T = {cfg['eval_temperature']}, "
        f"{cfg['eval_budget']} answers per problem, best@k and pass@k at a matched answer budget (multi-answer "
        f"policies: ceil(k/m) rollouts, first k answers), {cfg['eval_seeds']} draws.",
        "",
        "Intervals: [95 % two-level bootstrap: seeds, then problems]. They include seed-to-seed variance; "
        "with few seeds the seed level is coarse, so every seed's own value is listed below too.",
        "",
        "## Search on w* (pass rate) and what the pools contain",
        "",
        "| method | "
        + " | ".join(f"best@{k}" for k in ks)
        + " | pass@1 | "
        + " | ".join(f"pass@{k}" for k in ks[1:])
        + " | reward@1 | ≥1 test | diversity (all) | diversity (≥1 test) | distinct programs | union cov. | ρ̄ | tokens/rollout |",
        "|---|" + "---|" * (2 * len(ks) + 8),
    ]
    for r in rows.values():
        L.append(
            f"| {r['label']} | "
            + " | ".join(_fmt(_k(r["best_at_k"], k)["mean"]) for k in ks)
            + f" | {_fmt(r['pass_at_1']['mean'])} | "
            + " | ".join(_fmt(_k(r["pass_at_k"], k)["mean"]) for k in ks[1:])
            + f" | {_fmt(r['reward_at_1']['mean'])} | {_fmt(r['completion_rate']['mean'])}"
            f" | {_fmt(r['diversity']['mean'])} | {_fmt(r['completed_diversity']['mean'])} | {_fmt(r['distinct_routes']['mean'], 2)}"
            f" | {_fmt(r['union_coverage']['mean'])} | {_fmt(r['collinearity']['mean'], 2)} | {_fmt(r['tokens_per_rollout']['mean'], 1)} |"
        )
    L += [
        "",
        f"Ceiling: {agg['ceilings']['w*']:.3f} (the reference program passes every test of every problem). best@k: "
        "the best pass rate among k answers. pass@1: the first answer of a rollout passes every test; pass@k: "
        "some answer of the matched-budget sub-pool passes every test (the all-pass vector is each problem's "
        "whole Pareto front, so this is also its Pareto coverage). ≥1 test: fraction of answers passing at least "
        "one test (the prog counterpart of the maze's completion). Diversity (all): mean pairwise L1 of the "
        "reward vectors over every answer (the paper's definition); diversity (≥1 test): the same over answers "
        "passing at least one test. Distinct programs: distinct canonical programs (same AST) among those. "
        "Union cov.: Σ_j max_i r_ij, tests passed by some answer. ρ̄: mean pairwise correlation of the test "
        "components over a pool's valid answers.",
        "",
        "## With intervals",
        "",
        "| method | "
        + " | ".join(f"best@{k}" for k in top)
        + " | "
        + " | ".join(f"pass@{k}" for k in top)
        + " | diversity (≥1 test) | ≥1 test |",
        "|---|" + "---|" * (2 * len(top) + 2),
    ]
    for r in rows.values():
        L.append(
            f"| {r['label']} | "
            + " | ".join(_ci(_k(r["best_at_k"], k)) for k in top)
            + " | "
            + " | ".join(_ci(_k(r["pass_at_k"], k)) for k in top)
            + f" | {_ci(r['completed_diversity'])} | {_ci(r['completion_rate'])} |"
        )
    per = lambda s: " / ".join(_fmt(x) for x in s["per_seed"])  # noqa: E731
    L += [
        "",
        "## Per seed",
        "",
        "| method | "
        + " | ".join(f"best@{k} per seed" for k in top)
        + f" | pass@{kmax} per seed | diversity (≥1 test) per seed |",
        "|---|" + "---|" * (len(top) + 2),
    ]
    for r in rows.values():
        L.append(
            f"| {r['label']} | "
            + " | ".join(per(_k(r["best_at_k"], k)) for k in top)
            + f" | {per(_k(r['pass_at_k'], kmax))} | {per(r['completed_diversity'])} |"
        )
    if agg["paired_vs_vpo"]:
        L += [
            "",
            "## VPO minus each method (paired: same seed index, same problems)",
            "",
            "mean [95 % two-level bootstrap] / SE over seeds of the per-seed differences.",
            "",
            "| vs | "
            + " | ".join(f"Δbest@{k}" for k in top)
            + " | "
            + " | ".join(f"Δpass@{k}" for k in top)
            + " | Δdiversity (≥1 test) |",
            "|---|" + "---|" * (2 * len(top) + 1),
        ]
        for other, d in agg["paired_vs_vpo"].items():
            cells = [
                f"{_ci(_k(d[c], k), signed=True)} / {_fmt(_k(d[c], k)['se_seeds'])}"
                for c in ("best_at_k", "pass_at_k")
                for k in top
            ]
            L.append(
                f"| {rows[other]['label']} | "
                + " | ".join(cells)
                + f" | {_ci(d['completed_diversity'], signed=True)} |"
            )
    L += [
        "",
        f"E_w[best@{kmax}] over fixed Dir(1) weightings of the tests: "
        + "; ".join(f"{r['label']} {_ci(_k(r['ew_best_at_k'], kmax))}" for r in rows.values())
        + ".",
        "",
    ]
    L += _timing_lines(agg)
    L += [
        "![best@k](best_at_k.png)",
        "",
        "![pass@k](pass_at_k.png)",
        "",
        "![diversity](diversity.png)",
        "",
        *_training_link(agg),
        f"Reproduce: `{reproduce_command(cfg)}`.",
    ]
    return "\n".join(L) + "\n"


def reproduce_command(cfg: dict) -> str:
    """The ``vpo demo`` command that reruns a report: every setting that differs from the defaults."""
    from vpo.demo.config import DemoConfig

    default = DemoConfig().as_dict()
    parts = [f"vpo demo --out {cfg['out']}"]
    for name, value in cfg.items():
        if name in ("out", "jobs") or name not in default or value == default[name]:
            continue
        if name == "warm_only":
            parts.append("--warm-only")
            continue
        if name == "domain":
            parts.append(f"--domain {value}")
            continue
        text = ",".join(map(str, value)) if isinstance(value, list) else str(value)
        parts.append(f"--set {name}={text}")
    return " ".join(parts)


def write_report(agg: dict, out: Path) -> None:
    (out / "demo.json").write_text(json.dumps(agg, indent=1))
    plot_demo(agg, out)
    (out / "report.md").write_text(markdown(agg))


README_BEGIN = "<!-- demo-table: generated by vpo.demo.report.readme_table from docs/demo/demo.json -->"
README_END = "<!-- /demo-table -->"


def readme_table(agg: dict) -> str:
    """The README's demo table: every number is the shipped report's (tests compare the two)."""
    cfg = agg["config"]
    kmax = max(cfg["ks"])
    top = [k for k in (1, 10, 30) if k in cfg["ks"]]
    L = [
        README_BEGIN,
        "",
        "| method | " + " | ".join(f"best@{k}" for k in top) + f" | completion | diversity (completed) | "
        f"Pareto cov.@{kmax} | diversity (all, paper) | reward@1 | tokens/rollout |",
        "|---|" + "---|" * (len(top) + 6),
    ]
    for key, r in agg["methods"].items():
        name = f"**{r['label']}**" if key == "vpo" else r["label"]
        L.append(
            f"| {name} | "
            + " | ".join(_fmt(_k(r["best_at_k"], k)["mean"]) for k in top)
            + f" | {_fmt(r['completion_rate']['mean'])} | {_fmt(r['completed_diversity']['mean'])}"
            f" | {_fmt(_k(r['pareto_coverage'], kmax)['mean'])} | {_fmt(r['diversity']['mean'])}"
            f" | {_fmt(r['reward_at_1']['mean'])} | {_fmt(r['tokens_per_rollout']['mean'], 1)} |"
        )
    if agg["paired_vs_vpo"]:
        L += [
            "",
            "VPO minus each method, paired by seed and maze: mean [95 % two-level bootstrap over seeds, then mazes]",
            "",
            "| vs | "
            + " | ".join(f"Δbest@{k}" for k in top[1:])
            + f" | ΔPareto cov.@{kmax} | Δdiversity (completed) |",
            "|---|" + "---|" * (len(top) + 1),
        ]
        for other, d in agg["paired_vs_vpo"].items():
            if other.startswith("warmstart_m3"):
                continue
            L.append(
                f"| {agg['methods'][other]['label']} | "
                + " | ".join(_ci(_k(d["best_at_k"], k), signed=True) for k in top[1:])
                + f" | {_ci(_k(d['pareto_coverage'], kmax), signed=True)} | {_ci(d['completed_diversity'], signed=True)} |"
            )
    L += ["", README_END]
    return "\n".join(L)


PROG_README_BEGIN = (
    "<!-- prog-demo-table: generated by vpo.demo.report.readme_table_prog from docs/demo/prog/demo.json -->"
)
PROG_README_END = "<!-- /prog-demo-table -->"


def readme_table_prog(agg: dict) -> str:
    """The README's table of the prog domain: every number is the shipped prog report's."""
    cfg = agg["config"]
    ks = cfg["ks"]
    top = [k for k in (10, 30) if k in ks] or [max(ks)]
    L = [
        PROG_README_BEGIN,
        "",
        "| method | "
        + " | ".join(f"best@{k}" for k in top)
        + " | pass@1 | "
        + " | ".join(f"pass@{k}" for k in top)
        + " | ≥1 test | diversity (≥1 test) | distinct programs | ρ̄ |",
        "|---|" + "---|" * (2 * len(top) + 5),
    ]
    for key, r in agg["methods"].items():
        name = f"**{r['label']}**" if key == "vpo" else r["label"]
        L.append(
            f"| {name} | "
            + " | ".join(_fmt(_k(r["best_at_k"], k)["mean"]) for k in top)
            + f" | {_fmt(r['pass_at_1']['mean'])} | "
            + " | ".join(_fmt(_k(r["pass_at_k"], k)["mean"]) for k in top)
            + f" | {_fmt(r['completion_rate']['mean'])} | {_fmt(r['completed_diversity']['mean'])}"
            f" | {_fmt(r['distinct_routes']['mean'], 2)} | {_fmt(r['collinearity']['mean'], 2)} |"
        )
    if agg["paired_vs_vpo"]:
        L += [
            "",
            "VPO minus each method, paired by seed and problem: mean [95 % two-level bootstrap over seeds, then problems]",
            "",
            "| vs | "
            + " | ".join(f"Δbest@{k}" for k in top)
            + " | "
            + " | ".join(f"Δpass@{k}" for k in top)
            + " | Δdiversity (≥1 test) |",
            "|---|" + "---|" * (2 * len(top) + 1),
        ]
        for other, d in agg["paired_vs_vpo"].items():
            if other.startswith("warmstart_m3"):
                continue
            L.append(
                f"| {agg['methods'][other]['label']} | "
                + " | ".join(_ci(_k(d[c], k), signed=True) for c in ("best_at_k", "pass_at_k") for k in top)
                + f" | {_ci(d['completed_diversity'], signed=True)} |"
            )
    L += ["", PROG_README_END]
    return "\n".join(L)
