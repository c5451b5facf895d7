"""Tests of the Maze task: hand-worked scores, route rules, parser robustness, generator
invariants checked by an independent exact search written here, splits, and solver helpers."""

from __future__ import annotations

import itertools
import json
import time
from collections import deque

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import vpo.tasks
from vpo.tasks.maze import (
    Maze,
    MazeConfig,
    MazeTask,
    generate_maze,
    parse_route,
    pareto_routes,
    random_route,
    reference_routes,
    run_route,
    score_route,
    zone_route_lengths,
)

# A hand-written 5x5 maze (not a designed conflict; budget 12):
#   row 0  S . $ # E
#   row 1  . # $ # .
#   row 2  . ~ . . .
#   row 3  * # ~ # .
#   row 4  * . . . .
HAND = ("S.$#E", ".#$#.", ".~...", "*#~#.", "*....")
HAND_EX = {"grid": list(HAND), "budget": 12}


@pytest.fixture(scope="module")
def hand() -> Maze:
    return Maze(HAND, 12)


# ------------------------------------------------------------------------------------------
# scoring: hand-worked routes
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "route, expected",
    [
        ("RRDDRRUU", [1, 1, 0, 1]),  # both gold tiles (0,2),(1,2), no lava, 8 moves
        ("DDDDRRRRUUUU", [1, 0, 1, 1]),  # both diamonds, 12 moves = budget exactly
        ("DDRRRRUU", [1, 0, 0, 0.5]),  # through lava (2,1): 1 of 2 lava tiles
        ("DDRRDDRRUUUU", [1, 0, 0, 0]),  # both lava tiles
        ("DDDURRRRUU", [1, 0, 0.5, 0.5]),  # one diamond of two, one lava
        ("DDRLRRRRUU", [1, 0, 0, 0.5]),  # the same lava tile twice counts once
        ("DDDURRUDRRUU", [1, 0.5, 0.5, 0.5]),  # this hand maze lets a route touch both zones
        ("RRDD", [0, 0, 0, 0]),  # never reaches E: everything zero, even the gold collected
        ("DDDDRRRRUUUUL", [1, 0, 1, 1]),  # 13 moves but E is reached at move 12: the rest is ignored
    ],
)
def test_hand_worked_routes(hand, route, expected):
    np.testing.assert_allclose(score_route(hand, route), expected)
    np.testing.assert_allclose(MazeTask().score(HAND_EX, route), expected)


def test_route_stops_at_exit(hand):
    # after E the route walks back through lava and over the diamonds: none of it counts
    base = score_route(hand, "RRDDRRUU")
    for tail in ("DDLLLDL", "DDDDLLLLUU", "L" * 500):
        np.testing.assert_allclose(score_route(hand, "RRDDRRUU" + tail), base)
    out = run_route(hand, "RRDDRRUUDDLL")
    assert out.reached and out.moves == "RRDDRRUU" and out.path[-1] == (0, 4) and out.lava == frozenset()


def test_walls_and_edges_block_and_cost_a_step(hand):
    out = run_route(hand, "RRR")  # (0,3) is a wall: the third move is blocked
    assert out.path == ((0, 1), (0, 2), (0, 2)) and out.blocked == 1
    out = run_route(hand, "UL")  # off the grid from S
    assert out.path == ((0, 0), (0, 0)) and out.blocked == 2
    # RR + k blocked R + DDRRUU uses 8 + k moves; the budget is 12
    for k in range(5):
        np.testing.assert_allclose(score_route(hand, "RR" + "R" * k + "DDRRUU"), [1, 1, 0, 1])
    np.testing.assert_allclose(score_route(hand, "RR" + "R" * 5 + "DDRRUU"), 0)
    # a wall is never entered: pushing down from (0,1) into the wall at (1,1) leaves the agent there
    assert run_route(hand, "RD").path == ((0, 1), (0, 1))


def test_budget_is_inclusive(hand):
    tight = Maze(HAND, 8)
    np.testing.assert_allclose(score_route(tight, "RRDDRRUU"), [1, 1, 0, 1])
    np.testing.assert_allclose(score_route(tight, "RRRDDRRUU"), 0)  # 9 moves with one blocked


# ------------------------------------------------------------------------------------------
# parsing
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "RRDDRRUU",
        "r r d d r r u u",
        "R,R,D,D,R,R,U,U",
        "right right down down right right up up",
        "Right, RIGHT, down,D, r; R -> U -> up",
        "R-R-D-D-R-R-U-U",
        "  rrddrruu\n",
        "[RRDDRRUU]",
        '"RRDDRRUU"',
        "RRDDRRUU.",
        "R\u2192R\u2192D\u2192D\u2192R\u2192R\u2192U\u2192U",
        b"RRDDRRUU",
    ],
)
def test_parse_variants(text):
    assert parse_route(text) == "RRDDRRUU"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "RRX",
        "go right",
        "1. R",
        "R R D D ?",
        "upp",
        "north",
        "<answer>RR</answer>",
        None,
        12,
        ["R"],
        b"\xff\xfe",
        "R" * 100_001,
    ],
)
def test_unparseable_scores_zero(hand, text):
    assert parse_route(text) is None
    np.testing.assert_array_equal(score_route(hand, text), np.zeros(4))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        st.text(max_size=300), st.binary(max_size=300), st.text(alphabet="UDLRudlr ,;->uprightdownleft", max_size=120)
    )
)
def test_any_answer_scores_a_valid_vector(text):
    r = MazeTask().score(HAND_EX, text)
    assert r.shape == (4,) and r.dtype == np.float64
    assert np.all((r >= 0) & (r <= 1))
    assert r[0] in (0.0, 1.0) and (r[0] == 1 or not r.any())


def test_huge_and_binary_answers_never_raise(hand):
    rng = np.random.default_rng(0)
    junk = rng.integers(0, 256, size=2_000_000, dtype=np.uint8).tobytes()
    answers = [
        "U" * 1_000_000,
        "up " * 30_000,
        junk,
        junk.decode("latin-1"),
        "\x00" * 10_000,
        "RRDDRRUU" + "\udcff",
        "R" * 99_000 + "X",
    ]
    t0 = time.perf_counter()
    for a in answers:
        r = score_route(hand, a)
        assert r.shape == (4,) and np.all((r >= 0) & (r <= 1))
    assert time.perf_counter() - t0 < 5.0  # linear parsing; a generous bound for a shared CPU


def _reference_simulate(grid, budget, moves):
    """A straightforward re-implementation of the route rules, for the property test below."""
    rows, cols = len(grid), len(grid[0])
    pos = next((r, c) for r in range(rows) for c in range(cols) if grid[r][c] == "S")
    total = {s: sum(row.count(s) for row in grid) for s in "$*~"}
    got = {s: set() for s in "$*~"}
    for k, mv in enumerate(moves):
        if k == budget:
            return np.zeros(4)
        dr, dc = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}[mv]
        r, c = pos[0] + dr, pos[1] + dc
        if 0 <= r < rows and 0 <= c < cols and grid[r][c] != "#":
            pos = (r, c)
        ch = grid[pos[0]][pos[1]]
        if ch in got:
            got[ch].add(pos)
        if ch == "E":
            return np.array([1, len(got["$"]) / total["$"], len(got["*"]) / total["*"], 1 - len(got["~"]) / total["~"]])
    return np.zeros(4)


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet="UDLR", max_size=20))
def test_scorer_matches_reference_simulation(moves):
    np.testing.assert_allclose(score_route(Maze(HAND, 12), moves), _reference_simulate(HAND, 12, moves))


# ------------------------------------------------------------------------------------------
# generator invariants, checked by an exact search written independently here
# ------------------------------------------------------------------------------------------


def _check_instance(ex, cfg):
    """Assert every designed-conflict invariant of one example; uses only the grid text."""
    grid, budget = ex["grid"], ex["budget"]
    rows, cols = cfg["rows"], cfg["cols"]
    assert len(grid) == rows and all(len(r) == cols for r in grid)
    tiles = {(r, c): ch for r, row in enumerate(grid) for c, ch in enumerate(row)}
    assert set(tiles.values()) <= set("#.SE$*~")
    s, e = _check_layout(tiles, rows, cols, cfg)
    _check_spanning_tree(tiles, s, rows, cols, cfg)
    _check_budget(tiles, s, e, budget, cfg)


def _check_layout(tiles, rows, cols, cfg):
    """S and E in opposite corners, each item zone near one of the other two corners, lava inside;
    returns (S, E)."""
    where = {s: [p for p, ch in tiles.items() if ch == s] for s in "SE$*~"}
    assert len(where["S"]) == 1 and len(where["E"]) == 1
    (s,), (e,) = where["S"], where["E"]
    corners = {(0, 0), (0, cols - 1), (rows - 1, 0), (rows - 1, cols - 1)}
    assert s in corners and e == (rows - 1 - s[0], cols - 1 - s[1])  # opposite corners
    other = corners - {s, e}
    rad = cfg["zone_radius"]
    zone_corner = {}
    for sym in "$*":
        lo, hi = cfg["items_per_zone"]
        assert lo <= len(where[sym]) <= hi
        near = [c for c in other if all(abs(p[0] - c[0]) + abs(p[1] - c[1]) <= rad for p in where[sym])]
        assert len(near) == 1, f"{sym} items not within radius {rad} of one free corner"
        zone_corner[sym] = near[0]
    assert zone_corner["$"] != zone_corner["*"]
    lo, hi = cfg["lava"]
    assert lo <= len(where["~"]) <= hi
    assert all(0 < r < rows - 1 and 0 < c < cols - 1 for r, c in where["~"])  # interior
    return s, e


def _open_neighbours(tiles, p):
    for dr, dc in ((1, 0), (-1, 0), (0, 1), (0, -1)):
        q = (p[0] + dr, p[1] + dc)
        if q in tiles and tiles[q] != "#":
            yield q


def _check_spanning_tree(tiles, s, rows, cols, cfg):
    """Every even-coordinate cell open; everything open connected."""
    assert all(tiles[(r, c)] != "#" for r in range(0, rows, 2) for c in range(0, cols, 2))
    opened = sum(ch != "#" for ch in tiles.values())
    n_cells = ((rows + 1) // 2) * ((cols + 1) // 2)
    assert opened >= 2 * n_cells - 1 + cfg["extra_openings"][0]
    seen, q = {s}, deque([s])
    while q:
        for n in _open_neighbours(tiles, q.popleft()):
            if n not in seen:
                seen.add(n)
                q.append(n)
    assert len(seen) == opened


def _check_budget(tiles, s, e, budget, cfg):
    """The budget is the longer of the two zones' shortest routes plus the slack; no route visits both
    zones within it; a lava-free route fits in it."""
    # exact search over (tile, touched gold, touched diamond); the route stops at E
    dist = {(s, False, False): 0}
    q = deque([(s, False, False)])
    best = {}
    while q:
        state = q.popleft()
        p, hg, hd = state
        if p == e:
            best.setdefault((hg, hd), dist[state])
            continue
        for n in _open_neighbours(tiles, p):
            ns = (n, hg or tiles[n] == "$", hd or tiles[n] == "*")
            if ns not in dist:
                dist[ns] = dist[state] + 1
                q.append(ns)
    via_gold = min(v for (hg, _), v in best.items() if hg)
    via_diamond = min(v for (_, hd), v in best.items() if hd)
    assert budget == max(via_gold, via_diamond) + cfg["budget_slack"]
    assert best.get((True, True), 10**9) > budget, "a route visits both zones within budget"
    # lava-free route within budget
    d = {s: 0}
    q = deque([s])
    while q:
        p = q.popleft()
        for n in _open_neighbours(tiles, p):
            if n not in d and tiles[n] != "~":
                d[n] = d[p] + 1
                q.append(n)
    assert e in d and d[e] <= budget


@pytest.mark.parametrize(
    "options, n",
    [
        ({"size": 7}, 1000),
        ({"size": 5}, 300),
        ({"size": 7, "budget_slack": 0, "lava": (2, 3)}, 300),
        ({"size": (5, 9), "items_per_zone": 2, "zone_radius": 1}, 100),
    ],
)
def test_generator_invariants(options, n):
    task = MazeTask(**options)
    cfg = task.config.resolved()
    examples = task.load("train", n)
    assert len(examples) == n
    for ex in examples:
        _check_instance(ex, cfg)
    assert len({tuple(ex["grid"]) for ex in examples}) == n  # distinct within a split


def test_generator_invariants_paper_size_1000():  # ~4 s: the paper's 9x9 train and test splits
    task = MazeTask()
    cfg = task.config.resolved()
    assert cfg["extra_openings"] == (18, 28) and cfg["lava"] == (3, 5) and cfg["budget_slack"] == 7
    for split in ("train", "test"):
        for ex in task.load(split):
            _check_instance(ex, cfg)


def test_exhaustive_search_agrees_on_conflict():
    # a second exact search (tile x item masks x lava mask): no reachable outcome within budget
    # touches both zones, and a lava-free one exists
    for ex in MazeTask(size=7).load("test", 60):
        routes = pareto_routes(Maze.from_example(ex))
        assert routes
        assert not any(r.reward[1] > 0 and r.reward[2] > 0 for r in routes)
        assert reference_routes(Maze.from_example(ex))["safe"].reward[3] == 1.0


def test_generation_is_fast_and_deterministic():
    task = MazeTask(size=7, budget_slack=0, lava=(2, 3))
    t0 = time.perf_counter()
    a = task.load("train", 1000)
    elapsed = time.perf_counter() - t0
    assert elapsed < 20.0, f"1000 small mazes took {elapsed:.1f}s"  # ~0.3 s on an idle core
    b = MazeTask(size=7, budget_slack=0, lava=(2, 3)).load("train", 50)
    assert a[:50] == b  # same config and seed: identical, and a prefix of the longer load
    c = task.load("train", 50, seed=7)
    assert [x["grid"] for x in c] != [x["grid"] for x in b]


def test_pinned_instance():
    # regression pin: generation must not drift across numpy/Python versions or refactors
    mz = generate_maze(12345, MazeConfig(size=7))
    assert mz.grid == ("..$#..S", "$....#.", "$..#...", ".#.#.#.", ".~...~.", "....#*#", "E...**.")
    assert mz.budget == 17


def test_splits_seeds_and_json():
    task = MazeTask(size=7)
    train, test = task.load("train", 200), task.load("test", 100)
    assert task.seeds == {"train": 42, "validation": 2142, "test": 4242}
    assert not {tuple(x["grid"]) for x in train} & {tuple(x["grid"]) for x in test}
    assert len(task.load("test")) == 100  # the paper's split size by default
    # the same seed in two splits still gives different streams
    assert task.load("train", 5, seed=1)[0]["grid"] != task.load("test", 5, seed=1)[0]["grid"]
    # a saved pool rescores without the generator
    ex = json.loads(json.dumps(test[0]))
    route = reference_routes(Maze.from_example(test[0]))["best"]
    np.testing.assert_allclose(MazeTask().score(ex, route.moves), route.reward)
    # exclude keeps a test split disjoint from a given set
    small = MazeTask(size=5)
    tr = small.load("train", 300)
    te = small.load("test", 50, exclude=tr)
    assert not {tuple(x["grid"]) for x in tr} & {tuple(x["grid"]) for x in te}


# ------------------------------------------------------------------------------------------
# solver helpers
# ------------------------------------------------------------------------------------------


def _brute_force_vectors(mz: Maze) -> set[tuple[float, ...]]:
    """All reward vectors of routes that reach E, by enumerating unblocked move sequences."""
    out = set()

    def dfs(moves):
        o = run_route(mz, moves)
        if o.reached:
            out.add(tuple(score_route(mz, moves)))
            return
        if len(moves) == mz.budget:
            return
        for mv in "UDLR":
            if run_route(mz, moves + mv).blocked == 0:
                dfs(moves + mv)

    dfs("")
    return out


def _pareto(vecs):
    return {v for v in vecs if not any(u != v and all(a >= b for a, b in zip(u, v)) for u in vecs)}


def test_pareto_routes_match_brute_force(hand):
    mazes = [hand] + [Maze.from_example(e) for e in MazeTask(size=5).load("test", 4)]
    for mz in mazes:
        front = pareto_routes(mz)
        assert {tuple(r.reward) for r in front} == _pareto(_brute_force_vectors(mz))
        for r in front:
            np.testing.assert_allclose(score_route(mz, r.moves), r.reward)
        assert [r.target_score for r in front] == sorted((r.target_score for r in front), reverse=True)


def test_reference_routes(hand):
    refs = reference_routes(hand)
    assert set(refs) == {"best", "gold", "diamond", "safe", "shortest"}
    assert refs["best"].moves == "RRDDRRUU" and refs["diamond"].moves == "DDDDRRRRUUUU"
    assert refs["shortest"].steps == 8 and refs["safe"].reward[3] == 1.0
    for ex in MazeTask(size=7).load("test", 30):
        mz = Maze.from_example(ex)
        refs = reference_routes(mz)
        front = pareto_routes(mz)
        for r in refs.values():
            np.testing.assert_allclose(score_route(mz, r.moves), r.reward)
            assert r.reward[0] == 1.0
        assert refs["best"].target_score == pytest.approx(max(r.target_score for r in front))
        assert refs["gold"].reward[1] == max(r.reward[1] for r in front) > 0
        assert refs["diamond"].reward[2] == max(r.reward[2] for r in front) > 0
        assert refs["shortest"].steps == zone_route_lengths(mz)["shortest"]
        assert refs["safe"].steps == zone_route_lengths(mz)["safe"]


def test_random_routes_are_valid_diverse_and_mediocre():
    task = MazeTask(size=7, budget_slack=0, lava=(2, 3))
    rng = np.random.default_rng(0)
    gaps = []
    for ex in task.load("train", 60):
        mz = Maze.from_example(ex)
        routes = [random_route(mz, rng) for _ in range(8)]
        for r in routes:
            assert r.steps <= mz.budget
            np.testing.assert_allclose(task.score(ex, r.moves), r.reward)
            assert r.reward[0] == 1.0  # always reaches E within budget
        gaps.append(reference_routes(mz)["best"].target_score - np.mean([r.target_score for r in routes]))
    assert np.mean(gaps) > 0.05  # clearly below the optimum on average
    mz = Maze.from_example(task.load("train", 1)[0])
    draws = [random_route(mz, np.random.default_rng(s)) for s in range(60)]
    assert len({r.moves for r in draws}) >= 20 and len({tuple(r.reward) for r in draws}) >= 3
    assert random_route(mz, 5).moves == random_route(mz, 5).moves  # seeded
    with pytest.raises(ValueError, match="budget"):
        random_route(Maze(HAND, 3), 0)


# ------------------------------------------------------------------------------------------
# task API, rendering, errors
# ------------------------------------------------------------------------------------------


def test_task_registry_prompt_and_batch_scoring():
    task = vpo.tasks.get("maze", size=7, compact=True)
    assert isinstance(task, MazeTask) and task.objectives == ("completion", "gold", "diamond", "avoid_lava")
    np.testing.assert_allclose(task.target_weights, 0.25)
    ex = task.load("test", 1)[0]
    q = task.question(ex)
    assert q == "\n".join(ex["grid"]) + f"\nmax {ex['budget']}" and len(q) <= 62
    full = MazeTask(size=7).question(ex)
    assert "\n".join(ex["grid"]) in full and str(ex["budget"]) in full and "lava" in full
    assert "<answer_3>" in task.build_prompt(ex, m=3)
    tags = vpo.tasks.get("maze", size=7, compact=True, instruction="tags")
    assert tags.build_prompt(ex, m=3) == q + "\n\n<answer_1>..<answer_3>"
    assert tags.build_prompt(ex, m=1) == q + "\n\n<answer>"
    with pytest.raises(ValueError, match="instruction must be 'full', 'short' or 'tags'"):
        vpo.tasks.get("maze", size=7, instruction="terse")
    refs = reference_routes(Maze.from_example(ex))
    g, d = refs["gold"].moves, refs["diamond"].moves
    spaced = ",".join(g.lower())
    completions = [
        f"think <answer_1>{g}</answer_1><answer_2>{spaced}</answer_2><answer_3>{d}</answer_3>",
        "<answer_1>no idea</answer_1>",
    ]
    batch = task.score_completions([ex, ex], completions, m=3)
    assert batch.rewards.shape == (2, 3, 4)
    assert batch.valid.tolist() == [[True, True, False], [True, False, False]]  # g == spaced: deduped
    np.testing.assert_allclose(batch.rewards[0, 0], refs["gold"].reward)
    np.testing.assert_allclose(batch.rewards[0, 1], refs["diamond"].reward)
    np.testing.assert_allclose(batch.rewards[1], 0)
    assert batch.score_errors == 0


@pytest.mark.parametrize(
    "options, match",
    [
        ({"size": 6}, "odd"),
        ({"size": 3}, "odd"),
        ({"zone_radius": 8}, "zone_radius"),
        ({"items_per_zone": 7}, "items_per_zone"),
        ({"budget_slack": -1}, "budget_slack"),
        ({"lava": (4, 2)}, "lava"),
        ({"extra_openings": "many"}, "extra_openings"),
        ({"seed": 1.5}, "seed"),
    ],
)
def test_bad_options_are_clear(options, match):
    with pytest.raises(ValueError, match=match):
        MazeTask(**options)


def test_impossible_config_and_bad_inputs():
    with pytest.raises(RuntimeError, match="budget_slack"):
        MazeTask(size=5, budget_slack=12, max_attempts=30).load("train", 1)
    with pytest.raises(ValueError, match="splits"):
        MazeTask().load("dev", 1)
    with pytest.raises(ValueError, match="maze: n must be a non-negative integer"):
        MazeTask().load("train", -1)
    with pytest.raises(ValueError, match="exactly one 'E'"):
        Maze(("S....",), 3)
    with pytest.raises(ValueError, match="unknown symbol"):
        Maze(("S.?.E",), 3)
    with pytest.raises(ValueError, match="'grid'"):
        MazeTask().score({"budget": 3}, "R")


def test_every_length_is_exact_on_hand_maze(hand):
    lengths = zone_route_lengths(hand)
    assert lengths == {"shortest": 8, "gold": 8, "diamond": 10, "both": 12, "safe": 8}
    # cross-check "both" by brute force over all unblocked routes up to 12 moves
    vecs = _brute_force_vectors(hand)
    assert any(v[1] > 0 and v[2] > 0 for v in vecs)
    assert not any(v[1] > 0 and v[2] > 0 for v in _brute_force_vectors(Maze(HAND, 11)))
    # routes stop at E, so a zone behind E cannot be visited
    behind = zone_route_lengths(Maze(("S.E$*",), 9))
    assert behind == {"shortest": 2, "gold": None, "diamond": None, "both": None, "safe": 2}
    assert [tuple(r.reward) for r in pareto_routes(Maze(("S.E$*",), 9))] == [(1.0, 0.0, 0.0, 1.0)]
    # the product over all 4-letter strings of length <= 6 never reaches E (shortest is 8)
    assert all(not run_route(hand, "".join(p)).reached for p in itertools.product("UDLR", repeat=6))
