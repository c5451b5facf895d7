"""``vpo demo``: VPO vs GRPO and the baselines on a CPU in minutes, measured, with a report.

The embedded default: designed-conflict mazes (5x5 tiles with 1-4 walls and a lava tile, budget
8 moves for 96 % of them: only shortest routes reach E, and a route can visit the gold zone or the
diamond zone but never both), a 0.69 M-parameter Qwen2 with one token per character built from
scratch (no hub), then

1. a supervised warm start on diverse *mediocre* valid routes, in both the single-answer and the
   3-answer format (one checkpoint serves GRPO and VPO);
2. RL from that checkpoint with the product's own ``vpo train`` (TRL GRPOTrainer + vpo
   estimators) for each method and seed: GRPO, GRPO with 3x rollouts (compute control: about the
   generated tokens of 3-answer VPO), GDPO, Multi-RLVR (m = 3) and VPO (m = 3);
3. ``vpo eval`` on held-out mazes at a matched answer budget (k counts answers) for every trained
   model and the warm start;
4. ``report.md`` + ``demo.json`` + PNG plots (best@k vs k with the range over seeds, diversity over training,
   diversity at eval) in the output directory.

Jobs run as subprocesses, ``--jobs`` at a time (one torch thread each: on a 2-core machine two
single-threaded runs beat one two-threaded run for a model this small). Every stage is skipped when
its output already exists, so an interrupted demo resumes where it stopped.

Simplifications: one warm start shared by all seeds (seeds vary RL and evaluation); the warm
start's routes come from :func:`vpo.tasks.maze.random_route` (valid, with random detours).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

METHODS = {
    # name: (label, estimator, m, generations-per-prompt multiplier)
    "grpo": ("GRPO", "grpo", 1, 1),
    "grpo_3x": ("GRPO 3x rollouts", "grpo", 1, 3),
    "gdpo": ("GDPO", "gdpo", 1, 1),
    "multi_rlvr": ("Multi-RLVR (m=3)", "multi_rlvr", 3, 1),
    "vpo": ("VPO (m=3)", "vpo", 3, 1),
}


@dataclass
class DemoConfig:
    """Every knob of the demo; ``--quick`` shrinks them for CI."""

    out: str = "runs/demo"
    """Output directory (models, pools, report)."""
    seeds: tuple[int, ...] = (0, 1)
    """RL/eval seeds; every method is trained once per seed from the same warm start."""
    methods: tuple[str, ...] = tuple(METHODS)
    """Methods to train (subset of grpo, grpo_3x, gdpo, multi_rlvr, vpo)."""
    maze_size: int = 5
    """Maze side in tiles (odd). At 7 this model's warm start completes only ~26 % of routes and
    VPO's margin over the compute-matched GRPO stays within noise (docs/demo.md)."""
    budget_slack: int = 0
    """Moves allowed beyond the longest single-zone route (0: visiting both zones never fits)."""
    instruction: str = "short"
    """Answer instruction style in the prompt ('short' one line, or 'tags' alone: ~25 % shorter
    prompts and steps, but a weaker warm start: see docs/demo.md)."""
    train_mazes: int = 1000
    """Training mazes (warm start and RL prompts)."""
    test_mazes: int = 100
    """Held-out mazes for evaluation."""
    hidden_size: int = 128
    """Tiny Qwen2 hidden size."""
    num_layers: int = 4
    """Tiny Qwen2 layers."""
    warm_steps: int = 600
    """Supervised warm-start steps."""
    warm_batch: int = 32
    """Warm-start batch size (prompt, completion pairs)."""
    warm_lr: float = 3e-3
    """Warm-start peak learning rate (cosine decay)."""
    warm_routes_per_maze: int = 1
    """Random routes drawn per training maze and format for the warm start (fresh routes instead of
    repeated epochs over the same ones)."""
    rl_steps: int = 60
    """RL optimizer steps per run."""
    prompts_per_step: int = 8
    """Mazes per RL step."""
    num_generations: int = 8
    """Rollouts per maze per step (G); grpo_3x uses 3G."""
    rl_lr: float = 3e-4
    """RL learning rate (AdamW, constant)."""
    beta: float = 1e-3
    """KL coefficient to the warm start (paper: 1e-3; see docs/demo.md for 0.04)."""
    train_temperature: float = 1.0
    """Sampling temperature during RL (paper: 1.0)."""
    num_weightings: int = 100
    """K for VPO."""
    weight_sampler: str = "iid"
    """VPO's weight sampler: 'iid' Dirichlet (paper default) or 'sobol'."""
    eval_temperature: float = 0.7
    """Sampling temperature of the evaluation pools."""
    eval_budget: int = 30
    """Answers per maze in each evaluation pool (k counts answers)."""
    ks: tuple[int, ...] = (1, 3, 5, 10, 30)
    """Answer budgets reported."""
    eval_seeds: int = 5
    """Draws of the matched-budget subsample per pool."""
    jobs: int = 2
    """Subprocesses at a time."""

    def __post_init__(self) -> None:
        """Fail before the warm start, not after it, on a setting a later stage would refuse."""
        from vpo.core.answers import INSTRUCTION_STYLES, style_choices
        from vpo.core.weights import SAMPLERS

        bad = [m for m in self.methods if m not in METHODS]
        if bad or not self.methods:
            raise ValueError(f"unknown demo method(s) {bad or '(none)'}; choose from {', '.join(METHODS)}")
        if not self.seeds:
            raise ValueError("give at least one seed")
        if self.instruction not in INSTRUCTION_STYLES:
            raise ValueError(f"instruction must be {style_choices()}, got {self.instruction!r}")
        if self.weight_sampler not in SAMPLERS:
            raise ValueError(f"weight_sampler must be one of {', '.join(SAMPLERS)}, got {self.weight_sampler!r}")
        for name in ("train_mazes", "test_mazes", "warm_steps", "warm_batch", "warm_routes_per_maze", "rl_steps",
                     "prompts_per_step", "num_weightings", "eval_budget", "eval_seeds", "jobs"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.num_generations < 2:
            raise ValueError(f"num_generations must be >= 2 (a group z-score needs two rollouts), got {self.num_generations}")
        if max(self.ks) > self.eval_budget:
            raise ValueError(f"ks {self.ks} exceed eval_budget={self.eval_budget} answers per maze")

    @classmethod
    def quick(cls, **kw) -> "DemoConfig":
        """The CI setting: the default task, model, warm start and RL, then GRPO and VPO only,
        1 seed, evaluated on 24 test mazes with 12 answers each."""
        base = cls(
            seeds=(0,),
            methods=("grpo", "vpo"),
            test_mazes=24,
            eval_budget=12,
            ks=(1, 3, 6, 12),
            eval_seeds=2,
        )
        return replace(base, **kw)


# ---------------------------------------------------------------------------------------------
# jobs
# ---------------------------------------------------------------------------------------------


@dataclass
class Job:
    name: str
    argv: list[str]
    log: Path
    done_marker: Path
    after: list[str] = field(default_factory=list)
    progress_total: int = 0  # steps to expect in the log (train jobs), for the status line


def _status(msg: str) -> None:
    print(f"[vpo demo {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def run_jobs(jobs: list[Job], parallel: int) -> None:
    """Run jobs as subprocesses, ``parallel`` at a time, respecting ``after`` dependencies.

    Prints a status line when a job starts or ends and every ~20 s while any runs. A failed job
    stops the demo with its log's tail (finished jobs stay on disk and are skipped next time).
    """
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", PYTHONUNBUFFERED="1")
    pending = [j for j in jobs if not j.done_marker.exists()]
    done = {j.name for j in jobs if j.done_marker.exists()}
    if len(pending) < len(jobs):
        _status(f"{len(jobs) - len(pending)} job(s) already done, skipped")
    running: dict[str, tuple[Job, subprocess.Popen, float]] = {}
    last = 0.0
    total = len(pending)
    finished = 0
    try:
        while pending or running:
            for name, (job, proc, t0) in list(running.items()):
                rc = proc.poll()
                if rc is None:
                    continue
                del running[name]
                if rc != 0 or not job.done_marker.exists():
                    tail = job.log.read_text(errors="replace")[-4000:] if job.log.exists() else ""
                    raise RuntimeError(f"job {name} failed (exit {rc}); log {job.log}:\n{tail}")
                finished += 1
                done.add(name)
                _status(f"done  {name} in {time.time() - t0:.0f} s ({finished}/{total})")
            while len(running) < parallel:
                ready = [j for j in pending if all(a in done for a in j.after)]
                if not ready:
                    break
                job = ready[0]
                pending.remove(job)
                job.log.parent.mkdir(parents=True, exist_ok=True)
                fh = open(job.log, "w")
                proc = subprocess.Popen(job.argv, stdout=fh, stderr=subprocess.STDOUT, env=env)
                running[job.name] = (job, proc, time.time())
                _status(f"start {job.name}")
            if running and time.time() - last > 20:
                parts = []
                for name, (job, _, t0) in running.items():
                    step = _train_step_from_log(job.log) if job.progress_total else None
                    prog = f" step {step}/{job.progress_total}" if step is not None else ""
                    parts.append(f"{name}{prog} ({time.time() - t0:.0f} s)")
                _status("running: " + ", ".join(parts))
                last = time.time()
            if not running and pending and not any(all(a in done for a in j.after) for j in pending):
                raise RuntimeError("unsatisfiable job dependencies: " + ", ".join(j.name for j in pending))
            time.sleep(0.5)
    finally:
        for _, proc, _ in running.values():
            proc.kill()


def _train_step_from_log(log: Path) -> int | None:
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return None
    return text.count("'step_time'")


# ---------------------------------------------------------------------------------------------
# stages
# ---------------------------------------------------------------------------------------------


def make_task(cfg: DemoConfig):
    from vpo.tasks.maze import MazeTask

    return MazeTask(**task_options(cfg))


def task_options(cfg: DemoConfig) -> dict:
    return {"size": cfg.maze_size, "budget_slack": cfg.budget_slack, "compact": True, "instruction": cfg.instruction}


def warm_start(cfg: DemoConfig, out: Path) -> Path:
    """Build the tiny model and fine-tune it on diverse mediocre routes (both formats)."""
    from vpo.tasks.maze import Maze, random_route
    from vpo.train.tiny import build_tiny_model
    from vpo.train.warmstart import format_answers, supervised_warm_start

    ws = out / "warmstart"
    if (ws / "config.json").exists():
        _status(f"warm start exists: {ws}")
        return ws
    task = make_task(cfg)
    train = task.load("train", n=cfg.train_mazes)
    rng = np.random.default_rng(12345)
    pairs = []
    for ex in train:
        maze = Maze.from_example(ex)
        for _ in range(cfg.warm_routes_per_maze):
            pairs.append((task.build_prompt(ex, 1), format_answers([random_route(maze, rng).moves], 1)))
            routes = [random_route(maze, rng).moves for _ in range(3)]
            pairs.append((task.build_prompt(ex, 3), format_answers(routes, 3)))
    init = build_tiny_model(out / "init", hidden_size=cfg.hidden_size, num_layers=cfg.num_layers, num_heads=4)
    _status(f"warm start: {len(pairs)} (prompt, routes) pairs, {cfg.warm_steps} steps")
    import torch

    torch.set_num_threads(max(1, min(cfg.jobs, os.cpu_count() or 1)))
    t0 = time.time()
    info = supervised_warm_start(
        init, ws, pairs, steps=cfg.warm_steps, batch_size=cfg.warm_batch, learning_rate=cfg.warm_lr, seed=0
    )
    (ws / "warmstart.json").write_text(json.dumps({**info, "seconds": time.time() - t0}, indent=1))
    _status(f"warm start done in {time.time() - t0:.0f} s, loss {info['loss_first']:.2f} -> {info['loss_last']:.3f}")
    return ws


def train_config(cfg: DemoConfig, method: str, seed: int, init: Path, out_dir: Path) -> dict:
    label, estimator, m, mult = METHODS[method]
    G = cfg.num_generations * mult
    return {
        "model_name_or_path": str(init),
        "task": "maze",
        "task_options": json.dumps(task_options(cfg)),
        "train_size": cfg.train_mazes,
        "estimator": estimator,
        "num_answers": m,
        "num_weightings": cfg.num_weightings,
        "weight_sampler": cfg.weight_sampler,
        "num_generations": G,
        "per_device_train_batch_size": cfg.prompts_per_step * G,
        "max_completion_length": 24 if m == 1 else 64,
        "max_steps": cfg.rl_steps,
        "learning_rate": cfg.rl_lr,
        "lr_scheduler_type": "constant",
        "beta": cfg.beta,
        "temperature": cfg.train_temperature,
        # fp32 and no activation checkpointing: on a CPU with a 0.7 M-parameter model, bf16 autocast
        # buys nothing and recomputing activations costs ~10 % of a step (measured)
        "bf16": False,
        "activation_checkpointing": False,
        # a preallocated KV cache: the default one grows by concatenation at every decoding step
        # (benchmarks/generation.py: sampling 1.64x faster with 7x7 prompts, 1.1-1.2x with 5x5)
        "cache_implementation": "static",
        "seed": seed,
        "weight_seed": 1000 + seed,
        "output_dir": str(out_dir),
        "use_cpu": True,
        "report_to": "none",
        "logging_steps": 1,
        "save_strategy": "no",
        "disable_tqdm": True,
        "dataloader_num_workers": 0,
    }


def eval_argv(cfg: DemoConfig, model: Path, m: int, out_dir: Path, name: str, seed: int) -> list[str]:
    opts = []
    for k, v in task_options(cfg).items():
        opts += ["--task-option", f"{k}={json.dumps(v)}"]
    return [
        sys.executable, "-m", "vpo.cli", "eval",
        "--model", str(model), "--task", "maze", *opts,
        "--num-prompts", str(cfg.test_mazes),
        "--m", str(m), "--rollouts", str(math.ceil(cfg.eval_budget / m)),
        "--temperature", str(cfg.eval_temperature), "--max-new-tokens", "24" if m == 1 else "64",
        "--seed", str(seed), "--batch-rows", "512", "--threads", "1",
        "--ks", ",".join(map(str, cfg.ks)), "--eval-seeds", str(cfg.eval_seeds), "--no-plots",
        "--out", str(out_dir), "--name", name, "--quiet",
    ]  # fmt: skip


def build_jobs(cfg: DemoConfig, out: Path, ws: Path) -> list[Job]:
    import yaml

    jobs: list[Job] = []
    for seed in cfg.seeds:
        for method in cfg.methods:
            run = out / "runs" / f"{method}_s{seed}"
            conf = out / "configs" / f"{method}_s{seed}.yaml"
            conf.parent.mkdir(parents=True, exist_ok=True)
            conf.write_text(yaml.safe_dump(train_config(cfg, method, seed, ws, run), sort_keys=False))
            jobs.append(
                Job(
                    f"train {method} s{seed}",
                    [sys.executable, "-m", "vpo.cli", "train", str(conf)],
                    out / "logs" / f"train_{method}_s{seed}.log",
                    run / "model.safetensors",
                    progress_total=cfg.rl_steps,
                )
            )
    evals = [("warmstart_m1", ws, 1, [], 0), ("warmstart_m3", ws, 3, [], 0)]
    for seed in cfg.seeds:
        for method in cfg.methods:
            evals.append((f"{method}_s{seed}", out / "runs" / f"{method}_s{seed}", METHODS[method][2], [f"train {method} s{seed}"], seed))
    for name, model, m, after, seed in evals:
        ev = out / "eval" / name
        jobs.append(Job(f"eval {name}", eval_argv(cfg, model, m, ev, name, seed), out / "logs" / f"eval_{name}.log", ev / "report.json", after))
    # evaluations of finished models can start while other models still train
    return jobs


# ---------------------------------------------------------------------------------------------
# aggregation and report
# ---------------------------------------------------------------------------------------------


def _load_eval(out: Path, name: str) -> dict:
    rep = json.loads((out / "eval" / name / "report.json").read_text())
    return rep["results"][name]


def _curve(res: dict, metric: str, k: int) -> float:
    c = res["metrics"][metric]
    return float(c["mean"][c["k"].index(k)])


def _per_prompt_curve(res: dict, metric: str, k: int) -> np.ndarray:
    ks = res["metrics"][metric]["k"]
    arr = np.asarray(res["per_prompt"][metric], dtype=float)
    return arr[:, ks.index(k)]


def _training_curves(out: Path, cfg: DemoConfig) -> dict:
    curves: dict[str, dict[str, list[list[float]]]] = {}
    for method in cfg.methods:
        for seed in cfg.seeds:
            state = out / "runs" / f"{method}_s{seed}" / "trainer_state.json"
            if not state.exists():
                continue
            hist = json.loads(state.read_text())["log_history"]
            rows = [h for h in hist if "vpo/diversity" in h]
            curves.setdefault(method, {}).setdefault("diversity", []).append([h["vpo/diversity"] for h in rows])
            curves[method].setdefault("reward", []).append([h.get("reward", float("nan")) for h in rows])
            curves[method].setdefault("completion_tokens", []).append([h.get("completions/mean_length", float("nan")) for h in rows])
    return curves


def search_ceiling(cfg: DemoConfig) -> float:
    """Mean over the test mazes of the best single route's w*ᵀr (exact search): the most any best@k
    can reach. A broad warm start's pool may get close to it at k = 30."""
    from vpo.tasks.maze import Maze, reference_routes

    tests = make_task(cfg).load("test", n=cfg.test_mazes)
    return float(np.mean([reference_routes(Maze.from_example(ex))["best"].target_score for ex in tests]))


def aggregate(cfg: DemoConfig, out: Path) -> dict:
    """Mean over seeds per method, paired differences vs VPO, training curves."""
    rows: dict[str, dict] = {}
    per_prompt: dict[str, dict[int, np.ndarray]] = {}
    entries = [("warmstart_m1", "Warm start (m=1)", ["warmstart_m1"]), ("warmstart_m3", "Warm start (m=3)", ["warmstart_m3"])]
    entries += [(mth, METHODS[mth][0], [f"{mth}_s{s}" for s in cfg.seeds]) for mth in cfg.methods]
    for key, label, names in entries:
        results = [_load_eval(out, n) for n in names]
        r0 = results[0]
        row = {"label": label, "runs": names, "best_at_k": {}, "best_at_k_seeds": {}}
        for k in cfg.ks:
            vals = [_curve(r, "best_at_k", k) for r in results]
            row["best_at_k"][k] = float(np.mean(vals))
            row["best_at_k_seeds"][k] = vals
        for metric in ("diversity", "reward_at_1", "pass_at_1", "tokens_per_rollout", "tokens_per_answer", "valid_answer_frac"):
            row[metric] = float(np.mean([r["metrics"][metric]["mean"] for r in results]))
        row["m"] = r0["shape"]["m"]
        row["objective_means"] = np.mean([r["metrics"]["objective_means"] for r in results], axis=0).tolist()
        rows[key] = row
        per_prompt[key] = {k: np.mean([_per_prompt_curve(r, "best_at_k", k) for r in results], axis=0) for k in cfg.ks}
    paired = {}
    if "vpo" in rows:
        for other in [k for k in rows if k != "vpo"]:
            paired[other] = {}
            for k in cfg.ks:
                diff = per_prompt["vpo"][k] - per_prompt[other][k]
                diff = diff[np.isfinite(diff)]
                se = float(diff.std(ddof=1) / math.sqrt(len(diff))) if len(diff) > 1 else float("nan")
                paired[other][k] = {"diff": float(diff.mean()), "se": se}
    warm = json.loads((out / "warmstart" / "warmstart.json").read_text()) if (out / "warmstart" / "warmstart.json").exists() else {}
    return {
        "config": {**asdict(cfg), "seeds": list(cfg.seeds), "methods": list(cfg.methods), "ks": list(cfg.ks)},
        "methods": rows,
        "paired_vs_vpo": paired,
        "training_curves": _training_curves(out, cfg),
        "warm_start": warm,
        "ceiling": search_ceiling(cfg),
    }


def plot_demo(agg: dict, out: Path) -> dict[str, Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = {}
    ks = agg["config"]["ks"]
    colors = {"warmstart_m1": "#999999", "warmstart_m3": "#555555", "grpo": "#1f77b4", "grpo_3x": "#17becf", "gdpo": "#2ca02c", "multi_rlvr": "#ff7f0e", "vpo": "#d62728"}
    # distinct markers, drawn largest first: collapsed methods often share one flat curve, and each
    # must stay visible under the others
    markers = {"warmstart_m1": "o", "warmstart_m3": "o", "grpo": "s", "grpo_3x": "D", "gdpo": "^", "multi_rlvr": "v", "vpo": "o"}
    sizes = {"grpo": 10, "grpo_3x": 7, "gdpo": 5}
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for key, row in agg["methods"].items():
        means = np.array([row["best_at_k"][k] for k in ks])
        seeds = np.array([row["best_at_k_seeds"][k] for k in ks])  # [K, S]
        ax.plot(ks, means, marker=markers.get(key, "o"), ms=sizes.get(key, 6), label=row["label"], color=colors.get(key),
                lw=2.5 if key == "vpo" else 1.5, ls="--" if key.startswith("warm") else "-")
        if seeds.shape[1] > 1:
            ax.fill_between(ks, seeds.min(1), seeds.max(1), color=colors.get(key), alpha=0.15)
    ax.axhline(agg["ceiling"], color="k", ls=":", lw=1.2, label="ceiling: best single route (exact search)")
    ax.set_xscale("log")
    ax.set_xticks(ks)
    ax.set_xticklabels([str(k) for k in ks])
    ax.set_xlabel("k (answers drawn per maze; multi-answer policies: ceil(k/m) rollouts)")
    ax.set_ylabel("best@k of w*ᵀr (mean over held-out mazes)")
    ax.set_title("Test-time search on held-out mazes: best@k vs answer budget\n(band: range over seeds)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    paths["best_at_k"] = out / "best_at_k.png"
    fig.savefig(paths["best_at_k"], dpi=120)
    plt.close(fig)

    curves = agg["training_curves"]
    if curves:
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
        for method, c in curves.items():
            for ax, key, ylabel in ((axes[0], "diversity", "within-group reward-space diversity"), (axes[1], "reward", "mean w*ᵀr per rollout")):
                runs = [np.asarray(r, dtype=float) for r in c[key] if len(r)]
                if not runs:
                    continue
                n = min(len(r) for r in runs)
                mean = np.stack([r[:n] for r in runs]).mean(0)
                win = max(1, n // 10)  # moving average: one step of one batch is noisy
                smooth = np.convolve(mean, np.ones(win) / win, mode="valid")
                ax.plot(np.arange(win, n + 1), smooth, label=METHODS[method][0], color=colors.get(method))
                ax.set_xlabel("RL step")
                ax.set_ylabel(ylabel)
                ax.grid(alpha=0.3)
        axes[0].set_title("Diversity during training (seed mean, moving average)")
        axes[1].set_title("Training reward (seed mean, moving average)")
        axes[1].legend(fontsize=8)
        fig.tight_layout()
        paths["training"] = out / "training_curves.png"
        fig.savefig(paths["training"], dpi=120)
        plt.close(fig)

    fig, ax = plt.subplots(figsize=(7.5, 4))
    keys = list(agg["methods"])
    vals = [agg["methods"][k]["diversity"] for k in keys]
    ax.bar(range(len(keys)), vals, color=[colors.get(k, "#777") for k in keys])
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([agg["methods"][k]["label"] for k in keys], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("mean pairwise L1 of reward vectors (0..4)")
    ax.set_title(f"Reward-space diversity of the eval pools (T = {agg['config']['eval_temperature']})")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    paths["diversity"] = out / "diversity.png"
    fig.savefig(paths["diversity"], dpi=120)
    plt.close(fig)
    return paths


def markdown(agg: dict) -> str:
    cfg = agg["config"]
    ks = cfg["ks"]
    lines = [
        "# vpo demo: VPO vs GRPO on designed-conflict mazes (CPU)",
        "",
        f"{cfg['maze_size']}x{cfg['maze_size']} mazes, budget slack {cfg['budget_slack']}; tiny Qwen2 "
        f"({cfg['num_layers']} layers, hidden {cfg['hidden_size']}, one token per character); warm start "
        f"{cfg['warm_steps']} steps; RL {cfg['rl_steps']} steps x {cfg['prompts_per_step']} mazes x "
        f"{cfg['num_generations']} rollouts; seeds {cfg['seeds']}; evaluation on {cfg['test_mazes']} held-out "
        f"mazes at T = {cfg['eval_temperature']}, {cfg['eval_budget']} answers per maze, best@k at a matched "
        f"answer budget (multi-answer policies: ceil(k/m) rollouts, first k answers), {cfg['eval_seeds']} draws.",
        "",
        "| method | " + " | ".join(f"best@{k}" for k in ks) + " | diversity | reward@1 | pass@1 | tokens/rollout | tokens/answer |",
        "|---|" + "---|" * (len(ks) + 5),
    ]
    for key, row in agg["methods"].items():
        lines.append(
            f"| {row['label']} | " + " | ".join(f"{row['best_at_k'][k]:.3f}" for k in ks)
            + f" | {row['diversity']:.3f} | {row['reward_at_1']:.3f} | {row['pass_at_1']:.3f} | {row['tokens_per_rollout']:.1f} | {row['tokens_per_answer']:.1f} |"
        )
    lines += [
        "",
        "reward@1: mean w*ᵀr of one answer. pass@1: all four objectives at 1, which these mazes make "
        "impossible by design (no route within budget visits both zones), so it is 0 for every method.",
        "",
        f"Ceiling: the best single route of each test maze (exact search) averages {agg['ceiling']:.3f} "
        "under w*; no best@k can exceed it.",
        "",
    ]
    if agg["paired_vs_vpo"]:
        lines += ["## VPO minus each method, paired over mazes (mean ± SE; seeds averaged per maze)", ""]
        lines.append("| vs | " + " | ".join(f"Δbest@{k}" for k in ks) + " |")
        lines.append("|---|" + "---|" * len(ks))
        for other, d in agg["paired_vs_vpo"].items():
            label = agg["methods"][other]["label"]
            lines.append(f"| {label} | " + " | ".join(f"{d[k]['diff']:+.3f} ± {d[k]['se']:.3f}" for k in ks) + " |")
        lines.append("")
    if agg.get("wall_seconds"):
        lines += [f"Wall time: {agg['wall_seconds'] / 60:.1f} min on this machine ({os.cpu_count()} cores, {agg['config']['jobs']} jobs at a time).", ""]
    lines += [
        "![best@k](best_at_k.png)",
        "",
        "![training](training_curves.png)",
        "",
        "![diversity](diversity.png)",
        "",
        f"Reproduce: `vpo demo --out {cfg['out']}` (add `--seeds 0 1 2` for more seeds).",
    ]
    return "\n".join(lines) + "\n"


def run_demo(cfg: DemoConfig) -> dict:
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    unknown = set(cfg.methods) - set(METHODS)
    if unknown:
        from vpo.errors import UserError

        raise UserError(f"unknown method(s) {sorted(unknown)}; choose from {', '.join(METHODS)}")
    t0 = time.time()
    (out / "demo_config.json").write_text(json.dumps(asdict(cfg), indent=1, default=list))
    ws = warm_start(cfg, out)
    jobs = build_jobs(cfg, out, ws)
    _status(f"{len(jobs)} jobs ({len(cfg.methods)} methods x {len(cfg.seeds)} seeds + evaluations), {cfg.jobs} at a time")
    run_jobs(jobs, cfg.jobs)
    agg = aggregate(cfg, out)
    elapsed = time.time() - t0
    prev = json.loads((out / "demo.json").read_text()).get("wall_seconds", 0.0) if (out / "demo.json").exists() else 0.0
    agg["last_invocation_seconds"] = elapsed
    agg["wall_seconds"] = prev + elapsed  # summed over invocations: a resumed demo counts all its work
    (out / "demo.json").write_text(json.dumps(agg, indent=1))
    plot_demo(agg, out)
    (out / "report.md").write_text(markdown(agg))
    _status(f"report: {out / 'report.md'} ({elapsed / 60:.1f} min; {agg['wall_seconds'] / 60:.1f} min over all invocations)")
    return agg


def _parse_setting(name: str, value: str, current):
    """``--set name=value`` as the field's type (tuples comma-separated)."""
    from vpo.errors import UserError

    try:
        if name == "methods":
            return tuple(x for x in value.split(",") if x)
        if isinstance(current, tuple):
            return tuple(int(x) for x in value.split(","))
        return type(current)(value)
    except ValueError:
        raise UserError(f"--set {name}={value}: expected {type(current).__name__}") from None


def _main(args) -> int:
    from vpo.errors import UserError

    cfg = DemoConfig.quick() if args.quick else DemoConfig()
    over = {}
    if args.out:
        over["out"] = args.out
    if args.seeds is not None:
        over["seeds"] = tuple(args.seeds)
    if args.methods:
        over["methods"] = tuple(args.methods.split(","))
    if args.jobs:
        over["jobs"] = args.jobs
    for kv in args.set or []:
        k, _, v = kv.partition("=")
        if k not in DemoConfig.__dataclass_fields__:
            raise UserError(f"unknown demo setting {k!r}; see `vpo demo --help`")
        over[k] = _parse_setting(k, v, getattr(cfg, k))
    try:
        cfg = replace(cfg, **over)
    except ValueError as e:
        raise UserError(str(e)) from None
    agg = run_demo(cfg)
    print(markdown(agg))
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser(
        "demo",
        help="train a tiny model with VPO, GRPO and baselines on mazes and report test-time search (CPU, minutes)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", default=None, help="output directory (default runs/demo)")
    p.add_argument("--quick", action="store_true", help="the CI setting: 1 seed, grpo and vpo only, 24 test mazes (~3.5 min on 2 cores)")
    p.add_argument("--seeds", type=int, nargs="+", default=None, help="RL seeds (default 0 1)")
    p.add_argument("--methods", default=None, help=f"comma-separated subset of {','.join(METHODS)}")
    p.add_argument("--jobs", type=int, default=None, help="subprocesses at a time (default 2)")
    p.add_argument("--set", action="append", metavar="FIELD=VALUE", help="override any DemoConfig field, e.g. --set rl_steps=120")
    p.set_defaults(func=_main)
