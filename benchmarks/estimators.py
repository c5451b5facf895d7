"""The VPO estimator: speed of the vectorised code against a per-group loop, and the noise of the
Monte Carlo set score for the iid and Sobol weight samplers.

    python benchmarks/estimators.py            # tables
    python benchmarks/estimators.py --json     # + one JSON object on the last line

Speed. ``compute_advantages("vpo", ...)`` (validation, per-group draws, set score, z-score and the
diagnostics, i.e. what a trainer calls; default float32 set score, and float64 as a second row)
against two straightforward implementations of docs/method.md §3 that loop over groups:

* ``numpy loop``: for each group draw K Dirichlet weightings with numpy, for each rollout take the
  max over its valid answers of ``w^T r`` and the mean over weightings, then z-score the group with
  the population std (the leanest loop we could write);
* ``torch loop``: the same in the structure of veRL's ``core_algos`` GRPO estimator, which the
  paper's reference implementation patches: per-rollout scores collected into a dict by group id,
  per-group torch Dirichlet draws, mean and std, then a per-rollout normalisation loop.

Batch N = 1024 (128 groups x 8), m = 3, K = 100, d in {4, 16}. All variants alternate within every
repeat so machine noise hits them alike; the table gives medians and ratios of medians. Before
timing, each loop is fed the vectorised sampler's weights and must reproduce its advantages (max
abs difference printed; float32 rounding for the default row).

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
    """docs/method.md §3 as loops. ``rewards [N, m, d]``, ``valid [N, m]``; ``weights [P, K, d]`` to
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


def vpo_loop_torch(rewards: torch.Tensor, valid: torch.Tensor, group_ids: list, k: int, weights=None, eps=1e-6):
    """docs/method.md §3 in the structure of veRL's GRPO estimator (dicts keyed by group id, python loops
    over rollouts, torch ops). ``weights`` maps a group id to ``[K, d]`` to replay given draws."""
    from collections import defaultdict

    n, _, d = rewards.shape
    id2weights: dict = {}
    id2score = defaultdict(list)
    scores = torch.zeros(n, dtype=torch.float64)
    dirichlet = torch.distributions.Dirichlet(torch.ones(d, dtype=torch.float64))
    with torch.no_grad():
        for i in range(n):
            gid = group_ids[i]
            if gid not in id2weights:
                if weights is not None:
                    id2weights[gid] = weights[gid]
                else:  # torch's global RNG, as straightforward code would use (seeded by the caller)
                    id2weights[gid] = dirichlet.sample((k,))
            rows = rewards[i][valid[i]]
            scores[i] = (rows @ id2weights[gid].T).max(dim=0).values.mean() if len(rows) else 0.0
            id2score[gid].append(scores[i])
        id2mean, id2std = {}, {}
        for gid, vals in id2score.items():
            t = torch.stack(vals)
            id2mean[gid] = t.mean()
            id2std[gid] = t.std(unbiased=False)
        for i in range(n):
            gid = group_ids[i]
            if id2std[gid] < eps:
                scores[i] = 0.0
            else:
                scores[i] = (scores[i] - id2mean[gid]) / (id2std[gid] + eps)
    return scores


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
    rewards_t, valid_t = torch.as_tensor(rewards), torch.as_tensor(valid)
    ids = [f"uid-{n // G}" for n in range(N_GROUPS * G)]
    cfgs = {"f32": EstimatorConfig(num_weightings=K), "f64": EstimatorConfig(num_weightings=K, compute_dtype="float64")}
    # correctness first: the loops replay the sampler's weights and must agree
    diffs = {}
    for name, cfg in cfgs.items():
        vec = compute_advantages("vpo", rewards, valid, group_size=G, config=cfg, seed=0).advantages.numpy()
        w = SimplexSampler(K, seed=0).sample(N_GROUPS, d, dtype=cfg.torch_dtype).double()
        diffs[f"numpy_{name}"] = float(np.abs(vpo_loop(rewards, valid, G, K, None, weights=w.numpy()) - vec).max())
        by_id = {f"uid-{p}": w[p] for p in range(N_GROUPS)}
        torch_adv = vpo_loop_torch(rewards_t, valid_t, ids, K, weights=by_id).numpy()
        diffs[f"torch_{name}"] = float(np.abs(torch_adv - vec).max())
    rng = np.random.default_rng(0)
    torch.manual_seed(0)  # the torch loop's Dirichlet draws
    sampler = SimplexSampler(K, seed=1)
    times: dict[str, list[float]] = {k: [] for k in ("f32", "f64", "numpy", "torch", "draw_f32", "draw_numpy")}
    for _ in range(repeats):
        for key, fn in (
            ("f32", lambda: compute_advantages("vpo", rewards, valid, group_size=G, config=cfgs["f32"], sampler=sampler)),
            ("f64", lambda: compute_advantages("vpo", rewards, valid, group_size=G, config=cfgs["f64"], sampler=sampler)),
            ("numpy", lambda: vpo_loop(rewards, valid, G, K, rng)),
            ("torch", lambda: vpo_loop_torch(rewards_t, valid_t, ids, K)),
            ("draw_f32", lambda: sampler.sample(N_GROUPS, d, dtype=torch.float32)),  # the draws alone
            ("draw_numpy", lambda: [rng.dirichlet(np.ones(d), size=K) for _ in range(N_GROUPS)]),
        ):
            t0 = time.perf_counter()
            fn()
            times[key].append(time.perf_counter() - t0)
    med = {k: 1e3 * statistics.median(v) for k, v in times.items()}
    return {
        "vectorised_ms": med["f32"],
        "vectorised_f64_ms": med["f64"],
        "loop_ms": med["numpy"],
        "torch_loop_ms": med["torch"],
        "speedup": med["numpy"] / med["f32"],
        "speedup_f64": med["numpy"] / med["f64"],
        "speedup_torch_loop": med["torch"] / med["f32"],
        "per_repeat_ratio_median": statistics.median(b / a for a, b in zip(times["f32"], times["numpy"])),
        "vectorised_draw_ms": med["draw_f32"],
        "loop_draw_ms": med["draw_numpy"],
        "loop_max_abs_diff": diffs["numpy_f64"],
        "loop_max_abs_diff_f32": max(diffs["numpy_f32"], diffs["torch_f32"]),
        "torch_loop_max_abs_diff": diffs["torch_f64"],
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
        "iid": lambda s: SimplexSampler(K, weight_sampler="iid", seed=s).sample(N_GROUPS, d),
        "sobol": lambda s: SimplexSampler(K, weight_sampler="sobol", seed=s).sample(N_GROUPS, d),
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
    print("\nspeed: compute_advantages('vpo') vs per-group loops (medians, ms)")
    print(
        f"{'d':>3} {'vec f32':>8} {'vec f64':>8} {'numpy loop':>11} {'speedup':>8} {'(f64)':>7} "
        f"{'torch loop':>11} {'speedup':>8} {'draws f32':>10} {'numpy':>7} {'loop check f64/f32':>19}"
    )
    for d in (4, 16):
        s = bench_speed(d, args.repeats)
        print(
            f"{d:>3} {s['vectorised_ms']:>8.2f} {s['vectorised_f64_ms']:>8.2f} {s['loop_ms']:>11.2f} "
            f"{s['speedup']:>7.1f}x {s['speedup_f64']:>6.1f}x {s['torch_loop_ms']:>11.2f} "
            f"{s['speedup_torch_loop']:>7.1f}x {s['vectorised_draw_ms']:>10.2f} {s['loop_draw_ms']:>7.2f} "
            f"{s['loop_max_abs_diff']:>9.1e}/{s['loop_max_abs_diff_f32']:.1e}"
        )
        result[f"vectorised_ms_d{d}"] = s["vectorised_ms"]
        result[f"vectorised_f64_ms_d{d}"] = s["vectorised_f64_ms"]
        result[f"loop_ms_d{d}"] = s["loop_ms"]
        result[f"torch_loop_ms_d{d}"] = s["torch_loop_ms"]
        result[f"speedup_vs_loop_d{d}"] = s["speedup"]
        result[f"speedup_f64_vs_loop_d{d}"] = s["speedup_f64"]
        result[f"speedup_vs_torch_loop_d{d}"] = s["speedup_torch_loop"]
        result[f"per_repeat_speedup_median_d{d}"] = s["per_repeat_ratio_median"]
        result[f"vectorised_draw_ms_d{d}"] = s["vectorised_draw_ms"]
        result[f"loop_draw_ms_d{d}"] = s["loop_draw_ms"]
        result[f"loop_max_abs_diff_d{d}"] = s["loop_max_abs_diff"]
        result[f"loop_max_abs_diff_f32_d{d}"] = s["loop_max_abs_diff_f32"]
    print(
        "(vec: compute_advantages with the default float32 set score / float64; numpy loop: the leanest\n"
        " per-group loop; torch loop: veRL core_algos structure; draws: the K x d weightings of all 128\n"
        " groups alone, vpo sampler in float32 vs numpy per group; loop check: max |advantage difference|\n"
        " of both loops fed the same weights)"
    )

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
        f"\ntargets: speedup >= 10x at d=16 (numpy loop {result['speedup_vs_loop_d16']:.1f}x, "
        f"torch loop {result['speedup_vs_torch_loop_d16']:.1f}x); "
        f"sobol noise ratio <= 0.5 (d=4: {result['sobol_noise_ratio_d4']:.2f}, "
        f"d=16: {result['sobol_noise_ratio_d16']:.2f})"
    )
    if args.json:
        result["threads"] = args.threads
        print(json.dumps({k: (float(f"{v:.4g}") if isinstance(v, float) and math.isfinite(v) else v) for k, v in result.items()}))
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
