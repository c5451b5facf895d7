"""PNG plots of search metrics (matplotlib's object API with the Agg canvas: no pyplot, no global
backend change, safe in scripts and notebooks alike).

* :func:`plot_best_at_k`: best@k on w* vs k (answers), one line per method, bootstrap CI band;
  log-scaled x when the ks span a factor of 8 or more.
* :func:`plot_diversity`: reward-space diversity per method (bars, CI whiskers), with the text
  (embedding) diversity beside it when it was computed.
* :func:`plot_summary`: one figure for side-by-side comparison: best@k, pass@k, diversity and
  pass@1, one panel each.

Input: ``results = {method: evaluate_pool(...) output}``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

__all__ = [
    "COLORS",
    "draw_bars",
    "draw_curve",
    "new_figure",
    "plot_best_at_k",
    "plot_diversity",
    "plot_pareto",
    "plot_summary",
]

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]


def new_figure(w: float, h: float, ncols: int = 1):
    """``(fig, axes)``: an Agg-backed figure, no pyplot state."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    return fig, axes


def _nan(x):
    return float("nan") if x is None else float(x)


def _curve(
    ax, results: Mapping[str, dict], metric: str, ylabel: str, title: str, reference: tuple[float, str] | None = None
) -> None:
    all_ks = sorted({k for r in results.values() for k in r["metrics"][metric]["k"]})
    for i, (name, r) in enumerate(results.items()):
        e = r["metrics"][metric]
        c = COLORS[i % len(COLORS)]
        ks = e["k"]
        mean = [_nan(x) for x in e["mean"]]
        label = name if "(m=" in name else f"{name} (m={r['shape']['m']})"
        style = r.get("style", {})
        ax.plot(
            ks,
            mean,
            marker=style.get("marker", "o"),
            ms=style.get("ms", 4),
            color=style.get("color", c),
            lw=style.get("lw", 1.5),
            ls=style.get("ls", "-"),
            label=label,
        )
        lo, hi = e.get("ci_low"), e.get("ci_high")
        if lo and hi and all(v is not None for v in lo + hi):
            ax.fill_between(ks, lo, hi, color=style.get("color", c), alpha=0.15, linewidth=0)
    if reference is not None:
        ax.axhline(reference[0], color="k", ls=":", lw=1.2, label=reference[1])
    vals = [float(v) for r in results.values() for v in r["metrics"][metric]["mean"] if v is not None]
    if vals and min(vals) >= 0 and max(vals) - min(vals) < 1e-9:  # flat (e.g. all zero): show the [0, 1] scale
        ax.set_ylim(-0.02, max(1.02, max(vals) + 0.05))
    if all_ks and all_ks[-1] >= 8 * all_ks[0]:
        ax.set_xscale("log")
    ax.set_xticks(all_ks)
    ax.set_xticklabels([str(k) for k in all_ks])
    ax.minorticks_off()
    ax.set_xlabel("k (answers, matched budget)")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")


def _bars(ax, results: Mapping[str, dict], metric: str, ylabel: str, title: str) -> None:
    names = list(results)
    for i, name in enumerate(names):
        e = results[name]["metrics"].get(metric)
        if not e:
            continue
        mean = _nan(e["mean"])
        lo, hi = _nan(e.get("ci_low")), _nan(e.get("ci_high"))
        err = None
        if lo == lo and hi == hi and mean == mean:
            err = [[max(mean - lo, 0.0)], [max(hi - mean, 0.0)]]
        color = results[name].get("style", {}).get("color", COLORS[i % len(COLORS)])
        ax.bar(i, 0.0 if mean != mean else mean, color=color, yerr=err, capsize=4, width=0.65)
        top = 0.0 if mean != mean else (max(mean, hi) if hi == hi else mean)
        ax.annotate(
            "n/a" if mean != mean else f"{mean:.3g}",
            (i, top),
            textcoords="offset points",
            xytext=(0, 3),
            ha="center",
            fontsize=8,
        )
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(
        names, rotation=20 if len(names) > 3 else 0, ha="right" if len(names) > 3 else "center", fontsize=8
    )
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.margins(y=0.12)
    means = [_nan(results[n]["metrics"][metric]["mean"]) for n in names if results[n]["metrics"].get(metric)]
    finite = [x for x in means if x == x]
    if not finite or min(finite) >= 0:  # rates and distances: start at 0, never show a negative axis
        highs = [_nan(results[n]["metrics"][metric].get("ci_high")) for n in names if results[n]["metrics"].get(metric)]
        top = max([0.0] + finite + [h for h in highs if h == h])
        ax.set_ylim(0.0, top * 1.15 if top > 0 else 1.0)


draw_curve = _curve
"""``draw_curve(ax, results, metric, ylabel, title, reference=None)``: one line per method with its
interval band (``ci_low``/``ci_high``), an optional horizontal reference line ``(y, label)``, and a
per-method ``results[name]["style"]`` (color, marker, ms, lw, ls) when given."""
draw_bars = _bars
"""``draw_bars(ax, results, metric, ylabel, title)``: one bar per method with interval whiskers."""


def _suptitle(fig, title: str | None, results: Mapping[str, dict]) -> None:
    first = next(iter(results.values()))
    task = (first.get("pool") or {}).get("task")
    level = int(round(100 * first["config"]["ci_level"]))
    sub = f"{first['shape']['num_prompts']} prompts, {level}% bootstrap CI over prompts"
    head = title or (f"Test-time search on {task}" if task else "Test-time search")
    fig.suptitle(f"{head}\n{sub}", fontsize=10)


def plot_best_at_k(results: Mapping[str, dict], path, title: str | None = None) -> Path:
    """best@k on w* vs k per method with CI bands -> ``path`` (PNG)."""
    fig, (ax,) = new_figure(6.0, 4.2)
    _curve(ax, results, "best_at_k", "best@k on w*", "best@k (higher is better)")
    _suptitle(fig, title, results)
    fig.savefig(path)
    return Path(path)


def plot_pareto(results: Mapping[str, dict], path, title: str | None = None) -> Path:
    """Per method: the Pareto front size of its pools (distinct non-dominated reward vectors) beside
    E_w[best@k] over k: how many trade-offs the pool offers, and what search reaches when the
    preference is not known in advance -> ``path`` (PNG)."""
    fig, axes = new_figure(10.0 + 0.4 * len(results), 4.2, 2)
    _bars(axes[0], results, "pareto_front_size", "distinct non-dominated vectors per prompt", "Pareto front size")
    _curve(axes[1], results, "ew_best_at_k", "E_w[best@k]", "E_w[best@k] (fixed Dir weightings)")
    _suptitle(fig, title, results)
    fig.savefig(path)
    return Path(path)


def plot_diversity(results: Mapping[str, dict], path, title: str | None = None) -> Path:
    """Reward-space diversity per method (and text diversity when computed) -> ``path`` (PNG)."""
    has_embed = any("embedding_diversity" in r["metrics"] for r in results.values())
    d = next(iter(results.values()))["shape"]["d"]
    fig, axes = new_figure(5.0 + 0.4 * len(results) + (4.0 if has_embed else 0.0), 4.0, 2 if has_embed else 1)
    _bars(axes[0], results, "diversity", f"mean pairwise L1 of reward vectors (0..{d})", "reward-space diversity")
    if has_embed:
        _bars(axes[1], results, "embedding_diversity", "mean pairwise 1 - cosine", "answer-text diversity (MiniLM)")
    _suptitle(fig, title, results)
    fig.savefig(path)
    return Path(path)


def plot_summary(results: Mapping[str, dict], path, title: str | None = None) -> Path:
    """One comparison figure: best@k, diversity, and pass@k with pass@1 where some answer passes;
    for rewards no answer passes (continuous ones), E_w[best@k] and the Pareto front size instead
    of panels of zeros -> ``path`` (PNG)."""
    d = next(iter(results.values()))["shape"]["d"]
    passes = any(any((x or 0) > 0 for x in r["metrics"]["pass_at_k"]["mean"]) for r in results.values())
    fig, axes = new_figure(17.0, 4.4, 4)
    _curve(axes[0], results, "best_at_k", "best@k on w*", "best@k on w* (matched budget)")
    if passes:
        _curve(axes[1], results, "pass_at_k", "pass@k", "pass@k (all components pass)")
    else:
        _curve(axes[1], results, "ew_best_at_k", "E_w[best@k]", "E_w[best@k] (fixed Dir weightings)")
    _bars(axes[2], results, "diversity", f"mean pairwise L1 (0..{d})", "reward-space diversity")
    if passes:
        _bars(axes[3], results, "pass_at_1", "pass@1 (first answer)", "pass@1")
    else:
        _bars(axes[3], results, "pareto_front_size", "distinct non-dominated vectors", "Pareto front size")
    _suptitle(fig, title, results)
    fig.savefig(path)
    return Path(path)
