"""Resume: a run stopped and resumed from its checkpoint continues exactly.

* A run killed with SIGKILL and resumed from its last checkpoint ends at the same parameters as an
  uninterrupted run with the same seed (the weight sampler's RNG state is part of the checkpoint).
* Resumed after its first epoch, it does so only with ``EpochOrderCallback`` (TRL's RepeatSampler
  draws one permutation per epoch from a generator seeded once, and transformers skips finished
  epochs without iterating it); without the callback the same resume ends elsewhere.
* ``vpo train``: ``--resume`` / ``resume_from_checkpoint: true`` pick the last complete checkpoint,
  a rerun onto checkpoints is refused with the resume command, and SIGINT saves a checkpoint, prints
  where and how to resume, and the resumed run finishes at the uninterrupted run's parameters.

Runs: the tiny model, CharStatsTask with 4 examples (2 prompts per step, so an epoch is 2 steps).
Tolerance for "same parameters": rtol 1e-5, atol 1e-6 (on this CPU they are bit-identical).
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

pytest.importorskip("trl")

from vpo.errors import UserError  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
WORKER = ROOT / "tests" / "helpers" / "resume_worker.py"
EPOCH = ["--n-examples", "4"]  # 2 steps per epoch


def run(*args, timeout=300):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run(
        [sys.executable, str(WORKER), *map(str, args)], env=env, timeout=timeout, capture_output=True, text=True
    )


def params(path):
    return torch.load(path)


def max_rel_diff(a, b) -> float:
    return max(((x - y).abs().max() / x.abs().max().clamp(min=1e-12)).item() for x, y in zip(a, b))


def assert_same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module")
def full_run(tmp_path_factory, tiny_model_dir):
    """4 uninterrupted steps (2 epochs), a checkpoint after every step."""
    out = tmp_path_factory.mktemp("resume") / "full"
    r = run(tiny_model_dir, out, 4, *EPOCH, "--save-steps", "1")
    assert r.returncode == 0, r.stderr[-3000:]
    return out


def test_sigkill_then_resume_matches_uninterrupted(tmp_path, tiny_model_dir, full_run):
    killed = tmp_path / "killed"
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), tiny_model_dir, str(killed), "4", *EPOCH, "--slow-after", "2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    ckpt = killed / "checkpoint-2"  # the end of the first epoch
    deadline = time.time() + 300
    while not (ckpt / "vpo_state.pt").exists() or not (ckpt / "trainer_state.json").exists():
        assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
        assert time.time() < deadline, "checkpoint-2 never appeared"
        time.sleep(0.2)
    time.sleep(0.5)  # let the checkpoint's remaining files land; the run now sleeps after each step
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert not (killed / "final_params.pt").exists()  # it really died mid-run

    r = run(tiny_model_dir, killed, 4, *EPOCH, "--resume", ckpt)
    assert r.returncode == 0, r.stderr[-3000:]
    a = params(full_run / "final_params.pt")
    assert_same(a, params(killed / "final_params.pt"))
    # and the run did learn something (the comparison is not between two untouched models)
    from transformers import AutoModelForCausalLM

    m0 = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert any(not torch.allclose(p0, p1) for p0, p1 in zip(m0.parameters(), a))


def test_resume_after_the_first_epoch_needs_the_epoch_order(tmp_path, tiny_model_dir, full_run):
    """Resume at step 3 (inside the second epoch): same parameters with EpochOrderCallback; without
    it the second epoch replays the first epoch's order and the run ends elsewhere (measured 20 %)."""
    a = params(full_run / "final_params.pt")
    r = run(tiny_model_dir, tmp_path / "fixed", 4, *EPOCH, "--resume", full_run / "checkpoint-3")
    assert r.returncode == 0, r.stderr[-3000:]
    assert_same(a, params(tmp_path / "fixed" / "final_params.pt"))
    r = run(tiny_model_dir, tmp_path / "plain", 4, *EPOCH, "--resume", full_run / "checkpoint-3", "--no-epoch-order")
    assert r.returncode == 0, r.stderr[-3000:]
    assert max_rel_diff(a, params(tmp_path / "plain" / "final_params.pt")) > 1e-3


def test_resume_refuses_a_checkpoint_without_vpo_state(tmp_path, tiny_model_dir, full_run):
    ckpt = tmp_path / "checkpoint-2"
    shutil.copytree(full_run / "checkpoint-2", ckpt)
    os.remove(ckpt / "vpo_state.pt")
    r = run(tiny_model_dir, tmp_path / "again", 4, *EPOCH, "--resume", ckpt)
    assert r.returncode != 0
    assert "vpo_state.pt is missing" in r.stderr


# ------------------------------------------------------------------------------------------
# which checkpoint: vpo.train.resume and vpo train's resolve_resume (no training)
# ------------------------------------------------------------------------------------------


def _fake_checkpoint(d: Path, state=True, weights=True) -> Path:
    d.mkdir(parents=True)
    if state:
        (d / "trainer_state.json").write_text("{}")
    if weights:
        (d / "model.safetensors").write_bytes(b"x")
    return d


def test_last_complete_checkpoint_skips_interrupted_saves(tmp_path):
    from vpo.train.resume import last_complete_checkpoint

    assert last_complete_checkpoint(tmp_path / "nothing") == (None, [])
    _fake_checkpoint(tmp_path / "checkpoint-2")
    _fake_checkpoint(tmp_path / "checkpoint-10")
    _fake_checkpoint(tmp_path / "checkpoint-12", weights=False)
    _fake_checkpoint(tmp_path / "checkpoint-11", state=False)
    (tmp_path / "checkpoint-x").mkdir()
    ckpt, notes = last_complete_checkpoint(tmp_path)
    assert ckpt == tmp_path / "checkpoint-10"  # by step number, not by name (10 > 2)
    assert len(notes) == 2 and "checkpoint-12: no model weights" in notes[0] and "no trainer_state.json" in notes[1]


def _args(tmp_path, *extra):
    from vpo.train.cli import parse_train_args

    return parse_train_args(["--output_dir", str(tmp_path), "--use_cpu", "true", "--bf16", "false", *extra])[0]


def test_resume_true_in_every_spelling_picks_the_last_complete_checkpoint(tmp_path, capsys):
    from vpo.train.cli import resolve_resume

    _fake_checkpoint(tmp_path / "checkpoint-4")
    _fake_checkpoint(tmp_path / "checkpoint-6", state=False)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"output_dir: {tmp_path}\nresume_from_checkpoint: true\nuse_cpu: true\nbf16: false\n")
    from vpo.train.cli import parse_train_args

    for args in (
        _args(tmp_path, "--resume_from_checkpoint", "true"),
        _args(tmp_path, "--resume_from_checkpoint", "True"),
        parse_train_args(["--config", str(cfg)])[0],
    ):
        resolve_resume(args)
        assert args.resume_from_checkpoint == str(tmp_path / "checkpoint-4")
        err = capsys.readouterr().err
        assert "skipping" in err and "checkpoint-6" in err and f"resuming from {tmp_path / 'checkpoint-4'}" in err
    # an explicit path is checked too
    args = _args(tmp_path, "--resume_from_checkpoint", str(tmp_path / "checkpoint-6"))
    with pytest.raises(UserError, match="not a complete checkpoint \\(no trainer_state.json\\)"):
        resolve_resume(args)


def test_resume_without_a_checkpoint_and_rerun_onto_checkpoints_are_one_line_errors(tmp_path):
    from vpo.train.cli import resolve_resume

    with pytest.raises(UserError, match="no complete checkpoint in output_dir"):
        resolve_resume(_args(tmp_path / "empty", "--resume_from_checkpoint", "true"))
    args = _args(tmp_path / "empty")
    resolve_resume(args)  # a fresh output_dir: start
    assert args.resume_from_checkpoint is None
    _fake_checkpoint(tmp_path / "run" / "checkpoint-3")
    with pytest.raises(
        UserError, match="already holds checkpoints .*checkpoint-3.*resume it with: vpo train x --resume"
    ):
        resolve_resume(_args(tmp_path / "run"), resume_hint="vpo train x --resume")


def test_resume_command_is_the_same_command_with_resume_once():
    from vpo.train.resume import resume_command

    assert resume_command(["vpo", "train", "c.yaml", "--max_steps", "5"]) == "vpo train c.yaml --max_steps 5 --resume"
    assert resume_command(
        ["vpo", "train", "--resume", "--task-options", '{"a": 1}', "--resume_from_checkpoint", "x/c"]
    ) == ("vpo train --task-options '{\"a\": 1}' --resume")


def test_second_signal_aborts_at_once():
    from transformers import TrainerControl

    from vpo.train.resume import SignalCheckpointCallback

    cb = SignalCheckpointCallback(stream=open(os.devnull, "w"))
    cb._handler(signal.SIGINT, None)
    assert cb.received == signal.SIGINT
    control = cb.on_step_end(None, None, TrainerControl())
    assert control.should_save and control.should_training_stop
    with pytest.raises(KeyboardInterrupt):
        cb._handler(signal.SIGINT, None)


# ------------------------------------------------------------------------------------------
# vpo train, interrupted with SIGINT for real, then resumed with the command it printed
# ------------------------------------------------------------------------------------------


def _train_cmd(model, out, *extra):
    return [
        "train",
        "--task",
        f"{ROOT / 'tests' / 'helpers' / 'slow_task.py'}:make",
        "--model_name_or_path",
        str(model),
        "--output_dir",
        str(out),
        "--estimator",
        "vpo",
        "--num_answers",
        "3",
        "--num_generations",
        "4",
        "--per_device_train_batch_size",
        "8",
        "--max_completion_length",
        "12",
        "--max_steps",
        "6",
        "--learning_rate",
        "5e-2",
        "--beta",
        "1e-3",
        "--report_to",
        "none",
        "--save_strategy",
        "steps",
        "--save_steps",
        "1",
        "--use_cpu",
        "true",
        "--bf16",
        "false",
        "--seed",
        "0",
        "--num_weightings",
        "16",
        "--disable_tqdm",
        "true",
        *extra,
    ]


class _Vpo:
    """``python -m vpo.cli ARGS`` in the background; output to a file (pipes could fill and block)."""

    def __init__(self, args, log: Path):
        self.log = log
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        with open(log, "w") as f:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "vpo.cli", *args], env=env, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT
            )

    def wait(self, timeout) -> tuple[int, str]:
        rc = self.proc.wait(timeout=timeout)
        return rc, self.log.read_text()


@pytest.mark.slow
def test_sigint_saves_a_checkpoint_and_the_printed_command_resumes_it(tmp_path, tiny_model_dir):
    from transformers import AutoModelForCausalLM

    full = _Vpo(
        _train_cmd(tiny_model_dir, tmp_path / "full", "--task-options", '{"n_examples": 4}'), tmp_path / "full.log"
    )
    out = tmp_path / "int"
    # 1.5 s of sleep per scored batch (no computation changes): time to signal mid-run
    run_ = _Vpo(
        _train_cmd(tiny_model_dir, out, "--task-options", '{"n_examples": 4, "sleep": 1.5}'), tmp_path / "int.log"
    )
    deadline = time.time() + 400
    while not (out / "checkpoint-1" / "trainer_state.json").exists():
        assert run_.proc.poll() is None, run_.log.read_text()[-3000:]
        assert time.time() < deadline, "checkpoint-1 never appeared"
        time.sleep(0.2)
    run_.proc.send_signal(signal.SIGINT)
    rc, err = run_.wait(timeout=300)
    assert rc == 130, err[-3000:]
    lines = [ln for ln in err.splitlines() if ln.startswith("vpo train: stopped at step")]
    assert len(lines) == 1, err[-3000:]
    step = int(lines[0].split("stopped at step ")[1].split()[0])
    assert 1 <= step < 6
    ckpt = out / f"checkpoint-{step}"
    assert f"checkpoint saved to {ckpt};" in lines[0]
    assert (ckpt / "trainer_state.json").exists() and (ckpt / "vpo_state.pt").exists()
    assert not (out / "model.safetensors").exists()  # an interrupted run saves no "final" model
    hint = lines[0].split("resume with: ")[1]
    argv = shlex.split(hint)
    assert argv[:2] == ["vpo", "train"] and argv[-1] == "--resume"

    # the same command again without --resume is refused, naming that command
    rc2, err2 = _Vpo(argv[1:-1], tmp_path / "again.log").wait(timeout=300)
    assert rc2 == 2 and "already holds checkpoints" in err2 and hint in err2

    rc3, err3 = _Vpo(argv[1:], tmp_path / "resumed.log").wait(timeout=400)
    assert rc3 == 0, err3[-3000:]
    assert f"resuming from {ckpt}" in err3
    rcf, errf = full.wait(timeout=400)
    assert rcf == 0, errf[-3000:]
    a = [p.detach() for p in AutoModelForCausalLM.from_pretrained(tmp_path / "full").parameters()]
    b = [p.detach() for p in AutoModelForCausalLM.from_pretrained(out).parameters()]
    assert_same(a, b)  # 6 steps = 3 epochs: the resumed run crossed epoch boundaries
    import json

    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 6


@pytest.mark.parametrize("process_index", [0, 1])
def test_epoch_order_callback_replays_the_finished_epochs_through_accelerate_sharding(process_index):
    """In-process, no training: a fresh dataloader (TRL's RepeatSampler, sharded by accelerate for 2
    processes) after EpochOrderCallback yields epoch k's batches of the original, not epoch 0's."""
    from types import SimpleNamespace

    from accelerate.data_loader import prepare_data_loader
    from torch.utils.data import DataLoader
    from transformers import TrainerControl
    from trl.trainer.utils import RepeatSampler

    from vpo.train.resume import EpochOrderCallback

    def loader():
        s = RepeatSampler(list(range(6)), mini_repeat_count=2, batch_size=3, repeat_count=1, shuffle=True, seed=0)
        dl = DataLoader(list(range(6)), batch_size=6, sampler=s)
        return prepare_data_loader(dl, num_processes=2, process_index=process_index, put_on_device=False)

    original = loader()
    epochs = [[b.tolist() for b in original] for _ in range(4)]
    assert len(original) == 1 and epochs[0] != epochs[2]  # one batch (= one step) per epoch here
    args = SimpleNamespace(gradient_accumulation_steps=1, ignore_data_skip=False)
    for k in (1, 2, 3):
        fresh = loader()
        cb = EpochOrderCallback()
        cb.on_train_begin(args, SimpleNamespace(global_step=k), TrainerControl(), train_dataloader=fresh)
        assert cb.advanced_epochs == k
        assert [b.tolist() for b in fresh] == epochs[k]
        plain = loader()  # what transformers alone resumes with: the first epoch's order
        assert [b.tolist() for b in plain] == epochs[0]


def test_a_run_without_checkpoints_stops_unsaved_on_a_signal(capsys):
    """save_strategy: no (the demo's runs, --smoke): the signal stops the run and saves nothing, so a
    rerun of the same command is not refused for checkpoints it never asked for."""
    from types import SimpleNamespace

    from transformers import TrainerControl

    from vpo.train.resume import SignalCheckpointCallback

    cb = SignalCheckpointCallback()
    cb._handler(signal.SIGTERM, None)
    state = SimpleNamespace(global_step=3, max_steps=8, is_world_process_zero=True)
    control = cb.on_step_end(SimpleNamespace(save_strategy="no"), state, TrainerControl())
    assert control.should_training_stop and not control.should_save
    assert "stopped at step 3 of 8; save_strategy is 'no', so no checkpoint was saved" in capsys.readouterr().err
    control = SignalCheckpointCallback()
    control._handler(signal.SIGTERM, None)
    assert control.on_step_end(SimpleNamespace(save_strategy="steps"), state, TrainerControl()).should_save
