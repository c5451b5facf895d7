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
    from train_step import SliceTask, step_settings

    from vpo.train import VPOConfig, VPOTrainer
    from vpo.train.tiny import build_tiny_model
    from vpo.train.trainer import build_task_dataset

    torch.set_num_threads(a.threads)
    tmp = tempfile.mkdtemp()
    model_dir = str(build_tiny_model(os.path.join(tmp, "m"), hidden_size=a.hidden, num_layers=a.layers))
    task = SliceTask.make(64)
    ds = build_task_dataset(task, task.load("train"), 3, chat=True)
    est, m, length = {"vpo": ("vpo", 3, a.vpo_length), "grpo": ("grpo", 1, a.length)}[kind]
    args = VPOConfig(
        output_dir=os.path.join(tmp, kind),
        estimator=est,
        num_answers=m,
        num_weightings=100,
        **step_settings(a.batch, length, a.steps),
    )
    trainer = VPOTrainer(model=model_dir, args=args, task=task, train_dataset=ds)
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
    ap.add_argument("--child", choices=["vpo", "grpo"], help=argparse.SUPPRESS)
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
    runs: dict[str, list[dict]] = {"grpo": [], "vpo": []}
    passthrough = [x for x in argv if x not in ("--json",)]
    for r in range(a.repeats):
        for kind in ("grpo", "vpo") if r % 2 == 0 else ("vpo", "grpo"):
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
    pairs = [v["step_mb"] / g["step_mb"] for v, g in zip(runs["vpo"], runs["grpo"]) if g["step_mb"] > 0]
    tok = {k: v[0]["tokens_per_rollout"] for k, v in runs.items()}
    res = {
        "step_mb_grpo": med["grpo"]["step_mb"],
        "step_mb_vpo": med["vpo"]["step_mb"],
        "peak_mb_grpo": med["grpo"]["peak_mb"],
        "peak_mb_vpo": med["vpo"]["peak_mb"],
        "step_mem_ratio_vpo_vs_grpo": med["vpo"]["step_mb"] / med["grpo"]["step_mb"]
        if med["grpo"]["step_mb"]
        else None,
        "step_mem_ratio_pairs_median": statistics.median(pairs) if pairs else None,
        "s_per_step_ratio_vpo_vs_grpo": med["vpo"]["s_per_step"] / med["grpo"]["s_per_step"],
        "tokens_per_rollout_grpo": tok["grpo"],
        "tokens_per_rollout_vpo": tok["vpo"],
        "repeats": a.repeats,
        "rollouts_per_step": a.batch,
        "quick": a.quick,
    }
    shape = f"{a.batch} rollouts, {a.length} vs {a.vpo_length} tokens, tiny Qwen2 {a.layers} x {a.hidden}, {a.threads} thread(s)"
    print(f"\nmemory and time of a training step, each trainer alone, alternating ({shape}; {a.repeats} repeats)")
    print(f"{'trainer':18s} {'step MB (peak - before)':>24s} {'peak MB':>9s} {'s/step':>8s} {'tokens/rollout':>15s}")
    for k, label in (("grpo", "GRPO (m = 1)"), ("vpo", "VPO (m = 3)")):
        t = tok[k]
        print(
            f"{label:18s} {med[k]['step_mb']:24.1f} {med[k]['peak_mb']:9.1f} {med[k]['s_per_step']:8.3f} "
            f"{'' if t is None else f'{t:.1f}':>15s}"
        )
    print(
        f"VPO / GRPO: step memory {res['step_mem_ratio_vpo_vs_grpo']:.2f} (pairs: {res['step_mem_ratio_pairs_median']:.2f}), "
        f"time {res['s_per_step_ratio_vpo_vs_grpo']:.2f}"
    )
    if a.json:
        print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in res.items()}))
    return res


if __name__ == "__main__":
    main()
