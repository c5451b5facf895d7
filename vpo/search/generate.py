"""Generate candidate pools: a model answers a task's prompts R times each, m answers per rollout.

Prompts are ``task.build_prompt(example, m)``, wrapped with the tokenizer's chat template when it
has one (the ``chat`` API applies the server's template instead). Completions come from one of the
backends of :mod:`vpo.search.backends` (transformers, vLLM, an OpenAI-compatible server), are scored
with ``task.score_completions`` into ``rewards [R, m, d]`` per prompt and appended to the pool
directory after every prompt (see :mod:`vpo.search.pools`): an interrupted run keeps its finished
prompts and a rerun with the same settings skips them. A batch is seeded with ``seed`` + 7919 × the
index of its first prompt (vLLM and endpoints add each prompt's position in the batch).
``stop_at_last_answer`` ends each rollout at its m-th answer's closing tag. The backends' public
names are importable from here. Answers the task could not score (``ScoredBatch.unscored``) are
invalid in the pool, listed in their prompt record under ``unscored`` (``[R, m]`` bools, present
only when there are some) and counted in one warning at the end, so a pool never hides them.
"""

from __future__ import annotations

import json
import os
import time
import warnings
from dataclasses import asdict, fields
from typing import Callable, Sequence

import numpy as np

from vpo.search.backends import (
    OpenAIGenerator,
    PoolConfig,
    TransformersGenerator,
    last_answer_stop,
    make_generator,
)
from vpo.search.pools import Pool, PoolError, PoolWriter

__all__ = ["generate_pool"]
"""The generation backends (``PoolConfig``, ``make_generator``, ...) live in :mod:`vpo.search.backends`."""

PROMPT_SEED_STRIDE = 7919
"""A prompt's seed is ``seed`` + this prime x its index (a pool's batch: its first prompt's; the step search: each prompt's)."""

_MATCH_KEYS = (
    "task",
    "objectives",
    "m",
    "n_rollouts",
    "temperature",
    "top_p",
    "top_k",
    "max_new_tokens",
    "model",
    "system_prompt",
    "stop",
)


def prompt_ids(examples: Sequence[dict]) -> list[str]:
    ids = [str(ex["id"]) if isinstance(ex, dict) and "id" in ex else f"#{i}" for i, ex in enumerate(examples)]
    if len(set(ids)) != len(ids):
        ids = [f"#{i}" for i in range(len(examples))]  # ids are not unique: fall back to positions
    return ids


def generate_pool(
    model=None,
    task=None,
    examples: Sequence[dict] | None = None,
    *,
    tokenizer=None,
    out_dir: str | os.PathLike | None = None,
    resume: bool = True,
    progress: bool = True,
    on_prompt_done: Callable[[str, int, int], None] | None = None,
    split: str = "test",
    num_prompts: int | None = None,
    config: PoolConfig | None = None,
    generator=None,
    **overrides,
) -> Pool:
    """Sample ``n_rollouts`` rollouts of ``m`` answers for every example and score them.

    Args:
        model: a saved model directory / hub id, or a loaded ``PreTrainedModel`` (with
            ``tokenizer``); None with ``endpoint=`` (OpenAI-compatible server).
        task: a :class:`vpo.tasks.Task` or a registered name (``"maze"``).
        examples: the prompts' examples (default: ``task.load(split, n=num_prompts)``).
        out_dir: pool directory, written incrementally (None = in memory only).
        resume: keep the finished prompts of an existing pool in ``out_dir`` (settings must match).
        on_prompt_done: ``f(prompt_id, done, total)`` after each prompt is saved (raise
            ``KeyboardInterrupt`` from it to stop; the pool on disk keeps what is done).
        config / overrides: :class:`PoolConfig` fields (``num_answers=3, n_rollouts=10, temperature=1.0, ...``).
        generator: a ready backend object (reused across calls; skips loading the model again).

    Returns:
        The :class:`~vpo.search.pools.Pool` (``rewards [P*R, m, d]``, rollouts grouped by prompt).
    """
    from tqdm.auto import tqdm

    cfg = _pool_config(config, overrides)
    task = _resolve_task(task)
    examples = _examples(task, examples, split, num_prompts)
    stop = last_answer_stop(cfg.num_answers, task.answer_format) if cfg.stop_at_last_answer else []
    gen = generator or make_generator(model, cfg, tokenizer)
    system = cfg.system_prompt if cfg.system_prompt is not None else getattr(task, "system_prompt", None)
    ids = prompt_ids(examples)
    meta = _pool_meta(task, cfg, gen, model, system, split, stop)
    writer = PoolWriter(out_dir, meta, resume=resume, match_keys=_MATCH_KEYS) if out_dir is not None else None
    done = writer.done_ids if writer else set()
    records: list[dict] = list(writer.records) if writer else []
    todo = [i for i, pid in enumerate(ids) if pid not in done]
    per_batch = _prompts_per_batch(gen, cfg)
    bar = tqdm(
        total=len(ids), initial=len(ids) - len(todo), unit="prompt", disable=not progress, desc=f"pool {task.name}"
    )
    t0, answers_made = time.perf_counter(), 0
    try:
        for b0 in range(0, len(todo), per_batch):
            for rec in _batch_records(gen, task, examples, ids, todo[b0 : b0 + per_batch], cfg, system, stop):
                if writer:
                    writer.write(rec)
                records.append(rec)
                answers_made += cfg.n_rollouts * cfg.num_answers
                bar.update(1)
                bar.set_postfix(answers_per_s=f"{answers_made / max(time.perf_counter() - t0, 1e-9):.1f}")
                if on_prompt_done is not None:
                    on_prompt_done(rec["prompt_id"], len(records), len(ids))
    finally:
        bar.close()
        if writer:
            writer.close()
    unscored = sum(int(np.sum(rec.get("unscored") or 0)) for rec in records)
    if unscored:
        warnings.warn(
            f"pool {task.name}: {unscored} answer(s) could not be scored (the scorer raised or gave no usable "
            "reward; see the scoring warnings): they are invalid in this pool, which undercounts the model; "
            "each prompt record's 'unscored' lists them; rescore the pool once the cause is fixed",
            RuntimeWarning,
            stacklevel=2,
        )
    if writer:
        return writer.finish(order=ids)
    pos = {pid: k for k, pid in enumerate(ids)}
    records.sort(key=lambda r: pos[r["prompt_id"]])
    return Pool.from_records(records, task.objectives, task.target_weights, cfg.num_answers, meta)


def _pool_config(config: PoolConfig | None, overrides: dict) -> PoolConfig:
    """``config`` (default :class:`PoolConfig`) with the keyword overrides applied; an unknown name is a TypeError."""
    cfg = config or PoolConfig()
    if overrides:
        unknown = set(overrides) - {f.name for f in fields(PoolConfig)}
        if unknown:
            raise TypeError(f"unknown generate_pool option(s): {', '.join(sorted(unknown))}")
        cfg = PoolConfig(**{**asdict(cfg), **overrides})
    return cfg


def _resolve_task(task):
    """A :class:`vpo.tasks.Task`, from itself or its registered name."""
    from vpo.tasks import Task
    from vpo.tasks import get as get_task

    if isinstance(task, str):
        task = get_task(task)
    if not isinstance(task, Task):
        raise ValueError(f"task must be a vpo Task or a registered task name; got {type(task).__name__}")
    return task


def _examples(task, examples: Sequence[dict] | None, split: str, num_prompts: int | None) -> list[dict]:
    """The examples to answer: the given ones or ``task.load(split, n=num_prompts)``; never empty."""
    if examples is None:
        examples = task.load(split, n=num_prompts)
    examples = list(examples)
    if not examples:
        raise PoolError(f"no examples to generate for (task {task.name!r}, split {split!r}); the pool would be empty")
    return examples


def _pool_meta(task, cfg: PoolConfig, gen, model, system: str | None, split: str, stop: list[str]) -> dict:
    """The pool's settings as stored in its meta file (a resumed pool must match them on ``_MATCH_KEYS``)."""
    return {
        "task": task.name,
        "objectives": list(task.objectives),
        "target_weights": [float(x) for x in task.target_weights],
        **{k: v for k, v in cfg.public().items() if k != "num_answers"},
        "m": cfg.num_answers,  # the pool format's name of the answer-slot axis of rewards [N, m, d]
        "model": getattr(gen, "name", str(model)),
        "backend": type(gen).__name__,
        "system_prompt": system,
        "split": split,
        "stop": stop or None,
    }


def _prompts_per_batch(gen, cfg: PoolConfig) -> int:
    """Prompts sent to the backend at once: transformers fills ``max_batch_rows`` rows of
    ``n_rollouts`` each, an endpoint gets 4 per concurrent request, vLLM 64."""
    if isinstance(gen, TransformersGenerator):
        return max(1, cfg.max_batch_rows // cfg.n_rollouts)
    if isinstance(gen, OpenAIGenerator):
        return max(1, 4 * cfg.concurrency)
    return 64


def _batch_records(gen, task, examples: list[dict], ids: list[str], batch: list[int], cfg: PoolConfig, system, stop):
    """Generate and score ``n_rollouts`` rollouts for each example index in ``batch``; yields one pool
    record per prompt, in batch order."""
    n = cfg.n_rollouts
    prompts = [gen.format(task.build_prompt(examples[i], cfg.num_answers), system) for i in batch]
    outs = gen.generate(prompts, n, seed=cfg.seed + PROMPT_SEED_STRIDE * batch[0], **({"stop": stop} if stop else {}))
    flat_ex = [examples[i] for i in batch for _ in range(n)]
    flat = [g for row in outs for g in row]
    scored = task.score_completions(flat_ex, [g.text for g in flat], cfg.num_answers, dedup_answers=cfg.dedup_answers)
    for bi, i in enumerate(batch):
        sl = slice(bi * n, (bi + 1) * n)
        rec = {
            "prompt_id": ids[i],
            "example_index": i,
            "prompt": prompts[bi] if isinstance(prompts[bi], str) else json.dumps(prompts[bi]),
            "completions": [g.text for g in flat[sl]],
            "answers": scored.answers[sl],
            "rewards": scored.rewards[sl].tolist(),
            "valid": scored.valid[sl].tolist(),
            "num_tokens": [None if g.num_tokens != g.num_tokens else g.num_tokens for g in flat[sl]],
        }
        if scored.unscored_answers[sl].any():  # answers the task could not score: invalid here, but said so
            rec["unscored"] = scored.unscored_answers[sl].tolist()
        yield rec
