"""A ``vpo demo`` interrupted and resumed reports the wall time of all its sittings, the interrupted
one included, and the last alone (#51 item 6): the report said "Wall time: 2.7 min" for a run of
about 40 min, the last sitting's. The stages are faked: only the timing bookkeeping runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from vpo.demo import DemoConfig, runner
from vpo.demo.report import _timing_lines


def test_an_interrupted_sitting_counts_in_the_resumed_demos_wall_time(tmp_path, monkeypatch):
    cfg = DemoConfig(out=str(tmp_path / "demo"))
    monkeypatch.setattr(runner, "environment", lambda: {"versions": {}})
    monkeypatch.setattr(runner, "warm_start", lambda cfg, out, w: out / "warm")
    monkeypatch.setattr(runner, "build_jobs", lambda cfg, out, ws: [])
    monkeypatch.setattr(runner, "aggregate", lambda cfg, out: {"config": {"jobs": cfg.jobs}})
    monkeypatch.setattr(runner, "write_report", lambda agg, out: None)

    def interrupted_jobs(jobs, parallel, workers=True, log_dir=None, times=None, on_done=None):
        if times is not None:
            times["train vpo_s0"] = 0.4  # one job finished before Ctrl-C
        time.sleep(0.5)
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "run_jobs", interrupted_jobs)
    with pytest.raises(KeyboardInterrupt):
        runner.run_demo(cfg)
    first = json.loads((tmp_path / "demo" / "invocations.json").read_text())
    assert len(first) == 1 and first[0]["interrupted"] and first[0]["seconds"] >= 0.5
    assert first[0]["jobs_s"] == {"train vpo_s0": 0.4} and not first[0]["complete"]

    monkeypatch.setattr(
        runner, "run_jobs", lambda jobs, parallel, workers=True, log_dir=None, times=None, on_done=None: {}
    )
    agg = runner.run_demo(cfg)
    assert agg["timing"]["invocations"] == 2 and agg["timing"]["jobs_s"] == {"train vpo_s0": 0.4}
    assert agg["wall_seconds"] == pytest.approx(first[0]["seconds"] + agg["last_invocation_seconds"])
    assert agg["wall_seconds"] >= 0.5 > agg["last_invocation_seconds"]
    agg["wall_seconds"], agg["last_invocation_seconds"] = 40 * 60.0, 2.7 * 60
    line = _timing_lines(agg)[0]
    assert (
        line.startswith("Wall time: 40.0 min on this machine") and "summed over 2 sittings (the last 2.7 min)" in line
    )
    agg["last_invocation_seconds"] = 1.6  # a last sitting that only wrote the report: seconds, not "0.0 min"
    assert "summed over 2 sittings (the last 2 s)." in _timing_lines(agg)[0]
    agg["timing"]["invocations"] = 1
    assert "sittings" not in _timing_lines(agg)[0]


KILLED_SITTING = """
import sys, time
from pathlib import Path
from vpo.demo import DemoConfig, runner
from vpo.demo.jobs import Job

out = Path(sys.argv[1])
runner.environment = lambda: {"versions": {}}
runner.warm_start = lambda cfg, out, w: out / "warm"

def job(name, seconds):
    done = out / f"{name}.done"
    code = f"import pathlib, time; time.sleep({seconds}); pathlib.Path({str(done)!r}).write_text('x')"
    return Job(name, [sys.executable, "-c", code], out / f"{name}.log", done)

runner.build_jobs = lambda cfg, o, ws: [job("quick", 0.1), job("slow", 120)]
runner.run_demo(DemoConfig(out=str(out), jobs=2), workers=False)
"""


def test_a_sitting_killed_outright_keeps_the_time_of_every_job_it_finished(tmp_path):
    """SIGKILL (a session's end, the OOM killer) runs no handler: the sitting's record must already be
    on disk after each finished job. The first animals test sitting (2 h 17 min of warm starts and RL)
    was killed that way and its record was lost, because the record was written only on the way out."""
    out = tmp_path / "demo"
    out.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(KILLED_SITTING), str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.time() + 60
        while time.time() < deadline and not (out / "quick.done.settings.json").exists():
            assert proc.poll() is None, proc.stdout.read().decode()
            time.sleep(0.1)
        time.sleep(0.5)  # the runner writes its record right after marking the job done
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    rows = json.loads((out / "invocations.json").read_text())
    assert len(rows) == 1 and not rows[0]["complete"] and "interrupted" not in rows[0]
    assert set(rows[0]["jobs_s"]) == {"quick"} and rows[0]["jobs_s"]["quick"] > 0
    assert rows[0]["seconds"] >= rows[0]["jobs_s"]["quick"]


def test_a_killed_sitting_is_recovered_from_its_console_log(tmp_path):
    """scripts/sitting_from_log.py: the first status line starts the sitting, every ``done`` line is a
    job, the last one ends it (past midnight too); a log recovered twice is refused."""
    import importlib.util

    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "scripts" / "sitting_from_log.py"
    spec = importlib.util.spec_from_file_location("sitting_from_log", script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    log = tmp_path / "sitting.log"
    log.write_text(
        "vpo demo: 3 methods x 1 seed(s), about 9 min\n"
        "[vpo demo 23:58:00] 4 jobs, 2 at a time\n"
        "[vpo demo 23:59:30] done  warm start s1 in 90 s (1/4)\n"
        "[vpo demo 00:01:00] running: train vpo s1 (90 s)\n"
        "[vpo demo 00:02:10] done  train vpo s1 in 160 s (2/4)\n"
        "[vpo demo 00:02:30] running: eval vpo_s1 (20 s)\n"
    )
    rec = mod.record_from_log(log.read_text(), "2026-12-06")
    assert rec["started"] == "2026-12-06T23:58:00" and rec["seconds"] == 250.0
    assert rec["jobs_s"] == {"warm start s1": 90.0, "train vpo s1": 160.0}
    out = tmp_path / "demo"
    out.mkdir()
    later = {"started": "2026-12-07T09:00:00", "seconds": 60.0, "jobs_s": {"eval vpo_s1": 50.0},
             "settings": "abc", "environment": {"git_commit": "new"}, "complete": True}  # fmt: skip
    (out / "invocations.json").write_text(json.dumps([later]))
    assert mod.main([str(log), str(out), "--date", "2026-12-06", "--commit", "old"]) == 0
    rows = json.loads((out / "invocations.json").read_text())
    assert [r["started"] for r in rows] == ["2026-12-06T23:58:00", "2026-12-07T09:00:00"]
    assert rows[0]["settings"] == "abc" and rows[0]["environment"]["git_commit"] == "old"
    assert rows[0]["interrupted"] and not rows[0]["complete"]
    assert mod.main([str(log), str(out), "--date", "2026-12-06", "--commit", "old"]) == 2
