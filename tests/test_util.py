"""vpo._util: the shared integer-option check and JSON-lines reader."""

from __future__ import annotations

import numpy as np
import pytest

from vpo._util import NOT_A_NUMBER, fmt_interval, fmt_number, positive_int, read_jsonl


def test_positive_int_accepts_integers_and_names_what_was_wrong():
    assert positive_int(3, "m") == 3 and type(positive_int(np.int64(2), "m")) is int
    assert positive_int(0, "n", minimum=0) == 0 and positive_int(None, "k", allow_none=True) is None
    with pytest.raises(ValueError, match=r"^maze: budget must be an integer >= 1, got 0 \(try 5\)$"):
        positive_int(0, "budget", "maze", hint=" (try 5)")
    for bad in (True, 2.0, "3", None):
        with pytest.raises(ValueError, match="must be an integer >= 1"):
            positive_int(bad, "m")
    with pytest.raises(ValueError, match=r"^n must be a non-negative integer or None, got -1$"):
        positive_int(-1, "n", minimum=0, allow_none=True)

    class Custom(ValueError):
        pass

    with pytest.raises(Custom):
        positive_int(0, "k", error=Custom)


def test_read_jsonl(tmp_path):
    p = tmp_path / "rows.jsonl"
    p.write_text('{"a": 1}\n\n  \n[2]\n"x"\n')
    assert read_jsonl(p) == [{"a": 1}, [2], "x"]
    p.write_text('{"a": 1}\n{not json\n{"b": 2}\n')
    with pytest.raises(ValueError, match="rows.jsonl: line 2 is not valid JSON"):
        read_jsonl(p)
    with pytest.raises(ValueError, match="line 2"):  # not the last line: still an error
        read_jsonl(p, torn_tail=True)


def test_read_jsonl_drops_and_repairs_a_torn_last_line(tmp_path):
    p = tmp_path / "rows.jsonl"
    p.write_text('{"a": 1}\n{"b": 2}\n{"c": ')
    with pytest.raises(ValueError, match="line 3"):
        read_jsonl(p)
    with pytest.warns(RuntimeWarning, match="torn last line"):
        assert read_jsonl(p, torn_tail=True) == [{"a": 1}, {"b": 2}]
    assert p.read_text().endswith('{"c": ')  # left alone without repair
    with pytest.warns(RuntimeWarning):
        read_jsonl(p, torn_tail=True, repair=True)
    assert p.read_text() == '{"a": 1}\n{"b": 2}\n'  # appends continue on a clean line
    assert read_jsonl(p) == [{"a": 1}, {"b": 2}]


def test_every_report_writes_an_undefined_number_alike():
    """One number formatter: the demo, `vpo eval`'s report, `vpo search`'s, the constraints table and
    `vpo check` write a missing or non-finite value as "n/a" (the search reports wrote "–" before)."""
    from vpo.demo import fmt as demo_fmt
    from vpo.search import constraints, report

    for x in (None, float("nan"), float("inf"), np.float64("-inf")):
        assert fmt_number(x) == NOT_A_NUMBER == "n/a"
    assert fmt_number(np.float32(0.25), 2) == "0.25" and fmt_number(0.5, signed=True) == "+0.500"
    assert fmt_number(3) == "3.000" and fmt_number(-0.0004, 3, signed=True) == "-0.000"
    assert demo_fmt.fmt(None) == demo_fmt.ci({"mean": 0.1, "ci_low": None, "ci_high": 0.2})[7:10] == "n/a"
    assert report._ci({"mean": float("nan"), "ci_low": 0.1, "ci_high": 0.2}) == "n/a [0.100, 0.200]"
    assert constraints._cell({"mean": [None, 0.5]}, 0) == "n/a"
    assert fmt_interval(None, None, None) == "n/a" and fmt_interval(0.5, 0.25, None, 2) == "0.50"
    assert fmt_interval(0.5, float("nan"), 0.75, 2) == "0.50 [n/a, 0.75]"


def test_one_resumable_jsonl_run_for_pools_and_searches(tmp_path, monkeypatch):
    """vpo._util.JsonlRun (#52 item 7): meta match on resume, a torn tail cut, stale files removed,
    every record fsynced; PoolWriter and run_search both write through it."""
    import inspect
    import json
    import os

    from vpo._util import JsonlRun
    from vpo.search import pools
    from vpo.search.step import run as searchrun

    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
    meta, rec = tmp_path / "meta.json", tmp_path / "rec.jsonl"
    stale = tmp_path / "arrays.npz"

    def mismatch(keys, saved):
        return ValueError(f"differ: {keys} (saved {saved['task']})")

    with JsonlRun(meta, rec, {"task": "a"}, resume=True, match_keys=["task"], mismatch=mismatch) as run:
        run.write({"i": 0})
        run.write({"i": 1})
    assert len(synced) == 2
    with open(rec, "a") as f:
        f.write('{"i": 2, "tor')  # a crash mid-write
    stale.write_text("x")
    with pytest.warns(RuntimeWarning, match="torn last line"):
        run = JsonlRun(meta, rec, {"task": "a"}, resume=True, match_keys=["task"], mismatch=mismatch, stale=[stale])
    run.write({"i": 2})
    run.close()
    assert run.records == [{"i": 0}, {"i": 1}, {"i": 2}] and not stale.exists()
    assert read_jsonl(rec) == run.records
    with pytest.raises(ValueError, match=r"differ: \['task'\] \(saved a\)"):
        JsonlRun(meta, rec, {"task": "b"}, resume=True, match_keys=["task"], mismatch=mismatch)
    JsonlRun(meta, rec, {"task": "b"}, resume=False, match_keys=["task"], mismatch=mismatch).close()
    assert rec.read_text() == "" and json.loads(meta.read_text()) == {"task": "b"}
    # both callers: the pool writer and the search run open their files through it
    assert "JsonlRun(" in inspect.getsource(pools.PoolWriter) and "JsonlRun(" in inspect.getsource(searchrun)
