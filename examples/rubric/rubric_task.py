"""A weighted rubric as a vpo task: three reward functions with weights become three objectives and w*.

The rubric below is what one would hand TRL (``reward_funcs=[...]``, ``reward_weights=[...]``) or
verifiers (``Rubric(funcs=[...], weights=[...])``): correctness, brevity, and a penalty for hedging
(a negative weight). ``make_task`` turns it into a vpo task: objectives ``correct``, ``brief``,
``hedges`` (flipped, so 1 = no hedging), ``w* = (1, 0.3, 0.2) / 1.5``. Run it:

    python examples/rubric/rubric_task.py                       # scores four answers, prints both views
    vpo eval --task examples/rubric/rubric_task.py:make_task --model MODEL --num-answers 3 --out runs/rubric
    vpo rewards audit examples/rubric/rubric_task.py:make_task  # the reward-hack battery (see below)

A reward is an attack surface: RL finds every answer the rubric over-rewards. So ``correct`` gives
credit only to an answer that commits to one number: the answer, stripped, is the number (a final
period allowed). The tempting rule "the reference number appears in the answer" pays for listing
candidates ("6, 7 or 8"), for negating the answer ("not 7") and for padding it with every number,
so a policy learns to hedge instead of to know; ``vpo rewards audit`` flags exactly those. The
question asks for the number alone, so an honest answer loses nothing by the strict rule. What the
audit still flags is the Multi-RLVR set score (a sum over a set of answers): ``brief`` and the
flipped ``hedges`` pay any short answer, junk included, so a set padded with junk sums higher there;
VPO's set score never exceeds its best answer's, so that padding does not pay under VPO.

docs/tasks.md ("A rubric as a task") explains the mapping.
"""

from __future__ import annotations

import re

from vpo.tasks.rubric import rubric_task

ASK = " Answer with the number alone."
EXAMPLES = {
    "train": [
        {"id": 0, "question": "How many legs does a spider have?" + ASK, "answer": "8"},
        {"id": 1, "question": "How many sides does a hexagon have?" + ASK, "answer": "6"},
    ],
    "test": [
        {"id": 2, "question": "How many days are there in a week?" + ASK, "answer": "7"},
        {"id": 3, "question": "How many minutes are there in an hour?" + ASK, "answer": "60"},
    ],
}
_COMMITTED = re.compile(r"\s*([+-]?\d+)\s*\.?\s*")


def correct(completion, answer, **kwargs):  # verifiers style: one answer, the parameters it names
    # credit only for an answer that is one number: a list of candidates, a negation ("not 7") or a
    # sentence around several numbers is never read as the number it happens to contain
    m = _COMMITTED.fullmatch(completion)
    return float(m is not None and int(m.group(1)) == int(answer))


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
    answers = ["7", "Probably 7, I think.", "6, 7 or 8", "A week has five working days and a weekend."]
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
