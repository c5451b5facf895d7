"""What a base chat model's own answers to the animals task are worth: the validation probe of issue #49.

Asks the model (by default the fetched SmolLM2-135M-Instruct) each validation list's plain question
``--replies`` times at ``--temperature`` with vpo's CPU sampler (the animals domain's 'self' warm start
draws its answers the same way), reads the first listed animal each reply names, and reports best@k under
w* of those answers at a matched answer budget (a reply naming no listed animal scores 0), the ceiling
(the best listed animal), the share of replies that name none, and the distinct animals named::

    python scripts/animals_base_probe.py --list-size 12 --lists 16 --replies 30 --json

The last line with ``--json`` is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2", help="a vpo model name or a checkpoint directory")
    ap.add_argument("--list-size", type=int, default=12)
    ap.add_argument("--lists", type=int, default=16, help="validation lists asked (the first N)")
    ap.add_argument("--replies", type=int, default=30)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--draws", type=int, default=50, help="random orders per list for best@k")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    import torch

    from vpo.demo.animals import BaseModelAnswers
    from vpo.demo.shop import model_dir
    from vpo.tasks.animals import AnimalsTask, ceiling, item_rewards

    torch.set_num_threads(1)
    task = AnimalsTask(list_size=args.list_size)
    lists = task.load("validation", n=args.lists)
    ask = BaseModelAnswers(
        model_dir(args.model), task, seed=args.seed, replies=args.replies, temperature=args.temperature
    )
    ask.prefetch(lists)
    rng = np.random.default_rng(args.seed)
    ks = [k for k in (1, 3, 10, 30) if k <= args.replies]
    best = {k: [] for k in ks}
    none, distinct = [], []
    for ex in lists:
        w = item_rewards(ex).mean(1)
        named = ask.named[str(ex["id"])]
        vals = np.array([w[ex["animals"].index(a)] if a else 0.0 for a in named])
        for k in ks:
            best[k].append(np.mean([rng.permutation(vals)[:k].max() for _ in range(args.draws)]))
        none.append(np.mean([a is None for a in named]))
        distinct.append(len({a for a in named if a}))
    out = {
        "model": args.model,
        "list_size": args.list_size,
        "lists": args.lists,
        "replies": args.replies,
        "temperature": args.temperature,
        "ceiling": float(np.mean([ceiling(ex) for ex in lists])),
        "best_at_k": {str(k): float(np.mean(v)) for k, v in best.items()},
        "none_share": float(np.mean(none)),
        "distinct": float(np.mean(distinct)),
    }
    head = f"{args.lists} validation lists of {args.list_size}, {args.replies} replies at T = {args.temperature}"
    print(head)
    print(f"ceiling {out['ceiling']:.3f}; " + ", ".join(f"best@{k} {v:.3f}" for k, v in out["best_at_k"].items()))
    print(f"replies naming no listed animal {out['none_share']:.1%}; distinct animals named {out['distinct']:.1f}")
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
