"""One demo RL step's two prompt-heavy parts, plain vs ``shared_prompt_forward`` (each distinct prompt
once): the log-probability pass (TRL's per-row forward) and the rollouts' sampling (``generate``).
Same model, batch and shapes, alternating in one run.

    python benchmarks/shared_prefix.py            # table
    python benchmarks/shared_prefix.py --json     # + one JSON object on the last line
    python benchmarks/shared_prefix.py --quick    # seconds, tiny sizes (CI: does it run)

Per configuration it times what a demo step does with log-probabilities: the reference model's
forward (no gradients) and the policy's forward + backward, on the demo's tiny model with demo
prompts (maze grids) and random completions of the configuration's length. Configurations: GRPO
(8 prompts x 8 rollouts, 24 completion tokens), VPO m = 3 (8 x 8, 64 tokens), GRPO 3x (8 x 24, 24
tokens). Sampling: ``generate`` of the configuration's rows at temperature 1 with a static cache, plain
vs ``shared_prefix_generate`` (the same tokens). One torch thread, as in the demo's jobs; medians
over ``--repeats`` alternating rounds, and the median of the per-round ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
import types
import warnings

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
warnings.filterwarnings("ignore")

CONFIGS = {"grpo": (8, 8, 24), "vpo_m3": (8, 8, 64), "grpo_3x": (8, 24, 24)}  # prompts, G, completion tokens


def _batch(tok, prompts: list[str], g: int, c: int, seed: int):
    import torch

    enc = tok(prompts, padding=True, padding_side="left", return_tensors="pt")
    gen = torch.Generator().manual_seed(seed)
    ids = enc.input_ids.repeat_interleave(g, 0)
    mask = enc.attention_mask.repeat_interleave(g, 0)
    comp = torch.randint(3, tok.vocab_size, (ids.size(0), c), generator=gen)
    lens = torch.randint(c // 2, c + 1, (ids.size(0),), generator=gen)
    cmask = (torch.arange(c)[None, :] < lens[:, None]).long()
    order = torch.randperm(ids.size(0), generator=gen)  # TRL shuffles the generation batch
    return torch.cat([ids, comp], 1)[order], torch.cat([mask, cmask], 1)[order], c


def _time(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument(
        "--quick", action="store_true", help="tiny sizes (seconds): checks the script runs, figures meaningless"
    )
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer
    from trl.trainer.utils import add_fused_lm_head

    from vpo.demo import DemoConfig
    from vpo.demo.stages import make_task
    from transformers import GenerationConfig

    from vpo.search.shared_prefix import shared_prefix_generate
    from vpo.search.shared_prefix import shared_prefix_logps
    from vpo.train.tiny import build_tiny_model

    torch.set_num_threads(a.threads)
    cfg = DemoConfig()
    configs = {"grpo": (2, 4, 8)} if a.quick else CONFIGS
    repeats = 1 if a.quick else a.repeats
    with tempfile.TemporaryDirectory() as tmp:
        hidden, layers = (32, 1) if a.quick else (cfg.hidden_size, cfg.num_layers)
        path = build_tiny_model(f"{tmp}/m", hidden_size=hidden, num_layers=layers, num_heads=4)
        tok = AutoTokenizer.from_pretrained(path)
        policy = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        ref = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        for m in (policy, ref):
            add_fused_lm_head(m, temperature=1.0, outputs=("log_probs", "entropy"))
        task = make_task(cfg)
        examples = task.load("validation", n=max(p for p, _, _ in configs.values()))
        fake = types.SimpleNamespace(
            accelerator=types.SimpleNamespace(autocast=contextlib.nullcontext, is_main_process=True)
        )

        def trl_path(ids, mask, c):
            with torch.no_grad():
                GRPOTrainer._get_per_token_logps_and_entropies(fake, ref, ids, mask, c)
            lp, _, _ = GRPOTrainer._get_per_token_logps_and_entropies(fake, policy, ids, mask, c, compute_entropy=True)
            lp.sum().backward()

        def shared_path(ids, mask, c):
            with torch.no_grad():
                shared_prefix_logps(ref, ids, mask, c, 1.0)
            lp, _ = shared_prefix_logps(policy, ids, mask, c, 1.0, compute_entropy=True)
            lp.sum().backward()

        rows, gen_rows, out = [], [], {"threads": a.threads, "repeats": repeats}
        for name, (p, g, c) in configs.items():
            prompts = [task.build_prompt(ex, 3 if name == "vpo_m3" else 1) for ex in examples[:p]]
            ids, mask, c = _batch(tok, prompts, g, c, seed=0)
            trl_path(ids, mask, c)  # warm-up both
            shared_path(ids, mask, c)
            t_trl, t_sh = [], []
            for _ in range(repeats):
                policy.zero_grad()
                t_trl.append(_time(lambda: trl_path(ids, mask, c)))  # noqa: B023
                policy.zero_grad()
                t_sh.append(_time(lambda: shared_path(ids, mask, c)))  # noqa: B023
            ratios = [x / y for x, y in zip(t_trl, t_sh)]
            out[f"trl_s_{name}"] = statistics.median(t_trl)
            out[f"shared_s_{name}"] = statistics.median(t_sh)
            out[f"speedup_{name}"] = statistics.median(ratios)
            out[f"speedup_{name}_range"] = [min(ratios), max(ratios)]
            out[f"tokens_{name}"] = [int(ids.size(0)), int(ids.size(1) - c), int(c)]
            rows.append(
                (
                    name,
                    f"{p} x {g}",
                    ids.size(1) - c,
                    c,
                    out[f"trl_s_{name}"],
                    out[f"shared_s_{name}"],
                    out[f"speedup_{name}"],
                    min(ratios),
                    max(ratios),
                )
            )
            # sampling the rollouts: plain generate vs each prompt's prefill once
            pid, pmask = ids[:, : ids.size(1) - c], mask[:, : ids.size(1) - c]
            gc = GenerationConfig(
                max_new_tokens=c,
                do_sample=True,
                temperature=1.0,
                top_k=0,
                top_p=1.0,
                cache_implementation="static",
                pad_token_id=tok.pad_token_id,
                eos_token_id=tok.eos_token_id,
            )
            g_plain, g_sh = [], []
            with torch.no_grad():
                for _ in range(repeats + 1):  # the first round warms both up
                    torch.manual_seed(0)
                    g_plain.append(
                        _time(
                            lambda pid=pid, pmask=pmask, gc=gc: policy.generate(
                                input_ids=pid, attention_mask=pmask, generation_config=gc
                            )
                        )
                    )
                    torch.manual_seed(0)
                    g_sh.append(
                        _time(
                            lambda pid=pid, pmask=pmask, gc=gc: shared_prefix_generate(
                                policy.generate, policy, input_ids=pid, attention_mask=pmask, generation_config=gc
                            )
                        )
                    )
            gr = [x / y for x, y in zip(g_plain[1:], g_sh[1:])]
            out[f"gen_plain_s_{name}"] = statistics.median(g_plain[1:])
            out[f"gen_shared_s_{name}"] = statistics.median(g_sh[1:])
            out[f"gen_speedup_{name}"] = statistics.median(gr)
            gen_rows.append(
                (
                    name,
                    f"{p} x {g}",
                    c,
                    out[f"gen_plain_s_{name}"],
                    out[f"gen_shared_s_{name}"],
                    out[f"gen_speedup_{name}"],
                    min(gr),
                    max(gr),
                )
            )

    print(
        f"log-prob pass of one step (reference forward + policy forward/backward), {a.threads} thread(s), {repeats} alternating rounds"
    )
    print(
        f"{'config':<9} {'rows':>8} {'prompt':>7} {'compl.':>7} {'TRL s':>8} {'shared s':>9} {'speedup':>8} {'range':>13}"
    )
    for name, rws, pl, c, t1, t2, sp, lo, hi in rows:
        print(f"{name:<9} {rws:>8} {pl:>7} {c:>7} {t1:>8.3f} {t2:>9.3f} {sp:>7.2f}x {lo:>6.2f}-{hi:<5.2f}")
    print(f"\nsampling the rollouts (generate, T = 1, static cache), {repeats} alternating rounds after a warm-up")
    print(f"{'config':<9} {'rows':>8} {'new':>5} {'plain s':>8} {'shared s':>9} {'speedup':>8} {'range':>13}")
    for name, rws, c, t1, t2, sp, lo, hi in gen_rows:
        print(f"{name:<9} {rws:>8} {c:>5} {t1:>8.3f} {t2:>9.3f} {sp:>7.2f}x {lo:>6.2f}-{hi:<5.2f}")
    if a.json:
        print(json.dumps(out))


if __name__ == "__main__":
    sys.exit(main())
