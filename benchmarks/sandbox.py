"""Throughput of the code sandbox: test executions per second with one sandboxed interpreter per
program (fork per test), side by side with a subprocess-per-test baseline under the same limits and
isolation, and the code task's scorer throughput (answers per second).

The baseline runs the very same programs and tests, one full sandbox launch per test (namespaces,
cgroups, limits, interpreter start), with the same concurrency, in the same run. Each figure is the
median over ``--repeats`` runs; the speedup is the ratio of the medians.

    python benchmarks/sandbox.py                 # table
    python benchmarks/sandbox.py --json          # table, then one JSON object on the last line
    python benchmarks/sandbox.py --quick         # seconds, tiny sizes (CI: does it run)

Before and after a change to the sandbox, on a shared machine whose load moves more than the change:
``--paired-with DIR`` (DIR holds another checkout's ``vpo`` package, e.g. ``git archive REV vpo |
tar -x -C DIR``) runs this benchmark ``--pairs`` times in each tree, alternating which goes first, one
run of each a pair, and reports the ratio (this tree / DIR) of every pair and their median.

    python benchmarks/sandbox.py --paired-with /tmp/vpo-before --pairs 5 --json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from vpo.tasks.code import DEFAULT_PRELUDE, CodeTask
from vpo.sandbox import Sandbox, SandboxConfig, TestInput, sandbox_capabilities

# a typical competitive-programming solution: parse, sort, aggregate
PROGRAM = (
    "import sys\n"
    "data = sys.stdin.read().split()\n"
    "n = int(data[0])\n"
    "xs = sorted(map(int, data[1:1 + n]))\n"
    "offset = {k}\n"
    "print(sum(xs[::2]) + offset - offset)\n"
)


def make_tests(num_tests: int, rng: random.Random) -> list[dict]:
    tests = []
    for _ in range(num_tests):
        xs = [rng.randint(-1000, 1000) for _ in range(rng.randint(5, 200))]
        tests.append({"input": f"{len(xs)}\n{' '.join(map(str, xs))}\n", "output": f"{sum(sorted(xs)[::2])}\n"})
    return tests


def bench_sandbox(sb: Sandbox, programs: list[str], tests: list[dict], per_test: bool) -> float:
    """Test executions per second."""
    inputs = [TestInput(stdin=t["input"]) for t in tests]
    if per_test:
        jobs = [(p, [ti]) for p in programs for ti in inputs]
    else:
        jobs = [(p, inputs) for p in programs]
    t0 = time.perf_counter()
    results = sb.run_many(jobs)
    dt = time.perf_counter() - t0
    outcomes = [o for r in results for o in r.outcomes]
    bad = [o for o in outcomes if o.status != "ok" or o.stdout not in {t["output"] for t in tests}]
    if bad:
        raise RuntimeError(f"benchmark programs failed: {bad[0]}")
    return len(outcomes) / dt


def bench_scorer(task: CodeTask, problem: dict, num_completions: int, m: int) -> float:
    """Answers scored per second through ``CodeTask.score_completions`` (parse, dedup, sandbox, compare)."""
    completions = []
    for c in range(num_completions):
        blocks = [f"```python\n{PROGRAM.format(k=c * m + j)}```" for j in range(m)]
        completions.append("Some reasoning.\n" + "\n---\n".join(blocks))
    t0 = time.perf_counter()
    batch = task.score_completions([problem] * num_completions, completions, m=m)
    dt = time.perf_counter() - t0
    if not batch.valid.all() or not (batch.rewards == 1).all():
        raise RuntimeError("scorer benchmark: some answers did not pass")
    return batch.valid.sum() / dt


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--programs", type=int, default=16, help="distinct programs per run")
    ap.add_argument("--tests", type=int, default=16, help="tests per program (the paper: up to 16)")
    ap.add_argument("--repeats", type=int, default=3, help="runs per figure (the median is reported)")
    ap.add_argument("--concurrency", type=int, default=None, help="parallel sandboxes (default: CPU cores)")
    ap.add_argument("--completions", type=int, default=8, help="completions for the scorer benchmark")
    ap.add_argument("--m", type=int, default=3, help="answers per completion for the scorer benchmark")
    ap.add_argument(
        "--quick", action="store_true", help="tiny sizes (seconds): checks the script runs, figures meaningless"
    )
    ap.add_argument("--json", action="store_true", help="print one JSON object on the last line")
    ap.add_argument("--paired-with", metavar="DIR", help="another tree's vpo package: compare, alternating runs")
    ap.add_argument("--pairs", type=int, default=4, help="with --paired-with: runs in each tree (default 4)")
    args = ap.parse_args(argv)
    if args.quick:
        args.programs, args.tests, args.repeats, args.completions = 2, 2, 1, 2
    if args.paired_with:
        return paired(args)

    rng = random.Random(0)
    tests = make_tests(args.tests, rng)
    programs = [PROGRAM.format(k=k) for k in range(args.programs)]
    cfg = SandboxConfig(timeout_s=6.0, concurrency=args.concurrency, prelude=DEFAULT_PRELUDE)
    sb = Sandbox(cfg)
    caps = sandbox_capabilities()
    task = CodeTask(
        [{"id": "bench", "question": "sum of every other sorted number", "tests": tests}],
        max_tests=args.tests,
        sandbox=cfg,
    )
    problem = task.load()[0]

    bench_sandbox(sb, programs[:2], tests, per_test=False)  # warm-up (page cache, cgroup paths)
    worker, per_test, scorer = [], [], []
    for _ in range(args.repeats):  # interleaved, so machine load hits both alike
        worker.append(bench_sandbox(sb, programs, tests, per_test=False))
        per_test.append(bench_sandbox(sb, programs, tests, per_test=True))
        scorer.append(bench_scorer(task, problem, args.completions, args.m))
    w, s, a = statistics.median(worker), statistics.median(per_test), statistics.median(scorer)
    conc = args.concurrency or len(os.sched_getaffinity(0))

    print(
        f"sandbox throughput: {args.programs} programs x {args.tests} tests, concurrency {conc}, "
        f"isolation {caps['isolation']}, median of {args.repeats}"
    )
    print(f"{'mode':44s} {'tests/s':>10s} {'runs':>30s}")
    print(f"{'worker: 1 interpreter/program, fork/test':44s} {w:10.1f} {', '.join(f'{x:.1f}' for x in worker):>30s}")
    print(f"{'baseline: 1 sandboxed subprocess/test':44s} {s:10.1f} {', '.join(f'{x:.1f}' for x in per_test):>30s}")
    print(f"{'speedup (ratio of medians)':44s} {w / s:10.2f}x")
    print(
        f"{'code scorer: answers/s (m=%d, %d tests each)' % (args.m, args.tests):44s} {a:10.1f} "
        f"{', '.join(f'{x:.1f}' for x in scorer):>30s}"
    )
    if args.json:
        print(
            json.dumps(
                {
                    "tests_per_s_worker": round(w, 2),
                    "tests_per_s_subprocess": round(s, 2),
                    "speedup_vs_subprocess_per_test": round(w / s, 3),
                    "code_answers_per_s": round(a, 2),
                    "programs": args.programs,
                    "tests_per_program": args.tests,
                    "repeats": args.repeats,
                    "concurrency": conc,
                    "isolation": caps["isolation"],
                    "python": sys.version.split()[0],
                }
            )
        )
    return 0


FIGURES = ("tests_per_s_worker", "tests_per_s_subprocess", "code_answers_per_s")


def paired_trees(paired_with: str) -> tuple[str, str]:
    """(this checkout, the ``--paired-with`` tree), refusing a tree without a ``vpo/sandbox`` package."""
    here = str(Path(__file__).resolve().parents[1])
    other = str(Path(paired_with).resolve())
    if not (Path(other) / "vpo" / "sandbox").is_dir():
        raise SystemExit(f"--paired-with {other}: no vpo/sandbox package there (git archive REV vpo | tar -x -C DIR)")
    return here, other


def run_in_tree(script: str, argv: list[str], tree: str) -> dict:
    """``script argv`` run with ``tree``'s ``vpo`` package: the JSON object on its last line."""
    r = subprocess.run(
        [sys.executable, script, *argv],
        env=dict(os.environ, PYTHONPATH=tree),
        cwd=tree,
        capture_output=True,
        text=True,
        check=False,
    )
    if r.returncode != 0:
        raise SystemExit(f"{Path(script).name} in {tree} failed:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def alternating_pairs(pairs: int, run: Callable[[str, int], dict], here: str, other: str):
    """``pairs`` pairs ``(this tree's result, the other's)`` of ``run(tree, k)``, the tree that goes
    first alternating from pair to pair; yields each pair as it finishes."""
    for k in range(pairs):
        if k % 2 == 0:
            new, old = run(here, k), run(other, k)
        else:
            old, new = run(other, k), run(here, k)
        yield new, old


def paired(args) -> int:
    """This tree against ``args.paired_with``: ``args.pairs`` runs of one repeat each, alternating."""
    here, other = paired_trees(args.paired_with)
    sizes = ["--programs", str(args.programs), "--tests", str(args.tests), "--completions", str(args.completions)]
    sizes += ["--m", str(args.m)] + (["--concurrency", str(args.concurrency)] if args.concurrency else [])

    def one(tree: str, k: int) -> dict:
        return run_in_tree(__file__, ["--repeats", "1", "--json", *sizes], tree)

    rows: list[tuple[dict, dict]] = []
    for k, (new, old) in enumerate(alternating_pairs(args.pairs, one, here, other)):
        rows.append((new, old))
        print(f"pair {k + 1}: " + ", ".join(f"{f} {new[f]:.1f} / {old[f]:.1f}" for f in FIGURES), flush=True)
    out: dict = {"pairs": args.pairs, "this_tree": here, "paired_with": other}
    for f in FIGURES:
        ratios = [n[f] / o[f] for n, o in rows]
        out[f"{f}_this"] = [n[f] for n, _ in rows]
        out[f"{f}_other"] = [o[f] for _, o in rows]
        out[f"{f}_ratios"] = [round(x, 3) for x in ratios]
        out[f"{f}_ratio_median"] = round(statistics.median(ratios), 3)
        out[f"{f}_ratio_of_medians"] = round(
            statistics.median(out[f"{f}_this"]) / statistics.median(out[f"{f}_other"]), 3
        )
        print(f"{f:24s} this/other per pair {out[f + '_ratios']}, median {out[f + '_ratio_median']}")
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
