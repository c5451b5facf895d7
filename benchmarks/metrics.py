"""Search metrics and pool generation: speed of the vectorised code against per-prompt loops, and
generation throughput of the transformers backend on a tiny model.

    python benchmarks/metrics.py            # tables
    python benchmarks/metrics.py --json     # + one JSON object on the last line
    python benchmarks/metrics.py --no-generation   # metrics only
    python benchmarks/metrics.py --quick    # seconds, tiny sizes (CI: does it run)

Metrics. ``vpo.search.metrics.evaluate`` (every metric: matched best@k over 5 eval seeds and its
exact expectation, unbiased best@k, pass@k, E_w[best@k] with 64 weightings, diversity,
collinearity, Pareto front, tokens, 1000-resample bootstrap CIs) on 1000 prompts x 30 answer slots
x d = 16, with the slots laid out as 30 rollouts x m = 1 and as 10 rollouts x m = 3. Baseline: the
same metrics written the straightforward way, one prompt at a time (``math.comb`` coefficients,
pairwise loops, ``np.corrcoef``, a Python Pareto scan, a per-prompt bootstrap), for which the
vectorised results must agree (max abs difference printed). The two alternate within every repeat
so machine noise hits both alike; medians and the ratio of medians are reported.

Generation. ``generate_pool`` with the transformers backend on ``build_tiny_model`` (0.3 M params)
on CPU: answers/s batched (``max_batch_rows`` = 64) against one prompt per generate call, for
m = 1 and m = 3, with torch's default threads and with 1 thread. vLLM and the OpenAI client are not
timed here (no GPU; no server on this machine).

Figures are printed, never asserted; the machine may be shared and noisy.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time

import numpy as np

from vpo.search.metrics import (
    EvalConfig,
    evaluate,
    fixed_weights,
    matched_best_at_k_exact,
)

P, SLOTS, D = 1000, 30, 16
KS = (1, 3, 5, 10, 30)


def make_batch(m: int, seed: int = 0):
    """``rewards [P*R, m, D]`` (pass/fail with a per-prompt rate, partly correlated), ``valid``,
    ``prompt_index``, ``num_tokens`` with R = SLOTS / m."""
    rng = np.random.default_rng(seed)
    R = SLOTS // m
    rate = rng.uniform(0.1, 0.9, size=(P, 1, 1, 1))
    shared = rng.random((P, R, m, 1))
    own = rng.random((P, R, m, D))
    r = ((0.5 * shared + 0.5 * own) < rate).astype(np.float64)
    valid = rng.random((P, R, m)) < 0.9
    return (
        r.reshape(P * R, m, D),
        valid.reshape(P * R, m),
        np.repeat(np.arange(P), R),
        rng.integers(20, 400, size=P * R).astype(float),
    )


# ---------------------------------------------------------------------------------------------
# the per-prompt loop (baseline)
# ---------------------------------------------------------------------------------------------


def metrics_loop(rewards, valid, prompt_index, num_tokens, cfg: EvalConfig) -> dict:
    """Every metric one prompt at a time, written plainly (the baseline)."""
    _, m, d = rewards.shape
    w_star = np.full(d, 1.0 / d)
    W = fixed_weights(d, cfg.num_weightings, cfg.weight_alpha, cfg.weight_seed)
    P_ = int(prompt_index.max()) + 1
    out = {k: [] for k in ("best", "exact", "unbiased", "pass", "ew", "div", "rho", "front", "tok")}
    orders = {s: np.argsort(np.random.default_rng(s).random((P_, SLOTS // m)), axis=1) for s in cfg.seeds}
    for p in range(P_):
        rows = np.flatnonzero(prompt_index == p)
        r, v = rewards[rows], valid[rows]
        R = len(rows)
        s = np.where(v, r @ w_star, cfg.invalid_score)  # [R, m]
        best, ew = [], []
        for seed in cfg.seeds:
            flat = s[orders[seed][p]].reshape(-1)
            best.append([flat[:k].max() for k in KS])
            sw = np.where(v[..., None], r @ W.T, cfg.invalid_score)[orders[seed][p]].reshape(R * m, -1)
            ew.append([sw[:k].max(0).mean() for k in KS])
        out["best"].append(np.mean(best, 0))
        out["ew"].append(np.mean(ew, 0))
        out["exact"].append(matched_best_at_k_exact(s[None], np.ones((1, R), bool), KS)[0])
        flat = np.sort(s.reshape(-1))
        n = flat.size
        out["unbiased"].append(
            [sum(math.comb(i - 1, k - 1) * flat[i - 1] for i in range(k, n + 1)) / math.comb(n, k) for k in KS]
        )
        c = int((v & (r >= cfg.pass_threshold).all(-1)).sum())
        out["pass"].append(
            [1.0 if n - c < k else 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1))) for k in KS]
        )
        pts = r[v]
        pairs = [np.abs(a - b).sum() for i, a in enumerate(pts) for b in pts[i + 1 :]]
        out["div"].append(np.mean(pairs) if pairs else np.nan)
        varying = pts.std(0) > 1e-12 if len(pts) else np.zeros(d, bool)
        if varying.sum() >= 2:
            cm = np.corrcoef(pts[:, varying].T)
            out["rho"].append(cm[~np.eye(cm.shape[0], dtype=bool)].mean())
        else:
            out["rho"].append(np.nan)
        uniq = {tuple(x) for x in pts}
        out["front"].append(
            sum(1 for a in uniq if not any(b != a and all(bb >= aa for aa, bb in zip(a, b)) for b in uniq))
        )
        out["tok"].append(num_tokens[rows].mean())
    # bootstrap: one resample loop over all statistics
    stats = np.column_stack([np.asarray(out[k]).reshape(P_, -1) for k in out])
    rng = np.random.default_rng(cfg.bootstrap_seed)
    means = []
    for _ in range(cfg.bootstrap):
        idx = rng.integers(0, P_, P_)
        means.append(np.nanmean(stats[idx], 0))
    np.percentile(np.asarray(means), [2.5, 97.5], axis=0)
    return {k: np.asarray(v) for k, v in out.items()}


def agreement(fast: dict, loop: dict) -> float:
    pp = fast["per_prompt"]
    pairs = [
        ("best_at_k", "best"),
        ("best_at_k_exact", "exact"),
        ("best_at_k_unbiased", "unbiased"),
        ("pass_at_k", "pass"),
        ("ew_best_at_k", "ew"),
        ("diversity", "div"),
        ("collinearity", "rho"),
        ("pareto_front_size", "front"),
        ("tokens_per_rollout", "tok"),
    ]
    worst = 0.0
    for a, b in pairs:
        x = np.asarray(pp[a], dtype=float)
        y = np.asarray(loop[b], dtype=float).reshape(x.shape)
        both = np.isfinite(x) & np.isfinite(y)
        if (np.isfinite(x) != np.isfinite(y)).any():
            return float("inf")
        worst = max(worst, float(np.max(np.abs(x[both] - y[both]), initial=0.0)))
    return worst


def bench_metrics(repeats: int) -> dict:
    cfg = EvalConfig(ks=KS, seeds=(0, 1, 2, 3, 4), bootstrap=1000)
    res = {}
    for m in (1, 3):
        r, v, idx, tok = make_batch(m)
        evaluate(r, v, idx, num_tokens=tok, config=cfg)  # warm-up (imports, lgamma table)
        fast_t, loop_t = [], []
        fast = loop = None
        for _ in range(repeats):
            t = time.perf_counter()
            fast = evaluate(r, v, idx, num_tokens=tok, config=cfg)
            fast_t.append(time.perf_counter() - t)
            if len(loop_t) < max(1, repeats // 3):  # the loop is slow: fewer repeats
                t = time.perf_counter()
                loop = metrics_loop(r, v, idx, tok, cfg)
                loop_t.append(time.perf_counter() - t)
        res[m] = {
            "fast_median_s": statistics.median(fast_t),
            "loop_median_s": statistics.median(loop_t),
            "speedup": statistics.median(loop_t) / statistics.median(fast_t),
            "max_abs_diff": agreement(fast, loop),
        }
    return res


# ---------------------------------------------------------------------------------------------
# generation throughput
# ---------------------------------------------------------------------------------------------


def bench_generation(repeats: int, prompts: int, max_new_tokens: int) -> dict:
    import torch

    from vpo.search import PoolConfig, TransformersGenerator, generate_pool
    from vpo.tasks import FunctionTask
    from vpo.train.tiny import build_tiny_model

    task = FunctionTask(
        "bench",
        objectives={"a": lambda ex, a: float("a" in a), "b": lambda ex, a: float(len(a) < 8)},
        examples=[{"id": i, "question": f"Write something about item {i}."} for i in range(prompts)],
    )
    tmp = tempfile.mkdtemp(prefix="vpo-bench-")
    path = build_tiny_model(tmp)
    gen = TransformersGenerator(str(path), cfg=PoolConfig())
    default_threads = torch.get_num_threads()
    out = {}
    for m, rollouts in ((1, 8), (3, 4)):
        for threads in sorted({default_threads, 1}):
            times: dict[str, list[float]] = {"batched": [], "unbatched": []}
            tokens: dict[str, float] = {}
            for _ in range(repeats):  # the two alternate so machine noise hits both alike
                for label, rows in (("batched", 64), ("unbatched", rollouts)):
                    cfg = PoolConfig(
                        num_answers=m,
                        n_rollouts=rollouts,
                        max_new_tokens=max_new_tokens,
                        max_batch_rows=rows,
                        num_threads=threads,
                    )
                    gen.cfg = cfg
                    t = time.perf_counter()
                    pool = generate_pool(task=task, config=cfg, generator=gen, progress=False)
                    times[label].append(time.perf_counter() - t)
                    tokens[label] = float(np.nansum(pool.num_tokens))
            for label, ts in times.items():
                med = statistics.median(ts)
                out[(m, threads, label)] = {
                    "answers_per_s": prompts * rollouts * m / med,
                    "tokens_per_s": tokens[label] / med,
                }
    return {"results": out, "default_threads": default_threads}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print one JSON object on the last line")
    ap.add_argument("--repeats", type=int, default=7, help="timed repeats of the vectorised metrics (default 7)")
    ap.add_argument("--no-generation", action="store_true", help="skip the generation throughput part")
    ap.add_argument("--gen-prompts", type=int, default=8, help="prompts per generation run (default 8)")
    ap.add_argument("--gen-tokens", type=int, default=64, help="max_new_tokens in the generation runs (default 64)")
    ap.add_argument("--gen-repeats", type=int, default=2, help="repeats per generation setting (default 2)")
    ap.add_argument(
        "--quick", action="store_true", help="tiny sizes (seconds): checks the script runs, figures meaningless"
    )
    args = ap.parse_args(argv)
    if args.quick:
        global P
        P = 20
        args.repeats, args.gen_prompts, args.gen_tokens, args.gen_repeats = 1, 2, 4, 1
    figures: dict = {}

    print(f"## Metrics: {P} prompts x {SLOTS} answer slots x d={D}, ks={KS}, 5 eval seeds, 1000 bootstrap resamples")
    print(f"{'layout':<22}{'vectorised (median s)':>24}{'per-prompt loop (s)':>22}{'speedup':>10}{'max |diff|':>12}")
    mres = bench_metrics(args.repeats)
    for m, r in mres.items():
        layout = f"{SLOTS // m} rollouts x m={m}"
        print(
            f"{layout:<22}{r['fast_median_s']:>24.3f}{r['loop_median_s']:>22.2f}{r['speedup']:>9.1f}x{r['max_abs_diff']:>12.1e}"
        )
        figures[f"metrics_median_s_m{m}"] = r["fast_median_s"]
        figures[f"metrics_loop_median_s_m{m}"] = r["loop_median_s"]
        figures[f"metrics_speedup_m{m}"] = r["speedup"]
        figures[f"metrics_max_abs_diff_m{m}"] = r["max_abs_diff"]

    if not args.no_generation:
        print()
        print(
            f"## Generation: transformers backend, tiny Qwen2 (0.3 M params), CPU, {args.gen_prompts} prompts, "
            f"max_new_tokens={args.gen_tokens}, median of {args.gen_repeats}"
        )
        g = bench_generation(args.gen_repeats, args.gen_prompts, args.gen_tokens)
        print(
            f"{'m':>3}{'rollouts':>10}{'threads':>9}{'batched ans/s':>15}{'unbatched ans/s':>17}{'ratio':>8}{'batched tok/s':>15}"
        )
        for m, rollouts in ((1, 8), (3, 4)):
            for threads in sorted({g["default_threads"], 1}):
                b = g["results"][(m, threads, "batched")]
                u = g["results"][(m, threads, "unbatched")]
                ratio = b["answers_per_s"] / u["answers_per_s"]
                print(
                    f"{m:>3}{rollouts:>10}{threads:>9}{b['answers_per_s']:>15.1f}{u['answers_per_s']:>17.1f}{ratio:>7.1f}x{b['tokens_per_s']:>15.0f}"
                )
                key = f"m{m}_threads{threads}"
                figures[f"gen_answers_per_s_batched_{key}"] = b["answers_per_s"]
                figures[f"gen_answers_per_s_unbatched_{key}"] = u["answers_per_s"]
                figures[f"gen_batching_speedup_{key}"] = ratio
    if args.json:
        print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
