"""Advantage estimators on one reward tensor: VPO and every baseline of docs/method.md §4.

Every estimator reads the same batch (docs/design.md "One data shape"): ``rewards [N, m, d]``,
``valid [N, m]``, the groups (``group_size=G``, TRL's contiguous layout, or ``group_ids [N]``,
veRL's, any order) and the deployment weights ``target_weights [d]`` (``w*``), and returns an
:class:`AdvantageResult`: one advantage per rollout, the scalar it normalised and diagnostics.
Everything is vectorised over groups with scatter/gather ops, no Python loop over groups. Here: the
single-answer estimators and :func:`compute_advantages`; the set objectives (``vpo``,
``multi_rlvr``, ``union_coverage`` and any registered by name) are in :mod:`vpo.core.set_objectives`;
the config, validated batch, registry and group statistics in :mod:`vpo.core.estimator_base`
(all importable from here).

Conventions (docs/estimators.md has them all): padding never wins a max; a rollout without a valid
answer scores ``config.invalid_score`` and still counts in its group; NaN/inf rewards make the
answer invalid (``config.strict_rewards`` raises instead); ``diagnostics["pool_set_score"]`` uses
the fixed weight set :func:`vpo.core.weights.fixed_weights` of ``vpo eval``'s E_w metrics; all is
float64 except VPO's weights and set score, which use ``config.compute_dtype`` (float32 default).
Simplification: one advantage per rollout (no per-token credit), as the paper and its baselines do.
"""

from __future__ import annotations

import contextlib

import math

import torch

from vpo.core.estimator_base import (
    ESTIMATORS,
    AdvantageResult,
    EstimatorConfig,
    EstimatorSpec,
    _as_f64,
    _Batch,
    _fill_invalid,
    _flat_groups,
    _group_mean,
    _group_std,
    _prepare,
    _within_group_position,
    _zscore,
    get_estimator,
    list_estimators,
    register_estimator,
    row_weights,
)
from vpo.core.set_objectives import (  # registers the multi_rlvr and union_coverage set objectives
    SET_OBJECTIVES,
    list_set_objectives,
    register_set_objective,
    unregister_set_objective,
)
from vpo.core.weights import SimplexSampler, fixed_weights

__all__ = [
    "EstimatorConfig",
    "AdvantageResult",
    "EstimatorSpec",
    "ESTIMATORS",
    "get_estimator",
    "list_estimators",
    "compute_advantages",
    "set_score",
    "vpo_estimator",
    "row_weights",
    "SET_OBJECTIVES",
    "register_set_objective",
    "unregister_set_objective",
    "list_set_objectives",
]


# ---------------------------------------------------------------------------------------------
# the set score: one kernel behind VPO, set_score and the diagnostics
# ---------------------------------------------------------------------------------------------


def _best_per_weighting(filled: torch.Tensor, weights: torch.Tensor, group_index=None) -> torch.Tensor:
    """``[N, K]``: ``max_i w_k^T r_{n,i}`` for each rollout n and weighting k, in ``filled.dtype``.

    ``filled [N, m, d]``: rewards whose invalid slots hold a valid answer of the same rollout
    (:func:`_fill_invalid`), so padding never wins the max. ``weights``: ``[K, d]`` shared by every
    rollout (one ``[N*m, d] x [d, K]`` matmul); ``[N, K, d]``, one set per rollout; or ``[P, K, d]``,
    one set per group, with ``group_index [N]``. Per group, rollouts are laid out as
    ``[P, G_max * m, d]`` so one batched matmul scores all the group's answers without copying the
    weights per rollout: a view for contiguous equal groups, a scatter into a padded grid otherwise;
    very uneven group sizes, where that padding would cost more than the rows, use a per-rollout gather."""
    n, m, d = filled.shape
    if weights.ndim == 2:
        return (filled.reshape(n * m, d) @ weights.T).view(n, m, -1).amax(dim=1)
    if group_index is None:
        return torch.bmm(filled, weights.transpose(1, 2)).amax(dim=1)
    p, k = weights.shape[0], weights.shape[1]
    counts = torch.bincount(group_index, minlength=p)
    gmax = int(counts.max().item())
    if n == p * gmax and torch.equal(group_index, torch.arange(n, device=group_index.device) // gmax):
        return torch.bmm(filled.view(p, gmax * m, d), weights.transpose(1, 2)).view(n, m, k).amax(dim=1)
    if p * gmax <= 2 * n:
        pos = _within_group_position(group_index, counts)
        grid = torch.zeros(p, gmax, m, d, dtype=filled.dtype, device=filled.device)
        grid[group_index, pos] = filled
        s = torch.bmm(grid.view(p, gmax * m, d), weights.transpose(1, 2)).view(p, gmax, m, k)
        return s.amax(dim=2)[group_index, pos]
    return torch.bmm(filled, weights[group_index].transpose(1, 2)).amax(dim=1)


def set_score(
    rewards,
    valid=None,
    weights=None,
    *,
    group_index=None,
    invalid_score: float = 0.0,
) -> torch.Tensor:
    """Monte Carlo set score ``(1/K) sum_k max_{valid i} w_k^T r_i`` of each rollout, float64.

    ``rewards [N, m, d]``, ``valid [N, m]`` (default all); ``weights``: ``[K, d]`` shared by all
    rollouts, ``[N, K, d]`` per rollout, or ``[P, K, d]`` per group with ``group_index [N]`` (the
    layout VPO draws). Rollouts without a valid answer get ``invalid_score``.
    """
    r = _as_f64(rewards, "rewards")
    if r.ndim != 3:
        raise ValueError(f"rewards must have shape [N, m, d]; got {tuple(r.shape)}")
    n, m, d = r.shape
    v = torch.ones(r.shape[:2], dtype=torch.bool) if valid is None else torch.as_tensor(valid, dtype=torch.bool)
    v = v.to(r.device)
    if tuple(v.shape) != (n, m):
        raise ValueError(f"valid must have shape [N, m] = {(n, m)}; got {tuple(v.shape)}")
    w = _as_f64(weights, "weights").to(r.device)
    gi = None if group_index is None else torch.as_tensor(group_index, dtype=torch.int64, device=r.device)
    if gi is not None and (tuple(gi.shape) != (n,) or w.ndim != 3 or w.shape[-1] != d or int(gi.max()) >= w.shape[0]):
        raise ValueError(
            f"with group_index [N={n}], weights must have shape [P, K, d={d}] with P > max(group_index); "
            f"got weights {tuple(w.shape)}, group_index {tuple(gi.shape)}"
        )
    if gi is None and (w.ndim not in (2, 3) or w.shape[-1] != d or (w.ndim == 3 and w.shape[0] != n)):
        raise ValueError(f"weights must have shape [K, d] or [N, K, d] with N={n}, d={d}; got {tuple(w.shape)}")
    best = _best_per_weighting(_fill_invalid(r, v), w, gi)
    return torch.where(v.any(dim=1), best.mean(-1), torch.full_like(best[:, 0], invalid_score))


def vpo_estimator(b: _Batch, cfg: EstimatorConfig, sampler: SimplexSampler):
    """VPO (docs/method.md §3). Per group, K weightings ``w_k ~ Dir(alpha)`` shared by its rollouts;
    each rollout's set score is ``raw_n = (1/K) sum_k max_{valid i} w_k^T r_{n,i}`` (``invalid_score``
    without a valid answer); ``A = (raw - mean) / (std + eps)`` with the **population** std (divide
    by G), and A = 0 for the whole group when ``std < eps``."""
    w = sampler.sample(b.num_groups, b.d, dtype=cfg.torch_dtype).to(b.rewards.device)  # [P, K, d]
    best = _best_per_weighting(b.filled(w.dtype), w, b.index)  # [N, K] (filled rewards: padding never wins)
    raw = best.mean(dim=-1).to(torch.float64)
    raw = torch.where(b.valid.any(1), raw, torch.full_like(raw, cfg.invalid_score))
    adv, std = _zscore(raw, b, cfg.eps, bessel=False, zero_flat=True)
    return raw, adv, std


def _expected_best(rewards, valid, weights, group_index, target_weights=None) -> torch.Tensor:
    """The set-objective form of VPO's set score, for ``vpo eval --set-objectives`` and the veRL
    score function (``weights [P, K, d]`` per group)."""
    filled = _fill_invalid(rewards, valid).to(weights.dtype)
    return _best_per_weighting(filled, weights, group_index).mean(dim=-1).to(torch.float64)


# registered as the estimator ``vpo`` and as a set objective (what vpo eval and the veRL score use)
register_set_objective(
    "vpo",
    _expected_best,
    normalization="population",
    uses_weightings=True,
    estimator=vpo_estimator,
    paper="Bahlous-Boldi et al. 2026, Vector Policy Optimization (arXiv 2605.22817)",
    summary="E_w~Dir(alpha)[max over the rollout's answers of w^T r], K draws shared by the group",
)


# ---------------------------------------------------------------------------------------------
# estimators
# ---------------------------------------------------------------------------------------------


@register_estimator(
    "grpo",
    multi_answer=False,
    paper="Shao et al. 2024, DeepSeekMath (GRPO)",
    summary="w*^T r, group z-score (Bessel std)",
)
def grpo_estimator(b: _Batch, cfg: EstimatorConfig, sampler):
    """GRPO: ``s = w*^T r``; ``A = (s - mean) / (std + eps)`` with the Bessel (G - 1) std, as in the
    reference. A group with identical scores gets exactly 0."""
    s = b.single_answer_scalar(b.target, cfg.invalid_score)
    adv, std = _zscore(s, b, cfg.eps, bessel=True, zero_flat=False, flat=_flat_groups(s, b))
    return s, adv, std


@register_estimator(
    "gdpo",
    multi_answer=False,
    paper="Liu et al. 2026, GDPO (arXiv 2601.05242)",
    summary="z-score each objective in the group, weighted sum (w* or ones), whiten over the batch (rollouts or tokens)",
)
def gdpo_estimator(b: _Batch, cfg: EstimatorConfig, sampler):
    """GDPO: per objective j, ``z_j = (r_j - mean_j) / (std_j + eps)`` within the group (Bessel std,
    as TRL's ``normalize_then_sum``; exactly 0 for an objective whose group values are all equal);
    ``s = sum_j c_j z_j`` with ``c = w*`` (``gdpo_weighting='target'``) or ones (``'ones'``, the
    reference's); then the whole batch is whitened: ``'rollouts'``: ``A = (s - mean) / (std + eps)``
    over the N rollouts (Bessel); ``'tokens'``: veRL's masked whitening over response tokens (each
    rollout counts ``L_n = response_lengths[n]`` times: ``mean = sum L s / sum L``,
    ``var = sum L (s - mean)^2 / (sum L - 1)``, ``A = (s - mean) / sqrt(var + 1e-8)``). A rollout
    without a valid answer has ``invalid_score`` on every objective."""
    r = torch.where(b.valid[:, 0:1], b.rewards[:, 0, :], torch.full_like(b.rewards[:, 0, :], cfg.invalid_score))
    z, std = _zscore(r, b, cfg.eps, bessel=True, zero_flat=False, flat=_flat_groups(r, b))
    s = z @ b.target if cfg.gdpo_weighting == "target" else z.sum(-1)
    if cfg.gdpo_whitening == "tokens":
        lens = b.response_lengths
        total = lens.sum()
        mean = (lens * s).sum() / total
        var = (lens * (s - mean) ** 2).sum() / (total - 1)
        adv = (s - mean) * torch.rsqrt(var + 1e-8)
    else:
        adv = (s - s.mean()) / (s.std(unbiased=True) + cfg.eps) if s.numel() > 1 else torch.zeros_like(s)
    return s, adv, std.mean(-1)


@register_estimator(
    "random_weight",
    multi_answer=False,
    uses_sampler=True,
    paper="VPO paper baseline: random-weighting GRPO",
    summary="w^T r with one w ~ Dir(alpha) per prompt (hidden from the model), group z-score",
)
def random_weight_estimator(b: _Batch, cfg: EstimatorConfig, sampler: SimplexSampler):
    """Random-weighting GRPO: ``w ~ Dir(alpha)`` hidden from the model; ``s = w^T r``, GRPO z-score
    (Bessel std). ``weight_schedule='per_step'``: one w per group from the sampler at every call;
    ``'per_row'`` (or any given ``rollout_weights``): each rollout's own w, which compute_advantages
    takes from :func:`row_weights` of (seed, row index) when no ``rollout_weights`` are given."""
    if b.rollout_weights is not None:
        w = b.rollout_weights
    else:
        w = sampler.sample(b.num_groups, b.d, num_weightings=1)[:, 0, :].to(b.rewards.device)[b.index]
    s = b.single_answer_scalar(w, cfg.invalid_score)
    adv, std = _zscore(s, b, cfg.eps, bessel=True, zero_flat=False, flat=_flat_groups(s, b))
    return s, adv, std


@register_estimator(
    "goal_conditioned",
    multi_answer=False,
    needs_rollout_weights=True,
    paper="VPO paper baseline: goal-conditioned GRPO",
    summary="w^T r with the w written into the prompt (rollout_weights), group z-score",
)
def goal_conditioned_estimator(b: _Batch, cfg: EstimatorConfig, sampler):
    """Goal-conditioned GRPO: like ``random_weight`` but ``w`` is the weighting shown to the model in
    its prompt, passed as ``rollout_weights [N, d]``. GRPO z-score (Bessel std)."""
    s = b.single_answer_scalar(b.rollout_weights, cfg.invalid_score)
    adv, std = _zscore(s, b, cfg.eps, bessel=True, zero_flat=False, flat=_flat_groups(s, b))
    return s, adv, std


def log_comb(n, k) -> torch.Tensor:
    """``log C(n, k)`` elementwise (broadcast), ``-inf`` where the binomial is 0 (k < 0 or k > n).

    Tensors keep their dtype and device; anything else (ints, numpy arrays) is computed in float64.
    The one implementation behind Max@k here and the search metrics (:mod:`vpo.search.metrics`).
    """
    n = n if isinstance(n, torch.Tensor) else torch.as_tensor(n, dtype=torch.float64)
    k = k if isinstance(k, torch.Tensor) else torch.as_tensor(k, dtype=torch.float64)
    ok = (k >= 0) & (k <= n)
    n_, k_ = n.clamp(min=0), k.clamp(min=0)
    val = torch.lgamma(n_ + 1) - torch.lgamma(k_ + 1) - torch.lgamma((n_ - k_).clamp(min=0) + 1)
    return torch.where(ok, val, torch.full_like(val, float("-inf")))


def max_at_k_transform(s: torch.Tensor, b: _Batch, k_fixed: int | None) -> torch.Tensor:
    """Per-sample unbiased Max@k reward: rank i (1-based, ascending within its group of n) gets
    ``[C(i-1, k-1) s_i + sum_{j>i} C(j-2, k-2) s_j] / C(n, k)``. Vectorised over groups of any size
    by padding each group to the largest size (pads sort last and carry zero weight). ``s`` is one
    score per rollout ``[N]`` or K columns of them ``[N, K]`` (VPO@k: one per weighting), each column
    transformed on its own; the result has the shape of ``s``, and column j is bit for bit what
    ``s[:, j]`` alone gives."""
    P = b.num_groups
    n = b.counts  # [P]
    gmax = int(n.max().item())
    k = torch.clamp(torch.floor(n / 2), min=2) if k_fixed is None else torch.full_like(n, float(k_fixed))
    if bool((k > n).any()):
        raise ValueError(
            f"max_at_k: k={int(k.max().item())} exceeds the group size {int(n.min().item())}; "
            "use k <= G (default max(2, G // 2))"
        )
    one = s.dim() == 1
    cols = s.unsqueeze(1) if one else s  # [N, K]
    pos = _within_group_position(b.index, n)
    grid = torch.full((P, gmax, cols.shape[1]), float("inf"), dtype=s.dtype, device=s.device)
    grid[b.index, pos] = cols
    sorted_vals, perm = torch.sort(grid, dim=1, stable=True)  # ascending within each group, pads (inf) last
    rank = torch.arange(1, gmax + 1, dtype=s.dtype, device=s.device).expand(P, gmax)  # i
    real = (rank <= n.unsqueeze(1)).unsqueeze(2)
    vals = torch.where(real, sorted_vals, torch.zeros_like(sorted_vals))
    kk = k.unsqueeze(1)
    log_den = log_comb(n.unsqueeze(1), kk)
    # the binomial shares depend on (group, rank) only: computed once, [P, gmax, 1] against K columns
    own = torch.exp(log_comb(rank - 1, kk - 1) - log_den).unsqueeze(2) * vals
    above_coef = torch.exp(log_comb(rank - 2, kk - 2) - log_den).unsqueeze(2)  # coefficient of s_j as "j above i"
    c = torch.where(real, above_coef * vals, torch.zeros_like(vals))
    suffix = torch.flip(torch.cumsum(torch.flip(c, [1]), 1), [1])  # sum_{j>=i}
    above = torch.cat([suffix[:, 1:], torch.zeros_like(suffix[:, :1])], dim=1)  # sum_{j>i}
    eff_sorted = own + above
    eff_grid = torch.empty_like(eff_sorted).scatter_(1, perm, eff_sorted)
    out = eff_grid[b.index, pos]
    return out[:, 0] if one else out


@register_estimator(
    "max_at_k",
    multi_answer=False,
    paper="Max@k policy gradient (arXiv 2510.23393)",
    summary="unbiased per-sample gradient weight of E[max of a k-subset], then GRPO z-score",
)
def max_at_k_estimator(b: _Batch, cfg: EstimatorConfig, sampler):
    """Max@k: ``s = w*^T r``; each rollout's effective reward is its share of the unbiased
    E[max of a random k-subset of the group] (see :func:`max_at_k_transform`, k = ``max_at_k`` or
    max(2, G // 2)); then the GRPO z-score (Bessel std) of the effective rewards."""
    s = b.single_answer_scalar(b.target, cfg.invalid_score)
    eff = max_at_k_transform(s, b, cfg.max_at_k)
    # a flat group is judged on s: the transform's sums of binomial shares round differently per rank
    adv, std = _zscore(eff, b, cfg.eps, bessel=True, zero_flat=False, flat=_flat_groups(s, b))
    return s, adv, std


@register_estimator(
    "vpo_at_k",
    multi_answer=True,
    uses_sampler=True,
    paper="ours: the deployment objective E_w[best of k rollouts under w], w ~ Dir(alpha) (not the paper's estimator)",
    summary="Max@k's unbiased share per weighting of each rollout's set score max_i w^T r_i, averaged over the "
    "group's K weightings, then GRPO z-score",
)
def vpo_at_k_estimator(b: _Batch, cfg: EstimatorConfig, sampler: SimplexSampler):
    """VPO@k: the objective a test-time search that draws k rollouts and keeps the best under a
    preference it does not know, ``E_w[E[max over a random k-subset of rollouts of s_n(w)]]`` with
    ``s_n(w) = max_{valid i} w^T r_{n,i}`` (one answer per rollout: ``w^T r``) and ``w ~ Dir(alpha)``.
    Per group, K weightings shared by its rollouts (as VPO's); for each, :func:`max_at_k_transform`
    gives every rollout its unbiased share of E[max of k] (k = ``max_at_k`` or max(2, G // 2)); the
    shares are averaged over the K weightings and z-scored within the group (Bessel std, as Max@k).
    With one weighting equal to w* and m = 1 it is Max@k to within 1e-9, not bit for bit: where every
    share in a group is equal (k = G), float64 rounding leaves a residue that the std's eps turns
    into up to ~1e-10 (the worst of 3000 random batches). Reported score: the set score
    averaged over the weightings (VPO's raw score)."""
    w = sampler.sample(b.num_groups, b.d, dtype=cfg.torch_dtype).to(b.rewards.device)  # [P, K, d]
    best = _best_per_weighting(b.filled(w.dtype), w, b.index).to(torch.float64)  # [N, K]
    best = torch.where(b.valid.any(1, keepdim=True), best, torch.full_like(best, cfg.invalid_score))
    eff = max_at_k_transform(best, b, cfg.max_at_k).mean(1)  # each weighting's Max@k shares, averaged
    s = best.mean(1)
    flat = _flat_groups(best, b).all(-1)  # every weighting ranks the group's rollouts as equal
    adv, std = _zscore(eff, b, cfg.eps, bessel=True, zero_flat=False, flat=flat)
    return s, adv, std


def vpo_at_k_value(scores, k: int) -> torch.Tensor:
    """The unbiased estimate of ``E[max over a random k-subset]`` of each row of ``scores [..., n]``
    (``sum_i C(i-1, k-1) s_(i) / C(n, k)`` over the ascending order): with ``scores`` a group's
    per-weighting set scores ``[K, n]``, the mean of the result is the group's VPO@k objective."""
    s = torch.sort(torch.as_tensor(scores, dtype=torch.float64), dim=-1).values
    n = s.shape[-1]
    if not 1 <= k <= n:
        raise ValueError(f"k must be in 1..{n}, got {k}")
    total = math.comb(n, k)  # exact binomials: a reporting helper, not the training hot path
    coef = torch.tensor([math.comb(i - 1, k - 1) / total for i in range(1, n + 1)], dtype=torch.float64)
    return (s * coef).sum(-1)


@register_estimator(
    "pareto_niche",
    multi_answer=False,
    paper="ours: a Pareto/niche reading of VPO from a widely shared review of the paper (not the paper's estimator)",
    summary="1/(1 + rollouts dominating it) + a 1/d share of each objective's group best, split among the "
    "rollouts that reach it; GRPO z-score",
)
def pareto_niche_estimator(b: _Batch, cfg: EstimatorConfig, sampler):
    """Pareto/niche advantage, for comparison with VPO (docs/estimators.md). Within a group of
    single-answer rollouts with reward vectors ``x_n``:

    * **front**: ``1 / (1 + D_n)``, ``D_n`` the number of the group's valid rollouts that dominate
      ``x_n`` (at least as good on every objective, better on one): 1 on the group's Pareto front;
    * **niche**: for each objective j on which the group's valid rollouts differ, the rollouts that
      reach the group's best value share ``1/d`` (a specialist alone in its niche gets all of it;
      a mode repeated by many rollouts splits it);
    * ``s_n`` = front + niche (``invalid_score`` without a valid answer); ``A`` = GRPO z-score (Bessel).

    Typically specialists of an objective no one else covers, and front members, are above the
    group mean (A > 0), and dominated answers and crowded modes below it (A < 0); not always, since
    A is relative to the group mean: a front member that reaches no objective's group best can get
    A < 0, and a dominated answer that shares a group best can get A > 0 (docs/estimators.md gives
    both groups)."""
    r, v = b.rewards[:, 0, :], b.valid[:, 0]  # [N, d], [N]
    n_rows, d = r.shape
    P, counts = b.num_groups, b.counts
    gmax = int(counts.max().item())
    pos = _within_group_position(b.index, counts)
    grid = torch.zeros(P, gmax, d, dtype=r.dtype, device=r.device)
    ok = torch.zeros(P, gmax, dtype=torch.bool, device=r.device)
    grid[b.index, pos] = r
    ok[b.index, pos] = v
    xi, xj = grid[:, :, None, :], grid[:, None, :, :]
    dominates = (xj >= xi).all(-1) & (xj > xi).any(-1) & ok[:, None, :]  # [P, i, j]: j dominates i
    front = 1.0 / (1.0 + dominates.sum(-1).to(r.dtype))  # [P, G]
    hi = torch.where(ok[..., None], grid, torch.full_like(grid, float("-inf"))).amax(1, keepdim=True)  # [P, 1, d]
    lo = torch.where(ok[..., None], grid, torch.full_like(grid, float("inf"))).amin(1, keepdim=True)
    best = (grid == hi) & ok[..., None] & (hi > lo)  # [P, G, d]: reaches a varying objective's group best
    share = best.to(r.dtype) / best.sum(1, keepdim=True).clamp(min=1).to(r.dtype)
    niche = share.sum(-1) / d
    s = (front + niche)[b.index, pos]
    s = torch.where(v, s, torch.full_like(s, cfg.invalid_score))
    adv, std = _zscore(s, b, cfg.eps, bessel=True, zero_flat=False, flat=_flat_groups(s, b))
    return s, adv, std


@register_estimator(
    "maxrl",
    multi_answer=False,
    paper="MaxRL (arXiv 2602.02710)",
    summary="(r - mean) / (mean + eps) within the group",
)
def maxrl_estimator(b: _Batch, cfg: EstimatorConfig, sampler):
    """MaxRL: ``s = w*^T r``; ``A = (s - mean) / (mean + eps)`` with the group mean; no std.
    Reported "std" diagnostic is the population std of s."""
    s = b.single_answer_scalar(b.target, cfg.invalid_score)
    mean = _group_mean(s, b)
    adv = (s - mean[b.index]) / (mean[b.index] + cfg.eps)
    adv = torch.where(_flat_groups(s, b)[b.index], torch.zeros_like(adv), adv)  # exactly 0 when flat
    std = _group_std(s, b, mean, bessel=False)
    return s, adv, std


# ---------------------------------------------------------------------------------------------
# the public entry point
# ---------------------------------------------------------------------------------------------


def compute_advantages(
    estimator: str,
    rewards,
    valid=None,
    *,
    group_size: int | None = None,
    group_ids=None,
    target_weights=None,
    rollout_weights=None,
    config: EstimatorConfig | None = None,
    sampler: SimplexSampler | None = None,
    seed: int = 0,
    response_lengths=None,
    row_index=None,
) -> AdvantageResult:
    """Per-rollout advantages of ``estimator`` for a batch of scored rollouts.

    Args:
        estimator: a registered name (``list_estimators()``): vpo, grpo, gdpo, multi_rlvr,
            random_weight, goal_conditioned, max_at_k, maxrl, union_coverage, or a set objective
            added with :func:`register_set_objective`.
        rewards: ``[N, m, d]`` reward vectors (numpy or torch). Single-answer estimators need m = 1.
        valid: ``[N, m]`` bool mask of real answers (default: all).
        group_size / group_ids: the group layout (exactly one).
        target_weights: ``[d]`` the deployment scalarisation w* on the simplex (default uniform).
        rollout_weights: ``[N, d]`` per-rollout weightings (goal-conditioned GRPO; optional for
            random_weight).
        config: :class:`EstimatorConfig` (K, weight_alpha, weight_sampler, invalid_score, eps, ...).
        sampler: the :class:`SimplexSampler` to draw from (a trainer keeps one for the whole run so
            the stream continues across steps and checkpoints); default: a fresh one seeded ``seed``.
        response_lengths: ``[N]`` response tokens per rollout; needed by GDPO with
            ``gdpo_whitening='tokens'``, ignored otherwise.
        row_index: ``[N]`` dataset row of each rollout; random_weight with
            ``weight_schedule='per_row'`` and no ``rollout_weights`` weighs row i with
            ``row_weights(seed, i)``.

    Returns:
        :class:`AdvantageResult` with ``advantages [N]`` float64 and diagnostics.
    """
    with _autocast_off():  # a caller's bf16 autocast would run the weightings' products in bf16
        return _compute_advantages(
            estimator, rewards, valid, group_size, group_ids, target_weights, rollout_weights, config, sampler,
            seed, response_lengths, row_index,
        )  # fmt: skip


@contextlib.contextmanager
def _autocast_off():
    """Autocast off for the estimator's arithmetic on every device where a caller has it on (the
    trainer's bf16 step: the estimator keeps its ``compute_dtype``)."""
    with contextlib.ExitStack() as stack:
        for dev in ("cpu", "cuda"):
            if torch.is_autocast_enabled(dev):
                stack.enter_context(torch.autocast(dev, enabled=False))
        yield


def _compute_advantages(
    estimator, rewards, valid, group_size, group_ids, target_weights, rollout_weights, config, sampler, seed,
    response_lengths, row_index,
) -> AdvantageResult:  # fmt: skip
    spec = get_estimator(estimator)
    cfg = config or EstimatorConfig()
    if estimator == "gdpo" and cfg.gdpo_whitening == "tokens" and response_lengths is None:
        raise ValueError(
            "gdpo with gdpo_whitening='tokens' whitens over response tokens: pass response_lengths [N] "
            "(each rollout's response token count), or use gdpo_whitening='rollouts'"
        )
    if estimator == "random_weight" and cfg.weight_schedule == "per_row" and rollout_weights is None:
        if row_index is None:
            raise ValueError(
                "random_weight with weight_schedule='per_row' needs row_index [N] (each rollout's dataset row) "
                "or rollout_weights [N, d]"
            )
        d = int(_as_f64(rewards, "rewards").shape[-1])
        rollout_weights = row_weights(seed, row_index, d, cfg.weight_alpha)
    b = _prepare(
        rewards,
        valid,
        group_size,
        group_ids,
        target_weights,
        rollout_weights,
        cfg.strict_rewards,
        response_lengths if estimator == "gdpo" and cfg.gdpo_whitening == "tokens" else None,
    )
    if not spec.multi_answer and b.m != 1:
        raise ValueError(
            f"estimator {estimator!r} scores one answer per rollout but rewards have m={b.m} answers; "
            "use m = 1 (rewards[:, :1]) or a multi-answer estimator (vpo, multi_rlvr, a set objective)"
        )
    if spec.needs_rollout_weights and b.rollout_weights is None:
        raise ValueError(f"estimator {estimator!r} needs rollout_weights [N, d]: the w written into each prompt")
    if spec.uses_sampler and sampler is None:
        sampler = SimplexSampler(cfg.num_weightings, cfg.weight_alpha, cfg.weight_sampler, seed=seed)
    scores, adv, std = spec.fn(b, cfg, sampler)
    return AdvantageResult(adv, scores, b.index, _diagnostics(b, scores, std, cfg))


def _diagnostics(b: _Batch, scores: torch.Tensor, std: torch.Tensor, cfg: EstimatorConfig) -> dict:
    dt = cfg.torch_dtype
    w = fixed_weights(b.d).to(device=b.rewards.device, dtype=dt)  # the set vpo eval's E_w metrics use
    best = _best_per_weighting(b.filled(dt), w)  # [N, K]: the weights are shared by every row
    best = best.masked_fill(~b.valid.any(1, keepdim=True), float("-inf"))
    if b.group_size is not None:
        pool = best.view(b.num_groups, b.group_size, -1).amax(dim=1)
    else:
        pool = torch.full((b.num_groups, w.shape[0]), float("-inf"), dtype=best.dtype, device=best.device)
        pool = pool.scatter_reduce(0, b.index.unsqueeze(1).expand_as(best), best, reduce="amax")
    pool = torch.where(torch.isinf(pool), torch.full_like(pool, cfg.invalid_score), pool).to(torch.float64)
    nvalid = b.valid.sum()
    obj = (b.rewards * b.valid.unsqueeze(-1)).sum((0, 1)) / nvalid.clamp(min=1)
    return {
        "score_mean": float(scores.mean()),
        "group_std_mean": float(std.mean()),
        "zero_std_frac": float((std < cfg.eps).double().mean()),
        "pool_set_score": float(pool.mean()),
        "valid_answer_frac": float(b.valid.double().mean()),
        "answers_per_rollout": float(b.valid.sum(1).double().mean()),
        "nonfinite_answers": float(b.nonfinite),
        "objective_means": [float(x) for x in obj],
    }
