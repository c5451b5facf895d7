"""Every maze replicate run so far, side by side: test results, VPO's training curves, the claims
restated from all of them, and where a user's own run of ten replicates should land.

    python scripts/maze_replicates.py \
        --run docs/demo/maze10 --run runs/i38/s880301 --run runs/i38/fresh \
        --curves runs/i38/val10 --curves runs/i38/s880301 --curves runs/i38/fresh \
        --out docs/demo/replicates

``--run DIR``: a demo run's folder (its ``demo.json``: every method's per-replicate test results).
``--curves DIR``: a demo run holding ``runs/vpo_s<seed>/trainer_state.json`` (VPO's training log of
each seed) and its own evaluation (``demo.json``, test or validation split): each such VPO run's
training summary beside its own best@30. Writes ``replicates.json``, ``replicates.md`` and
``curves.png`` to ``--out``.

Claims: VPO minus a method, one paired difference per replicate (its mean over the split's mazes).
For each: the mean over all N replicates with a 95 % interval, "ahead in X of N", the spread, and a
95 % prediction interval for the mean of a user's own ten replicates, ``mean ± c · s · sqrt(1/10 +
1/N)``. Coverage is simulated, not assumed: the whole procedure (N replicates measured, then a user's
ten) is repeated with replicates drawn from the measured ones (the bootstrap keeps their skew and
tails) and from a heavier-tailed population (Student t with 3 degrees of freedom scaled to the
measured SD); each multiplier ``c`` is the smallest that holds 95.2 % under both (95 % plus a margin for the
simulation's own error; never below Student t's), and the coverage is then checked on fresh draws.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
from scipy import stats

CLAIMS = [
    # (name, other method, metric, k)
    ("vpo_vs_grpo_3x_best30", "grpo_3x", "best_at_k", "30"),
    ("vpo_vs_grpo_3x_best10", "grpo_3x", "best_at_k", "10"),
    ("vpo_vs_grpo_3x_pareto30", "grpo_3x", "pareto_coverage", "30"),
    ("vpo_vs_grpo_3x_cdiv", "grpo_3x", "completed_diversity", None),
    ("vpo_vs_multi_rlvr_best30", "multi_rlvr", "best_at_k", "30"),
    ("vpo_vs_multi_rlvr_pareto30", "multi_rlvr", "pareto_coverage", "30"),
    ("vpo_vs_max_at_k_best30", "max_at_k", "best_at_k", "30"),
    ("vpo_vs_max_at_k_pareto30", "max_at_k", "pareto_coverage", "30"),
    ("vpo_vs_max_at_k_cdiv", "max_at_k", "completed_diversity", None),
    ("vpo_vs_warm_best30", "warmstart_m1", "best_at_k", "30"),
    ("vpo_vs_warm_best10", "warmstart_m1", "best_at_k", "10"),
]
LABEL = {
    "grpo_3x": "GRPO 3x",
    "multi_rlvr": "Multi-RLVR",
    "max_at_k": "Max@k",
    "warmstart_m1": "warm start",
    "best_at_k": "best@",
    "pareto_coverage": "Pareto cov.@",
    "completed_diversity": "diversity (completed)",
}
USER_REPLICATES = 10
"""The README's command runs ten replicates."""

TARGET = 0.952
"""The coverage the multipliers are calibrated to: 95 % plus a margin for the Monte Carlo error of the
calibration (50 000 draws), so that the check on fresh draws comes out at 95 % or above."""

TRAINING = {
    # name in the table: (log key, steps averaged: "first" 10 or "last" 10)
    "completion first10": ("vpo/objective/completion", "first"),
    "completion last10": ("vpo/objective/completion", "last"),
    "diversity last10": ("vpo/diversity", "last"),
    "entropy last10": ("entropy", "last"),
    "flat groups (mean)": ("vpo/flat_group_frac", "all"),
    "set score last10": ("vpo/score", "last"),
    "KL last10": ("kl", "last"),
    "gold last10": ("vpo/objective/gold", "last"),
    "diamond last10": ("vpo/objective/diamond", "last"),
    "avoid lava last10": ("vpo/objective/avoid_lava", "last"),
}


def _metric(run: dict, method: str, metric: str, k: str | None) -> list[float]:
    m = run["methods"][method][metric]
    return list((m[k] if k else m)["per_seed"])


def load_runs(dirs: list[str]) -> list[dict]:
    """One record per replicate: its seed, test split, run folder and the per-method test figures."""
    reps = []
    for d in dirs:
        run = json.loads((Path(d) / "demo.json").read_text())
        cfg = run["config"]
        if cfg.get("split", "test") != "test":
            raise SystemExit(f"{d}: a {cfg.get('split')} split run; --run takes test-split runs")
        for i, seed in enumerate(cfg["seeds"]):
            rec = {"seed": seed, "test_seed": cfg.get("test_seed"), "run": str(d), "results": {}}
            for method in ("warmstart_m1", "grpo_3x", "max_at_k", "multi_rlvr", "vpo"):
                for metric, k in (("best_at_k", "30"), ("best_at_k", "10"), ("pareto_coverage", "30")):
                    rec["results"][f"{method}/{metric}/{k}"] = _metric(run, method, metric, k)[i]
                for metric in ("completed_diversity", "completion_rate"):
                    rec["results"][f"{method}/{metric}"] = _metric(run, method, metric, None)[i]
            reps.append(rec)
    seeds = [r["seed"] for r in reps]
    if len(set(seeds)) != len(seeds):
        raise SystemExit(f"a seed appears twice across the runs: {sorted(seeds)}")
    return reps


def _log(curve_dirs: list[str], seed: int) -> list[dict] | None:
    for d in curve_dirs:
        state = Path(d) / "runs" / f"vpo_s{seed}" / "trainer_state.json"
        if state.exists():
            return [h for h in json.loads(state.read_text())["log_history"] if "vpo/diversity" in h]
    return None


def training_summary(rows: list[dict]) -> dict[str, float]:
    out = {}
    for name, (key, part) in TRAINING.items():
        v = np.array([r.get(key, np.nan) for r in rows], dtype=float)
        v = v[:10] if part == "first" else v[-10:] if part == "last" else v
        out[name] = float(np.nanmean(v))
    return out


def load_curve_runs(dirs: list[str]) -> list[dict]:
    """One record per VPO run with a training log: its seed, the split its own evaluation used, and
    that evaluation's VPO and warm-start figures (a ``--curves`` run may be on the validation split)."""
    out = []
    for d in dirs:
        run = json.loads((Path(d) / "demo.json").read_text())
        cfg = run["config"]
        split = f"{cfg.get('split', 'test')} {cfg.get('test_seed')}" if cfg.get("split") == "test" else "validation"
        for i, seed in enumerate(cfg["seeds"]):
            rows = _log([d], seed)
            if rows is None:
                continue
            out.append(
                {
                    "seed": seed,
                    "split": split,
                    "run": str(d),
                    "vpo_best30": _metric(run, "vpo", "best_at_k", "30")[i],
                    "vpo_completion": _metric(run, "vpo", "completion_rate", None)[i],
                    "vpo_cdiv": _metric(run, "vpo", "completed_diversity", None)[i],
                    "warm_best30": _metric(run, "warmstart_m1", "best_at_k", "30")[i],
                    "training": training_summary(rows),
                }
            )
    return out


def _populations(x: np.ndarray, rng):
    """The replicate distributions the intervals are checked under: the measured replicates themselves
    (bootstrap: their skew and tails as measured) and a heavier-tailed one, Student t with 3 degrees of
    freedom scaled to the measured SD (location-scale, so its figures are the same for every claim)."""
    scale = x.std(ddof=1) / math.sqrt(3.0)  # t(3) has variance 3
    return {
        "boot": lambda size: rng.choice(x, size=size),
        "t3": lambda size: x.mean() + scale * rng.standard_t(3, size=size),
    }


def _ratios(x: np.ndarray, population, draws: int) -> tuple[np.ndarray, np.ndarray]:
    """Under ``population``: |a user's ten-replicate mean − our N-replicate mean| in units of the
    prediction interval's scale, and |the population mean − our mean| in units of the standard error."""
    n, mu = len(x), float(x.mean())
    ours = population((draws, n))
    theirs = population((draws, USER_REPLICATES)).mean(1)
    mean, sd = ours.mean(1), ours.std(1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        z_pi = np.abs(theirs - mean) / (sd * math.sqrt(1 / USER_REPLICATES + 1 / n))
        z_ci = np.abs(mu - mean) / (sd / math.sqrt(n))
    return np.nan_to_num(z_pi, nan=np.inf), np.nan_to_num(z_ci, nan=np.inf)


def calibrate(x: np.ndarray, draws: int = 50000, seed: int = 0) -> dict:
    """Multipliers for the two intervals that hold 95 % under every population of :func:`_populations`
    (never below Student t's), then their coverage checked on fresh draws."""
    n = len(x)
    t = float(stats.t.ppf(0.975, n - 1))
    rng = np.random.default_rng(seed)
    c_pi = c_ci = t
    for pop in _populations(x, rng).values():
        z_pi, z_ci = _ratios(x, pop, draws)
        c_pi, c_ci = max(c_pi, float(np.quantile(z_pi, TARGET))), max(c_ci, float(np.quantile(z_ci, TARGET)))
    check = np.random.default_rng(seed + 1)
    coverage = {}
    for name, pop in _populations(x, check).items():
        z_pi, z_ci = _ratios(x, pop, draws)
        coverage[f"pi_{name}"] = float((z_pi <= c_pi).mean())
        coverage[f"ci_{name}"] = float((z_ci <= c_ci).mean())
        coverage[f"ci_{name}_plain_t"] = float((z_ci <= t).mean())
        coverage[f"pi_{name}_plain_t"] = float((z_pi <= t).mean())
    return {"t": t, "c_pi": c_pi, "c_ci": c_ci, "coverage": coverage}


def claims(reps: list[dict]) -> dict[str, dict]:
    out = {}
    for name, other, metric, k in CLAIMS:
        key = f"{metric}/{k}" if k else metric
        x = np.array([r["results"][f"vpo/{key}"] - r["results"][f"{other}/{key}"] for r in reps])
        n, mean, sd = len(x), float(x.mean()), float(x.std(ddof=1))
        cal = calibrate(x)
        half_ci = cal["c_ci"] * sd / math.sqrt(n)
        half_pi = cal["c_pi"] * sd * math.sqrt(1 / USER_REPLICATES + 1 / n)
        out[name] = {
            "label": f"VPO − {LABEL[other]}, {LABEL[metric]}{k or ''}",
            "n": n,
            "mean": mean,
            "ci_low": mean - half_ci,
            "ci_high": mean + half_ci,
            "above0": int((x > 0).sum()),
            "sd": sd,
            "min": float(x.min()),
            "max": float(x.max()),
            "excess_kurtosis": float(stats.kurtosis(x)),
            "pi_low": mean - half_pi,
            "pi_high": mean + half_pi,
            "calibration": cal,
            "per_seed": [float(v) for v in x],
            "seeds": [r["seed"] for r in reps],
        }
    return out


def curve_analysis(curves: list[dict]) -> dict:
    """Spearman correlation of VPO's best@30 (its own evaluation, minus the mean of its split, so that a
    split's difficulty does not pass for a training effect) with its warm start's best@30 and with each
    training summary; and the weakest quarter's training figures beside the others'."""
    if len(curves) < 3:
        return {"n": len(curves), "spearman": {}, "weak": {}}
    by_split: dict = {}
    for c in curves:
        by_split.setdefault(c["split"], []).append(c["vpo_best30"])
    centre = {k: float(np.mean(v)) for k, v in by_split.items()}
    y = np.array([c["vpo_best30"] - centre[c["split"]] for c in curves])
    rows = {}
    for name, x in [("warm start best@30", np.array([c["warm_best30"] for c in curves]))] + [
        (name, np.array([c["training"][name] for c in curves])) for name in TRAINING
    ]:
        rho, p = stats.spearmanr(x, y)
        rows[name] = {"rho": float(rho), "p": float(p)}
    weak = y <= np.quantile(y, 0.25)
    compare = {
        name: {
            "weak": float(np.mean([c["training"][name] for c, w in zip(curves, weak) if w])),
            "others": float(np.mean([c["training"][name] for c, w in zip(curves, weak) if not w])),
        }
        for name in TRAINING
    }
    for key in ("warm_best30", "vpo_completion", "vpo_cdiv"):
        compare[key] = {
            "weak": float(np.mean([c[key] for c, w in zip(curves, weak) if w])),
            "others": float(np.mean([c[key] for c, w in zip(curves, weak) if not w])),
        }
    return {
        "n": len(curves),
        "centre": centre,
        "spearman": rows,
        "weak_seeds": [c["seed"] for c, w in zip(curves, weak) if w],
        "weak": compare,
    }


def plot(curves: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not curves:
        return
    weak = set(curve_analysis(curves).get("weak_seeds", []))
    keys = [
        ("vpo/objective/completion", "completion (training)"),
        ("vpo/diversity", "within-group diversity"),
        ("entropy", "entropy"),
        ("vpo/flat_group_frac", "flat-group share"),
    ]
    fig, axes = plt.subplots(1, len(keys), figsize=(4.2 * len(keys), 3.4))
    for c in curves:
        rows = _log([c["run"]], c["seed"])
        w = c["seed"] in weak
        for ax, (key, _) in zip(axes, keys):
            v = np.array([h.get(key, np.nan) for h in rows], dtype=float)
            v = np.convolve(v, np.ones(5) / 5, mode="valid")  # 5-step running mean
            ax.plot(v, color="tab:red" if w else "0.6", lw=1.6 if w else 0.8, alpha=0.9 if w else 0.6)
    for ax, (_, title) in zip(axes, keys):
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("step (5-step mean)")
    axes[0].plot([], [], color="tab:red", label="weakest quarter at best@30")
    axes[0].plot([], [], color="0.6", label="the others")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"VPO's training curves, {len(curves)} maze replicates trained on this machine", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def markdown(result: dict) -> str:
    reps = result["replicates"]
    lines = [
        "# Every maze replicate so far",
        "",
        f"Written by `python scripts/maze_replicates.py` ({result['command']}). {len(reps)} replicates, each "
        "independent end to end (its own warm start, RL runs and evaluation draws), on "
        f"{len({r['test_seed'] for r in reps})} test splits. Per-replicate values are means over the split's "
        "100 mazes; intervals are over replicates.",
        "",
        "## Per replicate (sorted by VPO's best@30)",
        "",
        "Best@30 under w* (per-replicate values are means over the split's mazes):",
        "",
        "| seed | test split | warm start | GRPO 3x | Max@k | Multi-RLVR | **VPO** | VPO completion "
        "| VPO diversity (completed) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(reps, key=lambda r: r["results"]["vpo/best_at_k/30"]):
        x = r["results"]
        lines.append(
            f"| {r['seed']} | {r['test_seed']} | {x['warmstart_m1/best_at_k/30']:.3f} | {x['grpo_3x/best_at_k/30']:.3f} "
            f"| {x['max_at_k/best_at_k/30']:.3f} | {x['multi_rlvr/best_at_k/30']:.3f} | **{x['vpo/best_at_k/30']:.3f}** "
            f"| {x['vpo/completion_rate']:.3f} | {x['vpo/completed_diversity']:.3f} |"
        )
    lines += [
        "",
        "## The claims from all replicates",
        "",
        "Paired by replicate. The 95 % interval of the mean and the range where the mean of a user's own "
        f"{USER_REPLICATES} replicates should land (PI) use multipliers calibrated by simulation to hold 95 % both "
        "when replicates are drawn from the measured ones (bootstrap) and from a heavier-tailed t(3) population "
        "(never below Student t's); the coverage columns are checked on fresh draws, with plain t's in brackets.",
        "",
        "| claim | mean [95 %] | ahead | SD (min, max) | PI: your 10 replicates | CI covers: boot / t3 "
        "| PI holds: boot / t3 |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in result["claims"].values():
        v = c["calibration"]["coverage"]
        lines.append(
            f"| {c['label']} | {c['mean']:+.3f} [{c['ci_low']:+.3f}, {c['ci_high']:+.3f}] | {c['above0']} of {c['n']} "
            f"| {c['sd']:.3f} ({c['min']:+.3f}, {c['max']:+.3f}) | [{c['pi_low']:+.3f}, {c['pi_high']:+.3f}] "
            f"| {v['ci_boot']:.3f} ({v['ci_boot_plain_t']:.3f}) / {v['ci_t3']:.3f} ({v['ci_t3_plain_t']:.3f}) "
            f"| {v['pi_boot']:.3f} ({v['pi_boot_plain_t']:.3f}) / {v['pi_t3']:.3f} ({v['pi_t3_plain_t']:.3f}) |"
        )
    ca = result["curve_analysis"]
    lines += [
        "",
        f"## VPO's training, replicate by replicate ({ca['n']} runs with training logs)",
        "",
        "Each VPO run trained on this machine, with its own evaluation (test or validation split), sorted by "
        "best@30 minus its split's mean. Training figures are means over the first or last 10 of 60 steps.",
        "",
        "| seed | split | best@30 (− split mean) | completion | diversity (completed) | warm start best@30 "
        "| train completion first10 → last10 | diversity last10 | entropy last10 | flat groups | KL last10 |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    centre = ca.get("centre", {})
    for c in sorted(result["curves"], key=lambda c: c["vpo_best30"] - centre.get(c["split"], 0.0)):
        t = c["training"]
        lines.append(
            f"| {c['seed']} | {c['split']} | {c['vpo_best30']:.3f} ({c['vpo_best30'] - centre.get(c['split'], 0.0):+.3f}) "
            f"| {c['vpo_completion']:.3f} | {c['vpo_cdiv']:.3f} | {c['warm_best30']:.3f} "
            f"| {t['completion first10']:.3f} → {t['completion last10']:.3f} | {t['diversity last10']:.3f} "
            f"| {t['entropy last10']:.3f} | {t['flat groups (mean)']:.3f} | {t['KL last10']:.3f} |"
        )
    lines += [
        "",
        f"Spearman ρ between that centred best@30 and each figure (p unadjusted for the {len(ca['spearman'])} "
        "comparisons), and the weakest quarter beside the others:",
        "",
        "| figure | ρ | p | weakest quarter | the others |",
        "|---|---|---|---|---|",
    ]
    for name, v in ca["spearman"].items():
        w = ca["weak"].get("warm_best30" if name == "warm start best@30" else name)
        cells = f"{w['weak']:.3f} | {w['others']:.3f}" if w else "– | –"
        lines.append(f"| {name} | {v['rho']:+.2f} | {v['p']:.3f} | {cells} |")
    for key, label in (("vpo_completion", "completion (eval)"), ("vpo_cdiv", "diversity, completed (eval)")):
        w = ca["weak"].get(key)
        if w:
            lines.append(f"| {label} | | | {w['weak']:.3f} | {w['others']:.3f} |")
    lines += ["", "![curves](curves.png)", ""]
    return "\n".join(lines)


README_BEGIN = (
    "<!-- replicates-table: generated by scripts/maze_replicates.py from docs/demo/replicates/replicates.json -->"
)
README_END = "<!-- /replicates-table -->"


def readme_table(result: dict) -> str:
    """The README's table of the claims from every replicate (checked against replicates.json by
    tests/test_readme_numbers.py)."""
    n = len(result["replicates"])
    splits = len({r["test_seed"] for r in result["replicates"]})
    lines = [
        README_BEGIN,
        "",
        f"VPO minus each method over all {n} replicates ({splits} test splits): mean [95 % interval, coverage "
        f"checked by simulation], replicates where VPO is ahead, one replicate's spread, and where the mean of "
        f"your own {USER_REPLICATES} replicates should land (95 %)",
        "",
        "| claim | mean [95 %] | ahead | SD (min, max) | your 10 replicates |",
        "|---|---|---|---|---|",
    ]
    for c in result["claims"].values():
        lines.append(
            f"| {c['label']} | {c['mean']:+.3f} [{c['ci_low']:+.3f}, {c['ci_high']:+.3f}] | {c['above0']} of {c['n']} "
            f"| {c['sd']:.3f} ({c['min']:+.3f}, {c['max']:+.3f}) | [{c['pi_low']:+.3f}, {c['pi_high']:+.3f}] |"
        )
    lines += ["", README_END]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", action="append", required=True, help="a test-split demo run folder (demo.json)")
    p.add_argument("--curves", action="append", default=[], help="a demo run folder with VPO's trainer logs")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    reps = load_runs(args.run)
    curves = load_curve_runs(args.curves)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result = {
        "command": "python scripts/maze_replicates.py "
        + " ".join([f"--run {d}" for d in args.run] + [f"--curves {d}" for d in args.curves] + [f"--out {args.out}"]),
        "replicates": reps,
        "claims": claims(reps),
        "curves": curves,
        "curve_analysis": curve_analysis(curves),
    }
    (out / "replicates.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "replicates.md").write_text(markdown(result))
    plot(curves, out / "curves.png")
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
