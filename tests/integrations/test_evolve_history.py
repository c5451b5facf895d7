"""The evolve run's history log is read like every JSON-lines log of vpo: a last row cut short by a
crash is dropped and cut from the file, so a resumed run appends cleanly; a bad row before it is an
error naming the line."""

from __future__ import annotations

import warnings

import pytest

from vpo.integrations.evolve.run import _read_history


def test_a_torn_last_row_is_dropped_and_cut(tmp_path):
    path = tmp_path / "history.jsonl"
    path.write_text('{"i": 0}\n{"i": 1}\n{"i": 2, "sc')
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert _read_history(path) == [{"i": 0}, {"i": 1}]
    assert "torn last line" in str(w[0].message)
    assert path.read_text() == '{"i": 0}\n{"i": 1}\n'
    assert _read_history(tmp_path / "none.jsonl") == []


def test_a_bad_row_in_the_middle_is_an_error(tmp_path):
    path = tmp_path / "history.jsonl"
    path.write_text('{"i": 0}\nnot json\n{"i": 2}\n')
    with pytest.raises(ValueError, match="line 2 is not valid JSON"):
        _read_history(path)
