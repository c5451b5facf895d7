"""How much room a maze regime leaves for search: the exact ceiling (best single route per maze,
under w*) against the best of k random valid routes (`vpo.tasks.maze.random_route`, no model).

    python scripts/maze_headroom.py            # the regimes docs/demo.md discusses, 40 validation mazes
    python scripts/maze_headroom.py --n 100

If k random valid routes already reach the ceiling, a policy's best@k cannot show a search gain under
w* on that regime, whatever it learned; the gap is the room left.
"""

from __future__ import annotations

import argparse

import numpy as np

from vpo.tasks.maze import Maze, MazeTask, pareto_routes, random_route, reference_routes

REGIMES = {
    "5x5 slack 0 (previous default)": dict(size=5, budget_slack=0),
    "5x5 slack 2 (default)": dict(size=5, budget_slack=2),
    "5x5 slack 0, lava 2-3": dict(size=5, budget_slack=0, lava=(2, 3)),
    "5x5 slack 2, lava 2-3": dict(size=5, budget_slack=2, lava=(2, 3)),
    "5x5 slack 0, zone radius 3, 5-8 items": dict(size=5, budget_slack=0, zone_radius=3, items_per_zone=(5, 8)),
    "5x7 slack 0": dict(size=(5, 7), budget_slack=0),
    "5x7 slack 2": dict(size=(5, 7), budget_slack=2),
    "7x7 slack 0": dict(size=7, budget_slack=0),
    "7x7 slack 2": dict(size=7, budget_slack=2),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=40, help="validation mazes per regime")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print(f"{'regime':40s} {'ceiling':>8s} {'best of 3':>10s} {'of 10':>7s} {'of 30':>7s} {'gap@30':>7s} {'front':>6s}")
    for name, opts in REGIMES.items():
        rng = np.random.default_rng(args.seed)
        mazes = [Maze.from_example(e) for e in MazeTask(compact=True, **opts).load("validation", args.n)]
        ceil = np.mean([reference_routes(m)["best"].target_score for m in mazes])
        best = np.mean(
            [
                [max(s[:k]) for k in (3, 10, 30)]
                for s in ([random_route(m, rng).target_score for _ in range(30)] for m in mazes)
            ],
            axis=0,
        )
        front = np.mean([len(pareto_routes(m)) for m in mazes])
        print(
            f"{name:40s} {ceil:8.3f} {best[0]:10.3f} {best[1]:7.3f} {best[2]:7.3f} {ceil - best[2]:+7.3f} {front:6.2f}"
        )


if __name__ == "__main__":
    main()
