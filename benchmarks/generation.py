"""CPU sampling time of the demo's tiny model: transformers' default (growing) KV cache vs a
preallocated static one, which `vpo eval` (TransformersGenerator on CPU) and the demo's training
configs use. Same model, prompts and token count, alternating in one run.

    python benchmarks/generation.py            # table
    python benchmarks/generation.py --json     # + one JSON object on the last line
    python benchmarks/generation.py --quick    # seconds, tiny sizes (CI: does it run)

Every call samples exactly ``--tokens`` new tokens per row (min_new_tokens = max_new_tokens), so
both settings do the same work; one torch thread, as in the demo's evaluation jobs. Medians over
``--repeats`` alternating rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import warnings

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
warnings.filterwarnings("ignore")


def main(argv=None) -> None:
    from vpo.demo import DemoConfig
    from vpo.demo.stages import make_task

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=512, help="rows per generate call (the demo eval's --batch-rows)")
    ap.add_argument("--tokens", type=int, default=64, help="new tokens per row (the demo's 3-answer limit)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument(
        "--maze-size", type=int, default=DemoConfig().maze_size, help="maze side of the prompts (demo default)"
    )
    ap.add_argument(
        "--quick", action="store_true", help="tiny sizes (seconds): checks the script runs, figures meaningless"
    )
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if a.quick:
        a.batch, a.tokens, a.repeats = 4, 4, 1

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from vpo.train.tiny import build_tiny_model

    torch.set_num_threads(a.threads)
    cfg = DemoConfig(maze_size=a.maze_size)
    with tempfile.TemporaryDirectory() as tmp:
        path = build_tiny_model(tmp, hidden_size=cfg.hidden_size, num_layers=cfg.num_layers, num_heads=4)
        tok = AutoTokenizer.from_pretrained(path)
        tok.padding_side = "left"
        model = AutoModelForCausalLM.from_pretrained(path).eval()
    task = make_task(cfg)
    examples = task.load("test", n=a.batch)
    prompts = [
        tok.apply_chat_template(
            [{"role": "user", "content": task.build_prompt(ex, 3)}], tokenize=False, add_generation_prompt=True
        )
        for ex in examples
    ]
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    common = dict(
        do_sample=True,
        temperature=0.7,
        top_k=0,
        top_p=1.0,
        max_new_tokens=a.tokens,
        min_new_tokens=a.tokens,
        pad_token_id=tok.pad_token_id,
    )
    settings = {"dynamic": {}, "static": {"cache_implementation": "static"}}
    times: dict[str, list[float]] = {k: [] for k in settings}
    with torch.no_grad():
        for extra in settings.values():  # warm-up (allocations, lazy inits), not timed
            model.generate(**enc, **common, **extra)
        for r in range(a.repeats):
            for k, extra in settings.items():
                torch.manual_seed(r)
                t0 = time.perf_counter()
                out = model.generate(**enc, **common, **extra)
                times[k].append(time.perf_counter() - t0)
                assert out.shape == (a.batch, enc.input_ids.shape[1] + a.tokens), out.shape
                print(f"round {r} {k:8s} {times[k][-1]:.2f} s", file=sys.stderr)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(
        f"\nsampling {a.batch} rows x {a.tokens} new tokens (prompt {enc.input_ids.shape[1]} tokens), "
        f"tiny Qwen2 ({sum(p.numel() for p in model.parameters()) / 1e6:.2f} M), {a.threads} thread(s); "
        f"medians over {a.repeats} alternating rounds"
    )
    print(f"{'KV cache':10s} {'median s':>9s} {'vs dynamic':>11s}")
    for k in settings:
        print(f"{k:10s} {med[k]:9.2f} {med[k] / med['dynamic']:11.3f}")
    res = {
        "dynamic_cache_s": med["dynamic"],
        "static_cache_s": med["static"],
        "speedup_static_vs_dynamic": med["dynamic"] / med["static"],
        "batch": a.batch,
        "new_tokens": a.tokens,
        "maze_size": a.maze_size,
        "repeats": a.repeats,
    }
    if a.json:
        print(json.dumps(res))


if __name__ == "__main__":
    main(sys.argv[1:])
