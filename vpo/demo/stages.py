"""The demo's stages: the warm start (in process), then one ``vpo train`` and one ``vpo eval`` job per
method and seed (run by :func:`vpo.demo.jobs.run_jobs`), built from one :class:`~vpo.demo.config.DemoConfig`.

A replicate (one seed) is independent end to end with ``warm_start='per_replicate'`` (the default):
its own warm start (model initialisation, random answers and batch order from the seed; seed 0 draws
exactly what the shared warm start draws), its own RL runs and evaluation draws. With ``'shared'``
one warm start serves every seed, as in the runs made before. The warm start's answers are random
valid ones that the config's domain draws (:meth:`vpo.demo.domains.Domain.warm_answer_sampler`:
routes with random detours, or programs built from the shown pairs).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

from vpo.demo.config import DemoConfig, method_spec
from vpo.demo.jobs import Job, clear_stage, mark_done, stage_state, status


def make_task(cfg: DemoConfig, evaluation: bool = False):
    """The vpo task the config's domain runs, with the config's options; ``evaluation``: as the
    evaluation jobs run it (with the config's ``test_seed``)."""
    return cfg.domain_spec.make_task(cfg, evaluation=evaluation)


def warm_pairs(cfg: DemoConfig, task, train: list[dict], warm_seed: int | None = None) -> list[tuple[str, str]]:
    """The warm start's (prompt, completion) pairs: per training problem and ``warm_answers_per_problem``,
    one random answer in the single-answer format and three in the 3-answer format. ``warm_seed``: a
    replicate's own draws (seed 0 and the shared warm start draw the same)."""
    from vpo.train.warmstart import format_answers

    # one generator, drawn in the same order as before the prog domain existed: the maze's pairs are unchanged
    sample = cfg.domain_spec.warm_answer_sampler(cfg, np.random.default_rng(12345 + (warm_seed or 0)))
    if hasattr(sample, "prefetch"):  # a sampler that asks a model (the animals domain's): all lists at once
        sample.prefetch(train)
    pairs = []
    for ex in train:
        for _ in range(cfg.warm_answers_per_problem):
            pairs.append((task.build_prompt(ex, 1), format_answers([sample(ex)], 1)))
            pairs.append((task.build_prompt(ex, 3), format_answers([sample(ex) for _ in range(3)], 3)))
    return pairs


def warm_dir(out: Path, warm_seed: int | None) -> Path:
    """Where a warm start lives: ``warmstart`` (shared) or ``warmstart_s<seed>`` (a replicate's)."""
    return out / ("warmstart" if warm_seed is None else f"warmstart_s{warm_seed}")


def warm_start(cfg: DemoConfig, out: Path, warm_seed: int | None = None) -> Path:
    """Build the tiny model and fine-tune it on diverse mediocre answers (routes or programs, both
    formats); ``warm_seed``: a replicate's own warm start (None: the shared one, seed 0)."""
    from vpo.train.warmstart import supervised_warm_start

    ws = warm_dir(out, warm_seed)
    marker = ws / "warmstart.json"
    settings = cfg.warm_settings(warm_seed)
    done, changes = stage_state(marker, settings)
    if done:
        status(f"warm start exists with the same settings: {ws}")
        return ws
    if changes:
        status(f"warm start: settings changed, training it again ({'; '.join(changes[:4])})")
    clear_stage(marker)
    task = make_task(cfg)
    pairs = warm_pairs(cfg, task, task.load("train", n=cfg.train_problems), warm_seed)
    init = cfg.domain_spec.init_model(cfg, out, warm_seed)
    status(f"warm start: {len(pairs)} (prompt, {task.answer_noun}s) pairs, {cfg.warm_steps} steps")
    import torch

    torch.set_num_threads(max(1, min(cfg.warm_thread_count, os.cpu_count() or 1)))
    t0 = time.time()
    info = supervised_warm_start(
        init,
        ws,
        pairs,
        steps=cfg.warm_steps,
        batch_size=cfg.warm_batch,
        learning_rate=cfg.warm_lr,
        seed=warm_seed or 0,
        **cfg.domain_spec.warm_kwargs(cfg),
    )
    fingerprint = {"weights_sha256": weights_sha256(ws), "threads": torch.get_num_threads()}
    marker.write_text(json.dumps({**info, **fingerprint, "seconds": time.time() - t0}, indent=1))
    mark_done(marker, settings)
    status(f"warm start done in {time.time() - t0:.0f} s, loss {info['loss_first']:.2f} -> {info['loss_last']:.3f}")
    return ws


def weights_sha256(model_dir: Path) -> str:
    """SHA-256 of a checkpoint's weight files (``*.safetensors``, in name order): with the first
    loss, the warm start's fingerprint in ``warmstart.json``. Two runs that agree on it trained the
    same model bit for bit; a rerun on another CPU or library version usually does not (float rounding)."""
    import hashlib

    h = hashlib.sha256()
    for f in sorted(Path(model_dir).glob("*.safetensors")):
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def warm_job(cfg: DemoConfig, out: Path, warm_seed: int | None) -> Job:
    """A warm start as a demo job (``python -m vpo.demo.warm_job OUT SEED``), run in a job slot
    beside the others: with one torch thread per warm start, two slots train two warm starts at a
    time instead of one after the other on two threads (docs/demo.md, "Where the time goes")."""
    ws = warm_dir(out, warm_seed)
    return Job(
        warm_job_name(warm_seed),
        [sys.executable, "-m", "vpo.demo.warm_job", str(out), "shared" if warm_seed is None else str(warm_seed)],
        out / "logs" / f"{ws.name}.log",
        ws / "warmstart.json",
        settings=cfg.warm_settings(warm_seed),
        cost=1e9,  # every other job of its replicate waits for it: first
    )


def warm_job_name(warm_seed: int | None) -> str:
    return "warm start" + ("" if warm_seed is None else f" s{warm_seed}")


def train_config(cfg: DemoConfig, method: str, seed: int, init: Path, out_dir: Path) -> dict:
    """The ``vpo train`` YAML of one method and seed."""
    _, estimator, num_answers, mult = method_spec(method)
    G = cfg.num_generations * mult
    task, options = cfg.domain_spec.task, cfg.task_options()
    if cfg.train_noise_sigma or cfg.train_noise_flip:  # the trainer sees corrupted rewards; eval scores clean
        task, options = (
            "noisy",
            {
                "task": task,
                "task_options": options,
                "sigma": cfg.train_noise_sigma,
                "flip": cfg.train_noise_flip,
                "binary": list(cfg.domain_spec.binary_objectives(cfg)),
                "seed": 7000 + seed,
            },
        )
    conf = {
        # resolved: a LoRA adapter records its base model's path, which must not depend on the cwd
        "model_name_or_path": str(Path(init).resolve()),
        "task": task,
        "task_options": json.dumps(options),
        "train_size": cfg.train_problems,
        "estimator": estimator,
        "num_answers": num_answers,
        "num_weightings": cfg.num_weightings,
        "weight_sampler": cfg.weight_sampler,
        "weight_alpha": cfg.weight_alpha,
        "num_generations": G,
        "per_device_train_batch_size": cfg.prompts_per_step * G,
        "max_completion_length": cfg.max_tokens_single if num_answers == 1 else cfg.max_tokens_multi,
        "max_steps": cfg.rl_steps,
        "learning_rate": cfg.rl_lr,
        "lr_scheduler_type": "constant",
        "beta": cfg.beta,
        "temperature": cfg.train_temperature,
        # fp32 and no activation checkpointing: on a CPU with a 0.7 M-parameter model, bf16 autocast
        # buys nothing and recomputing activations costs ~10 % of a step (docs/demo.md)
        "bf16": False,
        "activation_checkpointing": False,
        # a preallocated KV cache: the default one grows by concatenation at every decoding step
        # (benchmarks/generation.py)
        "cache_implementation": "static",
        # each problem's prompt runs through the policy and the reference model once per step, not once
        # per rollout: the same log-probabilities to float rounding, about half the loss-side work
        # (benchmarks/shared_prefix.py, docs/demo.md)
        "shared_prompt_forward": True,
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
    for key, value in cfg.domain_spec.train_overrides(cfg).items():
        if value is None:
            conf.pop(key, None)
        else:
            conf[key] = value
    return conf


def eval_argv(
    cfg: DemoConfig,
    model: Path,
    num_answers: int,
    out_dir: Path,
    name: str,
    seed: int,
    temperature: float | None = None,
) -> list[str]:
    """The ``vpo eval`` command of one evaluation; ``temperature``: instead of ``eval_temperature``
    (the hotter start's rows)."""
    opts = ["--task-options", json.dumps(cfg.eval_task_options())]
    max_new = cfg.max_tokens_single if num_answers == 1 else cfg.max_tokens_multi
    temp = cfg.eval_temperature if temperature is None else temperature
    return [
        sys.executable, "-m", "vpo.cli", "eval",
        "--model", str(model), "--task", cfg.domain_spec.task, *opts,
        "--split", cfg.split, "--num-prompts", str(cfg.eval_problems),
        "--num-answers", str(num_answers), "--rollouts", str(math.ceil(cfg.eval_budget / num_answers)),
        "--temperature", str(temp), "--max-new-tokens", str(max_new),
        "--seed", str(seed), "--batch-rows", "512", "--threads", "1",
        "--ks", ",".join(map(str, cfg.ks)), "--eval-seeds", str(cfg.eval_seeds), "--no-plots",
        "--out", str(out_dir), "--name", name, "--quiet", *cfg.domain_spec.eval_args(cfg),
    ]  # fmt: skip


def eval_entries(cfg: DemoConfig) -> list[tuple[str, str, list[str]]]:
    """``(row key, label, eval run names)`` in report order: the warm start (one run, or one per
    replicate), then each method's seeds."""
    rows = [
        (f"warmstart_m{m}", f"Warm start (m={m})", [warm_eval_name(m, w) for w in cfg.warm_seeds()]) for m in (1, 3)
    ]
    if cfg.start_temperature:
        T = f"{cfg.start_temperature:g}"
        rows += [
            (
                f"warmstart_hot_m{m}",
                f"Warm start (m={m}, T={T})",
                [warm_eval_name(m, w, hot=True) for w in cfg.warm_seeds()],
            )
            for m in (1, 3)
        ]
    if cfg.random_answerer:
        rows.append(("random", "Uniform random answerer", [random_eval_name(w) for w in cfg.warm_seeds()]))
    rows += [(mth, method_spec(mth)[0], [f"{mth}_s{s}" for s in cfg.seeds]) for mth in trained_methods(cfg)]
    return rows


def warm_eval_name(num_answers: int, warm_seed: int | None, hot: bool = False) -> str:
    """A warm start's evaluation run; ``hot``: sampled at ``start_temperature``."""
    return f"warmstart_{'hot_' if hot else ''}m{num_answers}" + ("" if warm_seed is None else f"_s{warm_seed}")


def random_eval_name(warm_seed: int | None) -> str:
    """The uniform random answerer's evaluation run of a replicate (one per warm start, as its rows)."""
    return f"random_s{warm_seed or 0}"


def trained_methods(cfg: DemoConfig) -> tuple[str, ...]:
    return () if cfg.warm_only else cfg.methods


def _without_paths(conf: dict) -> dict:
    """A train config minus where its files live: a demo directory moved or copied elsewhere still
    resumes (the warm start it reads is recorded by its own settings)."""
    return {k: v for k, v in conf.items() if k not in ("output_dir", "model_name_or_path")}


def train_cost(tc: dict) -> float:
    """A train job's expected relative run time: rollouts x (tokens a rollout may write + a prompt's
    worth of fixed cost) x steps. Only the order matters (the longest jobs start first)."""
    return tc["max_steps"] * tc["per_device_train_batch_size"] * (tc["max_completion_length"] + 40) / 1e3


def build_jobs(cfg: DemoConfig, out: Path, ws: dict | None = None) -> list[Job]:
    """The train and eval jobs; ``ws``: ``{warm seed (None: shared): warm start directory}``, by
    default where :func:`warm_start` puts them (:func:`warm_dir`). With ``warm_threads=1`` and no
    ``ws`` (warm starts not trained yet) the warm starts are jobs too (:func:`warm_job`), and each
    train and warm-start eval job runs after its own."""
    import yaml

    as_jobs = ws is None and cfg.warm_starts_as_jobs
    wdirs = {w: warm_dir(out, w) for w in cfg.warm_seeds()} if ws is None else ws
    jobs: list[Job] = [warm_job(cfg, out, w) for w in cfg.warm_seeds()] if as_jobs else []
    warm_after = {w: ([warm_job_name(w)] if as_jobs else []) for w in cfg.warm_seeds()}
    for seed in cfg.seeds:
        w = cfg.warm_seed_of(seed)
        warm = cfg.warm_settings(w)
        for method in trained_methods(cfg):
            run = out / "runs" / f"{method}_s{seed}"
            conf = out / "configs" / f"{method}_s{seed}.yaml"
            conf.parent.mkdir(parents=True, exist_ok=True)
            tc = train_config(cfg, method, seed, wdirs[w], run)
            conf.write_text(yaml.safe_dump(tc, sort_keys=False))
            jobs.append(
                Job(
                    f"train {method} s{seed}",
                    [sys.executable, "-m", "vpo.cli", "train", str(conf)],
                    out / "logs" / f"train_{method}_s{seed}.log",
                    run / ("adapter_model.safetensors" if tc.get("use_peft") else "model.safetensors"),
                    settings={"warm_start": warm, "train": _without_paths(tc)},
                    after=list(warm_after[w]),
                    progress_total=cfg.rl_steps,
                    output_dir=run,
                    cost=train_cost(tc),
                )
            )
    evals = [
        (warm_eval_name(m, w), wdirs[w], m, list(warm_after[w]), w or 0, {"warm_start": cfg.warm_settings(w)})
        for w in cfg.warm_seeds()
        for m in (1, 3)
    ]
    hot = [
        (warm_eval_name(m, w, hot=True), wdirs[w], m, list(warm_after[w]), w or 0, {"warm_start": cfg.warm_settings(w)})
        for w in (cfg.warm_seeds() if cfg.start_temperature else ())
        for m in (1, 3)
    ]
    for seed in cfg.seeds:
        for method in trained_methods(cfg):
            train_job = next(j for j in jobs if j.name == f"train {method} s{seed}")
            evals.append(
                (
                    f"{method}_s{seed}",
                    out / "runs" / f"{method}_s{seed}",
                    method_spec(method)[2],
                    [train_job.name],
                    seed,
                    train_job.settings,
                )
            )
    for name, model, num_answers, after, seed, upstream in evals:
        settings = {"upstream": upstream, "eval": cfg.eval_settings(), "seed": seed}
        jobs.append(eval_job(cfg, out, name, model, num_answers, seed, settings, after=after))
    for name, model, num_answers, after, seed, upstream in hot:
        T = float(cfg.start_temperature)
        settings = {"upstream": upstream, "eval": {**cfg.eval_settings(), "eval_temperature": T}, "seed": seed}
        jobs.append(eval_job(cfg, out, name, model, num_answers, seed, settings, after=after, temperature=T))
    if cfg.random_answerer:
        jobs += [random_job(cfg, out, w or 0) for w in cfg.warm_seeds()]
    # evaluations of finished models can start while other models still train
    return jobs


def eval_job(
    cfg: DemoConfig,
    out: Path,
    name: str,
    model: Path,
    num_answers: int,
    seed: int,
    settings: dict,
    after: list[str] | tuple[str, ...] = (),
    job_name: str | None = None,
    temperature: float | None = None,
) -> Job:
    """One ``vpo eval`` job of ``model`` at the config's evaluation settings: pool and report in
    ``OUT/eval/NAME``, log in ``OUT/logs/eval_NAME.log``, done when its report exists under ``settings``."""
    ev = out / "eval" / name
    return Job(
        job_name or f"eval {name}",
        eval_argv(cfg, model, num_answers, ev, name, seed, temperature),
        out / "logs" / f"eval_{name}.log",
        ev / "report.json",
        settings=settings,
        after=list(after),
        output_dir=ev,
    )


def random_job(cfg: DemoConfig, out: Path, seed: int) -> Job:
    """The uniform random answerer of replicate ``seed`` (:mod:`vpo.demo.baselines`): no model, seconds."""
    name = random_eval_name(seed)
    ev = out / "eval" / name
    return Job(
        f"eval {name}",
        [sys.executable, "-m", "vpo.demo.baselines", str(out), str(seed)],
        out / "logs" / f"eval_{name}.log",
        ev / "report.json",
        settings={"eval": cfg.eval_settings(), "seed": seed, "answerer": "uniform random"},
        output_dir=ev,
        cost=0.0,
    )
