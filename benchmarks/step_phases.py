"""Where a training step's time goes, and how close its two heavy parts come to the machine's limit;
used by benchmarks/train_step.py (``--model``), which runs the trainers and prints the tables.

Phases of one step, timed inside the real trainer by wrapping its methods (nested calls subtracted):

    generation   _generate_single_turn (rollouts: prefill + decode + sampling)
    scoring      _calculate_rewards (parsing answers, the task's scorers)
    advantages   the rest of _generate_and_score_completions (tokenising, the estimator, logging)
    logprob      _get_per_token_logps_and_entropies without gradients (old/reference policy; 0 at beta 0)
    forward      _get_per_token_logps_and_entropies with gradients (the policy's pass of the loss)
    backward     the rest of training_step (the loss from the log-probabilities, backward)
    optimizer    on_pre_optimizer_step to on_optimizer_step (clipping, the optimizer's step)
    other        the rest of the step (the trainer's loop, callbacks, logging)

Limits, read in the same process as the rates they bound (train_step.py): the decode limit in paired
rounds with the sampler's timings (the median of the per-round fractions counts), the training limit
before the trainers run and after (the faster reading counts: a burst of load can only slow a
reading down; both readings are in the JSON):

- decode: one decode step's matrix products alone, every weight matrix of the model (fused as vpo's
  sampler holds them, in its precision) applied to ``rows`` input vectors, back to back. At small
  ``rows`` these products stream the whole model from memory once per token, so this is the
  memory-and-compute bound of a decode step, not an in-cache product of one shape (which read 2-3x
  higher here and cannot be reached by a model that does not fit in cache).
- training: a product of the training pass's shape ([tokens, hidden] x [hidden, intermediate]) in the
  step's precision: compute-bound, the rate a forward/backward pass could at best reach.
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict

PHASES = ("generation", "scoring", "advantages", "logprob", "forward", "backward", "optimizer", "other")


class StepPhases:
    """Wraps one trainer's methods; ``per_step()`` returns each phase's seconds, one list per phase."""

    def __init__(self, trainer):
        import torch

        self.trainer = trainer
        self.raw: dict[str, list[float]] = defaultdict(list)
        self.passes: list[dict] = []  # shape of each forward with gradients (FLOP count)
        self._torch = torch
        for name in (
            "_generate_single_turn",
            "_calculate_rewards",
            "_generate_and_score_completions",
            "_get_per_token_logps_and_entropies",
            "training_step",
        ):
            self._wrap(name)

    def _wrap(self, name: str) -> None:
        f = getattr(self.trainer, name)
        torch = self._torch

        def timed(*a, **k):
            grad = torch.is_grad_enabled()
            t0 = time.perf_counter()
            out = f(*a, **k)
            dt = time.perf_counter() - t0
            key = name
            if name == "_get_per_token_logps_and_entropies":
                key = "forward" if grad else "logprob"
                if grad:
                    self.passes.append(_pass_shape(a, k))
            self.raw[key].append(dt)
            return out

        setattr(self.trainer, name, timed)

    def callback(self):
        from transformers import TrainerCallback

        raw = self.raw

        class PhaseCallback(TrainerCallback):
            def on_step_begin(self, args, state, control, **kw):
                self.t0 = time.perf_counter()

            def on_pre_optimizer_step(self, args, state, control, **kw):
                self.o = time.perf_counter()

            def on_optimizer_step(self, args, state, control, **kw):
                raw["optimizer"].append(time.perf_counter() - self.o)

            def on_step_end(self, args, state, control, **kw):
                raw["step"].append(time.perf_counter() - self.t0)

        return PhaseCallback()

    def per_step(self) -> dict[str, list[float]]:
        """Seconds of every phase at every step (one forward and no logprob pass per step here)."""
        r = self.raw
        n = len(r["step"])
        out = {p: [] for p in PHASES}
        for i in range(n):
            gen, score = r["_generate_single_turn"][i], r["_calculate_rewards"][i]
            prep = r["_generate_and_score_completions"][i]
            lp = r["logprob"][i] if len(r["logprob"]) == n else 0.0
            fwd = r["forward"][i]
            out["generation"].append(gen)
            out["scoring"].append(score)
            out["logprob"].append(lp)
            out["advantages"].append(prep - gen - score - lp)
            out["forward"].append(fwd)
            out["backward"].append(r["training_step"][i] - prep - fwd)
            out["optimizer"].append(r["optimizer"][i])
            out["other"].append(r["step"][i] - r["training_step"][i] - r["optimizer"][i])
        return out


def _pass_shape(a, k) -> dict:
    """Rows, sequence length, completion tokens and distinct prompts of one log-probability pass."""
    from vpo.search.shared_prefix import distinct_prompts

    input_ids, attention_mask, logits_to_keep = a[1], a[2], int(a[3])
    p = input_ids.size(1) - logits_to_keep
    uniq = distinct_prompts(input_ids[:, :p], attention_mask[:, :p])[0].size(0)
    return {
        "rows": int(input_ids.size(0)),
        "length": int(input_ids.size(1)),
        "completion": logits_to_keep,
        "prompts": uniq,
    }


def training_flops(shape: dict, body_params: int, head_params: int, shared: bool, lora: bool) -> float:
    """FLOPs of one policy pass forward and backward: 2 per weight and token processed forward, as
    many backward for the inputs' gradients, and as many again for the weights' gradients when they
    train (full fine-tuning; a LoRA adapter's own are negligible). Tokens processed: every row's
    whole sequence (TRL), or each distinct prompt once plus every row's completion (shared prompt).
    The LM head runs on the completion tokens only."""
    n, length, c, u = shape["rows"], shape["length"], shape["completion"], shape["prompts"]
    tokens = u * (length - c) + n * c if shared else n * length
    per_token = 2 * body_params
    fwd = tokens * per_token + n * c * 2 * head_params
    return fwd * (2 if lora else 3)


def median_phases(per_step: dict[str, list[float]], warmup: int) -> dict[str, float]:
    return {p: statistics.median(v[warmup:]) for p, v in per_step.items() if v[warmup:]}


def _best_median(fn, bursts: int = 3, repeats: int = 10) -> float:
    """The fastest of ``bursts`` medians of ``repeats`` timed calls (after one untimed)."""
    fn()
    meds = []
    for _ in range(bursts):
        ts = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        meds.append(statistics.median(ts))
    return min(meds)


def decode_gemm_seconds(decoder, rows: int) -> float:
    """Seconds of one decode step's products alone (module docstring), in the decoder's precision."""
    import torch
    import torch.nn.functional as F

    mats = [decoder.head]
    for lay in decoder.layers:
        mats += [lay.qkv, lay.o, lay.gu, lay.down]
    xs = {m.shape[1]: torch.randn(rows, m.shape[1]).to(decoder.dtype) for m in mats}

    def step():
        for m in mats:
            F.linear(xs[m.shape[1]], m)

    with torch.no_grad():
        return _best_median(step, repeats=5)


def gemm_gflops(rows: int, k: int, n: int, dtype) -> float:
    """GFLOP/s of a [rows, k] x [k, n] product in ``dtype`` (best burst median)."""
    import torch

    x, w = torch.randn(rows, k).to(dtype), torch.randn(k, n).to(dtype)
    with torch.no_grad():
        return 2 * rows * k * n / _best_median(lambda: x @ w) / 1e9


# -- the policy pass's operators -------------------------------------------------------------------
GROUPS = ("products (bf16)", "LM head products (float32)", "attention", "casts and copies", "everything else")
_PRODUCTS = ("aten::mm", "aten::bmm", "aten::addmm")


def _group(key: str, shapes, vocab: int) -> str:
    """The operator group of a profiler row: products touching the vocabulary (the float32 LM head)
    apart from the others (bf16 under autocast)."""
    if key in _PRODUCTS:
        return "LM head products (float32)" if vocab in {d for s in shapes or [] for d in (s or [])} else GROUPS[0]
    if "attention" in key:
        return "attention"
    if key in ("aten::copy_", "aten::_to_copy", "aten::to"):
        return "casts and copies"
    return "everything else"


def pass_profile(model_dir: str, lora: int, rows: int, prompt: int, completion: int, threads: int) -> dict:
    """Self CPU seconds of the VPO step's policy pass (shared prompt, bf16 autocast, float32 LM head,
    forward and backward) by operator group, from torch's profiler: where the pass falls short of the
    product rate. Two distinct prompts of ``prompt`` tokens, ``rows`` completions of ``completion``."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from train_step import lora_config
    from transformers import AutoModelForCausalLM
    from vpo.search.shared_prefix import shared_prefix_logps
    from vpo.train.fastpath import float32_head

    torch.set_num_threads(threads)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    if lora:
        from peft import get_peft_model

        model = get_peft_model(model, lora_config(lora))
    model.train()
    g = torch.Generator().manual_seed(0)
    vocab = model.config.vocab_size
    low = min(3, vocab - 1)  # past a tiny tokenizer's special tokens
    prompts = torch.randint(low, vocab, (2, prompt), generator=g).repeat_interleave(rows // 2, 0)
    ids = torch.cat([prompts, torch.randint(low, vocab, (rows, completion), generator=g)], 1)
    mask = torch.ones_like(ids)

    def once():
        with torch.autocast("cpu", dtype=torch.bfloat16), float32_head(model):
            logps, _ = shared_prefix_logps(model, ids, mask, completion, 1.0)
        logps.sum().backward()
        model.zero_grad()

    once()
    t0 = time.perf_counter()
    once()
    wall = time.perf_counter() - t0
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        once()
    groups = dict.fromkeys(GROUPS, 0.0)
    for ev in prof.key_averages(group_by_input_shape=True):
        groups[_group(ev.key, ev.input_shapes, vocab)] += ev.self_cpu_time_total / 1e6
    return {"wall_s": wall, "groups_s": groups, "rows": rows, "prompt": prompt, "completion": completion}


def main(argv=None) -> dict:
    import argparse
    import json

    ap = argparse.ArgumentParser(description="The VPO step's policy pass by operator group (module docstring).")
    ap.add_argument("--model", default=None, help="checkpoint, e.g. runs/smollm2 (vpo models fetch smollm2)")
    ap.add_argument("--quick", action="store_true", help="a tiny model and shape (seconds): checks the script runs")
    ap.add_argument("--lora", type=int, default=16)
    ap.add_argument("--rows", type=int, default=16)
    ap.add_argument("--prompt", type=int, default=247, help="prompt tokens (the shop prompts padded: 247)")
    ap.add_argument("--completion", type=int, default=24)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if a.quick:
        import tempfile

        from vpo.train.tiny import build_tiny_model

        a.model = str(build_tiny_model(tempfile.mkdtemp() + "/m", hidden_size=32, num_layers=1, num_heads=4))
        a.lora, a.rows, a.prompt, a.completion = 4, 4, 8, 4
    elif not a.model:
        ap.error("--model is required (or --quick)")
    r = pass_profile(a.model, a.lora, a.rows, a.prompt, a.completion, a.threads)
    total = sum(r["groups_s"].values())
    print(f"policy pass (forward + backward), {a.rows} rows: {r['wall_s']:.2f} s wall; profiler self time by group:")
    for name, sec in r["groups_s"].items():
        print(f"  {name:30s} {sec:7.3f} s  {sec / total:6.1%}")
    if a.json:
        print(json.dumps(r))
    return r


if __name__ == "__main__":
    import sys

    sys.path.insert(0, __import__("os").path.dirname(__file__))
    main(sys.argv[1:])
