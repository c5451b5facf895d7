"""Confidence intervals over independent replicates evaluated on the same problems.

A comparison of trained methods has two sources of sampling error: the replicates (each an
independent training run: warm start, RL seed, evaluation draws) and the problems they are evaluated
on (a finite draw of mazes or programs from the task's generator). The data are ``values [S, P]``:
S replicates crossed with the same P problems. For the grand mean, under the two-way random-effects
model ``v_sp = mu + a_s + b_p + e_sp``,

    Var(mean) = sigma_a^2 / S + sigma_b^2 / P + sigma_e^2 / (S P).

:func:`replicate_interval` estimates the two terms as ``A = var(replicate means) / S`` and
``B = var(problem means) / P`` (each also carries ``sigma_e^2 / (S P)``, so the sum errs on the wide
side) and takes the half-width ``sqrt(t_{S-1}^2 A + t_{P-1}^2 B)``: each term widened by the Student t
quantile of its own degrees of freedom. When the replicates dominate it is the t interval over the S
replicate means with S - 1 degrees of freedom; when the problems dominate, the t interval over the P
problem means. A Welch-Satterthwaite t on ``A + B`` was tried first and undercovered at S = 3
(92.5 % of 3000 simulated data sets in an exploratory run, not shipped): its estimated degrees of
freedom are too often large when A happens to come out small. ``tests/search/test_intervals.py``
checks the coverage by simulation at S = 3, 5 and 10 with variance components taken from the
shipped demo runs.

The percentile bootstrap that resampled seeds and then mazes (the demo's interval before this
module) undercovers badly at S = 3: a resample of three seeds holds at most three distinct values.

No scipy: the t quantile is computed here (:func:`t_quantile`, checked against scipy in the tests).
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np

__all__ = ["nested_variance_components", "replicate_interval", "t_cdf", "t_quantile"]


def _t_pdf_log_norm(df: float) -> float:
    return math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)


def t_cdf(x: float, df: float) -> float:
    """Student t CDF with ``df > 0`` degrees of freedom (any real df), by Simpson's rule on the
    density from 0 to ``|x|`` (absolute error below 1e-9 for df >= 0.5 and |x| <= 1e3; tests compare with scipy)."""
    if not df > 0:
        raise ValueError(f"degrees of freedom must be > 0, got {df!r}")
    if x == 0:
        return 0.5
    a = abs(float(x))
    # the density falls like |t|^-(df+1): integrate in u = log(1 + t), where it is smooth everywhere
    n = 1024
    umax = math.log1p(a)
    h = umax / n
    u = np.linspace(0.0, umax, n + 1)
    t = np.expm1(u)
    f = np.exp(_t_pdf_log_norm(df) - (df + 1) / 2 * np.log1p(t * t / df)) * (1 + t)
    w = np.ones(n + 1)
    w[1:-1:2], w[2:-1:2] = 4, 2
    half = float(h / 3 * (w * f).sum())
    return 0.5 + half if x > 0 else 0.5 - half


@functools.lru_cache(maxsize=4096)
def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (bisection on :func:`t_cdf`)."""
    if not 0 < p < 1:
        raise ValueError(f"p must be in (0, 1), got {p!r}")
    if p < 0.5:
        return -t_quantile(1 - p, df)
    if p == 0.5:
        return 0.0
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2
        if hi > 1e6:
            raise ValueError(f"t quantile {p} with df={df} is beyond 1e6")
    for _ in range(60):
        mid = (lo + hi) / 2
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def replicate_interval(values, level: float = 0.95) -> dict:
    """Mean and a ``level`` confidence interval of ``values [S, P]`` (replicates x problems).

    NaN entries are ignored (a replicate or problem with none left drops out). Returns ``mean``
    (over every finite value, as the reports always showed it), ``ci_low``, ``ci_high``, ``se``
    (``sqrt(A + B)``), ``df`` (S - 1, the replicate term's; P - 1 with one replicate), ``se_replicates`` (the replicate term alone, ``sqrt(var(replicate means) / S)``),
    ``se_problems`` (``sqrt(var(problem means) / P)``), ``num_replicates`` and ``num_problems``.
    With one replicate the replicate term cannot be estimated: the interval is over problems only,
    conditional on that one trained model, and ``conditional_on_model`` says so.
    """
    v = np.asarray(values, dtype=float)
    if v.ndim != 2:
        raise ValueError(f"values must be [replicates, problems], got shape {v.shape}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    finite = np.isfinite(v)
    nan = float("nan")
    out = {"mean": nan, "ci_low": nan, "ci_high": nan, "se": nan, "df": nan}
    if not finite.any():
        return {**out, "se_replicates": nan, "se_problems": nan, "num_replicates": 0, "num_problems": 0}
    with warnings.catch_warnings():  # an all-NaN replicate or problem: "Mean of empty slice", dropped below
        warnings.simplefilter("ignore", RuntimeWarning)
        rep = np.nanmean(v, axis=1)
        prob = np.nanmean(v, axis=0)
    rep, prob = rep[np.isfinite(rep)], prob[np.isfinite(prob)]
    S, P = len(rep), len(prob)
    out["mean"] = float(v[finite].mean())
    a = float(rep.var(ddof=1)) / S if S > 1 else 0.0
    b = float(prob.var(ddof=1)) / P if P > 1 else 0.0
    se2 = a + b
    res = {
        "se_replicates": math.sqrt(a) if S > 1 else nan,
        "se_problems": math.sqrt(b) if P > 1 else nan,
        "num_replicates": S,
        "num_problems": P,
        "conditional_on_model": S < 2,
    }
    if S < 2 and P < 2:
        return {**out, **res}
    q = 1 - (1 - level) / 2
    half = math.sqrt(
        (t_quantile(q, S - 1) ** 2 * a if S > 1 else 0.0) + (t_quantile(q, P - 1) ** 2 * b if P > 1 else 0.0)
    )
    se = math.sqrt(se2)
    df = S - 1 if S > 1 else P - 1
    return {**out, "ci_low": out["mean"] - half, "ci_high": out["mean"] + half, "se": se, "df": df, **res}


def nested_variance_components(values) -> dict:
    """Method-of-moments variance components of a balanced nested design ``values [W, R, E]``: W
    warm starts, R RL seeds within each warm start, E evaluation draws within each trained model
    (each entry one run's mean over the problems, e.g. a paired difference averaged over mazes).

    Under ``x_wre = mu + a_w + b_wr + c_wre`` with independent zero-mean effects, the mean squares of
    the nested ANOVA give unbiased estimates (negative ones are clipped to 0 and flagged):

        sigma_eval^2 = MS_E,  sigma_seed^2 = (MS_R - MS_E) / E,  sigma_warm^2 = (MS_W - MS_R) / (R E).

    Returns the three components, their sum (the variance of one replicate run: its own warm start,
    seed and draws), each one's share of the sum, the degrees of freedom behind each
    (``W - 1``, ``W (R - 1)``, ``W R (E - 1)``) and ``clipped`` (the components whose estimate came out
    negative). With ``W = 1`` (or R, E = 1) that component is not estimable and is NaN. What a
    replication unit that shares a warm start cannot see is ``sigma_warm^2``: an interval over seeds of
    one warm start estimates ``sigma_seed^2 + sigma_eval^2`` only."""
    x = np.asarray(values, dtype=float)
    if x.ndim != 3 or not np.isfinite(x).all():
        raise ValueError(f"values must be a finite [warm starts, seeds, eval draws] array, got shape {x.shape}")
    W, R, E = x.shape
    nan = float("nan")
    cell = x.mean(axis=2)  # [W, R]
    warm = cell.mean(axis=1)  # [W]
    ms_e = float(((x - cell[..., None]) ** 2).sum() / (W * R * (E - 1))) if E > 1 else nan
    ms_r = float(E * ((cell - warm[:, None]) ** 2).sum() / (W * (R - 1))) if R > 1 else nan
    ms_w = float(R * E * ((warm - warm.mean()) ** 2).sum() / (W - 1)) if W > 1 else nan
    raw = {
        "eval": ms_e,
        "seed": (ms_r - (ms_e if E > 1 else 0.0)) / E if R > 1 else nan,
        "warm_start": (ms_w - (ms_r if R > 1 else 0.0)) / (R * E) if W > 1 else nan,
    }
    clipped = [k for k, v in raw.items() if math.isfinite(v) and v < 0]
    comp = {k: (max(v, 0.0) if math.isfinite(v) else v) for k, v in raw.items()}
    total = sum(v for v in comp.values() if math.isfinite(v))
    return {
        "mean": float(x.mean()),
        "components": comp,
        "total": total,
        "shares": {k: (v / total if total > 0 and math.isfinite(v) else nan) for k, v in comp.items()},
        "df": {"warm_start": W - 1, "seed": W * (R - 1), "eval": W * R * (E - 1)},
        "clipped": clipped,
    }
