"""Failure types of a pool: every answer slot valid or lost for one reason, counted by hand on
crafted completions; shown in vpo eval's report and carried into vpo compare."""

from __future__ import annotations

import numpy as np

from vpo.search.failures import failure_types
from vpo.search.pools import Pool, evaluate_pool
from vpo.search.report import markdown_report


def _pool(completions, answers, valid, num_tokens, max_new_tokens=10):
    R = len(completions)
    rec = {
        "prompt_id": "p0",
        "completions": completions,
        "answers": answers,
        "rewards": np.where(np.array(valid)[..., None], np.full((R, 3, 2), 0.5), 0.0).tolist(),
        "valid": valid,
        "num_tokens": num_tokens,
    }
    return Pool.from_records([rec], ["a", "b"], np.array([0.5, 0.5]), 3, {"max_new_tokens": max_new_tokens, "m": 3})


def _crafted():
    completions = [
        "I refuse to use tags.",  # no tags: 3 slots
        "<answer_1>unclosed",  # tags, nothing parsed: 3
        "<answer_1>x</answer_1>",  # one of three parsed: 2 fewer than m, 1 valid
        "<answer_1>y</answer_1><answer_2>y</answer_2><answer_3>z</answer_3>",  # a duplicate; z scored invalid
    ]
    answers = [[], [], ["x"], ["y", "z"]]
    valid = [[False] * 3, [False] * 3, [True, False, False], [True, False, False]]
    return _pool(completions, answers, valid, num_tokens=[10, 10, 4, 9])


def test_each_slot_is_counted_once_by_hand():
    f = failure_types(_crafted())
    assert f["counts"] == {
        "valid": 2,
        "no_tags": 3,
        "malformed": 3,
        "fewer_than_m": 2,
        "duplicates": 1,
        "scored_invalid": 1,
    }
    assert sum(f["counts"].values()) == f["slots"] == 12
    assert f["shares"]["no_tags"] == 0.25
    assert f["truncated_rollouts"] == 2 and f["truncated_share"] == 0.5  # 10 >= max_new_tokens 10


def test_report_shows_them_and_a_pool_without_texts_has_none():
    res = evaluate_pool(_crafted(), ks=(1, 3), bootstrap=0)
    assert res["failures"]["counts"]["duplicates"] == 1
    md = markdown_report({"m": res})
    assert "## Where answers were lost" in md and "| m | 0.167 (2) | 0.250 (3) | 0.250 (3) |" in md
    bare = Pool.from_arrays(np.random.default_rng(0).random((4, 3, 2)), group_size=2, objectives=["a", "b"])
    assert failure_types(bare) is None and "failures" not in evaluate_pool(bare, ks=(1,), bootstrap=0)


def test_a_budget_warning_is_not_read_as_a_row_of_the_table_above_it():
    res = evaluate_pool(_crafted(), ks=(1, 3), bootstrap=0)
    lines = markdown_report({"m": res}, warnings=["pools differ in answer slots"]).splitlines()
    i = lines.index("**Warning**: pools differ in answer slots.")
    assert lines[i - 1] == "" and lines[i - 2].startswith("| m |")
