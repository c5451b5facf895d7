"""Run a budgeted search over a task's prompts and measure it at matched generated tokens.

:func:`run_search` searches every prompt (:mod:`vpo.search.step.search`) and appends one record per
prompt to ``OUT/search/records.jsonl`` (``OUT/search/meta.json`` holds the settings; a rerun with
the same settings resumes after the finished prompts). :func:`search_metrics` turns the records into:

* ``best_at_budget``: for each token budget b of the curve (``num_points`` evenly spaced up to the
  budget), the mean over prompts of the best true ``w*ᵀr`` among the answers finished within b
  generated tokens (0 when none is), with a bootstrap interval over prompts;
* ``final``: per selector (``verifier``, the exact ``w*ᵀr``, is always there; ``--selector`` specs
  add imperfect ones, :mod:`vpo.search.selection`): the true ``w*ᵀr`` of the answer the selector
  keeps among those found within the budget (0 when none was found), and its hit rate (how often it
  is a true best of them, over the prompts where an answer was found);
* ``tokens``: tokens generated per prompt (all of them, over-budget calls included), generation
  calls, answers found, and ``per_answer``: what one answer took the completion that closed it
  (tokens over the answers it held, mean over the run's answers);
* ``finished``: answers finished within each budget point, per prompt (mean, min, and the prompts
  with none), beside ``bon_expected``: what a best-of-n writing answers of ``per_answer`` tokens
  would finish there (b / ``per_answer``);
* ``warnings``: :data:`FEW_ANSWERS` says so when, at the full budget, the search finished fewer than
  half of ``bon_expected`` per prompt, or some prompts finished none: its best@b then measures how
  few answers it wrote, not how well it searched.
"""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from vpo.errors import UserError
from vpo.search.step.search import SearchConfig, search_prompt

__all__ = ["run_search", "search_metrics", "load_records", "SEARCH_DIR", "FEW_ANSWERS", "few_answer_warnings"]

SEARCH_DIR = "search"
FEW_ANSWERS = 0.5
"""A search that finished fewer than this share of what best-of-n would finish in its budget is warned about."""
_MATCH = ("task", "model", "search", "split", "sampling")


def _meta(task, cfg: SearchConfig, gen, split: str, sampling: dict, scorer_name: str) -> dict:
    return {
        "format": "vpo-search/1",
        "task": task.name,
        "objectives": list(task.objectives),
        "target_weights": [float(x) for x in task.target_weights],
        "model": getattr(gen, "name", "model"),
        "backend": type(gen).__name__,
        "split": split,
        "search": {**cfg.public(), "step_scorer": scorer_name},
        "sampling": sampling,
    }


def _open_records(out_dir: Path, meta: dict, resume: bool):
    """The run's :class:`vpo._util.JsonlRun` in ``OUT/search/`` (its finished prompts kept on a resume)."""
    from vpo._util import JsonlRun

    d = out_dir / SEARCH_DIR
    d.mkdir(parents=True, exist_ok=True)

    def mismatch(keys, old):
        return UserError(
            f"{d} holds a search run with other settings ({', '.join(keys)} differ); use another --out or "
            "--no-resume to start it over"
        )

    return JsonlRun(
        d / "meta.json", d / "records.jsonl", meta, resume=resume, match_keys=_MATCH, mismatch=mismatch,
        meta_json={"indent": 1},
    )  # fmt: skip


def run_search(
    gen,
    task,
    examples: Sequence[dict],
    cfg: SearchConfig,
    scorer,
    *,
    out_dir=None,
    split: str = "test",
    sampling: dict | None = None,
    system: str | None = None,
    resume: bool = True,
    progress: bool = True,
    on_prompt_done: Callable[[int, int], None] | None = None,
) -> tuple[dict, list[dict]]:
    """Search every example; ``(meta, records)`` with one record per prompt, in example order."""
    from tqdm.auto import tqdm

    from vpo.search.generate import PROMPT_SEED_STRIDE, prompt_ids

    meta = _meta(task, cfg, gen, split, dict(sampling or {}), scorer.name)
    run = _open_records(Path(out_dir), meta, resume) if out_dir is not None else None
    records = list(run.records) if run is not None else []
    done = {r["prompt_id"] for r in records}
    ids = prompt_ids(examples)
    bar = tqdm(total=len(ids), initial=len(done), unit="prompt", disable=not progress, desc=f"{cfg.search} search")
    t0, spent = time.perf_counter(), 0
    errors = _ScoreErrors(scorer)
    try:
        for i, (pid, ex) in enumerate(zip(ids, examples)):
            if pid in done:
                continue
            prompt = gen.format(task.build_prompt(ex, cfg.num_answers), system)
            ledger = search_prompt(gen, task, ex, prompt, cfg, scorer, seed=cfg.seed + PROMPT_SEED_STRIDE * i)
            rec = {
                "prompt_id": pid,
                "example_index": i,
                "tokens_generated": ledger.spent,
                "calls": ledger.calls,
                "answers": [a.__dict__ for a in ledger.answers],
            }
            if ledger.score_errors:
                rec["score_errors"] = ledger.score_errors
            errors.add(ledger)
            records.append(rec)
            if run is not None:
                run.write(rec)  # flushed and fsynced
            spent += ledger.spent
            bar.update(1)
            bar.set_postfix(tokens_per_s=f"{spent / max(time.perf_counter() - t0, 1e-9):.0f}")
            if on_prompt_done is not None:
                on_prompt_done(len(records), len(ids))
    finally:
        bar.close()
        if run is not None:
            run.close()
    errors.warn(task)
    pos = {pid: k for k, pid in enumerate(ids)}
    records.sort(key=lambda r: pos.get(r["prompt_id"], len(pos)))
    return meta, records


class _ScoreErrors:
    """The answers whose scorer raised during one :func:`run_search`, warned about once at its end as
    ``Task.score_completions`` warns for a pool: the answers found (invalid zeros in the records) and
    those the ``verifier`` step scorer passed over."""

    def __init__(self, scorer) -> None:
        self.scorer = scorer
        self.scorer_before = getattr(scorer, "errors", 0)
        self.found = 0
        self.first: BaseException | None = None

    def add(self, ledger) -> None:
        self.found += ledger.score_errors
        self.first = self.first or ledger.first_error

    def warn(self, task) -> None:
        guided = getattr(self.scorer, "errors", 0) - self.scorer_before
        first = self.first or getattr(self.scorer, "first_error", None)
        tail = f" (first: {type(first).__name__}: {first})" if first is not None else ""
        if self.found:
            warnings.warn(
                f"task {task.name!r}: the scorer raised on {self.found} answer(s) the search found; they count as "
                f"invalid{tail}",
                RuntimeWarning,
                stacklevel=3,
            )
        if guided:
            warnings.warn(
                f"step scorer {self.scorer.name!r}: task {task.name!r}'s scorer raised on {guided} answer(s) while "
                f"guiding the search; they were passed over{tail}",
                RuntimeWarning,
                stacklevel=3,
            )


def load_records(run_dir) -> tuple[dict, list[dict]]:
    """``(meta, records)`` of a search run directory (``OUT`` or ``OUT/search``)."""
    from vpo._util import read_jsonl

    p = Path(run_dir)
    d = p if (p / "meta.json").exists() and p.name == SEARCH_DIR else p / SEARCH_DIR
    if not (d / "meta.json").exists():
        raise UserError(f"{run_dir}: no search run here (no {d / 'meta.json'}); run `vpo eval --search ...` first")
    meta = json.loads((d / "meta.json").read_text(encoding="utf-8"))
    records = read_jsonl(d / "records.jsonl", torn_tail=True) if (d / "records.jsonl").exists() else []
    return meta, records


# ---------------------------------------------------------------------------------------------
# metrics
# ---------------------------------------------------------------------------------------------


def _arrays(rec: dict, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(true scores [A], tokens_at [A], rewards [A, d], valid [A])`` of one prompt's answers."""
    ans = rec["answers"]
    d = w.size
    r = np.asarray([a["reward"] for a in ans], dtype=np.float64).reshape(len(ans), d)
    v = np.asarray([a["valid"] for a in ans], dtype=bool)
    t = np.asarray([a["tokens_at"] for a in ans], dtype=np.int64)
    true = np.where(v, r @ w, 0.0) if len(ans) else np.zeros(0)
    return true, t, r, v


def budget_points(budget: int, num_points: int = 8) -> list[int]:
    """``num_points`` token budgets evenly spaced up to ``budget`` (distinct, increasing)."""
    return sorted({max(1, round(budget * (i + 1) / num_points)) for i in range(num_points)})


def _entry(values: np.ndarray, bootstrap: int, ci_level: float, seed: int) -> dict:
    """``values [K, P]`` -> mean, ci_low, ci_high lists over K."""
    from vpo.search.metrics import jsonable, bootstrap_ci

    lo, hi = bootstrap_ci(values, bootstrap, ci_level, seed)
    with np.errstate(invalid="ignore"):  # a statistic undefined on every prompt (NaN) stays undefined
        mean = np.array([np.nanmean(row) if np.isfinite(row).any() else np.nan for row in values])
    return {
        "mean": jsonable(mean.tolist()),
        "ci_low": jsonable(np.asarray(lo).tolist()),
        "ci_high": jsonable(np.asarray(hi).tolist()),
    }


def _final_picks(records, w, budget, selectors, objectives, seed) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{selector: (kept true score [P], hit [P])}`` among the answers found within ``budget``."""
    from vpo.search.selection import parse_selector

    fns = {"verifier": lambda r, v, w_, rng: r @ w_}
    for spec in selectors:
        name, fn = parse_selector(spec, objectives)
        fns[name] = fn
    out = {}
    for name, fn in fns.items():
        kept, hit = np.zeros(len(records)), np.full(len(records), np.nan)  # no answer found: no hit to count
        for i, rec in enumerate(records):
            true, t, r, v = _arrays(rec, w)
            inb = t <= budget
            if not inb.any():
                continue
            true, r, v = true[inb], r[inb], v[inb]
            s = np.asarray(fn(r[None], v[None], w, np.random.default_rng(10_000 + seed + i)), dtype=np.float64)
            s = np.where(v, s.reshape(-1), -1e300)
            j = int(np.argmax(s))
            kept[i], hit[i] = true[j], float(true[j] >= true.max() - 1e-12)
        out[name] = (kept, hit)
    return out


def search_metrics(
    meta: dict,
    records: list[dict],
    *,
    budget: int | None = None,
    num_points: int = 8,
    selectors: Sequence[str] = (),
    bootstrap: int = 1000,
    ci_level: float = 0.95,
    bootstrap_seed: int = 0,
) -> dict:
    """The report of one search run (see the module docstring); ``budget``: the run's by default."""
    if not records:
        raise UserError("the search run has no finished prompts to report on")
    w = np.asarray(meta["target_weights"], dtype=np.float64)
    budget = int(budget or meta["search"]["budget_tokens"])
    points = budget_points(budget, num_points)
    best = np.zeros((len(points), len(records)))
    for i, rec in enumerate(records):
        true, t, _, _ = _arrays(rec, w)
        for j, b in enumerate(points):
            inb = t <= b
            best[j, i] = true[inb].max() if inb.any() else 0.0
    picks = _final_picks(records, w, budget, selectors, meta["objectives"], bootstrap_seed)
    final = {}
    for name, (kept, hit) in picks.items():
        e = _entry(np.stack([kept, hit]), bootstrap, ci_level, bootstrap_seed)
        final[name] = {
            k: {"mean": e["mean"][n], "ci_low": e["ci_low"][n], "ci_high": e["ci_high"][n]}
            for n, k in enumerate(("selected", "hit_rate"))
        }
    tokens = np.asarray([r["tokens_generated"] for r in records], dtype=np.float64)
    finished = np.asarray(
        [[int((_arrays(rec, w)[1] <= b).sum()) for rec in records] for b in points], dtype=np.float64
    ).reshape(len(points), len(records))
    per = [a["tokens_per_answer"] for r in records for a in r["answers"] if a.get("tokens_per_answer")]
    per_answer = float(np.mean(per)) if per else None
    fin = {
        "tokens": points,
        "mean": finished.mean(axis=1).tolist(),
        "min": finished.min(axis=1).astype(int).tolist(),
        "prompts_without": (finished == 0).sum(axis=1).astype(int).tolist(),
        "bon_expected": [b / per_answer for b in points] if per_answer else None,
    }
    out = {
        "kind": "search",
        "search": meta["search"],
        "task": meta["task"],
        "model": meta["model"],
        "objectives": meta["objectives"],
        "budget_tokens": budget,
        "num_prompts": len(records),
        "best_at_budget": {"tokens": points, **_entry(best, bootstrap, ci_level, bootstrap_seed)},
        "final": final,
        "tokens": {
            "generated_mean": float(tokens.mean()),
            "generated_total": int(tokens.sum()),
            "over_budget_mean": float(np.maximum(tokens - budget, 0).mean()),
            "calls_mean": float(np.mean([r["calls"] for r in records])),
            "answers_mean": float(np.mean([len(r["answers"]) for r in records])),
            "per_answer": per_answer,
        },
        "finished": fin,
        "per_prompt": {
            "prompt_ids": [r["prompt_id"] for r in records],
            "best_at_budget": best.T.tolist(),
            "finished": finished.T.astype(int).tolist(),
        },
        "config": {"bootstrap": bootstrap, "ci_level": ci_level, "bootstrap_seed": bootstrap_seed},
    }
    warns = few_answer_warnings(out)
    if warns:
        out["warnings"] = warns
    return out


def few_answer_warnings(res: dict) -> list[str]:
    """The lines that say a search run finished few answers within its budget (see the module docstring)."""
    fin = res.get("finished")
    if not fin:
        return []
    b, got, none = fin["tokens"][-1], fin["mean"][-1], fin["prompts_without"][-1]
    p = res["num_prompts"]
    out = []
    if none:
        out.append(
            f"{none} of {p} prompt(s) finished no answer within {b} generated tokens: their best@{b} is 0 for want "
            "of an answer, not for a wrong one"
        )
    want = fin["bon_expected"][-1] if fin.get("bon_expected") else None
    if want and got < FEW_ANSWERS * want:
        out.append(
            f"few answers finished: {got:.1f} per prompt within {b} tokens, where best-of-n writing answers of "
            f"{res['tokens']['per_answer']:.1f} tokens would finish about {want:.1f}; best@b here measures how few "
            "answers the search wrote more than how well it searched. Use --step answer (every step closes an "
            "answer), a narrower beam (--beam-width/--beam-expand) or a larger --budget-tokens (docs/eval.md)"
        )
    return out
