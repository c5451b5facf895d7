"""Simplex weightings for the VPO set objective ``E_{w ~ Dir(alpha)}[max_y w^T r(y)]`` (docs/method.md §3).

* ``SimplexSampler``: K weightings per prompt group, ``iid`` Dirichlet(alpha) draws (alpha = 1:
  normalised exponentials; otherwise normalised Gamma draws) or ``sobol``: one Sobol net per call
  with a random digital shift and sub-digit jitter per group, mapped to the simplex by normalised
  exponentials ``w_j = E_j / sum E``, ``E_j = -log(1 - u_j)``, so each point is exactly Dir(1) and the
  estimate unbiased with less noise (alpha = 1 only). The reference implementation's sorted-spacings
  map keeps little of the QMC gain at larger d (docs/estimators.md gives the figures).
* ``fixed_weights``: the one fixed weight set of diagnostics and metrics (the trainer's logged pool
  set score and ``vpo eval``'s E_w metrics), drawn from a generator of its own.

The weighting settings have one name in every config: ``num_weightings``, ``weight_alpha``,
``weight_sampler``, ``weight_seed`` (docs/estimators.md).

Every draw comes from an explicit seeded ``torch.Generator`` (no global RNG); ``state_dict`` /
``load_state_dict`` resume a sampler's exact stream. ``sample(num_groups, d)`` returns
``[num_groups, K, d]`` float64 rows on the simplex (float32 on request).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import torch

from vpo._util import positive_int

SAMPLERS = ("iid", "sobol")
_SOBOL_BITS = 30  # torch's SobolEngine produces 30-bit integers

FIXED_NUM_WEIGHTINGS = 64
"""K of :func:`fixed_weights` unless asked otherwise (``vpo eval --num-weightings``)."""
FIXED_WEIGHT_SEED = 1234
"""Seed of :func:`fixed_weights`: the same draws for every method, run and report."""


@dataclass(frozen=True)
class SamplerSpec:
    """What to draw: ``num_weightings`` (K) points of Dir(``weight_alpha``) via ``weight_sampler``."""

    num_weightings: int = 100
    weight_alpha: float = 1.0
    weight_sampler: str = "iid"

    def __post_init__(self) -> None:
        validate_sampler_args(self.num_weightings, self.weight_alpha, self.weight_sampler)


def validate_sampler_args(num_weightings: int, weight_alpha: float, weight_sampler: str) -> None:
    """Raise ValueError unless K, alpha and the sampler kind form a valid weighting setting."""
    positive_int(num_weightings, "num_weightings (K)", hint="; the paper uses K = 100")
    alpha = weight_alpha
    if not (float(alpha) > 0.0) or alpha != alpha or alpha == float("inf"):
        raise ValueError(f"weight_alpha must be a finite number > 0, got {alpha!r}; the paper uses alpha = 1")
    if weight_sampler not in SAMPLERS:
        raise ValueError(f"unknown weight_sampler {weight_sampler!r}; choose one of {', '.join(SAMPLERS)}")
    if weight_sampler == "sobol" and float(alpha) != 1.0:
        raise ValueError(
            "the sobol sampler maps points to the simplex by normalised exponentials of uniforms, which "
            f"is Dir(1) only; got weight_alpha={alpha}. Use weight_sampler='iid' for alpha != 1"
        )


class SimplexSampler:
    """Seeded sampler of ``K`` simplex weightings per group.

    ``SimplexSampler(num_weightings=K, weight_alpha=alpha, weight_sampler="iid"|"sobol", seed=s)``.

    >>> s = SimplexSampler(num_weightings=4, seed=0)
    >>> w = s.sample(num_groups=2, d=3)
    >>> tuple(w.shape)
    (2, 4, 3)
    """

    def __init__(
        self,
        num_weightings: int = 100,
        weight_alpha: float = 1.0,
        weight_sampler: str = "iid",
        seed: int = 0,
    ) -> None:
        validate_sampler_args(num_weightings, weight_alpha, weight_sampler)
        self.num_weightings = int(num_weightings)
        self.weight_alpha = float(weight_alpha)
        self.weight_sampler = weight_sampler
        self.seed = int(seed)
        self.generator = torch.Generator(device="cpu")
        self.generator.manual_seed(self.seed)
        self._sobol_cache: dict[int, torch.Tensor] = {}

    @classmethod
    def from_spec(cls, spec: SamplerSpec, seed: int = 0) -> "SimplexSampler":
        return cls(spec.num_weightings, spec.weight_alpha, spec.weight_sampler, seed)

    # -- reproducibility -------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {
            "num_weightings": self.num_weightings,
            "weight_alpha": self.weight_alpha,
            "weight_sampler": self.weight_sampler,
            "seed": self.seed,
            "generator_state": self.generator.get_state().clone(),
        }

    def load_state_dict(self, state: dict) -> None:
        """Continue the stream of a saved sampler."""
        for key in ("num_weightings", "weight_alpha", "weight_sampler"):
            saved = state[key]
            if saved != getattr(self, key):
                raise ValueError(
                    f"sampler state was saved with {key}={saved!r} but this sampler has "
                    f"{key}={getattr(self, key)!r}; resume with the same configuration"
                )
        self.seed = int(state["seed"])
        self.generator.set_state(torch.as_tensor(state["generator_state"], dtype=torch.uint8))

    # -- drawing ---------------------------------------------------------------------------
    def sample(
        self, num_groups: int, d: int, num_weightings: int | None = None, dtype: torch.dtype = torch.float64
    ) -> torch.Tensor:
        """Draw ``[num_groups, K, d]`` weightings, one independent set per group.

        ``dtype`` float64 (default) or float32. iid draws are made in that precision (float32
        uniforms are multiples of 2^-24, so exponentials are cut off at 24 ln 2 ~ 16.6: a tail of
        probability 6e-8 per coordinate), which draws a different stream from the same seed; Sobol
        points are always built in float64 and cast."""
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
        k = self.num_weightings if num_weightings is None else int(num_weightings)
        if k < 1:
            raise ValueError(f"num_weightings must be >= 1, got {k}")
        if d < 1:
            raise ValueError(f"the reward dimension d must be >= 1, got {d}")
        if num_groups < 0:
            raise ValueError(f"num_groups must be >= 0, got {num_groups}")
        if d == 1:
            return torch.ones(num_groups, k, 1, dtype=dtype)
        if self.weight_sampler == "iid":
            return dirichlet(num_groups, k, d, self.weight_alpha, self.generator, dtype=dtype)
        return self._sobol(num_groups, k, d).to(dtype)

    def _sobol(self, num_groups: int, k: int, d: int) -> torch.Tensor:
        base = self._sobol_base(k, d)  # [K, d] int64 digits
        shifts = torch.randint(0, 2**_SOBOL_BITS, (num_groups, 1, d), generator=self.generator, dtype=torch.int64)
        ints = torch.bitwise_xor(base.unsqueeze(0), shifts)
        # add a uniform offset below the last digit so points are continuous, not on a 2^-30 grid
        jitter = torch.rand(num_groups, k, d, generator=self.generator, dtype=torch.float64)
        # 1 - u = (2^30 - ints - jitter) / 2^30 lies in (0, 1]: computing it this way (not 1 - u
        # after rounding u) keeps every exponential finite.
        one_minus_u = ((2**_SOBOL_BITS - ints).to(torch.float64) - jitter) / float(2**_SOBOL_BITS)
        e = -torch.log(one_minus_u)
        total = e.sum(dim=-1, keepdim=True)
        # total == 0 needs every coordinate exactly 0 (probability ~2^-53 per coordinate): uniform row
        e = torch.where(total > 0, e, torch.ones_like(e))
        return e / e.sum(dim=-1, keepdim=True)

    def _sobol_base(self, k: int, dim: int) -> torch.Tensor:
        key = k * 10_000 + dim
        if key not in self._sobol_cache:
            engine = torch.quasirandom.SobolEngine(dimension=dim, scramble=False)
            pts = engine.draw(k, dtype=torch.float64)
            self._sobol_cache[key] = torch.round(pts * 2**_SOBOL_BITS).to(torch.int64)
        return self._sobol_cache[key]


_FIXED: dict[tuple[int, int, float, int], torch.Tensor] = {}


def fixed_weights(
    d: int,
    num_weightings: int = FIXED_NUM_WEIGHTINGS,
    weight_alpha: float = 1.0,
    weight_seed: int = FIXED_WEIGHT_SEED,
) -> torch.Tensor:
    """The fixed ``[num_weightings, d]`` float64 weight set of diagnostics and metrics.

    iid Dir(``weight_alpha``) draws from a generator of their own seeded ``weight_seed``: the same
    weightings in every process, for every method and run, and no draw from a training stream. The
    trainer's logged pool set score (``diagnostics["pool_set_score"]`` of
    :func:`vpo.core.compute_advantages`) and ``vpo eval``'s E_w[best@k] / E_w best (pool) both use
    the defaults (K = 64, alpha = 1, seed 1234), so a training log and an eval report score a pool
    with the same weightings. docs/eval.md says why this set (and not a QMC one) is the shared one.
    Returns a new tensor on every call (the cached draw is never handed out).
    """
    d, num_weightings = (
        int(x) if isinstance(x, numbers.Integral) and not isinstance(x, bool) else x for x in (d, num_weightings)
    )
    positive_int(d, "the reward dimension d")
    validate_sampler_args(num_weightings, weight_alpha, "iid")
    key = (d, int(num_weightings), float(weight_alpha), int(weight_seed))
    if key not in _FIXED:
        if d == 1:
            w = torch.ones(num_weightings, 1, dtype=torch.float64)
        else:
            g = torch.Generator().manual_seed(int(weight_seed))
            w = dirichlet(1, int(num_weightings), d, float(weight_alpha), g)[0]
        _FIXED[key] = w
    return _FIXED[key].clone()


def spacings_to_simplex(u: torch.Tensor) -> torch.Tensor:
    """Map uniforms ``[..., d-1]`` to the simplex ``[..., d]`` by the spacings of their sorted values.

    For iid uniform input the output is exactly Dir(1) (uniform on the simplex).
    """
    s, _ = torch.sort(u, dim=-1)
    zeros = torch.zeros(*s.shape[:-1], 1, dtype=s.dtype)
    ones = torch.ones(*s.shape[:-1], 1, dtype=s.dtype)
    edges = torch.cat([zeros, s, ones], dim=-1)
    return edges[..., 1:] - edges[..., :-1]


def dirichlet(
    num_groups: int,
    k: int,
    d: int,
    alpha: float,
    generator: torch.Generator,
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """``[num_groups, k, d]`` iid Dir(alpha) draws from ``generator`` in ``dtype``."""
    shape = (num_groups, k, d)
    if alpha == 1.0:
        # Exp(1) = -log(1 - U): normalised exponentials are uniform on the simplex. torch.rand's
        # draws are multiples of 2^-53 (float64) or 2^-24 (float32), so 1 - U is exact and log
        # (3x faster than log1p on CPU) loses nothing.
        g = torch.rand(shape, generator=generator, dtype=dtype)
        g.neg_().add_(1.0).log_().neg_()  # in place: these tensors are large, allocations cost
    else:
        g = torch._standard_gamma(torch.full(shape, float(alpha), dtype=dtype), generator=generator)
    total = g.sum(dim=-1, keepdim=True)
    # all-zero rows are possible for tiny alpha in float64; fall back to a uniform-random vertex
    bad = total.squeeze(-1) <= 0
    if bool(bad.any()):
        idx = torch.randint(0, d, (int(bad.sum()),), generator=generator)
        g[bad] = torch.nn.functional.one_hot(idx, d).to(g.dtype)
        total = g.sum(dim=-1, keepdim=True)
    return g.div_(total)


def check_simplex(w: torch.Tensor, name: str = "weights", atol: float = 1e-6) -> None:
    """Raise ValueError unless every row of ``w`` (last axis) is on the probability simplex."""
    if not torch.isfinite(w).all():
        raise ValueError(f"{name} contain NaN or inf")
    if (w < -atol).any():
        raise ValueError(f"{name} must be non-negative (on the simplex); min entry is {w.min().item():.3g}")
    sums = w.sum(dim=-1)
    if not torch.allclose(sums, torch.ones_like(sums), atol=atol * max(1, w.shape[-1])):
        worst = sums[(sums - 1).abs().argmax()].item() if sums.ndim else sums.item()
        raise ValueError(
            f"{name} must sum to 1 over the objectives (on the simplex); found a row summing to {worst:.6g}. "
            "Normalise them, e.g. w / w.sum()"
        )
