"""How much the VPO reference's conventions change the advantages (docs/estimators.md "Reference conventions").

Two measurements on synthetic batches (fixed seeds, numbers deterministic):

1. GDPO: the library's default (sum weighted by w*, whitening over rollouts) against each reference
   option and the ``gdpo_preset="reference"`` (sum with weight 1, veRL's token-weighted whitening)
   with uniform w* (maze-like rewards, d = 4) and with MuSiQue's w* = (1, 1, 1, 1, 3) / 7 (d = 5),
   response lengths drawn uniformly in [min_len, max_len] tokens.
2. Flat groups: groups of G identical scores in [0, 1] z-scored the way the reference's GRPO loop
   does (float32 torch.mean / torch.std over the stacked scores, + 1e-6), against vpo (exactly 0).

    python scripts/reference_conventions.py [--json] [--quick]
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch

from vpo.core import EstimatorConfig, compute_advantages

MUSIQUE_W = np.array([1, 1, 1, 1, 3], dtype=np.float64) / 7


def maze_like(rng, n):
    done = rng.random(n) < 0.6
    r = np.stack([np.ones(n), rng.integers(0, 5, n) / 4, rng.integers(0, 5, n) / 4, 1 - rng.integers(0, 4, n) / 4], 1)
    return r * done[:, None]


def musique_like(rng, n):
    hops = (rng.random((n, 4)) < 0.5).astype(np.float64)
    f1 = np.where(rng.random(n) < 0.3, 0.0, rng.random(n))
    return np.concatenate([hops, f1[:, None]], 1)


def gdpo_differences(kind: str, groups: int, G: int, seeds: int, min_len: int, max_len: int) -> dict:
    """max and mean |A_option - A_default| over ``seeds`` batches of ``groups`` x ``G`` rollouts."""
    make, w = (maze_like, None) if kind == "uniform" else (musique_like, MUSIQUE_W)
    options = {
        "ones": EstimatorConfig(gdpo_weighting="ones"),
        "tokens": EstimatorConfig(gdpo_whitening="tokens"),
        "reference": EstimatorConfig(gdpo_preset="reference"),
    }
    diffs: dict[str, list[np.ndarray]] = {k: [] for k in options}
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        n = groups * G
        r = make(rng, n)[:, None, :]
        lens = rng.integers(min_len, max_len + 1, n)
        base = compute_advantages("gdpo", r, group_size=G, target_weights=w).advantages.numpy()
        for name, cfg in options.items():
            a = compute_advantages("gdpo", r, group_size=G, target_weights=w, config=cfg, response_lengths=lens)
            diffs[name].append(np.abs(a.advantages.numpy() - base))
    out = {}
    for name, ds in diffs.items():
        d = np.concatenate(ds)
        out[f"gdpo_{kind}_{name}_max"] = float(d.max())
        out[f"gdpo_{kind}_{name}_mean"] = float(d.mean())
    return out


def reference_style_flat(values: np.ndarray, G: int) -> np.ndarray:
    """max |A| per value of a group of G copies, z-scored in float32 as the reference's GRPO loop."""
    out = np.empty(len(values))
    for i, v in enumerate(values):
        x = torch.stack([torch.tensor(float(v), dtype=torch.float32) for _ in range(G)])
        a = (x - torch.mean(x)) / (torch.std(x) + 1e-6)
        out[i] = float(a.abs().max())
    return out


def flat_groups(G: int, n_values: int) -> dict:
    values = np.round(np.linspace(0, 1, n_values), 6)
    ref = reference_style_flat(values, G)
    r = np.repeat(values, G)[:, None, None]  # one flat group per value
    ours = {}
    for name in ("grpo", "multi_rlvr", "max_at_k", "maxrl"):
        for dtype in (np.float32, np.float64):
            a = compute_advantages(name, r.astype(dtype), group_size=G).advantages
            ours[f"{name}_{np.dtype(dtype).name}"] = float(a.abs().max())
    return {
        "flat_G": G,
        "flat_values": int(n_values),
        "flat_reference_nonzero_frac": float((ref > 0).mean()),
        "flat_reference_max_abs": float(ref.max()),
        "flat_reference_max_at": float(values[int(ref.argmax())]),
        "flat_vpo_max_abs": max(ours.values()),
    }


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=32)
    ap.add_argument("--G", type=int, default=8)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--min-len", type=int, default=20)
    ap.add_argument("--max-len", type=int, default=400)
    ap.add_argument("--flat-values", type=int, default=1001)
    ap.add_argument("--quick", action="store_true", help="tiny sizes: does it run")
    ap.add_argument("--json", action="store_true", help="print one JSON object on the last line")
    a = ap.parse_args(argv)
    if a.quick:
        a.groups, a.seeds, a.flat_values = 4, 2, 21
    res = {}
    for kind in ("uniform", "musique"):
        res.update(gdpo_differences(kind, a.groups, a.G, a.seeds, a.min_len, a.max_len))
    res.update(flat_groups(a.G, a.flat_values))
    print(
        f"GDPO: |A(option) - A(default: w*, rollouts)|, {a.seeds} batches of {a.groups} groups x G = {a.G}, "
        f"response lengths {a.min_len}-{a.max_len} tokens"
    )
    print(f"  {'w*':8s} {'option':10s} {'max':>8s} {'mean':>8s}")
    for kind in ("uniform", "musique"):
        for name in ("ones", "tokens", "reference"):
            print(
                f"  {kind:8s} {name:10s} {res[f'gdpo_{kind}_{name}_max']:8.3g} {res[f'gdpo_{kind}_{name}_mean']:8.3g}"
            )
    print(
        f"flat groups (G = {a.G}, {a.flat_values} values in [0, 1]): reference-style float32 z-score non-zero for "
        f"{res['flat_reference_nonzero_frac']:.0%} of values, max |A| {res['flat_reference_max_abs']:.4f} "
        f"(at {res['flat_reference_max_at']}); vpo max |A| {res['flat_vpo_max_abs']:g}"
    )
    res["quick"] = bool(a.quick)
    if a.json:
        print(json.dumps(res))
    return res


if __name__ == "__main__":
    main()
