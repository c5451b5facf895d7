"""Where a demo run's time goes: one `vpo train` job of the demo, profiled, and its `vpo eval` job.

    python benchmarks/demo_profile.py --demo-dir runs/demo            # table
    python benchmarks/demo_profile.py --demo-dir runs/demo --json     # + one JSON object on the last line

Needs a demo directory with a warm start (``vpo demo --warm-only`` makes one). For each method
(``--methods``, default grpo and vpo) it runs the demo's own ``vpo train`` config for ``--steps``
steps in this process under cProfile with one torch thread (as the demo's jobs do), and splits the
time into: process start (interpreter, imports, trainer construction: measured in a fresh
subprocess), generation (``GenerationMixin.generate``), scoring (``Task.score_completions``), the
estimator (``compute_advantages``), the loss forward passes (policy and reference), backward,
the optimizer step, and the rest of TRL's step (``other``). Then one ``vpo eval`` of the warm start
at the demo's settings is timed as a whole (it is generation-bound). Figures are seconds per RL step
(medians would need repeated runs; the machine is shared, so read the shares, not the absolute times).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

BUCKETS = {
    # bucket: (function name, path fragment) pairs whose cumulative time counts; the first match wins
    "generation": [("generate", "transformers/generation/utils.py")],
    "scoring": [("score_completions", "vpo/tasks/base.py")],
    "estimator": [("compute_advantages", "vpo/core/estimators.py")],
    "backward": [("backward", "torch/_tensor.py"), ("backward", "accelerate/accelerator.py")],
    "optimizer": [
        ("step", "torch/optim/adamw.py"),
        ("step", "torch/optim/optimizer.py"),
        ("wrapper", "torch/optim/optimizer.py"),
    ],
    # the demo's configs set shared_prompt_forward: VPOTrainer's override (vpo/search/shared_prefix.py)
    "loss_forward": [
        ("_get_per_token_logps_and_entropies", "trl/"),
        ("_get_per_token_logps_and_entropies", "vpo/train/trainer.py"),
        ("compute_loss", "trl/"),
    ],
}


def _cum(stats: pstats.Stats, name: str, frag: str) -> float:
    best = 0.0
    for (file, _line, func), (_cc, _nc, _tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        if func == name and frag in file.replace(os.sep, "/"):
            best = max(best, ct)
    return best


def profile_method(demo_dir: Path, method: str, steps: int, seed: int = 0) -> dict:
    import torch
    import yaml

    from vpo.demo.config import DemoConfig
    from vpo.demo.stages import train_config

    cfg = DemoConfig(
        **{
            k: (tuple(v) if isinstance(v, list) else v)
            for k, v in json.loads((demo_dir / "demo_config.json").read_text()).items()
        }
    )
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        conf = train_config(cfg, method, seed, warm_dir_of(demo_dir), Path(tmp) / "run")
        conf["max_steps"] = steps
        path = Path(tmp) / "conf.yaml"
        path.write_text(yaml.safe_dump(conf))
        # process start: a fresh interpreter that builds the trainer and stops before step 1
        t0 = time.perf_counter()
        start_conf = dict(conf, max_steps=1)
        path1 = Path(tmp) / "conf1.yaml"
        path1.write_text(yaml.safe_dump(start_conf))
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        subprocess.run(
            [sys.executable, "-m", "vpo.cli", "train", str(path1)],
            check=True,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        one_step_job = time.perf_counter() - t0
        from vpo.cli import main

        prof = cProfile.Profile()
        t1 = time.perf_counter()
        prof.enable()
        main(["train", str(path)])
        prof.disable()
        total = time.perf_counter() - t1
    stats = pstats.Stats(prof)
    train_ct = _cum(stats, "train", "transformers/trainer.py")
    per_step = {}
    for bucket, keys in BUCKETS.items():
        per_step[bucket] = max((_cum(stats, n, f) for n, f in keys), default=0.0) / steps
    step = train_ct / steps
    per_step["other"] = max(0.0, step - sum(per_step.values()))
    setup = total - train_ct
    return {
        "method": method,
        "steps": steps,
        "step_s": step,
        "setup_in_process_s": setup,
        "one_step_job_s": one_step_job,
        "start_s": max(0.0, one_step_job - step),
        "per_step": per_step,
    }


def time_eval(demo_dir: Path) -> dict:
    from vpo.demo.config import DemoConfig
    from vpo.demo.stages import eval_argv

    cfg = DemoConfig(
        **{
            k: (tuple(v) if isinstance(v, list) else v)
            for k, v in json.loads((demo_dir / "demo_config.json").read_text()).items()
        }
    )
    out = {}
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    for m in (1, 3):
        with tempfile.TemporaryDirectory() as tmp:
            argv = eval_argv(cfg, warm_dir_of(demo_dir), m, Path(tmp) / "ev", f"warm_m{m}", 0)
            t0 = time.perf_counter()
            subprocess.run(argv, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            out[f"eval_m{m}_s"] = time.perf_counter() - t0
    return out


def warm_dir_of(demo_dir: Path) -> Path:
    """Replicate 0's warm start (one per seed, the default) or the shared one (``warm_start=shared``)."""
    return next((p for p in (demo_dir / "warmstart_s0", demo_dir / "warmstart") if p.exists()), demo_dir / "warmstart")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--demo-dir", required=True, help="a `vpo demo` output directory with a warm start")
    ap.add_argument("--methods", default="grpo,vpo")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--quick", action="store_true", help="2 steps of grpo, no eval (CI: checks that it runs)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    demo_dir = Path(args.demo_dir)
    if not (warm_dir_of(demo_dir) / "config.json").exists():
        sys.exit(f"{demo_dir}: no warm start here; run `vpo demo --warm-only --out {demo_dir}` first")
    methods = ["grpo"] if args.quick else [m for m in args.methods.split(",") if m]
    steps = 2 if args.quick else args.steps
    rows = [profile_method(demo_dir, m, steps) for m in methods]
    ev = {} if args.quick else time_eval(demo_dir)
    buckets = list(BUCKETS) + ["other"]
    print(f"{'method':10s} {'step s':>7s} " + " ".join(f"{b:>12s}" for b in buckets) + f" {'job start s':>11s}")
    for r in rows:
        shares = " ".join(f"{r['per_step'][b]:6.3f} ({100 * r['per_step'][b] / r['step_s']:3.0f}%)" for b in buckets)
        print(f"{r['method']:10s} {r['step_s']:7.3f} {shares} {r['start_s']:11.1f}")
    for k, v in ev.items():
        print(f"{k}: {v:.1f} s")
    if args.json:
        out = {f"{r['method']}_step_s": r["step_s"] for r in rows}
        for r in rows:
            for b in buckets:
                out[f"{r['method']}_{b}_share"] = r["per_step"][b] / r["step_s"]
            out[f"{r['method']}_job_start_s"] = r["start_s"]
        out.update(ev)
        print(json.dumps(out))


if __name__ == "__main__":
    main()
