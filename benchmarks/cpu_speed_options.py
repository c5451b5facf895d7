"""What the CPU speed switches left to try buy on the demo's shapes: a warm-start step and the RL
step's sampling, each against today's setting, side by side in one run.

    python benchmarks/cpu_speed_options.py            # table
    python benchmarks/cpu_speed_options.py --json     # + one JSON object on the last line
    python benchmarks/cpu_speed_options.py --quick    # seconds (CI: does it run; figures meaningless)

The ten-replicate maze demo takes ~36 min on this 2-core machine against a target of 30
(docs/demo.md, "Where the time goes"), so each switch below is measured where the time is:

- **warm-start step** (a third of a replicate): the demo's 4-layer, 128-wide Qwen2, a typical
  length-bucketed batch of 32 of its real pairs (benchmarks/warm_start_profile.py's), AdamW and
  gradient clipping. Variants: bf16 autocast (this CPU has AVX512-BF16), eager attention instead
  of SDPA, denormals flushed to zero.
- **sampling** (a third of a VPO step): the RL step's shape, 8 prompts x G = 8 rows, 64 new tokens
  per row (min_new_tokens = max_new_tokens, so every variant does the same work), a static KV cache,
  T = 1. Variants: SDPA's math backend instead of its CPU flash kernel, eager attention, bf16
  autocast. "same tokens" compares the sampled tokens with today's setting under the same seed.
  Then one call of today's setting under cProfile: the shares of torch's kernels (attention, the
  linear layers, the rest) and of Python (transformers' modules and generation loop).

Medians over ``--repeats`` rounds in which every variant runs once, in turn; one torch thread (as
the demo's jobs). A ratio below 1 is a speed-up. The model is freshly initialised (the shapes, not
the weights, set the cost).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import warnings
from contextlib import contextmanager, nullcontext
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
warnings.filterwarnings("ignore")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from estimators import alternating_times  # noqa: E402  (the estimator benchmark's alternating rounds)
from warm_start_profile import _batch  # noqa: E402  (the profile's typical warm-start batch)


@contextmanager
def _flush_denormal():
    import torch

    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(False)


def _bf16():
    import torch

    return torch.autocast("cpu", dtype=torch.bfloat16)


def _sdpa_math():
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel(SDPBackend.MATH)


WARM_VARIANTS = {  # name: (attention implementation, context)
    "today (fp32, SDPA)": ("sdpa", nullcontext),
    "bf16 autocast": ("sdpa", _bf16),
    "eager attention": ("eager", nullcontext),
    "flush denormals": ("sdpa", _flush_denormal),
}
SAMPLE_VARIANTS = {
    "today (fp32, SDPA flash)": ("sdpa", nullcontext),
    "SDPA math backend": ("sdpa", _sdpa_math),
    "eager attention": ("eager", nullcontext),
    "bf16 autocast": ("sdpa", _bf16),
}


def _rounds(fns: dict, repeats: int) -> dict[str, float]:
    """Median seconds of each callable over ``repeats`` rounds, each round calling every one in turn
    (after one untimed warm-up call each)."""
    for f in fns.values():
        f()
    return {k: statistics.median(v) for k, v in alternating_times(fns, repeats).items()}


def _kernel_split(fn) -> dict[str, float]:
    """Shares of ``fn()``'s time under cProfile: torch's C functions (attention, the linear layers, the
    rest of them) against everything else (Python: transformers' modules, the generation loop)."""
    import cProfile
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    shares = dict.fromkeys(("attention", "linear layers", "other torch kernels", "Python"), 0.0)
    stats = pstats.Stats(prof).stats
    total = sum(v[2] for v in stats.values())  # tottime
    for (file, _, name), v in stats.items():
        if file == "~" and "torch." in name:  # torch's C functions and tensor methods
            key = (
                "attention"
                if "scaled_dot_product" in name
                else "linear layers"
                if "_nn.linear" in name
                else "other torch kernels"
            )
        else:
            key = "Python"
        shares[key] += v[2] / total
    return shares


def measure(repeats: int, quick: bool) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    from vpo.demo.config import DemoConfig
    from vpo.demo.stages import make_task, warm_pairs
    from vpo.train.tiny import build_tiny_model

    torch.set_num_threads(1)
    cfg = DemoConfig()
    task = make_task(cfg)
    batch = 4 if quick else cfg.warm_batch
    pairs = warm_pairs(cfg, task, task.load("train", n=4 * batch), 0)
    with tempfile.TemporaryDirectory() as tmp:
        path = build_tiny_model(
            Path(tmp) / "init", hidden_size=cfg.hidden_size, num_layers=cfg.num_layers, num_heads=4, seed=0
        )
        tok = AutoTokenizer.from_pretrained(path)
        models = {
            impl: AutoModelForCausalLM.from_pretrained(path, attn_implementation=impl) for impl in ("sdpa", "eager")
        }
        fresh = {  # one training copy per warm-start variant: same initial weights, its own optimizer
            name: AutoModelForCausalLM.from_pretrained(path, attn_implementation=impl)
            for name, (impl, _) in WARM_VARIANTS.items()
        }

    ids, attn, labels = _batch(tok, pairs, batch)

    def warm_step(name: str):
        model, ctx = fresh[name], WARM_VARIANTS[name][1]
        model.train()
        opt = opts[name]

        def step():
            with ctx():
                loss = model(input_ids=ids, attention_mask=attn, labels=labels).loss
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                opt.zero_grad(set_to_none=True)

        return step

    opts = {name: torch.optim.AdamW(m.parameters(), lr=cfg.warm_lr, weight_decay=0.0) for name, m in fresh.items()}
    warm = _rounds({name: warm_step(name) for name in WARM_VARIANTS}, repeats)

    prompts_n, rows_per = (2, 2) if quick else (cfg.prompts_per_step, cfg.num_generations)
    tokens = 4 if quick else cfg.max_tokens_multi
    examples = task.load("train", n=prompts_n)
    prompts = [
        tok.apply_chat_template(
            [{"role": "user", "content": task.build_prompt(ex, 3)}], tokenize=False, add_generation_prompt=True
        )
        for ex in examples
        for _ in range(rows_per)
    ]
    tok.padding_side = "left"
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    gen_cfg = GenerationConfig(
        do_sample=True,
        temperature=cfg.train_temperature,
        top_k=0,
        top_p=1.0,
        max_new_tokens=tokens,
        min_new_tokens=tokens,
        cache_implementation="static",
        pad_token_id=tok.pad_token_id,
    )
    outputs: dict[str, torch.Tensor] = {}

    def sampler(name: str):
        impl, ctx = SAMPLE_VARIANTS[name]
        model = models[impl].eval()

        def sample():
            torch.manual_seed(0)
            with torch.no_grad(), ctx():
                outputs[name] = model.generate(**enc, generation_config=gen_cfg)

        return sample

    sample = _rounds({name: sampler(name) for name in SAMPLE_VARIANTS}, repeats)
    split = _kernel_split(sampler(next(iter(SAMPLE_VARIANTS))))
    base_out = outputs[next(iter(SAMPLE_VARIANTS))]
    same = {name: bool(torch.equal(out, base_out)) for name, out in outputs.items()}
    return {
        "warm_start_step": {"batch": list(ids.shape), "median_s": warm},
        "sampling": {
            "rows": len(prompts),
            "prompt_tokens": int(enc.input_ids.shape[1]),
            "new_tokens": tokens,
            "median_s": sample,
            "same_tokens": same,
            "cprofile_shares": split,
        },
        "repeats": repeats,
        "threads": 1,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=9, help="rounds (every variant once per round)")
    ap.add_argument("--quick", action="store_true", help="tiny sizes, 1 round (seconds; figures meaningless)")
    ap.add_argument("--json", action="store_true", help="print one JSON object on the last line")
    a = ap.parse_args(argv)
    res = measure(1 if a.quick else a.repeats, a.quick)
    for part, title in (("warm_start_step", "warm-start step"), ("sampling", "RL-step sampling")):
        med = res[part]["median_s"]
        base = next(iter(med.values()))
        res[part]["ratio_to_today"] = {k: v / base for k, v in med.items()}
        same = res[part].get("same_tokens")
        if part == "warm_start_step":
            shape = f"batch {res[part]['batch'][0]} x {res[part]['batch'][1]} tokens"
        else:
            shape = f"{res[part]['rows']} rows, {res[part]['prompt_tokens']}-token prompts, {res[part]['new_tokens']} new tokens"
        print(f"\n{title}: {shape}, 1 thread, medians over {res['repeats']} rounds")
        print(
            "| variant | median s | ratio to today |"
            + (" same tokens |" if same else "")
            + "\n|---|---|---|"
            + ("---|" if same else "")
        )
        for k, v in med.items():
            extra = f" {'yes' if same[k] else 'no'} |" if same else ""
            print(f"| {k} | {v:.4f} | {v / base:.3f} |{extra}")
    split = res["sampling"]["cprofile_shares"]
    print(
        "\nRL-step sampling, today's setting, under cProfile: "
        + ", ".join(f"{k} {100 * v:.0f} %" for k, v in split.items())
    )
    if a.json:
        print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
