"""``vpo check``: should VPO help here? Read the base model's own candidate pool before a GPU hour is spent.

::

    vpo check runs/base --task maze --num-answers 3 --rollouts 10 --num-prompts 50 --out runs/check
    vpo check --pool runs/eval/base/pool        # an existing pool, no generation
    vpo check --report runs/eval/base           # an existing vpo eval report

With a model, ``vpo check`` runs ``vpo eval`` with the arguments after the model (every ``vpo eval``
option works; ``--out`` is required) and reads its report. It prints, and writes to
``OUT/check.md`` and ``OUT/check.json``: format compliance for m answers, where answers were lost
(:mod:`vpo.search.failures`), ρ̄ (mean correlation of the objectives over the pool's answers),
search headroom under w* (best@k − best@1, and the gap to the exact ceiling when ``--ceiling`` gives
it), E_w[best@k] against best@k under w*, the Pareto front size, and a verdict with its reasons.

The rules and where they come from (docs/eval.md has the figures):

* **format**: fewer than 10 % of the answer slots valid → "the model does not follow the m-answer
  format: warm start first". A batch without a parsable answer gives every rollout advantage 0
  (the trainer's zero-signal stop); the demo's models are warm-started for this reason.
* **collinear**: ρ̄ ≥ 0.9 → "objectives nearly collinear: VPO ≈ GRPO expected". With one
  objective's worth of trade-off, VPO's set score is best-of-m of one scalar; the maze's
  ``collinear: true`` control (ρ̄ = 1.00 on its warm start) gave VPO and GRPO about equal
  completed diversity (0.263 vs 0.202) and Pareto coverage (0.308 vs 0.298).
* **no headroom**: best@k − best@1 < 0.02 under w* → "search gains nothing over one sample".
* otherwise → "VPO is likely to help": objectives trade off and search has headroom; on the shipped
  demos' warm starts (maze ρ̄ 0.54, programs ρ̄ 0.10) VPO kept more completed diversity than GRPO.
* a note, not a verdict: the base pool within 0.05 of the exact ceiling at k → RL may not beat the
  base model at large k (the maze demo: no RL method beat the warm start at k = 30).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from vpo._util import fmt_number
from vpo.errors import UserError

__all__ = ["FORMAT_MIN_VALID", "COLLINEAR_RHO", "MIN_HEADROOM", "NEAR_CEILING", "check_summary", "summary_from_eval"]

FORMAT_MIN_VALID = 0.10
COLLINEAR_RHO = 0.90
MIN_HEADROOM = 0.02
NEAR_CEILING = 0.05


def _num(x) -> float | None:
    """A finite float, or None (NaN, missing): what check.json holds."""
    return None if x is None or not math.isfinite(float(x)) else float(x)


def _curve_at(curve: dict, k: int) -> float | None:
    """``metrics[name]`` of an eval result (``{"k": [...], "mean": [...]}``) at k."""
    if k not in curve["k"]:
        return None
    return _num(curve["mean"][curve["k"].index(k)])


def summary_from_eval(result: dict) -> dict:
    """The figures a check reads, from one ``vpo eval`` result (``report.json``'s value for a method)."""
    M = result["metrics"]
    kmax = max(M["best_at_k"]["k"])
    f = result.get("failures")
    return {
        "num_answers": result["shape"]["m"],
        "k": kmax,
        "valid_share": float(M["valid_answer_frac"]["mean"]),
        "rho_bar": _num(M.get("collinearity_pooled")),
        "best_at_1": _curve_at(M["best_at_k"], 1),
        "best_at_k": _curve_at(M["best_at_k"], kmax),
        "ew_best_at_k": _curve_at(M["ew_best_at_k"], kmax) if "ew_best_at_k" in M else None,
        "pareto_front_size": _num(M.get("pareto_front_size", {}).get("mean")),
        "failure_shares": None if not f else f["shares"],
        "truncated_share": None if not f else f.get("truncated_share"),
        "warnings": list(result.get("warnings") or []),
    }


def check_summary(s: dict, ceiling: float | None = None) -> dict:
    """The verdict on one summary (:func:`summary_from_eval`): ``{"verdict", "reasons", "notes", ...}``."""
    rho, b1, bk = _num(s.get("rho_bar")), _num(s.get("best_at_1")), _num(s.get("best_at_k"))
    headroom = None if b1 is None or bk is None else bk - b1
    reasons, notes = [], []
    if s["valid_share"] < FORMAT_MIN_VALID:
        verdict = "warm start first"
        reasons.append(
            f"the model does not follow the m-answer format: {s['valid_share']:.1%} of the answer slots are "
            f"valid (< {FORMAT_MIN_VALID:.0%}); RL on it would see batches without learning signal"
        )
    elif rho is not None and rho >= COLLINEAR_RHO:
        verdict = "VPO ≈ GRPO expected"
        reasons.append(f"objectives nearly collinear: ρ̄ = {rho:.2f} ≥ {COLLINEAR_RHO}; there is little to trade off")
    elif headroom is not None and headroom < MIN_HEADROOM:
        verdict = "no headroom"
        reasons.append(
            f"no headroom under w*: best@{s['k']} − best@1 = {headroom:+.3f} < {MIN_HEADROOM}; search gains nothing "
            "over one sample"
        )
    else:
        verdict = "VPO likely to help"
        why = "objectives trade off" + (f" (ρ̄ = {rho:.2f} < {COLLINEAR_RHO})" if rho is not None else "")
        if headroom is not None:
            why += f" and search has headroom under w* (best@{s['k']} − best@1 = {headroom:+.3f})"
        reasons.append(why)
    if ceiling is not None and bk is not None and ceiling - bk < NEAR_CEILING:
        notes.append(
            f"the base pool is within {ceiling - bk:.3f} of the exact ceiling at k = {s['k']} (< {NEAR_CEILING}): "
            "RL may not beat the base model at large k"
        )
    ew = _num(s.get("ew_best_at_k"))
    if ew is not None and bk is not None:
        notes.append(f"E_w[best@{s['k']}] = {ew:.3f} against best@{s['k']} under w* = {bk:.3f}")
    notes += [f"warning: {w}" for w in s.get("warnings") or []]
    shares = s.get("failure_shares") or {}
    lost = {k: v for k, v in shares.items() if k != "valid" and v and v > 0.1}
    if lost:
        from vpo.search.failures import FAILURE_TYPES, FAILURE_WORDS

        # in the report's column order and words ("no answer tags", not the key no_tags)
        notes.append(
            "answer slots lost: " + ", ".join(f"{FAILURE_WORDS[k]} {lost[k]:.1%}" for k in FAILURE_TYPES if k in lost)
        )
    return {
        **s,
        "headroom": headroom,
        "ceiling": ceiling,
        "verdict": verdict,
        "reasons": reasons,
        "notes": notes,
    }


def markdown(checks: dict[str, dict]) -> str:
    lines = ["# vpo check: should VPO help here?", ""]
    for name, c in checks.items():
        lines += [
            f"## {name}: **{c['verdict']}**",
            "",
            *[f"- {r}" for r in c["reasons"]],
            *[f"- note: {n}" for n in c["notes"]],
            "",
            "| m | valid slots | ρ̄ | best@1 | best@k | headroom | E_w[best@k] | Pareto front |",
            "|---|---|---|---|---|---|---|---|",
            "| {} | {} | {} | {} | {} | {} | {} | {} |".format(
                c["num_answers"],
                f"{c['valid_share']:.3f}",
                *(
                    fmt_number(c.get(key), signed=key == "headroom")
                    for key in ("rho_bar", "best_at_1", "best_at_k", "headroom", "ew_best_at_k", "pareto_front_size")
                ),
            ),
            "",
        ]
    lines.append("Rules and where they come from: docs/eval.md (`vpo check`).")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# the command
# ---------------------------------------------------------------------------------------------


def add_parser(subparsers) -> None:
    import argparse

    p = subparsers.add_parser(
        "check",
        help="should VPO help here? format compliance, ρ̄, headroom and a verdict from a base model's pool",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--pool", help="an existing pool directory (no generation)")
    p.add_argument("--report", help="an existing vpo eval output directory (its report.json)")
    p.add_argument("--ceiling", type=float, default=None, help="the exact best single answer under w*, if known")
    p.add_argument("--check-out", default=None, help="where check.md/json go with --pool/--report (default: there)")
    p.add_argument("model", nargs="?", help="a model to sample the pool from: every argument after it goes to vpo eval")
    p.add_argument("eval_args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def _run_eval(argv: list[str]) -> int:
    """``vpo eval ARGV`` in this process, its mistakes one line (as the CLI words them)."""
    import argparse

    from vpo.search import cli as search_cli

    class _Parser(argparse.ArgumentParser):
        def error(self, message):
            raise UserError(f"vpo check: the vpo eval arguments: {message}")

    parser = _Parser(prog="vpo check")
    search_cli.add_parser(parser.add_subparsers(dest="command", parser_class=_Parser))
    ns = parser.parse_args(argv)
    ns.debug = False
    from vpo.search.evalsetup import as_command

    with as_command("vpo check"):  # its notes say "vpo check:", the command the user ran
        return int(ns.func(ns) or 0)


def _out_of(eval_args: list[str]) -> str | None:
    for i, a in enumerate(eval_args):
        if a == "--out" and i + 1 < len(eval_args):
            return eval_args[i + 1]
        if a.startswith("--out="):
            return a.split("=", 1)[1]
    return None


def run(args) -> int:
    from vpo.search.report import load_report

    sources = [x for x in ("model", "pool", "report") if getattr(args, x)]
    if len(sources) != 1:
        raise UserError("give one of: a MODEL (then vpo eval's arguments), --pool DIR or --report DIR")
    if args.model:
        out = _out_of(args.eval_args)
        if not out:
            raise UserError("vpo check MODEL ... needs --out DIR (where vpo eval writes the pool and the report)")
        rc = _run_eval(["eval", "--model", args.model, *args.eval_args])
        if rc:
            return rc
        where = Path(out)
        results = load_report(where)
    elif args.report:
        where = Path(args.report)
        results = load_report(where)
    else:
        from vpo.search.pools import evaluate_pool, load_pool

        pool_dir = Path(args.pool)
        from vpo.search.cli import add_all_zero_warning

        pool = load_pool(pool_dir)
        results = {pool_dir.name: evaluate_pool(pool, bootstrap=0)}
        add_all_zero_warning(results[pool_dir.name], pool)
        where = pool_dir
    out_dir = Path(args.check_out) if args.check_out else where
    checks = {name: check_summary(summary_from_eval(r), args.ceiling) for name, r in results.items()}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "check.json").write_text(json.dumps(checks, indent=1, allow_nan=False, default=str))
    text = markdown(checks)
    (out_dir / "check.md").write_text(text)
    sys.stdout.write(text)
    return 0
