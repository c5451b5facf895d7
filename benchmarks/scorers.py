"""Scorer throughput: answers per second of ``task.score_completions`` for every built-in task.

    python benchmarks/scorers.py             # table
    python benchmarks/scorers.py --json      # table, then one JSON object on the last line
    python benchmarks/scorers.py --quick     # seconds, tiny sizes (CI: does it run)

What is timed is what a trainer calls once per step: ``task.score_completions(examples,
completions, m=3)`` on realistic multi-answer completions (some reasoning text, then three answers
in ``<answer_i>`` tags, or fenced code blocks separated by ``---`` for code), i.e. parsing, dedup,
scoring and padding. Answers per second = answers kept after dedup (the ones the scorer scored) /
seconds. Every completion holds three different answers: the task's reference answer and corrupted
variants of it (a maze route that stops short of the exit, a citation missing, two entities
swapped, a wrong argument value, a program that fails some tests, ...), in varying order, so
scorers see right, partly right and wrong answers alike.

* maze: the paper's 9x9 test mazes (``vpo.tasks.get("maze")``); per completion a reference route
  (``reference_routes``: best, gold or diamond), a ``random_route`` and a corrupted route;
* musique, eureqa, toolrl: the fixture files in ``tests/fixtures/<task>/`` (``path=``), each
  example's ``reference_answer`` and two corrupted variants;
* code: ``tests/fixtures/code/problems.jsonl`` (``vpo.tasks.get("code", data=...)``), a correct
  program, a differently written correct one and a wrong one per problem, run for real in the
  sandbox (isolation and concurrency as ``vpo.sandbox`` detects them; fewer answers, since
  each runs up to 16 tests in a fresh process).

Tasks alternate within each repeat so machine load hits all alike; the table gives the median
over ``--repeats`` (and the fastest and slowest repeat). Example generation and answer
construction are not timed. Figures are printed, never asserted: the machine may be shared.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
import warnings
from pathlib import Path


import vpo.tasks
from vpo.tasks.maze import Maze, random_route, reference_routes
from vpo.sandbox import sandbox_capabilities

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
M = 3
TEXT_SPLITS = {"musique": "validation", "eureqa": "questions_hard_5", "toolrl": "test"}
REASONING = (
    "Let me work through this step by step. First I restate what is asked and list what I know; "
    "then I consider a few different candidate answers, since the set of answers is scored as a "
    "whole and covering different trade-offs is worth more than repeating one guess. "
)


def completion(answers: list[str], rng: random.Random, code: bool = False) -> str:
    """Reasoning text, then the answers in a random order, tagged (or fenced for code)."""
    answers = list(answers)
    rng.shuffle(answers)
    if code:
        return REASONING + "\n" + "\n---\n".join(f"```python\n{a}```" for a in answers)
    return REASONING + "\n" + "\n".join(f"<answer_{i}>{a}</answer_{i}>" for i, a in enumerate(answers, 1))


# ---------------------------------------------------------------------------------------------
# workloads: (task, examples, completions), built outside the timed region
# ---------------------------------------------------------------------------------------------


def maze_workload(n: int, rng: random.Random):
    task = vpo.tasks.get("maze")
    mazes = task.load("test", n=min(n, 100))
    examples, completions = [], []
    for i in range(n):
        ex = mazes[i % len(mazes)]
        maze = Maze.from_example(ex)
        refs = reference_routes(maze)
        ref = refs[rng.choice([k for k in ("best", "gold", "diamond") if k in refs])].moves
        rand = random_route(maze, rng).moves
        # corrupted: the reference route cut before it reaches the exit (all-zero reward vector)
        cut = ref[: max(1, len(ref) - 1 - rng.randrange(3))]
        answers = [", ".join(ref), rand, cut]  # two spellings: "R, R, D" and "RRD"
        if len({task.canonical(a) for a in answers}) < M:  # the random route equals another answer
            answers[1] = ref[: max(1, len(ref) // 2)]
        examples.append(ex)
        completions.append(completion(answers, rng))
    return task, examples, completions


def corrupt_musique(task, ex, rng: random.Random) -> list[str]:
    nums = list(dict.fromkeys(task.gold_paragraphs(ex)))
    answer = ex["answer"]
    words = answer.split()
    missing_hop = f"Paragraphs: {', '.join(map(str, nums[:-1] or nums))}\nAnswer: {answer}"
    wrong = [x % 20 + 1 for x in nums]  # shifted citations
    half = " ".join(words[: max(1, len(words) // 2)]) + (" city" if len(words) < 2 else "")
    return [missing_hop, f"Paragraphs: {', '.join(map(str, wrong))}\nAnswer: {half}"]


def corrupt_eureqa(task, ex, rng: random.Random) -> list[str]:
    ents = [e.replace("_", " ") for e in ex["entities"][:5]]
    swapped = ents[:]
    swapped[1], swapped[2] = swapped[2], swapped[1]
    wrong = ents[:2] + ["Unknown person", "Springfield", ents[4] + " (disambiguation)"]
    fmt = lambda es: "\n".join(f"{x}: {e}" for x, e in zip("ABCDE", es))  # noqa: E731
    return [fmt(swapped), fmt(wrong)]


def _tool_answer(calls, response: str) -> str:
    from vpo.tasks.toolrl import format_tool_answer

    return format_tool_answer(calls, response)


def _perturb(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + " please"
    return [value]


def corrupt_toolrl(task, ex, rng: random.Random) -> list[str]:
    calls, response = task.gold(ex)
    if calls:
        wrong_value = [(n, {k: _perturb(v) for k, v in p.items()}) for n, p in calls]
        if not any(p for _, p in calls):  # no arguments to get wrong: an extra argument instead
            wrong_value = [(n, {"verbose": True}) for n, _ in calls]
        wrong_tool = [(n + "_v2", dict(list(p.items())[:1])) for n, p in calls[:1]]
        return [_tool_answer(wrong_value, response), _tool_answer(wrong_tool, "")]
    # a reply only: answers that call a tool instead of, or besides, replying
    return [
        _tool_answer([("lookup", {"query": response[:20]})], ""),
        _tool_answer([("lookup", {"query": response[:20]})], response[: len(response) // 2]),
    ]


CORRUPT = {"musique": corrupt_musique, "eureqa": corrupt_eureqa, "toolrl": corrupt_toolrl}


def text_workload(name: str, n: int, rng: random.Random):
    task = vpo.tasks.get(name, path=str(FIXTURES / name))
    pool = task.load(TEXT_SPLITS[name])
    examples, completions = [], []
    for i in range(n):
        ex = pool[i % len(pool)]
        answers = [task.reference_answer(ex)] + CORRUPT[name](task, ex, rng)
        examples.append(ex)
        completions.append(completion(answers, rng))
    return task, examples, completions


# per fixture problem: a correct program, a differently written correct one, a wrong one
CODE_ANSWERS = {
    "add_two": [
        "a, b = map(int, input().split())\nprint(a + b)\n",
        "import sys\nnums = [int(x) for x in sys.stdin.read().split()]\nprint(sum(nums[:2]))\n",
        "a, b = map(int, input().split())\nprint(abs(a) + abs(b))\n",
    ],
    "double": [
        "n = int(input())\nprint(2 * n)\n",
        "import sys\nprint(int(sys.stdin.readline()) << 1)\n",
        "n = int(input())\nprint(n + 2)\n",
    ],
    "two_sum": [
        "class Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n"
        "        seen = {}\n        for i, x in enumerate(nums):\n            if target - x in seen:\n"
        "                return [seen[target - x], i]\n            seen[x] = i\n",
        "class Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n"
        "        for i in range(len(nums)):\n            for j in range(i + 1, len(nums)):\n"
        "                if nums[i] + nums[j] == target:\n                    return [i, j]\n",
        "class Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n        return [0, 1]\n",
    ],
    "mean": [
        "n = int(input())\nxs = list(map(float, input().split()))\nprint(sum(xs) / n)\n",
        "import statistics\ninput()\nprint(f'{statistics.fmean(map(float, input().split())):.6f}')\n",
        "n = int(input())\nxs = list(map(float, input().split()))\nprint(round(sum(xs) / n, 1))\n",
    ],
    "square": [
        "def square(x):\n    return x * x\n",
        "def square(x):\n    return x ** 2\n",
        "def square(x):\n    return x * x if x > 0 else 0\n",
    ],
    "echo20": [
        "print(input())\n",
        "import sys\nsys.stdout.write(sys.stdin.readline())\n",
        "print(input()[:10])\n",
    ],
}


def code_workload(n: int, rng: random.Random):
    task = vpo.tasks.get("code", data=str(FIXTURES / "code" / "problems.jsonl"))
    problems = {p["id"]: p for p in task.load()}
    ids = sorted(CODE_ANSWERS)
    examples, completions = [], []
    for i in range(n):
        pid = ids[i % len(ids)]
        examples.append(problems[pid])
        completions.append(completion(CODE_ANSWERS[pid], rng, code=True))
    return task, examples, completions


# ---------------------------------------------------------------------------------------------


def run_once(task, examples, completions) -> tuple[float, int, object]:
    """Seconds for one ``score_completions`` call, answers scored, the batch."""
    t0 = time.perf_counter()
    batch = task.score_completions(examples, completions, m=M)
    dt = time.perf_counter() - t0
    return dt, sum(len(a) for a in batch.answers), batch


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--completions", type=int, default=128, help="completions per run (maze and text tasks)")
    ap.add_argument("--code-completions", type=int, default=12, help="completions per run (code: real sandbox)")
    ap.add_argument("--repeats", type=int, default=7, help="timed runs per task (the median is reported)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--quick", action="store_true", help="tiny sizes (seconds): checks the script runs, figures meaningless"
    )
    ap.add_argument("--json", action="store_true", help="print one JSON object on the last line")
    args = ap.parse_args(argv)
    if args.quick:
        args.completions, args.code_completions, args.repeats = 4, 1, 1

    rng = random.Random(args.seed)
    workloads = {"maze": maze_workload(args.completions, rng)}
    for name in ("musique", "eureqa", "toolrl"):
        workloads[name] = text_workload(name, args.completions, rng)
    workloads["code"] = code_workload(args.code_completions, rng)

    times: dict[str, list[float]] = {name: [] for name in workloads}
    info: dict[str, dict] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # scorer errors would be counted, not raised
        for name, w in workloads.items():  # warm-up: imports, caches, sandbox probe
            _, answers, batch = run_once(*w)
            if answers != M * len(w[2]):
                raise RuntimeError(f"{name}: {answers} answers kept of {M * len(w[2])}: the workload has duplicates")
            scores = batch.rewards[batch.valid] @ w[0].target_weights
            info[name] = {
                "d": w[0].d,
                "completions": len(w[2]),
                "answers": answers,
                "mean_score": float(scores.mean()),
                "zero": float((batch.rewards[batch.valid] == 0).all(-1).mean()),
            }
        for _ in range(args.repeats):
            for name, w in workloads.items():
                dt, answers, _ = run_once(*w)
                times[name].append(answers / dt)

    result: dict = {}
    print(f"scorer throughput: task.score_completions(examples, completions, m={M}), median of {args.repeats} runs")
    print(
        f"{'task':8s} {'d':>3s} {'completions':>11s} {'answers':>7s} {'answers/s':>10s} {'slowest-fastest':>17s} "
        f"{'us/answer':>9s} {'mean w*r':>8s} {'all-zero':>8s}"
    )
    for name, rates in times.items():
        med = statistics.median(rates)
        i = info[name]
        print(
            f"{name:8s} {i['d']:>3d} {i['completions']:>11d} {i['answers']:>7d} {med:>10.0f} "
            f"{min(rates):>8.0f}-{max(rates):<8.0f} {1e6 / med:>9.0f} {i['mean_score']:>8.3f} {i['zero']:>8.2f}"
        )
        result[f"answers_per_s_{name}"] = round(med, 1)
    caps = sandbox_capabilities()
    print(
        f"(mean w*r, all-zero: over the scored answers, to show the workload mixes right, partial and wrong "
        f"answers; code: sandbox isolation {caps['isolation']}, concurrency {len(os.sched_getaffinity(0))} = CPU cores)"
    )
    if args.json:
        result.update(
            {
                "completions": args.completions,
                "code_completions": args.code_completions,
                "m": M,
                "repeats": args.repeats,
                "sandbox_isolation": caps["isolation"],
                "python": sys.version.split()[0],
            }
        )
        print(json.dumps(result))
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
