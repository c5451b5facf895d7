"""Step scorers for ``vpo eval --search beam|tree``: how good is a partial completion?

A step scorer is ``score(example, partial_text) -> vector (or one number)``, where ``partial_text``
is the model's completion so far (the prompt excluded): some complete answers, perhaps one still
open. A vector of the task's ``d`` components is scalarised with ``w*`` (``w*ᵀv``); one number is
used as it is. Three kinds (``--step-scorer``):

* ``task``: the task's own ``step_score(example, partial_text)`` (the maze and prog tasks have one:
  moves valid so far, distance left to the exit and zones collected; tests the partial program
  already passes). The default when the task has one.
* ``verifier``: the reward vector of the best complete answer so far (by ``w*``; zeros while none is
  complete): the task's exact verifier, blind to an answer still being written. The default otherwise.
* ``module:function`` or ``path/to/file.py:function``: your callable with the signature above (a
  process reward model, a partial check, a deliberately bad scorer for an ablation).

A candidate's scores over its steps are combined by ``--step-aggregate``: ``last`` (the latest
step's), ``min`` (its weakest step) or ``prod`` (the product, for scores in [0, 1]).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from vpo.errors import UserError

__all__ = ["AGGREGATES", "StepScorer", "aggregate", "make_step_scorer"]

AGGREGATES = ("last", "min", "prod")


def aggregate(scores: Sequence[float], how: str) -> float:
    """The candidate score of its per-step ``scores`` (0.0 for a candidate with no step yet)."""
    if not scores:
        return 0.0
    if how == "last":
        return float(scores[-1])
    if how == "min":
        return float(min(scores))
    if how == "prod":
        return float(np.prod(np.asarray(scores, dtype=np.float64)))
    raise UserError(f"--step-aggregate {how!r}: choose one of {', '.join(AGGREGATES)}")


@dataclass
class StepScorer:
    """A named ``fn(example, partial_text) -> vector | number`` and the ``w*`` that scalarises it.
    ``errors`` counts the answers the task's scorer raised on while the ``verifier`` scorer looked at
    them (passed over; :func:`~vpo.search.step.run.run_search` warns), ``first_error`` the first."""

    name: str
    fn: Callable
    target_weights: np.ndarray
    errors: int = 0
    first_error: BaseException | None = field(default=None, repr=False)

    def count_errors(self, rows: Sequence) -> None:
        """Count the rows of ``task.score_answers`` that are not a reward vector (the scorer raised)."""
        for r in rows:
            if not isinstance(r, np.ndarray):
                self.errors += 1
                if self.first_error is None and isinstance(r, BaseException):
                    self.first_error = r

    def __call__(self, example, partial_text: str) -> float:
        raw = self.fn(example, partial_text)
        try:
            v = np.asarray(raw, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            raise UserError(
                f"step scorer {self.name!r} returned {type(raw).__name__}, not a number or a vector of numbers"
            ) from None
        if v.size == 1:
            out = float(v[0])
        elif v.size == self.target_weights.size:
            out = float(v @ self.target_weights)
        else:
            raise UserError(
                f"step scorer {self.name!r} returned a vector of {v.size} entries; it must return one number or "
                f"d = {self.target_weights.size} (one per objective of the task)"
            )
        if not np.isfinite(out):
            raise UserError(f"step scorer {self.name!r} returned {out} for a partial completion; scores must be finite")
        return out


def _verifier_fn(task, m: int, scorer: StepScorer) -> Callable:
    w = np.asarray(task.target_weights, dtype=np.float64)

    def best_complete(example, partial_text: str) -> np.ndarray:
        answers = task.parse(partial_text, m)
        if not answers:
            return np.zeros(task.d)
        rows = task.score_answers([example], [answers])[0]
        scorer.count_errors(rows)
        vecs = [r for r in rows if isinstance(r, np.ndarray)]
        if not vecs:
            return np.zeros(task.d)
        return max(vecs, key=lambda v: float(v @ w))

    return best_complete


def make_step_scorer(spec: str | None, task, m: int) -> StepScorer:
    """The scorer ``spec`` names (``task``, ``verifier``, ``module:function``; None: ``task`` when the task
    offers ``step_score``, else ``verifier``)."""
    w = np.asarray(task.target_weights, dtype=np.float64)
    has_own = callable(getattr(task, "step_score", None))
    if spec is None:
        spec = "task" if has_own else "verifier"
    if spec == "task":
        if not has_own:
            raise UserError(
                f"--step-scorer task: task {task.name!r} has no step_score(example, partial_text); use "
                "--step-scorer verifier (its exact verifier on complete answers) or module:function"
            )
        return StepScorer("task", task.step_score, w)
    if spec == "verifier":
        scorer = StepScorer("verifier", lambda example, partial_text: 0.0, w)
        scorer.fn = _verifier_fn(task, m, scorer)
        return scorer
    if ":" not in spec:
        raise UserError(f"--step-scorer {spec!r}: use task, verifier or module:function (path/to/file.py:function)")
    from vpo.tasks.registry import load_factory

    try:
        fn = load_factory(spec)
    except UserError as err:
        raise UserError(f"--step-scorer {spec!r}: {err}") from None
    if not callable(fn):
        raise UserError(f"--step-scorer {spec!r} names a {type(fn).__name__}, not a function")
    return StepScorer(spec, fn, w)
