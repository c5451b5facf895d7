"""vpo's training metrics in veRL: what a run's rewards were made of, and a warning when it has no signal.

veRL 0.9.1 logs the score function's extra keys (the per-answer rewards, the parse counts) only in
*validation* metrics, and the CPU recipe turns validation off: a run whose every advantage was 0 would
finish with exit 0 and nothing said. :func:`install` adds, at every training step of veRL's V1 trainer
(``trainer.use_v1=True``, the default), the same ``vpo/...`` metrics that :class:`vpo.train.VPOTrainer`
logs, computed from the step's rollouts (their ``reward_extra_info`` in veRL's TransferQueue, read
before veRL clears it):

* ``vpo/objective/<name>``: mean reward of each objective over the valid answers;
* ``vpo/parse_failure_rate``: share of rollouts with no parsable answer;
  ``vpo/answers_per_completion``: valid answers per rollout; ``vpo/best_target``: mean best
  ``w*^T r`` of a rollout's answers;
* ``vpo/score``: mean per-rollout score (VPO: the set score), ``vpo/group_std``: mean population std
  of the scores within a group, ``vpo/flat_group_frac``: share of groups whose rollouts all scored
  alike (their advantages are 0), all three over the scored rollouts; ``vpo/unscored_frac``: share of
  rollouts with an answer the task could not score (score NaN; their advantage is 0);
* ``vpo/flat_group_batches``: steps so far in which every group was flat (no gradient from the
  advantage at all), with a ``RuntimeWarning`` in the run's log at the first such step and at most
  once every :data:`WARN_EVERY` steps after.

The metrics are computed only where the step's rollouts were scored by
:func:`vpo.integrations.verl_reward.compute_score` (with vpo's estimators: an unscored rollout's score
is NaN, which only they read as "leave it out").
:mod:`vpo.integrations.verl_plugin` calls :func:`install` on import, which veRL does in every
process; the method is wrapped when veRL's trainer module loads (or at once if it has).
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import re
import sys
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from vpo.core.no_signal import FLAT_EPS, WARN_EVERY, NoSignalWatch, flat_groups
from vpo.integrations.verl_reward import reward_matrix_from_extra

__all__ = ["step_metrics", "SignalWatch", "install", "TRAINER_MODULE", "WARN_EVERY"]

TRAINER_MODULE = "verl.trainer.ppo.v1.trainer_base"
"""The veRL module whose ``PPOTrainer._compute_metrics`` (called once per training step, before the
step's data is cleared) :func:`install` wraps."""

# WARN_EVERY and FLAT_EPS: vpo.core.no_signal's, the rule and cadence VPOTrainer uses too

_R_KEY = re.compile(r"^vpo_r(\d+)_(.+)$")


def step_metrics(infos: Sequence[Any], uids: Sequence[Any], eps: float = FLAT_EPS) -> dict[str, float]:
    """The ``vpo/...`` metrics of one training step from its rollouts' ``reward_extra_info`` dicts (what
    :func:`~vpo.integrations.verl_reward.compute_score` returned) and their group ids; ``{}`` when no
    rollout was scored by vpo."""
    keep = [i for i, info in enumerate(infos) if isinstance(info, Mapping) and "vpo_num_parsed" in info]
    if not keep:
        return {}
    rows = [infos[i] for i in keep]
    groups = [str(uids[i]) for i in keep]
    m = sum(1 for k in rows[0] if re.fullmatch(r"vpo_valid\d+", k))
    objectives = [g[2] for k in rows[0] if (g := _R_KEY.match(k)) and g[1] == "0"]
    columns = {k: [float(r[k]) for r in rows] for k in rows[0] if k.startswith(("vpo_r", "vpo_valid"))}
    rewards, valid = reward_matrix_from_extra(columns, m, objectives)  # [N, m, d], [N, m]
    out: dict[str, float] = {
        "vpo/parse_failure_rate": float(np.mean([float(r["vpo_num_parsed"]) == 0 for r in rows])),
        "vpo/answers_per_completion": float(valid.sum(1).mean()) if m else 0.0,
        "vpo/best_target": float(np.mean([float(r.get("vpo_best_target", np.nan)) for r in rows])),
    }
    for j, name in enumerate(objectives):
        out[f"vpo/objective/{name}"] = float(rewards[..., j][valid].mean()) if valid.any() else float("nan")
    scores = np.array([float(r.get("score", np.nan)) for r in rows])
    out["vpo/unscored_frac"] = float(np.mean([float(r.get("vpo_unscored", 0.0)) > 0 for r in rows]))
    scored = np.isfinite(scores)  # unscored rollouts (score NaN) are out of the statistics, as in the estimator
    if not scored.any():  # nothing to learn from: every advantage is 0
        out["vpo/flat_group_frac"] = 1.0
        return out
    scores, groups = scores[scored], [g for g, k in zip(groups, scored) if k]
    stds = [float(scores[[i for i, x in enumerate(groups) if x == g]].std()) for g in dict.fromkeys(groups)]
    flat = flat_groups(scores, groups, eps)
    out["vpo/score"] = float(scores.mean())
    out["vpo/group_std"] = float(np.mean(stds))
    out["vpo/flat_group_frac"] = float(np.mean(flat))
    return out


class SignalWatch(NoSignalWatch):
    """:class:`vpo.core.no_signal.NoSignalWatch` fed with a step's :func:`step_metrics`, with veRL's
    wording: counts the steps in which every group was flat and warns about them (the first, then at
    most once every :data:`WARN_EVERY` steps), as :class:`vpo.train.VPOTrainer` does."""

    def observe(self, step: int, metrics: dict[str, float]) -> None:  # type: ignore[override]
        """Add ``vpo/flat_group_batches`` to ``metrics`` (the step's :func:`step_metrics`) and warn
        when this step had no learning signal."""
        if "vpo/flat_group_frac" not in metrics:
            return
        why = (
            "no rollout had a parsable answer"
            if metrics.get("vpo/parse_failure_rate", 0.0) >= 1.0
            else "no rollout could be scored: see vpo/unscored_frac and the scorer's warnings"
            if metrics.get("vpo/unscored_frac", 0.0) >= 1.0
            else "the rollouts of each prompt got the same score"
        )

        def message(total: int) -> str:
            return (
                f"vpo (veRL): step {step}: every group is flat ({why}), so every advantage is 0 and this step "
                f"did not change the policy ({total} such step(s) so far; see vpo/flat_group_frac "
                "and vpo/parse_failure_rate in the metrics)"
            )

        total = super().observe(step, metrics["vpo/flat_group_frac"] >= 1.0, message, stacklevel=3)
        metrics["vpo/flat_group_batches"] = float(total)


_WATCH = SignalWatch()


def _rollout_infos(batch) -> tuple[list, list]:
    """The step's non-padding rollouts: their reward_extra_info dicts and group ids, from veRL's
    TransferQueue."""
    import transfer_queue as tq

    data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["uid", "extra_fields"])
    extra = data["extra_fields"]
    extra = extra.tolist() if hasattr(extra, "tolist") else list(extra)
    uid = data["uid"]
    uids = uid.tolist() if hasattr(uid, "tolist") else list(uid)
    padding = [bool(tag.get("is_padding", False)) for tag in batch.tags]
    infos = [(e or {}).get("reward_extra_info", {}) if isinstance(e, Mapping) else {} for e in extra]
    keep = [i for i in range(len(infos)) if not (i < len(padding) and padding[i])]
    return [infos[i] for i in keep], [uids[i] for i in keep]


def _wrap(trainer_cls) -> None:
    original = trainer_cls._compute_metrics
    if getattr(original, "_vpo_wrapped", False):
        return

    def _compute_metrics(self, batch, metrics, timing_raw, global_steps, epoch):
        original(self, batch, metrics, timing_raw, global_steps=global_steps, epoch=epoch)
        try:
            infos, uids = _rollout_infos(batch)
        except Exception as e:  # noqa: BLE001 - a veRL change must not stop training: say it once
            if not getattr(_compute_metrics, "_failed", False):
                _compute_metrics._failed = True
                warnings.warn(
                    f"vpo (veRL): could not read the step's rewards for vpo's metrics: {e!r}",
                    RuntimeWarning,
                    stacklevel=2,
                )
            return
        extra = step_metrics(infos, uids, float(_cfg(self, "vpo_eps", FLAT_EPS)))
        _WATCH.observe(int(global_steps), extra)
        metrics.update(extra)

    _compute_metrics._vpo_wrapped = True  # type: ignore[attr-defined]
    _compute_metrics.__wrapped__ = original  # type: ignore[attr-defined]
    _compute_metrics.__doc__ = original.__doc__
    trainer_cls._compute_metrics = _compute_metrics


def _cfg(trainer, key: str, default: Any) -> Any:
    try:
        value = trainer.config.algorithm.get(key, default)
    except Exception:  # noqa: BLE001 - a struct config without the key
        return default
    return default if value is None else value


class _AfterImport(importlib.abc.MetaPathFinder):
    """Wraps the trainer's method right after veRL's trainer module executes."""

    def find_spec(self, fullname, path, target=None):
        if fullname != TRAINER_MODULE:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        run = loader.exec_module

        def exec_module(module):
            run(module)
            _wrap(module.PPOTrainer)
            if self in sys.meta_path:
                sys.meta_path.remove(self)

        loader.exec_module = exec_module
        return spec


def install() -> bool:
    """Wrap veRL's ``PPOTrainer._compute_metrics`` (now, or when its module is imported); idempotent.
    Returns True when it is wrapped already."""
    module = sys.modules.get(TRAINER_MODULE)
    if module is not None:
        _wrap(module.PPOTrainer)
        return True
    if not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport())
    return False
