"""What the advantage estimators share: their config and result types, the validated batch, the
registry, and the group statistics they are built from.

:func:`vpo.core.estimators.compute_advantages` turns its inputs into a :class:`_Batch` here
(:func:`_prepare`: float64 rewards with invalid and non-finite slots masked, the group layout from
:func:`group_index_from`, w*), looks the estimator up in :data:`ESTIMATORS` and calls it. The
estimators themselves (VPO and every baseline) and the set score live in :mod:`vpo.core.estimators`,
which registers them and re-exports every public name here; import from there.
"""

from __future__ import annotations

import math
from dataclasses import InitVar, asdict, dataclass, field
from typing import Callable, Sequence

import numpy as np
import torch

from vpo._util import positive_int
from vpo.core.weights import SimplexSampler, check_simplex, renamed_setting, validate_sampler_args

_DTYPES = {"float32": torch.float32, "float64": torch.float64}


@dataclass
class EstimatorConfig:
    """Options shared by the estimators; unused fields are ignored by estimators that don't need them.

    The weighting settings have the names of :class:`vpo.train.VPOConfig` and ``vpo train`` YAML
    (``num_weightings``, ``weight_alpha``, ``weight_sampler``, ``invalid_score``, ``strict_rewards``);
    ``alpha``, ``sampler`` and ``strict`` are deprecated names of three of them (a
    ``DeprecationWarning``; giving both names different values is a ``vpo.errors.UserError``)."""

    num_weightings: int = 100
    """K, weightings per group for VPO's Monte Carlo set score (paper: 100)."""
    weight_alpha: float = 1.0
    """Dirichlet concentration of the weightings (paper: 1, uniform on the simplex)."""
    weight_sampler: str = "iid"
    """'iid' Dirichlet draws or 'sobol' scrambled QMC points (reference implementation option)."""
    invalid_score: float = 0.0
    """Scalar given to a rollout with no valid answer (paper: 0). It still counts in group stats."""
    strict_rewards: bool = False
    """Raise on NaN/inf rewards instead of treating that answer as invalid."""
    eps: float = 1e-6
    """Added to the std (or mean, for MaxRL) in the denominators; also VPO's zero-std threshold."""
    max_at_k: int | None = None
    """k of the Max@k objective; None = max(2, G // 2) per group (arXiv 2510.23393)."""
    compute_dtype: str = "float32"
    """Precision of VPO's weights and set score ('float32' or 'float64'); z-scores are float64.
    float32 changes the set score by ~1e-7 relative; 'float64' reproduces float64 references to
    rounding (and draws a different weight stream from the same seed)."""
    alpha: InitVar[float | None] = None
    """Deprecated name of ``weight_alpha``."""
    sampler: InitVar[str | None] = None
    """Deprecated name of ``weight_sampler``."""
    strict: InitVar[bool | None] = None
    """Deprecated name of ``strict_rewards``."""

    def __post_init__(self, alpha: float | None, sampler: str | None, strict: bool | None) -> None:
        self.weight_alpha = renamed_setting("EstimatorConfig", "weight_alpha", self.weight_alpha, 1.0, "alpha", alpha, stacklevel=4)
        self.weight_sampler = renamed_setting("EstimatorConfig", "weight_sampler", self.weight_sampler, "iid", "sampler", sampler, stacklevel=4)
        self.strict_rewards = renamed_setting("EstimatorConfig", "strict_rewards", self.strict_rewards, False, "strict", strict, stacklevel=4)
        validate_sampler_args(self.num_weightings, self.weight_alpha, self.weight_sampler)
        if not math.isfinite(self.invalid_score):
            raise ValueError(f"invalid_score must be finite, got {self.invalid_score!r}")
        if not (self.eps > 0):
            raise ValueError(f"eps must be > 0, got {self.eps!r}")
        positive_int(self.max_at_k, "max_at_k", allow_none=True, hint=" (None: max(2, G // 2))")
        if self.compute_dtype not in _DTYPES:
            raise ValueError(f"compute_dtype must be one of {', '.join(_DTYPES)}, got {self.compute_dtype!r}")

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


EstimatorFn = Callable[[_Batch, EstimatorConfig, SimplexSampler], tuple[torch.Tensor, torch.Tensor, torch.Tensor]]
"""``fn(batch, config, sampler) -> (scores [N], advantages [N], group_std [P])``."""


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
        ESTIMATORS[name] = EstimatorSpec(
            name, fn, multi_answer, uses_sampler, needs_rollout_weights, paper, summary
        )
        return fn

    return deco


def get_estimator(name: str) -> EstimatorSpec:
    try:
        return ESTIMATORS[name]
    except KeyError:
        raise ValueError(
            f"unknown estimator {name!r}; available: {', '.join(sorted(ESTIMATORS))}"
        ) from None


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


def _zscore(x: torch.Tensor, b: _Batch, eps: float, bessel: bool, zero_flat: bool):
    """Group z-score of ``x`` ([N] or [N, d]); returns (z, std per group)."""
    mean = _group_mean(x, b)
    std = _group_std(x, b, mean, bessel)
    z = (x - mean[b.index]) / (std[b.index] + eps)
    if zero_flat:
        z = torch.where(std[b.index] < eps, torch.zeros_like(z), z)
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
        raise ValueError(
            f"every group needs at least 2 rollouts (G >= 2); group #{bad} has {int(counts[bad])}"
        )
    return index, counts


def _prepare(
    rewards,
    valid,
    group_size,
    group_ids,
    target_weights,
    rollout_weights,
    strict: bool,
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
            raise ValueError(
                f"target_weights w* has {t.numel()} entries but the rewards have d={d} objectives"
            )
        check_simplex(t, "target_weights w*")
    rw = None
    if rollout_weights is not None:
        rw = _as_f64(rollout_weights, "rollout_weights").to(r.device)
        if tuple(rw.shape) != (N, d):
            raise ValueError(f"rollout_weights must have shape [N, d] = {(N, d)}; got {tuple(rw.shape)}")
        check_simplex(rw, "rollout_weights")
    index, counts = group_index_from(N, group_size, group_ids, device=r.device)
    return _Batch(r, v, index, counts, t, rw, nonfinite, int(group_size) if group_size is not None else None)


def config_dict(cfg: EstimatorConfig) -> dict:
    return asdict(cfg)
