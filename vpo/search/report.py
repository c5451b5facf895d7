"""Reports of test-time search metrics: one JSON file with every number, a markdown table, plots.

``results`` is ``{method name: evaluate_pool(...) output}``; one entry for ``vpo eval``, several
for ``vpo compare``. :func:`write_report` writes, into ``out_dir``:

* ``report.json``  ``{"title", "methods", "results"}``: every number, per-prompt values included;
* ``report.md``    markdown tables: best@k on w* at the matched answer budget (mean and bootstrap
  CI), pool quality (pass@1, reward@1, diversity, collinearity, Pareto front, E_w best, compute),
  pass@k, E_w[best@k], the two answer-level best@k estimators, and (when a result has them) the
  reference implementation's pool statistics (``result["pool_stats"]``, :mod:`vpo.search.poolstats`);
* ``best_at_k.png``, ``diversity.png`` and ``summary.png`` (see :mod:`vpo.search.plots`).

Simplification: methods evaluated at different ks share one table; a k a method lacks shows "–".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping

import numpy as np

from vpo._util import fmt_interval, fmt_number
from vpo.errors import UserError

__all__ = ["write_report", "markdown_report", "load_report", "ReportError"]


class ReportError(UserError, ValueError):
    """Results that cannot be reported together (e.g. different objectives)."""


def _check(results: Mapping[str, dict]) -> None:
    if not results:
        raise ReportError("nothing to report: no results were given")
    objs = {name: tuple(r.get("objectives") or ()) for name, r in results.items()}
    dims = {name: r["shape"]["d"] for name, r in results.items()}
    first = next(iter(results))
    for name in results:
        if dims[name] != dims[first] or (objs[name] and objs[first] and objs[name] != objs[first]):
            raise ReportError(
                f"cannot compare {first!r} (d={dims[first]}: {', '.join(objs[first])}) with {name!r} "
                f"(d={dims[name]}: {', '.join(objs[name])}): their reward vectors have different objectives"
            )


def _ci(entry: dict, i: int | None = None, digits: int = 3) -> str:
    if i is None:
        return fmt_interval(entry.get("mean"), entry.get("ci_low"), entry.get("ci_high"), digits)
    return fmt_interval(entry["mean"][i], entry["ci_low"][i], entry["ci_high"][i], digits)


def _curve_table(results: Mapping[str, dict], metric: str, all_ks: list[int]) -> list[str]:
    head = "| method | m | " + " | ".join(f"k={k}" for k in all_ks) + " |"
    rows = [head, "|" + "---|" * (len(all_ks) + 2)]
    for name, r in results.items():
        e = r["metrics"][metric]
        pos = {k: i for i, k in enumerate(e["k"])}
        cells = [_ci(e, pos[k]) if k in pos else "–" for k in all_ks]
        rows.append(f"| {name} | {r['shape']['m']} | " + " | ".join(cells) + " |")
    return rows


def markdown_report(
    results: Mapping[str, dict],
    title: str | None = None,
    *,
    paired=None,
    warnings: list[str] | None = None,
    replicated=None,
) -> str:
    """The markdown text of ``report.md``. ``paired`` / ``warnings``: the paired differences and the
    budget warnings (:mod:`vpo.search.paired`) when the caller has them already; computed otherwise."""
    _check(results)
    first = next(iter(results.values()))
    all_ks = sorted({k for r in results.values() for k in r["metrics"]["best_at_k"]["k"]})
    cfg = first["config"]
    level = int(round(100 * cfg["ci_level"]))
    objectives = first.get("objectives") or [f"obj{i}" for i in range(first["shape"]["d"])]
    w = ", ".join(f"{o} {x:.3g}" for o, x in zip(objectives, first["target_weights"]))
    task = (first.get("pool") or {}).get("task", "?")
    lines = [f"# {title or 'Test-time search evaluation'}", ""]
    lines.append(f"Task `{task}`, d = {first['shape']['d']} objectives; w* = ({w}).")
    lines.append(
        f"Intervals: {level}% percentile bootstrap over prompts ({cfg['bootstrap']} resamples). best@k: "
        f"matched answer budget (ceil(k/m) rollouts drawn, first k answer slots kept; empty slots score "
        f"{cfg['invalid_score']:g}), averaged over {len(cfg['seeds'])} eval seeds."
    )
    lines.append("")
    lines += [f"**Warning**: {n}: {w}." for n, r in results.items() for w in r.get("warnings") or []]
    lines += [""] if any(r.get("warnings") for r in results.values()) else []
    lines.append("| method | model | prompts | rollouts/prompt | m | answer slots/prompt |")
    lines.append("|---|---|---|---|---|---|")
    for name, r in results.items():
        s, pool = r["shape"], r.get("pool") or {}
        lines.append(
            f"| {name} | {pool.get('model', '–')} | {s['num_prompts']} | {s['min_rollouts_per_prompt']}"
            f"{'' if s['min_rollouts_per_prompt'] == s['max_rollouts_per_prompt'] else '-' + str(s['max_rollouts_per_prompt'])}"
            f" | {s['m']} | {s['min_rollouts_per_prompt'] * s['m']} |"
        )
    from vpo.search.paired import budget_warnings, paired_differences

    budget = budget_warnings(results) if warnings is None else warnings
    # a blank line first: a line right after a table renders as one more row of it
    lines += ([""] + [f"**Warning**: {w}." for w in budget]) if budget else []
    lines += ["", "## best@k on w* (matched answer budget)", ""]
    lines += _curve_table(results, "best_at_k", all_ks)
    lines += _paired_table(results, paired_differences(results) if paired is None else paired)
    lines += _paired_table(results, replicated, replicates=True)
    lines += ["", "## Pool quality and compute", ""]
    cols = [
        ("pass@1", "pass_at_1"),
        ("reward@1", "reward_at_1"),
        ("diversity (L1, 0..d)", "diversity"),
        ("collinearity ρ̄", "collinearity"),
        ("Pareto front", "pareto_front_size"),
        ("E_w best (pool)", "ew_best_pool"),
        ("valid answers", "valid_answer_frac"),
        ("tokens/rollout", "tokens_per_rollout"),
        ("tokens/answer", "tokens_per_answer"),
    ]
    has_embed = any("embedding_diversity" in r["metrics"] for r in results.values())
    if has_embed:
        cols.insert(3, ("text diversity (1-cos)", "embedding_diversity"))
    lines.append("| method | " + " | ".join(c for c, _ in cols) + " |")
    lines.append("|" + "---|" * (len(cols) + 1))
    for name, r in results.items():
        M = r["metrics"]
        cells = []
        for _, key in cols:
            if key not in M:
                cells.append("–")
            elif key.startswith("tokens"):
                cells.append(fmt_number(M[key]["mean"], 1))
            else:
                cells.append(_ci(M[key], digits=3))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(
        "ρ̄ pooled over all prompts: "
        + ", ".join(f"{name} {fmt_number(r['metrics'].get('collinearity_pooled'))}" for name, r in results.items())
        + "."
    )
    sections = [
        (
            f"pass@k (unbiased Codex estimator over answer slots; pass = every component >= {cfg['pass_threshold']:g})",
            "pass_at_k",
        ),
        (
            f"E_w[best@k] (matched budget, {cfg['num_weightings']} fixed Dir({cfg['weight_alpha']:g}) weightings)",
            "ew_best_at_k",
        ),
        ("best@k exact expectation of the matched-budget draw (no seed noise)", "best_at_k_exact"),
        ("best@k unbiased over answer slots (k drawn without replacement from the pool)", "best_at_k_unbiased"),
    ]
    for head, key in sections:
        lines += ["", f"## {head}", ""]
        lines += _curve_table(results, key, all_ks)
    from vpo.search.constraints import markdown_section

    lines += markdown_section(results, all_ks)
    lines += _pool_stats_tables(results)
    lines += _failure_table(results)
    lines += _selection_table(results, all_ks)
    lines += _set_objective_table(results)
    lines += [
        "",
        "Definitions: docs/eval.md. Objective means over valid answers: "
        + "; ".join(
            f"{name}: "
            + ", ".join(f"{o} {fmt_number(x, 2)}" for o, x in zip(objectives, r["metrics"]["objective_means"]))
            for name, r in results.items()
        )
        + ".",
        "",
    ]
    return "\n".join(lines)


_POOL_STAT_COLUMNS = [
    ("union coverage Σ_j max_i r_ij", "union_coverage"),
    ("best individual (w*)", "best_individual"),
    ("best individual (Σ_j)", "best_individual_sum"),
    ("witnesses", "witness_count"),
    ("witness fraction", "witness_fraction"),
    ("witness NDCG", "witness_ndcg"),
    ("subset winner share", "subset_winner_share"),
    ("Pareto fraction", "pareto_fraction"),
]


def _paired_table(results: Mapping[str, dict], pd: dict | None, replicates: bool = False) -> list[str]:
    """The "Is it better?" section: the first method minus each other one, paired by prompt
    (:mod:`vpo.search.paired`), or with ``replicates`` by replicate and prompt
    (:func:`~vpo.search.paired.paired_replicates`); ``*`` marks an interval that excludes 0."""
    if pd is None:
        return []
    level = int(round(100 * next(iter(results.values()))["config"]["ci_level"]))

    def cell(x, j=None):
        m, lo, hi = (x[k] if j is None else x[k][j] for k in ("mean", "ci_low", "ci_high"))
        if m is None or lo is None or hi is None or not all(np.isfinite([m, lo, hi])):
            return "–"
        star = " *" if lo > 0 or hi < 0 else ""
        return f"{m:+.3f} [{lo:+.3f}, {hi:+.3f}]{star}"

    first = next(iter(pd["vs"].values()))
    ks = first["best_at_k"]["k"] if "best_at_k" in first else []
    if replicates:
        head = [
            f"## Is it better across replicates? {pd['baseline']} minus each method, {pd['num_replicates']} replicates",
            "",
            "Replicate i paired with replicate i and each prompt with itself, over the prompts every run evaluated "
            f"[{level}% t interval over replicates and prompts: the replicates' spread included]; * : the interval "
            "excludes 0.",
        ]
    else:
        head = [
            f"## Is it better? {pd['baseline']} minus each method, paired by prompt",
            "",
            f"Mean over the prompts both evaluated of the per-prompt difference [{level}% bootstrap over those prompts, "
            "given these trained models]; * : the interval excludes 0.",
        ]
    lines = [
        "",
        *head,
        "",
        "| vs | prompts | " + " | ".join(f"Δbest@{k}" for k in ks) + " | ΔE_w[best@k max] | Δdiversity |",
        "|" + "---|" * (len(ks) + 4),
    ]
    for other, e in pd["vs"].items():
        bk = e.get("best_at_k")
        cells = [cell(bk, j) if bk and k in bk["k"] else "–" for j, k in enumerate(ks)]
        ew = e.get("ew_best_at_k")
        cells.append(cell(ew, len(ew["k"]) - 1) if ew and ew["k"] else "–")
        cells.append(cell(e["diversity"]) if "diversity" in e else "–")
        lines.append(f"| {other} | {e['num_prompts']} | " + " | ".join(cells) + " |")
    return lines


def _selection_table(results: Mapping[str, dict], ks) -> list[str]:
    """The "Selection by an imperfect verifier" section (``result["selection"]``, :mod:`vpo.search.selection`)."""
    if not any(r.get("selection") for r in results.values()):
        return []
    lines = [
        "",
        "## Selection by an imperfect verifier (true w*ᵀr of the kept answer / hit rate)",
        "",
        "best@k's draws, but the answer kept is the selector's first choice among the k; the hit rate is how "
        "often it is a true best of them (docs/eval.md).",
        "",
        "| method | selector | " + " | ".join(f"k={k}" for k in ks) + " |",
        "|" + "---|" * (len(ks) + 2),
    ]
    for name, r in results.items():
        for sel in r.get("selection") or []:
            cells = []
            for k in ks:
                if k in sel["k"]:
                    j = sel["k"].index(k)
                    cells.append(
                        f"{fmt_number(sel['selected_best_at_k']['mean'][j])} / {fmt_number(sel['hit_rate']['mean'][j])}"
                    )
                else:
                    cells.append("–")
            lines.append(f"| {name} | `{sel['selector']}` | " + " | ".join(cells) + " |")
    return lines


def _failure_table(results: Mapping[str, dict]) -> list[str]:
    """The "Where answers were lost" section (``result["failures"]``, :mod:`vpo.search.failures`)."""
    from vpo.search.failures import FAILURE_TYPES, FAILURE_WORDS as words

    if not any(r.get("failures") for r in results.values()):
        return []
    lines = [
        "",
        "## Where answers were lost (share of answer slots; count)",
        "",
        "Each slot is valid or lost for exactly one reason (docs/eval.md); truncated rollouts used the whole "
        "generation budget and overlap the other columns.",
        "",
        "| method | " + " | ".join(words[k] for k in FAILURE_TYPES) + " | truncated rollouts |",
        "|" + "---|" * (len(FAILURE_TYPES) + 2),
    ]
    for name, r in results.items():
        f = r.get("failures")
        if not f:
            lines.append(f"| {name} | " + " | ".join("–" for _ in range(len(FAILURE_TYPES) + 1)) + " |")
            continue
        cells = [f"{f['shares'][k]:.3f} ({f['counts'][k]})" for k in FAILURE_TYPES]
        t = f.get("truncated_rollouts")
        cells.append("–" if t is None else f"{f['truncated_share']:.3f} ({t})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def _set_objective_table(results: Mapping[str, dict]) -> list[str]:
    """The "Set objectives" section (``result["set_objectives"]``, :mod:`vpo.search.set_scores`)."""
    have = [r["set_objectives"] for r in results.values() if r.get("set_objectives")]
    if not have:
        return []
    names = sorted({n for h in have for n in h["scores"]})
    cfg = have[0]["config"]
    lines = [
        "",
        "## Set objectives (each rollout's answer set, before group normalisation)",
        "",
        f"Mean over prompts of the mean over their rollouts [{cfg['ci_level']:.0%} bootstrap over prompts]; weightings: "
        f"{cfg['num_weightings']} fixed Dir({cfg['weight_alpha']:g}) draws; a rollout without a valid answer scores "
        f"{cfg['invalid_score']:g}.",
        "",
        "| method | " + " | ".join(names) + " |",
        "|" + "---|" * (len(names) + 1),
    ]
    for method, r in results.items():
        sc = (r.get("set_objectives") or {}).get("scores", {})
        lines.append(f"| {method} | " + " | ".join(_ci(sc[n]) if n in sc else "–" for n in names) + " |")
    return lines


def _pool_stats_tables(results: Mapping[str, dict]) -> list[str]:
    """The section of the reference's pool statistics (results without ``pool_stats`` show "–")."""
    have = [r["pool_stats"] for r in results.values() if r.get("pool_stats")]
    if not have:
        return []
    conventions = sorted({ps["config"]["convention"] for ps in have})
    what = {
        "valid": "over each prompt's valid answers",
        "reference": "over every answer slot, an invalid one as the zero vector (the reference's padding)",
    }
    lines = ["", "## Pool statistics (the reference implementation's definitions)", ""]
    lines.append(
        "Per prompt, "
        + "; ".join(f"{c}: {what.get(c, c)}" for c in conventions)
        + f"; then averaged over the prompts where defined. Random subsets: {have[0]['config']['num_draws']} draws, "
        f"seed {have[0]['config']['draw_seed']}."
    )
    lines.append("")
    lines.append("| method | " + " | ".join(c for c, _ in _POOL_STAT_COLUMNS) + " |")
    lines.append("|" + "---|" * (len(_POOL_STAT_COLUMNS) + 1))
    for name, r in results.items():
        M = (r.get("pool_stats") or {}).get("metrics", {})
        lines.append(f"| {name} | " + " | ".join(_ci(M[k]) if k in M else "–" for _, k in _POOL_STAT_COLUMNS) + " |")
    ks = sorted({k for ps in have for k in ps["metrics"]["pass_at_k_answer"]["k"]})
    if ks:
        lines += [
            "",
            "pass@k per answer (k answers) and per rollout (k rollouts; one passes when any of its answers does):",
            "",
        ]
        lines.append(
            "| method | "
            + " | ".join(f"answer k={k}" for k in ks)
            + " | "
            + " | ".join(f"rollout k={k}" for k in ks)
            + " |"
        )
        lines.append("|" + "---|" * (2 * len(ks) + 1))
        for name, r in results.items():
            M = (r.get("pool_stats") or {}).get("metrics", {})
            cells = []
            for key in ("pass_at_k_answer", "pass_at_k_rollout"):
                e = M.get(key)
                pos = {k: i for i, k in enumerate(e["k"])} if e else {}
                cells += [_ci(e, pos[k]) if k in pos else "–" for k in ks]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def write_report(
    results: Mapping[str, dict],
    out_dir,
    *,
    title: str | None = None,
    plots: bool = True,
    replicate_groups: Mapping[str, list[str]] | None = None,
) -> dict[str, Path]:
    """Write ``report.json``, ``report.md`` and (``plots=True``) the PNGs into ``out_dir``.

    ``results``: ``{method name: evaluate_pool(...) output}``. Returns ``{kind: path}``.
    """
    if isinstance(results, dict) and "metrics" in results and "shape" in results:
        raise ReportError("write_report takes {name: result}; wrap a single result as {'model': result}")
    _check(results)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    from vpo.search.metrics import jsonable
    from vpo.search.paired import budget_warnings, paired_differences

    doc = {"title": title, "methods": list(results), "results": dict(results)}
    pd = paired_differences(results)  # once: report.json and report.md both show them
    warnings = budget_warnings(results)
    rep = None
    if replicate_groups:
        from vpo.search.paired import paired_replicates

        rep = paired_replicates(results, replicate_groups)
        doc["replicates"] = {k: list(v) for k, v in replicate_groups.items()}
        if rep is not None:
            doc["paired_replicates"] = jsonable(rep)
    if pd is not None:
        doc["paired"] = jsonable(pd)
    if warnings:
        doc["warnings"] = warnings
    p = out / "report.json"
    p.write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    paths["json"] = p
    p = out / "report.md"
    p.write_text(markdown_report(results, title, paired=pd, warnings=warnings, replicated=rep), encoding="utf-8")
    paths["markdown"] = p
    if plots:
        from vpo.search.plots import plot_best_at_k, plot_diversity, plot_pareto, plot_summary

        paths["best_at_k"] = plot_best_at_k(results, out / "best_at_k.png", title=title)
        paths["diversity"] = plot_diversity(results, out / "diversity.png", title=title)
        paths["summary"] = plot_summary(results, out / "summary.png", title=title)
        paths["pareto"] = plot_pareto(results, out / "pareto.png", title=title)
    return paths


def load_report(path) -> dict[str, dict]:
    """``{method: result}`` from a ``report.json`` (or a directory holding one)."""
    p = Path(path)
    if p.is_dir():
        p = p / "report.json"
    if not p.exists():
        raise ReportError(f"no report at {p}: run `vpo eval` first")
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ReportError(f"{p} is not valid JSON ({e})") from None
    if not isinstance(doc, dict) or "results" not in doc:
        raise ReportError(f"{p} is not a vpo report (no 'results')")
    return doc["results"]
