"""How much room a prog regime leaves for search: the exact ceiling (the reference program passes every
test) against best-of-k and pass@k of `vpo.tasks.prog.random_program` (the warm-start sampler, no model).

    python scripts/prog_headroom.py              # the regimes docs/prog_task.md discusses, 100 validation problems
    python scripts/prog_headroom.py --n 200 --samples 100 --json

Per regime: ceiling, best@k (mean pass rate of the best of k programs, unbiased over --samples draws)
and pass@k (all tests) for k = 1, 3, 10, 30, the mean pairwise correlation rho of the test components
over the random programs, the share of random programs passing every test of the largest / smallest
piece, all tests and none, and the reference and prompt lengths. If k random programs already reach
the ceiling, a policy's best@k cannot show a search gain on that regime; the gap is the room left.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from vpo.search.metrics import best_at_k_unbiased, collinearity, pass_at_k
from vpo.tasks.prog import ProgTask, random_program

KS = (1, 3, 10, 30)
REGIMES = {
    "8 tests, threshold, min piece 2": dict(tests=8, min_piece=2),
    "8 tests, threshold, min piece 3": dict(tests=8, min_piece=3),
    "8 tests, parity, min piece 3": dict(tests=8, cases="parity", min_piece=3),
    "8 tests, mixed, min piece 3": dict(tests=8, cases="mixed", min_piece=3),
    "8 tests, threshold, wide constants": dict(tests=8, min_piece=3, slope=(-3, 3), intercept=(-9, 9), inputs=(-8, 8)),
    "12 tests, threshold, min piece 4": dict(tests=12, min_piece=4),
    "16 tests, threshold, min piece 5": dict(tests=16, min_piece=5),
    "12 tests, 3 pieces, min piece 3": dict(tests=12, pieces=3, min_piece=3),
    "8 tests, threshold, 6 shown": dict(tests=8, min_piece=3, shown=6),
    "8 tests, threshold, slopes 0-1": dict(tests=8, min_piece=3, slope=(0, 1)),
    "8 tests, threshold, constants (slope 0; the demo's)": dict(tests=8, min_piece=3, slope=0),
}


def measure(opts: dict, n: int, samples: int, seed: int) -> dict:
    task = ProgTask(compact=True, **opts)
    problems = task.load("validation", n)
    rng = np.random.default_rng(seed)
    slopes = opts.get("slope", (0, 3))  # the sampler's fallback lines take the targets' slopes, as in the demo
    rewards = np.array(
        [[random_program(ex, rng, slopes=slopes).reward for _ in range(samples)] for ex in problems]
    )  # [P, S, d]
    scores = rewards.mean(-1)
    passed = (rewards >= 1).all(-1)
    piece_pass = {"largest": [], "smallest": []}
    for ex, r in zip(problems, rewards):
        piece = np.array(ex["piece"])
        sizes = {p: int((piece == p).sum()) for p in set(ex["piece"])}
        ordered = sorted(sizes, key=lambda p: (-sizes[p], p))
        piece_pass["largest"].append((r[:, piece == ordered[0]] >= 1).all(-1).mean())
        piece_pass["smallest"].append((r[:, piece == ordered[-1]] >= 1).all(-1).mean())
    ceiling = float(np.mean([task.score(ex, ex["reference"]).mean() for ex in problems]))
    best = best_at_k_unbiased(scores, KS).mean(0)
    pk = pass_at_k(np.full(n, samples), passed.sum(1), KS).mean(0)
    rho = collinearity(rewards)
    return {
        "ceiling": ceiling,
        **{f"best_at_{k}": float(b) for k, b in zip(KS, best)},
        **{f"pass_at_{k}": float(p) for k, p in zip(KS, pk)},
        "gap_at_30": ceiling - float(best[-1]),
        "rho": float(np.nanmean(rho)),
        "share_largest_piece": float(np.mean(piece_pass["largest"])),
        "share_smallest_piece": float(np.mean(piece_pass["smallest"])),
        "share_all": float(passed.mean()),
        "share_none": float((rewards.sum(-1) == 0).mean()),
        "reference_chars_mean": float(np.mean([len(ex["reference"]) for ex in problems])),
        "reference_chars_max": int(max(len(ex["reference"]) for ex in problems)),
        "prompt_chars_mean": float(np.mean([len(task.question(ex)) for ex in problems])),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100, help="validation problems per regime")
    ap.add_argument("--samples", type=int, default=60, help="random programs per problem (>= 30)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="also print one JSON object on the last line")
    args = ap.parse_args()
    if args.samples < max(KS):
        ap.error(f"--samples must be at least {max(KS)}")
    t0 = time.time()
    results = {name: measure(opts, args.n, args.samples, args.seed) for name, opts in REGIMES.items()}
    head = (
        f"| {'regime':52s} | ceil | best@1 | @3 | @10 | @30 | gap@30 | pass@1 | @3 | @10 | @30 "
        f"| rho | big piece | small piece | all | none | ref chars | prompt chars |"
    )
    print(head)
    print("|" + "|".join("---" for _ in range(head.count("|") - 1)) + "|")
    for name, r in results.items():
        print(
            f"| {name:52s} | {r['ceiling']:.2f} | "
            + " | ".join(f"{r[f'best_at_{k}']:.3f}" for k in KS)
            + f" | {r['gap_at_30']:+.3f} | "
            + " | ".join(f"{r[f'pass_at_{k}']:.3f}" for k in KS)
            + f" | {r['rho']:.2f} | {r['share_largest_piece']:.3f} | {r['share_smallest_piece']:.3f}"
            f" | {r['share_all']:.4f} | {r['share_none']:.3f} | {r['reference_chars_mean']:.1f} ({r['reference_chars_max']})"
            f" | {r['prompt_chars_mean']:.0f} |"
        )
    print(
        f"({args.n} validation problems per regime, {args.samples} random programs each, seed {args.seed}, "
        f"{time.time() - t0:.1f} s)"
    )
    if args.json:
        print(
            json.dumps(
                {
                    "n": args.n,
                    "samples": args.samples,
                    "seed": args.seed,
                    "ks": list(KS),
                    "regimes": {name: {"options": REGIMES[name], **r} for name, r in results.items()},
                }
            )
        )


if __name__ == "__main__":
    main()
