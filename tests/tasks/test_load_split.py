"""``vpo.tasks.registry.load_split``: a task's failing ``load`` and, with ``required=True``, an empty
split are one-line user errors naming the task and the split (what ``vpo train``, its search
evaluation and ``vpo eval`` all go through)."""

from __future__ import annotations

import pytest

from vpo.errors import UserError
from vpo.tasks import FunctionTask
from vpo.tasks.registry import TaskSpecError, load_split


def _task(examples):
    """Test-only task (named as such): one objective, the given examples per split."""
    return FunctionTask("split_test", {"one": lambda ex, a: 1.0}, examples=examples)


def test_an_empty_split_is_refused_only_when_required():
    task = _task({"train": [{"id": 0, "question": "q"}], "test": []})
    assert load_split(task, "test") == []
    with pytest.raises(TaskSpecError) as e:
        load_split(task, "test", required=True, purpose="evaluate on")
    msg = str(e.value)
    assert "task 'split_test': its 'test' split has no examples, so there is nothing to evaluate on" in msg
    assert isinstance(e.value, UserError) and isinstance(e.value, ValueError)
    assert load_split(task, "train", required=True) == [{"id": 0, "question": "q"}]


def test_a_failing_load_is_one_line_naming_the_task_and_the_split():
    def broken(split):
        raise OSError("data.jsonl: no such file")

    with pytest.raises(TaskSpecError, match=r"task 'mine:make' could not load its 'train' split: load\(\)"):
        load_split(_task(broken), "train", spec="mine:make", required=True)


def test_the_trainer_and_vpo_eval_share_the_refusal():
    """One refusal, not four: the trainer, its search-evaluation callback, `vpo eval` and `vpo eval --search` call
    load_split(required=True) and carry no empty-split message of their own."""
    from pathlib import Path

    import vpo

    root = Path(vpo.__file__).parent
    for rel in ("train/trainer.py", "train/callbacks.py", "search/cli.py", "search/step/cli.py"):
        src = (root / rel).read_text()
        assert "required=True" in src, rel
        assert "has no examples" not in src, rel
