"""Set objectives: a score of each rollout's set of answers, then a group normalisation, by name.

VPO, Multi-RLVR and union coverage share one shape: a vectorised function maps the batch's answer
sets to one score per rollout, and the group z-score turns scores into advantages.
:func:`register_set_objective` registers such a function and the estimator of the same name, so it
is usable wherever an estimator name is (``compute_advantages``, ``VPOConfig.estimator`` / ``vpo
train`` YAML, the veRL plugin as ``vpo_<name>``) and is listed by ``vpo estimators``. The library's
``multi_rlvr`` and ``union_coverage`` are registered here this way; ``vpo`` is registered as a set
objective by :mod:`vpo.core.estimators`, with its own estimator :func:`~vpo.core.estimators.vpo_estimator`.

The function's contract: ``fn(rewards [N, m, d] float64 (invalid slots zeroed), valid [N, m] bool,
weights [P, K, d] or None, group_index [N] int64, target_weights [d] float64) -> scores [N]``;
``weights[group_index[n]]`` are rollout n's group's K weightings (drawn only for objectives
registered with ``uses_weightings=True``). Rollouts without a valid answer then get
``invalid_score``. docs/estimators.md "Adding a set objective" has an example.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import torch

from vpo.core.estimator_base import (
    ESTIMATORS,
    EstimatorConfig,
    _Batch,
    _flat_groups,
    _zscore,
    register_estimator,
)
from vpo.core.weights import SimplexSampler

__all__ = [
    "SET_OBJECTIVES",
    "SetObjective",
    "register_set_objective",
    "unregister_set_objective",
    "list_set_objectives",
    "NORMALIZATIONS",
]

SetObjectiveFn = Callable[..., torch.Tensor]
NORMALIZATIONS = ("population", "bessel")
"""'population': ``(s - mean) / (std_pop + eps)``, 0 for a group with ``std_pop < eps`` (VPO's);
'bessel': ``(s - mean) / (std_bessel + eps)``, 0 for a group of equal scores (GRPO's)."""


@dataclass(frozen=True)
class SetObjective:
    name: str
    fn: SetObjectiveFn
    normalization: str
    uses_weightings: bool
    summary: str
    paper: str


SET_OBJECTIVES: dict[str, SetObjective] = {}


def list_set_objectives() -> list[str]:
    return sorted(SET_OBJECTIVES)


def _estimator_for(obj: SetObjective):
    """The registered estimator: draw the weightings (if used), score, normalise within groups."""

    def estimator(b: _Batch, cfg: EstimatorConfig, sampler: SimplexSampler):
        w = None
        if obj.uses_weightings:
            w = sampler.sample(b.num_groups, b.d, dtype=cfg.torch_dtype).to(b.rewards.device)  # [P, K, d]
        raw = obj.fn(b.rewards, b.valid, w, b.index, b.target)
        if not isinstance(raw, torch.Tensor) or tuple(raw.shape) != (b.rewards.shape[0],):
            shape = tuple(raw.shape) if isinstance(raw, torch.Tensor) else type(raw).__name__
            raise ValueError(
                f"set objective {obj.name!r} must return a tensor of shape [N] = ({b.rewards.shape[0]},); got {shape}"
            )
        raw = raw.to(torch.float64)
        raw = torch.where(b.valid.any(1), raw, torch.full_like(raw, cfg.invalid_score))
        if not bool(torch.isfinite(raw).all()):
            raise ValueError(f"set objective {obj.name!r} returned a NaN/inf score for a rollout with a valid answer")
        if obj.normalization == "population":
            adv, std = _zscore(raw, b, cfg.eps, bessel=False, zero_flat=True)
        else:
            adv, std = _zscore(raw, b, cfg.eps, bessel=True, zero_flat=False, flat=_flat_groups(raw, b))
        return raw, adv, std

    estimator.__name__ = f"{obj.name}_set_objective"
    estimator.__doc__ = f"Set objective {obj.name!r} ({obj.summary}), {obj.normalization} group z-score."
    return estimator


def register_set_objective(
    name: str,
    fn: SetObjectiveFn,
    *,
    normalization: str = "population",
    uses_weightings: bool = False,
    summary: str = "",
    paper: str = "user set objective",
    estimator: Callable | None = None,
) -> SetObjectiveFn:
    """Register ``fn`` as the set objective ``name`` and as the estimator ``name``.

    Args:
        name: a new estimator name (letters, digits, underscores; not already an estimator).
        fn: ``fn(rewards, valid, weights, group_index, target_weights) -> scores [N]``, vectorised
            over the batch (see the module docstring for shapes). Return a torch tensor.
        normalization: 'population' (VPO's z-score; default) or 'bessel' (GRPO's).
        uses_weightings: draw each group's K Dirichlet weightings (``num_weightings``,
            ``weight_alpha``, ``weight_sampler``) and pass them as ``weights``; else ``weights=None``.
        summary / paper: shown by ``vpo estimators``.
        estimator: the estimator to register under ``name``, ``fn(batch, config, sampler) ->
            (scores, advantages, group_std)``, when the objective has a hand-written one
            (:func:`vpo.core.estimators.vpo_estimator` for ``vpo``); default: draw the weightings
            if used, score with ``fn``, give ``invalid_score`` to rollouts without a valid answer,
            then the group ``normalization``.

    Returns ``fn`` (usable as a decorator through ``functools.partial``). Raises ``ValueError``
    for a taken or malformed name or an unknown normalization.
    """
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", name):
        raise ValueError(
            f"set objective name must be letters, digits and underscores, starting with a letter; got {name!r}"
        )
    if name in ESTIMATORS:
        raise ValueError(
            f"estimator {name!r} is already registered; pick another name or unregister_set_objective({name!r})"
        )
    if normalization not in NORMALIZATIONS:
        raise ValueError(f"normalization must be one of {', '.join(NORMALIZATIONS)}, got {normalization!r}")
    if not callable(fn):
        raise ValueError(f"set objective {name!r}: fn must be callable, got {type(fn).__name__}")
    obj = SetObjective(name, fn, normalization, bool(uses_weightings), summary or f"set objective {name}", paper)
    register_estimator(
        name,
        multi_answer=True,
        uses_sampler=obj.uses_weightings,
        paper=paper,
        summary=f"set objective: {obj.summary}; {normalization} group z-score",
    )(estimator or _estimator_for(obj))
    SET_OBJECTIVES[name] = obj
    return fn


def unregister_set_objective(name: str) -> None:
    """Remove a set objective and its estimator (a no-op for an unknown name)."""
    if name in SET_OBJECTIVES:
        del SET_OBJECTIVES[name]
        ESTIMATORS.pop(name, None)


# ---------------------------------------------------------------------------------------------
# the library's set objectives
# ---------------------------------------------------------------------------------------------


def sum_of_target(rewards, valid, weights, group_index, target_weights) -> torch.Tensor:
    """Multi-RLVR's score: the sum over valid answers of ``w*^T r`` (invalid slots add 0)."""
    per = rewards @ target_weights  # [N, m]
    return torch.where(valid, per, torch.zeros_like(per)).sum(1)


def union_coverage(rewards, valid, weights, group_index, target_weights) -> torch.Tensor:
    """``sum_j max_{valid i} r_ij``: the best value reached on each objective by some answer, summed
    (the reference's pool statistic of that name, for one rollout's answers)."""
    best = rewards.masked_fill(~valid.unsqueeze(-1), float("-inf")).amax(dim=1)  # [N, d]
    best = torch.where(valid.any(1, keepdim=True), best, torch.zeros_like(best))
    return best.sum(-1)


register_set_objective(
    "multi_rlvr",
    sum_of_target,
    normalization="bessel",
    paper="Puri et al. 2026, Multi-RLVR (arXiv 2603.24844)",
    summary="sum over the m (dedup'd) answers of w*^T r",
)
register_set_objective(
    "union_coverage",
    union_coverage,
    normalization="population",
    paper="the reference's pool statistic as a training signal (vpo)",
    summary="sum over objectives of the best value any valid answer reaches",
)
