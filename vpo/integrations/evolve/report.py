"""Several models on the same problems, side by side: the comparison report and its plot.

:func:`run_comparison` runs :func:`~vpo.integrations.evolve.run.evolve_problem` for every (model,
problem) pair with the same settings and seed, then puts each model's runs on a common budget grid:
problems solved, mean best ``w*^T r`` and mean Pareto-archive coverage after x budget units (step
functions, x = 0..budget). :func:`plot_report` draws the curves, one line per model. Endpoints are checked before any run so
that a server that is down fails the comparison at once.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from vpo.integrations.evolve.clients import check_endpoint
from vpo.integrations.evolve.config import (
    EvolveError,
    EvolveModel,
    EvolveProblem,
    EvolveSettings,
)
from vpo.integrations.evolve.run import evolve_problem


def _curve_on_grid(curve: list, budget: int) -> tuple[list[float], list[bool]]:
    """Best score and solved flag after x budget units, x = 0..budget (step function)."""
    best, solved = [], []
    i, cur_b, cur_s = 0, float("nan"), False
    pts = sorted(curve, key=lambda r: r[0])
    for x in range(budget + 1):
        while i < len(pts) and pts[i][0] <= x:
            cur_b, cur_s = pts[i][1], pts[i][2]
            i += 1
        best.append(cur_b)
        solved.append(cur_s)
    return best, solved


def _archive_on_grid(curve: list, budget: int) -> tuple[list[float], list[int]]:
    """Archive coverage and size after x budget units, x = 0..budget (step function)."""
    cov, size = [], []
    i, cur_c, cur_n = 0, float("nan"), 0
    pts = sorted(curve, key=lambda r: r[0])
    for x in range(budget + 1):
        while i < len(pts) and pts[i][0] <= x:
            cur_c, cur_n = pts[i][1], pts[i][2]
            i += 1
        cov.append(cur_c)
        size.append(cur_n)
    return cov, size


def _check_names(problems: Sequence[EvolveProblem], models: Sequence[EvolveModel]) -> None:
    if not problems or not models:
        raise EvolveError("nothing to run: give at least one problem and one model")
    for what, names in (("model", [m.name for m in models]), ("problem", [p.name for p in problems])):
        if len(set(names)) != len(names):
            raise EvolveError(f"{what} names must be unique, got {names}")


def _model_report(model: EvolveModel, runs: Mapping[str, dict], budget: int) -> dict:
    """One model's totals and curves over its runs (one per problem)."""
    grids = [_curve_on_grid(r["curve"], budget) for r in runs.values()]
    grid_best = [b for b, _ in grids]
    grid_solved = [s for _, s in grids]
    xs = list(range(budget + 1))
    arch = [_archive_on_grid(r.get("curve_archive", []), budget) for r in runs.values()]
    return {
        "answers_per_call": model.num_answers,
        "problems_solved": sum(1 for r in runs.values() if r["solved"]),
        "mean_best_score": float(sum(r["best_score"] for r in runs.values()) / len(runs)),
        "llm_calls": sum(r["llm_calls"] for r in runs.values()),
        "candidates": sum(r["candidates"] for r in runs.values()),
        "curve_x": xs,
        "curve_solved": [sum(1 for s in grid_solved if s[x]) for x in xs],
        "curve_mean_best": [float(sum(b[x] for b in grid_best) / len(grid_best)) for x in xs],
        "mean_coverage": float(sum(r.get("coverage", 0.0) for r in runs.values()) / len(runs)),
        "mean_archive_size": float(sum(len(r.get("pareto_archive", [])) for r in runs.values()) / len(runs)),
        "curve_mean_coverage": [float(sum(c[x] for c, _ in arch) / len(arch)) for x in xs],
        "curve_mean_archive_size": [float(sum(n[x] for _, n in arch) / len(arch)) for x in xs],
        "runs": dict(runs),
    }


def run_comparison(
    problems: Sequence[EvolveProblem],
    models: Sequence[EvolveModel],
    settings: EvolveSettings,
    out_dir: str | os.PathLike,
    *,
    resume: bool = False,
    progress: bool = True,
) -> dict:
    """Evolve every problem with every model (same settings, same seed); writes ``report.json`` and
    ``evolve_progress.png`` to ``out_dir`` and returns the report.

    The report has, per model: ``problems_solved``, ``mean_best_score`` (mean over problems of the
    best ``w*^T r`` found), ``mean_coverage`` and ``mean_archive_size`` (the Pareto archive), per-problem
    summaries (with the selection mode, island weightings and archive), and curves over the budget.
    """
    _check_names(problems, models)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for m in models:  # fail fast, before any work, on an unreachable endpoint
        if m.api_base is not None:
            check_endpoint(m)
    report: dict[str, Any] = {"settings": asdict(settings), "models": {}, "problems": [p.name for p in problems]}
    for m in models:
        runs = {
            p.name: evolve_problem(p, m, settings, out / m.name / p.name, resume=resume, progress=progress)
            for p in problems
        }
        report["models"][m.name] = _model_report(m, runs, settings.budget)
    (out / "report.json").write_text(json.dumps(report, indent=2, default=str))
    plot_report(report, out / "evolve_progress.png")
    return report


def plot_report(report: Mapping, path: str | os.PathLike) -> Path:
    """Two panels over the budget, one line per model: problems solved, mean best ``w*^T r``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    unit = report["settings"]["budget_unit"]
    n_prob = len(report["problems"])
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(15, 4.2))
    for name, r in report["models"].items():
        label = f"{name} (m={r['answers_per_call']})"
        ax1.step(r["curve_x"], r["curve_solved"], where="post", label=label, linewidth=2)
        ax2.step(r["curve_x"], r["curve_mean_best"], where="post", label=label, linewidth=2)
        if "curve_mean_coverage" in r:
            ax3.step(r["curve_x"], r["curve_mean_coverage"], where="post", label=label, linewidth=2)
    xlabel = "answer budget used (programs written)" if unit == "candidates" else "LLM calls (OpenEvolve iterations)"
    ax1.set(xlabel=xlabel, ylabel=f"problems solved (of {n_prob})", title="Problems solved (all tests pass)")
    ax1.set_ylim(-0.05 * max(1, n_prob), n_prob * 1.05 + 0.05)
    ax1.yaxis.get_major_locator().set_params(integer=True)
    ax2.set(xlabel=xlabel, ylabel="mean best score  w*ᵀr", title="Best score so far (mean over problems)")
    ax2.set_ylim(-0.02, 1.02)
    ax3.set(xlabel=xlabel, ylabel="mean archive coverage", title="Per-component best reached (Pareto archive)")
    ax3.set_ylim(-0.02, 1.02)
    for ax in (ax1, ax2, ax3):
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize=9)
    fig.suptitle(f"OpenEvolve search, {n_prob} problem(s), budget {report['settings']['budget']} {unit}")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
