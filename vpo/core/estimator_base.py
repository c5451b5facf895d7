"""What the advantage estimators share: their config and result types, the validated batch, the
registry, and the group statistics they are built from.

:func:`vpo.core.estimators.compute_advantages` turns its inputs into a :class:`_Batch` here
(:func:`_prepare`: float64 rewards with invalid and non-finite slots masked, the group layout from
:func:`group_index_from`, w*), looks the estimator up in :data:`ESTIMATORS` and calls it. The
estimators themselves (VPO and every baseline) and the set score live in :mod:`vpo.core.estimators`;
set objectives (Multi-RLVR, union coverage, a user's) in :mod:`vpo.core.set_objectives`. Import the
public names from :mod:`vpo.core`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import torch

from vpo._util import positive_int
from vpo.core.weights import check_simplex, validate_sampler_args

_DTYPES = {"float32": torch.float32, "float64": torch.float64}
GDPO_WEIGHTINGS = ("target", "ones")
GDPO_WHITENINGS = ("rollouts", "tokens")
GDPO_PRESETS = {"reference": {"gdpo_weighting": "ones", "gdpo_whitening": "tokens"}}
WEIGHT_SCHEDULES = ("per_step", "per_row")


def resolve_gdpo_options(weighting: str, whitening: str, preset: str | None) -> tuple[str, str]:
    """``(gdpo_weighting, gdpo_whitening)`` after applying ``preset``, checked. A preset overrides
    fields left at their defaults; a field set to another value than the preset's is an error."""
    if preset is not None:
        if preset not in GDPO_PRESETS:
            raise ValueError(f"gdpo_preset must be one of {', '.join(GDPO_PRESETS)} or None, got {preset!r}")
        want = GDPO_PRESETS[preset]
        given = {"gdpo_weighting": (weighting, "target"), "gdpo_whitening": (whitening, "rollouts")}
        for key, (value, default) in given.items():
            if value not in (default, want[key]):
                raise ValueError(
                    f"gdpo_preset={preset!r} sets {key}={want[key]!r}, but {key}={value!r} was given; "
                    "drop one of the two"
                )
        weighting, whitening = want["gdpo_weighting"], want["gdpo_whitening"]
    if weighting not in GDPO_WEIGHTINGS:
        raise ValueError(f"gdpo_weighting must be one of {', '.join(GDPO_WEIGHTINGS)}, got {weighting!r}")
    if whitening not in GDPO_WHITENINGS:
        raise ValueError(f"gdpo_whitening must be one of {', '.join(GDPO_WHITENINGS)}, got {whitening!r}")
    return weighting, whitening


@dataclass
class EstimatorConfig:
    """Options shared by the estimators; unused fields are ignored by estimators that don't need them.

    The weighting settings have the names of :class:`vpo.train.VPOConfig` and ``vpo train`` YAML
    (``num_weightings``, ``weight_alpha``, ``weight_sampler``, ``invalid_score``, ``strict_rewards``)."""

    num_weightings: int = 100
    """K, weightings per group for VPO's Monte Carlo set score (paper: 100)."""
    weight_alpha: float = 1.0
    """Dirichlet concentration of the weightings (paper: 1, uniform on the simplex)."""
    weight_sampler: str = "iid"
    """'iid' Dirichlet draws or 'sobol' scrambled quasi-Monte Carlo points (the lower-noise option of the
    VPO reference implementation; alpha = 1 only)."""
    invalid_score: float = 0.0
    """Scalar given to a rollout with no valid answer (paper: 0). It still counts in group stats."""
    strict_rewards: bool = False
    """Raise on NaN/inf rewards (in training, on scorer exceptions too) instead of counting the answer invalid."""
    eps: float = 1e-6
    """Added to the std (or mean, for MaxRL) in the denominators; also VPO's zero-std threshold."""
    max_at_k: int | None = None
    """k of the Max@k objective; None = max(2, G // 2) per group (arXiv 2510.23393)."""
    compute_dtype: str = "float32"
    """Precision of VPO's weights and set score ('float32' or 'float64'); z-scores are float64.
    float32 changes the set score by ~1e-7 relative; 'float64' reproduces float64 references to
    rounding (and draws a different weight stream from the same seed)."""
    gdpo_weighting: str = "target"
    """GDPO's sum of per-objective z-scores: 'target' weighs objective j by w*_j (default), 'ones'
    sums them with weight 1 (the reference's launcher, which passes no weights)."""
    gdpo_whitening: str = "rollouts"
    """GDPO's batch whitening: 'rollouts' (default: mean and Bessel std over the N rollouts, + eps)
    or 'tokens' (the reference's veRL masked whitening over response tokens: length-weighted mean,
    Bessel over the token count, ``rsqrt(var + 1e-8)``; needs ``response_lengths``)."""
    gdpo_preset: str | None = None
    """'reference' sets ``gdpo_weighting='ones'`` and ``gdpo_whitening='tokens'`` (an explicit
    different value of either is an error); None keeps the two fields as given."""
    weight_schedule: str = "per_step"
    """random_weight: 'per_step' draws each group's w from the sampler at every call (default);
    'per_row' takes each rollout's w from :func:`row_weights` of (seed, row index), the same for
    the whole run (the reference); needs ``row_index`` or ``rollout_weights``."""

    def __post_init__(self) -> None:
        validate_sampler_args(self.num_weightings, self.weight_alpha, self.weight_sampler)
        if not math.isfinite(self.invalid_score):
            raise ValueError(f"invalid_score must be finite, got {self.invalid_score!r}")
        if not (self.eps > 0):
            raise ValueError(f"eps must be > 0, got {self.eps!r}")
        positive_int(self.max_at_k, "max_at_k", allow_none=True, hint=" (None: max(2, G // 2))")
        if self.compute_dtype not in _DTYPES:
            raise ValueError(f"compute_dtype must be one of {', '.join(_DTYPES)}, got {self.compute_dtype!r}")
        self.gdpo_weighting, self.gdpo_whitening = resolve_gdpo_options(
            self.gdpo_weighting, self.gdpo_whitening, self.gdpo_preset
        )
        if self.weight_schedule not in WEIGHT_SCHEDULES:
            raise ValueError(
                f"weight_schedule must be one of {', '.join(WEIGHT_SCHEDULES)}, got {self.weight_schedule!r}"
            )

    @property
    def torch_dtype(self) -> torch.dtype:
        return _DTYPES[self.compute_dtype]


@dataclass
class AdvantageResult:
    """What an estimator returns.

    ``advantages [N]`` float64, ``scores [N]`` float64 (the per-rollout scalar before normalisation:
    the set score for VPO, ``w*^T r`` for GRPO, ...), ``group_index [N]`` int64 (0..P-1) and
    ``diagnostics`` (python floats, plus ``objective_means`` as a list of d floats).
    """

    advantages: torch.Tensor
    scores: torch.Tensor
    group_index: torch.Tensor
    diagnostics: dict = field(default_factory=dict)


@dataclass
class _Batch:
    """Validated, float64 view of the inputs shared by all estimators."""

    rewards: torch.Tensor  # [N, m, d], invalid slots zeroed
    valid: torch.Tensor  # [N, m] bool
    index: torch.Tensor  # [N] int64 group index 0..P-1
    counts: torch.Tensor  # [P] float64 group sizes
    target: torch.Tensor  # [d]
    rollout_weights: torch.Tensor | None  # [N, d] (goal-conditioned / given random weights)
    nonfinite: int
    group_size: int | None = None  # G when groups are contiguous blocks (views instead of scatters)
    response_lengths: torch.Tensor | None = None  # [N] float64 response tokens (GDPO token whitening)
    _filled: dict = field(default_factory=dict, repr=False)

    def filled(self, dtype: torch.dtype) -> torch.Tensor:
        """``rewards`` with invalid slots holding the rollout's first valid answer (see
        :func:`_fill_invalid`), in ``dtype``; computed once per batch (the set score and the
        diagnostics share it)."""
        if dtype not in self._filled:
            self._filled[dtype] = _fill_invalid(self.rewards, self.valid).to(dtype)
        return self._filled[dtype]

    @property
    def num_groups(self) -> int:
        return int(self.counts.shape[0])

    @property
    def d(self) -> int:
        return int(self.rewards.shape[2])

    @property
    def m(self) -> int:
        return int(self.rewards.shape[1])

    def single_answer_scalar(self, weights: torch.Tensor, invalid_score: float) -> torch.Tensor:
        """``w^T r`` of the single answer of each rollout; ``weights`` is [d] or [N, d]."""
        r = self.rewards[:, 0, :]
        s = (r * weights).sum(-1) if weights.ndim == 2 else r @ weights
        return torch.where(self.valid[:, 0], s, torch.full_like(s, invalid_score))


@dataclass(frozen=True)
class EstimatorSpec:
    name: str
    fn: Callable
    multi_answer: bool
    """True when the estimator scores m answers per rollout; False requires m == 1."""
    uses_sampler: bool
    needs_rollout_weights: bool
    paper: str
    summary: str


ESTIMATORS: dict[str, EstimatorSpec] = {}


def register_estimator(
    name: str,
    *,
    multi_answer: bool,
    paper: str,
    summary: str,
    uses_sampler: bool = False,
    needs_rollout_weights: bool = False,
):
    """Register ``fn(batch, config, sampler) -> (scores [N], advantages [N], group_std [P])``."""

    def deco(fn):
        if name in ESTIMATORS:
            raise ValueError(f"estimator {name!r} is already registered")
        ESTIMATORS[name] = EstimatorSpec(name, fn, multi_answer, uses_sampler, needs_rollout_weights, paper, summary)
        return fn

    return deco


def get_estimator(name: str) -> EstimatorSpec:
    try:
        return ESTIMATORS[name]
    except KeyError:
        raise ValueError(f"unknown estimator {name!r}; available: {', '.join(sorted(ESTIMATORS))}") from None


def list_estimators() -> list[str]:
    return sorted(ESTIMATORS)


# ---------------------------------------------------------------------------------------------
# group statistics (scatter based, any group layout)
# ---------------------------------------------------------------------------------------------


def _group_sum(x: torch.Tensor, b: _Batch) -> torch.Tensor:
    out = torch.zeros((b.num_groups,) + tuple(x.shape[1:]), dtype=x.dtype, device=x.device)
    return out.index_add_(0, b.index, x)


def _group_mean(x: torch.Tensor, b: _Batch) -> torch.Tensor:
    counts = b.counts.view(-1, *([1] * (x.ndim - 1)))
    return _group_sum(x, b) / counts


def _group_std(x: torch.Tensor, b: _Batch, mean: torch.Tensor, bessel: bool) -> torch.Tensor:
    dev = x - mean[b.index]
    counts = b.counts.view(-1, *([1] * (x.ndim - 1)))
    denom = counts - 1 if bessel else counts
    return (_group_sum(dev * dev, b) / denom).sqrt()


def _flat_groups(x: torch.Tensor, b: _Batch) -> torch.Tensor:
    """``[P]`` (or ``[P, d]`` for ``x [N, d]``) bool: every value of the group is exactly equal."""
    if b.group_size is not None:
        g = x.view(b.num_groups, b.group_size, *x.shape[1:])
        return g.amax(dim=1) == g.amin(dim=1)
    shape = (b.num_groups,) + tuple(x.shape[1:])
    idx = b.index.view(-1, *([1] * (x.ndim - 1))).expand_as(x)
    hi = torch.empty(shape, dtype=x.dtype, device=x.device).scatter_reduce_(0, idx, x, "amax", include_self=False)
    lo = torch.empty(shape, dtype=x.dtype, device=x.device).scatter_reduce_(0, idx, x, "amin", include_self=False)
    return hi == lo


def _zscore(x: torch.Tensor, b: _Batch, eps: float, bessel: bool, zero_flat: bool, flat: torch.Tensor | None = None):
    """Group z-score of ``x`` ([N] or [N, d]); returns (z, std per group).

    ``zero_flat``: 0 for a group whose std is below ``eps`` (VPO's rule). ``flat`` ([P] or [P, d]
    bool, from :func:`_flat_groups`): 0 for those groups, exactly; the GRPO family passes the groups
    whose scores are all equal, so a float mean's rounding never becomes an advantage."""
    mean = _group_mean(x, b)
    std = _group_std(x, b, mean, bessel)
    z = (x - mean[b.index]) / (std[b.index] + eps)
    if zero_flat:
        z = torch.where(std[b.index] < eps, torch.zeros_like(z), z)
    if flat is not None:
        z = torch.where(flat[b.index], torch.zeros_like(z), z)
    return z, std


# ---------------------------------------------------------------------------------------------
# padding and positions
# ---------------------------------------------------------------------------------------------


def _fill_invalid(rewards: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Copy of ``rewards [N, m, d]`` whose invalid slots hold the rollout's first valid answer.

    A max over all m slots of the result equals the max over the valid answers, for any weights,
    so callers need no -inf mask on the large ``[N, m, K]`` score tensor. Rollouts without a valid
    answer come back unchanged; callers must overwrite their result."""
    first = valid.to(torch.uint8).argmax(dim=1)  # [N], 0 when there is none
    donor = rewards[torch.arange(rewards.shape[0], device=rewards.device), first]  # [N, d]
    return torch.where(valid.unsqueeze(-1), rewards, donor.unsqueeze(1))


def _within_group_position(index: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """Position (0..G_p-1, order of appearance) of each rollout inside its group."""
    order = torch.argsort(index, stable=True)
    starts = (torch.cumsum(counts, 0) - counts).long()
    pos = torch.empty_like(index)
    pos[order] = torch.arange(index.numel(), device=index.device) - starts[index[order]]
    return pos


# ---------------------------------------------------------------------------------------------
# input validation and the public entry point
# ---------------------------------------------------------------------------------------------


def _as_f64(x, name: str) -> torch.Tensor:
    if x is None:
        raise ValueError(f"{name} is required")
    if isinstance(x, torch.Tensor):
        return x.detach().to(torch.float64)
    try:
        return torch.as_tensor(np.asarray(x, dtype=np.float64))
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name} must be a numeric array or tensor: {e}") from None


def group_index_from(
    n: int,
    group_size: int | None = None,
    group_ids: Sequence | torch.Tensor | np.ndarray | None = None,
    device=None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Turn a group layout into ``(index [N] int64 in 0..P-1, counts [P] float64)``.

    Exactly one of ``group_size`` (G consecutive rollouts per group) or ``group_ids`` (one id per
    rollout; ints or strings; groups need not be contiguous) must be given. Every group needs >= 2
    rollouts (a z-score over one rollout is undefined).

    Groups are numbered in order of first appearance, whatever the id type, so group p of the
    contiguous layout and the p-th group to appear under ``group_ids`` get the same index, hence
    the same weight draws (samplers draw one set per index). This makes runs reproducible with
    random ids (veRL's uuid4 uids) as long as the row order is.
    """
    if (group_size is None) == (group_ids is None):
        raise ValueError("give exactly one of group_size (contiguous groups) or group_ids (one id per rollout)")
    if group_size is not None:
        if not isinstance(group_size, (int, np.integer)) or group_size < 2:
            raise ValueError(f"group_size G must be an integer >= 2, got {group_size!r}")
        if n % group_size != 0:
            raise ValueError(
                f"N={n} rollouts is not a multiple of group_size={group_size}; contiguous groups need N = P * G"
            )
        index = torch.arange(n, device=device) // int(group_size)
        counts = torch.full((n // int(group_size),), float(group_size), dtype=torch.float64, device=device)
        return index, counts
    if isinstance(group_ids, torch.Tensor):
        ids = group_ids.detach().reshape(-1).cpu()
        if ids.numel() != n:
            raise ValueError(f"group_ids has {ids.numel()} entries but there are N={n} rollouts")
        arr = ids.numpy()
    else:
        ids = list(group_ids)
        if len(ids) != n:
            raise ValueError(f"group_ids has {len(ids)} entries but there are N={n} rollouts")
        arr = np.asarray(ids)
    if arr.ndim == 1 and arr.dtype.kind in "iu":
        # vectorised first-appearance numbering: rank the sorted unique ids by their first row
        _, first, inv = np.unique(arr, return_index=True, return_inverse=True)
        rank = np.empty(first.shape[0], dtype=np.int64)
        rank[np.argsort(first, kind="stable")] = np.arange(first.shape[0])
        inv = rank[inv.reshape(-1)]
    else:  # strings / uuids / mixed: first-appearance order
        lookup: dict = {}
        seq = ids.tolist() if isinstance(ids, torch.Tensor) else ids
        inv = np.fromiter((lookup.setdefault(g, len(lookup)) for g in seq), dtype=np.int64, count=n)
    index = torch.as_tensor(inv.reshape(-1), dtype=torch.int64)
    index = index.to(device)
    counts = torch.bincount(index).to(torch.float64)
    if bool((counts < 2).any()):
        bad = int(torch.nonzero(counts < 2)[0, 0])
        raise ValueError(f"every group needs at least 2 rollouts (G >= 2); group #{bad} has {int(counts[bad])}")
    return index, counts


def row_weights(seed: int, row_index, d: int, weight_alpha: float = 1.0) -> torch.Tensor:
    """``[N, d]`` float64: the weighting of each training row for a whole run (``weight_schedule=
    'per_row'``): row i gets ``numpy.random.default_rng([seed, i]).dirichlet(weight_alpha * ones(d))``,
    a pure function of (seed, row index), so every step, process and resumed run sees the same w
    for a row. With the run's seed these are the reference's draws (its dataset wrapper seeds one
    generator per row from (data seed, row index))."""
    idx = np.asarray(_as_f64(row_index, "row_index").reshape(-1).cpu().numpy())
    if not np.all(np.isfinite(idx)) or np.any(idx < 0) or np.any(idx != np.round(idx)):
        raise ValueError("row_index must hold non-negative integers (the dataset row of each rollout)")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"the seed of per-row weights must be a non-negative integer, got {seed!r}")
    positive_int(d, "d (objectives)")
    out = np.empty((idx.shape[0], d), dtype=np.float64)
    for n, i in enumerate(idx.astype(np.int64).tolist()):
        out[n] = _row_weight(int(seed), i, int(d), float(weight_alpha))
    return torch.as_tensor(out)


@functools.lru_cache(maxsize=65536)
def _row_weight(seed: int, i: int, d: int, alpha: float) -> tuple[float, ...]:
    if d == 1:
        return (1.0,)
    return tuple(np.random.default_rng([seed, i]).dirichlet(np.full(d, alpha)).tolist())


def _lengths(response_lengths, n: int, device) -> torch.Tensor | None:
    if response_lengths is None:
        return None
    lens = _as_f64(response_lengths, "response_lengths").to(device).reshape(-1)
    if lens.numel() != n:
        raise ValueError(f"response_lengths has {lens.numel()} entries but there are N={n} rollouts")
    if not bool(torch.isfinite(lens).all()) or bool((lens < 0).any()):
        raise ValueError("response_lengths must be finite and >= 0 (response tokens of each rollout)")
    if float(lens.sum()) < 2:
        raise ValueError("response_lengths must sum to at least 2 tokens (a Bessel variance over tokens)")
    return lens


def _prepare(
    rewards,
    valid,
    group_size,
    group_ids,
    target_weights,
    rollout_weights,
    strict: bool,
    response_lengths=None,
) -> _Batch:
    r = _as_f64(rewards, "rewards")
    if r.ndim != 3:
        hint = " (for one answer per rollout of shape [N, d] pass rewards[:, None, :])" if r.ndim == 2 else ""
        raise ValueError(f"rewards must have shape [N, m, d]; got shape {tuple(r.shape)}{hint}")
    N, m, d = r.shape
    if N == 0 or m == 0 or d == 0:
        raise ValueError(f"rewards must be non-empty in every axis; got shape {tuple(r.shape)}")
    if valid is None:
        v = torch.ones(N, m, dtype=torch.bool, device=r.device)
    else:
        v = torch.as_tensor(valid, device=r.device)
        if v.dtype != torch.bool:
            raise ValueError(f"valid must be a boolean mask of shape [N, m]; got dtype {v.dtype}")
        if tuple(v.shape) != (N, m):
            raise ValueError(f"valid must have shape [N, m] = {(N, m)}; got {tuple(v.shape)}")
    finite = torch.isfinite(r).all(-1)
    bad = v & ~finite
    nonfinite = int(bad.sum())
    if nonfinite and strict:
        n_i, m_i = (int(x) for x in torch.nonzero(bad)[0])
        raise ValueError(
            f"rewards contain NaN/inf at rollout {n_i}, answer {m_i} ({nonfinite} answers in all); "
            "fix the scorer, or use strict_rewards=False to count such answers as invalid"
        )
    v = v & finite
    if not bool(v.all()):  # zero the invalid slots (a copy only when there are some)
        r = torch.where(v.unsqueeze(-1), r, torch.zeros((), dtype=r.dtype, device=r.device))
    if target_weights is None:
        t = torch.full((d,), 1.0 / d, dtype=torch.float64, device=r.device)
    else:
        t = _as_f64(target_weights, "target_weights").to(r.device).reshape(-1)
        if t.numel() != d:
            raise ValueError(f"target_weights w* has {t.numel()} entries but the rewards have d={d} objectives")
        check_simplex(t, "target_weights w*")
    rw = None
    if rollout_weights is not None:
        rw = _as_f64(rollout_weights, "rollout_weights").to(r.device)
        if tuple(rw.shape) != (N, d):
            raise ValueError(f"rollout_weights must have shape [N, d] = {(N, d)}; got {tuple(rw.shape)}")
        check_simplex(rw, "rollout_weights")
    index, counts = group_index_from(N, group_size, group_ids, device=r.device)
    return _Batch(
        r,
        v,
        index,
        counts,
        t,
        rw,
        nonfinite,
        int(group_size) if group_size is not None else None,
        _lengths(response_lengths, N, r.device),
    )
