"""Selection by an imperfect verifier: with an exact selector it is best@k itself (same draws), a
noisier one keeps worse answers and hits less often, a partial check prefers what it sees, and a
user function is taken by reference; mistakes are one line."""

from __future__ import annotations

import numpy as np
import pytest

from vpo.errors import UserError
from vpo.search.metrics import evaluate
from vpo.search.selection import selected_best_at_k

OBJ = ["a", "b", "c"]


def _pool(seed=0, P=12, R=4, m=3):
    rng = np.random.default_rng(seed)
    r = rng.random((P * R, m, 3))
    v = rng.random((P * R, m)) > 0.25
    return r, v, np.repeat(np.arange(P), R)


def test_an_exact_selector_is_best_at_k_on_the_same_draws():
    r, v, p = _pool()
    ks = (1, 3, 6, 12)
    got = selected_best_at_k(r, v, p, "noisy:0", OBJ, ks, bootstrap=0)
    ref = evaluate(r, v, p, ks=ks, bootstrap=0)["metrics"]["best_at_k"]
    np.testing.assert_allclose(got["selected_best_at_k"]["mean"], ref["mean"], atol=1e-12)
    assert got["hit_rate"]["mean"] == [1.0] * len(ks)


def test_noise_lowers_what_is_kept_and_how_often_it_is_the_best():
    r, v, p = _pool(1)
    ks = (3, 12)
    exact = selected_best_at_k(r, v, p, "noisy:0", OBJ, ks, bootstrap=0)
    noisy = selected_best_at_k(r, v, p, "noisy:1.0", OBJ, ks, bootstrap=0)
    for j in range(2):
        assert noisy["selected_best_at_k"]["mean"][j] < exact["selected_best_at_k"]["mean"][j]
        assert noisy["hit_rate"]["mean"][j] < 0.9
    # at k = 1 there is nothing to choose: any selector keeps the same answer
    one = [
        selected_best_at_k(r, v, p, s, OBJ, (1,), bootstrap=0)["selected_best_at_k"]["mean"]
        for s in ("noisy:0", "noisy:5", "objectives:a")
    ]
    assert one[0] == one[1] == one[2]


def test_a_partial_check_prefers_what_it_sees():
    # one prompt, two rollouts of one answer: (1, 0, 0) and (0, 0.6, 0.6); w* uniform
    r = np.array([[[1.0, 0.0, 0.0]], [[0.0, 0.6, 0.6]]])
    v = np.ones((2, 1), bool)
    p = np.zeros(2, int)
    sees_a = selected_best_at_k(r, v, p, "objectives:a", OBJ, (2,), bootstrap=0)
    sees_bc = selected_best_at_k(r, v, p, "objectives:b,c", OBJ, (2,), bootstrap=0)
    assert sees_a["selected_best_at_k"]["mean"] == pytest.approx([1 / 3])  # kept (1, 0, 0): w*ᵀr = 1/3
    assert sees_a["hit_rate"]["mean"] == [0.0]  # the true best is (0, 0.6, 0.6): 0.4
    assert sees_bc["selected_best_at_k"]["mean"] == pytest.approx([0.4]) and sees_bc["hit_rate"]["mean"] == [1.0]


def test_a_user_function_by_reference_and_mistakes(tmp_path):
    f = tmp_path / "sel.py"
    f.write_text("import numpy as np\ndef worst(r, v, objectives):\n    return -(r.mean(-1))\n")
    r, v, p = _pool(2)
    worst = selected_best_at_k(r, v, p, f"{f}:worst", OBJ, (6,), bootstrap=0)
    best = selected_best_at_k(r, v, p, "noisy:0", OBJ, (6,), bootstrap=0)
    assert worst["selected_best_at_k"]["mean"][0] < best["selected_best_at_k"]["mean"][0]
    for bad, match in (("noisy:x", "takes a number"), ("objectives:zz", "among"), ("nonsense", "use noisy")):
        with pytest.raises(UserError, match=match):
            selected_best_at_k(r, v, p, bad, OBJ, (3,), bootstrap=0)


def test_vpo_eval_reports_the_selectors(tmp_path, capsys):
    from vpo.cli import main
    from vpo.search.pools import Pool
    from vpo.search.report import load_report

    r, v, p = _pool(3)
    Pool.from_arrays(r, v, group_size=4, objectives=OBJ).save(tmp_path / "pool")
    argv = ["eval", "--pool", str(tmp_path / "pool"), "--ks", "1,4", "--bootstrap", "0", "--no-plots"]
    assert main([*argv, "--selector", "noisy:0.5", "--selector", "objectives:a", "--out", str(tmp_path / "o")]) == 0
    res = next(iter(load_report(tmp_path / "o").values()))
    assert [s["selector"] for s in res["selection"]] == ["noisy:0.5", "objectives:a"]
    md = (tmp_path / "o" / "report.md").read_text()
    assert "## Selection by an imperfect verifier" in md and "| `objectives:a` |" in md
    assert main([*argv, "--selector", "noisy", "--out", str(tmp_path / "bad")]) == 2
    assert "use noisy:SIGMA" in capsys.readouterr().err
