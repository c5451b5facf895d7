"""`vpo eval` against what a checkpoint was trained on, and what `vpo eval --pool` writes (issue 40, items 1
and 7): a task named on the command line keeps the checkpoint's saved task options (another task is refused),
an evaluation where every answer scored 0 says so, and recomputing from a run's pool neither overwrites the
run's report nor renames its method."""

from __future__ import annotations

import contextlib
import io
import json
import shutil

import numpy as np
import pytest

from vpo.cli import main as vpo_main
from vpo.search import Pool, load_report

TRAINED = {"task": "maze", "task_options": {"size": 5, "instruction": "short"}, "num_answers": 1}
FAST = ["--num-prompts", "2", "--rollouts", "2", "--max-new-tokens", "8", "--threads", "1"]
FAST += ["--ks", "1,2", "--eval-seeds", "1", "--bootstrap", "0", "--no-plots", "--quiet"]


def _cli(argv) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = vpo_main(argv)
    return code, err.getvalue()


@pytest.fixture(scope="module")
def checkpoint_run(tiny_model_dir, tmp_path_factory):
    """A tiny model saved with a 5x5 maze's vpo_args.json the way vpo train saves it, evaluated with --task maze
    and --name tiny-5x5: (checkpoint, run directory, exit code, stderr)."""
    pytest.importorskip("vpo.tasks.maze")
    root = tmp_path_factory.mktemp("ck")
    ck = root / "ck"
    shutil.copytree(tiny_model_dir, ck)
    (ck / "vpo_args.json").write_text(json.dumps(TRAINED))
    run = root / "run"
    code, err = _cli(["eval", "--model", str(ck), "--task", "maze", "--out", str(run), "--name", "tiny-5x5", *FAST])
    return ck, run, code, err


def test_named_task_keeps_the_checkpoints_task_options(checkpoint_run):
    from vpo.tasks import get as get_task

    _, run, code, err = checkpoint_run
    assert code == 0, err
    assert '"size": 5' in err and "with --task-options on top" in err
    five = get_task("maze", size=5, instruction="short").load("test", n=1)[0]
    grid = five["grid"] if isinstance(five["grid"], str) else "\n".join("".join(r) for r in five["grid"])
    prompt = json.loads((run / "pool" / "rollouts.jsonl").read_text().splitlines()[0])["prompt"]
    assert grid in prompt and "Route in <answer>." in prompt  # the 5x5 maze, short instruction: not the 9x9


def test_task_options_on_the_command_line_win_over_the_checkpoints(tmp_path):
    from argparse import Namespace

    from vpo.search.evalsetup import task_from_checkpoint

    (tmp_path / "vpo_args.json").write_text(json.dumps(TRAINED))
    args = Namespace(model=str(tmp_path), task="maze", task_options={"size": 7})
    task_from_checkpoint(args)
    assert args.task_options == {"size": 7, "instruction": "short"}


def test_another_task_than_the_checkpoints_is_refused(tmp_path, capsys):
    (tmp_path / "vpo_args.json").write_text(json.dumps(TRAINED))
    code = vpo_main(["eval", "--model", str(tmp_path), "--task", "prog", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "--task prog" in err and "trained on task maze" in err and '"size": 5' in err and "drop --task" in err
    assert not (tmp_path / "o").exists()


def test_all_zero_scores_are_warned_on_stderr_and_in_the_reports(tmp_path):
    Pool.from_arrays(np.zeros((8, 2, 3)), group_size=4, objectives=["a", "b", "c"]).save(tmp_path / "zero")
    code, err = _cli(["eval", "--pool", str(tmp_path / "zero"), "--bootstrap", "0", "--no-plots"])
    assert code == 0, err
    assert "warning" in err and "every answer scored 0" in err
    assert "every answer scored 0" in load_report(tmp_path / "zero")["zero"]["warnings"][0]
    assert "**Warning**: zero: every answer scored 0" in (tmp_path / "zero" / "report.md").read_text()
    code, err = _cli(["check", "--pool", str(tmp_path / "zero"), "--check-out", str(tmp_path / "c")])
    assert code == 0, err
    assert "every answer scored 0" in (tmp_path / "c" / "check.md").read_text()
    # a pool with any non-zero score has no such warning
    Pool.from_arrays(np.eye(3)[[0, 1] * 4].reshape(8, 1, 3), group_size=4).save(tmp_path / "some")
    code, err = _cli(["eval", "--pool", str(tmp_path / "some"), "--bootstrap", "0", "--no-plots"])
    assert code == 0 and "every answer scored 0" not in err


def test_eval_pool_keeps_the_runs_report_and_method_name(checkpoint_run, tmp_path):
    _, run, code, err = checkpoint_run
    assert code == 0, err
    before = (run / "report.json").read_text()
    assert json.loads((run / "pool" / "meta.json").read_text())["name"] == "tiny-5x5"
    code, err = _cli(["eval", "--pool", str(run / "pool"), "--bootstrap", "0", "--no-plots"])
    assert code == 2 and "would overwrite the run's own report" in err and "--out" in err
    code, err = _cli(["eval", "--pool", str(run / "pool"), "--out", str(run), "--bootstrap", "0", "--no-plots"])
    assert code == 2 and "would overwrite" in err
    assert (run / "report.json").read_text() == before
    code, err = _cli(["eval", "--pool", str(run / "pool"), "--out", str(tmp_path / "re"), "--no-plots"])
    assert code == 0, err
    assert list(load_report(tmp_path / "re")) == ["tiny-5x5"]  # the pool's meta.json keeps the name, not "run"
    code, err = _cli(["eval", "--pool", str(run / "pool"), "--out", str(tmp_path / "re2"), "--name", "x", "--no-plots"])
    assert code == 0 and list(load_report(tmp_path / "re2")) == ["x"]
