"""Cost of the sandbox's seccomp filter: the same programs in sandboxes with the filter (the
default) and without it (``SandboxConfig(seccomp=False)``), interleaved round by round.

The worker installs the filter once and every test process inherits it, so the cost splits into a
per-sandbox part (building and installing it) and a per-test part (fork, privilege drop and reaping
under the filter, and each system call going through it). Two programs: a trivial one (read a
number, print its double) and a syscall-heavy one (``os.stat`` in a loop), which gives the cost per
system call. Per-test times are the worker's own (fork to reap, ``TestOutcome.time_s``); each round
takes the median over its tests, and the figures are medians over rounds of the per-round
difference and ratio (on / off), so a load burst hits both sides.

    python benchmarks/sandbox_seccomp.py                 # table
    python benchmarks/sandbox_seccomp.py --json          # table, then one JSON object on the last line
    python benchmarks/sandbox_seccomp.py --quick         # seconds, tiny sizes (CI: does it run)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from vpo.sandbox import Sandbox, SandboxConfig, TestInput

TRIVIAL = "print(2 * int(input()))\n"
STAT_CALLS = 20_000
SYSCALL_HEAVY = f"import os\nfor _ in range({STAT_CALLS}):\n    os.stat('.')\nprint(2 * int(input()))\n"


def _per_test_ms(sb: Sandbox, program: str, tests: int, walls: list[float] | None = None) -> float:
    res = sb.run(program, [TestInput(stdin=f"{i}\n") for i in range(tests)])
    bad = [o for o in res.outcomes if o.status != "ok"]
    if bad:
        raise RuntimeError(f"benchmark program failed: {bad[0].status} {bad[0].stderr} {res.error}")
    if walls is not None:  # per-sandbox fixed cost: the wall time less the tests' own time
        walls.append((res.wall_s - sum(o.time_s for o in res.outcomes)) * 1e3)
    return statistics.median(o.time_s for o in res.outcomes) * 1e3


def measure(rounds: int, tests: int, heavy_tests: int) -> dict:
    on = Sandbox(SandboxConfig(timeout_s=10.0, seccomp=True))
    off = Sandbox(SandboxConfig(timeout_s=10.0, seccomp=False))
    rows: dict[str, list[float]] = {k: [] for k in ("on", "off", "heavy_on", "heavy_off", "fixed_on", "fixed_off")}
    _per_test_ms(on, TRIVIAL, 2), _per_test_ms(off, TRIVIAL, 2)  # warm-up: page cache, cgroup parents
    t0 = time.perf_counter()
    for r in range(rounds):
        order = ((on, "on"), (off, "off")) if r % 2 == 0 else ((off, "off"), (on, "on"))
        for sb, key in order:
            rows[key].append(_per_test_ms(sb, TRIVIAL, tests, rows["fixed_" + key]))
            rows["heavy_" + key].append(_per_test_ms(sb, SYSCALL_HEAVY, heavy_tests))
    med = statistics.median
    cost = [a - b for a, b in zip(rows["on"], rows["off"])]
    ratio = [a / b for a, b in zip(rows["on"], rows["off"])]
    heavy_ratio = [a / b for a, b in zip(rows["heavy_on"], rows["heavy_off"])]
    heavy_cost = [(a - b) * 1e3 / STAT_CALLS for a, b in zip(rows["heavy_on"], rows["heavy_off"])]
    return {
        "rounds": rounds,
        "tests_per_sandbox": tests,
        "per_test_ms_seccomp_on": round(med(rows["on"]), 3),
        "per_test_ms_seccomp_off": round(med(rows["off"]), 3),
        "seccomp_cost_ms_median": round(med(cost), 3),
        "seccomp_cost_ms_iqr": [round(x, 3) for x in _quartiles(cost)],
        "seccomp_overhead_ratio": round(med(ratio), 3),
        "per_sandbox_fixed_ms_seccomp_on": round(med(rows["fixed_on"]), 2),
        "per_sandbox_fixed_ms_seccomp_off": round(med(rows["fixed_off"]), 2),
        "seccomp_cost_ms_per_sandbox_median": round(med(a - b for a, b in zip(rows["fixed_on"], rows["fixed_off"])), 2),
        "syscall_heavy_ms_seccomp_on": round(med(rows["heavy_on"]), 3),
        "syscall_heavy_ms_seccomp_off": round(med(rows["heavy_off"]), 3),
        "syscall_heavy_overhead_ratio": round(med(heavy_ratio), 3),
        "seccomp_cost_us_per_syscall": round(med(heavy_cost), 4),
        "wall_s": round(time.perf_counter() - t0, 1),
    }


def _quartiles(xs: list[float]) -> tuple[float, float]:
    if len(xs) < 2:
        return (xs[0], xs[0])
    q = statistics.quantiles(xs, n=4)
    return (q[0], q[2])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=15, help="interleaved on/off rounds (default 15)")
    ap.add_argument("--tests", type=int, default=20, help="tests of the trivial program per sandbox (default 20)")
    ap.add_argument("--heavy-tests", type=int, default=3, help="tests of the syscall-heavy program per sandbox")
    ap.add_argument("--quick", action="store_true", help="3 rounds of 4 tests: checks that it runs (CI)")
    ap.add_argument("--json", action="store_true", help="also print one JSON object on the last line")
    args = ap.parse_args(argv)
    if args.quick:
        args.rounds, args.tests, args.heavy_tests = 3, 4, 1
    out = measure(args.rounds, args.tests, args.heavy_tests)
    print(
        f"seccomp cost per test ({out['rounds']} interleaved rounds, {out['tests_per_sandbox']} tests per sandbox, "
        "medians)"
    )
    print(f"{'':34s} {'filter on':>10s} {'filter off':>10s} {'on/off':>8s}")
    print(
        f"{'trivial program, ms per test':34s} {out['per_test_ms_seccomp_on']:10.3f} "
        f"{out['per_test_ms_seccomp_off']:10.3f} {out['seccomp_overhead_ratio']:8.3f}"
    )
    print(
        f"{f'{STAT_CALLS} os.stat calls, ms per test':34s} {out['syscall_heavy_ms_seccomp_on']:10.3f} "
        f"{out['syscall_heavy_ms_seccomp_off']:10.3f} {out['syscall_heavy_overhead_ratio']:8.3f}"
    )
    print(
        f"{'sandbox fixed cost (wall - tests), ms':34s} {out['per_sandbox_fixed_ms_seccomp_on']:10.2f} "
        f"{out['per_sandbox_fixed_ms_seccomp_off']:10.2f}"
    )
    print(
        f"cost per sandbox: {out['seccomp_cost_ms_per_sandbox_median']:.2f} ms; "
        f"cost per test: {out['seccomp_cost_ms_median']:.3f} ms (IQR over rounds {out['seccomp_cost_ms_iqr']}); "
        f"per system call: {out['seccomp_cost_us_per_syscall']:.4f} us"
    )
    if args.json:
        print(json.dumps(out))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
