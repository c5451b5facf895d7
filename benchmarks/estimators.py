"""The VPO estimator: speed of the vectorised code against a per-group loop, and the noise of the
Monte Carlo set score for the iid and Sobol weight samplers.

    python benchmarks/estimators.py            # tables
    python benchmarks/estimators.py --json     # + one JSON object on the last line
    python benchmarks/estimators.py --quick    # seconds, tiny sizes (CI: does it run)

Speed, like for like. ``compute_advantages("vpo", ...)`` (validation, batched draws, set score,
z-score, diagnostics: what a trainer calls) at float32 and float64 against loops over groups at the
same precision, which draw their weights with the library's sampler, once per group (the draws are
inside their time and also timed alone):

* ``numpy loop``: per rollout the max over valid answers of ``w^T r``, the mean over weightings,
  then the population z-score of the group (the leanest loop we could write);
* ``torch loop``: the same in the structure of veRL's ``core_algos`` GRPO estimator (dicts keyed by
  group id, per-rollout python loop, torch ops);
* ``reference loop``: our re-implementation of the reference implementation's loop structure:
  numpy float64 inputs as a list of per-rollout matrices, one numpy Dirichlet draw per group (its
  draw time is reported separately); compared with the float64 and the float32 vectorised path.

Batch N = 1024 (128 groups x 8), m = 3, K = 100, d in {4, 16}; all variants alternate within every
repeat; medians, ratios of medians, and for the reference ratio the median and IQR of per-repeat
ratios. Before timing, each loop replays the library's weights and must reproduce the vectorised
advantages of its precision (max abs difference printed). ``--quick``: 4 groups, 2 repeats.

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


def alternating_times(fns: dict, repeats: int) -> dict[str, list[float]]:
    """Seconds of each callable in ``fns`` over ``repeats`` rounds, every round calling each one in
    turn (so a slow spell of a shared machine hits all of them alike)."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for key, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[key].append(time.perf_counter() - t0)
    return times


# ---------------------------------------------------------------------------------------------
# the per-group loops (baselines)
# ---------------------------------------------------------------------------------------------


def vpo_loop(rewards: np.ndarray, valid: np.ndarray, group_size: int, weights, eps=1e-6):
    """docs/method.md §3 as a lean loop. ``rewards [N, m, d]``, ``valid [N, m]``; ``weights``:
    ``[P, K, d]`` (given draws) or a callable ``p -> [K, d]`` (one draw per group). Works in the
    dtype of ``rewards`` and ``weights``."""
    n = rewards.shape[0]
    adv = np.zeros(n, dtype=rewards.dtype)
    for p, start in enumerate(range(0, n, group_size)):
        w = weights(p) if callable(weights) else weights[p]  # [K, d]
        raw = np.zeros(group_size, dtype=rewards.dtype)
        for g in range(group_size):
            rows = rewards[start + g][valid[start + g]]  # [m_valid, d]
            raw[g] = (rows @ w.T).max(axis=0).mean() if len(rows) else 0.0
        std = raw.std()  # population std
        adv[start : start + group_size] = 0.0 if std < eps else (raw - raw.mean()) / (std + eps)
    return adv


def vpo_loop_torch(rewards: torch.Tensor, valid: torch.Tensor, group_ids: list, weights, eps=1e-6):
    """docs/method.md §3 in the structure of veRL's GRPO estimator (dicts keyed by group id, python loops
    over rollouts, torch ops, in the dtype of ``rewards``). ``weights``: a dict group id -> ``[K, d]``
    (given draws) or a callable drawing ``[K, d]`` for a new group id."""
    from collections import defaultdict

    n = rewards.shape[0]
    id2weights: dict = {}
    id2score = defaultdict(list)
    scores = torch.zeros(n, dtype=rewards.dtype)
    with torch.no_grad():
        for i in range(n):
            gid = group_ids[i]
            if gid not in id2weights:
                id2weights[gid] = weights(gid) if callable(weights) else weights[gid]
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


def reference_structured_loop(matrices: list, index: list, k: int, rng, weights=None, eps=1e-6):
    """The reference implementation's loop structure, re-implemented: numpy inputs as a list of
    per-rollout reward matrices ``[m_i, d]`` (the valid answers only) and a list of group ids; one
    numpy Dirichlet draw of ``[K, d]`` per group when the group is first seen; per-rollout scores
    collected per group; population mean/std per group; a per-rollout normalisation loop (float64).
    ``weights``: a dict group id -> ``[K, d]`` to replay given draws."""
    d = next(len(r[0]) for r in matrices if len(r))
    id2w: dict = {}
    id2scores: dict = {}
    scores = []
    for r, gid in zip(matrices, index):
        if gid not in id2w:
            id2w[gid] = weights[gid] if weights is not None else rng.dirichlet(np.ones(d), size=k)
        s = float((r @ id2w[gid].T).max(axis=0).mean()) if len(r) else 0.0
        scores.append(s)
        id2scores.setdefault(gid, []).append(s)
    stats = {gid: (float(np.mean(v)), float(np.std(v))) for gid, v in id2scores.items()}
    out = np.zeros(len(scores))
    for i, (s, gid) in enumerate(zip(scores, index)):
        mean, std = stats[gid]
        out[i] = 0.0 if std < eps else (s - mean) / (std + eps)
    return out


def make_batch(d: int, seed: int, kind: str = "uniform"):
    rng = np.random.default_rng(seed)
    n = N_GROUPS * G
    if kind == "uniform":
        rewards = rng.uniform(size=(n, M, d))
    else:
        rewards = (rng.random((n, M, d)) < 0.5).astype(np.float64)
    valid = rng.random((n, M)) > 0.1
    return rewards, valid


PRECISIONS = {"f32": (np.float32, torch.float32), "f64": (np.float64, torch.float64)}


def _check_loops(rewards, valid, ids, cfgs, matrices) -> dict:
    """Correctness first: each loop replays the library sampler's weights (at its precision) and
    must reproduce the vectorised advantages of that precision."""
    diffs = {}
    for prec, (np_dt, t_dt) in PRECISIONS.items():
        vec = (
            compute_advantages("vpo", rewards, valid, group_size=G, config=cfgs[prec], seed=0)
            .advantages.double()
            .numpy()
        )
        w = SimplexSampler(K, seed=0).sample(N_GROUPS, rewards.shape[-1], dtype=t_dt)
        diffs[f"numpy_loop_{prec}"] = float(np.abs(vpo_loop(rewards.astype(np_dt), valid, G, w.numpy()) - vec).max())
        by_id = {f"uid-{p}": w[p] for p in range(N_GROUPS)}
        t_adv = vpo_loop_torch(torch.as_tensor(rewards, dtype=t_dt), torch.as_tensor(valid), ids, by_id)
        diffs[f"torch_loop_{prec}"] = float(np.abs(t_adv.double().numpy() - vec).max())
        if prec == "f64":
            by_id_np = {f"uid-{p}": w[p].numpy() for p in range(N_GROUPS)}
            ref = reference_structured_loop(matrices, ids, K, None, weights=by_id_np)
            diffs["reference_loop"] = float(np.abs(ref - vec).max())
    return diffs


def bench_speed(d: int, repeats: int) -> dict:
    """Medians (ms) of every variant, alternating within each repeat, and ratios at equal precision."""
    rewards, valid = make_batch(d, seed=d)
    ids = [f"uid-{n // G}" for n in range(N_GROUPS * G)]
    cfgs = {"f32": EstimatorConfig(num_weightings=K), "f64": EstimatorConfig(num_weightings=K, compute_dtype="float64")}
    matrices = [rewards[i][valid[i]] for i in range(len(rewards))]  # the reference's input form
    diffs = _check_loops(rewards, valid, ids, cfgs, matrices)
    rng = np.random.default_rng(0)
    sampler = SimplexSampler(K, seed=1)
    fns = {}
    for prec, (np_dt, t_dt) in PRECISIONS.items():
        r_np, r_t, v_t = rewards.astype(np_dt), torch.as_tensor(rewards, dtype=t_dt), torch.as_tensor(valid)

        def draw(_, t_dt=t_dt):  # the library's sampler, one draw per group, as the loops need it
            return sampler.sample(1, d, dtype=t_dt)[0]

        fns[f"vec_{prec}"] = lambda cfg=cfgs[prec]: compute_advantages(
            "vpo", rewards, valid, group_size=G, config=cfg, sampler=sampler
        )
        fns[f"numpy_loop_{prec}"] = lambda r=r_np, draw=draw: vpo_loop(r, valid, G, lambda p: draw(p).numpy())
        fns[f"torch_loop_{prec}"] = lambda r=r_t, v=v_t, draw=draw: vpo_loop_torch(r, v, ids, draw)
        fns[f"draw_per_group_{prec}"] = lambda draw=draw: [draw(p) for p in range(N_GROUPS)]  # loops' draws alone
    fns["reference_loop"] = lambda: reference_structured_loop(matrices, ids, K, rng)
    fns["draw_numpy_per_group"] = lambda: [rng.dirichlet(np.ones(d), size=K) for _ in range(N_GROUPS)]
    fns["draw_batch_f32"] = lambda: sampler.sample(N_GROUPS, d, dtype=torch.float32)  # vectorised path's draws
    times = alternating_times(fns, repeats)
    out = {f"{k}_ms": 1e3 * statistics.median(v) for k, v in times.items()}
    for prec in PRECISIONS:
        for loop in ("numpy_loop", "torch_loop"):
            out[f"speedup_{loop}_{prec}"] = out[f"{loop}_{prec}_ms"] / out[f"vec_{prec}_ms"]
    out["speedup_reference_loop_f64"] = out["reference_loop_ms"] / out["vec_f64_ms"]
    out["speedup_reference_loop_f32"] = out["reference_loop_ms"] / out["vec_f32_ms"]
    ratios = [b / a for a, b in zip(times["vec_f64"], times["reference_loop"])]
    out["per_repeat_speedup_reference_f64_median"] = statistics.median(ratios)
    out["per_repeat_speedup_reference_f64_iqr"] = _iqr(ratios)
    out.update({f"max_abs_diff_{k}": v for k, v in diffs.items()})
    return out


def bench_vpo_at_k(repeats: int) -> dict:
    """VPO@k's per-weighting Max@k shares: one :func:`max_at_k_transform` call on the ``[N, K]`` set
    scores against the former loop over the K weightings (one call per column, stacked), on the same
    tensor, alternating; and the whole ``compute_advantages('vpo_at_k')`` for scale."""
    from vpo.core.estimators import _best_per_weighting, _prepare, max_at_k_transform

    rewards, valid = make_batch(4, seed=4)
    b = _prepare(rewards, valid, G, None, None, None, False, None)
    w = SimplexSampler(K, seed=1).sample(b.num_groups, b.d, dtype=torch.float64)
    best = _best_per_weighting(b.filled(torch.float64), w, b.index).to(torch.float64)  # [N, K]
    cfg = EstimatorConfig(num_weightings=K, compute_dtype="float64")
    fns = {
        "vec": lambda: max_at_k_transform(best, b, None),
        "loop": lambda: torch.stack([max_at_k_transform(best[:, j], b, None) for j in range(K)], 1),
        "estimator": lambda: compute_advantages("vpo_at_k", rewards, valid, group_size=G, config=cfg, seed=1),
    }
    times = alternating_times(fns, repeats)
    med = {k: 1e3 * statistics.median(v) for k, v in times.items()}
    return {
        "vpo_at_k_shares_vec_ms": med["vec"],
        "vpo_at_k_shares_loop_ms": med["loop"],
        "speedup_vpo_at_k_shares": med["loop"] / med["vec"],
        "vpo_at_k_estimator_ms": med["estimator"],
        "vpo_at_k_shares_identical": bool(torch.equal(fns["vec"](), fns["loop"]())),
    }


def _iqr(xs: list[float]) -> list[float]:
    if len(xs) < 2:
        return [xs[0], xs[0]]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return [q[0], q[2]]


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
    global N_GROUPS, K_REF
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=21, help="timed repeats per d (median reported)")
    ap.add_argument("--seeds", type=int, default=100, help="seeds per sampler for the noise figure")
    ap.add_argument("--lms-seeds", type=int, default=20, help="seeds for the slow sobol-lms row")
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch intra-op threads (default 1: on a shared 2-core machine more threads only contend)",
    )
    ap.add_argument(
        "--quick", action="store_true", help="tiny sizes (seconds): checks the script runs, figures meaningless"
    )
    ap.add_argument("--json", action="store_true", help="print one JSON object on the last line")
    args = ap.parse_args(argv)
    if args.quick:
        N_GROUPS, K_REF = 4, 2_000
        args.repeats, args.seeds, args.lms_seeds = 2, 2, 1
    torch.set_num_threads(args.threads)

    result: dict = {}
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; N={N_GROUPS * G} ({N_GROUPS} x {G}), m={M}, K={K}"
        f"; medians of {args.repeats} repeats{' (--quick)' if args.quick else ''}"
    )
    rows = _speed_table(args.repeats, result)
    _reference_table(rows, result)

    v = bench_vpo_at_k(args.repeats)
    result.update(v)
    print(
        f"\nVPO@k's Max@k shares for K={K} weightings (float64, N={N_GROUPS * G}): one call "
        f"{v['vpo_at_k_shares_vec_ms']:.2f} ms vs the former loop over the weightings "
        f"{v['vpo_at_k_shares_loop_ms']:.2f} ms ({v['speedup_vpo_at_k_shares']:.1f}x; identical: "
        f"{v['vpo_at_k_shares_identical']}); the whole compute_advantages('vpo_at_k') {v['vpo_at_k_estimator_ms']:.2f} ms"
    )

    _noise_table(args.seeds, args.lms_seeds, result)
    print(
        f"\ntargets: speedup >= 10x at d=16 vs the reference's loop structure (f64 {result['speedup_reference_loop_f64_d16']:.1f}x, "
        f"f32 {result['speedup_reference_loop_f32_d16']:.1f}x); "
        f"sobol noise ratio <= 0.5 (d=4: {result['sobol_noise_ratio_d4']:.2f}, "
        f"d=16: {result['sobol_noise_ratio_d16']:.2f})"
    )
    if args.json:
        result["threads"] = args.threads
        result["quick"] = args.quick
        print(json.dumps({k: _round(v) for k, v in result.items()}))
    return result


def _speed_table(repeats: int, result: dict) -> dict:
    """Time compute_advantages against the per-group loops at d = 4 and 16 and print the table; returns the
    measurements by d (their figures also go into ``result``)."""
    print(
        "\nspeed: compute_advantages('vpo') vs per-group loops at equal precision (medians, ms; speedup = loop / vec)"
    )
    print(
        f"{'d':>3} {'prec':>4} {'vec':>7} {'numpy loop':>11} {'speedup':>8} {'torch loop':>11} {'speedup':>8} "
        f"{'loop draws':>11} {'check n/t':>17}"
    )
    rows = {}
    for d in (4, 16):
        s = rows[d] = bench_speed(d, repeats)
        for prec in PRECISIONS:
            print(
                f"{d:>3} {prec:>4} {s[f'vec_{prec}_ms']:>7.2f} {s[f'numpy_loop_{prec}_ms']:>11.2f} "
                f"{s[f'speedup_numpy_loop_{prec}']:>7.1f}x {s[f'torch_loop_{prec}_ms']:>11.2f} "
                f"{s[f'speedup_torch_loop_{prec}']:>7.1f}x {s[f'draw_per_group_{prec}_ms']:>11.2f} "
                f"{s[f'max_abs_diff_numpy_loop_{prec}']:>8.1e}/{s[f'max_abs_diff_torch_loop_{prec}']:.1e}"
            )
            for key in (
                f"vec_{prec}_ms",
                f"numpy_loop_{prec}_ms",
                f"torch_loop_{prec}_ms",
                f"draw_per_group_{prec}_ms",
                f"speedup_numpy_loop_{prec}",
                f"speedup_torch_loop_{prec}",
                f"max_abs_diff_numpy_loop_{prec}",
                f"max_abs_diff_torch_loop_{prec}",
            ):
                result[f"{key}_d{d}"] = s[key]
    print(
        "(vec: compute_advantages with a float32 / float64 set score, its batched draws included; loops: the\n"
        " same precision, drawing with the library's sampler once per group, draws included in their time;\n"
        " loop draws: those per-group draws alone; check: max |advantage difference| of the numpy/torch loop\n"
        " fed the same weights)"
    )
    return rows


def _reference_table(rows: dict, result: dict) -> None:
    """Print the reference loop structure's table from the speed measurements; its figures go into ``result``."""
    print(
        "\nthe reference implementation's loop structure (numpy float64, list of per-rollout matrices, one numpy\n"
        "Dirichlet draw per group) vs compute_advantages (ms; speedup = reference / vec)"
    )
    print(
        f"{'d':>3} {'reference':>10} {'vec f64':>8} {'speedup':>8} {'per-repeat median [IQR]':>24} {'vec f32':>8} "
        f"{'speedup':>8} {'numpy draws':>12} {'vec draws f32':>14} {'check':>8}"
    )
    for d, s in rows.items():
        iqr = s["per_repeat_speedup_reference_f64_iqr"]
        print(
            f"{d:>3} {s['reference_loop_ms']:>10.2f} {s['vec_f64_ms']:>8.2f} {s['speedup_reference_loop_f64']:>7.1f}x "
            f"{s['per_repeat_speedup_reference_f64_median']:>9.1f}x [{iqr[0]:.1f}, {iqr[1]:.1f}]{'':>4} "
            f"{s['vec_f32_ms']:>8.2f} {s['speedup_reference_loop_f32']:>7.1f}x {s['draw_numpy_per_group_ms']:>12.2f} "
            f"{s['draw_batch_f32_ms']:>14.2f} {s['max_abs_diff_reference_loop']:>8.1e}"
        )
        for key in (
            "reference_loop_ms",
            "speedup_reference_loop_f64",
            "speedup_reference_loop_f32",
            "per_repeat_speedup_reference_f64_median",
            "per_repeat_speedup_reference_f64_iqr",
            "draw_numpy_per_group_ms",
            "draw_batch_f32_ms",
            "max_abs_diff_reference_loop",
        ):
            result[f"{key}_d{d}"] = s[key]
    print(
        "(numpy draws: the reference loop's own Dirichlet draws alone, inside its time; vec draws: the\n"
        " library's batched float32 draws alone, inside vec's time; check: max |difference| of the reference\n"
        " loop fed the library's float64 weights vs vec f64)"
    )


def _noise_table(seeds: int, lms_seeds: int, result: dict) -> None:
    """Measure and print the set score's noise per sampler; the figures go into ``result``."""
    print(f"\nnoise of the K={K} set score: RMS error vs a K={K_REF} estimate (ratio = / iid)")
    print(f"{'rewards':>9} {'d':>3} {'sampler':>15} {'rms':>10} {'ratio':>7} {'|bias|':>9} {'seeds':>6}")
    for kind in ("uniform", "binary"):
        for d in (4, 16):
            noise = bench_noise(d, seeds, kind, lms_seeds)
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


def _round(v):
    if isinstance(v, list):
        return [_round(x) for x in v]
    return float(f"{v:.4g}") if isinstance(v, float) and math.isfinite(v) else v


if __name__ == "__main__":
    main(sys.argv[1:])
