"""The Maze task: synthetic "designed conflict" grid mazes with a 4-dimensional reward.

The model writes a route of moves U/D/L/R from S to the exit E. Objectives (docs/method.md §5):
``completion``, ``gold``, ``diamond`` and ``avoid_lava``, ``w*`` uniform. Every instance is a designed
conflict: no single route scores well on everything, while a diverse set can. This module is the
task (:class:`MazeTask`: seeded splits, prompts, scoring); the maze and its route rules are in
:mod:`vpo.tasks.maze_grid`, the generator and exact solvers in :mod:`vpo.tasks.maze_gen`, and their
public names are importable from here too. Examples carry the rendered grid and budget, so a saved
pool rescores without the generator. Splits are seeded per (seed, split, index). docs/tasks.md
("Maze") has the route rules, generation steps, options and the exact solver helpers.
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from vpo._util import positive_int
from vpo.core.answers import INSTRUCTION_STYLES, style_choices
from vpo.tasks.base import Example, Task, partial_answers, split_seeds
from vpo.tasks.maze_gen import (
    IntRange,
    MazeConfig,
    Route,
    generate_maze,
    instance_seed,
    pareto_routes,
    random_route,
    reference_routes,
    zone_route_lengths,
)
from vpo.tasks.maze_grid import (
    LEGEND,
    OBJECTIVES,
    PREFERENCES,
    Maze,
    RouteOutcome,
    parse_route,
    reward_vector,
    run_route,
    score_route,
)
from vpo.tasks.maze_grid import (  # noqa: F401 (the grid's symbols and limits, importable from here as before)
    DIAMOND,
    EXIT,
    FLOOR,
    GOLD,
    LAVA,
    MAX_ROUTE_CHARS,
    MOVES,
    START,
    SYMBOLS,
    WALL,
    Cell,
)

SPLITS = ("train", "validation", "test")
PAPER_SPLIT_SIZES = {"train": 1000, "validation": 100, "test": 100}
"""Default ``n`` of :meth:`MazeTask.load` (the paper's split sizes)."""


# ---------------------------------------------------------------------------------------------
# the task
# ---------------------------------------------------------------------------------------------


class MazeTask(Task):
    """Designed-conflict mazes (docs/method.md §5). Options are :class:`MazeConfig`'s fields plus:

    ``seed`` train-split seed (paper: 42); ``test_seed`` test-split seed (default ``seed + 4200``,
    4242 for the paper's pair); ``validation_seed`` validation-split seed (default ``seed + 2100``;
    the paper has no validation split: use it to choose settings, then report on test); ``compact``
    render prompts with no legend or instructions and a one-line answer instruction (for tiny character-level models); ``instruction`` the answer
    instruction's style (``full``, ``short`` or ``tags``; default ``short`` when compact, else
    ``full``; see :func:`vpo.core.answers.answer_instruction`); ``variant`` ``default`` (this class)
    or ``reference``: ``MazeTask(variant="reference", ...)`` (and so ``vpo.tasks.get("maze",
    variant="reference")``) returns the authors' released maze instead,
    :class:`vpo.tasks.maze_reference.ReferenceMazeTask`, which takes its own options.
    """

    name = "maze"
    objectives = OBJECTIVES
    preferences = dict(PREFERENCES)
    answer_noun = "route"

    def __new__(cls, *args, variant: str = "default", **options):
        if variant != "reference" or cls is not MazeTask:
            return super().__new__(cls)
        from vpo.tasks.maze_reference import ReferenceMazeTask

        unknown = sorted(set(options) - {"score_mode", "seed", "test_seed", "validation_seed"})
        if unknown or args:
            raise ValueError(
                f"the reference maze (variant='reference') takes only the options score_mode, seed, test_seed "
                f"and validation_seed (its grid is fixed at 9x9); remove {unknown or list(args)}"
            )
        return ReferenceMazeTask(**options)  # not a MazeTask: Python does not run MazeTask.__init__ on it

    def __init__(
        self,
        size: int | tuple[int, int] = 9,
        extra_openings: IntRange | None = None,
        items_per_zone: IntRange = (3, 5),
        zone_radius: int = 2,
        lava: IntRange | None = None,
        budget_slack: int | None = None,
        seed: int = 42,
        test_seed: int | None = None,
        compact: bool = False,
        max_attempts: int = 5000,
        instruction: str | None = None,
        validation_seed: int | None = None,
        zones: str = "split",
        variant: str = "default",
        collinear: bool = False,
    ) -> None:
        if variant not in ("default", "reference"):
            raise ValueError(f"maze option variant must be 'default' or 'reference', got {variant!r}")
        if not isinstance(collinear, bool):
            raise ValueError(f"maze option collinear must be true or false, got {collinear!r}")
        # a control where the objectives are one objective in disguise (rho-bar = 1): every component
        # is the route's w*-score (the uniform mean of its four rewards); VPO has nothing to trade off
        self.collinear = collinear
        self.config = MazeConfig(
            size, extra_openings, items_per_zone, zone_radius, lava, budget_slack, max_attempts, zones
        )
        self.config.resolved()  # validate now, with a clear message
        self.seeds = split_seeds("maze", seed, validation_seed, test_seed)
        self.compact = bool(compact)
        style = instruction if instruction is not None else ("short" if self.compact else "full")
        if style not in INSTRUCTION_STYLES:
            raise ValueError(f"maze option instruction must be {style_choices()}, got {style!r}")
        self.instruction_style = style

    def load(
        self,
        split: str = "train",
        n: int | None = None,
        seed: int | None = None,
        *,
        exclude: Iterable[Example] = (),
    ) -> list[Example]:
        """The first ``n`` distinct instances of ``split`` (default n: 1000 train, 100 validation, 100 test).

        Generator index i depends only on (config, seed, split, i); a maze equal (same grid and
        budget) to an earlier one or to one in ``exclude`` is skipped, so ``load(s, 10)`` is a
        prefix of ``load(s, 100)``. Repeats only occur at tiny sizes: pass
        ``exclude=task.load("train")`` to keep such a test split disjoint from train. ``seed``
        overrides the split's seed. Example keys: id, split, seed, index, grid (row strings),
        budget; JSON-serialisable.
        """
        if split not in SPLITS:
            raise ValueError(f"maze task has splits {SPLITS}, not {split!r}")
        n = PAPER_SPLIT_SIZES[split] if n is None else n
        positive_int(n, "n", "maze", minimum=0)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
            raise ValueError(f"seed must be an integer or None, got {seed!r}")
        base = self.seeds[split] if seed is None else int(seed)
        seen = {(tuple(e["grid"]), int(e["budget"])) for e in exclude}
        from tqdm.auto import tqdm

        out: list[Example] = []
        limit = 20 * int(n) + 100
        with tqdm(total=int(n), desc=f"maze {split}", disable=True if n < 500 else None, leave=False) as bar:
            for i in range(limit):
                if len(out) == n:
                    break
                maze = generate_maze(instance_seed(base, split, i), self.config)
                key = (maze.grid, maze.budget)
                if key in seen:
                    continue
                seen.add(key)
                out.append(
                    {
                        "id": f"maze-{split}-{base}-{i}",
                        "split": split,
                        "seed": base,
                        "index": i,
                        "grid": list(maze.grid),
                        "budget": maze.budget,
                    }
                )
                bar.update(1)
        if len(out) < n:
            raise RuntimeError(
                f"only {len(out)} distinct mazes in {limit} draws for this configuration "
                f"({self.config}); ask for fewer or use a larger size"
            )
        return out

    def question(self, example: Example) -> str:
        return Maze.from_example(example).render(self.compact)

    def score(self, example: Example, answer: str) -> np.ndarray:
        r = score_route(Maze.from_example(example), answer)
        return np.full_like(r, float(np.mean(r))) if self.collinear else r

    def step_score(self, example: Example, partial_text: str) -> np.ndarray:
        """A partial completion's reward vector for step-wise search (``vpo eval --search beam|tree``):
        the best (by w*) of its closed answers' true rewards and :func:`partial_route_score` of the
        route still being written."""
        closed, open_ = partial_answers(partial_text)
        vecs = [self.score(example, a) for a in closed if a]
        if open_:
            r = partial_route_score(Maze.from_example(example), open_)
            vecs.append(np.full_like(r, float(np.mean(r))) if self.collinear else r)
        if not vecs:
            return np.zeros(len(OBJECTIVES))
        w = self.target_weights
        return max(vecs, key=lambda v: float(v @ w))

    def canonical(self, answer: str) -> Any:
        """Two answers are the same when they spell the same moves (``"U, r"`` == ``"ur"``)."""
        moves = parse_route(answer)
        return moves if moves is not None else ("unparsed", super().canonical(answer))

    def dedup_key(self, example: Example, answer: str) -> Any:
        """Two routes are one answer when they walk the same path: the tiles stood on up to E (moves
        after the exit, or past the budget, are never run) with blocked moves (into a wall or the
        edge, which leave the route where it is) removed, so ``RRD`` and ``RRDUU`` after an exit at
        ``RRD``, or ``RRD`` and ``RURD`` with ``U`` blocked, are duplicates. Every route that does
        not reach E scores the zero vector: those are one answer too."""
        moves = parse_route(answer)
        if moves is None:
            return ("unparsed", super().canonical(answer))
        maze = Maze.from_example(example)
        out = run_route(maze, moves)
        if not out.reached:
            return ("no exit",)
        path, last = [], maze.start
        for cell in out.path:
            if cell != last:
                path.append(cell)
            last = cell
        return ("path", tuple(path))


def partial_route_score(maze: Maze, text: str) -> np.ndarray:
    """``[completion, gold, diamond, avoid_lava]`` of a route still being written (a step scorer's view).

    A route that already reaches E scores its true reward. Otherwise: ``completion`` is the progress
    towards E (``1 - distance left / distance from S``) times the share of its moves that were not
    blocked by a wall, and 0 when E can no longer be reached within the budget; ``gold`` and
    ``diamond`` are the shares collected so far and ``avoid_lava`` one minus the share of lava stepped
    on (all 0 when the route can no longer finish, or its text is not a route).
    """
    moves = parse_route(text) if text.strip() else ""
    if moves is None:
        return np.zeros(len(OBJECTIVES))
    out = run_route(maze, moves)
    if out.reached:
        return reward_vector(maze, out)
    g = maze._graph
    pos = maze.index(out.path[-1]) if out.path else g.start
    left, total = g.dist_to_exit[pos], g.dist_to_exit[g.start]
    if left < 0 or out.steps + left > maze.budget:
        return np.zeros(len(OBJECTIVES))
    valid = 1.0 - out.blocked / out.steps if out.steps else 1.0
    frac = lambda got, total_: 1.0 if not total_ else len(got) / len(total_)  # noqa: E731
    progress = 1.0 - left / total if total > 0 else 1.0
    lava = 1.0 - (len(out.lava) / len(maze.lava) if maze.lava else 0.0)
    return np.array([progress * valid, frac(out.gold, maze.gold), frac(out.diamond, maze.diamond), lava])


__all__ = [
    "OBJECTIVES",
    "partial_route_score",
    "LEGEND",
    "Maze",
    "MazeConfig",
    "MazeTask",
    "Route",
    "RouteOutcome",
    "generate_maze",
    "instance_seed",
    "parse_route",
    "pareto_routes",
    "random_route",
    "reference_routes",
    "reward_vector",
    "run_route",
    "score_route",
    "zone_route_lengths",
]
