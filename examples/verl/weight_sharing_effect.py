"""Effect of drawing VPO's K weightings from hash(group uid) (the veRL route) on the advantage.

Compares, on random reward batches (P groups x G rollouts x m answers x d objectives), the mean
absolute difference between the advantage and the *exact* one (set score integrated with 2^16
scrambled Sobol points), for

* hashed-iid / hashed-sobol: weightings from ``vpo.integrations.verl_reward.group_weightings``
  (what the veRL score function uses), and
* core-iid / core-sobol: vpo.core's own seeded sampler (what the TRL trainer uses).

    python examples/verl/weight_sharing_effect.py --groups 64 --reps 5
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from vpo.core import EstimatorConfig, compute_advantages, set_score, spacings_to_simplex
from vpo.integrations.verl_reward import HashedGroupSampler


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="hashed vs core weightings: advantage error vs the exact set score")
    p.add_argument("--groups", type=int, default=64, help="prompt groups P")
    p.add_argument("--group-size", type=int, default=8, help="rollouts per group G (paper: 8)")
    p.add_argument("--m", type=int, default=3, help="answers per rollout")
    p.add_argument("--d", type=int, default=5, help="objectives")
    p.add_argument("--k", type=int, default=100, help="weightings per group K (paper: 100)")
    p.add_argument("--reps", type=int, default=5, help="repetitions (different seeds)")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)

    rng = np.random.default_rng(a.seed)
    n = a.groups * a.group_size
    R = (rng.random((n, a.m, a.d)) < 0.5) * rng.random((n, a.m, a.d))
    V = rng.random((n, a.m)) < 0.8
    uids = [f"uid-{g}" for g in range(a.groups) for _ in range(a.group_size)]
    keys = list(dict.fromkeys(uids))
    W = spacings_to_simplex(
        torch.quasirandom.SobolEngine(a.d - 1, scramble=True, seed=a.seed).draw(2**16, dtype=torch.float64)
    )
    exact = compute_advantages(
        "vpo", set_score(R, V, W).numpy()[:, None, None], group_ids=uids, config=EstimatorConfig(num_weightings=1)
    ).advantages
    print(f"P={a.groups} G={a.group_size} m={a.m} d={a.d} K={a.k}, {a.reps} reps: mean |A - A_exact| (std over reps)")
    for kind in ("iid", "sobol"):
        cfg = EstimatorConfig(num_weightings=a.k, weight_sampler=kind)
        for route in ("hashed", "core"):
            errs = []
            for rep in range(a.reps):
                sampler = HashedGroupSampler(keys, a.k, 1.0, kind, seed=rep) if route == "hashed" else None
                adv = compute_advantages("vpo", R, V, group_ids=uids, config=cfg, sampler=sampler, seed=rep).advantages
                errs.append(float((adv - exact).abs().mean()))
            print(f"  {route + '-' + kind:13s} {np.mean(errs):.4f} ({np.std(errs):.4f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
