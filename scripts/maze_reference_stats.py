"""Statistics of the reference maze variant (docs/paper_tasks.md, "Maze"): how often its conflict filter
leaks, its budgets, and how often its scoring agrees with the default variant's scorer.

    python scripts/maze_reference_stats.py            # train (1000) and test (100) splits
    python scripts/maze_reference_stats.py --n 200    # the first 200 mazes of each split

A maze leaks when one route within the budget reaches E after touching both item zones (exact search:
``zone_route_lengths`` on ``as_default_maze()``). Agreement is counted on a fixed route mix per maze:
20 ``random_route`` routes, the ``reference_routes`` solver routes and 10 uniformly random move
strings (seed 0); a route agrees when the two reward vectors are equal.
"""

from __future__ import annotations

import argparse
import random
from collections import Counter

import numpy as np

from vpo.tasks.maze_gen import random_route, reference_routes, zone_route_lengths
from vpo.tasks.maze_grid import reward_vector, run_route
from vpo.tasks.maze_reference import ReferenceMaze, ReferenceMazeTask, reward, walk


def split_stats(examples: list[dict], rng: random.Random) -> dict:
    leaks, budgets = 0, Counter()
    routes = linear_same = convex_same = 0
    for ex in examples:
        mz = ReferenceMaze.from_example(ex)
        dm = mz.as_default_maze()
        both = zone_route_lengths(dm)["both"]
        leaks += both is not None and both <= mz.budget
        budgets[mz.budget] += 1
        mix = [random_route(dm, rng).moves for _ in range(20)] + [r.moves for r in reference_routes(dm).values()]
        mix += ["".join(rng.choice("UDLR") for _ in range(rng.randrange(1, mz.budget + 3))) for _ in range(10)]
        for moves in mix:
            default = reward_vector(dm, run_route(dm, moves))
            w = walk(mz, moves)
            routes += 1
            linear_same += np.array_equal(default, reward(mz, w, "linear"))
            convex_same += np.array_equal(default, reward(mz, w, "convex_bonus"))
    common, count = budgets.most_common(1)[0]
    return {
        "mazes": len(examples),
        "seeds_used": examples[-1]["seed"] - examples[0]["seed"] + 1,
        "leaking": leaks,
        "budget_range": (min(budgets), max(budgets)),
        "budget_mode": (common, count),
        "routes": routes,
        "linear_agree": linear_same,
        "convex_agree": convex_same,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=None, help="mazes per split (default: the split's size)")
    args = p.parse_args()
    task = ReferenceMazeTask()
    rng = random.Random(0)
    print(
        "| split | mazes | seeds tried | leaking mazes | budget range | most common budget | routes | linear = default | convex_bonus = default |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for split in ("train", "test"):
        s = split_stats(task.load(split, args.n), rng)
        print(
            f"| {split} | {s['mazes']} | {s['seeds_used']} | {s['leaking']} ({s['leaking'] / s['mazes']:.1%}) "
            f"| {s['budget_range'][0]}-{s['budget_range'][1]} | {s['budget_mode'][0]} ({s['budget_mode'][1] / s['mazes']:.0%}) "
            f"| {s['routes']} | {s['linear_agree']} ({s['linear_agree'] / s['routes']:.1%}) "
            f"| {s['convex_agree']} ({s['convex_agree'] / s['routes']:.1%}) |"
        )


if __name__ == "__main__":
    main()
