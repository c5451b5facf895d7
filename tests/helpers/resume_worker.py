"""Training worker for the kill-and-resume test (run as a subprocess by tests/train/test_resume.py).

usage: python resume_worker.py MODEL_DIR OUT_DIR MAX_STEPS [--resume CKPT] [--slow-after N]
       [--n-examples N] [--save-steps N] [--no-epoch-order] [--trl]
Writes OUT_DIR/final_params.pt at the end. With --slow-after N it sleeps after every step past N,
so the parent has time to SIGKILL it mid-run (sleeping changes no computation). A step is 2 prompts
x G = 4, so --n-examples 4 makes an epoch 2 steps. --no-epoch-order removes
vpo.train.resume.EpochOrderCallback, which VPOTrainer adds by default (to show the drift it fixes); --trl trains TRL's own
GRPOTrainer on the same task's mean reward (to compare).
"""

import argparse
import os
import sys
import time

import torch
from transformers import TrainerCallback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from conftest import CharStatsTask  # noqa: E402

from vpo.train import VPOConfig, VPOTrainer  # noqa: E402
from vpo.train.resume import EpochOrderCallback  # noqa: E402


def _trl_trainer(model, args, task, callbacks):
    """TRL's GRPOTrainer on the task's mean reward over the m answer slices (same prompts, seed)."""
    from trl import GRPOConfig, GRPOTrainer

    from vpo.train.trainer import build_task_dataset

    kw = {
        k: getattr(args, k)
        for k in (
            "output_dir",
            "num_generations",
            "per_device_train_batch_size",
            "max_completion_length",
            "max_steps",
            "learning_rate",
            "beta",
            "logging_steps",
            "report_to",
            "save_strategy",
            "save_steps",
            "use_cpu",
            "seed",
            "disable_tqdm",
        )
    }
    gargs = GRPOConfig(**kw)
    ds = build_task_dataset(task, task.load("train"), 3, chat=False)

    def reward(completions, vpo_example, **kw):
        import json

        import numpy as np

        sb = task.score_completions([json.loads(e) for e in vpo_example], list(completions), 3)
        r = np.where(sb.valid[..., None], sb.rewards, 0.0).mean(axis=(1, 2))
        return [float(x) for x in r]

    return GRPOTrainer(model=model, reward_funcs=reward, args=gargs, train_dataset=ds, callbacks=callbacks)


class Slow(TrainerCallback):
    def __init__(self, after):
        self.after = after

    def on_step_end(self, args, state, control, **kw):
        if state.global_step > self.after:
            time.sleep(2.0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("out")
    p.add_argument("max_steps", type=int)
    p.add_argument("--resume", default=None)
    p.add_argument("--slow-after", type=int, default=None)
    p.add_argument("--n-examples", type=int, default=32)
    p.add_argument("--save-steps", type=int, default=2)
    p.add_argument("--no-epoch-order", action="store_true")
    p.add_argument("--trl", action="store_true")
    a = p.parse_args()
    args = VPOConfig(
        output_dir=a.out,
        estimator="vpo",
        num_answers=3,
        num_generations=4,
        per_device_train_batch_size=8,
        max_completion_length=12,
        max_steps=a.max_steps,
        learning_rate=5e-2,
        beta=1e-3,
        logging_steps=1,
        report_to="none",
        save_strategy="steps",
        save_steps=a.save_steps,
        use_cpu=True,
        seed=0,
        num_weightings=16,
        disable_tqdm=True,
    )
    cb = [Slow(a.slow_after)] if a.slow_after is not None else []
    task = CharStatsTask.make(a.n_examples)
    if a.trl:
        tr = _trl_trainer(a.model, args, task, cb + ([] if a.no_epoch_order else [EpochOrderCallback()]))
    else:
        tr = VPOTrainer(model=a.model, args=args, task=task, callbacks=cb)  # EpochOrderCallback is a default
        if a.no_epoch_order:
            tr.remove_callback(EpochOrderCallback)
    tr.train(resume_from_checkpoint=a.resume)
    torch.save([q.detach().clone() for q in tr.model.parameters()], os.path.join(a.out, "final_params.pt"))


if __name__ == "__main__":
    main()
