"""A demo worker: one process that imports the training stack once and runs many ``vpo`` jobs in turn.

A ``vpo train`` or ``vpo eval`` job started as a fresh process spends ~10-25 s before its first step
on this machine (importing transformers/TRL, generating the training mazes, building the trainer);
the demo runs dozens of them. ``run_jobs`` instead keeps one worker per parallel slot and sends it
jobs: each job is what ``python -m MODULE ARGS`` (or ``-c CODE``) would run, executed in this
process with file descriptors 1 and 2 pointed at the job's log, so logs, exit codes and outputs are
unchanged. What a job leaves in the process (imported modules, caches such as the generated mazes)
is what makes the next job cheaper; each job seeds its own random state, as it does as a process.

Protocol: one JSON object per line on stdin (``{"argv": [...], "log": path}``, the arguments after
``python``), one JSON line per finished job (``{"rc": int}``) on the file descriptor named by
``argv[1]``. A job that raises is logged and reported with rc 1; the worker keeps serving (the
parent stops the demo on any failure).
"""

from __future__ import annotations

import gc
import json
import os
import runpy
import sys
import traceback
import warnings


def _execute(args: list[str]) -> int:
    """What ``python ARGS`` would do, in this process: ``-m MODULE ...`` or ``-c CODE ...``."""
    if len(args) < 2 or args[0] not in ("-m", "-c"):
        raise ValueError(f"a worker job is '-m MODULE ...' or '-c CODE ...', not {args[:2]}")
    saved_argv = sys.argv
    try:
        if args[0] == "-m":
            sys.argv = [args[1], *args[2:]]
            with warnings.catch_warnings():  # runpy's "found in sys.modules": expected, the second job on
                # reruns an imported module as __main__; every other warning of the job (the trainer's
                # zero-signal and scorer-error warnings among them) still reaches its log
                warnings.filterwarnings("ignore", message=r".*found in sys\.modules", category=RuntimeWarning)
                runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = ["-c", *args[2:]]
            exec(compile(args[1], "<string>", "exec"), {"__name__": "__main__"})
        return 0
    except SystemExit as exc:  # sys.exit(main()) and argparse
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv = saved_argv


def run_job(args: list[str], log: str) -> int:
    """Run ``python ARGS`` in this process with stdout and stderr (the file descriptors, so C-level
    output too) written to ``log``; returns the exit code (1 for an exception, whose traceback is
    logged)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = (os.dup(1), os.dup(2))
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        try:
            rc = _execute(args)
        except Exception:
            traceback.print_exc()
            rc = 1
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for f in (fd, *saved):
            os.close(f)
    gc.collect()  # the job's model, optimizer and dataset go before the next job allocates its own
    return int(rc)


def serve(jobs_in, results_out) -> None:
    for line in jobs_in:
        if not line.strip():
            continue
        job = json.loads(line)
        rc = run_job(list(job["argv"]), str(job["log"]))
        results_out.write(json.dumps({"rc": rc}) + "\n")
        results_out.flush()


if __name__ == "__main__":  # pragma: no cover - started by vpo.demo.jobs
    with os.fdopen(int(sys.argv[1]), "w") as out:
        serve(sys.stdin, out)
