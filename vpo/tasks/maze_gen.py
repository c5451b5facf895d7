"""The Maze task's generator and exact solvers.

Every generated instance is a designed conflict, checked by exact search: a lava-free route fits the
budget and (with ``zones='split'``) no route within the budget visits both zones, so no single route
scores well on everything while a diverse set can. :func:`generate_maze`: a randomized Prim spanning
tree on a tile grid, extra openings, S/E on one diagonal and the item zones on the other corners,
lava, then the budget from the longer single-zone route, redrawn until the conflict holds. Draws use
only ``random.Random.random`` with a per-instance seed, so mazes stay the same across numpy/Python
upgrades. The exact solvers (:func:`pareto_routes`, :func:`reference_routes`) and
:func:`random_route` serve demos, warm starts and tests. Choices the paper leaves open: tile walls,
odd sizes only. docs/tasks.md ("Maze") has the generation steps, options and solver helpers.
"""

from __future__ import annotations


import hashlib
import random
from collections import deque
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from vpo._util import positive_int
from vpo.tasks.maze_grid import (
    DIAMOND,
    EXIT,
    FLOOR,
    GOLD,
    LAVA,
    START,
    WALL,
    Cell,
    Maze,
    _bfs,
    reward_vector,
    run_route,
)

# ---------------------------------------------------------------------------------------------
# configuration
# ---------------------------------------------------------------------------------------------

IntRange = int | tuple[int, int]


def _as_range(value: IntRange, name: str, lo_min: int = 0) -> tuple[int, int]:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        lo = hi = int(value)
    elif isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 2:
        lo, hi = (int(v) for v in value)
    else:
        raise ValueError(f"maze option {name} must be an integer or a (low, high) pair, got {value!r}")
    if lo < lo_min or hi < lo:
        raise ValueError(f"maze option {name}={value!r}: need {lo_min} <= low <= high")
    return lo, hi


@dataclass(frozen=True)
class MazeConfig:
    """Generator options. ``None`` means "scale the paper's 9x9 value to this size" (see fields)."""

    size: int | tuple[int, int] = 9
    """Grid size in tiles: one odd int >= 5 (square) or a (rows, cols) pair of odd ints."""
    extra_openings: IntRange | None = None
    """Walls opened after the spanning tree (int or range); None: 56-88 % of the tree's walls (18-28 at 9x9)."""
    items_per_zone: IntRange = (3, 5)
    """Items in the gold zone and in the diamond zone (drawn per zone)."""
    zone_radius: int = 2
    """Items lie within this Manhattan distance of their zone's corner."""
    lava: IntRange | None = None
    """Lava tiles; None: 3-5 at 9x9, scaled by interior area elsewhere (2-3 at 7x7, 1 at 5x5)."""
    budget_slack: int | None = None
    """Budget = max(route via gold, route via diamond) + this; None: 7 at 9x9, floor(7 (n-1)/8) elsewhere (1 at 5x5)."""
    max_attempts: int = 5000
    """Redraws allowed per instance before giving up with an error (a config that cannot conflict)."""
    zones: str = "split"
    """``split``: gold and diamond zones at opposite corners, and no route within budget visits both
    (the designed conflict); ``shared``: both kinds of item in one corner zone, so a route that
    collects one collects the other and the objectives move together (the control where VPO should
    not help: docs/demo.md)."""

    # -- resolved values -------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, int]:
        s = self.size
        if isinstance(s, (int, np.integer)) and not isinstance(s, bool):
            rows = cols = int(s)
        elif isinstance(s, Sequence) and not isinstance(s, str) and len(s) == 2:
            rows, cols = int(s[0]), int(s[1])
        else:
            raise ValueError(f"maze size must be an odd int or a (rows, cols) pair, got {s!r}")
        if rows < 5 or cols < 5 or rows % 2 == 0 or cols % 2 == 0:
            raise ValueError(
                f"maze size {s!r}: rows and cols must be odd and >= 5 (cells sit on even coordinates "
                f"so that all four corners are cells); try {rows | 1 if rows >= 5 else 5}"
            )
        return rows, cols

    def resolved(self) -> dict[str, Any]:
        """All options as concrete values (ranges as pairs); validates them."""
        rows, cols = self.shape
        n_cells = ((rows + 1) // 2) * ((cols + 1) // 2)
        tree_walls = rows * cols - n_cells - (n_cells - 1)
        if self.extra_openings is None:
            openings = (round(18 * tree_walls / 32), round(28 * tree_walls / 32))
        else:
            openings = _as_range(self.extra_openings, "extra_openings")
        openings = (min(openings[0], tree_walls), min(openings[1], tree_walls))
        r = self.zone_radius
        if not isinstance(r, (int, np.integer)) or isinstance(r, bool) or r < 0 or r >= min(rows, cols) - 1:
            raise ValueError(
                f"maze option zone_radius={r!r}: need 0 <= radius < {min(rows, cols) - 1} "
                f"so that a zone never reaches S or E"
            )
        zone_tiles = (r + 1) * (r + 2) // 2
        items = _as_range(self.items_per_zone, "items_per_zone", lo_min=1)
        if items[1] > zone_tiles:
            raise ValueError(
                f"maze option items_per_zone={self.items_per_zone!r}: a zone of radius {r} has only "
                f"{zone_tiles} tiles; lower items_per_zone or raise zone_radius"
            )
        interior = (rows - 2) * (cols - 2)
        if self.lava is None:
            lo = max(1, round(3 * interior / 49))
            lava = (lo, max(lo, round(5 * interior / 49)))
        else:
            lava = _as_range(self.lava, "lava")
        if self.budget_slack is None:
            # 5x5 is special-cased: with slack 2-3 most draws let a route visit both zones
            slack = 1 if min(rows, cols) == 5 else (7 * (min(rows, cols) - 1)) // 8
        else:
            slack = positive_int(self.budget_slack, "option budget_slack", "maze", minimum=0)
        positive_int(self.max_attempts, "option max_attempts", "maze")
        if self.zones not in ("split", "shared"):
            raise ValueError(f"maze option zones must be 'split' or 'shared', got {self.zones!r}")
        if self.zones == "shared" and 2 * items[1] > zone_tiles:
            raise ValueError(
                f"maze option zones='shared' puts both kinds of item in one zone of {zone_tiles} tiles; "
                f"items_per_zone={self.items_per_zone!r} needs up to {2 * items[1]}: lower it or raise zone_radius"
            )
        return dict(
            rows=rows,
            cols=cols,
            extra_openings=openings,
            items_per_zone=items,
            zone_radius=int(r),
            lava=lava,
            budget_slack=int(slack),
            max_attempts=self.max_attempts,
            zones=self.zones,
        )


# ---------------------------------------------------------------------------------------------
# generation
# ---------------------------------------------------------------------------------------------


class _Draw:
    """Random draws built only on ``random.Random.random()`` (its sequence is guaranteed stable
    across Python versions for an int seed), so generated mazes never change with an upgrade."""

    def __init__(self, seed: int) -> None:
        self._r = random.Random(seed).random

    def below(self, n: int) -> int:
        return min(int(self._r() * n), n - 1)

    def between(self, lo_hi: tuple[int, int]) -> int:
        lo, hi = lo_hi
        return lo + self.below(hi - lo + 1)

    def shuffle(self, xs: list) -> list:
        for i in range(len(xs) - 1, 0, -1):
            j = self.below(i + 1)
            xs[i], xs[j] = xs[j], xs[i]
        return xs


def instance_seed(seed: int, split: str, index: int) -> int:
    """The integer seed of instance ``index`` of ``split`` (a hash, so splits never share streams)."""
    h = hashlib.sha256(f"vpo-maze|{int(seed)}|{split}|{int(index)}".encode()).digest()
    return int.from_bytes(h[:8], "little")


def _zone_tiles(corner: Cell, radius: int, rows: int, cols: int) -> list[int]:
    r0, c0 = corner
    out = []
    for r in range(rows):
        for c in range(cols):
            if abs(r - r0) + abs(c - c0) <= radius:
                out.append(r * cols + c)
    return out


def _tile_nbrs(i: int, R: int, C: int):
    """The up to four tiles next to flat index ``i`` on an R x C grid (walls included)."""
    r, c = divmod(i, C)
    if r > 0:
        yield i - C
    if r < R - 1:
        yield i + C
    if c > 0:
        yield i - 1
    if c < C - 1:
        yield i + 1


def _carve(rnd: _Draw, R: int, C: int, extra_openings: tuple[int, int]) -> bytearray:
    """Steps 1-2: the open tiles (1) of a randomized Prim spanning tree over the cells (even
    coordinates), then extra openings: walls touching an open tile, in random order."""
    N = R * C
    is_open = bytearray(N)
    cells = [r * C + c for r in range(0, R, 2) for c in range(0, C, 2)]
    first = cells[rnd.below(len(cells))]
    is_open[first] = 1
    frontier: list[tuple[int, int]] = []  # (wall tile, new cell)

    def grow(cell: int) -> None:
        r, c = divmod(cell, C)
        for dr, dc in ((-2, 0), (2, 0), (0, -2), (0, 2)):
            rr, cc = r + dr, c + dc
            if 0 <= rr < R and 0 <= cc < C and not is_open[rr * C + cc]:
                frontier.append(((r + dr // 2) * C + c + dc // 2, rr * C + cc))

    grow(first)
    while frontier:
        k = rnd.below(len(frontier))
        frontier[k], frontier[-1] = frontier[-1], frontier[k]
        wall, cell = frontier.pop()
        if is_open[cell]:
            continue
        is_open[wall] = is_open[cell] = 1
        grow(cell)

    target = rnd.between(extra_openings)
    opened = 0
    for w in rnd.shuffle([i for i in range(N) if not is_open[i]]):
        if opened >= target:
            break
        if any(is_open[j] for j in _tile_nbrs(w, R, C)):
            is_open[w] = 1
            opened += 1
    return is_open


def _place_zones(rnd: _Draw, is_open: bytearray, cfg: dict[str, Any]) -> tuple[Cell, Cell, list[int], list[int]] | None:
    """Step 3: S/E on a random diagonal, the gold and diamond zones on the other corners (one corner
    for both with ``zones='shared'``), opening zone tiles where too few are open. ``(S, E, gold
    tiles, diamond tiles)``, or None when a zone cannot hold its items."""
    R, C = cfg["rows"], cfg["cols"]
    corners = [(0, 0), (R - 1, C - 1), (0, C - 1), (R - 1, 0)]
    if rnd.below(2):
        corners = corners[2:] + corners[:2]
    s, e, z1, z2 = corners
    if rnd.below(2):
        s, e = e, s
    if rnd.below(2):
        z1, z2 = z2, z1
    shared = cfg.get("zones", "split") == "shared"
    zones: list[list[int]] = []
    for corner in (z1, z1) if shared else (z1, z2):
        k = rnd.between(cfg["items_per_zone"])
        tiles = _zone_tiles(corner, cfg["zone_radius"], R, C)
        if shared and zones:  # the second kind goes on the zone's tiles the first kind left free
            tiles = [t for t in tiles if t not in zones[0]]
        if sum(is_open[t] for t in tiles) < k:
            for t in rnd.shuffle([t for t in tiles if not is_open[t]]):
                if any(is_open[j] for j in _tile_nbrs(t, R, C)):
                    is_open[t] = 1
                    if sum(is_open[u] for u in tiles) >= k:
                        break
        avail = [t for t in tiles if is_open[t]]
        if len(avail) < k:
            return None
        zones.append(rnd.shuffle(avail)[:k])
    return s, e, zones[0], zones[1]


def _try_generate(rnd: _Draw, cfg: dict[str, Any]) -> Maze | None:
    """One draw of steps 1-6 (module doc); None when the draw fails a check (the caller redraws)."""
    R, C = cfg["rows"], cfg["cols"]
    N = R * C
    is_open = _carve(rnd, R, C, cfg["extra_openings"])
    placed = _place_zones(rnd, is_open, cfg)
    if placed is None:
        return None
    s, e, gold, diamond = placed
    si, ei = s[0] * C + s[1], e[0] * C + e[1]

    # 4. lava on open interior tiles
    taken = {si, ei, *gold, *diamond}
    cand = [i for i in range(N) if is_open[i] and i not in taken and 0 < i // C < R - 1 and 0 < i % C < C - 1]
    n_lava = rnd.between(cfg["lava"])
    if len(cand) < n_lava:
        return None
    lava = rnd.shuffle(cand)[:n_lava]

    grid = [[FLOOR if is_open[r * C + c] else WALL for c in range(C)] for r in range(R)]
    for sym, tiles in ((GOLD, gold), (DIAMOND, diamond), (LAVA, lava), (START, [si]), (EXIT, [ei])):
        for t in tiles:
            grid[t // C][t % C] = sym
    rows = tuple("".join(row) for row in grid)

    # 5-6. budget and the designed-conflict check (exact search)
    lengths = zone_route_lengths(Maze(rows, 1))
    if lengths["gold"] is None or lengths["diamond"] is None:
        return None
    budget = max(lengths["gold"], lengths["diamond"]) + cfg["budget_slack"]
    if lengths["safe"] is None or lengths["safe"] > budget:
        return None
    if cfg.get("zones", "split") != "shared" and lengths["both"] is not None and lengths["both"] <= budget:
        return None
    return Maze(rows, budget)


def zone_route_lengths(maze: Maze) -> dict[str, int | None]:
    """Exact shortest route lengths (moves) from S to E, under the route rules (stops at E):
    ``shortest`` any route, ``gold``/``diamond`` collecting >= 1 item of that zone, ``both``
    collecting >= 1 of each, ``safe`` stepping on no lava. ``None`` where no route exists.

    BFS over (tile, visited-gold, visited-diamond) with E absorbing, plus a BFS that never enters
    lava. The budget is ignored here.
    """
    g = maze._graph
    n = g.n
    # state = tile * 4 + flags (bit 0: some gold collected, bit 1: some diamond collected)
    dist = [-1] * (n * 4)
    s0 = g.start * 4
    dist[s0] = 0
    q = deque([s0])
    while q:
        st = q.popleft()
        tile, flags = divmod(st, 4)
        if tile == g.exit:
            continue
        d = dist[st] + 1
        for _, j in g.nbrs[tile]:
            f = flags | (1 if j in g.gold else 0) | (2 if j in g.diamond else 0)
            nst = j * 4 + f
            if dist[nst] < 0:
                dist[nst] = d
                q.append(nst)
    at_exit = [dist[g.exit * 4 + f] for f in range(4)]

    def best(flag_sets):
        ds = [at_exit[f] for f in flag_sets if at_exit[f] >= 0]
        return min(ds) if ds else None

    safe = _bfs(g.nbrs, g.start, blocked=frozenset(g.lava))[g.exit]
    return {
        "shortest": best((0, 1, 2, 3)),
        "gold": best((1, 3)),
        "diamond": best((2, 3)),
        "both": best((3,)),
        "safe": safe if safe >= 0 else None,
    }


def generate_maze(seed: int, config: MazeConfig | None = None) -> Maze:
    """One designed-conflict maze from an integer seed (deterministic).

    Memoised per process (both arguments and the result are immutable): a generated maze costs
    tens of rejected attempts (exact route search), and a process that loads the same split twice
    (``vpo demo``'s workers run several jobs on the same 1000 training mazes) pays once."""
    cfg = (config or MazeConfig()).resolved()
    key = (int(seed), repr(sorted(cfg.items())))
    maze = _MAZE_CACHE.get(key)
    if maze is None:
        if len(_MAZE_CACHE) >= _MAZE_CACHE_SIZE:
            _MAZE_CACHE.pop(next(iter(_MAZE_CACHE)))  # oldest first
        maze = _MAZE_CACHE[key] = _generate_maze_uncached(int(seed), cfg)
    return maze


_MAZE_CACHE: dict = {}
_MAZE_CACHE_SIZE = 8192


def _generate_maze_uncached(seed: int, cfg: dict) -> Maze:
    rnd = _Draw(seed)
    for _ in range(cfg["max_attempts"]):
        maze = _try_generate(rnd, cfg)
        if maze is not None:
            return maze
    raise RuntimeError(
        f"no designed-conflict maze after {cfg['max_attempts']} attempts with {cfg}: visiting both "
        f"zones keeps fitting the budget or no lava-free route fits. Lower budget_slack, "
        f"zone_radius or lava, or use a larger size."
    )


# ---------------------------------------------------------------------------------------------
# solvers for demos and tests
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    """A route with its reward vector ``[4]`` (completion, gold, diamond, avoid_lava)."""

    moves: str
    reward: np.ndarray

    @property
    def steps(self) -> int:
        return len(self.moves)

    @property
    def target_score(self) -> float:
        """``w*ᵀr`` with the task's uniform ``w*``."""
        return float(np.mean(self.reward))


def _exhaustive(maze: Maze) -> dict[tuple[float, ...], tuple[int, str]]:
    """Every reward vector a route reaching E within budget can get -> (fewest moves, one such route).

    Exact BFS over (tile, gold mask, diamond mask, lava mask), E absorbing, pruned by
    ``moves + distance to E <= budget``. Blocked moves are never needed (staying costs a step).
    """
    g = maze._graph
    ng, nd, nl = len(g.gold), len(g.diamond), len(g.lava)
    gbit = {t: 1 << k for t, k in g.gold.items()}
    dbit = {t: 1 << (ng + k) for t, k in g.diamond.items()}
    lbit = {t: 1 << (ng + nd + k) for t, k in g.lava.items()}
    bit = {**gbit, **dbit, **lbit}
    width = ng + nd + nl
    to_e = g.dist_to_exit
    if to_e[g.start] < 0 or to_e[g.start] > maze.budget:
        return {}
    start = g.start << width  # S holds no item or lava (one symbol per tile)
    seen = {start: (0, -1, "")}  # state -> (moves, parent state, move)
    q = deque([start])
    ends: list[int] = []
    mask_all = (1 << width) - 1
    while q:
        st = q.popleft()
        tile = st >> width
        if tile == g.exit:
            ends.append(st)
            continue
        d = seen[st][0] + 1
        mask = st & mask_all
        for mv, j in g.nbrs[tile]:
            if to_e[j] < 0 or d + to_e[j] > maze.budget:
                continue
            nst = (j << width) | mask | bit.get(j, 0)
            if nst not in seen:
                seen[nst] = (d, st, mv)
                q.append(nst)
    gm, dm, lm = (1 << ng) - 1, ((1 << nd) - 1) << ng, ((1 << nl) - 1) << (ng + nd)
    frac = lambda k, tot: 1.0 if not tot else k / tot  # noqa: E731
    out: dict[tuple[float, ...], tuple[int, str]] = {}
    for st in ends:  # BFS order: the first state giving a vector is a fewest-moves one
        m = st & mask_all
        vec = (
            1.0,
            frac((m & gm).bit_count(), ng),
            frac((m & dm).bit_count(), nd),
            1.0 - (lm and (m & lm).bit_count() / nl),
        )
        if vec in out:
            continue
        moves = []
        cur = st
        while seen[cur][1] >= 0:
            moves.append(seen[cur][2])
            cur = seen[cur][1]
        out[vec] = (seen[st][0], "".join(reversed(moves)))
    return out


def pareto_routes(maze: Maze) -> list[Route]:
    """One fewest-moves route per Pareto-optimal reward vector (exact), best ``w*`` score first.

    A vector is kept when no achievable vector is >= in every component and > in one.
    """
    found = _exhaustive(maze)
    vecs = list(found)
    keep = [v for v in vecs if not any(u != v and all(a >= b for a, b in zip(u, v)) for u in vecs)]
    routes = [Route(found[v][1], np.array(v)) for v in keep]
    routes.sort(key=lambda r: (-r.target_score, r.steps, r.moves))
    return routes


def reference_routes(maze: Maze) -> dict[str, Route]:
    """A few diverse good routes, each the exact optimum of its criterion (ties: fewer moves):

    ``best`` max ``w*ᵀr``; ``gold`` max gold, then avoid_lava; ``diamond`` max diamond, then
    avoid_lava; ``safe`` fewest moves with no lava; ``shortest`` fewest moves. A key is absent when
    no route qualifies (only possible for hand-written mazes).
    """
    found = _exhaustive(maze)
    if not found:
        return {}
    items = [(v, s, mv) for v, (s, mv) in found.items()]
    pick = lambda key: min(items, key=key)  # noqa: E731
    out = {
        "best": pick(lambda x: (-sum(x[0]), x[1], x[2])),
        "gold": pick(lambda x: (-x[0][1], -x[0][3], x[1], x[2])),
        "diamond": pick(lambda x: (-x[0][2], -x[0][3], x[1], x[2])),
        "shortest": pick(lambda x: (x[1], x[2])),
    }
    safe = [x for x in items if x[0][3] == 1.0]
    if safe:
        out["safe"] = min(safe, key=lambda x: (x[1], x[2]))
    return {k: Route(mv, np.array(v)) for k, (v, _, mv) in out.items()}


def random_route(
    maze: Maze, rng: np.random.Generator | random.Random | int | None = None, *, waypoints: int = 2, wander: float = 0.3
) -> Route:
    """A random route that reaches E within the budget (mediocre but valid), for warm-starting.

    Up to ``waypoints`` random intermediate tiles (drawn among those still reachable in budget) are
    visited in turn, then E. Each move heads to the current target along a random shortest path, or
    with probability ``wander`` is any unblocked move that keeps the target and E within budget.
    The route stops at E if it passes there early. ``rng``: a numpy Generator, ``random.Random``,
    or an int seed. Raises ``ValueError`` if E cannot be reached within the budget at all.
    """
    if isinstance(rng, np.random.Generator):
        u = lambda: float(rng.random())  # noqa: E731
    elif isinstance(rng, random.Random):
        u = rng.random
    else:
        u = random.Random(rng).random
    below = lambda n: min(int(u() * n), n - 1)  # noqa: E731
    g = maze._graph
    to_e = g.dist_to_exit
    if to_e[g.start] < 0 or to_e[g.start] > maze.budget:
        raise ValueError(f"E cannot be reached within the budget ({maze.budget}) in this maze")
    pos, t, moves = g.start, 0, []
    n_way = below(waypoints + 1) if waypoints > 0 else 0
    targets: list[int | None] = [None] * n_way + [g.exit]
    for target in targets:
        from_pos = _bfs(g.nbrs, pos)
        if target is None:
            ok = [
                i
                for i in range(g.n)
                if i != g.exit and from_pos[i] >= 0 and to_e[i] >= 0 and t + from_pos[i] + to_e[i] <= maze.budget
            ]
            target = ok[below(len(ok))]
        to_t = _bfs(g.nbrs, target)
        while pos != target:
            if u() < wander:
                opts = [j for _, j in g.nbrs[pos] if t + 1 + to_t[j] + to_e[target] <= maze.budget]
                if not opts:  # cannot happen while the invariant holds; keep the shortest path
                    opts = [j for _, j in g.nbrs[pos] if to_t[j] == to_t[pos] - 1]
            else:
                opts = [j for _, j in g.nbrs[pos] if to_t[j] == to_t[pos] - 1]
            j = opts[below(len(opts))]
            moves.append(next(mv for mv, k in g.nbrs[pos] if k == j))
            pos, t = j, t + 1
            if pos == g.exit:
                break
        if pos == g.exit:
            break
    s = "".join(moves)
    return Route(s, reward_vector(maze, run_route(maze, s)))
