"""Seconds per training step: VPOTrainer (estimator vpo, m = 3) vs VPOTrainer (grpo) vs TRL's own
GRPOTrainer, on the same tiny model, prompts and completion length, alternating in one run.

    python benchmarks/train_step.py            # table
    python benchmarks/train_step.py --json     # + one JSON object on the last line

Every trainer generates exactly ``--length`` tokens per completion (min_new_tokens = max), so the
policy-side work is identical and the difference is vpo's scoring + estimator overhead. The figure
is TRL's own ``step_time`` metric (generation + scoring + loss + backward of one optimizer step);
rounds alternate between trainers to spread machine noise evenly, and medians are reported.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import warnings

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
warnings.filterwarnings("ignore")


def char_objectives():
    def share(pred):
        return lambda ex, a: (sum(pred(c) for c in a) / len(a)) if a else 0.0

    return {
        "vowels": share(lambda c: c in "aeiouAEIOU"),
        "digits": share(str.isdigit),
        "upper": share(str.isupper),
    }


class SliceTask:
    """Benchmark task: the m answers are equal slices of the completion (a random tiny model
    produces no tags), objectives are character shares, so every estimator sees varied rewards."""

    @staticmethod
    def make(n):
        from vpo.tasks import FunctionTask

        class _T(FunctionTask):
            def parse(self, completion, m):
                k = max(1, len(completion) // m)
                return [completion[i * k : (i + 1) * k] for i in range(m) if completion[i * k : (i + 1) * k]]

        return _T("bench", char_objectives(), [{"id": i, "question": f"Write characters #{i}."} for i in range(n)])


def trl_reward_funcs():
    funcs = []
    for name, f in char_objectives().items():
        def rf(prompts, completions, _f=f, **kw):
            return [_f(None, c if isinstance(c, str) else c[-1]["content"]) for c in completions]

        rf.__name__ = name
        funcs.append(rf)
    return funcs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--steps", type=int, default=3, help="steps per trainer per round")
    ap.add_argument("--length", type=int, default=48, help="completion tokens")
    ap.add_argument("--batch", type=int, default=32, help="rollouts per step (G = 8)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    import torch
    from trl import GRPOConfig, GRPOTrainer

    from vpo.train import VPOConfig, VPOTrainer
    from vpo.train.trainer import build_task_dataset
    from vpo.train.tiny import build_tiny_model

    torch.set_num_threads(max(1, (os.cpu_count() or 2)))
    tmp = tempfile.mkdtemp()
    model_dir = str(build_tiny_model(os.path.join(tmp, "m"), hidden_size=128, num_layers=2))
    common = dict(
        num_generations=8,
        per_device_train_batch_size=a.batch,
        max_completion_length=a.length,
        generation_kwargs={"min_new_tokens": a.length},
        max_steps=a.steps,
        learning_rate=1e-4,
        beta=0.0,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        logging_steps=1,
        disable_tqdm=True,
        seed=0,
    )
    task = SliceTask.make(64)
    # one dataset (the m = 3 prompts) for all three trainers, so prompt lengths are identical
    ds = build_task_dataset(task, task.load("train"), 3, chat=True)

    def make(kind):
        out = os.path.join(tmp, kind)
        if kind == "trl_grpo":
            return GRPOTrainer(model=model_dir, reward_funcs=trl_reward_funcs(), args=GRPOConfig(output_dir=out, **common), train_dataset=ds)
        est, m = {"vpo_m3": ("vpo", 3), "vpo_grpo": ("grpo", 1)}[kind]
        return VPOTrainer(
            model=model_dir,
            args=VPOConfig(output_dir=out, estimator=est, num_answers=m, num_weightings=100, **common),
            task=task,
            train_dataset=ds,
        )

    kinds = ["trl_grpo", "vpo_grpo", "vpo_m3"]
    times = {k: [] for k in kinds}
    for r in range(a.rounds):
        for k in kinds if r % 2 == 0 else reversed(kinds):
            tr = make(k)
            tr.train()
            st = [h["step_time"] for h in tr.state.log_history if "step_time" in h]
            times[k].extend(st[1:])  # drop each run's first step (warm-up)
            print(f"round {r} {k:9s} " + " ".join(f"{x:.3f}" for x in st), file=sys.stderr)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"\nseconds per training step ({a.batch} rollouts x {a.length} tokens, tiny Qwen2 on CPU), medians over {len(times['vpo_m3'])} steps")
    print(f"{'trainer':28s} {'median s/step':>14s} {'vs TRL GRPO':>12s}")
    labels = {"trl_grpo": "TRL GRPOTrainer (baseline)", "vpo_grpo": "VPOTrainer estimator=grpo", "vpo_m3": "VPOTrainer estimator=vpo m=3"}
    for k in kinds:
        print(f"{labels[k]:28s} {med[k]:14.3f} {med[k] / med['trl_grpo']:12.3f}")
    res = {
        "s_per_step_trl_grpo": med["trl_grpo"],
        "s_per_step_vpo_grpo": med["vpo_grpo"],
        "s_per_step_vpo_m3": med["vpo_m3"],
        "overhead_ratio_vpo_vs_trl_grpo": med["vpo_m3"] / med["trl_grpo"],
        "overhead_ratio_vpo_vs_vpo_grpo": med["vpo_m3"] / med["vpo_grpo"],
    }
    if a.json:
        print(json.dumps(res))


if __name__ == "__main__":
    main()
