"""Resuming a run: which checkpoint, the data order after the first epoch, and a save on Ctrl-C.

* :func:`last_complete_checkpoint` picks the newest ``checkpoint-N`` of an output_dir that holds
  both ``trainer_state.json`` and model weights (an interrupted save is skipped, with a note).
* :class:`EpochOrderCallback`: TRL's ``RepeatSampler`` seeds its generator once and draws one
  permutation per epoch, while transformers skips finished epochs without iterating the sampler, so
  a run resumed after its first epoch saw the data of epoch 1 in epoch k (docs/training.md
  "Checkpoints and resume"). The callback advances the sampler's generator by the epochs already
  trained. It works for TRL's GRPOTrainer too; ``vpo train`` always adds it.
* :class:`SignalCheckpointCallback`: the first SIGINT/SIGTERM makes the trainer save a checkpoint
  at the end of the current step and stop, then prints where and the command that resumes; a second
  signal aborts at once. A run with ``save_strategy: no`` (the demo's, ``--smoke``) stops unsaved.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import sys
from pathlib import Path

from transformers import TrainerCallback

CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)$")
WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
    "adapter_model.safetensors",
    "adapter_model.bin",
)


def checkpoint_problem(path: Path) -> str | None:
    """Why ``path`` cannot be resumed from (None when it can): a save that did not finish."""
    if not (path / "trainer_state.json").is_file():
        return "no trainer_state.json"
    if not any((path / f).is_file() for f in WEIGHT_FILES):
        return "no model weights"
    return None


def checkpoints(output_dir: str | Path) -> list[Path]:
    """The ``checkpoint-N`` folders of ``output_dir``, oldest first (by N)."""
    d = Path(output_dir)
    if not d.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in d.iterdir() if p.is_dir() and (m := CHECKPOINT_RE.match(p.name))]
    return [p for _, p in sorted(found)]


def last_complete_checkpoint(output_dir: str | Path) -> tuple[Path | None, list[str]]:
    """(the newest complete checkpoint or None, one note per newer checkpoint skipped and why)."""
    notes = []
    for p in reversed(checkpoints(output_dir)):
        why = checkpoint_problem(p)
        if why is None:
            return p, notes
        notes.append(f"skipping {p}: {why} (an interrupted save)")
    return None, notes


def _repeat_samplers(obj, depth: int = 0):
    """TRL RepeatSampler-like objects (a ``generator`` and ``num_samples``) inside a (prepared) dataloader."""
    if obj is None or depth > 5:
        return
    if hasattr(obj, "generator") and hasattr(obj, "num_samples") and hasattr(obj, "mini_repeat_count"):
        yield obj
        return
    for name in ("sampler", "batch_sampler", "base_dataloader"):
        child = getattr(obj, name, None)
        if child is not None and child is not obj:
            yield from _repeat_samplers(child, depth + 1)


class EpochOrderCallback(TrainerCallback):
    """On resume, advance TRL's RepeatSampler to the epoch being resumed, so that epoch k draws the
    k-th permutation as in an uninterrupted run (not the first)."""

    def __init__(self):
        self.advanced_epochs: int | None = None  # what the last on_train_begin did (for tests)

    def on_train_begin(self, args, state, control, train_dataloader=None, **kwargs):
        self.advanced_epochs = 0
        if state.global_step <= 0 or train_dataloader is None or args.ignore_data_skip:
            return
        try:
            batches = len(train_dataloader)
        except TypeError:  # an iterable dataset: no epochs to count
            return
        ga = args.gradient_accumulation_steps
        per_epoch = max(batches // ga + int(batches % ga > 0), 1)  # transformers' num_update_steps_per_epoch
        epochs = state.global_step // per_epoch
        seen = set()
        for s in _repeat_samplers(train_dataloader):
            if id(s) in seen or not getattr(s, "shuffle", True) or s.generator is None:
                continue
            seen.add(id(s))
            import torch

            if s.seed is not None:
                s.generator.manual_seed(s.seed)
            for _ in range(epochs):
                torch.randperm(s.num_samples, generator=s.generator)
        self.advanced_epochs = epochs if seen else 0


def resume_command(argv: list[str] | None = None) -> str:
    """The command line that resumes this run: the same one with ``--resume`` (once)."""
    argv = list(sys.argv if argv is None else argv)
    prog = "vpo" if argv and Path(argv[0]).name in ("vpo", "__main__.py", "cli.py") else Path(argv[0]).name
    rest = [a for a in argv[1:] if a != "--resume"]
    # drop an explicit --resume_from_checkpoint VALUE: --resume says "the last complete checkpoint"
    out, i = [], 0
    while i < len(rest):
        if rest[i] == "--resume_from_checkpoint":
            i += 2
            continue
        if rest[i].startswith("--resume_from_checkpoint="):
            i += 1
            continue
        out.append(rest[i])
        i += 1
    return " ".join(shlex.quote(a) for a in [prog, *out, "--resume"])


def _strategy(args) -> str:
    v = getattr(args, "save_strategy", "steps")
    return str(getattr(v, "value", v)).lower()


def _any_process(signum: int | None) -> int | None:
    """The signal any process received (all processes must save and stop at the same step, or the
    save's collectives hang); one tiny all-reduce per step when torch.distributed is running."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return signum
    dev = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")
    t = torch.tensor([signum or 0], device=dev)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return int(t.item()) or None


class SignalCheckpointCallback(TrainerCallback):
    """First SIGINT/SIGTERM: save a checkpoint at the end of the current optimizer step, stop, and say
    where and how to resume. A second signal aborts at once (KeyboardInterrupt / exit 143)."""

    def __init__(self, signals=(signal.SIGINT, signal.SIGTERM), resume_hint: str | None = None, stream=None):
        self.signals = tuple(signals)
        self.resume_hint = resume_hint
        self.stream = stream
        self.received: int | None = None
        self.saved_to: str | None = None
        self._said_unsaved = False
        self._previous: dict = {}

    def _handler(self, signum, frame):
        if self.received is not None:  # second signal: abort now
            self.restore()
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            os._exit(128 + signum)
        self.received = signum
        name = signal.Signals(signum).name
        print(
            f"vpo train: {name} received: saving a checkpoint at the end of this step, then stopping "
            "(again to abort without saving)",
            file=self.stream or sys.stderr,
            flush=True,
        )

    def restore(self):
        """Put back the signal handlers that were there before ``on_train_begin``."""
        for s, h in self._previous.items():
            try:
                signal.signal(s, h)
            except (ValueError, OSError):  # pragma: no cover - not the main thread
                pass
        self._previous = {}

    def on_train_begin(self, args, state, control, **kwargs):
        import threading

        if threading.current_thread() is not threading.main_thread():
            return  # signal handlers can only be set from the main thread
        for s in self.signals:
            self._previous[s] = signal.signal(s, self._handler)

    def on_step_end(self, args, state, control, **kwargs):
        self.received = _any_process(self.received)
        if self.received is not None:
            control.should_training_stop = True
            if _strategy(args) != "no":
                control.should_save = True
            elif state.is_world_process_zero and not self._said_unsaved:
                self._said_unsaved = True
                print(
                    f"vpo train: stopped at step {state.global_step} of {state.max_steps}; save_strategy is 'no', "
                    "so no checkpoint was saved",
                    file=self.stream or sys.stderr,
                    flush=True,
                )
        return control

    def on_save(self, args, state, control, **kwargs):
        if self.received is not None and self.saved_to is None:
            self.saved_to = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
            if state.is_world_process_zero:
                hint = self.resume_hint or resume_command()
                print(
                    f"vpo train: stopped at step {state.global_step} of {state.max_steps}; checkpoint saved to "
                    f"{self.saved_to}; resume with: {hint}",
                    file=self.stream or sys.stderr,
                    flush=True,
                )

    def on_train_end(self, args, state, control, **kwargs):
        self.restore()
