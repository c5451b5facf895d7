"""Soak test of the code sandbox: many sandboxes for minutes, well-behaved, failing and hostile
programs mixed, ``concurrency`` (default: usable cores) at a time, then an account of what is left.

Before (after a warm-up of one program of each kind) and after the run it counts: processes left
over (descendants of this process, processes of the sandbox uids it used, processes carrying the
hostile programs' marker), per-sandbox cgroups and scratch directories of this process, the host
process's open fds and its RSS. Throughput (programs/s) is reported per time slice, with RSS and fd
count sampled at each slice's end, to show drift. Every outcome is checked against the statuses its
kind may end with (``unexpected_outcomes``; ``sandbox_errors`` counts the sandbox's own failures).

    python benchmarks/sandbox_soak.py --seconds 180      # table
    python benchmarks/sandbox_soak.py --json             # table, then one JSON object on the last line
    python benchmarks/sandbox_soak.py --quick            # a few seconds (CI: does it run)

Before and after a change to the sandbox, on a shared machine whose load moves more than the change:
``--paired-with DIR`` (DIR holds another checkout's ``vpo`` package, e.g. ``git archive REV vpo | tar
-x -C DIR``) runs the soak ``--pairs`` times in each tree, one run of each a pair (``--seconds`` each,
default 30 here), alternating which goes first, both runs of a pair with the same program order, and
reports programs/s of every run, the ratio (this tree / DIR) of every pair, their median, the ratio
of the medians, the 1-minute load average around each run, and each run's leak and outcome counts.

    python benchmarks/sandbox_soak.py --paired-with /tmp/vpo-before --pairs 6 --seconds 30 --json
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from vpo.sandbox import Sandbox, SandboxConfig, TestInput
from vpo.sandbox.host import _cpu_count
from vpo.sandbox.probe import cgroup_dirs

MARKER = f"vposoak{os.getpid()}x"
SUM_EVEN = "import sys\nxs = sorted(map(int, sys.stdin.read().split()[1:]))\nprint(sum(xs[::2]))\n"


def _stdin_tests(k: int) -> list[TestInput]:
    return [TestInput(stdin=f"3\n{i} {2 * i} {i - 5}\n") for i in range(k)]


# kind -> (category, program, tests, statuses it may end with)
PROGRAMS: dict[str, tuple[str, str, list[TestInput], set[str]]] = {
    "sum_even": ("good", SUM_EVEN, _stdin_tests(3), {"ok"}),
    "call_based": (
        "good",
        "class Solution:\n    def twice(self, x):\n        return [x, x]\n",
        [TestInput(call="twice", args=(i,)) for i in range(3)],
        {"ok"},
    ),
    "threads_ok": (
        "good",
        "import threading\nt = threading.Thread(target=print, args=(1,))\nt.start(); t.join()\n",
        _stdin_tests(2),
        {"ok"},
    ),
    "exception": ("failing", "raise ValueError('no')\n", _stdin_tests(2), {"runtime_error"}),
    "syntax_error": ("failing", "def f(:\n", _stdin_tests(2), {"syntax_error"}),
    "exit_3": ("failing", "import sys\nsys.exit(3)\n", _stdin_tests(2), {"runtime_error"}),
    "wrong_answer": ("failing", "print('nope')\n", _stdin_tests(2), {"ok"}),
    "infinite_loop": ("hostile", "while True:\n    pass\n", _stdin_tests(1), {"timeout"}),
    "fork_bomb": (
        "hostile",
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
        _stdin_tests(1),
        {"timeout", "killed"},
    ),
    "memory_bomb": ("hostile", "x = bytearray(8 * 2**30)\n", _stdin_tests(2), {"memory_limit"}),
    "daemon": (
        "hostile",
        "import os\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
        f"        os.execv('/bin/sleep', ['{MARKER}', '600'])\n    os._exit(0)\nprint(1)\n",
        _stdin_tests(2),
        {"ok"},
    ),
    "kill_parent": (
        "hostile",
        "import os, signal\nfor t in (os.getppid(), 1, -1):\n    try:\n"
        "        os.kill(t, signal.SIGKILL)\n    except OSError:\n        pass\n",
        _stdin_tests(2),
        {"ok"},
    ),
    "syscalls": (
        "hostile",
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "print(libc.unshare(0x10000000), libc.ptrace(16, 1, 0, 0), libc.personality(0x0400000))\n",
        _stdin_tests(2),
        {"ok"},
    ),
    "output_flood": (
        "hostile",
        "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n",
        _stdin_tests(2),
        {"output_limit"},
    ),
    "fd_exhaust": (
        "hostile",
        "fs = []\ntry:\n    while True:\n        fs.append(open('/dev/null'))\nexcept OSError:\n    print(len(fs))\n",
        _stdin_tests(2),
        {"ok"},
    ),
    "fill_scratch": (
        "hostile",
        "i = 0\nwhile True:\n    open(f'f{i}', 'wb').write(b'x' * (1 << 20))\n    i += 1\n",
        _stdin_tests(2),
        {"runtime_error", "output_limit"},
    ),
}
WEIGHTS = {"sum_even": 6, "call_based": 3, "threads_ok": 1}  # others: 1


def _schedule(seed: int) -> list[str]:
    kinds = [k for k in PROGRAMS for _ in range(WEIGHTS.get(k, 1))]
    random.Random(seed).shuffle(kinds)
    return kinds


# -- host state ------------------------------------------------------------------------------------


def _proc_table() -> dict[int, tuple[int, int, str]]:
    """pid -> (ppid, uid, cmdline) for every process we can read."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
            out[int(name)] = (int(fields["PPid"]), int(fields["Uid"].split()[0]), cmd)
        except (OSError, KeyError, ValueError):
            continue
    return out


def leftover_processes(uids: set[int]) -> list[str]:
    """Descendants of this process, processes of ``uids`` and processes carrying the marker."""
    table = _proc_table()
    mine, frontier = set(), {os.getpid()}
    while frontier:
        frontier = {p for p, (pp, _, _) in table.items() if pp in frontier} - mine
        mine |= frontier
    return [f"{p} uid={u} {c[:60]}" for p, (_, u, c) in table.items() if p in mine or u in uids or MARKER in c]


def sandbox_cgroups() -> list[str]:
    return [d for base in cgroup_dirs().values() for d in glob.glob(os.path.join(base, f"vpo-sbx-{os.getpid()}-*"))]


def scratch_dirs(root: str) -> list[str]:
    return os.listdir(root) + glob.glob(os.path.join(tempfile.gettempdir(), f"vpo-sbx-{os.getpid()}-*"))


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def snapshot(root: str, uids: set[int]) -> dict:
    return {
        "processes": leftover_processes(uids),
        "cgroups": sandbox_cgroups(),
        "scratch": scratch_dirs(root),
        "fds": open_fds(),
        "rss_mb": rss_mb(),
    }


# -- the soak ----------------------------------------------------------------------------------------


def soak(seconds: float, slices: int, concurrency: int, seed: int = 0) -> dict:  # noqa: C901 (one measured run)
    root = tempfile.mkdtemp(prefix="vpo-soak-")
    cfg = SandboxConfig(
        timeout_s=1.0, memory_mb=256, max_processes=8, scratch_mb=16, scratch_root=root, concurrency=concurrency
    )
    sb = Sandbox(cfg)
    uids: set[int] = set()
    lock = threading.Lock()
    done: list[tuple[float, str, bool, bool]] = []  # (finish time, kind, as expected, sandbox error)
    unexpected: list[str] = []
    schedule = _schedule(seed)
    counter = iter(range(10**9))

    def run_one(kind: str) -> tuple[bool, bool]:
        _, prog, tests, allowed = PROGRAMS[kind]
        res = sb.run(prog, tests)
        statuses = [o.status for o in res.outcomes]
        ok = res.error is None and all(s in allowed for s in statuses)
        with lock:
            if res.uid is not None:
                uids.add(res.uid)
            if not ok and len(unexpected) < 20:
                unexpected.append(f"{kind}: {statuses} {res.error or ''} {res.outcomes[0].stderr[-200:]}")
        # the sandbox's own failures: sandbox_error outcomes, or (trees since #50) a result marked unavailable
        return ok, "sandbox_error" in statuses or getattr(res, "unavailable", None) is not None

    for kind in PROGRAMS:  # warm-up: one of each kind, before the "before" snapshot
        run_one(kind)
    with lock:
        unexpected.clear()
    time.sleep(0.5)
    before = snapshot(root, uids)
    t0 = time.monotonic()
    deadline = t0 + seconds
    samples: list[dict] = []

    def worker() -> None:
        while time.monotonic() < deadline:
            with lock:
                k = next(counter)
            kind = schedule[k % len(schedule)]
            ok, sberr = run_one(kind)
            with lock:
                done.append((time.monotonic() - t0, kind, ok, sberr))

    def monitor() -> None:
        for s in range(1, slices + 1):
            time.sleep(max(0.0, t0 + s * seconds / slices - time.monotonic()))
            samples.append({"t": round(time.monotonic() - t0, 1), "rss_mb": round(rss_mb(), 1), "fds": open_fds()})

    threads = [threading.Thread(target=worker) for _ in range(concurrency)] + [threading.Thread(target=monitor)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    # let the kernel finish tearing down the last namespaces, then count what is left
    settle0 = time.monotonic()
    after = snapshot(root, uids)
    while (after["processes"] or after["cgroups"]) and time.monotonic() - settle0 < 5:
        time.sleep(0.2)
        after = snapshot(root, uids)
    settle = time.monotonic() - settle0
    shutil.rmtree(root, ignore_errors=True)

    width = seconds / slices
    per_slice = [sum(1 for t, *_ in done if s * width <= t < (s + 1) * width) / width for s in range(slices)]
    kinds = {c: sum(1 for _, k, _, _ in done if PROGRAMS[k][0] == c) for c in ("good", "failing", "hostile")}
    tests = sum(len(PROGRAMS[k][2]) for _, k, _, _ in done)
    return {
        "seconds": round(wall, 1),
        "concurrency": concurrency,
        "programs": len(done),
        "tests": tests,
        "programs_by_category": kinds,
        "programs_per_s": round(len(done) / wall, 2),
        "throughput_per_slice": [round(x, 2) for x in per_slice],
        "throughput_first_slice": round(per_slice[0], 2),
        "throughput_last_slice": round(per_slice[-1], 2),
        "throughput_drift_ratio": round(per_slice[-1] / per_slice[0], 3) if per_slice[0] else None,
        "unexpected_outcomes": sum(1 for *_, ok, _ in done if not ok),
        "sandbox_errors": sum(1 for *_, e in done if e),
        "unexpected_examples": unexpected[:5],
        "leaked_processes": len(after["processes"]) - len(before["processes"]),
        "leaked_process_examples": after["processes"][:5],
        "leaked_cgroups": len(after["cgroups"]) - len(before["cgroups"]),
        "leaked_scratch_dirs": len(after["scratch"]) - len(before["scratch"]),
        "fd_before": before["fds"],
        "fd_after": after["fds"],
        "fd_delta": after["fds"] - before["fds"],
        "rss_before_mb": round(before["rss_mb"], 1),
        "rss_after_mb": round(after["rss_mb"], 1),
        "rss_delta_mb": round(after["rss_mb"] - before["rss_mb"], 1),
        "rss_fd_per_slice": samples,
        "settle_s": round(settle, 2),
        "sandbox_uids": len(uids),
        "isolation": sb.isolation,
    }


PAIRED_COUNTS = ("unexpected_outcomes", "sandbox_errors", "leaked_processes", "leaked_cgroups", "leaked_scratch_dirs")


def paired(args) -> dict:
    """This tree against ``args.paired_with``: ``args.pairs`` soaks of ``args.seconds`` in each tree, one
    of each a pair, alternating which goes first; the same ``--seed`` (program order) within a pair."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from sandbox import alternating_pairs, paired_trees, run_in_tree  # the throughput benchmark's paired runs

    here, other = paired_trees(args.paired_with)
    extra = ["--concurrency", str(args.concurrency)] if args.concurrency else []

    def one(tree: str, k: int) -> dict:
        argv = ["--seconds", str(args.seconds), "--slices", "2", "--seed", str(args.seed + k), "--json", *extra]
        load0 = os.getloadavg()[0]
        out = run_in_tree(__file__, argv, tree)
        out["load_1min"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
        return out

    rows: list[tuple[dict, dict]] = []
    for k, (new, old) in enumerate(alternating_pairs(args.pairs, one, here, other)):
        rows.append((new, old))
        print(
            f"pair {k + 1}: programs/s {new['programs_per_s']:.2f} / {old['programs_per_s']:.2f} "
            f"= {new['programs_per_s'] / old['programs_per_s']:.3f} (load {new['load_1min']} / {old['load_1min']})",
            flush=True,
        )
    this = [n["programs_per_s"] for n, _ in rows]
    base = [o["programs_per_s"] for _, o in rows]
    ratios = [n / o for n, o in zip(this, base)]
    out = {
        "pairs": args.pairs,
        "seconds_per_run": args.seconds,
        "this_tree": here,
        "paired_with": other,
        "programs_per_s_this": this,
        "programs_per_s_other": base,
        "programs_per_s_median_this": round(statistics.median(this), 3),
        "programs_per_s_median_other": round(statistics.median(base), 3),
        "ratios": [round(x, 3) for x in ratios],
        "ratio_median": round(statistics.median(ratios), 3),
        "ratio_of_medians": round(statistics.median(this) / statistics.median(base), 3),
        "pairs_below_1": sum(x < 1 for x in ratios),
        "load_1min_this": [n["load_1min"] for n, _ in rows],
        "load_1min_other": [o["load_1min"] for _, o in rows],
    }
    for key in PAIRED_COUNTS:
        out[f"{key}_this"] = [n[key] for n, _ in rows]
        out[f"{key}_other"] = [o[key] for _, o in rows]
    print(
        f"programs/s medians: this {out['programs_per_s_median_this']}, other {out['programs_per_s_median_other']}; "
        f"this/other per pair {out['ratios']}, median {out['ratio_median']}, ratio of medians "
        f"{out['ratio_of_medians']} ({out['pairs_below_1']} of {args.pairs} pairs below 1)"
    )
    for key in PAIRED_COUNTS:
        print(f"  {key:22s} this {out[key + '_this']}  other {out[key + '_other']}")
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=None, help="how long to run (default 180; paired: 30 a run)")
    ap.add_argument("--slices", type=int, default=6, help="time slices for the throughput series (default 6)")
    ap.add_argument("--concurrency", type=int, default=None, help="sandboxes at once (default: usable cores)")
    ap.add_argument("--seed", type=int, default=0, help="order of the program mix")
    ap.add_argument("--quick", action="store_true", help="4 seconds, 2 slices: checks that it runs (CI)")
    ap.add_argument("--json", action="store_true", help="also print one JSON object on the last line")
    ap.add_argument("--paired-with", metavar="DIR", help="another tree's vpo package: compare, alternating runs")
    ap.add_argument("--pairs", type=int, default=4, help="with --paired-with: runs in each tree (default 4)")
    args = ap.parse_args(argv)
    if args.quick:
        args.seconds, args.slices = 4.0, 2
    if args.paired_with:
        args.seconds = args.seconds or 30.0
        out = paired(args)
        if args.json:
            print(json.dumps(out))
        sys.stdout.flush()
        return
    args.seconds = args.seconds or 180.0
    out = soak(args.seconds, args.slices, args.concurrency or _cpu_count(), args.seed)
    print(
        f"sandbox soak: {out['programs']} programs ({out['tests']} tests; {out['programs_by_category']}) in "
        f"{out['seconds']} s, concurrency {out['concurrency']}, isolation {out['isolation']}"
    )
    print(
        f"  throughput per slice (programs/s): {out['throughput_per_slice']}  drift last/first: "
        f"{out['throughput_drift_ratio']}"
    )
    print(f"  RSS / fds at each slice end: {[(s['rss_mb'], s['fds']) for s in out['rss_fd_per_slice']]}")
    print(f"  {'':22s} {'before':>9s} {'after':>9s} {'delta':>7s}")
    print(f"  {'leaked processes':22s} {'':>9s} {'':>9s} {out['leaked_processes']:7d}")
    print(f"  {'leaked cgroups':22s} {'':>9s} {'':>9s} {out['leaked_cgroups']:7d}")
    print(f"  {'leaked scratch dirs':22s} {'':>9s} {'':>9s} {out['leaked_scratch_dirs']:7d}")
    print(f"  {'host open fds':22s} {out['fd_before']:9d} {out['fd_after']:9d} {out['fd_delta']:7d}")
    print(f"  {'host RSS (MB)':22s} {out['rss_before_mb']:9.1f} {out['rss_after_mb']:9.1f} {out['rss_delta_mb']:7.1f}")
    print(
        f"  unexpected outcomes: {out['unexpected_outcomes']} (sandbox errors: {out['sandbox_errors']})"
        + "".join(f"\n    {e}" for e in out["unexpected_examples"])
    )
    if args.json:
        print(json.dumps(out))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
