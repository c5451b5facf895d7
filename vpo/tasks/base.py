"""The Task abstraction: a vector-reward task is data + prompts + scoring, nothing else.

A task declares its objective names (d of them), its deployment weights ``w*``, how to load its
examples, how to ask a question (single- or m-answer), and ``score(example, answer) -> [d]`` in
[0, 1]. Trainers, search and reports only ever call the generic methods here, never a task name.

The one method every consumer uses is :meth:`Task.score_completions`: completions (model text) in,
``ScoredBatch`` (``rewards [N, m, d]`` + ``valid [N, m]``, the shape of docs/design.md) out. It parses at
most m answers per completion, drops duplicates by the task's canonical form, scores the rest and
pads. An answer that could not be scored (its scorer raised or returned an exception such as
:class:`~vpo.errors.ScoringUnavailable`, returned None, a NaN/inf or a wrong-shaped vector, or the
task's ``parse`` raised on the completion) is **unscored**, not wrong: its slot is empty, its rollout
is marked in ``ScoredBatch.unscored``, the reasons are counted and warned, and the trainers drop such
rollouts (advantage 0, left out of their group's statistics) instead of learning from a false zero.
One answer never stops a batch; ``strict=True`` raises instead.

Define your own task in a few lines with :class:`FunctionTask` (one function per objective) and
make it reachable by name with :func:`register_task`. :class:`RewardFunctionsTask` wraps TRL-style
reward functions (one per objective) as a task, so the trainer has one scoring path for both.
"""

from __future__ import annotations

import functools
import importlib.util
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from vpo.errors import ScoringUnavailable, UserError
from vpo.core.answers import answer_instruction, dedup, normalize_text, parse_answers

Example = dict[str, Any]


@dataclass
class ScoredBatch:
    """Scored completions in the shared shape.

    ``rewards [N, m, d]`` float64 (invalid and unscored slots 0), ``valid [N, m]`` bool, ``answers``
    the kept answers per completion (slot order), ``num_parsed [N]`` answers found before dedup,
    ``num_duplicates`` answers dropped as repeats, ``score_errors`` answers left unscored (see
    below), ``unscored_answers [N, m]`` bool which slots those are (a completion whose ``parse``
    raised marks its first slot), ``unscored_reasons`` their count by reason (``"ScoringUnavailable:
    sandbox worker died"``, ``"ZeroDivisionError"``, ``"non-finite reward"``, ...), and
    ``nonfinite [d]`` how many unscored answers were NaN/inf on each objective.

    An unscored answer is neither valid nor wrong: the scorer could not say. Its rollout is in
    :attr:`unscored`, and a trainer leaves such rollouts out of its update (advantage 0, outside their
    group's statistics) rather than read their empty slots as a zero reward.
    """

    rewards: np.ndarray
    valid: np.ndarray
    answers: list[list[str]]
    num_parsed: np.ndarray
    num_duplicates: int = 0
    score_errors: int = 0
    unscored_answers: np.ndarray | None = None
    unscored_reasons: dict[str, int] = field(default_factory=dict)
    nonfinite: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.unscored_answers is None:
            self.unscored_answers = np.zeros(np.shape(self.valid), dtype=bool)
        if self.nonfinite is None:
            self.nonfinite = np.zeros(np.shape(self.rewards)[-1], dtype=np.int64)

    @property
    def unscored(self) -> np.ndarray:
        """``[N]`` bool: rollouts with at least one unscored answer (a trainer drops them)."""
        return np.asarray(self.unscored_answers, dtype=bool).any(-1)

    @property
    def num_unscored(self) -> int:
        """Rollouts with at least one unscored answer."""
        return int(self.unscored.sum())

    @property
    def parse_failure_rate(self) -> float:
        """Fraction of completions with no parsable answer."""
        return float((self.num_parsed == 0).mean()) if len(self.num_parsed) else 0.0


def unscored_reason(err: BaseException | None) -> str:
    """The reason an answer is unscored, as counted in ``ScoredBatch.unscored_reasons``: the
    exception's class, with its reason for :class:`~vpo.errors.ScoringUnavailable` (an infrastructure
    failure names what failed; a scorer bug is counted by its class, its message is in the warning)."""
    if err is None:
        return "scorer returned None"
    if isinstance(err, ScoringUnavailable):
        return f"ScoringUnavailable: {' '.join(str(err.reason).split())[:200]}"
    return type(err).__name__


class Task:
    """Base class of vector-reward tasks. Subclasses set ``name``/``objectives`` and implement
    :meth:`load`, :meth:`question` and :meth:`score`."""

    name: str = "task"
    objectives: tuple[str, ...] = ()
    answer_format: str = "tags"  # or "code"
    answer_noun: str = "answer"
    system_prompt: str | None = None
    instruction_style: str = "full"  # "short": one-line answer instruction (tiny char-level models)
    preferences: dict[str, tuple[float, ...]] = {}
    """Named deployment weightings besides w* (e.g. a user who cares most about one objective), for
    best@k under other preferences in evaluation reports; each has ``d`` non-negative entries."""

    # -- identity ---------------------------------------------------------------------------
    @property
    def d(self) -> int:
        return len(self.objectives)

    @property
    def target_weights(self) -> np.ndarray:
        """``w*``: the deployment scalarisation (uniform unless the task overrides it)."""
        return np.full(self.d, 1.0 / self.d)

    @property
    def declared_target_weights(self) -> np.ndarray | None:
        """``w*`` when the task states one, ``None`` when it keeps the uniform default (then a
        trainer may take w* from TRL's ``reward_weights``)."""
        return None if type(self).target_weights is Task.target_weights else self.target_weights

    # -- data -------------------------------------------------------------------------------
    def load(self, split: str = "train", n: int | None = None, seed: int = 0) -> list[Example]:
        raise NotImplementedError

    # -- prompting --------------------------------------------------------------------------
    def question(self, example: Example) -> str:
        raise NotImplementedError

    def build_prompt(self, example: Example, m: int = 1, weights: Sequence[float] | None = None) -> str:
        """The full user prompt: the question, an optional goal weighting, the answer instruction."""
        parts = [self.question(example).rstrip()]
        if weights is not None:
            parts.append(self.describe_weights(weights))
        parts.append(answer_instruction(m, self.answer_format, self.answer_noun, self.instruction_style))
        return "\n\n".join(parts)

    def describe_weights(self, weights: Sequence[float]) -> str:
        """Text that tells the model the weighting it is scored by (goal-conditioned GRPO)."""
        w = np.asarray(weights, dtype=float).reshape(-1)
        if w.shape[0] != self.d:
            raise ValueError(f"{self.name}: weights have {w.shape[0]} entries, the task has d={self.d}")
        items = ", ".join(f"{name} {x:.2f}" for name, x in zip(self.objectives, w))
        return f"You are scored by this weighting of the objectives: {items}."

    # -- answers and scoring ----------------------------------------------------------------
    def parse(self, completion: str, m: int) -> list[str]:
        return parse_answers(completion, m, self.answer_format)

    def canonical(self, answer: str) -> Any:
        """Key under which two answers count as the same (dedup): :func:`~vpo.core.answers.normalize_text`
        (case, spacing, quotes, enclosing brackets and trailing punctuation ignored) unless the task
        knows better. Answers the scorer cannot tell apart should share a key, or a set objective
        that sums over answers (Multi-RLVR) pays for the same answer twice."""
        return normalize_text(answer)

    def dedup_key(self, example: Example, answer: str) -> Any:
        """The dedup key of ``answer`` to ``example``: :meth:`canonical` unless a task needs the
        example to see that two answers are one (the shop's letter and the product's name, a maze
        route and the same route with moves after the exit)."""
        return self.canonical(answer)

    def score(self, example: Example, answer: str) -> np.ndarray:
        """Reward vector ``[d]`` in [0, 1] of one answer. Must not raise on malformed answers."""
        raise NotImplementedError

    def score_answers(
        self, examples: Sequence[Example], answers: Sequence[Sequence[str]]
    ) -> list[list[np.ndarray | None]]:
        """Score ``answers[i]`` (a list) against ``examples[i]``: a ``[d]`` array per answer, or the
        exception its scorer raised or returned in its place (``ScoringUnavailable`` for a failure
        outside the answer); :meth:`score_completions` counts such answers as unscored.

        Override for batched/parallel scoring (the code task runs programs concurrently).
        """
        out = []
        for ex, ans in zip(examples, answers):
            row = []
            for a in ans:
                try:
                    row.append(np.asarray(self.score(ex, a), dtype=np.float64).reshape(-1))
                except Exception as e:  # noqa: BLE001 - counted and reported, see score_completions
                    row.append(e)
            out.append(row)
        return out

    def score_completions(
        self,
        examples: Sequence[Example],
        completions: Sequence[str],
        m: int,
        *,
        dedup_answers: bool = True,
        strict: bool = False,
    ) -> ScoredBatch:
        """Parse, dedup, score and pad ``N`` completions into ``rewards [N, m, d]``/``valid [N, m]``.

        Never raises on one answer (``strict=False``): an answer that cannot be scored is unscored
        (see :class:`ScoredBatch`), counted, and warned about once per batch with the count and the
        first reason; a batched ``score_answers`` that raises leaves its whole batch unscored, except
        for a :class:`~vpo.errors.UserError` (a setup mistake such as a reward function returning the
        wrong number of values), which is raised at once. ``strict=True`` raises on the first
        answer whose scorer failed instead, the note naming the rollout and the answer, and keeps
        NaN/inf vectors as returned (valid) for the caller's strict check (``strict_rewards``, which
        names the rollout, the answer and the objective).
        """
        if len(examples) != len(completions):
            raise ValueError(f"{len(examples)} examples but {len(completions)} completions")
        n, d = len(completions), self.d
        log = _Unscored(self.name, n, m, d, strict)
        parsed = []
        for i, c in enumerate(completions):
            try:
                p = [a if isinstance(a, str) else str(a) for a in self.parse(c, m)][:m]
            except Exception as e:  # noqa: BLE001 - the completion is unscored, the batch goes on
                log.fail(i, 0, e, f"parse raised {type(e).__name__}")
                p = []
            parsed.append(p)
        num_parsed = np.array([len(p) for p in parsed], dtype=np.int64)
        kept = []
        dups = 0
        for ex, p in zip(examples, parsed):
            keep = dedup(p, functools.partial(self.dedup_key, ex)) if dedup_answers else list(range(len(p)))
            dups += len(p) - len(keep)
            kept.append([p[i] for i in keep])
        try:
            scored = list(self.score_answers(examples, kept))
        except Exception as e:  # noqa: BLE001 - a batched scorer that fails as a whole: every answer unscored
            if strict or isinstance(e, UserError):  # a UserError is a setup mistake (RewardShapeError): say it now
                raise
            scored = [[e] * len(ans) for ans in kept]
        scored += [[None] * len(ans) for ans in kept[len(scored) :]]  # rollouts a scorer dropped are unscored
        rewards = np.zeros((n, m, d), dtype=np.float64)
        valid = np.zeros((n, m), dtype=bool)
        for i, row in enumerate(scored):
            row = list(row)[:m]
            row += [None] * (min(len(kept[i]), m) - len(row))  # answers a scorer dropped are unscored
            for j, r in enumerate(row):
                vec = log.vector(i, j, r, self.objectives)
                if vec is not None:
                    rewards[i, j] = vec
                    valid[i, j] = True
        log.warn()
        return ScoredBatch(
            rewards, valid, kept, num_parsed, dups, log.count, log.mask, dict(log.reasons), log.nonfinite
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, objectives={list(self.objectives)})"


class _Unscored:
    """The unscored answers of one ``score_completions`` batch: mask, reasons, first message, warning."""

    def __init__(self, task: str, n: int, m: int, d: int, strict: bool) -> None:
        self.task, self.n, self.d, self.strict = task, n, d, strict
        self.mask = np.zeros((n, m), dtype=bool)
        self.reasons: Counter = Counter()
        self.nonfinite = np.zeros(d, dtype=np.int64)
        self.first: str | None = None

    @property
    def count(self) -> int:
        return int(self.mask.sum())

    def fail(self, i: int, j: int, err: BaseException | None, reason: str | None = None, say: str | None = None):
        if self.strict:
            e = err if err is not None else ValueError(say or reason or "scorer returned None")
            e.add_note(f"while scoring rollout {i}, answer {j} of task {self.task!r}")
            raise e
        self.mask[i, j] = True
        key = reason or unscored_reason(err)
        self.reasons[key] += 1
        if self.first is None:
            self.first = say or (f"{type(err).__name__}: {err}" if err is not None else key)

    def vector(self, i: int, j: int, r: Any, objectives: Sequence[str]) -> np.ndarray | None:
        """``r`` as a ``[d]`` finite vector, or None after counting it unscored (an exception, None,
        not numbers, the wrong length, NaN/inf)."""
        if isinstance(r, BaseException) or r is None:
            self.fail(i, j, r if isinstance(r, BaseException) else None)
            return None
        try:
            vec = np.asarray(r, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError) as e:
            self.fail(i, j, e, f"not a reward vector ({type(e).__name__})")
            return None
        if vec.shape[0] != self.d:
            msg = f"task {self.task!r}: score() returned {vec.shape[0]} values, expected d={self.d} ({', '.join(objectives)})"
            self.fail(i, j, ValueError(msg), "wrong number of values")
            return None
        bad = ~np.isfinite(vec)
        if bad.any() and not self.strict:  # strict keeps it: the caller's strict check names rollout and objective
            names = ", ".join(o for o, b in zip(objectives, bad) if b)
            say = f"task {self.task!r}: score() returned NaN/inf for objective(s) {names}"
            self.fail(i, j, None, "non-finite reward", say)
            self.nonfinite += bad
            return None
        return vec

    def warn(self) -> None:
        if not self.count:
            return
        listed = ", ".join(f"{k} x{v}" for k, v in self.reasons.most_common(4))
        warnings.warn(
            f"task {self.task!r}: the scorer raised on {self.count} answer(s) or gave no usable reward, in "
            f"{int(self.mask.any(1).sum())} of {self.n} rollout(s) ({listed}; first: {self.first}); they are "
            "unscored, not wrong: training leaves those rollouts out of the update instead of reading a zero",
            RuntimeWarning,
            stacklevel=3,
        )


def package_locations(module: str) -> list[str]:
    """The directories of the installed package ``module`` (located, not imported); [] when it is missing."""
    spec = importlib.util.find_spec(module)
    return list(spec.submodule_search_locations or []) if spec is not None else []


def package_data(module: str, relative: str, present: Callable[[Path], bool] = Path.exists) -> Path | None:
    """``relative`` inside the installed package ``module`` (located, not imported): the first of its
    locations where ``present`` holds; None when the package is missing or none has it."""
    for loc in package_locations(module):
        p = Path(loc) / relative
        if present(p):
            return p
    return None


VALIDATION_SEED_OFFSET = 2100
"""A generated task's validation split is seeded with its ``seed`` + this unless given its own."""
TEST_SEED_OFFSET = 4200
"""A generated task's test split is seeded with its ``seed`` + this unless given its own."""


def split_seeds(task: str, seed, validation_seed=None, test_seed=None) -> dict[str, int]:
    """The seed of each split of a generated task (``train``, ``validation``, ``test``): ``seed`` and
    the given split seeds, the missing ones ``seed`` + their offset; ``ValueError`` for a non-integer."""
    for nm, v in (("seed", seed), ("test_seed", test_seed), ("validation_seed", validation_seed)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer))):
            raise ValueError(f"{task} option {nm} must be an integer, got {v!r}")
    return {
        "train": int(seed),
        "validation": int(seed) + VALIDATION_SEED_OFFSET if validation_seed is None else int(validation_seed),
        "test": int(seed) + TEST_SEED_OFFSET if test_seed is None else int(test_seed),
    }


def partial_answers(text: str) -> tuple[list[str], str | None]:
    """The answers of a partial completion (tags format, any numbering): ``(closed, open)`` where
    ``closed`` are the bodies of the answers whose closing tag is written, in order, and ``open`` the
    body of an answer still being written at the end of ``text`` (None when there is none). The helper
    of a task's optional ``step_score(example, partial_text) -> [d]`` (``vpo eval --search beam|tree``,
    :mod:`vpo.search.step.score`), which scores a completion while it is being written.

    >>> partial_answers("<answer_1>RD</answer_1><answer_2>DD")
    (['RD'], 'DD')
    """
    import re

    closed: list[str] = []
    open_at: int | None = None
    for tok in re.finditer(r"<(/?)answer(?:_\d{1,4})?\s*>", text if isinstance(text, str) else "", re.IGNORECASE):
        if not tok.group(1):
            open_at = tok.end()
        elif open_at is not None:
            closed.append(text[open_at : tok.start()].strip())
            open_at = None
    return closed, (text[open_at:].strip() if open_at is not None else None)


def load_examples(
    source: Sequence[Example] | Mapping[str, Sequence[Example]] | Callable[[str], Sequence[Example]],
    task_name: str,
    split: str,
    n: int | None = None,
    seed: int = 0,
) -> list[Example]:
    """A split of examples given as a list (every split), a ``{split: examples}`` mapping or a
    ``split -> examples`` function; ``n``: a seeded subset of that size, in the source's order."""
    if callable(source):
        data = list(source(split))
    elif isinstance(source, Mapping):
        if split not in source:
            raise ValueError(f"task {task_name!r} has no split {split!r}; it has {sorted(source)}")
        data = list(source[split])
    else:
        data = list(source)
    if n is not None:
        idx = np.random.default_rng(seed).permutation(len(data))[:n]
        data = [data[i] for i in sorted(idx)]
    return data


def ask(question: str | Callable[[Example], str], example: Example) -> str:
    """An example's question: ``question(example)``, or the example's field of that name."""
    return question(example) if callable(question) else str(example[question])


class FunctionTask(Task):
    """A task from plain functions: one scorer per objective.

    >>> task = FunctionTask(
    ...     "lengthy",
    ...     objectives={"short": lambda ex, a: float(len(a) <= 5), "has_x": lambda ex, a: float("x" in a)},
    ...     examples=[{"id": 0, "question": "Say something."}],
    ... )
    >>> task.score(task.load()[0], "xyz").tolist()
    [1.0, 1.0]
    """

    def __init__(
        self,
        name: str,
        objectives: Mapping[str, Callable[[Example, str], float]],
        examples: Sequence[Example] | Mapping[str, Sequence[Example]] | Callable[[str], Sequence[Example]],
        *,
        question: str | Callable[[Example], str] = "question",
        target_weights: Sequence[float] | None = None,
        answer_format: str = "tags",
        clip: bool = True,
    ) -> None:
        if not objectives:
            raise ValueError("a task needs at least one objective")
        self.name = name
        self.objectives = tuple(objectives)
        self._fns = list(objectives.values())
        self._examples = examples
        self._question = question
        self.answer_format = answer_format
        self._clip = clip
        self._w = _check_target_weights(target_weights, self.d)

    @property
    def target_weights(self) -> np.ndarray:
        return self._w if self._w is not None else super().target_weights

    @property
    def declared_target_weights(self) -> np.ndarray | None:
        return self._w

    def load(self, split: str = "train", n: int | None = None, seed: int = 0) -> list[Example]:
        return load_examples(self._examples, self.name, split, n, seed)

    def question(self, example: Example) -> str:
        return ask(self._question, example)

    def score(self, example: Example, answer: str) -> np.ndarray:
        r = np.array([float(f(example, answer)) for f in self._fns], dtype=np.float64)
        # clip finite values only: an inf is a scorer bug, which score_completions leaves unscored (not 1.0)
        return np.where(np.isfinite(r), np.clip(r, 0.0, 1.0), r) if self._clip else r


class RewardFunctionsTask(Task):
    """TRL-style reward functions, one per objective, as a task.

    ``VPOTrainer(reward_funcs=...)`` wraps them in this class so that they are scored by
    :meth:`Task.score_completions` like any task: same parsing, dedup, padding and scorer-error
    counting. Examples are TRL input rows: ``"prompt"`` (the prompt the model saw), optionally
    ``"completion_ids"`` (the rollout's generated token ids), plus any other dataset columns. Each
    function is called once per batch with TRL 1.16's keywords: ``f(prompts=[...], completions=[...],
    completion_ids=[...], **context(), **columns)``, one entry per parsed answer (a one-message
    assistant list when the prompts are chats); ``context`` adds what the trainer passes
    (``trainer_state``, ``log_metric``, ``log_extra``). It returns one float per answer; ``None`` (or
    NaN/inf) leaves that answer unscored (see :meth:`Task.score_completions`). With m = 1 the whole completion is the answer and ``completion_ids`` are the
    rollout's ids; with m > 1 they are the answer's text through ``tokenize`` (``None`` without it).
    ``log_extra(column, values)`` takes one value per answer and forwards one per completion (the
    value with m = 1, the list of its answers' values with m > 1), so TRL's completions table stays
    aligned. A function that raises on a batch is called again answer by answer, so only the answers
    it fails on are unscored (``strict=True`` re-raises instead, with a note naming it).
    """

    name = "reward_funcs"

    def __init__(
        self,
        reward_funcs: Sequence[Callable[..., Sequence[float | None]]],
        objectives: Sequence[str] | None = None,
        target_weights: Sequence[float] | None = None,
        *,
        context: Callable[[], Mapping[str, Any]] | None = None,
        tokenize: Callable[[list[str]], list[list[int]]] | None = None,
    ) -> None:
        funcs = list(reward_funcs)
        names = (
            list(objectives)
            if objectives is not None
            else [getattr(f, "__name__", f"r{i}") for i, f in enumerate(funcs)]
        )
        if len(names) != len(funcs):
            raise ValueError(
                f"objectives has {len(names)} names but there are {len(funcs)} reward functions (one per objective)"
            )
        if not funcs:
            raise ValueError("a task needs at least one objective")
        if any(not callable(f) for f in funcs):
            raise TypeError(
                "reward_funcs must be Python callables (one per objective); reward models are not supported here"
            )
        self.objectives = tuple(names)
        self._fns = funcs
        self._context = context
        self._tokenize = tokenize
        self._w = _check_target_weights(target_weights, self.d)
        self._whole = False  # True while score_completions runs with m = 1 (answer = completion)

    @property
    def target_weights(self) -> np.ndarray:
        return self._w if self._w is not None else super().target_weights

    @property
    def declared_target_weights(self) -> np.ndarray | None:
        return self._w

    def parse(self, completion: str, m: int) -> list[str]:
        return [completion] if m == 1 else super().parse(completion, m)

    def score_completions(self, examples, completions, m, **kw) -> ScoredBatch:
        self._whole = m == 1
        try:
            return super().score_completions(examples, completions, m, **kw)
        finally:
            self._whole = False

    def score(self, example: Example, answer: str) -> np.ndarray:
        row = self.score_answers([example], [[answer]])[0][0]
        if isinstance(row, BaseException):
            raise row
        return row

    def _answer_ids(self, examples, owner: list[int], flat: list[str]) -> list:
        if self._whole and all("completion_ids" in examples[o] for o in owner):
            return [examples[o]["completion_ids"] for o in owner]
        if self._tokenize is not None:
            return list(self._tokenize(flat))
        return [None] * len(flat)

    def score_answers(self, examples: Sequence[Example], answers: Sequence[Sequence[str]]) -> list[list[Any]]:
        owner = [i for i, ans in enumerate(answers) for _ in ans]
        flat = [a for ans in answers for a in ans]
        if not flat:
            return [[] for _ in answers]
        chat = isinstance(examples[0]["prompt"], list)
        batch = {
            "prompts": [examples[o]["prompt"] for o in owner],
            "completions": [[{"role": "assistant", "content": a}] if chat else a for a in flat],
            "completion_ids": self._answer_ids(examples, owner, flat),
        }
        skip = ("prompt", "completion", "completion_ids")
        columns = {k: [examples[o][k] for o in owner] for k in examples[0] if k not in skip}
        context = dict(self._context()) if self._context is not None else {}
        extra = _ExtraColumns(context.pop("log_extra", None), len(flat))
        failed: dict[int, BaseException] = {}
        cols = []
        for f, objective in zip(self._fns, self.objectives):
            try:
                out = self._call(f, batch, columns, context, extra, list(range(len(flat))))
            except RewardShapeError:
                raise
            except Exception:  # noqa: BLE001 - find the answers it fails on, one call each
                out = np.full(len(flat), np.nan)
                for j in range(len(flat)):
                    try:
                        out[j] = self._call(f, batch, columns, context, extra, [j])[0]
                    except RewardShapeError:
                        raise
                    except Exception as e:  # noqa: BLE001 - counted by score_completions
                        if j not in failed:
                            e.add_note(
                                f"raised by reward function {getattr(f, '__name__', f)!r} (objective {objective!r})"
                            )
                            failed[j] = e
            cols.append(out)
        extra.forward(owner, len(answers), self._whole)
        mat = np.stack(cols, axis=1)
        result: list[list[Any]] = [[] for _ in answers]
        for j, o in enumerate(owner):
            result[o].append(failed[j] if j in failed else mat[j])
        return result

    @staticmethod
    def _call(f, batch: dict, columns: dict, context: dict, extra: "_ExtraColumns", idx: list[int]) -> np.ndarray:
        pick = (lambda v: v) if len(idx) == len(batch["prompts"]) else (lambda v: [v[j] for j in idx])
        kwargs = {k: pick(v) for k, v in batch.items()}
        kwargs.update({k: pick(v) for k, v in columns.items()})
        kwargs["log_extra"] = extra.recorder(idx)
        out = f(**kwargs, **context)
        out = np.asarray([np.nan if r is None else r for r in out], dtype=np.float64)
        if out.shape != (len(idx),):
            raise RewardShapeError(
                f"reward function {getattr(f, '__name__', f)!r} returned {out.size} values for {len(idx)} answers"
            )
        return out


class _ExtraColumns:
    """``log_extra`` for reward functions called on answers: records one value per answer, then
    forwards one value per completion to the trainer's ``log_extra`` (TRL's completions table)."""

    def __init__(self, target: Callable[[str, list], Any] | None, n: int) -> None:
        self.target = target
        self.n = n
        self.columns: dict[str, list] = {}

    def recorder(self, idx: list[int]) -> Callable[[str, Sequence], None]:
        def log_extra(column: str, values: Sequence) -> None:
            col = self.columns.setdefault(column, [None] * self.n)
            for j, v in zip(idx, values):
                col[j] = v

        return log_extra

    def forward(self, owner: list[int], n_rows: int, whole: bool) -> None:
        if self.target is None:
            return
        for column, values in self.columns.items():
            rows: list[list] = [[] for _ in range(n_rows)]
            for j, o in enumerate(owner):
                rows[o].append(values[j])
            self.target(column, [(r[0] if r else None) if whole else r for r in rows])


class RewardShapeError(UserError, ValueError):
    """A reward function returned the wrong number of values: a bug in it, never an answer's fault."""


def _check_target_weights(target_weights: Sequence[float] | None, d: int) -> np.ndarray | None:
    if target_weights is None:
        return None
    w = np.asarray(target_weights, dtype=float)
    if w.shape != (d,) or (w < 0).any() or not np.isclose(w.sum(), 1.0):
        raise ValueError(f"target_weights must be {d} non-negative numbers summing to 1, got {target_weights}")
    return w


class TaskWrapper(Task):
    """A task that is another task (``inner``) with one thing changed: prompts, data, parsing and
    scores are the inner task's unless a subclass overrides them (``constrained`` refuses some answers,
    ``noisy`` corrupts training rewards). Attributes the wrapper does not have come from ``inner``."""

    _COPIED = (
        "name",
        "objectives",
        "answer_format",
        "answer_noun",
        "system_prompt",
        "instruction_style",
        "preferences",
    )

    def __init__(self, inner: Task) -> None:
        if not isinstance(inner, Task):
            raise TypeError(f"{type(self).__name__} wraps a vpo Task; got {type(inner).__name__}")
        self.inner = inner
        for attr in self._COPIED:
            setattr(self, attr, getattr(inner, attr))

    def __getattr__(self, item: str):  # anything task-specific (config, solvers, ...)
        if item == "inner":
            raise AttributeError(item)
        return getattr(self.inner, item)

    @property
    def target_weights(self) -> np.ndarray:
        return self.inner.target_weights

    def load(self, split: str = "train", n: int | None = None, seed: int | None = None, **kwargs) -> list[Example]:
        """The inner task's examples: its own default seed unless one is given."""
        if seed is not None:
            kwargs["seed"] = seed
        return self.inner.load(split, n=n, **kwargs)

    def question(self, example: Example) -> str:
        return self.inner.question(example)

    def build_prompt(self, example: Example, m: int = 1, weights: Sequence[float] | None = None) -> str:
        return self.inner.build_prompt(example, m, weights)

    def describe_weights(self, weights: Sequence[float]) -> str:
        return self.inner.describe_weights(weights)

    def parse(self, completion: str, m: int) -> list[str]:
        return self.inner.parse(completion, m)

    def canonical(self, answer: str) -> Any:
        return self.inner.canonical(answer)

    def dedup_key(self, example: Example, answer: str) -> Any:
        return self.inner.dedup_key(example, answer)

    def score(self, example: Example, answer: str) -> np.ndarray:
        return self.inner.score(example, answer)

    def score_answers(self, examples, answers):
        return self.inner.score_answers(examples, answers)
