"""The demo's report: ``report.md`` (tables) and PNG plots drawn with :mod:`vpo.search.plots`.

The tables and the words that differ between domains are the domain's (:mod:`vpo.demo.domains`):
:func:`markdown` and :func:`readme_table` hand a run to the domain that its config names.

Every interval in the report includes seed-to-seed variance (the two-level bootstrap of
:mod:`vpo.demo.analysis`); the maze-level SE, which treats the trained models as fixed, appears only
where labelled so.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from vpo.demo.domains import domain_of, interval_name
from vpo.search.plots import draw_bars, draw_curve, new_figure

COLORS = {
    "warmstart_m1": "#999999",
    "warmstart_m3": "#555555",
    "warmstart_hot_m1": "#bbbbbb",
    "warmstart_hot_m3": "#777777",
    "random": "#000000",
    "grpo": "#1f77b4",
    "grpo_3x": "#17becf",
    "gdpo": "#2ca02c",
    "max_at_k": "#9467bd",
    "max_at_k_3x": "#6a3d9a",
    "multi_rlvr": "#ff7f0e",
    "vpo": "#d62728",
    "maxrl": "#8c564b",
    "random_weight": "#e377c2",
    "goal_conditioned": "#bcbd22",
}
# distinct markers, largest first: collapsed methods often share one flat curve and must stay visible
MARKERS = {"grpo": ("s", 10), "grpo_3x": ("D", 8), "gdpo": ("^", 6), "max_at_k": ("P", 6), "max_at_k_3x": ("X", 7),
           "multi_rlvr": ("v", 5)}  # fmt: skip


def _style(key: str) -> dict:
    marker, ms = MARKERS.get(key, ("o", 5))
    return {
        "color": COLORS.get(key),
        "marker": marker,
        "ms": ms,
        "lw": 2.5 if key == "vpo" else 1.5,
        "ls": "--" if key.startswith("warm") else ":" if key == "random" else "-",
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
    spec = domain_of(agg["config"])
    unit = spec.unit
    band = "band: " + interval_name(agg, unit, "band")
    fig, (ax,) = new_figure(7.5, 4.8)
    draw_curve(
        ax,
        _as_results(agg, "best_at_k"),
        "best_at_k",
        f"best@k of w*ᵀr (mean over {unit})",
        f"best@k on held-out {unit} vs answer budget\n({band})",
        reference=(agg["ceilings"]["w*"], spec.ceiling_label),
    )
    paths["best_at_k"] = out / "best_at_k.png"
    fig.savefig(paths["best_at_k"])

    fig, (ax,) = new_figure(7.5, 4.8)
    metric, ylabel, title = spec.coverage_plot
    draw_curve(ax, _as_results(agg, metric), metric, ylabel, f"{title}\n({band})")
    paths[metric] = out / f"{metric}.png"
    fig.savefig(paths[metric])

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
    done = spec.done_label
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
        spec.completion_label,
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


_PLOT_TITLES = {
    "best_at_k": "best@k",
    "pareto_coverage": "Pareto coverage",
    "preferences": "preferences",
    "pass_at_k": "pass@k",
    "diversity": "diversity",
}


def markdown(agg: dict) -> str:
    """``report.md`` of a finished run: its domain's tables and claims
    (:meth:`vpo.demo.domains.Domain.markdown`), then the tail every report shares (:func:`report_tail`)."""
    spec = domain_of(agg["config"])
    return spec.markdown(agg) + "\n" + "\n".join(report_tail(agg, spec.report_plots)) + "\n"


def report_tail(agg: dict, plots: list[str] | tuple[str, ...]) -> list[str]:
    """The end of every domain's report: the training signal, where the time went, its plots, the
    training curves' link and the command that reproduces it."""
    lines = flat_group_lines(agg) + list(_timing_lines(agg))
    for name in plots:
        lines += [f"![{_PLOT_TITLES[name]}]({name}.png)", ""]
    return lines + [*_training_link(agg), f"Reproduce: `{reproduce_command(agg['config'])}`."]


def flat_group_lines(agg: dict) -> list[str]:
    """The report's line on training signal: per method, the share of RL groups whose rollouts all
    scored alike (the trainer's "every group is flat" warnings, which otherwise stay in the job logs),
    mean over steps and seeds, and its largest single-step value. None for runs recorded before."""
    curves = agg.get("training_curves") or {}
    parts = []
    for method, c in curves.items():
        runs = [np.asarray(r, dtype=float) for r in c.get("flat_group_frac", []) if len(r)]
        vals = np.concatenate(runs) if runs else np.array([])
        vals = vals[np.isfinite(vals)]
        if vals.size:
            label = agg["methods"].get(method, {}).get("label", method)
            parts.append(f"{label} {vals.mean():.2f} (max {vals.max():.2f})")
    if not parts:
        return []
    return [
        "Flat groups during RL (all rollouts of a problem scored alike: no learning signal from it), share of "
        "groups, mean over steps and seeds (largest step): " + "; ".join(parts) + ".",
        "",
    ]


def _timing_lines(agg: dict) -> list[str]:
    """The report's wall-time and time-per-job lines (none when the run recorded no timing)."""
    cfg = agg["config"]
    L: list[str] = []
    timing = agg.get("timing") or {}
    if agg.get("wall_seconds"):
        n, last = timing.get("invocations", 1), agg.get("last_invocation_seconds")
        # a resumed run (a sitting stopped before its report): the sum over its sittings, the last alone;
        # sittings that each finished (a rerun that only rewrote the report) read as before
        resumed = n > 1 and last and timing.get("unfinished_sittings")
        took = f"{last / 60:.1f} min" if last >= 60 else f"{last:.0f} s"  # a sitting that only wrote the report
        sittings = f", summed over {n} sittings (the last {took})" if resumed else ""
        L += [
            f"Wall time: {agg['wall_seconds'] / 60:.1f} min on this machine ({os.cpu_count()} cores, "
            f"{cfg['jobs']} jobs at a time){sittings}.",
            "",
        ]
    if timing.get("jobs_s"):
        per: dict[str, list[float]] = {}
        for name, sec in timing["jobs_s"].items():
            kind, run = name.split(" ", 1)
            if name.startswith("warm start"):  # a warm start run as a job (one thread, beside another job)
                key = "warm start"
            elif kind == "train":
                key = f"train {run.rsplit(' s', 1)[0]}"
            else:
                what = (
                    "warm start"
                    if run.startswith("warmstart")
                    else "random answerer"
                    if run.startswith("random_s")
                    else "model"
                )
                key = f"eval {what}"
            per.setdefault(key, []).append(sec)
        parts = [f"{k} {np.mean(v):.0f} s" for k, v in per.items()]
        # warm starts trained in this process before the jobs (several threads, alone), if any
        alone = f"warm start {timing['warm_start_s']:.0f} s (alone); " if timing.get("warm_start_s", 0) >= 1 else ""
        jobs = cfg["jobs"]
        share = {1: "one job at a time", 2: "two jobs sharing the cores"}.get(jobs, f"{jobs} jobs sharing the cores")
        L += [
            f"Time per job (mean over seeds, {share}): "
            + alone
            + ", ".join(parts)
            + f"; report {timing.get('report_s', 0):.0f} s.",
            "",
        ]
    return L + _environment_lines(agg)


def _environment_lines(agg: dict) -> list[str]:
    """What produced the run (``environment``) and each warm start's fingerprint (first loss and
    weights hash): a rerun can tell whether it trained the same warm start bit for bit."""
    L: list[str] = []
    env = agg.get("environment")
    if env:
        v = env.get("versions", {})
        libs = ", ".join(f"{k} {v[k]}" for k in ("torch", "transformers", "trl", "numpy") if v.get(k))
        commit = env.get("git_commit")
        at = (
            f" at commit {commit[:10]}{' (with uncommitted changes)' if env.get('git_dirty') else ''}" if commit else ""
        )
        rep = env.get("report") or {}
        later = (
            f" (report written at commit {rep['git_commit'][:10]})"
            if rep.get("git_commit") and rep.get("git_commit") != commit
            else ""
        )
        cpu = env.get("cpu")  # recorded since 2026-12-04
        kernels = (
            f" ({cpu.get('model')}; torch kernels {cpu.get('torch_capability')}; {' '.join(cpu.get('flags') or [])})"
            if cpu
            else ""
        )
        L += [
            f"Environment: vpo {v.get('vpo')}{at}; Python {env.get('python')}, {libs}; {env.get('platform')}, "
            f"{env.get('cpu_count')} CPUs{kernels}{later}.",
            "",
        ]
    ws = agg.get("warm_start") or {}
    infos = ws.get("replicates") or [ws]
    seeds = agg["config"].get("seeds", [])
    prints = []
    for i, info in enumerate(infos):
        if "weights_sha256" not in info:
            continue
        name = f"s{seeds[i]}" if len(infos) > 1 and i < len(seeds) else "shared"
        prints.append(f"{name} {info['loss_first']:.5f} / {info['weights_sha256'][:12]}")
    if prints:
        L += ["Warm-start fingerprints (first loss / weights SHA-256): " + "; ".join(prints) + ".", ""]
    return L


def _training_link(agg: dict) -> list[str]:
    """The training-curves image, which exists only when some method was trained (not with --warm-only)."""
    return ["![training](training_curves.png)", ""] if agg.get("training_curves") else []


def reproduce_command(cfg: dict) -> str:
    """The ``vpo demo`` command that reruns a report: every setting that differs from the defaults."""
    from vpo.demo.config import DemoConfig, as_recorded

    # a record from before a setting existed was run with what RECORDED_BEFORE says: name it
    record = as_recorded(cfg)
    default = DemoConfig.for_domain(record.get("domain", DemoConfig.domain)).as_dict()
    parts = [f"vpo demo --out {cfg['out']}"]
    # warm_threads: a count the automatic default (0) resolves to for this run is not named
    auto = DemoConfig.automatic_warm_threads(cfg)
    for name, value in record.items():
        if name == "domain" and value != DemoConfig.domain:  # the defaults below are the domain's
            parts.append(f"--domain {value}")
            continue
        if name in ("out", "jobs") or name not in default or value == default[name]:
            continue
        if name == "warm_threads" and value == auto:
            continue
        if name == "warm_only":
            parts.append("--warm-only")
            continue
        if name == "shop_model":
            parts.append(f"--model {value}")
            continue
        text = ",".join(map(str, value)) if isinstance(value, list) else str(value)
        parts.append(f"--set {name}={text}")
    return " ".join(parts)


def write_report(agg: dict, out: Path) -> None:
    (out / "demo.json").write_text(json.dumps(agg, indent=1))
    plot_demo(agg, out)
    (out / "report.md").write_text(markdown(agg))


def readme_table(agg: dict) -> str:
    """The README's table of a shipped run, as its domain writes it (:meth:`vpo.demo.domains.Domain.readme_table`):
    every number is the shipped report's (tests compare the two)."""
    return domain_of(agg["config"]).readme_table(agg)
