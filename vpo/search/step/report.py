"""Reports of budgeted searches (``vpo eval --search``, ``vpo compare`` of search runs).

``results`` is ``{name: search_metrics(...)}``. :func:`write_search_report` writes into ``out_dir``:

* ``search.json``: every number (per-prompt best@budget included);
* ``search.md``: a warning line per run that finished few answers (``results[name]["warnings"]``,
  :func:`vpo.search.step.run.few_answer_warnings`), best@budget at each token budget (mean and
  bootstrap interval over prompts), the answers finished per prompt at each budget beside what
  best-of-n would finish there, the final pick's true ``w*ᵀr`` and hit rate per selector, the tokens spent; with several runs the
  paired per-prompt difference of the first run against each other at the largest shared budget;
  with ``replicate_groups`` (``vpo compare --replicates``) each group's mean over its replicates with
  :func:`vpo.search.intervals.replicate_interval` (replicates x prompts) and the difference of the
  first group against each other, paired by replicate and prompt, with the same interval;
* ``tokens_vs_best.png``: best@budget against generated tokens, one line per run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping

import numpy as np

from vpo._util import fmt_interval
from vpo.errors import UserError

__all__ = [
    "write_search_report",
    "search_markdown",
    "load_search_report",
    "replicate_table",
    "is_search_run",
    "few_against_bon",
]

REPORT = "search.json"


def is_search_run(path) -> bool:
    p = Path(path)
    return (p / REPORT).exists() or (p / "search" / "meta.json").exists()


def _label(r: dict) -> str:
    s = r["search"]
    if s["search"] == "bon":
        return "bon"
    extra = f"w={s['beam_width']}x{s['expand']}" if s["search"] == "beam" else s["tree_algo"]
    return f"{s['search']} ({extra}, step {s['step']}, {s['step_scorer']}/{s['step_aggregate']})"


def _check(results: Mapping[str, dict]) -> None:
    if not results:
        raise UserError("nothing to report: no search results")
    objs = {tuple(r["objectives"]) for r in results.values()}
    if len(objs) > 1:
        raise UserError(f"the search runs score different objectives ({sorted(objs)}); compare runs of one task")


def _shared_budget(results: Mapping[str, dict]) -> int:
    """The largest token budget every run reports a point at."""
    common = set.intersection(*(set(r["best_at_budget"]["tokens"]) for r in results.values()))
    if not common:
        raise UserError(
            "the search runs share no token budget point (their --budget-tokens differ); run them at one "
            "--budget-tokens, or recompute with vpo compare --budget-tokens B"
        )
    return max(common)


def _per_prompt_at(r: dict, b: int) -> dict[str, float]:
    j = r["best_at_budget"]["tokens"].index(b)
    return {p: row[j] for p, row in zip(r["per_prompt"]["prompt_ids"], r["per_prompt"]["best_at_budget"])}


def paired_search(results: Mapping[str, dict]) -> dict | None:
    """The first run minus each other one at the largest shared budget, per shared prompt."""
    from vpo.search.metrics import bootstrap_ci

    names = list(results)
    if len(names) < 2:
        return None
    b = _shared_budget(results)
    base = _per_prompt_at(results[names[0]], b)
    out = {"baseline": names[0], "tokens": b, "vs": {}}
    for other in names[1:]:
        o = _per_prompt_at(results[other], b)
        shared = [p for p in base if p in o]
        if not shared:
            continue
        d = np.asarray([base[p] - o[p] for p in shared])
        cfg = results[names[0]]["config"]
        lo, hi = bootstrap_ci(d[None], cfg["bootstrap"], cfg["ci_level"], cfg["bootstrap_seed"])
        out["vs"][other] = {
            "num_prompts": len(shared),
            "mean": float(d.mean()),
            "ci_low": float(lo[0]),
            "ci_high": float(hi[0]),
        }
    return out


def few_against_bon(results: Mapping[str, dict]) -> list[str]:
    """Beside best-of-n runs: a line for each other run that finished fewer than
    :data:`~vpo.search.step.run.FEW_ANSWERS` of their answers (mean over the bon runs) per prompt at the
    largest shared budget."""
    from vpo.search.step.run import FEW_ANSWERS

    counted = {n: r for n, r in results.items() if r.get("finished")}
    bons = [n for n, r in counted.items() if r["search"]["search"] == "bon"]
    others = [n for n in counted if n not in bons]
    if not bons or not others:
        return []
    try:
        b = _shared_budget(counted)
    except UserError:
        return []

    def at(n: str) -> float:
        f = counted[n]["finished"]
        return f["mean"][f["tokens"].index(b)]

    ref = float(np.mean([at(n) for n in bons]))
    names = ", ".join(bons)
    return [
        f"{n} finished {at(n):.1f} answers per prompt within {b} tokens, under {FEW_ANSWERS:g} of best-of-n's "
        f"{ref:.1f} ({names}): its best@{b} compares how many answers were written more than how well they were searched"
        for n in others
        if at(n) < FEW_ANSWERS * ref
    ]


def replicate_table(results: Mapping[str, dict], groups: Mapping[str, list[str]], level: float = 0.95) -> dict:
    """Per group: best@budget at the shared budget over replicates x prompts; the first group minus each other."""
    from vpo.search.intervals import replicate_interval

    b = _shared_budget(results)
    mats = {}
    for g, members in groups.items():
        rows = [_per_prompt_at(results[n], b) for n in members]
        prompts = [p for p in rows[0] if all(p in r for r in rows)]
        mats[g] = (prompts, np.asarray([[r[p] for p in prompts] for r in rows]))
    names = list(groups)
    out = {"tokens": b, "groups": {}, "vs": {}}
    for g in names:
        out["groups"][g] = replicate_interval(mats[g][1], level)
    p0, m0 = mats[names[0]]
    for g in names[1:]:
        pg, mg = mats[g]
        if mg.shape[0] != m0.shape[0]:
            raise UserError(
                f"--replicates: {names[0]!r} has {m0.shape[0]} runs and {g!r} has {mg.shape[0]}; give each the same number"
            )
        shared = [p for p in p0 if p in set(pg)]
        i0, ig = [p0.index(p) for p in shared], [pg.index(p) for p in shared]
        out["vs"][g] = replicate_interval(m0[:, i0] - mg[:, ig], level)
    return out


def _level(results: Mapping[str, dict]) -> float:
    """The confidence level of the first run's intervals (``--ci-level``)."""
    return float(next(iter(results.values()))["config"]["ci_level"])


def _warning_lines(results: Mapping[str, dict]) -> list[str]:
    """A **Warning** line for each run's own warnings and for each run that finished few beside best-of-n."""
    lines = []
    for name, r in results.items():
        for w in r.get("warnings") or []:
            lines += [f"**Warning** ({name}): {w}", ""]
    for w in few_against_bon(results):
        lines += [f"**Warning**: {w}", ""]
    return lines


def _finished_lines(results: Mapping[str, dict], budgets: list[int]) -> list[str]:
    """The table of answers finished per prompt at each budget (runs reported before it was counted: none)."""
    lines: list[str] = []
    counted = {name: r["finished"] for name, r in results.items() if r.get("finished")}
    if counted:
        lines += [
            "",
            "Answers finished within b tokens, per prompt: mean (fewest on a prompt); last column: what best-of-n "
            "writing answers of the run's measured length would finish in the run's budget.",
            "",
            "| run | " + " | ".join(f"b={b}" for b in budgets) + " | best-of-n would finish |",
            "|" + "---|" * (len(budgets) + 2),
        ]
        for name, f in counted.items():
            pos = {b: i for i, b in enumerate(f["tokens"])}
            cells = [f"{f['mean'][pos[b]]:.1f} ({f['min'][pos[b]]})" if b in pos else "–" for b in budgets]
            bon = f"{f['bon_expected'][-1]:.1f}" if f.get("bon_expected") else "–"
            lines.append(f"| {name} | " + " | ".join(cells) + f" | {bon} |")
    return lines


def search_markdown(results: Mapping[str, dict], title: str | None = None, paired=None, replicated=None) -> str:
    lines = [f"# {title or 'Search at matched generated tokens'}", ""]
    first = next(iter(results.values()))
    pct = f"{100 * _level(results):g} %"
    lines += [
        f"Task {first['task']}; best@b: the best true w*ᵀr among the answers a search finished within b generated tokens per prompt (mean over prompts, {pct} bootstrap interval over prompts).",
        "",
    ]
    lines += _warning_lines(results)
    budgets = sorted(set().union(*(r["best_at_budget"]["tokens"] for r in results.values())))
    lines.append("| run | search | prompts | " + " | ".join(f"b={b}" for b in budgets) + " |")
    lines.append("|" + "---|" * (len(budgets) + 3))
    for name, r in results.items():
        e = r["best_at_budget"]
        pos = {b: i for i, b in enumerate(e["tokens"])}
        cells = [
            fmt_interval(e["mean"][pos[b]], e["ci_low"][pos[b]], e["ci_high"][pos[b]]) if b in pos else "–"
            for b in budgets
        ]
        lines.append(f"| {name} | {_label(r)} | {r['num_prompts']} | " + " | ".join(cells) + " |")
    lines += _finished_lines(results, budgets)
    lines += [
        "",
        "Final pick (among the answers found within the budget): its true w*ᵀr and how often it is a true best of them.",
        "",
    ]
    lines += [
        "| run | selector | picked w*ᵀr | hit rate | tokens generated / prompt | over budget / prompt | calls / prompt | answers / prompt |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        t = r["tokens"]
        for sel, f in r["final"].items():
            s, h = f["selected"], f["hit_rate"]
            lines.append(
                f"| {name} | {sel} | {fmt_interval(s['mean'], s['ci_low'], s['ci_high'])} | {fmt_interval(h['mean'], h['ci_low'], h['ci_high'])} | "
                f"{t['generated_mean']:.1f} | {t['over_budget_mean']:.1f} | {t['calls_mean']:.1f} | {t['answers_mean']:.1f} |"
            )
    if paired and paired["vs"]:
        lines += [
            "",
            f"Paired difference at b={paired['tokens']} ({paired['baseline']} minus each, per shared prompt):",
            "",
        ]
        lines += [f"| vs | prompts | difference [{pct} CI] |", "|---|---|---|"]
        for o, e in paired["vs"].items():
            lines.append(f"| {o} | {e['num_prompts']} | {fmt_interval(e['mean'], e['ci_low'], e['ci_high'])} |")
    if replicated:
        lines += [
            "",
            f"Replicates at b={replicated['tokens']}: mean over replicates x prompts, interval from vpo.search.intervals.replicate_interval:",
            "",
        ]
        lines += [f"| group | replicates | best@b [{pct} CI] |", "|---|---|---|"]
        for g, e in replicated["groups"].items():
            lines.append(f"| {g} | {e['num_replicates']} | {fmt_interval(e['mean'], e['ci_low'], e['ci_high'])} |")
        first_g = next(iter(replicated["groups"]))
        for g, e in replicated["vs"].items():
            lines.append(
                f"| {first_g} − {g} | {e['num_replicates']} | {fmt_interval(e['mean'], e['ci_low'], e['ci_high'])} |"
            )
    return "\n".join(lines) + "\n"


def plot_tokens_vs_best(results: Mapping[str, dict], path, title: str | None = None) -> Path:
    from vpo.search.plots import COLORS, new_figure

    fig, axes = new_figure(6.0, 4.0)
    ax = axes[0]
    for i, (name, r) in enumerate(results.items()):
        e = r["best_at_budget"]
        c = COLORS[i % len(COLORS)]
        ax.plot(e["tokens"], e["mean"], marker="o", color=c, label=name)
        if all(x is not None for x in e["ci_low"] + e["ci_high"]):
            ax.fill_between(e["tokens"], e["ci_low"], e["ci_high"], color=c, alpha=0.15)
    ax.set_xlabel("generated tokens per prompt")
    ax.set_ylabel("best w*ᵀr found (best@budget)")
    ax.set_title(title or "best@budget against generated tokens")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    p = Path(path)
    fig.savefig(p, dpi=120)
    return p


def write_search_report(
    results: Mapping[str, dict], out_dir, *, title=None, plots: bool = True, replicate_groups=None
) -> dict[str, Path]:
    from vpo.search.metrics import jsonable

    _check(results)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paired = paired_search(results)
    rep = replicate_table(results, replicate_groups, _level(results)) if replicate_groups else None
    doc = {"title": title, "kind": "search", "methods": list(results), "results": dict(results)}
    if paired:
        doc["paired"] = paired
    against = few_against_bon(results)
    if against:
        doc["warnings"] = against
    if rep:
        doc["replicates"] = {k: list(v) for k, v in replicate_groups.items()}
        doc["paired_replicates"] = rep
    paths = {"json": out / REPORT, "markdown": out / "search.md"}
    paths["json"].write_text(json.dumps(jsonable(doc), indent=1, allow_nan=False) + "\n", encoding="utf-8")
    paths["markdown"].write_text(search_markdown(results, title, paired, rep), encoding="utf-8")
    if plots:
        paths["tokens_vs_best"] = plot_tokens_vs_best(results, out / "tokens_vs_best.png", title)
    return paths


def load_search_report(path) -> dict[str, dict]:
    p = Path(path)
    p = p / REPORT if p.is_dir() else p
    if not p.exists():
        raise UserError(f"no search report at {p}: run `vpo eval --search ...` first")
    doc = json.loads(p.read_text(encoding="utf-8"))
    if doc.get("kind") != "search":
        raise UserError(f"{p} is not a search report")
    return doc["results"]
