"""Recover the invocation record of a ``vpo demo`` sitting that was killed outright, from its console log.

Before the runner wrote its record after every finished job, a sitting stopped by SIGKILL (a session's
end, the OOM killer) left nothing in ``OUT/invocations.json``: the resumed run's report then counted
only the later sittings' wall time and job times. The console log still has what the sitting did:
its first status line's time and one ``done  NAME in N s`` line per finished job. This script turns
that into a record, marked ``recovered_from``, and puts it before the later sittings:

    python scripts/sitting_from_log.py runs/animals_test.log runs/animals_test \\
        --date 2026-12-06 --commit 39f26dbbe6e14d8d04ab52156e84506897c60c66

``seconds`` is from the first status line to the last finished job: a lower bound (the jobs running
when the sitting was killed were lost and ran again in a later sitting, which counts them). Only
``done`` lines become job times, so warm starts trained before the jobs (not as jobs) count in
``seconds`` but not in ``warm_start_s``, which stays 0. The
environment is the newest record's (same machine), with the commit the sitting ran at (``--commit``;
``git_dirty`` unknown). Rerun ``vpo demo`` with the same command afterwards: every job is skipped and
the report is written again with the recovered time. A log already recovered is refused.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
from pathlib import Path

LINE = re.compile(r"^\[vpo demo (\d\d:\d\d:\d\d)\] (.*)$")
DONE = re.compile(r"^done  (.+) in (\d+) s \(\d+/\d+\)$")


def record_from_log(text: str, date: str) -> dict:
    """``started``, ``seconds`` and ``jobs_s`` of the sitting whose console output is ``text``."""
    stamps, jobs = [], {}
    day = dt.date.fromisoformat(date)
    for line in text.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        t = dt.datetime.combine(day, dt.time.fromisoformat(m.group(1)))
        if stamps and t < stamps[-1]:  # the sitting ran past midnight
            t += dt.timedelta(days=(stamps[-1] - t).days + 1)
        stamps.append(t)
        d = DONE.match(m.group(2))
        if d:
            jobs[d.group(1)] = float(d.group(2))
            last_done = t
    if not jobs:
        raise SystemExit("sitting_from_log: error: the log has no 'done  NAME in N s' line; nothing to recover")
    return {
        "started": stamps[0].strftime("%Y-%m-%dT%H:%M:%S"),
        "seconds": (last_done - stamps[0]).total_seconds(),
        "warm_start_s": 0.0,
        "jobs_s": jobs,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log", type=Path, help="the killed sitting's console output")
    ap.add_argument("out", type=Path, help="the demo's output folder (its invocations.json gets the record)")
    ap.add_argument("--date", required=True, help="the day the sitting started, YYYY-MM-DD (the log has times only)")
    ap.add_argument("--commit", required=True, help="the git commit the sitting ran at")
    args = ap.parse_args(argv)
    path = args.out / "invocations.json"
    if not path.exists():
        print(f"sitting_from_log: error: {path} does not exist; run the demo once to resume it first", file=sys.stderr)
        return 2
    rows = json.loads(path.read_text())
    if any(r.get("recovered_from") == str(args.log) for r in rows):
        print(f"sitting_from_log: error: {args.log} is already recovered in {path}", file=sys.stderr)
        return 2
    rec = record_from_log(args.log.read_text(), args.date)
    newest = rows[-1]
    env = {**newest.get("environment", {}), "git_commit": args.commit, "git_dirty": None}
    rec.update(
        settings=newest["settings"], environment=env, complete=False, interrupted=True, recovered_from=str(args.log)
    )
    rows = sorted([*rows, rec], key=lambda r: r["started"])
    path.write_text(json.dumps(rows, indent=1))
    print(f"{path}: recovered a sitting of {rec['seconds'] / 60:.1f} min and {len(rec['jobs_s'])} jobs from {args.log}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
