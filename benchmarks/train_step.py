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
smollm2``) the same run also measures generation: decode tokens/s of the model's own ``generate`` on
``--batch`` rows, as a fraction of the machine's GEMM-bound limit measured in the same process (a
matmul of the decode step's shape, [batch, hidden] x [hidden, intermediate], timed before the
generation and again after the training rounds; the limit is the median of the two, so a burst of
load on a shared machine moves it less). ``--lora R`` trains a LoRA adapter of rank R
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


def step_settings(batch: int, length: int, steps: int) -> dict:
    """The trainer settings every benchmarked trainer shares: G = 8, ``batch`` rollouts of exactly
    ``length`` tokens, ``steps`` steps, no KL, CPU, no logging or saving (benchmarks/step_memory.py too)."""
    return dict(
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
        # one precision for every trainer: TRL's GRPOConfig defaults to bf16 (autocast, on this CPU's
        # AMX units), VPOConfig to float32 on a CPU; left to their defaults they time different arithmetic
        bf16=False,
        logging_steps=1,
        disable_tqdm=True,
        seed=0,
    )


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
    ap.add_argument("--shared-prompt", action="store_true", help="VPOTrainer: shared_prompt_forward")
    ap.add_argument("--prompts", choices=("short", "shop"), default="short", help="prompt set (default: short)")
    ap.add_argument("--demo", action="store_true", help="the demo's shape: 4 x 128 model, 64 rollouts, 11 vs 31 tokens")
    ap.add_argument(
        "--quick", action="store_true", help="tiny sizes (seconds): checks the script runs, figures meaningless"
    )
    ap.add_argument("--json", action="store_true", help="print one JSON object on the last line")
    a = ap.parse_args(argv)
    if a.demo:
        a.layers, a.hidden, a.batch, a.length, a.vpo_length = 4, 128, 64, 11, 31
    if a.quick:
        a.layers, a.hidden, a.batch, a.length, a.rounds, a.warmup = 1, 32, 8, 4, 2, 1
        a.vpo_length = 3 * a.length if a.demo else None
    return a


def main(argv=None) -> dict:
    a = _parse(argv)
    vpo_length = a.vpo_length or a.length

    import torch

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
    generation = generation_fraction(model_dir, a.batch, max(a.length, vpo_length), threads) if a.model else None

    task = SliceTask.make(64, a.prompts)
    # one dataset (the m = 3 prompts) for all three trainers, so prompt lengths are identical
    ds = build_task_dataset(task, task.load("train"), 3, chat=True)
    setup = dict(a=a, model_dir=model_dir, tmp=tmp, steps=steps, task=task, ds=ds, peft_config=peft_config)

    kinds = ["trl_grpo", "vpo_grpo", "vpo_m3"]
    gates = {k: _Gate() for k in kinds}
    trainers = {k: make_trainer(k, gates[k], **setup) for k in kinds}

    times = _interleaved_times(trainers, gates, kinds, steps, a.warmup, threads)
    t = {k: v[a.warmup :] for k, v in times.items()}
    med = {k: statistics.median(v) for k, v in t.items()}
    ratio_m3 = _spread([x / y for x, y in zip(t["vpo_m3"], t["trl_grpo"])])
    ratio_grpo = _spread([x / y for x, y in zip(t["vpo_grpo"], t["trl_grpo"])])

    if generation is not None:
        generation["gemm_gflops_after"] = gemm_gflops(generation["shape"], threads)
        generation["gemm_gflops"] = statistics.median(
            [generation["gemm_gflops_before"], generation["gemm_gflops_after"]]
        )
        generation["fraction_of_gemm_limit"] = generation["achieved_gflops"] / generation["gemm_gflops"]
    _print_table(a, threads, vpo_length, med, ratio_grpo, ratio_m3)
    res = {
        "s_per_step_trl_grpo": med["trl_grpo"],
        "s_per_step_vpo_grpo": med["vpo_grpo"],
        "s_per_step_vpo_m3": med["vpo_m3"],
        "ratio_vpo_m3_vs_trl_grpo_median": ratio_m3["median"],
        "ratio_vpo_m3_vs_trl_grpo_iqr": ratio_m3["iqr"],
        "ratio_vpo_m3_vs_trl_grpo_range": [ratio_m3["min"], ratio_m3["max"]],
        "ratio_vpo_grpo_vs_trl_grpo_median": ratio_grpo["median"],
        "ratio_vpo_grpo_vs_trl_grpo_iqr": ratio_grpo["iqr"],
        "rounds": a.rounds,
        "tokens_single": a.length,
        "tokens_vpo_m3": vpo_length,
        "rollouts_per_step": a.batch,
        "quick": a.quick,
        "model": a.model or f"tiny {a.layers}x{a.hidden}",
        "lora": a.lora,
        "shared_prompt": a.shared_prompt,
        "prompts": a.prompts,
        "threads": threads,
    }
    if generation is not None:
        print_generation(generation)
        res.update({f"generation_{k}": v for k, v in generation.items() if k != "shape"})
    if a.json:
        print(json.dumps({k: _round(v) for k, v in res.items()}))
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


def _print_table(a, threads: int, vpo_length: int, med: dict, ratio_grpo: dict, ratio_m3: dict) -> None:
    """The seconds-per-step table: each trainer's median and its per-round ratio to TRL's GRPOTrainer."""
    lengths = f"{a.length} tokens" if vpo_length == a.length else f"{a.length} tokens (vpo m=3: {vpo_length})"
    print(
        f"\nseconds per training step: {a.batch} rollouts x {lengths}, {model_label(a)} on CPU, "
        f"{threads} threads; {a.rounds} interleaved rounds after {a.warmup} warm-up{' (--quick)' if a.quick else ''}"
    )
    print(f"{'trainer':30s} {'median s/step':>14s} {'per-round ratio vs TRL GRPO: median [IQR] (range)':>52s}")
    labels = {
        "trl_grpo": "TRL GRPOTrainer (baseline)",
        "vpo_grpo": "VPOTrainer estimator=grpo",
        "vpo_m3": "VPOTrainer estimator=vpo m=3",
    }
    for k, sp in (("trl_grpo", None), ("vpo_grpo", ratio_grpo), ("vpo_m3", ratio_m3)):
        cell = (
            ""
            if sp is None
            else f"{sp['median']:.3f} [{sp['iqr'][0]:.3f}, {sp['iqr'][1]:.3f}] ({sp['min']:.3f}-{sp['max']:.3f})"
        )
        print(f"{labels[k]:30s} {med[k]:14.3f} {cell:>52s}")


def make_trainer(kind, gate, *, a, model_dir, tmp, steps, task, ds, peft_config):
    """One benchmarked trainer: TRL's GRPOTrainer, or VPOTrainer with the grpo or vpo (m = 3) estimator."""
    from trl import GRPOConfig, GRPOTrainer

    from vpo.train import VPOConfig, VPOTrainer

    out = os.path.join(tmp, kind)
    cb = [_callback(gate)]
    if kind == "trl_grpo":
        args = GRPOConfig(output_dir=out, **step_settings(a.batch, a.length, steps))
        return GRPOTrainer(
            model=model_dir, reward_funcs=trl_reward_funcs(), args=args, train_dataset=ds, callbacks=cb,
            peft_config=peft_config,
        )  # fmt: skip
    est, m, length = {"vpo_m3": ("vpo", 3, a.vpo_length or a.length), "vpo_grpo": ("grpo", 1, a.length)}[kind]
    args = VPOConfig(
        output_dir=out, estimator=est, num_answers=m, num_weightings=100, shared_prompt_forward=a.shared_prompt,
        **step_settings(a.batch, length, steps),
    )  # fmt: skip
    return VPOTrainer(model=model_dir, args=args, task=task, train_dataset=ds, callbacks=cb, peft_config=peft_config)


def model_label(a) -> str:
    name = os.path.basename(os.path.normpath(a.model)) if a.model else f"tiny Qwen2 {a.layers} x {a.hidden}"
    parts = [name] + ([f"LoRA r={a.lora}"] if a.lora else []) + (["shared prompt forward"] if a.shared_prompt else [])
    return ", ".join(parts) + f", {a.prompts} prompts"


def lora_config(rank: int):
    from peft import LoraConfig

    targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    return LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=targets, task_type="CAUSAL_LM")


def gemm_gflops(shape: tuple[int, int, int], threads: int, repeats: int = 30) -> float:
    """GFLOP/s of a float32 matmul [rows, k] x [k, n] (the decode step's largest product), the
    median of ``repeats`` timed products after two untimed ones."""
    import torch

    torch.set_num_threads(threads)
    rows, k, n = shape
    x, w = torch.randn(rows, k), torch.randn(k, n)
    for _ in range(2):
        x @ w
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        x @ w
        ts.append(time.perf_counter() - t0)
    return 2 * rows * k * n / statistics.median(ts) / 1e9


def generation_fraction(model_dir: str, rows: int, tokens: int, threads: int) -> dict:
    """Decode tokens/s of ``generate`` (sampling, exactly ``tokens`` new tokens on ``rows`` rows, KV cache)
    against the GEMM-bound limit: each new token costs ~2 x (non-embedding parameters) FLOPs, so the
    limit is GEMM GFLOP/s / that; measured right before (and, by the caller, after) in this process."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(threads)
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    cfg = model.config
    shape = (rows, cfg.hidden_size, getattr(cfg, "intermediate_size", 4 * cfg.hidden_size))
    n_params = sum(p.numel() for n, p in model.named_parameters() if "embed_tokens" not in n)
    if not getattr(cfg, "tie_word_embeddings", False):
        n_params -= model.get_output_embeddings().weight.numel()
    n_params += model.get_output_embeddings().weight.numel()  # the LM head runs on every token
    gemm_before = gemm_gflops(shape, threads)
    text = tok.apply_chat_template([{"role": "user", "content": "Name a product."}], tokenize=False)
    enc = tok([text] * rows, return_tensors="pt")
    kw = dict(max_new_tokens=tokens, min_new_tokens=tokens, do_sample=True, pad_token_id=tok.eos_token_id)
    with torch.no_grad():
        model.generate(**enc, **{**kw, "max_new_tokens": 2, "min_new_tokens": 2})  # warm-up
        ts = []
        for _ in range(3):
            t0 = time.perf_counter()
            model.generate(**enc, **kw)
            ts.append(time.perf_counter() - t0)
    tok_s = rows * tokens / statistics.median(ts)
    return {
        "shape": shape,
        "rows": rows,
        "tokens": tokens,
        "decode_tokens_per_s": tok_s,
        "flops_per_token": 2 * n_params,
        "gemm_gflops_before": gemm_before,
        "achieved_gflops": tok_s * 2 * n_params / 1e9,
    }


def print_generation(g: dict) -> None:
    print(
        f"\ngeneration: {g['rows']} rows x {g['tokens']} new tokens, {g['decode_tokens_per_s']:.1f} tokens/s = "
        f"{g['achieved_gflops']:.1f} GFLOP/s at {g['flops_per_token'] / 1e6:.0f} MFLOP a token; the same process's "
        f"GEMM {g['shape'][0]}x{g['shape'][1]}x{g['shape'][2]}: {g['gemm_gflops_before']:.1f} GFLOP/s before, "
        f"{g['gemm_gflops_after']:.1f} after; generation runs at {g['fraction_of_gemm_limit']:.2f} of the "
        "GEMM-bound limit (prefill and sampling included in its time)"
    )


def _round(v):
    if isinstance(v, list):
        return [_round(x) for x in v]
    return float(f"{v:.4g}") if isinstance(v, float) else v


if __name__ == "__main__":
    main(sys.argv[1:])
