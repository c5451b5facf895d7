"""The policy of the CPU recipe: vpo's tiny char-level Qwen2 with the CPU demo's supervised warm start.

Builds :func:`vpo.train.tiny.build_tiny_model` (no model hub) and fine-tunes it on the demo's
(prompt, completion) pairs (:func:`vpo.demo.stages.warm_pairs`: diverse mediocre answers in the
single- and the 3-answer format), so RL starts from a model that writes parseable answers.

One change for veRL: veRL 0.9.1's agent loop picks its prompt/response token builder from the
checkpoint's ``model_type`` and, for ``qwen2``, requires a ``<|im_end|>`` token in the tokenizer.
The tiny tokenizer's chat template does not use ChatML, so the token is added (unused; the
embedding table grows by one row) before the warm start.

    python examples/verl/make_policy.py --out runs/verl_cpu/policy --domain maze --steps 300
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

VERL_TOKENS = ["<|im_end|>"]
"""Tokens veRL's Qwen continuous-token builder requires (its constructor looks them up)."""


def build_policy(out: Path, domain: str = "maze", steps: int = 300, train_n: int = 1000, threads: int = 2) -> dict:
    import torch
    from tokenizers import AddedToken
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from vpo.demo.config import DemoConfig
    from vpo.demo.stages import make_task, warm_pairs
    from vpo.train.tiny import build_tiny_model
    from vpo.train.warmstart import supervised_warm_start

    torch.set_num_threads(threads)
    cfg = DemoConfig(domain=domain, warm_steps=steps)
    init = out.parent / f"{out.name}_init"
    build_tiny_model(init, hidden_size=cfg.hidden_size, num_layers=cfg.num_layers, num_heads=4)
    tok = AutoTokenizer.from_pretrained(init)
    model = AutoModelForCausalLM.from_pretrained(init)
    added = tok.add_tokens([AddedToken(t, special=True, normalized=False) for t in VERL_TOKENS])
    if added:
        model.resize_token_embeddings(len(tok))
        model.config.vocab_size = len(tok)
    model.save_pretrained(init)
    tok.save_pretrained(init)
    task = make_task(cfg)
    pairs = warm_pairs(cfg, task, task.load("train", n=train_n))
    t0 = time.time()
    info = supervised_warm_start(
        init, out, pairs, steps=cfg.warm_steps, batch_size=cfg.warm_batch, learning_rate=cfg.warm_lr, progress=False
    )
    info = {
        "domain": domain,
        "task_options": cfg.task_options(),
        "steps": steps,
        "pairs": len(pairs),
        "seconds": round(time.time() - t0, 1),
        "loss_first": info["loss_first"],
        "loss_last": info["loss_last"],
    }
    (out / "vpo_policy.json").write_text(json.dumps(info, indent=1))
    return info


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="directory of the policy checkpoint")
    p.add_argument("--domain", default="maze", choices=["maze", "prog"])
    p.add_argument("--steps", type=int, default=300, help="warm-start steps (the demo uses 600)")
    p.add_argument("--train-n", type=int, default=1000, help="training problems the warm start sees")
    p.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "2")))
    args = p.parse_args(argv)
    out = Path(args.out).expanduser().resolve()
    done = out / "vpo_policy.json"
    if done.exists():
        prev = json.loads(done.read_text())
        if prev.get("domain") == args.domain and prev.get("steps") == args.steps:
            print(f"policy exists: {out} ({prev})")
            return 0
    info = build_policy(out, args.domain, args.steps, args.train_n, args.threads)
    print(f"policy: {out} {info}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
