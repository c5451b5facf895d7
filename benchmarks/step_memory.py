"""Peak memory and time of a training step: VPOTrainer with VPO (m = 3) against GRPO (m = 1), each
trainer alone in its own process, the two alternating (GRPO, VPO, GRPO, VPO, ...).

    python benchmarks/step_memory.py            # equal prompts and equal tokens per rollout (48)
    python benchmarks/step_memory.py --demo     # the demo's shape: 4 x 128 model, 64 rollouts, 11 vs 31 tokens
    python benchmarks/step_memory.py --quick    # tiny sizes: does it run (figures meaningless)
    python benchmarks/step_memory.py --json     # + one JSON object on the last line

Each child builds its trainer (same tiny model, prompts and seed), records its resident memory
(VmRSS), trains ``--steps`` steps and records its peak (VmHWM) and the median step time. The
step's memory is the peak minus the resident memory before training (imports, model, data are the
same for both). Reported: medians over ``--repeats`` children per trainer, the VPO / GRPO ratio of
the medians and of each alternating pair, and the generated tokens per rollout (TRL's
``completions/mean_length``). On a GPU, ``scripts/gpu_check.sh``'s train stage reports
``torch.cuda.max_memory_allocated`` of a VPO run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def child(kind: str, a) -> dict:
    """One trainer alone: resident memory before training, peak after, step times, tokens."""
    import warnings

    warnings.filterwarnings("ignore")
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from train_step import SliceTask, lora_config, step_settings

    from vpo.train import VPOConfig, VPOTrainer
    from vpo.train.tiny import build_tiny_model
    from vpo.train.trainer import build_task_dataset

    torch.set_num_threads(a.threads)
    tmp = tempfile.mkdtemp()
    if a.model:
        model_dir = a.model
    else:
        model_dir = str(build_tiny_model(os.path.join(tmp, "m"), hidden_size=a.hidden, num_layers=a.layers))
    task = SliceTask.make(64, a.prompts)
    ds = build_task_dataset(task, task.load("train"), 3, chat=True)
    est, m, length = {
        "vpo": ("vpo", 3, a.vpo_length),
        "vpo_plain": ("vpo", 3, a.vpo_length),
        "grpo": ("grpo", 1, a.length),
    }[kind]
    settings = step_settings(a.batch, length, a.steps, a.precision)
    if kind == "vpo_plain":  # the step as before the fast CPU path (docs/performance.md)
        settings.update(bf16=False, fast_generation=False, shared_prompt_forward=False)
    args = VPOConfig(output_dir=os.path.join(tmp, kind), estimator=est, num_answers=m, num_weightings=100, **settings)
    peft = lora_config(a.lora) if a.lora else None
    trainer = VPOTrainer(model=model_dir, args=args, task=task, train_dataset=ds, peft_config=peft)
    before = _status_kb("VmRSS")
    t0 = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - t0
    logs = [h for h in trainer.state.log_history if "completions/mean_length" in h]
    return {
        "kind": kind,
        "rss_before_mb": before / 1024,
        "peak_mb": _status_kb("VmHWM") / 1024,
        "step_mb": (_status_kb("VmHWM") - before) / 1024,
        "s_per_step": wall / a.steps,
        "tokens_per_rollout": statistics.median(h["completions/mean_length"] for h in logs) if logs else None,
    }


def _parse(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3, help="children per trainer (alternating)")
    ap.add_argument("--steps", type=int, default=3, help="training steps per child")
    ap.add_argument("--length", type=int, default=48, help="completion tokens of GRPO (m = 1)")
    ap.add_argument("--vpo-length", type=int, default=None, help="completion tokens of VPO m = 3 (default: --length)")
    ap.add_argument("--batch", type=int, default=32, help="rollouts per step (G = 8)")
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="torch threads per child (default 1)")
    ap.add_argument("--demo", action="store_true", help="the demo's shape: 4 x 128 model, 64 rollouts, 11 vs 31 tokens")
    ap.add_argument("--quick", action="store_true", help="tiny sizes (seconds): checks the script runs")
    ap.add_argument("--json", action="store_true", help="print one JSON object on the last line")
    ap.add_argument("--model", default=None, help="a pretrained checkpoint instead of the tiny model (e.g. SmolLM2)")
    ap.add_argument("--lora", type=int, default=0, help="LoRA rank (0: full fine-tuning)")
    ap.add_argument(
        "--prompts", choices=("short", "shop"), default="short", help="prompt set (benchmarks/train_step.py)"
    )
    ap.add_argument(
        "--precision", choices=("defaults", "float32"), default="float32", help="as benchmarks/train_step.py"
    )
    ap.add_argument(
        "--kinds",
        default="grpo,vpo",
        help="trainers compared, two of grpo, vpo, vpo_plain (vpo as before the fast CPU step); default grpo,vpo",
    )
    ap.add_argument("--child", choices=["vpo", "grpo", "vpo_plain"], help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.demo:
        a.layers, a.hidden, a.batch, a.length, a.vpo_length = 4, 128, 64, 11, 31
    if a.quick:
        a.layers, a.hidden, a.batch, a.length, a.steps, a.repeats = 1, 32, 8, 4, 1, 1
    a.vpo_length = a.vpo_length or a.length
    return a


def main(argv=None) -> dict:
    argv = list(sys.argv[1:] if argv is None else argv)
    a = _parse(argv)
    if a.child:
        print(json.dumps(child(a.child, a)))
        return {}
    base, other = a.kinds.split(",")
    runs: dict[str, list[dict]] = {base: [], other: []}
    passthrough = [x for x in argv if x not in ("--json",)]
    for r in range(a.repeats):
        for kind in (base, other) if r % 2 == 0 else (other, base):
            out = subprocess.run(
                [sys.executable, __file__, *passthrough, "--child", kind],
                capture_output=True,
                text=True,
                timeout=1800,
            )
            if out.returncode:
                raise RuntimeError(f"{kind} child failed:\n{out.stderr[-3000:]}")
            runs[kind].append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(f"repeat {r} {kind}: {runs[kind][-1]}", file=sys.stderr)
    med = {
        k: {f: statistics.median(x[f] for x in v) for f in ("step_mb", "peak_mb", "s_per_step")}
        for k, v in runs.items()
    }
    pairs = [v["step_mb"] / g["step_mb"] for v, g in zip(runs[other], runs[base]) if g["step_mb"] > 0]
    tok = {k: v[0]["tokens_per_rollout"] for k, v in runs.items()}
    res = {f"{f}_{k}": med[k][f] for k in runs for f in ("step_mb", "peak_mb")}
    res.update({f"tokens_per_rollout_{k}": tok[k] for k in runs})
    res.update(
        {
            f"step_mem_ratio_{other}_vs_{base}": med[other]["step_mb"] / med[base]["step_mb"]
            if med[base]["step_mb"]
            else None,
            "step_mem_ratio_pairs_median": statistics.median(pairs) if pairs else None,
            f"s_per_step_ratio_{other}_vs_{base}": med[other]["s_per_step"] / med[base]["s_per_step"],
            "s_per_step": {k: med[k]["s_per_step"] for k in runs},
            "repeats": a.repeats,
            "rollouts_per_step": a.batch,
            "model": a.model or f"tiny {a.layers}x{a.hidden}",
            "lora": a.lora,
            "quick": a.quick,
        }
    )
    name = os.path.basename(os.path.normpath(a.model)) if a.model else f"tiny Qwen2 {a.layers} x {a.hidden}"
    shape = f"{a.batch} rollouts, {a.length} vs {a.vpo_length} tokens, {name}, {a.threads} thread(s)"
    print(f"\nmemory and time of a training step, each trainer alone, alternating ({shape}; {a.repeats} repeats)")
    print(f"{'trainer':26s} {'step MB (peak - before)':>24s} {'peak MB':>9s} {'s/step':>8s} {'tokens/rollout':>15s}")
    labels = {"grpo": "GRPO (m = 1)", "vpo": "VPO (m = 3)", "vpo_plain": "VPO (m = 3), plain (before)"}
    for k in runs:
        t = tok[k]
        print(
            f"{labels[k]:26s} {med[k]['step_mb']:24.1f} {med[k]['peak_mb']:9.1f} {med[k]['s_per_step']:8.3f} "
            f"{'' if t is None else f'{t:.1f}':>15s}"
        )
    pm = res["step_mem_ratio_pairs_median"]
    print(
        f"{labels[other]} / {labels[base]}: step memory {res[f'step_mem_ratio_{other}_vs_{base}']:.2f} "
        f"(pairs: {'n/a' if pm is None else f'{pm:.2f}'}), time {res[f's_per_step_ratio_{other}_vs_{base}']:.2f}"
    )
    if a.json:
        print(json.dumps(res))
    return res


if __name__ == "__main__":
    main()
