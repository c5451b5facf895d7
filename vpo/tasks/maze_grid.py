"""The maze of the Maze task and its route rules: the grid, an answer's moves, and the reward vector.

A :class:`Maze` is a grid of tiles (``#`` wall, ``.`` floor, ``S``/``E`` start and exit, ``$`` gold,
``*`` diamond, ``~`` lava) plus a move budget. A route is a string over U/D/L/R; a blocked move still
costs a step, and the route stops at E or at the budget. Objectives (docs/method.md §5), each in
[0, 1]: ``completion`` (E reached within the budget, else the whole vector is 0), ``gold`` and
``diamond`` (fraction of that zone's items stepped on) and ``avoid_lava``. :func:`parse_route` and
:func:`run_route` never raise on any input. The generator is :mod:`vpo.tasks.maze_gen`, the task
:mod:`vpo.tasks.maze` (which re-exports everything public here); docs/tasks.md ("Maze") has the
route rules in full.
"""

from __future__ import annotations

import functools
import re
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from vpo._util import positive_int

Cell = tuple[int, int]

OBJECTIVES = ("completion", "gold", "diamond", "avoid_lava")
PREFERENCES: dict[str, tuple[float, ...]] = {
    "gold-first": (0.2, 0.6, 0.0, 0.2),
    "diamond-first": (0.2, 0.0, 0.6, 0.2),
    "lava-averse": (0.2, 0.1, 0.1, 0.6),
}
"""Named weightings over OBJECTIVES that both maze tasks (default and reference) report best@k under."""
WALL, FLOOR, START, EXIT, GOLD, DIAMOND, LAVA = "#", ".", "S", "E", "$", "*", "~"
SYMBOLS = WALL + FLOOR + START + EXIT + GOLD + DIAMOND + LAVA
MOVES: dict[str, Cell] = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}
LEGEND = "S start, E exit, # wall, $ gold, * diamond, ~ lava"
MAX_ROUTE_CHARS = 100_000
"""Answers longer than this (after stripping) are unparseable: no budget needs that many moves."""


# ---------------------------------------------------------------------------------------------
# the maze
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Maze:
    """One maze instance. ``grid``: ``rows`` strings of ``cols`` symbols (see module doc);
    ``budget``: the most moves a route may use to reach E. Positions are (row, col)."""

    grid: tuple[str, ...]
    budget: int
    rows: int = field(init=False)
    cols: int = field(init=False)
    start: Cell = field(init=False)
    exit: Cell = field(init=False)
    gold: tuple[Cell, ...] = field(init=False)
    diamond: tuple[Cell, ...] = field(init=False)
    lava: tuple[Cell, ...] = field(init=False)

    def __post_init__(self) -> None:
        grid = tuple(self.grid)
        if not grid or not all(isinstance(row, str) for row in grid):
            raise ValueError("maze grid must be a non-empty list of strings (one per row)")
        cols = len(grid[0])
        if cols == 0 or any(len(row) != cols for row in grid):
            raise ValueError(
                f"maze grid rows must all have the same non-zero length; got lengths {[len(r) for r in grid]}"
            )
        found: dict[str, list[Cell]] = {s: [] for s in SYMBOLS}
        for r, row in enumerate(grid):
            for c, ch in enumerate(row):
                if ch not in found:
                    raise ValueError(f"maze grid has unknown symbol {ch!r} at row {r}, col {c}; allowed: {SYMBOLS!r}")
                found[ch].append((r, c))
        for s in (START, EXIT):
            if len(found[s]) != 1:
                raise ValueError(f"maze grid needs exactly one {s!r}, found {len(found[s])}")
        positive_int(self.budget, "budget", "maze")
        object.__setattr__(self, "grid", grid)
        object.__setattr__(self, "budget", int(self.budget))
        object.__setattr__(self, "rows", len(grid))
        object.__setattr__(self, "cols", cols)
        object.__setattr__(self, "start", found[START][0])
        object.__setattr__(self, "exit", found[EXIT][0])
        object.__setattr__(self, "gold", tuple(found[GOLD]))
        object.__setattr__(self, "diamond", tuple(found[DIAMOND]))
        object.__setattr__(self, "lava", tuple(found[LAVA]))

    # -- conversions ---------------------------------------------------------------------------
    @classmethod
    def from_example(cls, example: Mapping[str, Any]) -> "Maze":
        """The maze of a task example (only ``grid`` and ``budget`` are read; cached)."""
        try:
            key = (tuple(example["grid"]), int(example["budget"]))
            hash(key)
        except (KeyError, TypeError, ValueError):
            raise ValueError("a maze example is a dict with 'grid' (list of row strings) and 'budget' (int)") from None
        return _maze_cached(*key)

    def render(self, compact: bool = False) -> str:
        """The prompt text: the grid, the budget and (unless ``compact``) a one-line legend.

        Compact is ``rows*(cols+1)`` characters plus ``"max B"``, e.g. 62 characters at 7x7.
        """
        body = "\n".join(self.grid)
        if compact:
            return f"{body}\nmax {self.budget}"
        return (
            f"Maze ({LEGEND}):\n{body}\n"
            f"Go from S to E in at most {self.budget} moves (U/D/L/R, e.g. RRDD). "
            f"Collect $ or *, avoid ~."
        )

    # -- graph helpers (flat index i = row * cols + col) ---------------------------------------
    def index(self, cell: Cell) -> int:
        return cell[0] * self.cols + cell[1]

    @functools.cached_property
    def _graph(self) -> "_Graph":
        return _Graph(self)


@functools.lru_cache(maxsize=4096)
def _maze_cached(grid: tuple[str, ...], budget: int) -> Maze:
    return Maze(grid, budget)


class _Graph:
    """Flat-index adjacency of a maze: ``step[i][k]`` = tile reached by move k from i (itself if
    blocked); ``nbrs[i]`` = (move letter, j) for the unblocked moves."""

    def __init__(self, maze: Maze) -> None:
        R, C = maze.rows, maze.cols
        self.n = R * C
        self.open = [maze.grid[i // C][i % C] != WALL for i in range(self.n)]
        self.step: list[dict[str, int]] = []
        self.nbrs: list[list[tuple[str, int]]] = []
        for i in range(self.n):
            r, c = divmod(i, C)
            st, nb = {}, []
            for mv, (dr, dc) in MOVES.items():
                rr, cc = r + dr, c + dc
                j = rr * C + cc
                if 0 <= rr < R and 0 <= cc < C and self.open[j]:
                    st[mv] = j
                    nb.append((mv, j))
                else:
                    st[mv] = i
            self.step.append(st)
            self.nbrs.append(nb)
        self.start = maze.index(maze.start)
        self.exit = maze.index(maze.exit)
        self.gold = {maze.index(p): k for k, p in enumerate(maze.gold)}
        self.diamond = {maze.index(p): k for k, p in enumerate(maze.diamond)}
        self.lava = {maze.index(p): k for k, p in enumerate(maze.lava)}
        self.dist_to_exit = _bfs(self.nbrs, self.exit)


def _bfs(nbrs: Sequence[Sequence[tuple[str, int]]], src: int, blocked: set[int] | frozenset = frozenset()) -> list[int]:
    """Shortest move counts from ``src`` (-1 where unreachable), never entering ``blocked``."""
    dist = [-1] * len(nbrs)
    dist[src] = 0
    q = deque([src])
    while q:
        i = q.popleft()
        d = dist[i] + 1
        for _, j in nbrs[i]:
            if dist[j] < 0 and j not in blocked:
                dist[j] = d
                q.append(j)
    return dist


# ---------------------------------------------------------------------------------------------
# routes: parsing and scoring
# ---------------------------------------------------------------------------------------------

_ALLOWED = re.compile(r"[udlrpowniefgth\s,;>\-\u2192]*", re.IGNORECASE)
_TOKENS = re.compile(r"(up|down|left|right|[udlr])|[\s,;>\-\u2192]+|(.)", re.IGNORECASE | re.DOTALL)
_WORD = {"up": "U", "down": "D", "left": "L", "right": "R", "u": "U", "d": "D", "l": "L", "r": "R"}
_PAIRS = {'"': '"', "'": "'", "`": "`", "[": "]", "(": ")", "{": "}"}


def parse_route(answer: Any) -> str | None:
    """Moves of an answer as a string over ``UDLR``, or ``None`` when it is not a route.

    Never raises. ``bytes`` are decoded as UTF-8 (invalid bytes make the answer unparseable); any
    other non-string, an empty answer, or one with a character outside the route syntax
    (moves as letters or words, separators, optional quotes or brackets; docs/tasks.md, "Maze") gives
    ``None``.

    >>> parse_route("Up, right, R.")
    'URR'
    >>> parse_route('"U D L R"')
    'UDLR'
    >>> parse_route("go north") is None
    True
    """
    if isinstance(answer, (bytes, bytearray)):
        answer = bytes(answer).decode("utf-8", errors="replace")
    if not isinstance(answer, str):
        return None
    text = answer.strip()
    if len(text) > MAX_ROUTE_CHARS:
        return None
    if text.endswith("."):
        text = text[:-1].rstrip()
    if len(text) >= 2 and text[0] in _PAIRS and text[-1] == _PAIRS[text[0]]:
        text = text[1:-1].strip()
    if not text or _ALLOWED.fullmatch(text) is None:
        return None
    moves = []
    for m in _TOKENS.finditer(text):
        if m.group(2) is not None:
            return None
        if m.group(1) is not None:
            moves.append(_WORD[m.group(1).lower()])
    return "".join(moves) or None


@dataclass(frozen=True)
class RouteOutcome:
    """What a route did. ``moves``: the moves executed (cut at E or at the budget); ``path``: tiles
    stood on after each move (``[len(moves)]``, blocked moves repeat the tile); ``reached``: E reached
    within the budget; ``gold``/``diamond``/``lava``: distinct tiles of each kind stepped on."""

    moves: str
    path: tuple[Cell, ...]
    reached: bool
    gold: frozenset[Cell]
    diamond: frozenset[Cell]
    lava: frozenset[Cell]
    blocked: int

    @property
    def steps(self) -> int:
        return len(self.moves)


def run_route(maze: Maze, moves: str) -> RouteOutcome:
    """Execute ``moves`` (a string over UDLR, e.g. from :func:`parse_route`) in ``maze``."""
    g = maze._graph
    pos = g.start
    path, gold, diamond, lava = [], set(), set(), set()
    used = []
    blocked = 0
    reached = False
    for mv in moves[: maze.budget]:
        nxt = g.step[pos][mv]
        blocked += nxt == pos
        pos = nxt
        used.append(mv)
        path.append(pos)
        if pos in g.gold:
            gold.add(pos)
        elif pos in g.diamond:
            diamond.add(pos)
        elif pos in g.lava:
            lava.add(pos)
        if pos == g.exit:
            reached = True
            break
    C = maze.cols
    cell = lambda i: divmod(i, C)  # noqa: E731
    return RouteOutcome(
        "".join(used),
        tuple(cell(i) for i in path),
        reached,
        frozenset(map(cell, gold)),
        frozenset(map(cell, diamond)),
        frozenset(map(cell, lava)),
        blocked,
    )


def reward_vector(maze: Maze, outcome: RouteOutcome) -> np.ndarray:
    """``[completion, gold, diamond, avoid_lava]`` (float64, in [0, 1]) of an executed route."""
    if not outcome.reached:
        return np.zeros(4)
    frac = lambda got, total: 1.0 if not total else len(got) / len(total)  # noqa: E731
    return np.array(
        [
            1.0,
            frac(outcome.gold, maze.gold),
            frac(outcome.diamond, maze.diamond),
            1.0 - (len(outcome.lava) / len(maze.lava) if maze.lava else 0.0),
        ]
    )


def score_route(maze: Maze, answer: Any) -> np.ndarray:
    """Reward vector ``[4]`` of an answer text; all zero when unparseable. Never raises on the answer."""
    moves = parse_route(answer)
    if moves is None:
        return np.zeros(4)
    return reward_vector(maze, run_route(maze, moves))
