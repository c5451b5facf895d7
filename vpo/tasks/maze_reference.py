"""The authors' maze, reproduced: ``vpo.tasks.get("maze", variant="reference")``.

The paper's released code (github ryanboldi/vpo, ``vpo_tasks/maze.py``) differs from vpo's default
maze in its scoring (``convex_bonus``: gold, diamond and avoid_lava squared, x1.5 once a bonus tile
B at the centre is visited, capped at 1), its answer syntax (the words UP/DOWN/LEFT/RIGHT found
anywhere, routes in ``<route_i>`` tags with fallbacks) and its generator (a tile-level Prim maze, S
on the top row, a budget and a conflict filter measured to the zone corners only, so some mazes let
one route touch both zones). This module is an independent implementation of those rules, drawing
from ``random.Random`` in the same order so a seed gives the reference's maze. Examples carry the
grid (reference symbols, no spaces) and budget, so a saved pool rescores without the generator.
docs/paper_tasks.md ("Maze") tabulates every difference from the default variant.
"""

from __future__ import annotations

import random
import re
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import numpy as np

from vpo.tasks.base import Example, Task
from vpo.tasks.maze_grid import OBJECTIVES, PREFERENCES, Maze

EMPTY, START, EXIT, GOLD, DIAMOND, LAVA, WALL, BONUS = ".", "S", "E", "G", "D", "L", "#", "B"
SYMBOLS = EMPTY + START + EXIT + GOLD + DIAMOND + LAVA + WALL + BONUS
SCORE_MODES = ("convex_bonus", "linear")
BONUS_MULTIPLIER = 1.5
SIZE = 9
BUDGET_SLACK = 7
SPLITS = ("train", "validation", "test")
SPLIT_SEEDS = {"train": 42, "validation": 2121, "test": 4242}
SPLIT_SIZES = {"train": 1000, "validation": 100, "test": 100}
MAX_DRAWS_PER_MAZE = 300
"""A split of n mazes gives up after n * 300 seeds (the reference warns and stops there)."""

_STEP = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}
_NEIGHBOURS = ((-1, 0), (1, 0), (0, -1), (0, 1))  # the reference's order: up, down, left, right
_MOVE_WORD = re.compile(r"\b(UP|DOWN|LEFT|RIGHT)\b")
_ANSWER_OPEN = re.compile(r"<answer>", re.IGNORECASE)
_ANSWER_CLOSE = re.compile(r"</answer>", re.IGNORECASE)
_TO_DEFAULT = str.maketrans({GOLD: "$", DIAMOND: "*", LAVA: "~", BONUS: "."})

Cell = tuple[int, int]


# ---------------------------------------------------------------------------------------------
# answers: moves and routes
# ---------------------------------------------------------------------------------------------


def _text(answer: Any) -> str | None:
    if isinstance(answer, (bytes, bytearray)):
        return bytes(answer).decode("utf-8", errors="replace")
    return answer if isinstance(answer, str) else None


def _tagged(text: str, opening: re.Pattern, closing: re.Pattern, pos: int = 0) -> tuple[str, int] | None:
    """The body of the first ``opening`` after ``pos`` that a ``closing`` follows, up to the first
    such ``closing``, and the position after it: what a non-greedy ``<t>(.*?)</t>`` search finds,
    in linear time (an opening with no closing after it means none later has one either)."""
    o = opening.search(text, pos)
    if o is None:
        return None
    c = closing.search(text, o.end())
    return None if c is None else (text[o.end() : c.start()], c.end())


def _all_tagged(text: str, opening: re.Pattern, closing: re.Pattern) -> list[str]:
    out, pos = [], 0
    while (hit := _tagged(text, opening, closing, pos)) is not None:
        out.append(hit[0])
        pos = hit[1]
    return out


def extract_moves(answer: Any) -> str:
    """The moves of one route as a string over ``UDLR`` ("" when there are none); never raises.

    The text is the first ``<answer>...</answer>`` body if there is one, else the whole answer; the
    moves are the whole words UP, DOWN, LEFT, RIGHT in it, any case, whatever surrounds them.

    >>> extract_moves("I go up, then RIGHT -> Down (not upward)")
    'URD'
    """
    text = _text(answer)
    if text is None:
        return ""
    tagged = _tagged(text, _ANSWER_OPEN, _ANSWER_CLOSE)
    body = tagged[0] if tagged else text
    return "".join(w[0] for w in _MOVE_WORD.findall(body.upper()))


def split_routes(completion: Any, m: int) -> list[str]:
    """The reference's ``m`` route strings of a completion (padded with "" to exactly ``m``).

    First the bodies of ``<route_1>`` .. ``<route_m>`` (first match each, any case; missing numbers
    are skipped, so later routes move up); with none of them, the non-blank parts of a split on
    ``---`` if there are at least two; else every ``<answer>`` body if there are at least two; else
    the whole completion as route 1.
    """
    text = _text(completion)
    if text is None:
        return [""] * m

    def padded(routes: list[str]) -> list[str]:
        return (routes + [""] * m)[:m]

    tagged = []
    for i in range(1, m + 1):
        hit = _tagged(text, re.compile(rf"<route_{i}>", re.IGNORECASE), re.compile(rf"</route_{i}>", re.IGNORECASE))
        if hit:
            tagged.append(hit[0])
    if tagged:
        return padded(tagged)
    parts = [p.strip() for p in text.split("---") if p.strip()]
    if len(parts) >= 2:
        return padded(parts)
    answers = _all_tagged(text, _ANSWER_OPEN, _ANSWER_CLOSE)
    if len(answers) >= 2:
        return padded(answers)
    return padded([text])


# ---------------------------------------------------------------------------------------------
# the maze and its scoring
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReferenceMaze:
    """A maze in the reference's symbols (``.`` floor, ``#`` wall, S, E, G gold, D diamond, L lava,
    B bonus); ``grid`` holds the rows without the spaces the prompt puts between symbols."""

    grid: tuple[str, ...]
    budget: int
    start: Cell = field(init=False)
    exit: Cell = field(init=False)
    counts: dict[str, int] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        grid = tuple(self.grid)
        if not grid or not all(isinstance(r, str) and r for r in grid) or len({len(r) for r in grid}) != 1:
            raise ValueError("reference maze grid must be a non-empty list of equal-length row strings")
        where: dict[str, list[Cell]] = {s: [] for s in SYMBOLS}
        for r, row in enumerate(grid):
            for c, ch in enumerate(row):
                if ch not in where:
                    raise ValueError(
                        f"reference maze has unknown symbol {ch!r} at row {r}, col {c}; allowed: {SYMBOLS!r}"
                    )
                where[ch].append((r, c))
        for s in (START, EXIT):
            if len(where[s]) != 1:
                raise ValueError(f"reference maze needs exactly one {s!r}, found {len(where[s])}")
        if isinstance(self.budget, bool) or not isinstance(self.budget, (int, np.integer)) or self.budget < 0:
            raise ValueError(f"reference maze budget must be a non-negative integer, got {self.budget!r}")
        object.__setattr__(self, "grid", grid)
        object.__setattr__(self, "budget", int(self.budget))
        object.__setattr__(self, "start", where[START][0])
        object.__setattr__(self, "exit", where[EXIT][0])
        object.__setattr__(self, "counts", {s: len(where[s]) for s in (GOLD, DIAMOND, LAVA, BONUS)})

    @classmethod
    def from_example(cls, example: Mapping[str, Any]) -> "ReferenceMaze":
        try:
            return cls(tuple(example["grid"]), int(example["budget"]))
        except (KeyError, TypeError):
            raise ValueError(
                "a reference maze example is a dict with 'grid' (row strings) and 'budget' (int)"
            ) from None

    def grid_text(self) -> str:
        """The grid as the prompt shows it: symbols separated by spaces, one row per line."""
        return "\n".join(" ".join(row) for row in self.grid)

    def as_default_maze(self) -> Maze:
        """The same maze in the default variant's symbols (B becomes floor), for its solvers."""
        return Maze(tuple(row.translate(_TO_DEFAULT) for row in self.grid), max(self.budget, 1))


@dataclass(frozen=True)
class Walk:
    """What a route did: ``steps`` moves used, ``reached`` E within the budget, and the distinct
    gold, diamond, lava and bonus tiles stepped on before E."""

    steps: int
    reached: bool
    gold: int
    diamond: int
    lava: int
    bonus: int


def walk(maze: ReferenceMaze, moves: str) -> Walk:
    """Run ``moves`` (over UDLR): a move into a wall or off the grid stays put but costs a step; the
    first ``budget`` moves count; the walk ends on stepping onto E (E's tile is never an item)."""
    rows, cols = len(maze.grid), len(maze.grid[0])
    r, c = maze.start
    steps, reached = 0, False
    seen: set[Cell] = set()
    for mv in moves[: maze.budget]:
        dr, dc = _STEP[mv]
        nr, nc = r + dr, c + dc
        if 0 <= nr < rows and 0 <= nc < cols and maze.grid[nr][nc] != WALL:
            r, c = nr, nc
        steps += 1
        tile = maze.grid[r][c]
        if tile == EXIT:
            reached = True
            break
        if tile in (GOLD, DIAMOND, LAVA, BONUS):
            seen.add((r, c))
    reached = reached or (r, c) == maze.exit  # only when S is E: an empty route has arrived
    got = {s: sum(maze.grid[a][b] == s for a, b in seen) for s in (GOLD, DIAMOND, LAVA, BONUS)}
    return Walk(steps, reached, got[GOLD], got[DIAMOND], got[LAVA], got[BONUS])


def _clip01(x: float) -> float:
    return max(0.0, min(1.0, x))


def reward(maze: ReferenceMaze, w: Walk, score_mode: str = "convex_bonus") -> np.ndarray:
    """``[completion, gold, diamond, avoid_lava]`` of a walk; all zero unless E was reached.

    ``linear``: gold and diamond are the fractions collected (0 when the maze has none),
    avoid_lava is 1 - the fraction of lava tiles stepped on (1 when there is none).
    ``convex_bonus``: each of those three squared, times 1.5 if a B tile was visited, capped at 1.
    """
    if score_mode not in SCORE_MODES:
        raise ValueError(f"score_mode must be one of {SCORE_MODES}, got {score_mode!r}")
    if not w.reached:
        return np.zeros(4)
    n = maze.counts
    fracs = (
        w.gold / n[GOLD] if n[GOLD] > 0 else 0.0,
        w.diamond / n[DIAMOND] if n[DIAMOND] > 0 else 0.0,
        1.0 - w.lava / n[LAVA] if n[LAVA] > 0 else 1.0,
    )
    if score_mode == "convex_bonus":
        mult = BONUS_MULTIPLIER if w.bonus > 0 else 1.0
        fracs = tuple(mult * (f**2) for f in fracs)
    return np.array([1.0, *(_clip01(f) for f in fracs)])


def score_answer(maze: ReferenceMaze, answer: Any, score_mode: str = "convex_bonus") -> np.ndarray:
    """Reward vector ``[4]`` of one route text (all zero without moves); never raises on the answer."""
    moves = extract_moves(answer)
    if not moves:
        return np.zeros(4)
    return reward(maze, walk(maze, moves), score_mode)


# ---------------------------------------------------------------------------------------------
# the generator (same draws, in the same order, as the reference's)
# ---------------------------------------------------------------------------------------------


def _open_neighbours(grid: list[list[str]], r: int, c: int) -> int:
    n = len(grid)
    return sum(1 for dr, dc in _NEIGHBOURS if 0 <= r + dr < n and 0 <= c + dc < n and grid[r + dr][c + dc] == EMPTY)


def _tile_prim(rng: random.Random, n: int) -> list[list[str]]:
    """Prim's algorithm on tiles: a wall on the frontier opens when exactly one neighbour is open.
    The frontier is a list with repeats; a random entry is removed (order kept) each round."""
    grid = [[WALL] * n for _ in range(n)]
    r0 = rng.randrange(n)
    c0 = rng.randrange(n)
    grid[r0][c0] = EMPTY
    frontier = [(r0 + dr, c0 + dc) for dr, dc in _NEIGHBOURS if 0 <= r0 + dr < n and 0 <= c0 + dc < n]
    while frontier:
        r, c = frontier.pop(rng.randrange(len(frontier)))
        if grid[r][c] != WALL or _open_neighbours(grid, r, c) != 1:
            continue
        grid[r][c] = EMPTY
        frontier.extend(
            (r + dr, c + dc)
            for dr, dc in _NEIGHBOURS
            if 0 <= r + dr < n and 0 <= c + dc < n and grid[r + dr][c + dc] == WALL
        )
    return grid


def _open_loops(rng: random.Random, grid: list[list[str]], count: int) -> None:
    """Open ``count`` walls drawn from those with at least two open neighbours (listed before any opens)."""
    n = len(grid)
    walls = [(r, c) for r in range(n) for c in range(n) if grid[r][c] == WALL and _open_neighbours(grid, r, c) >= 2]
    rng.shuffle(walls)
    for r, c in walls[:count]:
        grid[r][c] = EMPTY


def _distances(grid: list[list[str]], src: Cell, blocked: str = WALL) -> dict[Cell, int]:
    """BFS move counts from ``src`` over tiles whose symbol is not in ``blocked`` (E not absorbing)."""
    n = len(grid)
    dist = {src: 0}
    q = deque([src])
    while q:
        r, c = q.popleft()
        for dr, dc in _NEIGHBOURS:
            nxt = (r + dr, c + dc)
            if 0 <= nxt[0] < n and 0 <= nxt[1] < n and grid[nxt[0]][nxt[1]] not in blocked and nxt not in dist:
                dist[nxt] = dist[(r, c)] + 1
                q.append(nxt)
    return dist


_FAR = 98  # the reference's length for "no path" (any leg this long rejects the maze)


def _leg(grid: list[list[str]], a: Cell, b: Cell) -> int:
    return _distances(grid, a).get(b, _FAR)


def _zone(corner: Cell, n: int, radius: int = 2) -> list[Cell]:
    return [(r, c) for r in range(n) for c in range(n) if abs(r - corner[0]) + abs(c - corner[1]) <= radius]


def _corners_and_budget(rng: random.Random, grid: list[list[str]]) -> tuple[Cell, Cell, Cell, Cell, int] | None:
    """S/E on a random diagonal (S always on row 0), the zones on the other corners in random order;
    the budget and the conflict filter, both measured between corner tiles."""
    n = len(grid)
    sr, sc, er, ec = rng.choice([(0, 0, n - 1, n - 1), (0, n - 1, n - 1, 0)])
    s, e = (sr, sc), (er, ec)
    others = [x for x in [(0, 0), (0, n - 1), (n - 1, 0), (n - 1, n - 1)] if x not in (s, e)]
    rng.shuffle(others)
    gold_corner, diamond_corner = others
    centre = (n // 2, n // 2)
    for r, c in (s, e, gold_corner, diamond_corner, centre):
        grid[r][c] = EMPTY
    if e not in _distances(grid, s):
        return None
    via = [_leg(grid, s, x) + _leg(grid, x, e) for x in (gold_corner, diamond_corner, centre)]
    if max(via) > 90:
        return None
    budget = max(via[0], via[1]) + BUDGET_SLACK
    gold_then_diamond = (
        _leg(grid, s, gold_corner) + _leg(grid, gold_corner, diamond_corner) + _leg(grid, diamond_corner, e)
    )
    if gold_then_diamond <= budget:  # only this order, only corner to corner: items nearer leak
        return None
    return s, e, gold_corner, diamond_corner, budget


def generate_reference_maze(seed: int) -> ReferenceMaze | None:
    """The reference's maze for ``seed``, or None where the reference rejects the seed."""
    rng = random.Random(seed)
    n = SIZE
    grid = _tile_prim(rng, n)
    _open_loops(rng, grid, rng.randint(18, 28))
    placed = _corners_and_budget(rng, grid)
    if placed is None:
        return None
    s, e, gold_corner, diamond_corner, budget = placed
    grid[s[0]][s[1]], grid[e[0]][e[1]], grid[n // 2][n // 2] = START, EXIT, BONUS
    gold_tiles = [x for x in _zone(gold_corner, n) if grid[x[0]][x[1]] == EMPTY]
    diamond_tiles = [x for x in _zone(diamond_corner, n) if grid[x[0]][x[1]] == EMPTY]
    if len(gold_tiles) < 3 or len(diamond_tiles) < 3:
        return None
    n_gold = rng.randint(3, min(5, len(gold_tiles)))
    n_diamond = rng.randint(3, min(5, len(diamond_tiles)))
    for sym, tiles, k in ((GOLD, gold_tiles, n_gold), (DIAMOND, diamond_tiles, n_diamond)):
        for r, c in rng.sample(tiles, k):
            grid[r][c] = sym
    inner = [(r, c) for r in range(2, n - 2) for c in range(2, n - 2) if grid[r][c] == EMPTY]
    for r, c in rng.sample(inner, min(rng.randint(3, 5), len(inner))):
        grid[r][c] = LAVA
    safe = _distances(grid, s, blocked=WALL + LAVA).get(e)
    if safe is None or safe > budget:  # a lava-free route must fit the budget
        return None
    return ReferenceMaze(tuple("".join(row) for row in grid), budget)


def reference_split(
    n: int, base_seed: int, skip: Iterable[tuple[tuple[str, ...], int]] = ()
) -> list[tuple[int, ReferenceMaze]]:
    """The first ``n`` accepted mazes over seeds ``base_seed, base_seed + 1, ...``, as (seed, maze);
    a maze whose ``(grid, budget)`` is in ``skip`` is passed over like a rejected seed.

    Raises ``RuntimeError`` after ``n * 300`` seeds (the reference returns the short split there)."""
    skip = set(skip)
    out: list[tuple[int, ReferenceMaze]] = []
    seed = base_seed
    while len(out) < n:
        if seed - base_seed >= n * MAX_DRAWS_PER_MAZE:
            raise RuntimeError(
                f"only {len(out)} of {n} reference mazes in {n * MAX_DRAWS_PER_MAZE} seeds from {base_seed}"
            )
        maze = generate_reference_maze(seed)
        if maze is not None and (maze.grid, maze.budget) not in skip:
            out.append((seed, maze))
        seed += 1
    return out


# ---------------------------------------------------------------------------------------------
# the task
# ---------------------------------------------------------------------------------------------


class ReferenceMazeTask(Task):
    """The reference's maze as a :class:`~vpo.tasks.Task` (``vpo.tasks.get("maze", variant="reference")``).

    Options: ``score_mode`` (``convex_bonus``, the reference's generated data, or ``linear``);
    ``seed`` / ``test_seed`` the first seed of the train / test split (42 / 4242, as the reference);
    ``validation_seed`` (default 2121; the reference has no validation split). The grid is always
    9x9 with the reference's generator settings.
    """

    name = "maze"
    variant = "reference"
    objectives = OBJECTIVES
    preferences = dict(PREFERENCES)
    answer_noun = "route"

    def __init__(
        self,
        score_mode: str = "convex_bonus",
        seed: int = SPLIT_SEEDS["train"],
        test_seed: int = SPLIT_SEEDS["test"],
        validation_seed: int = SPLIT_SEEDS["validation"],
    ) -> None:
        if score_mode not in SCORE_MODES:
            raise ValueError(f"maze option score_mode must be one of {SCORE_MODES}, got {score_mode!r}")
        for nm, v in (("seed", seed), ("test_seed", test_seed), ("validation_seed", validation_seed)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise ValueError(f"maze option {nm} must be an integer, got {v!r}")
        self.score_mode = score_mode
        self.seeds = {"train": int(seed), "validation": int(validation_seed), "test": int(test_seed)}
        self._splits: dict[tuple, list[tuple[int, ReferenceMaze]]] = {}

    def load(
        self, split: str = "train", n: int | None = None, seed: int | None = None, *, exclude: Iterable[Example] = ()
    ) -> list[Example]:
        """The first ``n`` accepted mazes of ``split`` (default n: 1000 train, 100 validation and
        test), so ``load(s, 10)`` is a prefix of ``load(s, 100)``. A maze equal to one in
        ``exclude`` is passed over (the reference has no such option). Example keys: id, split,
        seed (the maze's own seed), index (position in the split), grid, budget."""
        if split not in SPLITS:
            raise ValueError(f"maze task has splits {SPLITS}, not {split!r}")
        n = SPLIT_SIZES[split] if n is None else n
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"maze: n must be a non-negative integer, got {n!r}")
        base = self.seeds[split] if seed is None else int(seed)
        skip = frozenset((tuple(e["grid"]), int(e["budget"])) for e in exclude)
        key = (base, int(n), skip)
        if key not in self._splits:
            self._splits[key] = reference_split(int(n), base, skip)
        return [
            {
                "id": f"maze-ref-{split}-{s}",
                "split": split,
                "seed": s,
                "index": i,
                "grid": list(mz.grid),
                "budget": mz.budget,
            }
            for i, (s, mz) in enumerate(self._splits[key])
        ]

    def question(self, example: Example, per_route: bool = False) -> str:
        """The maze, its rules (B included), the move budget (``per_route``: "per route") and the
        count of each kind of tile; the reference's content in this library's own words."""
        mz = ReferenceMaze.from_example(example)
        size, c = len(mz.grid), mz.counts
        budget = f"{mz.budget} moves per route" if per_route else f"{mz.budget} moves"
        return (
            f"Find a way through this {size}x{size} maze from S to E; pick up gold and diamonds and stay off lava.\n\n"
            f"Grid:\n{mz.grid_text()}\n\n"
            "Rules:\n"
            "- Each move is one of UP, DOWN, LEFT, RIGHT. A # is a wall: you cannot walk into it, nor off the grid.\n"
            "- Stepping on G (gold), D (diamond) or B (bonus) collects it; stepping on L (lava) is penalised.\n"
            "- Visiting a B tile multiplies your other scores, so it can be worth a detour.\n"
            "- Your route must end on E, or every score is zero. The route stops at E: items count only if "
            "collected before it.\n"
            f"- You have at most {budget}.\n\n"
            f"Tiles in this maze: {c[GOLD]} G, {c[DIAMOND]} D, {c[LAVA]} L, {c[BONUS]} B."
        )

    def build_prompt(self, example: Example, m: int = 1, weights=None) -> str:
        """The question, an optional goal weighting, then the answer format: ``<answer>`` tags
        for one route, ``<route_1>`` .. ``<route_m>`` tags for m routes (the budget is per route)."""
        parts = [self.question(example, per_route=m > 1).rstrip()]
        if weights is not None:
            parts.append(self.describe_weights(weights))
        if m <= 1:
            parts.append("Write your moves inside <answer>...</answer>, for example <answer>UP UP RIGHT</answer>.")
        else:
            tags = " ".join(f"<route_{i}>...</route_{i}>" for i in range(1, m + 1))
            parts.append(
                f"Think briefly, then give {m} routes from S to E that really differ, each in its own tag: {tags}. "
                "Put only the moves (UP, DOWN, LEFT, RIGHT, separated by spaces) inside a tag and keep any "
                "reasoning outside. Every route is scored on its own and must reach E within the move budget."
            )
        return "\n\n".join(parts)

    def parse(self, completion: str, m: int) -> list[str]:
        """The route strings that hold at least one move: the whole completion when ``m == 1``
        (the reference's single-answer scoring), else :func:`split_routes` (first ``m`` kept)."""
        routes = [completion] if m <= 1 else split_routes(completion, m)
        return [r for r in routes if isinstance(r, str) and extract_moves(r)]

    def canonical(self, answer: str) -> Any:
        """Two routes are the same when they hold the same moves (the reference's dedup)."""
        return extract_moves(answer)

    def score(self, example: Example, answer: str) -> np.ndarray:
        return score_answer(ReferenceMaze.from_example(example), answer, self.score_mode)

    def __repr__(self) -> str:
        return f"ReferenceMazeTask(score_mode={self.score_mode!r})"


__all__ = [
    "BONUS",
    "DIAMOND",
    "EMPTY",
    "EXIT",
    "GOLD",
    "LAVA",
    "SCORE_MODES",
    "START",
    "WALL",
    "ReferenceMaze",
    "ReferenceMazeTask",
    "Walk",
    "extract_moves",
    "generate_reference_maze",
    "reference_split",
    "reward",
    "score_answer",
    "split_routes",
    "walk",
]
