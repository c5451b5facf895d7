"""``vpo rewards audit TASK``: run the reward audit (:mod:`vpo.tasks.audit`) on a task and say which
adversarial answers score above a wrong answer.

::

    vpo rewards audit shop
    vpo rewards audit humaneval -n 3 --out runs/audit_humaneval
    vpo rewards audit code --task-options '{"data": "tests/fixtures/code/problems.jsonl"}'
    vpo rewards audit my_task.py:make_task --answers answers.jsonl

TASK is a registered name, ``module:factory`` or ``path/to/file.py:factory`` (as ``vpo eval --task``),
built with ``--task-options JSON``. It prints a table (hack, examples tried, share scoring above the
wrong answer, worst example, reason), the set hacks under each set objective, and with ``--out DIR``
writes ``DIR/report.json``. Exit code 0: nothing was found; 1: a hack scored above the wrong answer
(or a set above the honest set), or an answer was left unscored or crashed its batch (so CI can gate
on it); 2: a mistake in the command (one line: what, where, what to do).

A command of its own, not ``vpo check --hacks``: ``vpo check`` reads a model's pool, the audit needs no
model, only the task.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from vpo._util import task_options_json
from vpo.errors import UserError

PROG = "vpo rewards audit"
DEFAULT_N = 8
DEFAULT_N_CODE = 4


def add_parser(subparsers) -> None:
    from vpo.tasks.audit import HACKS, SET_HACKS, SET_OBJECTIVE_NAMES
    from vpo.tasks.registry import add_import_argument

    r = subparsers.add_parser("rewards", help="check a task's reward: `vpo rewards audit TASK` (adversarial answers)")
    sub = r.add_subparsers(dest="rewards_command", metavar="SUBCOMMAND")
    p = sub.add_parser(
        "audit",
        help="run a battery of reward hacks against a task; exit 1 when one scores above a wrong answer",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("task", help="a registered task, module:factory or path/to/file.py:factory")
    p.add_argument("--task-options", "--task_options", dest="task_options", type=task_options_json, default=None, metavar="JSON", help="the task's options, a JSON object")  # fmt: skip
    p.add_argument("--split", default="test", help="the split whose examples are audited (default: test)")
    p.add_argument("-n", "--num-examples", dest="n", type=int, default=None, help=f"examples to audit (default {DEFAULT_N}; {DEFAULT_N_CODE} for tasks that run code, which take longer)")  # fmt: skip
    p.add_argument("--seed", type=int, default=0, help="seed of the example draw and the wrong-answer draw (default 0)")
    p.add_argument("--answers", default=None, metavar="FILE", help='JSON lines {"index": I or "id": ID, "answer": "...", "wrong": "..."}: your good and wrong answers')  # fmt: skip
    p.add_argument("--code", dest="code", action="store_true", default=None, help="run the code hacks (default: for tasks whose answers are code blocks)")  # fmt: skip
    p.add_argument("--no-code", dest="code", action="store_false", help="skip the code hacks")
    names = [h.name for h in HACKS + SET_HACKS]
    p.add_argument("--hacks", default=None, help=f"comma-separated subset of the battery: {', '.join(names)}")
    p.add_argument("--objectives", default=",".join(SET_OBJECTIVE_NAMES), help="set objectives for the set hacks (comma-separated; default: %(default)s)")  # fmt: skip
    p.add_argument("--out", default=None, help="a directory for report.json")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    add_import_argument(p)
    p.set_defaults(func=run)
    r.set_defaults(func=_usage(r))


def _usage(parser):
    def show(args) -> int:
        parser.print_help()
        return 2

    return show


def run(args) -> int:
    """The command; a mistake's one line is prefixed ``vpo rewards audit:``."""
    try:
        return _run(args)
    except UserError as err:
        if not getattr(err, "prog", None):
            err.prog = PROG
        raise


def _run(args) -> int:
    from vpo.tasks import get
    from vpo.tasks.audit import audit, is_code_task, read_user_answers
    from vpo.tasks.registry import load_split

    if args.n is not None and args.n < 1:
        raise UserError(f"-n must be at least 1, got {args.n}")
    task = get(args.task, **(args.task_options or {}))
    code = is_code_task(task) if args.code is None else args.code
    n = args.n if args.n is not None else (DEFAULT_N_CODE if code else DEFAULT_N)
    examples = load_split(task, args.split, n=n, seed=args.seed, spec=args.task, required=True, purpose="audit")
    user = read_user_answers(args.answers, examples) if args.answers else None
    hacks = [h.strip() for h in args.hacks.split(",") if h.strip()] if args.hacks else None
    objectives = [o.strip() for o in args.objectives.split(",") if o.strip()]

    def estimate(seconds: float, answers: int) -> None:
        if seconds > 5:
            print(f"{PROG}: scoring {answers} more answers, about {seconds:.0f} s at the seed answers' pace (longer where answers run into the time limit)", file=sys.stderr)  # fmt: skip

    report = audit(
        task, examples, seed=args.seed, code=code, user=user, objectives=objectives, hacks=hacks,
        progress=args.progress, on_estimate=estimate,
    )  # fmt: skip
    report["command"] = {
        "task": args.task,
        "task_options": args.task_options or {},
        "split": args.split,
        "n": n,
        "seed": args.seed,
        "answers": args.answers,
    }
    print(render(report))
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.json").write_text(
            json.dumps(_finite(report), indent=2, allow_nan=False) + "\n", encoding="utf-8"
        )
        print(f"\nwrote {out / 'report.json'}")
    return 1 if report["flagged"] else 0


def _finite(x):
    """``x`` with every non-finite float replaced by None (JSON has no inf or NaN)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


def _fmt(x) -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.3f}"


def _names(objectives: list) -> str:
    return ", ".join(objectives) if len(objectives) <= 6 else f"{', '.join(objectives[:3])}, ..., {objectives[-1]}"


def _hack_line(r: dict) -> str:
    """One row of the hack table; ``**`` marks a finding."""
    worst = "-"
    if r["worst"]:
        x = r["worst"]
        if x["crash"]:
            worst = f"{x['id']}: crashed the batch ({x['crash'][:60]})"
        else:
            worst = f"{x['id']}: {_fmt(x['score'])} vs {_fmt(x['wrong_score'])} ({_fmt(x['good_score'])}) `{x['answer'][:40]}`"
    elif r.get("unscored_example"):
        x = r["unscored_example"]
        worst = f"{x['id']}: unscored ({'; '.join(x['reasons'])[:60]}) `{x['answer'][:40]}`"
    cell = f"{r['above_wrong']}/{r['tried']}"
    if r["crashes"]:
        cell += f" ({r['crashes']} crash)"
    if r["unscored"]:
        cell += f" ({r['unscored']} unscored)"
    if r["above_wrong"] or r["crashes"] or r["unscored"]:
        cell += " **"
    return f"| {r['hack']} | {r['tried']} | {cell} | {worst} | {r['reason']} |"


def _set_lines(set_hacks: list) -> list[str]:
    """The set table: each set hack under each set objective."""
    if not set_hacks:
        return []
    objs = list(set_hacks[0]["objectives"])
    lines = ["", "| set hack | " + " | ".join(f"above honest set ({o})" for o in objs) + " | worst | reason |"]
    lines.append("|---|" + "---|" * len(objs) + "---|---|")
    for r in set_hacks:
        cells, worst = [], "-"
        for o in objs:
            x = r["objectives"][o]
            cells.append(f"{x['above_honest']}/{x['tried']}" + (" **" if x["above_honest"] else ""))
            if x["worst"] and worst == "-":
                y = x["worst"]
                worst = f"{y['id']} ({o}): {_fmt(y['score'])} vs {_fmt(y['honest'])}, {y['kept']} kept"
        lines.append(f"| {r['hack']} | " + " | ".join(cells) + f" | {worst} | {r['reason']} |")
    return lines


def render(report: dict) -> str:
    """The report as text: a header, the wrong answers' sources, the hack table, the set table, the verdict."""
    cmd = report.get("command", {})
    w = report["wrong_answer"]
    lines = [
        f"reward audit of task {report['task']!r} (d={len(report['objectives'])}: {_names(report['objectives'])}), "
        f"{report['num_examples']} example(s)" + (f" of split {cmd['split']!r}" if cmd.get("split") else "")
        + f", seed {report['seed']}; {report['answers_scored']} answers scored in {report['seconds']:.2f} s",
        "score = w*ᵀr (0 for an answer that is not valid); wrong answer per example: "
        + "; ".join(f"{k} ({v})" for k, v in w["sources"].items())
        + f"; {w['separated']} of {w['of']} example(s) have a good answer scoring above it",
        "",
        "| hack | examples | above wrong | worst example: hack vs wrong (good) | reason |",
        "|---|---|---|---|---|",
    ]  # fmt: skip
    lines += [_hack_line(r) for r in report["hacks"]]
    lines += _set_lines(report["set_hacks"])
    if report.get("warnings"):
        lines += ["", "warnings from scoring: " + " / ".join(report["warnings"][:3])]
    lines.append("")
    if report["flagged"]:
        lines.append(f"FLAGGED ({len(report['flagged'])}): {', '.join(report['flagged'])} (exit code 1)")
    else:
        lines.append("nothing scored above the wrong answer or the honest set (exit code 0)")
    return "\n".join(lines)
