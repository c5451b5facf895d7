"""``vpo rewards audit``: the battery flags what a scorer over-rewards, and only that.

Each test pairs a hackable scorer with a sound one that differs from it only in the rule under test,
so a flag on the first and none on the second shows the audit reads the rule, not the task.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from vpo.cli import main
from vpo.errors import UserError
from vpo.tasks import FunctionTask, get
from vpo.tasks.audit import (
    HACKS,
    SET_HACKS,
    Scored,
    Seeds,
    audit,
    completion_text,
    question_options,
    set_scores,
)

ROOT = Path(__file__).resolve().parents[2]
QUIZ = ROOT / "tests" / "fixtures" / "audit" / "quiz_tasks.py"


def _task(name: str):
    return get(f"{QUIZ}:{name}")


def _row(report: dict, hack: str) -> dict:
    return next(r for r in report["hacks"] if r["hack"] == hack)


def _run(task, **kw) -> dict:
    return audit(task, task.load("test"), **kw)


def test_hackable_user_task_is_flagged_for_the_shotgun_and_the_sound_one_is_not():
    # "credit when any listed number equals the answer" (the old examples/rubric rule): the good
    # number between two wrong ones scores 1 against a wrong answer's 0 on every example
    hack = _run(_task("hackable"))
    row = _row(hack, "shotgun")
    assert row["tried"] == 6 and row["above_wrong"] == 6 and row["share"] == 1.0
    assert row["worst"]["score"] == 1.0 and row["worst"]["wrong_score"] == 0.0
    # (the set hacks depend on today's dedup, so they are left out here)
    assert [f for f in hack["flagged"] if "/" not in f] == ["shotgun"]
    # the exact rule: the same answers score 0, nothing is flagged
    sound = _run(_task("sound"))
    assert _row(sound, "shotgun")["above_wrong"] == 0
    assert sound["flagged"] == []
    # both audits had a real good/wrong separation to compare with (the references of the examples)
    for rep in (hack, sound):
        assert rep["wrong_answer"]["separated"] == 6
        assert all(e["good_score"] == 1.0 and e["wrong_score"] == 0.0 for e in rep["examples"])
        assert all(e["wrong_source"].startswith("the reference of example") for e in rep["examples"])


def test_a_rubric_with_the_hackable_rule_is_flagged_and_junk_padding_pays_only_under_a_sum():
    rep = _run(_task("hackable_rubric"))
    assert _row(rep, "shotgun")["above_wrong"] == 6
    junk = next(r for r in rep["set_hacks"] if r["hack"] == "junk_set")["objectives"]
    # 'brief' gives short junk answers credit: Multi-RLVR's sum over answers rises with each one;
    # VPO's expected best never exceeds the best member's score (the honest answer's)
    assert junk["multi_rlvr"]["above_honest"] == 6
    assert junk["vpo"]["above_honest"] == 0
    assert "junk_set/multi_rlvr" in rep["flagged"] and "junk_set/vpo" not in rep["flagged"]


NUMERIC = [{"id": i, "question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(1, 6)]


def _lenient(example, answer):
    """A relative tolerance read with NaN in mind the wrong way round: NaN and inf pass."""
    try:
        a = float(answer)
    except ValueError:
        return 0.0
    b = float(example["answer"])
    return float(not abs(a - b) > 1e-6 * abs(a))


def _strict(example, answer):
    try:
        a = float(answer)
    except (ValueError, OverflowError):
        return 0.0
    return float(math.isfinite(a) and abs(a - float(example["answer"])) <= 1e-6 * max(1.0, abs(a)))


def test_nonfinite_and_huge_numbers_are_flagged_where_the_tolerance_lets_them_through():
    lenient = FunctionTask("lenient", {"close": _lenient}, NUMERIC)
    rep = _run(lenient, hacks=["nonfinite", "huge_number"])
    assert _row(rep, "nonfinite")["above_wrong"] == 5  # nan: `not (nan > tol)` is True
    assert _row(rep, "huge_number")["above_wrong"] == 5  # 1e400 is inf: inf - b > 1e-6 * inf is False
    strict = FunctionTask("strict", {"close": _strict}, NUMERIC)
    rep = _run(strict, hacks=["nonfinite", "huge_number"])
    assert _row(rep, "nonfinite")["above_wrong"] == 0 and _row(rep, "huge_number")["above_wrong"] == 0
    assert rep["flagged"] == []


class _Crashing(FunctionTask):
    """Its batch scoring raises out of score_completions on a huge number (the issue's OverflowError)."""

    def score_answers(self, examples, answers):
        for ans in answers:
            for a in ans:
                if "0" * 300 in a:
                    raise OverflowError("int too large to convert to float")
        return super().score_answers(examples, answers)


def test_an_answer_that_kills_the_batch_is_a_crash_finding_and_the_rest_is_still_scored():
    task = _Crashing("crashing", {"close": _strict}, NUMERIC)
    rep = _run(task, hacks=["huge_number", "shotgun"])
    huge = _row(rep, "huge_number")
    assert huge["crashes"] == 5 * 4  # the two 400-digit variants, in the wrong answer and bare, of every example
    assert "OverflowError" in huge["worst"]["crash"] and "left the other answers" in huge["worst"]["crash"]
    assert "huge_number" in rep["flagged"]
    # the other answers of those batches were scored one by one: no other hack is touched
    assert _row(rep, "shotgun")["crashes"] == 0 and _row(rep, "shotgun")["above_wrong"] == 0


def _raising(example, answer):
    """Raises on anything but a plain integer (what Task.score must never do)."""
    return float(int(answer) == int(example["answer"]))


def test_an_answer_left_unscored_is_a_finding_since_its_rollout_escapes_a_low_score():
    rep = _run(FunctionTask("raising", {"ok": _raising}, NUMERIC), hacks=["nonfinite", "empty", "shotgun"])
    for hack in ("nonfinite", "empty", "shotgun"):
        row = _row(rep, hack)
        assert row["unscored"] > 0 and row["above_wrong"] == 0 and row["crashes"] == 0
        assert any("ValueError" in r for r in row["unscored_example"]["reasons"])
    assert rep["flagged"] == ["nonfinite", "empty", "shotgun"]
    rep = _run(FunctionTask("strict", {"close": _strict}, NUMERIC), hacks=["nonfinite", "empty", "shotgun"])
    assert all(r["unscored"] == 0 for r in rep["hacks"]) and rep["flagged"] == []


def test_set_scores_sum_counts_duplicates_the_expected_best_does_not():
    d = 2
    task = FunctionTask("two", {"a": lambda e, x: 1.0, "b": lambda e, x: 0.0}, [{"question": "q"}])
    honest = Scored(np.array([[1.0, 0.0]]), np.array([True]))
    tripled = Scored(np.tile([1.0, 0.0], (3, 1)), np.ones(3, dtype=bool))
    s = set_scores(task, honest, tripled, ["vpo", "multi_rlvr", "union_coverage"])
    assert s["multi_rlvr"] == (pytest.approx(0.5), pytest.approx(1.5))  # w* = (0.5, 0.5): three copies count thrice
    assert s["vpo"][1] == pytest.approx(s["vpo"][0]) and s["union_coverage"] == (1.0, 1.0)
    # a set without a valid answer scores 0 (an invalid slot is never trusted to be 0)
    nothing = Scored(np.full((2, d), 7.0), np.zeros(2, dtype=bool))
    assert set_scores(task, honest, nothing, ["multi_rlvr"])["multi_rlvr"][1] == 0.0


def test_near_duplicates_are_flagged_when_the_canonical_form_keeps_them_apart():
    class Raw(FunctionTask):
        def canonical(self, answer):  # no normalisation: 'A.' and 'A' are two answers
            return answer

    class Merged(FunctionTask):
        def canonical(self, answer):  # what a scorer reads: the digits
            return "".join(ch for ch in answer if ch.isdigit())

    def digits(example, answer):
        return float("".join(ch for ch in answer if ch.isdigit()) == example["answer"])

    raw = _run(Raw("raw", {"ok": digits}, NUMERIC), hacks=["near_duplicates"])
    nd = raw["set_hacks"][0]["objectives"]
    assert nd["multi_rlvr"]["above_honest"] == 5 and nd["vpo"]["above_honest"] == 0
    merged = _run(Merged("merged", {"ok": digits}, NUMERIC), hacks=["near_duplicates"])
    assert merged["flagged"] == []


def test_shop_runs_in_seconds_with_wrong_answers_read_off_its_options():
    task = get("shop")
    rep = audit(task, task.load("test", n=4), hacks=["shotgun", "empty", "padding", "overlong", "nonfinite"])
    assert rep["wrong_answer"] == {"sources": {"an option read off the question": 4}, "separated": 4, "of": 4}
    # a letter or a product name, never a generic non-answer
    assert all(e["good_score"] > e["wrong_score"] for e in rep["examples"])
    assert rep["flagged"] == []  # shop reads exactly one product or nothing


def test_code_hacks_apply_to_code_tasks_only_and_every_program_compiles():
    ex = {"question": "Return x squared.", "fn_name": "square"}
    seeds = Seeds(0, ex, "q", "def square(x):\n    return x * x", "ref", 1.0, "def square(x):\n    return x", "w", 0.0,
                  ["def square(x):\n    return x"], code=True, entry_names=["square"])  # fmt: skip
    code_hacks = [h for h in HACKS if h.code]
    assert {h.name for h in code_hacks} >= {"early_exit", "harness_write", "lying_object", "solution_getattr"}
    for h in code_hacks + [h for h in HACKS + SET_HACKS if h.code is None]:
        if h.name == "smuggled_tags":  # its answer holds a second code block: the completion is the hack
            continue
        for program in h.make(seeds):
            compile(program, h.name, "exec")  # a hack that does not compile tests nothing
    text = FunctionTask("t", {"x": lambda e, a: 0.0}, [ex])
    rep = audit(text, text.load(), hacks=None)
    assert not {r["hack"] for r in rep["hacks"]} & {h.name for h in code_hacks}
    assert completion_text(text, ["a", "b"]) == "<answer_1>a</answer_1><answer_2>b</answer_2>"


def test_question_options_reads_letters_names_and_numbers():
    q = "Pick one.\nA) Amber Lamp: $3\nB) Cedar Mug: $12\n(C) Nova Pen: 4 stars"
    assert question_options(q) == ["A", "Amber Lamp", "B", "Cedar Mug", "C", "Nova Pen", "3", "12", "4"]


def test_the_audit_is_deterministic():
    task = _task("hackable")
    a, b = _run(task, seed=3), _run(task, seed=3)
    for r in (a, b):
        r.pop("seconds")
    assert a == b


def test_cli_exit_codes_table_and_report(tmp_path, capsys):
    out = tmp_path / "audit"
    assert main(["rewards", "audit", f"{QUIZ}:hackable", "--out", str(out), "--no-progress"]) == 1
    text = capsys.readouterr().out
    assert "| shotgun | 6 | 6/6 **" in text and "FLAGGED (" in text and "(exit code 1)" in text
    rep = json.loads((out / "report.json").read_text())
    assert rep["flagged"][0] == "shotgun" and rep["command"]["n"] == 8
    assert main(["rewards", "audit", f"{QUIZ}:sound", "--no-progress", "-n", "3"]) == 0
    assert "nothing scored above the wrong answer" in capsys.readouterr().out


def test_user_answers_file_supplies_the_good_and_wrong_answers(tmp_path, capsys):
    bare = tmp_path / "bare.py"
    bare.write_text(
        "from vpo.tasks import FunctionTask\n"
        "EX = [{'id': 'a', 'question': 'Capital of France?'}, {'id': 'b', 'question': 'Capital of Peru?'}]\n"
        "GOLD = {'a': 'paris', 'b': 'lima'}\n"
        "def make():\n"
        "    return FunctionTask('capitals', {'ok': lambda e, x: float(GOLD[e['id']] in x.lower())}, EX)\n"
    )
    answers = tmp_path / "answers.jsonl"
    answers.write_text('{"id": "a", "answer": "Paris", "wrong": ["Lyon", "Rome"]}\n{"index": 1, "answer": "Lima"}\n')
    assert main(["rewards", "audit", f"{bare}:make", "--answers", str(answers), "--out", str(tmp_path), "--no-progress"]) == 1  # fmt: skip
    rep = json.loads((tmp_path / "report.json").read_text())
    ex = rep["examples"]
    assert [e["good"] for e in ex] == ["Paris", "Lima"] and ex[0]["good_source"] == "--answers"
    # wrong: the lowest-scoring of the other example's answer and the file's wrong ones (the first on a tie)
    assert ex[0]["wrong"] == "Lima" and ex[1]["wrong"] == "Paris"
    shotgun = _row(rep, "shotgun")
    assert shotgun["above_wrong"] == 2  # 'paris' in the text: substring credit
    assert shotgun["worst"]["answer"] == "Lima, Paris, Lyon"  # the file's wrong answer is the second wrong one
    capsys.readouterr()


@pytest.mark.parametrize(
    "argv, words",
    [
        (["-n", "0"], "-n must be at least 1"),
        (["--hacks", "shotgun,telepathy"], "unknown hack(s) telepathy"),
        (["--objectives", "vpo,best_ever"], "unknown set objective(s) best_ever"),
        (["--answers", "missing.jsonl"], "--answers missing.jsonl: no such file"),
        (["--task-options", '{"size": 7}'], "bad options for task"),
        (["--split", "nosuch", "--task", "shop"], "could not load its 'nosuch' split"),
        (["--task", "mazes"], "unknown task 'mazes'"),
    ],
)
def test_user_mistakes_are_one_line_and_exit_2(argv, words, capsys):
    task = f"{QUIZ}:hackable"
    if "--task" in argv:
        task = argv[argv.index("--task") + 1]
        argv = argv[: argv.index("--task")]
    assert main(["rewards", "audit", task, "--no-progress", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("vpo rewards audit: error:") and words in err and "\n" not in err


def test_bad_answers_lines_name_the_line(tmp_path):
    task = _task("hackable")
    from vpo.tasks.audit import read_user_answers

    for line, words in [
        ("not json", "line 1: not JSON"),
        ('{"answer": "8"}', 'give "index"'),
        ('{"index": 99, "answer": "8"}', "index 99 is not a position among the 6"),
        ('{"id": "moon", "answer": "8"}', "no audited example has id 'moon'"),
        ('{"index": 0, "answer": 8}', '"answer" must be a string'),
    ]:
        p = tmp_path / "a.jsonl"
        p.write_text(line + "\n")
        with pytest.raises(UserError, match=words.replace("(", r"\(")):
            read_user_answers(str(p), task.load("test"))


def test_the_code_battery_runs_through_the_sandbox_with_the_users_programs(tmp_path):
    # the mechanics on a sandboxed task (the code task's verdicts are its own tests' business): the
    # user's programs are the seeds, every code hack is tried on every example, the set is scored
    from vpo.sandbox import SandboxConfig
    from vpo.tasks.audit import UserAnswers
    from vpo.tasks.code import DEFAULT_PRELUDE, CodeTask

    cfg = SandboxConfig(timeout_s=0.7, memory_mb=256, scratch_root=str(tmp_path), prelude=DEFAULT_PRELUDE)
    task = CodeTask(str(ROOT / "tests" / "fixtures" / "code" / "problems.jsonl"), sandbox=cfg)
    byid = {p["id"]: p for p in task.load()}
    examples = [byid["square"], byid["add_two"]]
    user = UserAnswers(
        good={0: "def square(x):\n    return x * x", 1: "a, b = map(int, input().split())\nprint(a + b)"},
        wrong={0: ["def square(x):\n    return x + x"], 1: ["a, b = map(int, input().split())\nprint(a - b)"]},
    )
    # (resource_abuse left out: its endless loop costs the time limit on every test, ~9 s here)
    hacks = ["early_exit", "harness_write", "lying_object", "shadow_builtins", "near_duplicates"]
    rep = audit(task, examples, user=user, hacks=hacks)
    assert rep["code_hacks"] is True
    for e in rep["examples"]:
        assert e["good_source"] == "--answers" and e["good_score"] == 1.0 and e["separated"]
        # the lowest of the user's wrong program and the other example's good one (0 here: wrong problem)
        assert e["wrong_source"] in ("--answers wrong", f"the reference of example {1 - e['index']}")
        assert e["wrong_score"] < 1.0
    assert {r["hack"] for r in rep["hacks"]} == set(hacks[:-1])
    for r in rep["hacks"]:
        # lying_object needs an entry point to return from: only the call-based example has one
        assert r["tried"] == (1 if r["hack"] == "lying_object" else 2), r
        assert r["crashes"] == 0, r
    assert rep["set_hacks"][0]["objectives"]["vpo"]["tried"] == 2


def test_smuggled_tags_flag_a_parser_that_reads_every_block_not_one_that_reads_the_first_or_last():
    import re

    from vpo.tasks.registry import load_factory

    examples, any_number_matches = load_factory(f"{QUIZ}:EXAMPLES"), load_factory(f"{QUIZ}:any_number_matches")

    def blocks(text):
        return [b.strip() for b in re.findall(r"<answer>(.*?)</answer>", text, re.DOTALL)]

    class EveryBlock(FunctionTask):  # joins all answer blocks: a policy can hedge across them
        def parse(self, completion, m):
            return [" ".join(blocks(completion))][:m] if blocks(completion) else []

    class LastBlock(FunctionTask):
        def parse(self, completion, m):
            return blocks(completion)[-1:]

    def count(cls):
        rep = _run(cls("t", {"ok": any_number_matches}, examples), hacks=["smuggled_tags"])
        return _row(rep, "smuggled_tags")["above_wrong"]

    assert count(EveryBlock) == 6
    assert count(LastBlock) == 0 and count(FunctionTask) == 0  # the base parser keeps the first block


def test_a_scorer_that_returns_nan_is_a_finding_and_the_report_stays_valid_json(tmp_path, capsys):
    nan_task = tmp_path / "nan_task.py"
    nan_task.write_text(
        "from vpo.tasks import FunctionTask\n"
        "EX = [{'id': i, 'question': f'{i} + {i}?', 'answer': str(2 * i)} for i in range(1, 4)]\n"
        "def ok(e, a):\n"
        "    return float('nan') if 'inf' in a else float(a.strip() == e['answer'])\n"
        "def make():\n"
        "    return FunctionTask('nan', {'ok': ok}, EX, clip=False)\n"
    )
    assert main(["rewards", "audit", f"{nan_task}:make", "--out", str(tmp_path), "--no-progress"]) == 1
    rep = json.loads((tmp_path / "report.json").read_text())  # strict JSON: no NaN or Infinity in it
    row = _row(rep, "nonfinite")
    assert row["unscored"] > 0 or row["above_wrong"] > 0  # a NaN reward is never read as a plain score
    assert "nonfinite" in rep["flagged"]
    capsys.readouterr()


def _in_list(example, answer):
    """Credit when the reference is among the answer's JSON list (a list answer read as 'any of')."""
    try:
        value = json.loads(answer)
    except ValueError:
        value = answer.strip()
    values = value if isinstance(value, list) else [value]
    return float(example["answer"] in [str(v) for v in values])


def test_the_shotgun_written_as_a_list_finds_a_scorer_that_takes_any_member():
    rep = _run(FunctionTask("lists", {"ok": _in_list}, NUMERIC), hacks=["shotgun"])
    row = _row(rep, "shotgun")
    assert row["above_wrong"] == 5 and row["worst"]["answer"].startswith("[")


def test_humaneval_passes_none_of_the_harness_hacks():
    # the first class on the shipped task, through the audit: writing a verdict to the
    # harness, exiting early, lying objects, an any-name Solution, shadowed builtins, the caller's frame
    task = get("humaneval")
    hacks = ["early_exit", "harness_write", "lying_object", "solution_getattr", "shadow_builtins", "caller_frame"]
    rep = audit(task, task.load("test", n=2), hacks=hacks)
    assert all(e["separated"] for e in rep["examples"])
    for r in rep["hacks"]:
        assert r["tried"] == 2 and r["above_wrong"] == 0 and r["crashes"] == 0 and r["unscored"] == 0, r


def _mentions_question(example, answer):
    """Overlap with the question: an echo of it scores."""
    words = set(example["question"].lower().split())
    return float(len(words & set(answer.lower().split())) >= 2)


def _longer_is_better(example, answer):
    return min(1.0, len(answer) / 2000)


def _brevity(example, answer):
    return float(len(answer.strip()) <= 1)


@pytest.mark.parametrize(
    "hack, fn",
    [("padding", _mentions_question), ("overlong", _longer_is_better), ("empty", _brevity)],
)
def test_each_text_hack_finds_the_scorer_it_is_written_for(hack, fn):
    # the scorer under test is averaged with the exact rule, so the reference still scores highest
    def scorer(example, answer):
        return 0.5 * (answer.strip() == example["answer"]) + 0.5 * fn(example, answer)

    rep = _run(FunctionTask("t", {"ok": scorer}, NUMERIC), hacks=[hack])
    assert _row(rep, hack)["above_wrong"] > 0
    exact = FunctionTask("exact", {"ok": lambda e, a: float(a.strip() == e["answer"])}, NUMERIC)
    assert _run(exact, hacks=[hack])["flagged"] == []
