"""The maze and prog tasks' step scorers (vpo eval --search beam|tree): what a partial completion scores."""

from __future__ import annotations

import numpy as np

from vpo.tasks.base import partial_answers
from vpo.tasks.maze import Maze, MazeTask, partial_route_score
from vpo.tasks.prog import ProgTask, partial_program_score

GRID = [
    "S..#",
    ".#..",
    "...E",
]
EX = {"grid": GRID, "budget": 7}


def test_partial_answers_splits_closed_and_open():
    assert partial_answers("<answer_1>RD</answer_1><answer_2> DD") == (["RD"], "DD")
    assert partial_answers("<answer>R</answer>") == (["R"], None)
    assert partial_answers("") == ([], None)


def test_maze_partial_route_progress_validity_and_feasibility():
    maze = Maze.from_example(EX)
    # S (0,0) to E (2,3): 5 moves; every move toward E raises completion
    prog = [partial_route_score(maze, r)[0] for r in ("", "D", "DD", "DDR", "DDRR")]
    assert prog == sorted(prog) and prog[0] == 0.0 and prog[-1] == 0.8
    # a move into a wall wastes a move: half the moves valid halves the progress
    assert partial_route_score(maze, "UD")[0] == 0.5 * partial_route_score(maze, "D")[0]
    # 3 wasted moves + 5 still needed > budget 7: it can no longer finish, so nothing counts
    assert partial_route_score(maze, "UUU").tolist() == [0.0, 0.0, 0.0, 0.0]
    # a route that reaches E scores its true reward
    assert partial_route_score(maze, "DDRRR").tolist() == MazeTask().score(EX, "DDRRR").tolist()
    assert partial_route_score(maze, "go").tolist() == [0.0, 0.0, 0.0, 0.0]


def test_maze_step_score_takes_the_best_answer_so_far():
    task = MazeTask()
    done = task.step_score(EX, "<answer_1>DDRRR</answer_1><answer_2>U")
    assert done.tolist() == task.score(EX, "DDRRR").tolist()
    assert task.step_score(EX, "<answer_1>UUUU</answer_1><answer_2>DD")[0] > 0
    assert task.step_score(EX, "").tolist() == [0.0] * 4


def test_prog_partial_program_passes_the_tests_its_written_branch_decides():
    ex = {"inputs": [1, 3, 8, 10], "outputs": [2, 2, 28, 34], "max_chars": 40}  # x<7?2:3*x+4
    assert partial_program_score(ex, "x<7?2").tolist() == [1.0, 1.0, 0.0, 0.0]
    assert partial_program_score(ex, "x<7?2:3*x+4").tolist() == [1.0, 1.0, 1.0, 1.0]
    assert partial_program_score(ex, "x<7?2:3*x+").tolist() == [1.0, 1.0, 0.0, 0.0]  # 3*x so far
    assert partial_program_score(ex, "(x<7?2").tolist() == [1.0, 1.0, 0.0, 0.0]  # ( closed after the else
    assert partial_program_score(ex, "").tolist() == [0.0] * 4
    assert partial_program_score(ex, "x" * 41).tolist() == [0.0] * 4  # over the length limit
    task = ProgTask()
    got = task.step_score(ex, "<answer_1>2</answer_1><answer_2>x<7?2:3*x+4</answer_2>")
    assert np.array_equal(got, np.ones(4))
