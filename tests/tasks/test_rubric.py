"""rubric_task: a weighted rubric (TRL reward_funcs + reward_weights, a verifiers-style Rubric, reward
models) becomes a task whose objectives are the functions and whose w* is the weights: w*ᵀr is an
increasing affine map of the rubric's own score, penalties are flipped, both calling conventions
and coroutines work, reward models score through their logit, and the example runs."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

import vpo.tasks
from vpo.tasks.rubric import RubricTask, rubric_task

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = [
    {"id": 0, "question": "How many legs does a spider have?", "answer": "8", "unit": "legs"},
    {"id": 1, "question": "How many sides does a hexagon have?", "answer": "6", "unit": "sides"},
]


def correct(completion, answer):
    return float(answer in completion.split())


def length(completions, **kwargs):  # TRL style, raw score in [0, 40]
    return [float(min(40, len(c))) for c in completions]


def rude(completion):
    return float("stupid" in completion)


def test_trl_rubric_objectives_weights_and_affine_map():
    task = rubric_task([correct, length, rude], weights=[2.0, -0.5, -1.5], examples=EXAMPLES, ranges=[(0, 40)] * 3)
    assert task.objectives == ("correct", "length", "rude")
    assert np.allclose(task.target_weights, [0.5, 0.125, 0.375])
    answers = ["8", "8 legs, stupid question", "eight", "maybe 8 or 6 or 4, who can say for sure", "6 stupid"]
    raw = task.raw_scores([EXAMPLES[0]] * len(answers), answers)
    assert raw[:, 0].tolist() == [1, 1, 0, 1, 0] and raw[:, 2].tolist() == [0, 1, 0, 0, 1]
    r = task.transform(raw)
    assert np.allclose(r[:, 1], 1 - raw[:, 1] / 40) and np.allclose(r[:, 2], 1 - raw[:, 2] / 40)  # penalties flipped
    c, s = task.rubric_offset_scale()
    R = task.rubric_score(raw)
    assert np.allclose(r @ task.target_weights, (R - c) / s)
    assert np.argsort(r @ task.target_weights).tolist() == np.argsort(R).tolist()  # the rubric's order


def test_default_ranges_clip_and_offset():
    task = rubric_task([correct, rude], weights=[1, -1], examples=EXAMPLES)
    assert task.score(EXAMPLES[1], "6 stupid").tolist() == [1.0, 0.0]
    assert task.rubric_offset_scale() == (-1.0, 2.0)  # w*ᵀr = (R + 1) / 2
    wide = rubric_task([correct, length], examples=EXAMPLES, ranges={"length": (0, 40)})
    assert wide.score(EXAMPLES[0], "8").tolist() == [1.0, 1 / 40]
    with pytest.raises(ValueError, match="one width"):
        wide.rubric_offset_scale()
    clipped = rubric_task([length], examples=EXAMPLES, ranges=[(0, 10)])
    assert clipped.score(EXAMPLES[0], "x" * 30).tolist() == [1.0]


def test_verifiers_style_rubric_objects():
    class Rubric:  # the attributes of verifiers' Rubric(funcs, weights)
        def __init__(self, funcs, weights):
            self.funcs, self.weights = funcs, weights

    class OldRubric:  # older verifiers releases
        def __init__(self, funcs, weights):
            self.reward_funcs, self.reward_weights = funcs, weights

    for cls in (Rubric, OldRubric):
        task = rubric_task(cls([correct, rude], [0.8, -0.2]), examples=EXAMPLES)
        assert np.allclose(task.target_weights, [0.8, 0.2]) and task.objectives == ("correct", "rude")
    with pytest.raises(ValueError, match="own weights"):
        rubric_task(Rubric([correct], [1.0]), weights=[1.0], examples=EXAMPLES)
    with pytest.raises(TypeError, match="not a rubric"):
        rubric_task(object(), examples=EXAMPLES)


def test_calling_conventions():
    seen = {}

    def per_answer(prompt, completion, answer, state, task, info, unit):
        seen.update(prompt=prompt, answer=answer, state=state, task=task, info_id=info["id"], unit=unit)
        return float(unit in completion)

    def batch(prompts, completions, unit, **kwargs):
        seen["batch"] = (len(prompts), unit)
        return [float(u in c) for c, u in zip(completions, unit)]

    async def later(completion, **kwargs):
        await asyncio.sleep(0)
        return float(kwargs["answer"] in completion)

    task = rubric_task([per_answer, batch, later], examples=EXAMPLES, name="conv")
    rows = task.score_answers(EXAMPLES, [["8 legs", "8"], ["6 sides"]])
    assert [r.tolist() for r in rows[0]] == [[1, 1, 1], [0, 0, 1]] and rows[1][0].tolist() == [1, 1, 1]
    assert seen["batch"] == (3, ["legs", "legs", "sides"])
    assert seen["prompt"] == EXAMPLES[1]["question"] and seen["task"] == "conv" and seen["state"] == {}
    assert (seen["answer"], seen["info_id"], seen["unit"]) == ("6", 1, "sides")


class _Parser:  # the part of verifiers' Parser a reward function uses
    def parse_answer(self, completion):
        return completion.split()[0] if completion.split() else None


def test_verifiers_parser_reaches_the_reward_functions():
    def parsed_correct(parser, completion, answer, **kwargs):  # verifiers' canonical signature
        return float(parser.parse_answer(completion) == answer)

    class Rubric:  # verifiers' Rubric keeps its parser in class_objects as well
        def __init__(self, funcs, weights, parser):
            self.funcs, self.weights, self.parser = funcs, weights, parser
            self.class_objects = {"parser": parser}

    class BareRubric:  # a parser attribute without class_objects
        def __init__(self, funcs, weights, parser):
            self.funcs, self.weights, self.parser = funcs, weights, parser

    for cls in (Rubric, BareRubric):
        task = rubric_task(cls([parsed_correct], [1.0], _Parser()), examples=EXAMPLES)
        assert task.raw_scores([EXAMPLES[0]] * 2, ["8 legs", "legs 8"])[:, 0].tolist() == [1.0, 0.0]
    listed = rubric_task([parsed_correct], examples=EXAMPLES, parser=_Parser())
    assert listed.score(EXAMPLES[1], "6").tolist() == [1.0]


def test_async_functions_share_one_loop_even_inside_a_running_loop():
    n = 12
    in_flight = []

    async def judged(completion, answer):
        in_flight.append(completion)
        for _ in range(500):  # every answer must be in flight at once: one at a time would wait forever
            if len(in_flight) >= n:
                break
            await asyncio.sleep(0.001)
        assert len(in_flight) >= n, "the coroutines were not gathered"
        return float(answer in completion)

    task = rubric_task([judged, correct], examples=EXAMPLES)
    answers = [["8 legs", "nine"] * 3, ["6", "seven"] * 3]
    expect = [[1.0, 0.0] * 3, [1.0, 0.0] * 3]

    async def inside_a_loop():  # e.g. a notebook, or an async trainer calling the task
        return task.score_answers(EXAMPLES, answers)

    for run in (lambda: task.score_answers(EXAMPLES, answers), lambda: asyncio.run(inside_a_loop())):
        in_flight.clear()
        rows = run()
        assert not any(isinstance(r, Exception) for row in rows for r in row), rows
        assert [[float(r[0]) for r in row] for row in rows] == expect


def test_group_functions_get_one_example_s_answers_at_once():
    calls = []

    def distinct(completions, answers, states, tasks, infos, unit):  # verifiers' group function
        calls.append((list(completions), answers, states, tasks, [i["id"] for i in infos], unit))
        return [float(completions.count(c) == 1) for c in completions]

    def spread(completions, parser, **kwargs) -> list[float]:  # a group function by its return annotation
        assert parser is not None and len(set(kwargs["answers"])) == 1
        return [len(set(completions)) / len(completions)] * len(completions)

    task = rubric_task([distinct, spread], examples=EXAMPLES, name="grp", parser=_Parser())
    rows = task.score_answers(EXAMPLES, [["8", "8", "9"], ["6", "5"]])
    assert [r.tolist() for r in rows[0]] == [[0.0, 2 / 3], [0.0, 2 / 3], [1.0, 2 / 3]]
    assert [r.tolist() for r in rows[1]] == [[1.0, 1.0], [1.0, 1.0]]
    assert calls == [
        (["8", "8", "9"], ["8"] * 3, [{}] * 3, ["grp"] * 3, [0] * 3, ["legs"] * 3),
        (["6", "5"], ["6"] * 2, [{}] * 2, ["grp"] * 2, [1] * 2, ["sides"] * 2),
    ]

    def picky(completion):
        if completion == "boom":
            raise RuntimeError("cannot score this")
        return 1.0

    # one answer of the second example fails: the first example keeps its group (distinct: 0, 0, 1)
    task = rubric_task([distinct, picky], examples=EXAMPLES)
    rows = task.score_answers(EXAMPLES, [["8", "8", "9"], ["6", "boom"]])
    assert [r.tolist() for r in rows[0]] == [[0.0, 1.0], [0.0, 1.0], [1.0, 1.0]]
    assert rows[1][0].tolist() == [1.0, 1.0] and isinstance(rows[1][1], RuntimeError)


def test_score_completions_counts_a_failing_answer():
    def picky(completion):
        if "boom" in completion:
            raise RuntimeError("cannot score this")
        return 1.0

    task = rubric_task([picky, correct], examples=EXAMPLES)
    with pytest.warns(RuntimeWarning, match="raised on 1 answer"):
        batch = task.score_completions([EXAMPLES[0]], ["<answer_1>8</answer_1><answer_2>boom</answer_2>"], m=2)
    assert batch.valid.tolist() == [[True, False]] and batch.score_errors == 1
    assert batch.rewards[0, 0].tolist() == [1.0, 1.0]


def test_bad_rubrics_are_clear():
    with pytest.raises(ValueError, match="2 reward functions but 3 weights"):
        rubric_task([correct, rude], weights=[1, 2, 3], examples=EXAMPLES)
    with pytest.raises(ValueError, match="not all 0"):
        rubric_task([correct], weights=[0.0], examples=EXAMPLES)
    with pytest.raises(ValueError, match="no reward functions"):
        rubric_task([], examples=EXAMPLES)
    with pytest.raises(ValueError, match="not objectives"):
        rubric_task([correct], examples=EXAMPLES, ranges={"nope": (0, 1)})
    with pytest.raises(ValueError, match="hi > lo"):
        rubric_task([correct], examples=EXAMPLES, ranges=[(1, 1)])
    task = rubric_task([correct, correct], examples=EXAMPLES)
    assert task.objectives == ("correct", "correct_2")


def test_reward_models(tiny_model_dir, tmp_path):
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    cfg = AutoConfig.from_pretrained(tiny_model_dir, num_labels=1)
    cfg.pad_token_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_config(cfg)
    model.save_pretrained(tmp_path / "rm")
    tok.save_pretrained(tmp_path / "rm")
    task = rubric_task([(model, tok), str(tmp_path / "rm"), correct], weights=[1, 1, 2], examples=EXAMPLES)
    assert isinstance(task, RubricTask) and task.d == 3
    answers = ["8", "8 legs", "a lot"]
    raw = task.raw_scores([EXAMPLES[0]] * 3, answers)
    assert np.allclose(raw[:, 0], raw[:, 1], atol=1e-5)  # the same weights, loaded from the path
    texts = [task._models[0].text(EXAMPLES[0]["question"], a) for a in answers]
    with torch.no_grad():
        for t, x in zip(texts, raw[:, 0]):
            assert np.isclose(float(model(**tok(t, return_tensors="pt")).logits[0, 0]), x, atol=1e-4)
    r = task.transform(raw)
    assert np.allclose(r[:, 0], 1 / (1 + np.exp(-raw[:, 0])))  # no range: the logit's sigmoid
    with pytest.raises(ValueError, match="sigmoid"):
        task.rubric_offset_scale()
    with pytest.raises(ValueError, match=r"\(model, tokenizer\)"):
        rubric_task([model], examples=EXAMPLES)


def test_the_example_runs(capsys):
    task = vpo.tasks.get(f"{ROOT}/examples/rubric/rubric_task.py:make_task")
    assert task.objectives == ("correct", "brief", "hedges") and task.name == "quiz_rubric"
    assert np.allclose(task.target_weights, np.array([1.0, 0.3, 0.2]) / 1.5)
    module = (
        __import__("importlib")
        .import_module("vpo.tasks.registry")
        ._import_file(ROOT / "examples" / "rubric" / "rubric_task.py")
    )
    module.main()
    out = capsys.readouterr().out
    assert "'7'\n  rubric R = +1.300   vector r = [1.0, 1.0, 1.0]   w*ᵀr = 1.000 = (R - (-0.20)) / 1.50" in out
    assert "'Probably 7, I think.'\n  rubric R = +0.100   vector r = [0.0, 1.0, 0.0]" in out  # hedged: no commitment
    assert "'6, 7 or 8'\n  rubric R = +0.300   vector r = [0.0, 1.0, 1.0]" in out  # candidates: a wrong answer
