"""Train and evaluate the recommendation example on CPU: a tiny model, a warm start, VPO vs GRPO.

    python examples/recommend/run.py --out runs/recommend            # the default (a few minutes)
    python examples/recommend/run.py --out /tmp/rec --quick          # seconds: what the test runs

Steps: build a tiny Qwen2 (vpo.train.tiny) and warm-start it on random catalog ids in the single-
and the 3-answer format (vpo.train.warmstart), so that it writes parsable ids; train VPO (m = 3)
and GRPO (m = 1) from that start with VPOTrainer; sample pools on the test requests at the same
answer budget and write one report (vpo.search) with best@k, pass@k, E_w[best@k], diversity, and
the figures under the hard constraint ``budget>=0.5`` (no item above $37.50). The last line
printed is one JSON object: the report's path and the headline numbers.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TASK = f"{HERE / 'task.py'}:make_task"  # how vpo train / vpo eval name this task too

METHODS = {"vpo": ("vpo", 3), "grpo": ("grpo", 1)}
"""Trained from the warm start: name -> (estimator, m)."""
CONSTRAINT = "budget>=0.5"


def settings(quick: bool) -> dict:
    if quick:
        return dict(
            hidden_size=64,
            num_layers=1,
            warm_steps=150,
            warm_batch=16,
            warm_lr=6e-3,
            rl_steps=1,
            generations=4,
            prompts_per_step=2,
            eval_prompts=3,
            eval_budget=6,
            eval_seeds=2,
        )
    return dict(
        hidden_size=64,
        num_layers=2,
        warm_steps=400,
        warm_batch=32,
        warm_lr=3e-3,
        rl_steps=40,
        generations=8,
        prompts_per_step=4,
        eval_prompts=12,
        eval_budget=24,
        eval_seeds=5,
    )


def make_task():
    from vpo.tasks import get

    return get(TASK)


def warm_pairs(task, examples, per_example: int, seed: int = 0) -> list[tuple[str, str]]:
    """(prompt, completion) pairs with uniformly random catalog ids: parsable, deliberately mediocre."""
    from vpo.tasks.registry import load_factory
    from vpo.train.warmstart import format_answers

    rng = random.Random(seed)
    ids = sorted(load_factory(f"{HERE / 'task.py'}:CATALOG"))
    pairs = []
    for ex in examples:
        for _ in range(per_example):
            pairs.append((task.build_prompt(ex, 1), format_answers([rng.choice(ids)], 1)))
            pairs.append((task.build_prompt(ex, 3), format_answers(rng.sample(ids, 3), 3)))
    return pairs


def train(method: str, init: Path, out: Path, s: dict, seed: int) -> Path:
    from vpo.train import VPOConfig, VPOTrainer

    estimator, m = METHODS[method]
    args = VPOConfig(
        output_dir=str(out),
        estimator=estimator,
        num_answers=m,
        num_generations=s["generations"],
        per_device_train_batch_size=s["prompts_per_step"] * s["generations"],
        max_completion_length=6 * m,
        max_steps=s["rl_steps"],
        learning_rate=3e-4,
        lr_scheduler_type="constant",
        beta=1e-3,
        num_weightings=32,
        seed=seed,
        use_cpu=True,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        bf16=False,
        dataloader_num_workers=0,
    )
    trainer = VPOTrainer(model=str(init), args=args, task=make_task())
    trainer.train()
    trainer.save_model(str(out))
    return out


def evaluate(models: dict[str, tuple[Path, int]], out: Path, s: dict, seed: int) -> dict:
    from vpo.search import evaluate_pool, generate_pool, write_report
    from vpo.search.backends import PoolConfig
    from vpo.search.constraints import constrained_metrics

    task = make_task()
    examples = task.load("test")[: s["eval_prompts"]]
    kw = dict(
        ks=tuple(k for k in (1, 3, 6, 12, 24) if k <= s["eval_budget"]),
        seeds=tuple(range(s["eval_seeds"])),
        bootstrap=200,
    )
    results = {}
    for name, (path, m) in models.items():
        cfg = PoolConfig(
            num_answers=m,
            n_rollouts=math.ceil(s["eval_budget"] / m),
            temperature=1.0,
            max_new_tokens=6 * m,
            seed=seed,
            backend="transformers",
            device="cpu",
            num_threads=1,
        )
        pool = generate_pool(
            str(path),
            task,
            examples,
            config=cfg,
            out_dir=out / name / "pool",
            resume=False,
            progress=False,
            split="test",
        )
        res = evaluate_pool(pool, **kw)
        res["constrained"] = constrained_metrics(pool, [CONSTRAINT], **kw)
        results[name] = res
    write_report(results, out, title="Recommendation example: VPO vs GRPO", plots=False)
    return results


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output directory (models, pools, report)")
    ap.add_argument("--quick", action="store_true", help="tiny sizes (seconds): the test's setting")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    import torch

    from vpo.train.tiny import build_tiny_model
    from vpo.train.warmstart import supervised_warm_start

    torch.set_num_threads(1)
    s = settings(args.quick)
    out = Path(args.out)
    t0 = time.time()
    task = make_task()
    init = build_tiny_model(
        out / "init",
        hidden_size=s["hidden_size"],
        num_layers=s["num_layers"],
        num_heads=4,
        max_position_embeddings=256,
        seed=args.seed,
    )
    pairs = warm_pairs(task, task.load("train"), per_example=8)
    info = supervised_warm_start(
        init,
        out / "warmstart",
        pairs,
        steps=s["warm_steps"],
        batch_size=s["warm_batch"],
        learning_rate=s["warm_lr"],
        warmup_steps=min(50, s["warm_steps"] // 10),
        seed=args.seed,
        progress=False,
    )
    models = {"warmstart_m3": (out / "warmstart", 3)}
    for method, (_, m) in METHODS.items():
        models[method] = (train(method, out / "warmstart", out / "runs" / method, s, args.seed), m)
    results = evaluate(models, out / "eval", s, args.seed)
    summary = {
        "report": str(out / "eval" / "report.json"),
        "seconds": round(time.time() - t0, 1),
        "warm_loss": [round(info["loss_first"], 3), round(info["loss_last"], 3)],
        "constraint": CONSTRAINT,
    }
    for name, r in results.items():
        b, c = r["metrics"]["best_at_k"], r["constrained"]["metrics"]["best_at_k"]
        summary[name] = {
            "k": b["k"],
            "best_at_k": [round(x, 4) for x in b["mean"]],
            "best_at_k_constrained": [round(x, 4) for x in c["mean"]],
            "diversity": r["metrics"]["diversity"]["mean"],
            "valid_answer_frac": r["metrics"]["valid_answer_frac"]["mean"],
            "filtered_frac": r["constrained"]["filtered_frac"],
        }
    print((out / "eval" / "report.md").read_text())
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
