"""Answers per second of `vpo eval`'s pool generation: vLLM's in-process engine vs transformers, on
the demo's evaluation shape (runs in the vLLM environment: bash scripts/setup_vllm_env.sh).

    .venv-vllm/bin/python benchmarks/vllm_vs_transformers.py            # table
    .venv-vllm/bin/python benchmarks/vllm_vs_transformers.py --json     # + one JSON object on the last line
    .venv-vllm/bin/python benchmarks/vllm_vs_transformers.py --quick    # a minute, tiny sizes (CI: does it run)

The demo's tiny model at its size (vpo.train.tiny, untrained: it writes up to the token limit, as a
trained one nearly does), the demo's test mazes (vpo.demo.stages.make_task(DemoConfig())), 30
answers per maze (m = 1: 30 rollouts of <= 24 tokens; m = 3: 10 rollouts of <= 64 tokens),
temperature 0.7. transformers runs as the demo's eval does (--batch-rows 512, one thread); vLLM
with its defaults (its OpenMP threads on every core). The engine's start-up is timed apart from
generation. The same pool is generated twice per backend; the faster run counts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")  # stdout: the table, then the JSON line last
warnings.filterwarnings("ignore")

SHAPES = ((1, 30, 24), (3, 10, 64))  # (m, rollouts, max new tokens): the demo's eval_budget = 30


def _timed_pool(gen, task, examples, cfg, repeats: int) -> tuple[float, int]:
    from vpo.search.generate import generate_pool

    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        pool = generate_pool(task=task, examples=examples, generator=gen, config=cfg, progress=False)
        best = min(best, time.perf_counter() - t0)
    return best, int(pool.rewards.shape[0] * pool.rewards.shape[1])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mazes", type=int, default=20, help="test mazes per pool (the demo evaluates 100)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--eager", action="store_true", help="vLLM without torch.compile (faster start)")
    ap.add_argument("--quick", action="store_true", help="tiny sizes: checks the script runs, figures meaningless")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    shapes = SHAPES
    if a.quick:
        a.mazes, a.repeats, a.eager, shapes = 2, 1, True, ((1, 4, 8), (3, 2, 12))

    import vllm

    from vpo.demo import DemoConfig
    from vpo.demo.stages import make_task
    from vpo.search.backends import PoolConfig, TransformersGenerator, VLLMGenerator
    from vpo.train.tiny import build_tiny_model

    demo = DemoConfig()
    task = make_task(demo)
    examples = task.load("test", n=a.mazes)
    rows, out = [], {"mazes": a.mazes, "vllm_version": vllm.__version__, "cpu_count": os.cpu_count()}
    with tempfile.TemporaryDirectory() as tmp:
        path = build_tiny_model(tmp, hidden_size=demo.hidden_size, num_layers=demo.num_layers, num_heads=4)
        t0 = time.perf_counter()
        vgen = VLLMGenerator(path, PoolConfig(), **({"enforce_eager": True} if a.eager else {}))
        out["vllm_startup_s"] = time.perf_counter() - t0
        tgen = TransformersGenerator(path, cfg=PoolConfig(num_threads=1, max_batch_rows=512))
        tot = {"vllm": [0.0, 0], "transformers": [0.0, 0]}
        for m, rollouts, max_new in shapes:
            cfg = PoolConfig(
                num_answers=m,
                n_rollouts=rollouts,
                temperature=demo.eval_temperature,
                max_new_tokens=max_new,
                max_batch_rows=512,
                num_threads=1,
            )
            row = {"m": m, "rollouts": rollouts, "max_new_tokens": max_new}
            for name, gen in (("vllm", vgen), ("transformers", tgen)):
                gen.cfg = cfg
                secs, answers = _timed_pool(gen, task, examples, cfg, a.repeats)
                row[f"{name}_s"], row[f"answers_per_s_{name}"] = secs, answers / secs
                tot[name][0] += secs
                tot[name][1] += answers
            row["speedup_vllm"] = row["answers_per_s_vllm"] / row["answers_per_s_transformers"]
            rows.append(row)
    for name, (secs, answers) in tot.items():
        out[f"answers_per_s_{name}"] = answers / secs
    out["speedup_vllm"] = out["answers_per_s_vllm"] / out["answers_per_s_transformers"]
    out["shapes"] = rows

    per_maze = "/".join(sorted({str(m * r) for m, r, _ in shapes}))
    print(
        f"{a.mazes} demo test mazes, {per_maze} answers each, T = {demo.eval_temperature}; vLLM {vllm.__version__}, "
        f"start-up {out['vllm_startup_s']:.1f} s (not counted below)"
    )
    print("| shape | transformers (1 thread) | vLLM | vLLM / transformers |\n|---|---|---|---|")
    for r in rows:
        print(
            f"| m = {r['m']}, {r['rollouts']} rollouts, <= {r['max_new_tokens']} tokens | "
            f"{r['answers_per_s_transformers']:.1f} answers/s | {r['answers_per_s_vllm']:.1f} answers/s | "
            f"{r['speedup_vllm']:.2f}x |"
        )
    print(
        f"| both | {out['answers_per_s_transformers']:.1f} answers/s | {out['answers_per_s_vllm']:.1f} answers/s | "
        f"{out['speedup_vllm']:.2f}x |"
    )
    if a.json:
        print(json.dumps(out))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
