"""Set objectives: a score of each rollout's set of answers, then a group normalisation, by name.

VPO, Multi-RLVR and union coverage share one shape: a vectorised function maps the batch's answer
sets to one score per rollout, and the group z-score turns scores into advantages.
:func:`register_set_objective` registers such a function and the estimator of the same name, so it
is usable wherever an estimator name is (``compute_advantages``, ``VPOConfig.estimator`` / ``vpo
train`` YAML, the veRL plugin as ``vpo_<name>``) and is listed by ``vpo estimators``. The library's
``vpo`` and ``multi_rlvr`` estimators are registered here this way; ``union_coverage`` is a third.

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
    _fill_invalid,
    _flat_groups,
    _within_group_position,
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
        if obj.fn is expected_best:  # the diagnostics reuse the batch's filled rewards
            raw = expected_best(b.rewards, b.valid, w, b.index, b.target, filled=b.filled(w.dtype))
        else:
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
    )(_estimator_for(obj))
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


def expected_best(rewards, valid, weights, group_index, target_weights=None, *, filled=None) -> torch.Tensor:
    """VPO's set score ``(1/K) sum_k max_{valid i} w_k^T r_i`` with the group's K weightings,
    computed in ``weights.dtype``. Rollouts are laid out as ``[P, G_max * m, d]`` so one batched
    matmul per group scores all its answers (no per-rollout copy of the weights): a view for
    contiguous equal groups, a scatter into a padded grid otherwise; very uneven group sizes, where
    that padding would cost more than the rows themselves, use a per-rollout gather. ``filled``:
    the rewards with invalid slots already filled (:func:`_fill_invalid`), in ``weights.dtype``."""
    n, m, d = rewards.shape
    p, k = weights.shape[0], weights.shape[1]
    if filled is None:
        filled = _fill_invalid(rewards, valid).to(weights.dtype)  # padding never wins a max
    counts = torch.bincount(group_index, minlength=p)
    gmax = int(counts.max().item())
    if n == p * gmax and torch.equal(group_index, torch.arange(n, device=group_index.device) // gmax):
        s = torch.bmm(filled.view(p, gmax * m, d), weights.transpose(1, 2))  # [P, G*m, K]
        raw = s.view(n, m, k).amax(dim=1).mean(dim=-1)
    elif p * gmax <= 2 * n:
        pos = _within_group_position(group_index, counts)
        grid = torch.zeros(p, gmax, m, d, dtype=filled.dtype, device=filled.device)
        grid[group_index, pos] = filled
        s = torch.bmm(grid.view(p, gmax * m, d), weights.transpose(1, 2)).view(p, gmax, m, k)
        raw = s.amax(dim=2).mean(dim=-1)[group_index, pos]  # [N]
    else:
        raw = torch.bmm(filled, weights[group_index].transpose(1, 2)).amax(dim=1).mean(dim=-1)
    return raw.to(torch.float64)


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
    "vpo",
    expected_best,
    normalization="population",
    uses_weightings=True,
    paper="Bahlous-Boldi et al. 2026, Vector Policy Optimization (arXiv 2605.22817)",
    summary="E_w~Dir(alpha)[max over the rollout's answers of w^T r], K draws shared by the group",
)
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
