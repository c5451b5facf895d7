"""Where a demo warm-start step's time goes: shares of CPU time by operator under ``torch.profiler``.

    python benchmarks/warm_start_profile.py             # table
    python benchmarks/warm_start_profile.py --json      # + one JSON object on the last line
    python benchmarks/warm_start_profile.py --quick     # 2 steps (CI: does it run)

The step is the demo's (vpo.demo.stages.warm_start): the default 4-layer, 128-wide Qwen2 built by
vpo.train.tiny, its real (prompt, completion) pairs for the default maze (both formats, the chat
template, loss on the completion), a length-bucketed batch of 32, AdamW and gradient clipping, one
torch thread. It reports shares, not seconds (this machine is shared): matrix products
(``aten::mm``/``addmm``/``bmm``), scaled-dot-product attention (forward and backward), elementwise
products, and the rest. A warm start that is mostly matrix products is arithmetic: only fewer steps
or fewer tokens make it cheaper (docs/demo.md, "Where the time goes").
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

GROUPS = {
    # operator names; a name ending in "*" is a prefix (the attention kernel's forward and backward)
    "matrix products": ("aten::mm", "aten::addmm", "aten::bmm"),
    "attention (SDPA)": ("aten::_scaled_dot_product*",),
    "elementwise products": ("aten::mul",),
}


def _batch(tok, pairs, size):
    """A length bucket of ``size`` pairs from the middle of the length order (a typical batch of
    supervised_warm_start's bucketing), padded as it pads them."""
    import torch

    chat = [
        tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
        for p, _ in pairs
    ]
    enc = [
        (tok(p, add_special_tokens=False).input_ids, tok(c + (tok.eos_token or ""), add_special_tokens=False).input_ids)
        for p, (_, c) in zip(chat, pairs)
    ]
    enc = sorted(enc, key=lambda e: len(e[0]) + len(e[1]))
    mid = max(0, (len(enc) - size) // 2)
    enc = enc[mid : mid + size]
    L = max(len(a) + len(b) for a, b in enc)
    ids = torch.full((len(enc), L), tok.pad_token_id or 0, dtype=torch.long)
    labels = torch.full_like(ids, -100)
    attn = torch.zeros_like(ids)
    for i, (a, b) in enumerate(enc):
        ids[i, : len(a) + len(b)] = torch.tensor(a + b)
        labels[i, len(a) : len(a) + len(b)] = torch.tensor(b)
        attn[i, : len(a) + len(b)] = 1
    return ids, attn, labels  # fmt: skip


def profile(steps: int) -> dict:
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as tprofile
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from vpo.demo.config import DemoConfig
    from vpo.demo.stages import make_task, warm_pairs
    from vpo.train.tiny import build_tiny_model

    torch.set_num_threads(1)
    cfg = DemoConfig()
    task = make_task(cfg)
    pairs = warm_pairs(cfg, task, task.load("train", n=4 * cfg.warm_batch), 0)
    with tempfile.TemporaryDirectory() as tmp:
        path = build_tiny_model(
            Path(tmp) / "init", hidden_size=cfg.hidden_size, num_layers=cfg.num_layers, num_heads=4, seed=0
        )
        tok = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path)  # fmt: skip
    model.train()
    ids, attn, labels = _batch(tok, pairs, cfg.warm_batch)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.warm_lr, weight_decay=0.0)

    def step():
        model(input_ids=ids, attention_mask=attn, labels=labels).loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    step()  # warm-up
    with tprofile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    self_us = {e.key: e.self_cpu_time_total for e in prof.key_averages()}
    total = sum(self_us.values())

    def group(key: str) -> str:
        for g, names in GROUPS.items():
            if any(key.startswith(n[:-1]) if n.endswith("*") else key == n for n in names):
                return g
        return "the rest"

    shares = dict.fromkeys([*GROUPS, "the rest"], 0.0)
    for key, us in self_us.items():
        shares[group(key)] += us / total
    return {"steps": steps, "batch": list(ids.shape), "shares": shares}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="2 steps")
    ap.add_argument("--json", action="store_true", help="print one JSON object on the last line")
    a = ap.parse_args(argv)
    res = profile(2 if a.quick else a.steps)
    print(f"warm-start step, batch {res['batch'][0]} x {res['batch'][1]} tokens, {res['steps']} steps, 1 thread")
    print("| operators | share of CPU time |\n|---|---|")
    for g, v in res["shares"].items():
        print(f"| {g} | {100 * v:.0f} % |")
    if a.json:
        print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
