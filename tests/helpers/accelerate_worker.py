"""Worker for tests/train/test_accelerate.py, run by ``accelerate launch --num_processes 2 --cpu``.

usage: accelerate launch ... accelerate_worker.py MODEL_DIR OUT_DIR
Trains VPOTrainer (tiny model, CharStatsTask, estimator vpo, m = 3, G = 4, 6 rollouts per process,
so one of the 3 groups per step is split between the two processes) for 2 steps and writes
OUT_DIR/rank{R}.pt per process: per step the rollouts this process scored (example index, rewards,
valid, completion ids), the weight sampler's state before the advantages were computed, the
advantages this process kept for its rollouts, and the (completion ids, advantage) rows that
reached the loss (after TRL's shuffle).
"""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from conftest import CharStatsTask  # noqa: E402

from vpo.train import VPOConfig, VPOTrainer  # noqa: E402
from vpo.train.resume import EpochOrderCallback, SignalCheckpointCallback  # noqa: E402
from vpo.train.trainer import INDEX_COLUMN  # noqa: E402


class RecordingTrainer(VPOTrainer):
    """VPOTrainer that records, per process, what it scored and which advantages it used."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.rec_steps, self.rec_loss = [], []

    def _score_local(self, inputs, *rest, **kw):
        out = super()._score_local(inputs, *rest, **kw)
        self._rec = {
            "index": [int(x[INDEX_COLUMN]) for x in inputs],
            "rewards": torch.as_tensor(out[0]).clone(),
            "valid": torch.as_tensor(out[1]).clone(),
        }
        return out

    def _generate_and_score_completions(self, inputs):
        sampler_state = self.vpo_sampler.state_dict()
        output = super()._generate_and_score_completions(inputs)
        self.rec_steps.append(
            {
                **self._rec,
                "step": int(self.state.global_step),
                "sampler_state": sampler_state,
                "advantages": output["advantages"].detach().cpu().clone(),
                "completion_ids": output["completion_ids"].detach().cpu().clone(),
                "completion_mask": output["completion_mask"].detach().cpu().clone(),
            }
        )
        return output

    def _compute_loss(self, model, inputs):
        self.rec_loss.append(
            {
                "completion_ids": inputs["completion_ids"].detach().cpu().clone(),
                "completion_mask": inputs["completion_mask"].detach().cpu().clone(),
                "advantages": inputs["advantages"].detach().cpu().clone(),
            }
        )
        return super()._compute_loss(model, inputs)


def main():
    model, out = sys.argv[1], sys.argv[2]
    args = VPOConfig(
        output_dir=out,
        estimator="vpo",
        num_answers=3,
        num_generations=4,
        per_device_train_batch_size=6,
        max_completion_length=12,
        max_steps=2,
        learning_rate=5e-2,
        beta=1e-3,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        seed=0,
        num_weightings=16,
        disable_tqdm=True,
    )
    # vpo train's callbacks ride along: the signal callback's per-step all-reduce runs over gloo
    tr = RecordingTrainer(
        model=model,
        args=args,
        task=CharStatsTask.make(12),
        callbacks=[EpochOrderCallback(), SignalCheckpointCallback()],
    )
    tr.train()
    rank = tr.accelerator.process_index
    import torch.distributed as dist

    backend = dist.get_backend() if dist.is_initialized() else None
    torch.save(
        {
            "rank": rank,
            "backend": backend,
            "device": str(tr.accelerator.device),
            "world": tr.accelerator.num_processes,
            "steps": tr.rec_steps,
            "loss": tr.rec_loss,
            "target_weights": list(tr.vpo_target),
            "estimator_config": tr.vpo_estimator_config,
            "weight_sampler": (args.num_weightings, args.weight_alpha, args.weight_sampler, args.seed),
        },
        os.path.join(out, f"rank{rank}.pt"),
    )


if __name__ == "__main__":
    main()
