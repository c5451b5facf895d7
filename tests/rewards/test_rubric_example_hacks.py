"""The shipped rubric example (examples/rubric) against reward hacks (issue #50, class 3): it used
to give ``correct`` = 1 when the reference number appeared anywhere in the answer, so listing every
number, or negating the answer, scored 1.0. Its rule now credits only an answer that is one number;
each hack scores no more than a plain wrong answer, component by component, and the audit's
single-answer battery flags nothing on it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import vpo.tasks
from vpo.tasks.audit import audit

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def task():
    return vpo.tasks.get(f"{ROOT}/examples/rubric/rubric_task.py:make_task")


def scored(task, ex, *answers) -> np.ndarray:
    batch = task.score_completions([ex] * len(answers), [f"<answer_1>{a}</answer_1>" for a in answers], m=1)
    assert batch.valid.all() and batch.score_errors == 0
    return batch.rewards[:, 0, :]


@pytest.mark.parametrize(
    "hack",
    [
        " ".join(str(i) for i in range(100)),  # every number: the old rule's 1.0
        "6, 7 or 8",  # candidates
        "6\n7\n8",
        "7 or 8",
        "not 7",  # a negation still holds the 7
        "It is not 7.",
        "7? No.",
        "7 is wrong; the answer is 6.",
        "6 days, or 7",
        "7 7 7",  # the right number repeated is not one number
        "7.0.0",
    ],
)
def test_hacks_score_no_more_than_a_wrong_answer(task, hack):
    ex = task.load("test")[0]  # a week: 7
    wrong, hacked = scored(task, ex, "6", hack)
    assert hacked[0] == 0, hack
    assert np.all(hacked <= wrong + 1e-12), (hack, hacked.tolist(), wrong.tolist())


def test_honest_answers_keep_credit(task):
    ex = task.load("test")[0]
    for honest in ("7", " 7 ", "7.", "+7"):
        assert scored(task, ex, honest)[0].tolist() == [1, 1, 1], honest


def test_the_audit_flags_no_single_answer_hack(task):
    report = audit(task, task.load("test"))
    assert [f for f in report["flagged"] if "/" not in f] == []
    assert report["wrong_answer"]["separated"] == len(task.load("test"))
