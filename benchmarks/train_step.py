"""Seconds per training step: VPOTrainer (estimator vpo, m = 3) vs VPOTrainer (grpo) vs TRL's own
GRPOTrainer, on the same tiny model and prompts, interleaved step by step in one process.

    python benchmarks/train_step.py            # table: equal token counts (every trainer 48 tokens)
    python benchmarks/train_step.py --demo     # the demo's shape: VPO rollouts ~3x longer than GRPO's
    python benchmarks/train_step.py --quick    # seconds, tiny sizes (CI: does it run)
    python benchmarks/train_step.py --json     # + one JSON object on the last line
    python benchmarks/train_step.py --model runs/smollm2 --lora 16 --shared-prompt --prompts shop \
        --batch 16 --length 24 --threads 2 --rounds 5   # a pretrained model (SmolLM2), LoRA, shop prompts

Every completion is forced to a fixed token count (min_new_tokens = max): ``--length`` for the
single-answer trainers, ``--vpo-length`` (default: the same) for vpo m = 3. With equal counts the
difference is vpo's scoring + estimator overhead; ``--demo`` uses the demo's model (4 x 128), batch
(8 prompts x 8) and measured tokens per rollout (GRPO ~11, VPO m = 3 ~31), so it prices a step as
the demo runs it. All three trainers are built first and each trains in its own thread, gated at
every optimizer step: one round = one step of each trainer, in alternating order, one at a time,
timed from release to step end (generation + scoring + loss + backward + optimizer step). Bursts of
load on a shared machine hit the three steps of a round alike, so the figure is the median of the
per-round ratios, with its IQR and range; the first ``--warmup`` rounds are dropped.

With ``--model`` (a pretrained checkpoint, e.g. SmolLM2-135M-Instruct from ``vpo models fetch
smollm2``) the same run also measures generation: tokens/s of vpo's sampler (and of transformers'
``generate`` as TRL runs it) on ``--batch`` rows of one shop prompt, as a fraction of the machine's
limit for it measured in the same process: one decode step's products alone (every weight matrix of
the model applied to ``--batch`` vectors, benchmarks/step_phases.py). Limit and rate are read in
paired rounds, so that a round's fraction compares two timings taken in the same state of a shared
machine, and the figure is the median of the rounds' fractions (with its IQR); the training pass
is compared with a product of its shape read before and after the trainers ran (the faster counts).
``--lora R`` trains a LoRA adapter of rank R
(every trainer the same), ``--shared-prompt`` runs VPOTrainer's prompt prefill once per distinct prompt
(``shared_prompt_forward``; TRL's GRPOTrainer has no such option), ``--prompts shop`` uses the
pretrained-model study's prompts (vpo.tasks.shop asked by name, as examples/smollm2/shop_task.py does: a
six-item list, ~150 tokens with the chat template) instead of one short line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
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
    def make(n, prompts: str = "short"):
        from vpo.tasks import FunctionTask

        if prompts == "shop":
            questions = [shop_question(i) for i in range(n)]
        else:
            questions = [f"Write characters #{i}." for i in range(n)]

        class _T(FunctionTask):
            def parse(self, completion, m):
                k = max(1, len(completion) // m)
                return [completion[i * k : (i + 1) * k] for i in range(m) if completion[i * k : (i + 1) * k]]

        return _T("bench", char_objectives(), [{"id": i, "question": q} for i, q in enumerate(questions)])


def shop_question(i: int) -> str:
    """Request i of the shop task's training split, asked by name as the first candidate of the
    pretrained-model study asked it (the prompts the shipped figures were measured with)."""
    from vpo.tasks.shop import ShopTask, requests

    return ShopTask(answer="name").question(requests("train")[i])


def trl_reward_funcs():
    funcs = []
    for name, f in char_objectives().items():

        def rf(prompts, completions, _f=f, **kw):
            return [_f(None, c if isinstance(c, str) else c[-1]["content"]) for c in completions]

        rf.__name__ = name
        funcs.append(rf)
    return funcs


class _Gate:
    """Holds a trainer at the start of every optimizer step until released (TrainerCallback duck type
    built in ``main`` so that importing this module does not import transformers)."""

    def __init__(self):
        self.arrived, self.go, self.done = (threading.Semaphore(0) for _ in range(3))
        self.error: BaseException | None = None
        self.finished = threading.Event()


def _callback(gate: _Gate):
    from transformers import TrainerCallback

    class GateCallback(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            gate.arrived.release()
            gate.go.acquire()

        def on_step_end(self, args, state, control, **kw):
            gate.done.release()

    return GateCallback()


def _wait(sem: threading.Semaphore, gate: _Gate, what: str, timeout: float = 900.0) -> None:
    if not sem.acquire(timeout=timeout):
        raise RuntimeError(f"timed out waiting for {what}")
    if gate.error is not None:
        raise RuntimeError(f"{what}: the trainer failed") from gate.error


def _spread(xs: list[float]) -> dict:
    q = statistics.quantiles(xs, n=4, method="inclusive") if len(xs) > 1 else [xs[0], xs[0], xs[0]]
    return {"median": statistics.median(xs), "iqr": [q[0], q[2]], "min": min(xs), "max": max(xs)}


def step_settings(batch: int, length: int, steps: int, precision: str = "float32") -> dict:
    """The trainer settings every benchmarked trainer shares: G = 8, ``batch`` rollouts of exactly
    ``length`` tokens, ``steps`` steps, no KL, CPU, no logging or saving (benchmarks/step_memory.py too).
    ``precision``: "float32" for every trainer, or "defaults": each trainer's own (TRL's GRPOConfig:
    bf16 autocast on a CPU; VPOConfig: bf16 on a CPU with bf16 units, else float32)."""
    out = dict(
        num_generations=8,
        per_device_train_batch_size=batch,
        max_completion_length=length,
        generation_kwargs={"min_new_tokens": length},
        max_steps=steps,
        learning_rate=1e-4,
        beta=0.0,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        # "float32": one precision for every trainer (TRL's GRPOConfig defaults to bf16 autocast on any
        # CPU, VPOConfig to bf16 only where the CPU has bf16 units); "defaults": each its own
        bf16=False,
        logging_steps=1,
        disable_tqdm=True,
        seed=0,
    )
    if precision == "defaults":
        del out["bf16"]
    return out


def _parse(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=10, help="timed rounds (one step of each trainer per round)")
    ap.add_argument("--warmup", type=int, default=1, help="rounds run first and dropped")
    ap.add_argument("--length", type=int, default=48, help="completion tokens of the single-answer trainers")
    ap.add_argument("--vpo-length", type=int, default=None, help="completion tokens of vpo m=3 (default: --length)")
    ap.add_argument("--batch", type=int, default=32, help="rollouts per step (G = 8)")
    ap.add_argument("--hidden", type=int, default=128, help="tiny model hidden size")
    ap.add_argument("--layers", type=int, default=2, help="tiny model layers")
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: all cores)")
    ap.add_argument("--model", default=None, help="a pretrained checkpoint instead of the tiny model (e.g. SmolLM2)")
    ap.add_argument("--lora", type=int, default=0, help="LoRA rank for every trainer (0: full fine-tuning)")
    ap.add_argument(
        "--shared-prompt",
        action="store_true",
        help="VPOTrainer: shared_prompt_forward true (default: unset, on a CPU on)",
    )
    ap.add_argument(
        "--precision",
        choices=("defaults", "float32"),
        default=None,
        help="each trainer's own default precision, or float32 for all (default: defaults with --model, else float32)",
    )
    ap.add_argument(
        "--plain",
        action="store_true",
        help="add VPOTrainer vpo m=3 as before the fast CPU step: float32, generate, every row whole",
    )
    ap.add_argument("--prompts", choices=("short", "shop"), default="short", help="prompt set (default: short)")
    ap.add_argument("--demo", action="store_true", help="the demo's shape: 4 x 128 model, 64 rollouts, 11 vs 31 tokens")
    ap.add_argument(
        "--quick", action="store_true", help="tiny sizes (seconds): checks the script runs, figures meaningless"
    )
    ap.add_argument("--json", action="store_true", help="print one JSON object on the last line")
    a = ap.parse_args(argv)
    a.precision = a.precision or ("defaults" if a.model else "float32")
    if a.demo:
        a.layers, a.hidden, a.batch, a.length, a.vpo_length = 4, 128, 64, 11, 31
    if a.quick:
        a.layers, a.hidden, a.batch, a.length, a.rounds, a.warmup = 1, 32, 8, 4, 2, 1
        a.vpo_length = 3 * a.length if a.demo else None
    return a


LABELS = {
    "trl_grpo": "TRL GRPOTrainer (baseline)",
    "vpo_grpo": "VPOTrainer estimator=grpo",
    "vpo_m3": "VPOTrainer estimator=vpo m=3",
    "vpo_m3_plain": "vpo m=3, plain (before #48)",
}


def main(argv=None) -> dict:
    a = _parse(argv)
    vpo_length = a.vpo_length or a.length

    import torch

    from step_phases import StepPhases, median_phases
    from vpo.train.tiny import build_tiny_model
    from vpo.train.trainer import build_task_dataset

    threads = a.threads or max(1, os.cpu_count() or 2)
    torch.set_num_threads(threads)
    tmp = tempfile.mkdtemp()
    if a.model:
        model_dir = a.model
    else:
        model_dir = str(build_tiny_model(os.path.join(tmp, "m"), hidden_size=a.hidden, num_layers=a.layers))
    steps = a.warmup + a.rounds
    peft_config = lora_config(a.lora) if a.lora else None
    task = SliceTask.make(64, a.prompts)
    # one dataset (the m = 3 prompts) for all three trainers, so prompt lengths are identical
    ds = build_task_dataset(task, task.load("train"), 3, chat=True)
    setup = dict(a=a, model_dir=model_dir, tmp=tmp, steps=steps, task=task, ds=ds, peft_config=peft_config)

    kinds = ["trl_grpo", "vpo_grpo", "vpo_m3"] + (["vpo_m3_plain"] if a.plain else [])
    gates = {k: _Gate() for k in kinds}
    trainers = {k: make_trainer(k, gates[k], **setup) for k in kinds}
    phases = {k: StepPhases(trainers[k]) for k in kinds}
    for k in kinds:
        trainers[k].add_callback(phases[k].callback())
    limits = machine_limits(trainers["vpo_m3"], a, threads, "before") if a.model else None

    times = _interleaved_times(trainers, gates, kinds, steps, a.warmup, threads)
    t = {k: v[a.warmup :] for k, v in times.items()}
    med = {k: statistics.median(v) for k, v in t.items()}
    ratios = {k: _spread([x / y for x, y in zip(t[k], t["trl_grpo"])]) for k in kinds if k != "trl_grpo"}
    ratio_m3, ratio_grpo = ratios["vpo_m3"], ratios["vpo_grpo"]
    profile = {k: median_phases(phases[k].per_step(), a.warmup) for k in kinds}
    _print_table(a, threads, vpo_length, med, ratios)
    print_profile(profile, med)
    res = {
        "s_per_step_trl_grpo": med["trl_grpo"],
        "s_per_step_vpo_grpo": med["vpo_grpo"],
        "s_per_step_vpo_m3": med["vpo_m3"],
        "ratio_vpo_m3_vs_trl_grpo_median": ratio_m3["median"],
        "ratio_vpo_m3_vs_trl_grpo_iqr": ratio_m3["iqr"],
        "ratio_vpo_m3_vs_trl_grpo_range": [ratio_m3["min"], ratio_m3["max"]],
        "ratio_vpo_grpo_vs_trl_grpo_median": ratio_grpo["median"],
        "ratio_vpo_grpo_vs_trl_grpo_iqr": ratio_grpo["iqr"],
        "per_round_s": {k: v for k, v in t.items()},
        "rounds": a.rounds,
        "tokens_single": a.length,
        "tokens_vpo_m3": vpo_length,
        "rollouts_per_step": a.batch,
        "quick": a.quick,
        "model": a.model or f"tiny {a.layers}x{a.hidden}",
        "lora": a.lora,
        "shared_prompt": bool(trainers["vpo_m3"].vpo_fast["shared_prompt_forward"]),
        "fast_generation": bool(trainers["vpo_m3"].vpo_fast["fast_generation"]),
        "precision": a.precision,
        "bf16": {k: bool(trainers[k].args.bf16) for k in kinds},
        "prompts": a.prompts,
        "threads": threads,
        "profile_s": profile,
    }
    if a.plain:
        res["s_per_step_vpo_m3_plain"] = med["vpo_m3_plain"]
        res["ratio_vpo_m3_plain_vs_trl_grpo_median"] = ratios["vpo_m3_plain"]["median"]
        res["ratio_vpo_m3_vs_plain"] = _spread([x / y for x, y in zip(t["vpo_m3"], t["vpo_m3_plain"])])
    if limits is not None:
        limits = machine_limits(trainers["vpo_m3"], a, threads, "after", limits)
        res.update(limit_figures(limits, phases["vpo_m3"], profile["vpo_m3"], trainers["vpo_m3"], a))
        print_limits(res)
    if a.json:
        print(json.dumps(_round(res)))
    return res


def _interleaved_times(trainers: dict, gates: dict, kinds: list[str], steps: int, warmup: int, threads: int):
    """Train every trainer in its own thread, letting one step run at a time, in interleaved rounds
    (the order alternates); returns each trainer's seconds per step, warm-up rounds included."""
    import torch

    def run(k):
        torch.set_num_threads(threads)
        try:
            trainers[k].train()
        except BaseException as e:  # reported by the main thread
            gates[k].error = e
            for sem in (gates[k].arrived, gates[k].done):
                sem.release()
        finally:
            gates[k].finished.set()

    workers = [threading.Thread(target=run, args=(k,), daemon=True) for k in kinds]
    for w in workers:
        w.start()
    times: dict[str, list[float]] = {k: [] for k in kinds}
    for r in range(steps):
        order = kinds if r % 2 == 0 else kinds[::-1]
        for k in order:
            _wait(gates[k].arrived, gates[k], f"{k} step {r}")  # parked at the step's start
            t0 = time.perf_counter()
            gates[k].go.release()
            _wait(gates[k].done, gates[k], f"{k} step {r}")
            times[k].append(time.perf_counter() - t0)
        tag = "warm-up" if r < warmup else "round"
        print(f"{tag} {r:2d} " + "  ".join(f"{k} {times[k][-1]:.3f}s" for k in kinds), file=sys.stderr)
    for k in kinds:
        workers[kinds.index(k)].join(timeout=300)
        if gates[k].error is not None:
            raise RuntimeError(f"{k} failed") from gates[k].error
    return times


def _print_table(a, threads: int, vpo_length: int, med: dict, ratios: dict) -> None:
    """The seconds-per-step table: each trainer's median and its per-round ratio to TRL's GRPOTrainer."""
    lengths = f"{a.length} tokens" if vpo_length == a.length else f"{a.length} tokens (vpo m=3: {vpo_length})"
    print(
        f"\nseconds per training step: {a.batch} rollouts x {lengths}, {model_label(a)} on CPU, "
        f"{threads} threads, precision: {a.precision}; {a.rounds} interleaved rounds after {a.warmup} warm-up"
        f"{' (--quick)' if a.quick else ''}"
    )
    print(f"{'trainer':30s} {'median s/step':>14s} {'per-round ratio vs TRL GRPO: median [IQR] (range)':>52s}")
    for k in med:
        sp = ratios.get(k)
        cell = (
            ""
            if sp is None
            else f"{sp['median']:.3f} [{sp['iqr'][0]:.3f}, {sp['iqr'][1]:.3f}] ({sp['min']:.3f}-{sp['max']:.3f})"
        )
        print(f"{LABELS[k]:30s} {med[k]:14.3f} {cell:>52s}")


def print_profile(profile: dict, med: dict) -> None:
    """Median seconds of each phase of a step, per trainer (benchmarks/step_phases.py)."""
    from step_phases import PHASES

    print("\nwhere a step goes: median seconds per phase (benchmarks/step_phases.py)")
    print(f"{'phase':12s}" + "".join(f"{LABELS[k][:26]:>28s}" for k in profile))
    for ph in PHASES:
        print(f"{ph:12s}" + "".join(f"{profile[k].get(ph, 0.0):28.3f}" for k in profile))
    print(f"{'step':12s}" + "".join(f"{med[k]:28.3f}" for k in profile))


def make_trainer(kind, gate, *, a, model_dir, tmp, steps, task, ds, peft_config):
    """One benchmarked trainer: TRL's GRPOTrainer, or VPOTrainer with the grpo or vpo (m = 3) estimator."""
    from trl import GRPOConfig, GRPOTrainer

    from vpo.train import VPOConfig, VPOTrainer

    out = os.path.join(tmp, kind)
    cb = [_callback(gate)]
    if kind == "trl_grpo":
        args = GRPOConfig(output_dir=out, **step_settings(a.batch, a.length, steps, a.precision))
        return GRPOTrainer(
            model=model_dir, reward_funcs=trl_reward_funcs(), args=args, train_dataset=ds, callbacks=cb,
            peft_config=peft_config,
        )  # fmt: skip
    est, m, length = {
        "vpo_m3": ("vpo", 3, a.vpo_length or a.length),
        "vpo_m3_plain": ("vpo", 3, a.vpo_length or a.length),
        "vpo_grpo": ("grpo", 1, a.length),
    }[kind]
    settings = step_settings(a.batch, length, steps, a.precision)
    path = {"shared_prompt_forward": True} if a.shared_prompt else {}  # else unset: on where it applies
    if kind == "vpo_m3_plain":  # the step as it was before the fast CPU path
        path = {"shared_prompt_forward": False, "fast_generation": False}
        settings["bf16"] = False
    args = VPOConfig(output_dir=out, estimator=est, num_answers=m, num_weightings=100, **path, **settings)
    return VPOTrainer(model=model_dir, args=args, task=task, train_dataset=ds, callbacks=cb, peft_config=peft_config)


def model_label(a) -> str:
    name = os.path.basename(os.path.normpath(a.model)) if a.model else f"tiny Qwen2 {a.layers} x {a.hidden}"
    parts = [name] + ([f"LoRA r={a.lora}"] if a.lora else [])
    return ", ".join(parts) + f", {a.prompts} prompts"


def lora_config(rank: int):
    from peft import LoraConfig

    targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    return LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=targets, task_type="CAUSAL_LM")


def machine_limits(trainer, a, threads: int, when: str, limits: dict | None = None) -> dict:
    """The decode and training limits (benchmarks/step_phases.py) read ``when`` ("before"/"after"
    the trainers ran), and, before, the generation rates: vpo's sampler as the VPO step runs it and
    transformers' generate as TRL's step runs it (the float32 model, under bf16 autocast when TRL's
    precision is bf16), on ``a.batch`` rows of one shop prompt, exactly ``max(length)`` new tokens."""
    import torch

    from step_phases import gemm_gflops
    from vpo.search.fast_decode import FastDecoder

    torch.set_num_threads(threads)
    limits = limits or {}
    dtype = torch.bfloat16 if trainer.args.bf16 else torch.float32
    model = trainer.accelerator.unwrap_model(trainer.model)
    decoder = limits.get("decoder") or FastDecoder(model, dtype)
    cfg = model.config
    limits["decoder"] = decoder
    tokens = 16 * a.batch + 96  # the training pass's tokens at this shape (prompts once, completions per row)
    limits[f"train_gemm_gflops_{when}"] = gemm_gflops(tokens, cfg.hidden_size, cfg.intermediate_size, dtype)
    if when == "before":
        limits.update(generation_rates(trainer, decoder, a))
    return limits


def generation_rates(trainer, decoder, a) -> dict:
    """Generation against its limit in paired rounds (``max(3, --rounds)``): each round reads the
    decode step's products alone (step_phases.decode_gemm_seconds), then times vpo's sampler and its prefill
    (the faster of two calls each), so a round's rate and limit share the machine's state of the
    moment; the figures are medians of the per-round fractions. Then transformers' ``generate`` as
    TRL's step runs it (three calls, the median)."""
    import contextlib

    import torch
    from step_phases import decode_gemm_seconds

    from vpo.search.fast_decode import Sampling

    tok = trainer.processing_class
    new = max(a.length, a.vpo_length or a.length)
    text = tok.apply_chat_template([{"role": "user", "content": shop_question(0)}], tokenize=False)
    enc = tok([text] * a.batch, return_tensors="pt")
    s = Sampling(max_new_tokens=new, min_new_tokens=new)
    eos = [tok.eos_token_id]

    def fast():
        decoder.generate(enc.input_ids, enc.attention_mask, s, eos, tok.pad_token_id)

    model = trainer.accelerator.unwrap_model(trainer.model)
    kw = dict(max_new_tokens=new, min_new_tokens=new, do_sample=True, top_k=0, pad_token_id=tok.pad_token_id)
    auto = torch.autocast("cpu", dtype=torch.bfloat16) if a.precision == "defaults" else contextlib.nullcontext()

    def plain():
        with auto, torch.no_grad():
            model.generate(**enc, **kw)

    def prefill():  # the prompt's pass and the caches copied to every row: the sampler's first phase
        decoder._state(enc.input_ids, enc.attention_mask, new)

    fast(), prefill()  # untimed: first-call costs
    rounds: dict[str, list[float]] = {"gemm_s": [], "fast_s": [], "prefill_s": []}
    for _ in range(max(3, a.rounds)):
        rounds["gemm_s"].append(decode_gemm_seconds(decoder, a.batch))
        rounds["fast_s"].append(min(_timed(fast) for _ in range(2)))
        rounds["prefill_s"].append(min(_timed(prefill) for _ in range(2)))
    return {
        "generation_rounds": rounds,
        "generate_s": _best_of(plain),
        "new_tokens": new,
        "prompt_tokens": enc.input_ids.size(1),
    }


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _best_of(fn, n: int = 3) -> float:
    """The median of ``n`` timed calls, after one untimed."""
    fn()
    return statistics.median(_timed(fn) for _ in range(n))


def limit_figures(limits: dict, phases, prof: dict, trainer, a) -> dict:
    """The JSON's generation_* and training_* figures: rates against the limits read in this process."""
    from step_phases import training_flops

    model = trainer.accelerator.unwrap_model(trainer.model)
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    head = base.get_output_embeddings().weight.numel()
    body = sum(
        p.numel()
        for n, p in base.named_parameters()
        if "embed_tokens" not in n and "lm_head" not in n and "lora_" not in n
    )
    flops_token = 2 * (body + head)
    rows, new, rounds = a.batch, limits["new_tokens"], limits["generation_rounds"]
    gemm_s, fast_s = statistics.median(rounds["gemm_s"]), statistics.median(rounds["fast_s"])
    tok_s = rows * new / fast_s
    limit_gflops = rows * flops_token / gemm_s / 1e9
    # a round's fraction: its tokens/s over its own limit's, i.e. new tokens x limit step / time
    whole = _spread([new * g / f for g, f in zip(rounds["gemm_s"], rounds["fast_s"])])
    loop = _spread(
        [new * g / max(f - p, 1e-9) for g, f, p in zip(rounds["gemm_s"], rounds["fast_s"], rounds["prefill_s"])]
    )
    train_limit = max(limits["train_gemm_gflops_before"], limits["train_gemm_gflops_after"])
    shape = phases.passes[-1]
    flops = training_flops(shape, body, head, trainer.vpo_fast["shared_prompt_forward"], lora=bool(a.lora))
    train_s = prof["forward"] + prof["backward"]
    return {
        "generation_rows": rows,
        "generation_tokens": new,
        "generation_prompt_tokens": limits["prompt_tokens"],
        "generation_flops_per_token": flops_token,
        "generation_rounds": rounds,
        "generation_decode_tokens_per_s": tok_s,
        "generation_generate_tokens_per_s": rows * new / limits["generate_s"],
        "generation_achieved_gflops": tok_s * flops_token / 1e9,
        "generation_gemm_gflops": limit_gflops,
        "generation_gemm_step_s": gemm_s,
        "generation_fraction_of_gemm_limit": whole["median"],
        "generation_fraction_iqr": whole["iqr"],
        # the same over the decode loop alone (the sampler's time less its prefill's): per-token
        # overhead against the decode step's products, without the prompt's one-off pass
        "generation_prefill_s": statistics.median(rounds["prefill_s"]),
        "generation_decode_loop_fraction_of_gemm_limit": loop["median"],
        "generation_decode_loop_fraction_iqr": loop["iqr"],
        "generation_generate_fraction_of_gemm_limit": rows
        * new
        / limits["generate_s"]
        * flops_token
        / 1e9
        / limit_gflops,
        "training_pass_shape": shape,
        "training_pass_flops": flops,
        "training_pass_s": train_s,
        "training_achieved_gflops": flops / train_s / 1e9,
        "training_gemm_gflops": train_limit,
        "training_gemm_gflops_readings": [limits["train_gemm_gflops_before"], limits["train_gemm_gflops_after"]],
        "training_fraction_of_gemm_limit": flops / train_s / 1e9 / train_limit,
    }


def print_limits(r: dict) -> None:
    n = len(r["generation_rounds"]["gemm_s"])
    wq, lq = r["generation_fraction_iqr"], r["generation_decode_loop_fraction_iqr"]
    print(
        f"\ngeneration: {r['generation_rows']} rows x {r['generation_tokens']} new tokens after a "
        f"{r['generation_prompt_tokens']}-token prompt: vpo's sampler {r['generation_decode_tokens_per_s']:.1f} tokens/s "
        f"= {r['generation_achieved_gflops']:.1f} GFLOP/s at {r['generation_flops_per_token'] / 1e6:.0f} MFLOP a token; "
        f"transformers' generate as TRL runs it {r['generation_generate_tokens_per_s']:.1f} tokens/s. Limit: one decode "
        f"step's products alone, {r['generation_gemm_step_s'] * 1e3:.1f} ms (median of {n} rounds) = "
        f"{r['generation_gemm_gflops']:.1f} GFLOP/s. Per round against that round's limit, vpo's sampler runs at "
        f"{r['generation_fraction_of_gemm_limit']:.2f} of it (IQR {wq[0]:.2f}-{wq[1]:.2f}; prefill and sampling "
        f"included; generate at {r['generation_generate_fraction_of_gemm_limit']:.2f}); its prefill takes "
        f"{r['generation_prefill_s']:.3f} s, and its decode loop alone runs at "
        f"{r['generation_decode_loop_fraction_of_gemm_limit']:.2f} (IQR {lq[0]:.2f}-{lq[1]:.2f})"
    )
    tb, ta = r["training_gemm_gflops_readings"]
    print(
        f"training pass (the VPO step's policy forward + backward): {r['training_pass_flops'] / 1e9:.1f} GFLOP in "
        f"{r['training_pass_s']:.2f} s = {r['training_achieved_gflops']:.1f} GFLOP/s against a product of its shape at "
        f"{tb:.1f} / {ta:.1f} GFLOP/s: {r['training_fraction_of_gemm_limit']:.2f} of the limit"
    )


def _round(v):
    if isinstance(v, dict):
        return {k: _round(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_round(x) for x in v]
    return float(f"{v:.4g}") if isinstance(v, float) else v


if __name__ == "__main__":
    main(sys.argv[1:])
