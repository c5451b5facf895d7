"""A weighted rubric as a vpo task: three reward functions with weights become three objectives and w*.

The rubric below is what one would hand TRL (``reward_funcs=[...]``, ``reward_weights=[...]``) or
verifiers (``Rubric(funcs=[...], weights=[...])``): correctness, brevity, and a penalty for hedging
(a negative weight). ``make_task`` turns it into a vpo task: objectives ``correct``, ``brief``,
``hedges`` (flipped, so 1 = no hedging), ``w* = (1, 0.3, 0.2) / 1.5``. Run it:

    python examples/rubric/rubric_task.py                       # scores three answers, prints both views
    vpo eval --task examples/rubric/rubric_task.py:make_task --model MODEL --num-answers 3 --out runs/rubric

docs/tasks.md ("A rubric as a task") explains the mapping.
"""

from __future__ import annotations

import re

from vpo.tasks.rubric import rubric_task

EXAMPLES = {
    "train": [
        {"id": 0, "question": "How many legs does a spider have?", "answer": "8"},
        {"id": 1, "question": "How many sides does a hexagon have?", "answer": "6"},
    ],
    "test": [
        {"id": 2, "question": "How many days are there in a week?", "answer": "7"},
        {"id": 3, "question": "How many minutes are there in an hour?", "answer": "60"},
    ],
}


def correct(completion, answer, **kwargs):  # verifiers style: one answer, the parameters it names
    return float(answer in re.findall(r"\d+", completion))


def brief(completions, **kwargs):  # TRL style: a batch in, one float per completion out
    return [min(1.0, 12 / max(1, len(c.split()))) for c in completions]


def hedges(completion):  # a penalty: 1 when the answer hedges
    return float(bool(re.search(r"\b(maybe|perhaps|i think|probably)\b", completion.lower())))


FUNCS = [correct, brief, hedges]
WEIGHTS = [1.0, 0.3, -0.2]


def make_task(split_examples=None):
    """The rubric as a vpo task (``vpo eval --task examples/rubric/rubric_task.py:make_task``)."""
    return rubric_task(FUNCS, weights=WEIGHTS, examples=split_examples or EXAMPLES, name="quiz_rubric")


def main() -> None:
    task = make_task()
    ex = task.load("test")[0]
    answers = ["7", "There are probably 7 days in a week, I think.", "A week has five working days and a weekend."]
    raw = task.raw_scores([ex] * len(answers), answers)
    c, s = task.rubric_offset_scale()
    print(f"objectives {list(task.objectives)}, w* = {[round(float(x), 3) for x in task.target_weights]}")
    for a, f in zip(answers, raw):
        r = task.transform(f)
        rubric = task.rubric_score(f)
        print(
            f"{a!r}\n  rubric R = {rubric:+.3f}   vector r = {[round(float(x), 3) for x in r]}   "
            f"w*ᵀr = {task.target_weights @ r:.3f} = (R - ({c:+.2f})) / {s:.2f}"
        )


if __name__ == "__main__":
    main()
