"""A ``vpo demo`` interrupted and resumed reports the wall time of all its sittings, the interrupted
one included, and the last alone (#51 item 6): the report said "Wall time: 2.7 min" for a run of
about 40 min, the last sitting's. The stages are faked: only the timing bookkeeping runs."""

from __future__ import annotations

import json
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

    def interrupted_jobs(jobs, parallel, workers=True, log_dir=None, times=None):
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

    monkeypatch.setattr(runner, "run_jobs", lambda jobs, parallel, workers=True, log_dir=None, times=None: {})
    agg = runner.run_demo(cfg)
    assert agg["timing"]["invocations"] == 2 and agg["timing"]["jobs_s"] == {"train vpo_s0": 0.4}
    assert agg["wall_seconds"] == pytest.approx(first[0]["seconds"] + agg["last_invocation_seconds"])
    assert agg["wall_seconds"] >= 0.5 > agg["last_invocation_seconds"]
    agg["wall_seconds"], agg["last_invocation_seconds"] = 40 * 60.0, 2.7 * 60
    line = _timing_lines(agg)[0]
    assert (
        line.startswith("Wall time: 40.0 min on this machine") and "summed over 2 sittings (the last 2.7 min)" in line
    )
    agg["timing"]["invocations"] = 1
    assert "sittings" not in _timing_lines(agg)[0]
