"""Training worker for the kill-and-resume test (run as a subprocess by tests/train/test_resume.py).

usage: python resume_worker.py MODEL_DIR OUT_DIR MAX_STEPS [--resume CKPT] [--slow-after N]
Writes OUT_DIR/final_params.pt at the end. With --slow-after N it sleeps after every step past N,
so the parent has time to SIGKILL it mid-run (sleeping changes no computation).
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
        save_steps=2,
        use_cpu=True,
        seed=0,
        num_weightings=16,
        disable_tqdm=True,
    )
    cb = [Slow(a.slow_after)] if a.slow_after is not None else None
    tr = VPOTrainer(model=a.model, args=args, task=CharStatsTask.make(), callbacks=cb)
    tr.train(resume_from_checkpoint=a.resume)
    torch.save([q.detach().clone() for q in tr.model.parameters()], os.path.join(a.out, "final_params.pt"))


if __name__ == "__main__":
    main()
