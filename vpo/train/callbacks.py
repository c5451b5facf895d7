"""Search evaluation during training: a TRL/transformers ``TrainerCallback`` and the pool-statistics logs.

:class:`SearchEvalCallback` (on with ``VPOConfig.search_eval_steps: N``) samples a held-out split of the
task with the current policy at every global step that is a multiple of N (so a resumed run keeps the
schedule), through vpo.search's pool code (:func:`vpo.search.generate_pool` with a
``TransformersGenerator`` on the in-memory model), and logs best@k at a matched answer budget, pass@k,
diversity among valid and among completed answers and the pool statistics as ``search/...`` keys
through the trainer's normal log, so every ``report_to`` backend receives them. Sampling uses a private
RNG stream and the same seed at every evaluation (common random numbers: the curve over steps moves
with the model, not with sampling luck), so training itself is unchanged by it.

:func:`pool_stat_logs` is the trainer's per-batch ``vpo/pool/...`` log (the reference implementation's
pool statistics, :mod:`vpo.search.poolstats`). docs/training.md describes both.
"""

from __future__ import annotations

import math
import time

import numpy as np
from transformers import Trainer, TrainerCallback

__all__ = ["SearchEvalCallback", "pool_stat_logs"]


def pool_stat_logs(rewards, valid, group_size: int, target_weights) -> dict[str, float]:
    """``{"vpo/pool/<name>": value}`` for a training batch (``rewards [N, m, d]``, ``valid [N, m]``
    tensors or arrays; groups of ``group_size`` consecutive rollouts): :func:`vpo.search.poolstats.
    training_pool_stats` over each group's valid answers, averaged over the groups."""
    from vpo.search.poolstats import training_pool_stats

    r = rewards.detach().cpu().double().numpy() if hasattr(rewards, "detach") else np.asarray(rewards, dtype=np.float64)
    v = valid.detach().cpu().numpy() if hasattr(valid, "detach") else np.asarray(valid, dtype=bool)
    stats = training_pool_stats(r, v.astype(bool), group_size, target_weights)
    return {f"vpo/pool/{k}": val for k, val in stats.items()}


class SearchEvalCallback(TrainerCallback):
    """Held-out search evaluation every ``args.search_eval_steps`` global steps of a ``VPOTrainer``.

    ``trainer.add_callback(SearchEvalCallback(trainer))`` (``VPOTrainer`` does it when
    ``search_eval_steps > 0``). Settings come from ``trainer.args``: ``search_eval_examples`` prompts of
    the task's ``search_eval_split``, ``search_eval_budget`` answer slots per prompt (ceil(budget / m)
    rollouts of m answers), ``search_eval_temperature``, ``search_eval_max_new_tokens`` (default
    ``max_completion_length``), ``search_eval_seed`` (default ``seed``). ``history`` keeps
    ``(global_step, logs)`` of every evaluation.
    """

    def __init__(self, trainer) -> None:
        from vpo.search.backends import PoolConfig
        from vpo.search.metrics import default_ks
        from vpo.tasks.registry import load_split
        from vpo.train.config import TrainerSetupError, validate_search_eval_args

        args = trainer.args
        validate_search_eval_args(args)
        if not getattr(trainer, "_vpo_task_data", False):
            raise TrainerSetupError(
                "search_eval_steps needs a vpo task to draw held-out prompts from; this run was given reward_funcs. "
                "Train with task=... (or args.task), or set search_eval_steps: 0"
            )
        acc = trainer.accelerator
        zero3 = getattr(getattr(acc.state, "deepspeed_plugin", None), "zero_stage", None) == 3
        if getattr(trainer, "is_fsdp_enabled", False) or zero3:
            raise TrainerSetupError(
                "search_eval_steps samples from the unwrapped policy on the main process, which FSDP and DeepSpeed "
                "ZeRO-3 shard across processes; set search_eval_steps: 0 and run `vpo eval` on the checkpoints instead"
            )
        self.trainer = trainer
        self.every = int(args.search_eval_steps)
        self.task = trainer.vpo_task
        self.split = args.search_eval_split
        self.examples = load_split(
            self.task,
            self.split,
            args.search_eval_examples,
            args.data_seed_task,
            required=True,
            purpose="run the search evaluation (search_eval_split) on",
        )
        m = trainer.num_answers
        budget = int(args.search_eval_budget)
        self.budget = budget
        self.config = PoolConfig(
            num_answers=m,
            n_rollouts=-(-budget // m),
            temperature=float(args.search_eval_temperature),
            max_new_tokens=int(args.search_eval_max_new_tokens or args.max_completion_length),
            seed=int(args.seed if args.search_eval_seed is None else args.search_eval_seed),
            backend="transformers",
            dedup_answers=args.dedup_answers,
        )
        self.ks = default_ks(budget)
        objectives = list(self.task.objectives)
        self.completion_index = objectives.index("completion") if "completion" in objectives else None
        self.generator = None
        self.history: list[tuple[int, dict]] = []

    # -----------------------------------------------------------------------------------------
    def on_step_end(self, args, state, control, **kwargs):
        step = int(state.global_step)
        if self.every <= 0 or step <= 0 or step % self.every:
            return control
        acc = self.trainer.accelerator
        if acc.is_main_process:
            logs = self.evaluate(step)
            # transformers' Trainer.log, not GRPOTrainer.log: the latter would flush (and clear) the
            # training metrics accumulated since the last logging step into this record. on_log resets
            # should_log, which the training record of this step still needs: keep it as it was.
            should_log = control.should_log
            Trainer.log(self.trainer, dict(logs))
            control.should_log = self.trainer.control.should_log = should_log
        acc.wait_for_everyone()
        return control

    def evaluate(self, step: int) -> dict[str, float]:
        """Sample the held-out prompts with the current policy; the ``search/...`` logs of one evaluation."""
        from vpo.search.backends import TransformersGenerator
        from vpo.search.generate import generate_pool

        t0 = time.perf_counter()
        model = self.trainer.accelerator.unwrap_model(self.trainer.model)
        if self.generator is None:
            self.generator = TransformersGenerator(model, self.trainer.processing_class, self.config)
        else:
            self.generator.model = model
        pool = generate_pool(
            model,
            self.task,
            self.examples,
            tokenizer=self.trainer.processing_class,
            config=self.config,
            generator=self.generator,
            progress=False,
            split=self.split,
        )
        t_gen = time.perf_counter() - t0
        logs = self.pool_logs(pool)
        logs["search/generation_seconds"] = t_gen
        logs["search/seconds"] = time.perf_counter() - t0
        self.history.append((step, dict(logs)))
        return logs

    def pool_logs(self, pool) -> dict[str, float]:
        """The ``search/...`` numbers of an evaluation pool (None/NaN values are left out)."""
        from vpo.search.poolstats import completed_diversity, completed_mask, training_pool_stats
        from vpo.search.pools import evaluate_pool

        res = evaluate_pool(pool, ks=self.ks, seeds=(0,), bootstrap=0, per_prompt=False)
        M = res["metrics"]
        out: dict[str, float | None] = {}
        for i, k in enumerate(M["best_at_k_exact"]["k"]):
            out[f"search/best_at_{k}"] = M["best_at_k_exact"]["mean"][i]
            out[f"search/pass_at_{k}"] = M["pass_at_k"]["mean"][i]
        for key in ("diversity", "pass_at_1", "reward_at_1", "valid_answer_frac", "ew_best_pool", "tokens_per_rollout"):
            out[f"search/{key}"] = M[key]["mean"]
        P, R = pool.num_prompts, self.config.n_rollouts
        pts = pool.rewards.reshape(P, R * pool.m, pool.d)
        done = completed_mask(pool.rewards, pool.valid, self.completion_index).reshape(P, R * pool.m)
        out["search/completed_diversity"] = float(completed_diversity(pts, done).mean())
        out["search/completed_frac"] = float(done.mean())
        for name, val in training_pool_stats(pool.rewards, pool.valid, R, pool.target_weights).items():
            out[f"search/pool/{name}"] = val
        return {k: float(v) for k, v in out.items() if v is not None and math.isfinite(v)}
