"""veRL plugin: registers vpo's advantage estimators with veRL (``verl==0.9.1``).

vpo's ``pyproject.toml`` declares the entry point ``verl.plugins: vpo = vpo.integrations.verl_plugin:register``.
veRL's ``__init__`` *imports* every entry point of that group (``VERL_USE_EXTERNAL_PLUGINS``,
default ``auto``) but does not call it, and swallows import errors at debug level; so this module
registers on import, and :func:`register` is idempotent for explicit use
(``from vpo.integrations.verl_plugin import register; register()``).

Registered names (``algorithm.adv_estimator=...``) and the vpo.core estimator each runs:
``vpo`` (VPO), ``vpo_grpo``, ``vpo_multi_rlvr``, ``vpo_max_at_k``, ``vpo_maxrl``, ``vpo_random_weight``,
``vpo_union_coverage``, and ``vpo_<name>`` for a set objective registered before :func:`register`.

Each estimator is the veRL signature around :func:`vpo.core.compute_advantages`:

* in: ``token_level_rewards [bs, T]`` (the score function's per-rollout scalar at the last response
  token; see :mod:`vpo.integrations.verl_reward` for why the scalar, not the reward matrix, is what
  reaches an estimator in veRL 0.9.1), ``response_mask [bs, T]``, ``index [bs]`` (group uids,
  any order), ``config`` (``algorithm``: reads ``vpo_eps`` and ``vpo_max_at_k`` when present);
* the per-rollout scalar is ``token_level_rewards.sum(-1)`` (as veRL's own GRPO); vpo.core then
  applies the method's group statistics with ``group_ids=index`` (VPO: population std, zero
  advantage for a flat group; GRPO family: Bessel std; Max@k transform; MaxRL mean scaling);
* out: ``(advantages, returns)``, both ``[bs, T]`` = per-rollout advantage x ``response_mask``, in
  the dtype/device of ``token_level_rewards``;
* veRL's synthetic padding rows (a fresh uid, an all-zero response mask) and a prompt left with one
  rollout after its others failed get advantage 0 and leave the other groups' advantages as they
  would be without them (the second with a warning); a batch where every prompt has one rollout
  (``rollout.n=1``) is refused;
* an unscored rollout (score NaN: :func:`vpo.integrations.verl_reward.compute_score` could not score
  one of its answers) gets advantage 0 and is left out of its group's statistics, and a group left
  with one scored rollout gets 0 too (a warning counts them): no false zero is learned from.

Importing this module also wraps veRL's per-step metrics (:mod:`vpo.integrations.verl_metrics`): the
per-objective rewards, parse failures, flat-group share and set-score diagnostics at every training
step, and a warning when a step had no learning signal.

Simplification: one advantage per rollout, broadcast over every response token (the paper's
credit assignment).
"""

from __future__ import annotations

import json
import os
import time
import warnings
from typing import Any

import numpy as np
import torch

from vpo.core.estimators import SET_OBJECTIVES, EstimatorConfig, compute_advantages
from vpo.integrations.verl_metrics import install as install_metrics
from vpo.integrations.verl_reward import DUMP_ENV, core_method, verl_methods

__all__ = ["register", "make_estimator", "REGISTERED"]

REGISTERED: dict[str, Any] = {}
"""veRL name -> the estimator function registered for it (filled by :func:`register`)."""


def _cfg_get(config: Any, key: str, default: Any = None) -> Any:
    if config is None:
        return default
    getter = getattr(config, "get", None)
    if callable(getter):
        try:
            value = getter(key, default)
        except Exception:  # noqa: BLE001 - struct configs raise on unknown keys
            value = default
        return default if value is None else value
    return getattr(config, key, default)


def _scalar_estimator(core: str) -> str:
    """The vpo.core estimator that normalises a veRL batch of per-rollout scalars for ``core``: a
    set objective's score is already the scalar, so only its group normalisation remains ('vpo':
    population std, 0 for std < eps; 'grpo': Bessel std), both the identity on one d = 1 answer."""
    obj = SET_OBJECTIVES.get(core)
    if obj is None:
        return core
    return "vpo" if obj.normalization == "population" else "grpo"


def make_estimator(verl_name: str):
    """The veRL-signature estimator for ``verl_name`` (a key of :func:`verl_methods`)."""
    core_name = _scalar_estimator(core_method(verl_name))

    def estimator(
        token_level_rewards: torch.Tensor,
        response_mask: torch.Tensor,
        index: np.ndarray | None = None,
        config: Any = None,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if index is None:
            raise ValueError(
                f"veRL estimator {verl_name!r} needs the group ids (non_tensor_batch['uid']); "
                "veRL passes them as `index` for group-based estimators"
            )
        if bool(_cfg_get(config, "use_kl_in_reward", False)):
            raise ValueError(
                f"veRL estimator {verl_name!r}: algorithm.use_kl_in_reward=True mixes the KL penalty into "
                "token_level_rewards, so their sum is no longer the rollout's score. VPO uses the KL loss "
                "instead: algorithm.use_kl_in_reward=False actor_rollout_ref.actor.use_kl_loss=True "
                "actor_rollout_ref.actor.kl_loss_coef=0.001 actor_rollout_ref.actor.kl_loss_type=low_var_kl"
            )
        with torch.no_grad():
            scores = token_level_rewards.detach().to(torch.float64).sum(dim=-1)  # [bs]
            cfg = EstimatorConfig(
                num_weightings=1,  # d = 1 here: the set score was taken by the score function
                eps=float(_cfg_get(config, "vpo_eps", 1e-6)),
                max_at_k=_cfg_get(config, "vpo_max_at_k", None),
            )
            ids = [str(i) for i in np.asarray(index, dtype=object).reshape(-1).tolist()]
            per_rollout = _per_rollout_advantages(verl_name, core_name, scores.cpu(), ids, response_mask, cfg)
            adv = per_rollout.to(device=token_level_rewards.device, dtype=token_level_rewards.dtype)
            advantages = adv.unsqueeze(-1) * response_mask.to(token_level_rewards.dtype)
            _dump_batch(verl_name, ids, scores, response_mask, advantages)
        return advantages, advantages

    estimator.__name__ = f"compute_{verl_name}_advantage"
    estimator.__qualname__ = estimator.__name__
    estimator.__doc__ = (
        f"vpo estimator {verl_name!r} (vpo.core {core_name!r}) for veRL: token_level_rewards [bs, T], "
        "response_mask [bs, T], index [bs] -> (advantages, returns) [bs, T]."
    )
    estimator._vpo_name = verl_name  # type: ignore[attr-defined]
    return estimator


def _per_rollout_advantages(verl_name, core_name, scores, ids, response_mask, cfg) -> torch.Tensor:
    """``[bs]`` float64: vpo.core's advantages of the rows :func:`_rows_with_signal` keeps, 0 elsewhere."""
    rows = _scored_rows(verl_name, _rows_with_signal(verl_name, ids, response_mask), scores, ids)
    per_rollout = torch.zeros(len(ids), dtype=torch.float64)
    if not rows:  # a batch of veRL's padding alone, or of unscored rollouts
        return per_rollout
    try:
        res = compute_advantages(
            core_name, scores[rows].view(len(rows), 1, 1), None, group_ids=[ids[i] for i in rows], config=cfg
        )
    except ValueError as e:
        raise ValueError(
            f"veRL estimator {verl_name!r}: {e} (group sizes come from actor_rollout_ref.rollout.n, which must be >= 2)"
        ) from None
    per_rollout[torch.as_tensor(rows, dtype=torch.int64)] = res.advantages.cpu()
    return per_rollout


def _scored_rows(verl_name: str, rows: list[int], scores: torch.Tensor, ids: list[str]) -> list[int]:
    """``rows`` less the unscored rollouts (a non-finite score: the score function could not score
    an answer) and the rollouts of a group left with fewer than 2 scored ones; a warning counts them."""
    finite = torch.isfinite(scores).tolist()
    kept = [i for i in rows if finite[i]]
    if len(kept) == len(rows):
        return rows
    per_group: dict[str, int] = {}
    for i in kept:
        per_group[ids[i]] = per_group.get(ids[i], 0) + 1
    out = [i for i in kept if per_group[ids[i]] >= 2]
    warnings.warn(
        f"veRL estimator {verl_name!r}: {len(rows) - len(kept)} of {len(rows)} rollouts could not be scored "
        f"(score NaN: see the score function's vpo_unscored); they and {len(kept) - len(out)} rollout(s) left "
        "alone in their group get advantage 0 and stay out of the group statistics",
        RuntimeWarning,
        stacklevel=4,
    )
    return out


def _rows_with_signal(verl_name: str, ids: list[str], response_mask: torch.Tensor) -> list[int]:
    """The rows whose advantage the method computes; every other row gets advantage 0.

    Two kinds of group are left out. veRL's synthetic padding (``verl.trainer.ppo.padding_utils``
    appends no-op rows, all under one fresh uid and with an all-zero response mask, when a batch is
    not a multiple of the data-parallel and mini-batch sizes) trains nothing whatever its advantage;
    vpo.core would refuse it as a group of one. And a prompt left with one rollout because its
    siblings failed in the agent loop (veRL's sync replay buffer still trains a failed group's
    surviving rollouts) has no group to compare with: advantage 0, with a warning. veRL 0.9.1's own
    GRPO does otherwise: a group of one gets mean 0 and std 1, so the rollout keeps its raw score
    as its advantage (pushed up whatever its quality when scores are >= 0); 0 is the safer choice
    (docs/verl.md says where vpo's estimators depart from veRL's). A batch in which every real group has one rollout is a configuration error
    (``rollout.n=1``) and is left to vpo.core's refusal."""
    mask_rows = response_mask.detach().reshape(len(ids), -1).ne(0).any(dim=-1).cpu().tolist()
    members: dict[str, list[int]] = {}
    for i, g in enumerate(ids):
        members.setdefault(g, []).append(i)
    real = {g: idx for g, idx in members.items() if any(mask_rows[i] for i in idx)}
    lone = [g for g, idx in real.items() if len(idx) == 1]
    if real and len(lone) == len(real):
        return list(range(len(ids)))  # rollout.n = 1: a batch vpo.core refuses as it is
    if lone:
        warnings.warn(
            f"veRL estimator {verl_name!r}: {len(lone)} of {len(real)} prompts in this batch kept a single "
            "rollout (the others failed in the rollout: see veRL's 'Error in _run_prompt' log lines); "
            "their advantage is 0",
            RuntimeWarning,
            stacklevel=4,
        )
    return sorted(i for g, idx in real.items() if len(idx) > 1 for i in idx)


def _dump_batch(verl_name: str, ids, scores, response_mask, advantages) -> None:
    """With ``VPO_VERL_DUMP_DIR`` set, append what this call saw and returned to
    ``estimator.<pid>.jsonl``: group ids, per-rollout scores, response lengths, and the advantage of
    each rollout as veRL stores it (its value on the first response token)."""
    d = os.environ.get(DUMP_ENV)
    if not d:
        return
    os.makedirs(d, exist_ok=True)
    mask = response_mask.detach().cpu().to(torch.bool)
    adv = advantages.detach().cpu().to(torch.float64)
    first = mask.to(torch.int64).argmax(dim=-1)
    per_rollout = adv.gather(1, first[:, None])[:, 0] * mask.any(dim=-1)
    rec = {
        "method": verl_name,
        "time": time.time(),
        "uid": list(ids),
        "score": scores.detach().cpu().tolist(),
        "response_length": mask.sum(-1).tolist(),
        "advantage": per_rollout.tolist(),
        # the advantage is one number per rollout, broadcast over its response tokens
        "constant_over_tokens": bool(((adv - per_rollout[:, None]).abs() * mask).max() <= 0) if adv.numel() else True,
    }
    with open(os.path.join(d, f"estimator.{os.getpid()}.jsonl"), "a") as f:
        f.write(json.dumps(rec) + "\n")


def register() -> list[str]:
    """Register every vpo estimator with veRL's ``register_adv_est``; returns the names.

    Idempotent: a name already holding a vpo estimator is left as is; a name held by something
    else raises veRL's own error.
    """
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, register_adv_est

    methods = verl_methods()
    for name in methods:
        existing = ADV_ESTIMATOR_REGISTRY.get(name)
        if existing is not None and getattr(existing, "_vpo_name", None) == name:
            REGISTERED[name] = existing
            continue
        fn = REGISTERED.get(name) or make_estimator(name)
        register_adv_est(name)(fn)
        REGISTERED[name] = fn
    return list(methods)


try:  # veRL imports (never calls) entry points: register on import
    register()
except ImportError:  # imported without verl installed: nothing to register into
    pass
else:  # vpo's per-step training metrics and the no-signal warning (vpo.integrations.verl_metrics)
    install_metrics()
