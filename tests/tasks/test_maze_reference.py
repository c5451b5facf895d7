"""The reference variant of the maze (vpo.tasks.maze_reference): the authors' convex_bonus scoring, route
syntax, route-splitting fallbacks and generator rules, with every expected vector worked out by hand.

The generator and scorer were also checked offline against the authors' released code (identical
mazes on 3,200 seeds, identical score matrices on 17,408 completions; docs/paper_tasks.md, "Maze");
these tests pin what that check established, with searches and distances written here.
"""

from __future__ import annotations

import json
import random
from collections import deque

import numpy as np
import pytest

import vpo.tasks
from vpo.search import Pool, evaluate_pool, generate_pool, load_pool
from vpo.search.backends import Generation
from vpo.tasks.maze import MazeTask
from vpo.tasks.maze_gen import random_route
from vpo.tasks.maze_grid import reward_vector, run_route
from vpo.tasks.maze_reference import (
    ReferenceMaze,
    ReferenceMazeTask,
    extract_moves,
    generate_reference_maze,
    reward,
    score_answer,
    split_routes,
    walk,
)

WORD = {"U": "UP", "D": "DOWN", "L": "LEFT", "R": "RIGHT"}


def words(moves: str) -> str:
    return " ".join(WORD[c] for c in moves)


# ------------------------------------------------------------------------------------------
# fixture 1: a hand-made 5x5 maze. 3 gold (G), 2 diamonds (D), 2 lava (L), the bonus B in the middle.
# ------------------------------------------------------------------------------------------
HAND = (
    "SGG..",  # row 0: S (0,0), gold (0,1), (0,2)
    ".#.#.",  # walls (1,1), (1,3)
    "L.B..",  # lava (2,0), bonus (2,2)
    ".#.#D",  # walls (3,1), (3,3), diamond (3,4)
    "G.LDE",  # gold (4,0), lava (4,2), diamond (4,3), exit (4,4)
)


@pytest.fixture
def hand():
    return ReferenceMaze(HAND, 9)


HAND_ROUTES = [
    # moves, convex_bonus vector, linear vector
    # R R R R D D D D: (0,1)G (0,2)G (0,3) (0,4) (1,4) (2,4) (3,4)D (4,4)E; 2/3 gold, 1/2 diamonds, no lava, no B
    #   convex: gold (2/3)^2 = 4/9, diamond (1/2)^2 = 1/4, avoid_lava 1^2 = 1
    ("RRRRDDDD", [1, 4 / 9, 1 / 4, 1], [1, 2 / 3, 1 / 2, 1]),
    # R R D D R R D D: (0,1)G (0,2)G (1,2) (2,2)B (2,3) (2,4) (3,4)D (4,4)E; same items plus B
    #   convex x1.5: gold 1.5 * 4/9 = 2/3, diamond 1.5 * 1/4 = 3/8, avoid_lava 1.5 * 1 = 1.5 -> capped at 1
    ("RRDDRRDD", [1, 2 / 3, 3 / 8, 1], [1, 2 / 3, 1 / 2, 1]),
    # D D R R D D R R: (1,0) (2,0)L (2,1) (2,2)B (3,2) (4,2)L (4,3)D (4,4)E; no gold, 1/2 diamonds, both lava
    #   convex x1.5: gold 0, diamond 3/8, avoid_lava 1.5 * (1 - 2/2)^2 = 0
    ("DDRRDDRR", [1, 0, 3 / 8, 0], [1, 0, 1 / 2, 0]),
    # D D R R R R D D: (1,0) (2,0)L (2,1) (2,2)B (2,3) (2,4) (3,4)D (4,4)E; one lava of two
    #   convex x1.5: diamond 3/8, avoid_lava 1.5 * (1/2)^2 = 3/8
    ("DDRRRRDD", [1, 0, 3 / 8, 3 / 8], [1, 0, 1 / 2, 1 / 2]),
    # D D D D R R R R: (1,0) (2,0)L (3,0) (4,0)G (4,1) (4,2)L (4,3)D (4,4)E; 1/3 gold, no B
    #   convex: gold (1/3)^2 = 1/9, diamond 1/4, avoid_lava 0
    ("DDDDRRRR", [1, 1 / 9, 1 / 4, 0], [1, 1 / 3, 1 / 2, 0]),
    # R D R D D R R D D: the D at (0,1) hits the wall (1,1): it costs a step, so 9 moves = the budget
    #   tiles (0,1)G (0,1) (0,2)G (1,2) (2,2)B (2,3) (2,4) (3,4)D (4,4)E: as route 2
    ("RDRDDRRDD", [1, 2 / 3, 3 / 8, 1], [1, 2 / 3, 1 / 2, 1]),
    # route 1 then L U: the walk ends on E, later moves are ignored
    ("RRRRDDDDLU", [1, 4 / 9, 1 / 4, 1], [1, 2 / 3, 1 / 2, 1]),
    # 10 moves, budget 9: R R D D U D R R D run and end on (3,4); the 10th (onto E) never runs: all zero
    ("RRDDUDRRDD", [0, 0, 0, 0], [0, 0, 0, 0]),
    # stops short of E: all zero whatever it collected
    ("RRDD", [0, 0, 0, 0], [0, 0, 0, 0]),
]


@pytest.mark.parametrize("moves, convex, linear", HAND_ROUTES)
def test_hand_worked_routes_convex_bonus_and_linear(hand, moves, convex, linear):
    text = words(moves)
    np.testing.assert_allclose(score_answer(hand, text), convex, rtol=0, atol=1e-15)
    np.testing.assert_allclose(score_answer(hand, text, "linear"), linear, rtol=0, atol=1e-15)
    task = ReferenceMazeTask()
    np.testing.assert_allclose(task.score({"grid": list(HAND), "budget": 9}, text), convex, rtol=0, atol=1e-15)


def test_walk_counts_distinct_tiles_and_blocked_moves(hand):
    w = walk(hand, "RRDDUDRRD")  # B at (2,2) is visited twice (R R D D U D): counted once
    assert (w.steps, w.reached, w.gold, w.diamond, w.lava, w.bonus) == (9, False, 2, 1, 0, 1)
    w = walk(hand, "ULRRRRDDDD")  # U and L from S are blocked (off the grid) but each costs a step
    assert (w.steps, w.reached) == (9, False)
    assert walk(ReferenceMaze(HAND, 10), "ULRRRRDDDD").reached
    np.testing.assert_allclose(score_answer(hand, ""), 0)


def test_no_gold_scores_zero_unlike_the_default_variant():
    # fixture 2: S, one diamond, E on a row; no gold, no lava, no B
    maze = ReferenceMaze(("SD.E",), 3)
    # R R R: (0,1)D (0,2) (0,3)E. gold: none in the maze -> 0 (the reference's rule); diamond 1/1;
    # avoid_lava: no lava -> 1. Convex: 0, 1^2 = 1, 1^2 = 1
    np.testing.assert_array_equal(score_answer(maze, "RIGHT RIGHT RIGHT"), [1, 0, 1, 1])
    np.testing.assert_array_equal(score_answer(maze, "RIGHT RIGHT RIGHT", "linear"), [1, 0, 1, 1])
    # the default variant scores a missing kind 1
    np.testing.assert_array_equal(
        reward_vector(maze.as_default_maze(), run_route(maze.as_default_maze(), "RRR")), [1, 1, 1, 1]
    )


# ------------------------------------------------------------------------------------------
# fixture 3: the reference's maze for seed 42 (the first train maze), pinned
# ------------------------------------------------------------------------------------------
SEED42 = (
    "S.....DDD",  # S (0,0); diamonds (0,6) (0,7) (0,8)
    ".......D.",  # diamond (1,7)
    "....L...#",  # lava (2,4); wall (2,8)
    ".........",
    "....B....",  # bonus (4,4)
    "#..L.....",  # wall (5,0); lava (5,3)
    "G.....L..",  # gold (6,0); lava (6,6)
    "GG.......",  # gold (7,0) (7,1)
    "GG......E",  # gold (8,0) (8,1); exit (8,8)
)
SEED42_ROUTES = [
    # R x7 -> (0,6)D (0,7)D; D (1,7)D; D (2,7); D (3,7); R (3,8); D x5 -> (8,8)E. 16 moves <= 25.
    #   diamonds 3/4: convex (3/4)^2 = 9/16, linear 3/4; no gold; no lava; no B
    ("RRRRRRRDDDRDDDDD", [1, 0, 9 / 16, 1], [1, 0, 3 / 4, 1]),
    # D x4 -> (4,0); R x4 -> (4,4)B; D x4 -> (8,4); R x4 -> (8,8)E: only B; avoid_lava 1.5 * 1 capped at 1
    ("DDDDRRRRDDDDRRRR", [1, 0, 0, 1], [1, 0, 0, 1]),
    # D x4 -> (4,0); D blocked by the wall (5,0); R (4,1); D D -> (6,1); L (6,0)G; D (7,0)G; R (7,1)G;
    # D (8,1)G; R x7 -> (8,8)E. 19 moves. gold 4/5: convex 16/25, linear 4/5
    ("DDDDDRDDLDRDRRRRRRR", [1, 16 / 25, 0, 1], [1, 4 / 5, 0, 1]),
    # R x4 -> (0,4); D x4 -> (1,4) (2,4)L (3,4) (4,4)B; D x4 -> (8,4); R x4 -> E. one lava of 3:
    #   convex 1.5 * (2/3)^2 = 2/3, linear 2/3
    ("RRRRDDDDDDDDRRRR", [1, 0, 0, 2 / 3], [1, 0, 0, 2 / 3]),
]


def test_generator_reproduces_the_pinned_reference_maze():
    maze = generate_reference_maze(42)
    assert maze.grid == SEED42 and maze.budget == 25
    assert maze.counts == {"G": 5, "D": 4, "L": 3, "B": 1}
    ex = ReferenceMazeTask().load("train", 1)[0]
    assert ex["grid"] == list(SEED42) and ex["seed"] == 42 and ex["budget"] == 25
    assert "\n".join(" ".join(r) for r in SEED42) in ReferenceMazeTask().question(ex)


@pytest.mark.parametrize("moves, convex, linear", SEED42_ROUTES)
def test_pinned_maze_routes(moves, convex, linear):
    maze = ReferenceMaze(SEED42, 25)
    np.testing.assert_allclose(score_answer(maze, words(moves)), convex, rtol=0, atol=1e-15)
    np.testing.assert_allclose(score_answer(maze, words(moves).lower(), "linear"), linear, rtol=0, atol=1e-15)


# ------------------------------------------------------------------------------------------
# route syntax and the fallbacks
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, moves",
    [
        ("UP right, Down -> left.", "URDL"),
        ("I won't go UP; I go RIGHT", "UR"),  # words in prose count: the reference reads every one
        ("U R D L", ""),  # letters are not moves here
        ("UPRIGHT upward DOWNS UP_LEFT", ""),  # whole words only (_ is a word character)
        ("LEFT <answer>UP DOWN</answer> RIGHT <answer>LEFT</answer>", "UD"),  # the first <answer> body wins
        ("<ANSWER>\nright\n</Answer>", "R"),
        (b"DOWN \xff UP", "DU"),
        (None, ""),
        (17, ""),
    ],
)
def test_extract_moves(text, moves):
    assert extract_moves(text) == moves


@pytest.mark.parametrize(
    "completion, m, routes",
    [
        # 1. route tags, any case, in number order; missing numbers are skipped (later routes move up)
        ("x <route_2>DOWN</route_2> <ROUTE_1>UP</ROUTE_1>", 3, ["UP", "DOWN", ""]),
        ("<route_2>LEFT</route_2><route_3>UP</route_3>", 3, ["LEFT", "UP", ""]),
        ("<route_1>A</route_1><route_1>B</route_1>", 2, ["A", ""]),  # the first match of a number
        # one tag is enough to stop the fallbacks, even with --- or <answer> around
        ("<route_1>UP</route_1> --- DOWN --- LEFT", 3, ["UP", "", ""]),
        # tags above m are ignored: here none is in 1..2, so the --- split applies
        ("<route_3>UP</route_3> --- DOWN", 2, ["<route_3>UP</route_3>", "DOWN"]),
        # 2. a split on --- with at least two non-blank parts (stripped), cut to m
        ("UP RIGHT\n---\nDOWN\n---\n\n---\nLEFT\n---\nUP", 3, ["UP RIGHT", "DOWN", "LEFT"]),
        ("---- UP", 2, ["---- UP", ""]),  # parts "" and "- UP": one non-blank part, so the whole text
        # --- comes before <answer>: two parts, the first holding both answer tags
        (
            "<answer>UP</answer> <answer>DOWN</answer> --- LEFT",
            3,
            ["<answer>UP</answer> <answer>DOWN</answer>", "LEFT", ""],
        ),
        # 3. at least two <answer> bodies
        ("<answer>UP</answer> or <Answer>DOWN</answer>", 3, ["UP", "DOWN", ""]),
        # 4. else the whole response is route 1 (a single <answer> included)
        ("go LEFT <answer>UP</answer>", 2, ["go LEFT <answer>UP</answer>", ""]),
        ("UP DOWN", 3, ["UP DOWN", "", ""]),
    ],
)
def test_split_routes_fallbacks(completion, m, routes):
    assert split_routes(completion, m) == routes


def test_single_answer_tag_scores_only_its_body(hand):
    # the whole completion is route 1, and extract_moves then reads only the <answer> body
    text = "I could go DOWN but " + f"<answer>{words('RRDDRRDD')}</answer>"
    np.testing.assert_allclose(score_answer(hand, split_routes(text, 3)[0]), [1, 2 / 3, 3 / 8, 1])


def test_score_completions_dedup_drop_and_pad(hand):
    task = vpo.tasks.get("maze", variant="reference")
    ex = {"grid": list(HAND), "budget": 9}
    r1, r2, r3 = words("RRRRDDDD"), words("RRDDRRDD"), words("DDRRDDRR")
    completions = [
        # route 2 repeats route 1's moves in other words: a duplicate; route 3 has no moves: dropped
        f"think <route_1>{r1}</route_1><route_2>{r1.lower().replace(' ', ', ')}</route_2><route_3>none</route_3>",
        # route 1 has no moves, so route 2 and 3 take slots 0 and 1 (the reference's order)
        f"<route_1>hmm</route_1><route_2>{r2}</route_2><route_3>{r3}</route_3>",
        f"{r2}\n---\n{r3}\n---\n{r1}",  # the --- fallback
        "no moves at all",
    ]
    batch = task.score_completions([ex] * 4, completions, m=3)
    assert batch.valid.tolist() == [[True, False, False], [True, True, False], [True, True, True], [False] * 3]
    np.testing.assert_allclose(batch.rewards[0], [[1, 4 / 9, 1 / 4, 1], [0] * 4, [0] * 4])
    np.testing.assert_allclose(batch.rewards[1], [[1, 2 / 3, 3 / 8, 1], [1, 0, 3 / 8, 0], [0] * 4])
    np.testing.assert_allclose(batch.rewards[2], [[1, 2 / 3, 3 / 8, 1], [1, 0, 3 / 8, 0], [1, 4 / 9, 1 / 4, 1]])
    assert batch.num_parsed.tolist() == [2, 2, 3, 0] and batch.num_duplicates == 1
    # m = 1 scores the whole completion (the reference's single-answer path), route tags or not
    one = task.score_completions([ex], [f"<route_1>{r1}</route_1> then <route_2>LEFT</route_2>"], m=1)
    # moves R R R R D D D D L: the walk ends on E after 8, the L is never run
    np.testing.assert_allclose(one.rewards[0, 0], [1, 4 / 9, 1 / 4, 1])


# ------------------------------------------------------------------------------------------
# the generator's rules, checked with distances computed here
# ------------------------------------------------------------------------------------------


def _dist(grid, src, blocked="#"):
    n = len(grid)
    dist = {src: 0}
    q = deque([src])
    while q:
        r, c = q.popleft()
        for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
            rr, cc = r + dr, c + dc
            if 0 <= rr < n and 0 <= cc < n and grid[rr][cc] not in blocked and (rr, cc) not in dist:
                dist[(rr, cc)] = dist[(r, c)] + 1
                q.append((rr, cc))
    return dist


def _cells(grid, sym):
    return [(r, c) for r, row in enumerate(grid) for c, ch in enumerate(row) if ch == sym]


def test_generator_rules_on_the_first_train_mazes():
    exs = ReferenceMazeTask().load("train", 80)
    assert [e["seed"] for e in exs] == sorted({e["seed"] for e in exs}) and exs[0]["seed"] == 42
    # the seeds the reference rejects (same set from its own code, checked offline): any change to a
    # rule or to the order of the random draws moves this set
    rejected = set(range(42, exs[-1]["seed"] + 1)) - {e["seed"] for e in exs}
    assert sorted(rejected) == [53, 56, 58, 63, 65, 77, 85, 90, 94, 97, 100, 129]
    corners = {(0, 0), (0, 8), (8, 0), (8, 8)}
    for ex in exs:
        g = ex["grid"]
        (s,), (e,) = _cells(g, "S"), _cells(g, "E")
        assert s[0] == 0 and s in corners and e == (8 - s[0], 8 - s[1])  # S on the top row, E opposite
        assert _cells(g, "B") == [(4, 4)]
        lava = _cells(g, "L")
        assert 3 <= len(lava) <= 5 and all(2 <= r <= 6 and 2 <= c <= 6 for r, c in lava)
        zone = {}
        for sym in "GD":
            items = _cells(g, sym)
            near = [k for k in corners - {s, e} if all(abs(r - k[0]) + abs(c - k[1]) <= 2 for r, c in items)]
            assert 3 <= len(items) <= 5 and len(near) == 1
            zone[sym] = near[0]
        assert zone["G"] != zone["D"]
        d = {x: _dist(g, x) for x in (s, zone["G"], zone["D"], (4, 4))}
        via = {k: d[zone[k]][s] + d[zone[k]][e] for k in "GD"}
        assert ex["budget"] == max(via.values()) + 7  # measured to the corner tiles
        assert d[(4, 4)][s] + d[(4, 4)][e] <= 90
        # the conflict filter: only S -> gold corner -> diamond corner -> E must exceed the budget
        assert d[s][zone["G"]] + d[zone["G"]][zone["D"]] + d[zone["D"]][e] > ex["budget"]
        assert _dist(g, s, blocked="#L")[e] <= ex["budget"]  # a lava-free route fits


def _route_touching_both(grid, budget):
    """Exact BFS over (tile, some gold yet, some diamond yet), E absorbing, within the budget: the
    fewest moves reaching E after touching both zones, or None."""
    n = len(grid)
    (s,) = _cells(grid, "S")
    start = (s, False, False)
    prev = {start: None}
    q = deque([(start, 0)])
    while q:
        st, k = q.popleft()
        (r, c), hg, hd = st
        if grid[r][c] == "E":
            if hg and hd:
                path = []
                while prev[st] is not None:
                    st, mv = prev[st]
                    path.append(mv)
                return "".join(reversed(path))
            continue
        if k == budget:
            continue
        for mv, (dr, dc) in {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}.items():
            rr, cc = r + dr, c + dc
            if 0 <= rr < n and 0 <= cc < n and grid[rr][cc] != "#":
                nst = ((rr, cc), hg or grid[rr][cc] == "G", hd or grid[rr][cc] == "D")
                if nst not in prev:
                    prev[nst] = (st, mv)
                    q.append((nst, k + 1))
    return None


def test_the_conflict_filter_leaks():
    task = ReferenceMazeTask()
    exs = task.load("train", 100)
    leaks = [(ex, _route_touching_both(ex["grid"], ex["budget"])) for ex in exs]
    leaks = [(ex, mv) for ex, mv in leaks if mv is not None]
    # 465 of the 1000 train mazes leak (docs/paper_tasks.md); 51 of the first 100 (the default
    # variant's exact search, zone_route_lengths on as_default_maze(), finds the same 51)
    assert len(leaks) == 51
    ex, moves = leaks[0]
    vec = task.score(ex, words(moves))
    assert len(moves) <= ex["budget"] and vec[0] == 1 and vec[1] > 0 and vec[2] > 0
    # the default variant never lets a route within budget touch both zones (its filter is exact)
    from vpo.tasks.maze import Maze, zone_route_lengths

    for e in MazeTask().load("train", 30):
        lengths = zone_route_lengths(Maze.from_example(e))
        assert lengths["both"] is None or lengths["both"] > e["budget"]


def test_linear_mode_agrees_with_the_default_scorer():
    # B is floor for the default variant; generated mazes always hold gold, diamonds and lava, so
    # the only difference of the linear mode (a missing kind scores 0, not 1) never arises
    rng = random.Random(0)
    task = ReferenceMazeTask(score_mode="linear")
    differ = 0
    for ex in task.load("train", 30):
        mz = ReferenceMaze.from_example(ex)
        dm = mz.as_default_maze()
        routes = [random_route(dm, rng).moves for _ in range(20)]
        routes += ["".join(rng.choice("UDLR") for _ in range(rng.randrange(1, mz.budget + 3))) for _ in range(10)]
        for mv in routes:
            default = reward_vector(dm, run_route(dm, mv))
            np.testing.assert_array_equal(task.score(ex, words(mv)), default)
            differ += not np.array_equal(reward(mz, walk(mz, mv), "convex_bonus"), default)
    assert differ > 100  # convex_bonus does change most completed routes


def test_splits_options_and_errors():
    task = vpo.tasks.get("maze", variant="reference", seed=7, score_mode="linear")
    assert isinstance(task, ReferenceMazeTask) and task.score_mode == "linear"
    assert [e["seed"] for e in task.load("train", 3)][0] >= 7
    ten = task.load("test", 10)
    assert ten == task.load("test", 20)[:10] and ten[0]["seed"] >= 4242
    val = task.load("validation", 5)
    assert {e["seed"] for e in val}.isdisjoint(e["seed"] for e in ten) and val[0]["seed"] >= 2121
    assert [e["seed"] for e in task.load("test", 3, exclude=ten[:1])] == [e["seed"] for e in ten[1:4]]
    json.dumps(ten)
    assert isinstance(MazeTask(variant="reference"), ReferenceMazeTask)
    assert type(vpo.tasks.get("maze", variant="default", size=7)) is MazeTask
    with pytest.raises(ValueError, match="variant must be 'default' or 'reference'"):
        vpo.tasks.get("maze", variant="paper")
    with pytest.raises(ValueError, match=r"takes only the options score_mode.*remove \['size'\]"):
        vpo.tasks.get("maze", variant="reference", size=7)
    with pytest.raises(ValueError, match="score_mode"):
        vpo.tasks.get("maze", variant="reference", score_mode="convex")
    with pytest.raises(ValueError, match="splits"):
        task.load("dev", 1)
    with pytest.raises(ValueError, match="unknown symbol"):
        ReferenceMaze(("S$E",), 3)
    with pytest.raises(ValueError, match="'grid'"):
        task.score({"budget": 3}, "UP")


def test_prompts_mention_b_and_route_tags():
    task = ReferenceMazeTask()
    ex = task.load("test", 1)[0]
    one, three = task.build_prompt(ex, m=1), task.build_prompt(ex, m=3)
    for p in (one, three):
        assert "B (bonus)" in p and "multiplies" in p and "1 B." in p and " ".join(ex["grid"][0]) in p
    assert "<answer>UP UP RIGHT</answer>" in one and f"at most {ex['budget']} moves." in one
    assert "<route_1>...</route_1> <route_2>...</route_2> <route_3>...</route_3>" in three
    assert f"at most {ex['budget']} moves per route" in three and "<answer>" not in three


# ------------------------------------------------------------------------------------------
# through the normal Task interface: a pool scored and evaluated as `vpo eval` does
# ------------------------------------------------------------------------------------------


class ScriptedGenerator:
    """Test-only generation backend (named as such): returns fixed completions in turn."""

    name = "scripted"

    def __init__(self, texts):
        self.texts = list(texts)
        self.prompts = []

    def format(self, prompt, system):
        return prompt

    def generate(self, prompts, n, seed=0):
        self.prompts += prompts
        return [[Generation(self.texts.pop(0), 10.0) for _ in range(n)] for _ in prompts]


def test_pool_generation_and_evaluation_use_the_reference_rules():
    task = vpo.tasks.get("maze", variant="reference")
    hand = {"id": "hand", "grid": list(HAND), "budget": 9}
    pinned = {"id": "seed42", "grid": list(SEED42), "budget": 25}
    a, b = SEED42_ROUTES[0][0], SEED42_ROUTES[2][0]
    gen = ScriptedGenerator(
        [
            f"<route_1>{words('RRDDRRDD')}</route_1><route_2>{words('DDRRRRDD')}</route_2>",
            f"{words(a)}\n---\n{words(b)}",
        ]
    )
    pool = generate_pool(task=task, examples=[hand, pinned], generator=gen, num_answers=2, n_rollouts=1, progress=False)
    assert isinstance(pool, Pool) and "<route_2>" in gen.prompts[0] and "B (bonus)" in gen.prompts[1]
    np.testing.assert_allclose(pool.rewards[0], [[1, 2 / 3, 3 / 8, 1], [1, 0, 3 / 8, 3 / 8]])
    np.testing.assert_allclose(pool.rewards[1], [[1, 0, 9 / 16, 1], [1, 16 / 25, 0, 1]])
    rep = evaluate_pool(pool, ks=(1, 2), seeds=(0,), bootstrap=0)
    best = rep["metrics"]["best_at_k_exact"]["mean"]
    # w* uniform: best answer per prompt = max(0.7604, 0.4375) and max(0.6406, 0.66) -> mean 0.7102
    w = np.array([0.25] * 4)
    top = [max(r @ w for r in pool.rewards[i]) for i in range(2)]
    np.testing.assert_allclose(best[-1], np.mean(top), atol=1e-12)
    assert rep["objectives"] == ["completion", "gold", "diamond", "avoid_lava"]


def test_vpo_eval_cli_takes_the_variant(tiny_model_dir, tmp_path, capsys):
    import shutil

    from vpo.cli import main as vpo_main

    # the reference's prompt is ~1,100 characters, longer than the session's character-level tiny
    # model allows (1,024 positions): a copy with a longer context (rotary positions, no table to grow)
    model = tmp_path / "tiny"
    shutil.copytree(tiny_model_dir, model)
    cfg = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**cfg, "max_position_embeddings": 1536}))
    model = str(model)
    out = tmp_path / "run"
    code = vpo_main(
        [
            "eval",
            "--model",
            model,
            "--task",
            "maze",
            "--task-options",
            '{"variant": "reference"}',
            "--num-prompts",
            "2",
            "--num-answers",
            "2",
            "--rollouts",
            "2",
            "--max-new-tokens",
            "8",
            "--threads",
            "1",
            "--ks",
            "1,2",
            "--eval-seeds",
            "1",
            "--bootstrap",
            "0",
            "--out",
            str(out),
            "--quiet",
            "--no-plots",
        ]
    )
    err = capsys.readouterr().err
    assert code == 0, err
    pool = load_pool(out / "pool")
    assert pool.rewards.shape == (4, 2, 4)
    recs = [json.loads(line) for line in (out / "pool" / "rollouts.jsonl").read_text().splitlines()]
    tests = ReferenceMazeTask().load("test", 2)
    for rec, ex in zip(recs, tests):
        assert rec["prompt"].count("B (bonus)") == 1 and "<route_2>...</route_2>" in rec["prompt"]
        assert " ".join(ex["grid"][0]) in rec["prompt"]
        for c, row in zip(rec["completions"], rec["rewards"]):  # the saved rewards are the reference scorer's
            expected, seen = np.zeros((2, 4)), set()
            for r in split_routes(c, 2):
                if extract_moves(r) and extract_moves(r) not in seen:
                    expected[len(seen)] = score_answer(ReferenceMaze.from_example(ex), r)
                    seen.add(extract_moves(r))
            np.testing.assert_allclose(row, expected)


def test_training_inputs_the_trainer_builds():
    # what VPOTrainer does with a task, short of training: its dataset rows, then a batch of scored
    # completions (the reward path) into VPO advantages
    from vpo.core import compute_advantages
    from vpo.train.trainer import EXAMPLE_COLUMN, build_task_dataset

    task = vpo.tasks.get("maze", variant="reference")
    ds = build_task_dataset(task, [{"id": "hand", "grid": list(HAND), "budget": 9}], m=2, chat=True)
    row = ds[0]
    assert "<route_2>...</route_2>" in row["prompt"][0]["content"] and "B (bonus)" in row["prompt"][0]["content"]
    ex = json.loads(row[EXAMPLE_COLUMN])
    group = [
        f"<route_1>{words(a)}</route_1><route_2>{words(b)}</route_2>"
        for a, b in [("RRDDRRDD", "DDRRRRDD"), ("RRRRDDDD", "RRRRDDDD"), ("RRDD", "")]
    ]
    batch = task.score_completions([ex] * 3, group, m=2)
    assert batch.valid.tolist() == [[True, True], [True, False], [True, False]]
    adv = compute_advantages("vpo", batch.rewards, batch.valid, group_size=3, seed=0).advantages
    adv = np.asarray(adv, dtype=float)
    # the first rollout (B-boosted gold and a lava-light diamond route) beats one plain route, which
    # beats a route that never reaches E: the z-scored advantages keep that order and sum to 0
    assert adv[0] > adv[1] > adv[2] and abs(adv.sum()) < 1e-9


def _split_routes_by_regex(text, m):
    """The fallbacks written with non-greedy regexes (quadratic on adversarial text, fine here)."""
    import re

    tagged = [
        h.group(1)
        for i in range(1, m + 1)
        if (h := re.search(rf"<route_{i}>(.*?)</route_{i}>", text, re.DOTALL | re.IGNORECASE))
    ]
    parts = [p.strip() for p in text.split("---") if p.strip()]
    answers = re.findall(r"<answer>(.*?)</answer>", text, re.DOTALL | re.IGNORECASE)
    routes = tagged or (parts if len(parts) >= 2 else answers if len(answers) >= 2 else [text])
    return (routes + [""] * m)[:m]


def test_split_routes_is_the_regex_rule_in_linear_time():
    import time

    toks = [
        "<route_1>",
        "</route_1>",
        "<ROUTE_2>",
        "</route_2>",
        "</Route_3>",
        "<route_3>",
        "<answer>",
        "</answer>",
        "<Answer>",
        "</ANSWER>",
        "UP",
        " down ",
        "---",
        "-",
        "x",
        "\n",
        "İ",
        "<route_1",
        ">",
    ]
    rng = random.Random(1)
    for _ in range(3000):
        text = "".join(rng.choice(toks) for _ in range(rng.randrange(0, 25)))
        m = rng.randrange(1, 5)
        assert split_routes(text, m) == _split_routes_by_regex(text, m), text
    t0 = time.perf_counter()
    split_routes("<route_1>" * 100_000, 3)  # the regex takes minutes on this (unclosed tags)
    split_routes("<answer>" * 100_000 + "UP", 3)
    extract_moves("<answer>" * 100_000)
    assert time.perf_counter() - t0 < 5
