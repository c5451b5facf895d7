"""The VPO estimator: speed of the vectorised code against a per-group loop, and the noise of the
Monte Carlo set score for the iid and Sobol weight samplers.

    python benchmarks/estimators.py            # tables
    python benchmarks/estimators.py --json     # + one JSON object on the last line

Speed. ``compute_advantages("vpo", ...)`` (validation, per-group draws, set score, z-score and the
diagnostics, i.e. what a trainer calls) against a straightforward implementation of VPO_SPEC §3
with the reference's structure: for each group draw K Dirichlet weightings with numpy, for each
rollout take the max over its valid answers of ``w^T r`` and the mean over weightings, then
z-score the group with the population std. Batch N = 1024 (128 groups x 8), m = 3, K = 100,
d in {4, 16}. The two alternate within every repeat so machine noise hits both alike; the table
gives medians and the ratio of medians. Before timing, the loop is fed the vectorised sampler's
weights and must reproduce its advantages (max abs difference printed).

Noise. The same batch shape with rewards uniform on [0, 1] (and, as a second row, Bernoulli(0.5)
pass/fail rewards). Each sampler estimates every rollout's set score with K = 100 per group, over
``--seeds`` seeds; the noise is the RMS error against a K = 100_000 iid estimate of the same
rollout (whose own error is ~30x below K = 100 iid and is ignored), averaged over rollouts. Rows:

* ``iid``: Dirichlet draws (library default);
* ``sobol``: the library's Sobol sampler (d-dim digital shift + normalised exponentials);
* ``sobol-spacings``: Sobol in d-1 dims mapped by sorted spacings (the reference's map, and
  this library's map before this benchmark), for comparison;
* ``sobol-lms``: torch's own scrambled SobolEngine (linear matrix scramble + shift), one engine
  per group, normalised exponentials: a slower option, for comparison.

Figures are printed, never asserted; the machine may be shared and noisy.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time

import numpy as np
import torch

from vpo.core import EstimatorConfig, SimplexSampler, compute_advantages, set_score
from vpo.core.weights import spacings_to_simplex

N_GROUPS, G, M, K = 128, 8, 3, 100
K_REF = 100_000
BITS = 30


# ---------------------------------------------------------------------------------------------
# the per-group loop (baseline)
# ---------------------------------------------------------------------------------------------


def vpo_loop(rewards: np.ndarray, valid: np.ndarray, group_size: int, k: int, rng, weights=None, eps=1e-6):
    """VPO_SPEC §3 as loops. ``rewards [N, m, d]``, ``valid [N, m]``; ``weights [P, K, d]`` to
    replay given draws, else numpy Dirichlet(1) draws from ``rng`` per group."""
    n, _, d = rewards.shape
    adv = np.zeros(n)
    for p, start in enumerate(range(0, n, group_size)):
        w = weights[p] if weights is not None else rng.dirichlet(np.ones(d), size=k)  # [K, d]
        raw = np.zeros(group_size)
        for g in range(group_size):
            rows = rewards[start + g][valid[start + g]]  # [m_valid, d]
            raw[g] = (rows @ w.T).max(axis=0).mean() if len(rows) else 0.0
        std = raw.std()  # population std
        adv[start : start + group_size] = 0.0 if std < eps else (raw - raw.mean()) / (std + eps)
    return adv


def make_batch(d: int, seed: int, kind: str = "uniform"):
    rng = np.random.default_rng(seed)
    n = N_GROUPS * G
    if kind == "uniform":
        rewards = rng.uniform(size=(n, M, d))
    else:
        rewards = (rng.random((n, M, d)) < 0.5).astype(np.float64)
    valid = rng.random((n, M)) > 0.1
    return rewards, valid


def bench_speed(d: int, repeats: int) -> dict:
    rewards, valid = make_batch(d, seed=d)
    cfg = EstimatorConfig(num_weightings=K)
    # correctness first: the loop replays the sampler's weights and must agree
    vec = compute_advantages("vpo", rewards, valid, group_size=G, config=cfg, seed=0).advantages.numpy()
    w = SimplexSampler(K, seed=0).sample(N_GROUPS, d).numpy()
    diff = float(np.abs(vpo_loop(rewards, valid, G, K, None, weights=w) - vec).max())
    rng = np.random.default_rng(0)
    sampler = SimplexSampler(K, seed=1)
    t_vec, t_loop, t_vec_draw, t_loop_draw = [], [], [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        compute_advantages("vpo", rewards, valid, group_size=G, config=cfg, sampler=sampler)
        t1 = time.perf_counter()
        vpo_loop(rewards, valid, G, K, rng)
        t2 = time.perf_counter()
        sampler.sample(N_GROUPS, d)  # the draws alone, both ways
        t3 = time.perf_counter()
        for _ in range(N_GROUPS):
            rng.dirichlet(np.ones(d), size=K)
        t4 = time.perf_counter()
        t_vec.append(t1 - t0)
        t_loop.append(t2 - t1)
        t_vec_draw.append(t3 - t2)
        t_loop_draw.append(t4 - t3)
    med = lambda xs: 1e3 * statistics.median(xs)  # noqa: E731
    vec_ms, loop_ms = med(t_vec), med(t_loop)
    return {
        "vectorised_ms": vec_ms,
        "loop_ms": loop_ms,
        "speedup": loop_ms / vec_ms,
        "per_repeat_ratio_median": statistics.median(b / a for a, b in zip(t_vec, t_loop)),
        "vectorised_draw_ms": med(t_vec_draw),
        "loop_draw_ms": med(t_loop_draw),
        "loop_max_abs_diff": diff,
    }


# ---------------------------------------------------------------------------------------------
# noise of the set score
# ---------------------------------------------------------------------------------------------


def sobol_spacings(groups: int, k: int, d: int, gen: torch.Generator) -> torch.Tensor:
    """Sobol in d-1 dims, random digital shift + jitter per group, sorted-spacings map."""
    base = torch.quasirandom.SobolEngine(d - 1, scramble=False).draw(k, dtype=torch.float64)
    ints = torch.round(base * 2**BITS).to(torch.int64)
    shift = torch.randint(0, 2**BITS, (groups, 1, d - 1), generator=gen, dtype=torch.int64)
    jitter = torch.rand(groups, k, d - 1, generator=gen, dtype=torch.float64)
    u = (torch.bitwise_xor(ints.unsqueeze(0), shift).to(torch.float64) + jitter) / 2**BITS
    return spacings_to_simplex(u)


def sobol_lms(groups: int, k: int, d: int, gen: torch.Generator) -> torch.Tensor:
    """torch's scrambled Sobol (LMS + digital shift), one engine per group, exponential map."""
    out = []
    for _ in range(groups):
        seed = int(torch.randint(0, 2**62, (1,), generator=gen))
        u = torch.quasirandom.SobolEngine(d, scramble=True, seed=seed).draw(k, dtype=torch.float64)
        u = u + torch.rand(k, d, generator=gen, dtype=torch.float64) / 2**BITS
        e = -torch.log1p(-u.clamp(max=1 - 2**-53))
        out.append(e / e.sum(-1, keepdim=True))
    return torch.stack(out)


def reference_set_score(rewards: torch.Tensor, valid: torch.Tensor, d: int) -> torch.Tensor:
    chunk = 2_000  # K_REF weightings in chunks, to bound memory
    sampler = SimplexSampler(chunk, seed=12345)
    parts = [set_score(rewards, valid, sampler.sample(1, d)[0]) for _ in range(K_REF // chunk)]
    return torch.stack(parts).mean(0)


def bench_noise(d: int, seeds: int, kind: str, lms_seeds: int) -> dict:
    rewards, valid = (torch.as_tensor(x) for x in make_batch(d, seed=100 + d, kind=kind))
    ref = reference_set_score(rewards, valid, d)
    index = torch.arange(N_GROUPS * G) // G
    draws = {
        "iid": lambda s: SimplexSampler(K, kind="iid", seed=s).sample(N_GROUPS, d),
        "sobol": lambda s: SimplexSampler(K, kind="sobol", seed=s).sample(N_GROUPS, d),
        "sobol-spacings": lambda s: sobol_spacings(N_GROUPS, K, d, torch.Generator().manual_seed(s)),
        "sobol-lms": lambda s: sobol_lms(N_GROUPS, K, d, torch.Generator().manual_seed(s)),
    }
    out = {}
    for name, draw in draws.items():
        n_seeds = lms_seeds if name == "sobol-lms" else seeds
        est = torch.stack([set_score(rewards, valid, draw(s)[index]) for s in range(n_seeds)])  # [S, N]
        err = est - ref
        out[name] = {
            "rms": float(err.pow(2).mean().sqrt()),
            "bias": float(err.mean(0).abs().mean()),  # mean |bias| per rollout (MC error of the mean)
            "seeds": n_seeds,
        }
    for name in draws:
        out[name]["ratio_vs_iid"] = out[name]["rms"] / out["iid"]["rms"]
    return out


# ---------------------------------------------------------------------------------------------


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=21, help="timed repeats per d (median reported)")
    ap.add_argument("--seeds", type=int, default=100, help="seeds per sampler for the noise figure")
    ap.add_argument("--lms-seeds", type=int, default=20, help="seeds for the slow sobol-lms row")
    ap.add_argument(
        "--threads", type=int, default=1,
        help="torch intra-op threads (default 1: on a shared 2-core machine more threads only contend)",
    )
    ap.add_argument("--json", action="store_true", help="print one JSON object on the last line")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)

    result: dict = {}
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; N={N_GROUPS * G} ({N_GROUPS} x {G}), m={M}, K={K}")
    print("\nspeed: compute_advantages('vpo') vs per-group numpy loop (medians)")
    print(
        f"{'d':>3} {'vectorised ms':>14} {'loop ms':>9} {'speedup':>8} {'per-repeat':>11} "
        f"{'draws: torch ms':>16} {'numpy ms':>9} {'loop check':>11}"
    )
    for d in (4, 16):
        s = bench_speed(d, args.repeats)
        print(
            f"{d:>3} {s['vectorised_ms']:>14.2f} {s['loop_ms']:>9.2f} {s['speedup']:>7.1f}x "
            f"{s['per_repeat_ratio_median']:>10.1f}x {s['vectorised_draw_ms']:>16.2f} {s['loop_draw_ms']:>9.2f} "
            f"{s['loop_max_abs_diff']:>11.1e}"
        )
        result[f"vectorised_ms_d{d}"] = s["vectorised_ms"]
        result[f"loop_ms_d{d}"] = s["loop_ms"]
        result[f"speedup_vs_loop_d{d}"] = s["speedup"]
        result[f"per_repeat_speedup_median_d{d}"] = s["per_repeat_ratio_median"]
        result[f"vectorised_draw_ms_d{d}"] = s["vectorised_draw_ms"]
        result[f"loop_draw_ms_d{d}"] = s["loop_draw_ms"]
        result[f"loop_max_abs_diff_d{d}"] = s["loop_max_abs_diff"]
    print("(draws: the K x d Dirichlet weightings of all 128 groups alone, torch sampler vs numpy per group)")

    print(f"\nnoise of the K={K} set score: RMS error vs a K={K_REF} estimate (ratio = / iid)")
    print(f"{'rewards':>9} {'d':>3} {'sampler':>15} {'rms':>10} {'ratio':>7} {'|bias|':>9} {'seeds':>6}")
    for kind in ("uniform", "binary"):
        for d in (4, 16):
            noise = bench_noise(d, args.seeds, kind, args.lms_seeds)
            for name, row in noise.items():
                print(
                    f"{kind:>9} {d:>3} {name:>15} {row['rms']:>10.2e} {row['ratio_vs_iid']:>7.3f} "
                    f"{row['bias']:>9.1e} {row['seeds']:>6}"
                )
                key = name.replace("-", "_")
                suffix = "" if kind == "uniform" else "_binary"
                if name == "iid":
                    result[f"iid_noise_d{d}{suffix}"] = row["rms"]
                elif name == "sobol":
                    result[f"sobol_noise_d{d}{suffix}"] = row["rms"]
                    result[f"sobol_noise_ratio_d{d}{suffix}"] = row["ratio_vs_iid"]
                else:
                    result[f"{key}_noise_ratio_d{d}{suffix}"] = row["ratio_vs_iid"]
    print(
        f"\ntargets: speedup >= 10x at d=16 ({result['speedup_vs_loop_d16']:.1f}x); "
        f"sobol noise ratio <= 0.5 (d=4: {result['sobol_noise_ratio_d4']:.2f}, "
        f"d=16: {result['sobol_noise_ratio_d16']:.2f})"
    )
    if args.json:
        result["threads"] = args.threads
        print(json.dumps({k: (float(f"{v:.4g}") if isinstance(v, float) and math.isfinite(v) else v) for k, v in result.items()}))
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
