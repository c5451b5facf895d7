"""Maze variants the demo uses: the validation split and the shared-zone (collinear) control."""

from __future__ import annotations

import numpy as np
import pytest

from vpo.tasks.maze import Maze, MazeConfig, MazeTask, pareto_routes


def _zone_items(maze: Maze, sym: str) -> list[tuple[int, int]]:
    return [(r, c) for r, row in enumerate(maze.grid) for c, ch in enumerate(row) if ch == sym]


def test_shared_zones_put_both_items_in_one_corner_and_a_route_collects_both():
    task = MazeTask(size=5, compact=True, budget_slack=0, zones="shared", items_per_zone=(2, 3))
    for ex in task.load("validation", 30):
        maze = Maze.from_example(ex)
        items = _zone_items(maze, "$") + _zone_items(maze, "*")
        corners = [(0, 0), (0, 4), (4, 0), (4, 4)]
        near = [
            min(abs(r - cr) + abs(c - cc) for r, c in items) <= 2
            and max(abs(r - cr) + abs(c - cc) for r, c in items) <= 2
            for cr, cc in corners
        ]
        assert sum(near) == 1, maze.grid  # every item within the zone radius of one corner
        fronts = np.stack([r.reward for r in pareto_routes(maze)])
        assert ((fronts[:, 1] > 0) & (fronts[:, 2] > 0)).any(), maze.grid  # one route collects both kinds


def test_split_zones_never_let_a_route_collect_both():
    task = MazeTask(size=5, compact=True, budget_slack=0)
    for ex in task.load("validation", 30):
        fronts = np.stack([r.reward for r in pareto_routes(Maze.from_example(ex))])
        assert not ((fronts[:, 1] > 0) & (fronts[:, 2] > 0)).any()


def test_shared_zones_refuse_more_items_than_the_zone_holds():
    with pytest.raises(ValueError, match="zones='shared'"):
        MazeConfig(5, items_per_zone=(3, 5), zones="shared").resolved()
    with pytest.raises(ValueError, match="zones must be"):
        MazeConfig(5, zones="both").resolved()


def test_validation_split_is_its_own_stream():
    task = MazeTask(size=5, compact=True)
    val, test = task.load("validation", 20), task.load("test", 20)
    assert all(e["split"] == "validation" for e in val)
    assert not {tuple(e["grid"]) for e in val} & {tuple(e["grid"]) for e in test}
    assert MazeTask(size=5, compact=True, validation_seed=7).load("validation", 1)[0]["seed"] == 7
    with pytest.raises(ValueError, match="splits"):
        task.load("dev", 1)


def test_collinear_maze_scores_every_objective_with_the_w_star_score():
    """The rho-bar = 1 control: each component is the uniform mean of the default reward vector, for
    finishing and failing routes alike; the default task is unchanged; a non-bool option is refused."""
    opts = dict(size=5, budget_slack=2, compact=True, instruction="short")
    plain, col = MazeTask(**opts), MazeTask(**opts, collinear=True)
    ex = plain.load("validation", 3)
    seen_finishing = False
    for e in ex:
        maze = Maze.from_example(e)
        for route in [r.moves for r in pareto_routes(maze)] + ["UUUU", "xyz"]:
            a, b = plain.score(e, route), col.score(e, route)
            assert np.allclose(b, np.full(4, a.mean())), (route, a, b)
            seen_finishing |= a[0] == 1.0
    assert seen_finishing  # the check covered routes that reach E, not only failures
    assert plain.score(ex[0], [r.moves for r in pareto_routes(Maze.from_example(ex[0]))][0]).std() > 0
    with pytest.raises(ValueError, match="collinear must be true or false"):
        MazeTask(**opts, collinear="yes")


def test_generated_mazes_are_memoised_per_seed_and_config():
    """The per-process memo returns what generation would, and never mixes up two configs."""
    from vpo.tasks import maze_gen

    a, b = MazeConfig(5, None, (3, 5), 2, (1, 1), 2), MazeConfig(5, None, (3, 5), 2, (1, 1), 0)
    first = maze_gen.generate_maze(123, a)
    assert maze_gen.generate_maze(123, a) is first  # a cache hit
    assert first == maze_gen._generate_maze_uncached(123, a.resolved())
    other = maze_gen.generate_maze(123, b)
    assert other == maze_gen._generate_maze_uncached(123, b.resolved()) and other.budget != first.budget
