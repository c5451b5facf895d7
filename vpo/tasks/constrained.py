"""Hard constraints on the reward vector: which answers are admissible, in search and in training.

A constraint is a bound on one named objective (``"avoid_lava>=1"``, ``"cost<=0.5"``) or a user
predicate on the reward vector (``module:function`` / ``path/to/file.py:function``, or a callable)
that maps ``rewards [..., d]`` to a boolean mask ``[...]``. An answer is *admissible* when it is
valid and satisfies every constraint. Diverse candidates widen the risk surface, so a search that
deploys one of them must be able to refuse the unsafe ones outright rather than trade them off.

:func:`admissible` evaluates constraints on arrays (``vpo eval --constraint``, see
:mod:`vpo.search.constraints`); :func:`constrained` wraps a task for training so that a violating
answer is scored invalid (``valid = False``, reward row 0): it can never win a rollout's max over its
answers, in VPO's set score as in any other estimator. docs/constraints.md has the details.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from vpo.errors import UserError
from vpo.tasks.base import ScoredBatch, Task, TaskWrapper

__all__ = [
    "Constraint",
    "ConstraintError",
    "ConstrainedBatch",
    "ConstrainedTask",
    "admissible",
    "constrained",
    "parse_constraints",
]

_BOUND = re.compile(r"^\s*([A-Za-z_][\w.\-]*)\s*(>=|<=)\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$")


class ConstraintError(UserError, ValueError):
    """A constraint that cannot be parsed or applied; the message says which and what to write."""


@dataclass(frozen=True)
class Constraint:
    """One hard constraint: ``objective op value`` (``op`` is ``>=`` or ``<=``) or a predicate."""

    text: str
    objective: str | None = None
    op: str | None = None
    value: float | None = None
    predicate: Callable[[np.ndarray], Any] | None = None

    def mask(self, rewards: np.ndarray, objectives: Sequence[str]) -> np.ndarray:
        """``rewards [..., d]`` -> bool ``[...]``: True where this constraint holds."""
        r = np.asarray(rewards, dtype=np.float64)
        if self.predicate is None:
            j = list(objectives).index(self.objective)
            x = r[..., j]
            return x >= self.value if self.op == ">=" else x <= self.value
        try:
            out = np.asarray(self.predicate(r))
        except Exception as e:  # noqa: BLE001 - re-raised with the constraint named
            raise ConstraintError(f"constraint {self.text!r}: the predicate raised {type(e).__name__}: {e}") from e
        if out.shape != r.shape[:-1]:
            raise ConstraintError(
                f"constraint {self.text!r}: the predicate must map rewards of shape {r.shape} (..., d) to a boolean "
                f"mask of shape {r.shape[:-1]}; it returned shape {out.shape}"
            )
        if out.dtype != bool:
            raise ConstraintError(
                f"constraint {self.text!r}: the predicate must return booleans (a numpy bool mask); it returned {out.dtype}"
            )
        return out


def _predicate(spec: str) -> Callable:
    from vpo.tasks.registry import TaskSpecError, load_factory

    try:
        fn = load_factory(spec)
    except TaskSpecError as e:
        raise ConstraintError(f"constraint {spec!r}: {e}".replace("task reference", "reference")) from None
    if not callable(fn):
        raise ConstraintError(f"constraint {spec!r} names {type(fn).__name__}, not a function of the reward vector")
    return fn


def parse_constraints(
    constraints: Iterable[str | Callable | Constraint] | str | None, objectives: Sequence[str]
) -> list[Constraint]:
    """Parse ``constraints`` against the task's objective names (a bound must name one of them).

    Each item is ``"name>=x"``, ``"name<=x"``, ``"module:function"``, ``"path/to/file.py:function"``, a
    callable ``rewards [..., d] -> bool [...]`` or a :class:`Constraint`. A single string is one
    constraint.
    """
    if constraints is None:
        return []
    if isinstance(constraints, (str, Constraint)) or callable(constraints):
        constraints = [constraints]
    names = list(objectives)
    out = []
    for c in constraints:
        if isinstance(c, Constraint):
            if c.objective is not None and c.objective not in names:
                raise ConstraintError(
                    f"constraint {c.text!r} names objective {c.objective!r}; the objectives are {', '.join(names)}"
                )
            out.append(c)
        elif callable(c):
            out.append(Constraint(getattr(c, "__name__", repr(c)), predicate=c))
        elif isinstance(c, str):
            out.append(_parse_one(c, names))
        else:
            raise ConstraintError(
                f"a constraint is a string like 'avoid_lava>=1' or a function; got {type(c).__name__}"
            )
    return out


def _parse_one(text: str, names: list[str]) -> Constraint:
    m = _BOUND.match(text)
    if m:
        name, op, value = m.group(1), m.group(2), float(m.group(3))
        if name not in names:
            raise ConstraintError(
                f"constraint {text!r} names objective {name!r}, which this task does not have; its objectives are "
                f"{', '.join(names)}"
            )
        return Constraint(text.strip(), objective=name, op=op, value=value)
    if ":" in text and not any(op in text for op in ("<", ">", "=")):
        return Constraint(text.strip(), predicate=_predicate(text.strip()))
    raise ConstraintError(
        f"cannot read constraint {text!r}: write OBJECTIVE>=VALUE or OBJECTIVE<=VALUE (objectives: {', '.join(names)}), "
        "or module:function / path/to/file.py:function for a predicate on the reward vector"
    )


def admissible(rewards, valid, constraints: Sequence[Constraint], objectives: Sequence[str]) -> np.ndarray:
    """``valid [...]`` AND every constraint on ``rewards [..., d]``: the admissible answers."""
    r = np.asarray(rewards, dtype=np.float64)
    ok = np.ones(r.shape[:-1], dtype=bool) if valid is None else np.asarray(valid, dtype=bool).copy()
    if ok.shape != r.shape[:-1]:
        raise ConstraintError(f"valid has shape {ok.shape}; the rewards {r.shape} need {r.shape[:-1]}")
    for c in constraints:
        ok &= c.mask(r, objectives)
    return ok


@dataclass
class ConstrainedBatch(ScoredBatch):
    """A :class:`~vpo.tasks.ScoredBatch` whose violating answers were made invalid;
    ``num_violations`` counts them (valid answers the constraints refused)."""

    num_violations: int = 0


class ConstrainedTask(TaskWrapper):
    """``task`` with hard constraints: prompts, data and scores are the task's own, but
    :meth:`score_completions` marks every answer that breaks a constraint invalid (its reward row 0),
    so a trainer counts it as an invalid answer (the answer's own fault). Answers the inner task left
    unscored stay unscored (``unscored_answers`` and its counts are carried), never made invalid.
    :meth:`score` still returns the raw vector."""

    def __init__(self, task: Task, constraints) -> None:
        if not isinstance(task, Task):
            raise TypeError(f"constrained() wraps a vpo Task; got {type(task).__name__}")
        super().__init__(task)
        self.constraints = parse_constraints(constraints, task.objectives)

    def score_completions(
        self, examples, completions, m: int, *, dedup_answers: bool = True, strict: bool = False
    ) -> ConstrainedBatch:
        b = self.inner.score_completions(examples, completions, m, dedup_answers=dedup_answers, strict=strict)
        ok = admissible(b.rewards, b.valid, self.constraints, self.objectives)
        violated = b.valid & ~ok
        rewards = np.where(violated[..., None], 0.0, b.rewards)
        kept = {k: getattr(b, k) for k in ScoredBatch.__dataclass_fields__ if k not in ("rewards", "valid")}
        return ConstrainedBatch(rewards=rewards, valid=b.valid & ok, num_violations=int(violated.sum()), **kept)

    def __repr__(self) -> str:
        return f"constrained({self.inner!r}, {[c.text for c in self.constraints]})"


def constrained(task: Task, constraints) -> Task:
    """``task`` whose violating answers score as invalid (see :class:`ConstrainedTask`); ``task``
    itself when ``constraints`` is empty."""
    cons = parse_constraints(constraints, task.objectives)
    return ConstrainedTask(task, cons) if cons else task
