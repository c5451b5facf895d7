"""TaskPromptClient: a checkpoint trained on a task's own prompt as an evolve client (docs/evolve.md).

The client must find the problem by its question in OpenEvolve's prompt, ask the model with the
task's m-answer prompt (never the evolve prompt), and hand back its answers as fenced blocks that
``split_programs`` reads. One test replaces the model's sampling with a fixed completion (named a
fake: it makes the answer conversion reproducible); the others run a real tiny checkpoint.
"""

from __future__ import annotations

import asyncio
import pickle

import pytest

from vpo.integrations.evolve import TaskPromptClient, problems_from_task, split_programs
from vpo.tasks.prog import ProgTask

OPTS = {"compact": True, "slope": [0, 1]}


def _client(path, **kw):
    return TaskPromptClient(path, task="prog", task_options=OPTS, split="validation", n=12, num_answers=3, **kw)


def _evolve_prompt(problem) -> tuple[str, list[dict]]:
    """What ``vpo evolve`` sends: the problem statement in the system message, the parent and the
    answer format in the user message."""
    from vpo.integrations.evolve.run import _system_message

    user = f"# Current program\n```python\n{problem.initial_program}```\n\n# Answer format\nthree fenced blocks"
    return _system_message(problem), [{"role": "user", "content": user}]


def test_finds_the_problem_by_its_question_and_prompts_with_the_task(tiny_model_dir, monkeypatch):
    problems = problems_from_task("prog", OPTS, split="validation", n=12)
    task = ProgTask(**OPTS)
    client = _client(tiny_model_dir, max_new_tokens=8)
    seen = []

    def fake_generate(messages):  # a fake model: records the prompt, answers three programs
        seen.append(messages)
        return "<answer_1>x+1</answer_1><answer_2> ( x+1 ) </answer_2><answer_3>x<4?2:x</answer_3>"

    monkeypatch.setattr(client, "_generate", fake_generate)
    for i in (0, 7, 11):
        system, messages = _evolve_prompt(problems[i])
        out = asyncio.run(client.generate_with_context(system, messages))
        assert seen[-1] == [{"role": "user", "content": task.build_prompt(problems[i].example, 3)}]
        assert "Current program" not in seen[-1][0]["content"]
        assert [p.strip() for p in split_programs(out, 3)] == ["x+1", "( x+1 )", "x<4?2:x"]


def test_refuses_a_prompt_without_exactly_one_known_question(tiny_model_dir):
    client = _client(tiny_model_dir)
    with pytest.raises(ValueError, match="contains the question of 0 'prog' validation problems"):
        client.example_for("# Problem\n1:2 3:4\n")
    problems = problems_from_task("prog", OPTS, split="validation", n=12)
    both = problems[0].description + "\n" + problems[1].description
    with pytest.raises(ValueError, match="question of 2"):
        client.example_for(both)


def test_a_real_checkpoint_answers_repeatably_and_the_client_pickles(tiny_model_dir):
    problems = problems_from_task("prog", OPTS, split="validation", n=12)
    client = _client(tiny_model_dir, max_new_tokens=12, seed=3)
    twin = pickle.loads(pickle.dumps(client))  # OpenEvolve may ship clients to processes
    raw = {}
    for name, c in (("client", client), ("twin", twin)):
        real = c._generate  # the real model; only recorded, so the raw completions can be compared
        raw[name] = []
        c._generate = lambda msgs, real=real, rec=raw[name]: rec.append(real(msgs)) or rec[-1]
        for i in (2, 2, 5):
            system, messages = _evolve_prompt(problems[i])
            assert isinstance(asyncio.run(c.generate_with_context(system, messages)), str)
    assert client.num_calls == 3 and twin._task is not None
    assert raw["client"] == raw["twin"] and all(raw["client"])  # seeded: a copy repeats every call


def test_calls_on_different_problems_draw_different_seeds(tiny_model_dir):
    """vpo evolve makes one client per (model, problem); with seed + call index alone, call i of every
    problem would sample with the same random draws, correlating the problems of a study."""
    client = _client(tiny_model_dir, seed=3)
    problems = problems_from_task("prog", OPTS, split="validation", n=12)
    seeds = {}
    for i in range(6):
        client._problem_key = client.example_for(problems[i].description)["id"]
        seeds[i] = client._call_seed()
    assert len(set(seeds.values())) == 6
    client._problem_key = client.example_for(problems[0].description)["id"]
    assert client._call_seed() == seeds[0]
    client.num_calls = 1
    assert client._call_seed() != seeds[0]


def test_task_problems_are_the_tasks_own_split():
    """`vpo evolve --task prog --split test` must evolve the test problems training and `vpo eval`
    use; it once passed the search seed to load, which replaces a generated task's split seed."""
    want = ProgTask(**OPTS).load("test", 5)
    got = [p.example for p in problems_from_task("prog", OPTS, split="test", n=5)]
    assert [g["id"] for g in got] == [w["id"] for w in want] and [g["outputs"] for g in got] == [
        w["outputs"] for w in want
    ]
    other = problems_from_task("prog", OPTS, split="test", n=5, seed=3)  # an explicit load seed still works
    assert [p.example["outputs"] for p in other] != [w["outputs"] for w in want]
