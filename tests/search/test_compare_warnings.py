"""``vpo compare``'s console warnings name ``vpo compare`` (they said ``vpo eval``, the prefix the
shared setup module gives ``vpo eval``'s own lines), and ``vpo eval``'s prefix is back afterwards.

Two saved search reports built from synthetic records, no model: a best-of-n run that finished 10
answers per prompt and a beam run that finished 2, which warns on its own (few answers finished) and
beside the best-of-n run (under half of its answers)."""

from __future__ import annotations

from vpo.search import evalsetup
from vpo.search.step.report import write_search_report
from vpo.search.step.run import search_metrics
from helpers.step_records import search_record  # noqa: E402


def _meta(search: str) -> dict:
    s = {"search": search, "budget_tokens": 100, "step": "tokens:4", "step_scorer": "task", "step_aggregate": "last"}
    if search == "beam":
        s.update(beam_width=4, expand=4)
    return {"target_weights": [0.5, 0.5], "objectives": ["a", "b"], "search": s, "task": "t", "model": "m"}


def test_vpo_compare_warnings_say_vpo_compare(tmp_path, capsys):
    from vpo.cli import main as vpo_main

    many = [search_record(f"p{i}", [(0.5, 10 * (j + 1)) for j in range(10)]) for i in range(2)]
    few = [search_record("p0", [(0.5, 60), (1.0, 100)]), search_record("p1", [(0.2, 30), (0.3, 80), (0.9, 120)])]
    bon = search_metrics(_meta("bon"), many, num_points=2, bootstrap=0)
    beam = search_metrics(_meta("beam"), few, num_points=2, bootstrap=0)
    assert "warnings" not in bon and beam["warnings"]
    write_search_report({"bon": bon}, tmp_path / "bon", plots=False)
    write_search_report({"beam": beam}, tmp_path / "beam", plots=False)
    capsys.readouterr()

    code = vpo_main(
        ["compare", str(tmp_path / "bon"), str(tmp_path / "beam"), "--out", str(tmp_path / "c"), "--no-plots"]
    )
    err = capsys.readouterr().err
    assert code == 0, err
    lines = [x for x in err.splitlines() if ": warning: " in x]
    # the beam run's own warning and the one beside best-of-n, each with compare's prefix
    assert any(x.startswith("vpo compare: warning: beam: few answers finished") for x in lines), err
    assert any(x.startswith("vpo compare: warning: beam finished 2.0 answers per prompt") for x in lines), err
    assert all(x.startswith("vpo compare: warning: ") for x in lines) and "vpo eval" not in err, err
    assert evalsetup.PROG == "vpo eval"  # restored for vpo eval's own lines
