"""A weighted rubric as a vector-reward task: each reward function (or reward model) is an
objective, its weight is its share of ``w*``.

Most scalar rewards are sums of components, ``R = Σ_i w_i f_i``. :func:`rubric_task` keeps the
components apart: the task's reward vector is ``r_i = g_i(f_i)``, each ``f_i`` mapped onto [0, 1]
by ``g_i``, and its ``w*`` is ``|w| / Σ|w|``. For every answer whose raw scores lie in their
``ranges``, ``w*ᵀr = (R − c) / s`` with ``s > 0`` (:meth:`RubricTask.rubric_offset_scale` gives c
and s), so GRPO on ``w*`` ranks answers exactly as the original rubric did, and VPO gets the
components. ``g_i`` rescales ``[lo, hi]`` (``ranges``, default ``(0, 1)``) to [0, 1], clipping
outside; a component with a negative weight (a penalty) is flipped, ``r_i = 1 − g_i(f_i)``, so that
a higher ``r_i`` is always better. A reward model without a range goes through a sigmoid (its
logit's Bradley-Terry probability against a zero logit), which keeps its order but not the
rubric's sum exactly.

What the rubric may be (one adapter for the three):

* a ``verifiers`` ``Rubric(funcs, weights)`` or anything with ``funcs``/``reward_funcs`` and
  ``weights``/``reward_weights`` attributes (duck-typed: verifiers is not imported);
* TRL's ``reward_funcs`` with ``reward_weights`` (``rubric_task(funcs, weights, ...)``), strings
  naming a reward model included;
* a list of reward models: ``transformers`` sequence-classification models (one logit), given as
  loaded ``(model, tokenizer)`` pairs or as paths / hub ids loaded with ``AutoModelForSequenceClassification``.

How each function is called, by its signature (``**kwargs`` gets every argument):

* a group function, as verifiers' ``_is_group_func`` tells one (a parameter among ``answers``,
  ``states``, ``tasks``, ``infos``, or a ``list`` return annotation), is called once per group (the
  consecutive answers to one example) with lists: ``prompts``, ``completions``, ``answers``,
  ``states`` (``{}`` each), ``tasks`` (the task's name), ``infos`` (the example) and each example
  column; it returns one float per answer;
* any other with a ``prompts`` or ``completions`` parameter is TRL-style, called once per batch with
  the same lists;
* any other is verifiers-style, called once per answer with ``prompt``, ``completion``, ``answer``,
  ``state`` (``{}``), ``task``, ``info`` and the example's columns.

Each also gets the rubric's class objects: a verifiers ``Rubric``'s ``class_objects`` (its
``parser`` among them), or ``parser=`` given to :func:`rubric_task`, so the canonical
``fn(parser, completion, answer, **kwargs)`` works. Coroutine functions are awaited, all of a
batch's together on one event loop (a worker thread's own loop when the caller's loop is running).
A reward model scores the chat-formatted question and answer (its tokenizer's chat template when it
has one, else ``question + "\\n\\n" + answer``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import math
import sys
from typing import Any, Callable, Mapping, Sequence, get_origin

import numpy as np

from vpo.tasks.base import Example, Task, ask, load_examples

_PER_ANSWER = ("prompt", "completion", "answer", "state", "task", "info")
_GROUP = frozenset({"answers", "states", "tasks", "infos"})  # with prompts/completions: verifiers' group indicators


def _rubric_parts(rubric: Any) -> tuple[list, list[float] | None]:
    """(functions, weights) of a verifiers-style rubric object."""
    for fa, wa in (("funcs", "weights"), ("reward_funcs", "reward_weights")):
        funcs = getattr(rubric, fa, None)
        if funcs is not None:
            weights = getattr(rubric, wa, None)
            return list(funcs), (None if weights is None else [float(w) for w in weights])
    raise TypeError(
        f"rubric_task: a {type(rubric).__name__} is not a rubric: give a list of reward functions (with weights=), "
        "or an object with funcs/weights (verifiers' Rubric) or reward_funcs/reward_weights"
    )


def _name_of(f: Any, i: int) -> str:
    if isinstance(f, str):
        return f.rstrip("/").split("/")[-1]
    if isinstance(f, tuple) and f:
        f = f[0]
    name = getattr(f, "__name__", None) or getattr(getattr(f, "config", None), "_name_or_path", None)
    return str(name).rstrip("/").split("/")[-1] if name else f"r{i}"


def _is_reward_model(f: Any) -> bool:
    if isinstance(f, (str, tuple)):
        return True
    transformers = sys.modules.get("transformers")  # a loaded model means transformers is imported already
    return transformers is not None and isinstance(f, transformers.PreTrainedModel)


class _RewardModel:
    """A sequence-classification reward model as a per-answer scorer: its one logit."""

    def __init__(self, spec: Any) -> None:
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        if isinstance(spec, tuple):
            if len(spec) != 2:
                raise ValueError("rubric_task: a reward model given as a tuple must be (model, tokenizer)")
            self.model, self.tokenizer = spec
        elif isinstance(spec, str):
            self.model = AutoModelForSequenceClassification.from_pretrained(spec, num_labels=1)
            self.tokenizer = AutoTokenizer.from_pretrained(spec)
        else:
            raise ValueError(
                f"rubric_task: give a loaded reward model with its tokenizer, as (model, tokenizer); got a "
                f"{type(spec).__name__} alone"
            )
        if getattr(self.model.config, "num_labels", 1) != 1:
            raise ValueError(
                f"rubric_task: reward model {_name_of(spec, 0)!r} has {self.model.config.num_labels} labels; "
                "a reward model gives one logit (num_labels=1)"
            )
        self.model.eval()
        self._torch = torch

    def text(self, question: str, answer: str) -> str:
        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            msgs = [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
            return tok.apply_chat_template(msgs, tokenize=False)
        return f"{question}\n\n{answer}"

    def __call__(self, questions: Sequence[str], answers: Sequence[str]) -> list[float]:
        texts = [self.text(q, a) for q, a in zip(questions, answers)]
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        batch = self.tokenizer(texts, return_tensors="pt", padding=True, truncation=True)
        with self._torch.no_grad():
            logits = self.model(**batch).logits
        return [float(x) for x in logits[:, 0].float()]


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def _await_all(columns: list[list[list]]) -> None:
    """Replace every awaitable value in ``columns``' chunks by its result, all gathered on one event
    loop: ``asyncio.run`` here, or in a worker thread (its own loop) when this thread's loop is
    running. The first exception is raised once all have finished."""
    pending = [chunk for chunks in columns for chunk in chunks if inspect.isawaitable(chunk[1])]
    if not pending:
        return

    async def gather() -> list:
        return await asyncio.gather(*(chunk[1] for chunk in pending), return_exceptions=True)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        results = asyncio.run(gather())
    else:
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="vpo-rubric") as pool:
            results = pool.submit(asyncio.run, gather()).result()
    for chunk, result in zip(pending, results):
        if isinstance(result, BaseException):
            raise result
        chunk[1] = result


class RubricTask(Task):
    """The task :func:`rubric_task` builds (module docstring)."""

    def __init__(
        self,
        funcs: Sequence[Any],
        weights: Sequence[float] | None,
        examples: Sequence[Example] | Mapping[str, Sequence[Example]] | Callable[[str], Sequence[Example]],
        *,
        name: str = "rubric",
        objectives: Sequence[str] | None = None,
        ranges: Mapping[str, tuple[float, float]] | Sequence[tuple[float, float] | None] | None = None,
        question: str | Callable[[Example], str] = "question",
        answer_format: str = "tags",
        parser: Any = None,
        class_objects: Mapping[str, Any] | None = None,
    ) -> None:
        funcs = list(funcs)
        if not funcs:
            raise ValueError("rubric_task: the rubric has no reward functions")
        w = np.ones(len(funcs)) if weights is None else np.asarray(list(weights), dtype=float)
        if w.shape != (len(funcs),):
            raise ValueError(f"rubric_task: {len(funcs)} reward functions but {w.size} weights (one per function)")
        if not np.all(np.isfinite(w)) or not np.any(w != 0):
            raise ValueError(f"rubric_task: the weights must be finite and not all 0, got {w.tolist()}")
        names = list(objectives) if objectives is not None else [_name_of(f, i) for i, f in enumerate(funcs)]
        if len(names) != len(funcs):
            raise ValueError(f"rubric_task: {len(names)} objective names for {len(funcs)} reward functions")
        seen: dict[str, int] = {}
        for i, n in enumerate(names):  # two functions of one name: number the repeats
            seen[n] = seen.get(n, 0) + 1
            if seen[n] > 1:
                names[i] = f"{n}_{seen[n]}"
        self.name = name
        self.objectives = tuple(names)
        self.answer_format = answer_format
        self.weights = w
        self._examples = examples
        self._question = question
        self._models = {i: _RewardModel(f) for i, f in enumerate(funcs) if _is_reward_model(f)}
        self._fns = funcs
        self._objects = dict(class_objects or {})  # verifiers' Rubric.class_objects: given to every function
        if parser is not None:
            self._objects["parser"] = parser
        self._ranges = self._read_ranges(ranges)
        self._w = np.abs(w) / np.abs(w).sum()

    def _read_ranges(self, ranges) -> list[tuple[float, float] | None]:
        d = self.d
        if ranges is None:
            given: list = [None] * d
        elif isinstance(ranges, Mapping):
            unknown = sorted(set(ranges) - set(self.objectives))
            if unknown:
                raise ValueError(f"rubric_task: ranges names {unknown}, not objectives {list(self.objectives)}")
            given = [ranges.get(n) for n in self.objectives]
        else:
            given = list(ranges)
            if len(given) != d:
                raise ValueError(f"rubric_task: {len(given)} ranges for {d} reward functions")
        out = []
        for i, r in enumerate(given):
            if r is None:
                out.append(None if i in self._models else (0.0, 1.0))
                continue
            lo, hi = (float(x) for x in r)
            if not hi > lo:
                raise ValueError(f"rubric_task: range of {self.objectives[i]!r} must be (lo, hi) with hi > lo, got {r}")
            out.append((lo, hi))
        return out

    # -- identity and data ------------------------------------------------------------------
    @property
    def target_weights(self) -> np.ndarray:
        return self._w

    @property
    def declared_target_weights(self) -> np.ndarray:
        return self._w

    def load(self, split: str = "train", n: int | None = None, seed: int = 0) -> list[Example]:
        return load_examples(self._examples, self.name, split, n, seed)

    def question(self, example: Example) -> str:
        return ask(self._question, example)

    # -- scoring ----------------------------------------------------------------------------
    def raw_scores(self, examples: Sequence[Example], answers: Sequence[str]) -> np.ndarray:
        """``[n, d]``: each function's own score of ``answers[k]`` on ``examples[k]``. A group is a
        run of consecutive answers to one example (the same object); coroutines are awaited together."""
        questions = [self.question(ex) for ex in examples]
        columns = [self._column(i, f, examples, questions, answers) for i, f in enumerate(self._fns)]
        _await_all(columns)
        out = np.empty((len(answers), self.d), dtype=np.float64)
        for i, chunks in enumerate(columns):
            col: list = []
            for size, value in chunks:
                if size is None:
                    col.append(value)
                    continue
                value = list(value)
                if len(value) != size:
                    raise ValueError(
                        f"rubric_task: reward function {self.objectives[i]!r} returned {len(value)} values "
                        f"for {size} answers"
                    )
                col.extend(value)
            out[:, i] = [np.nan if v is None else float(v) for v in col]
        return out

    def _column(self, i: int, f: Any, examples, questions, answers) -> list[list]:
        """Function ``i``'s calls as chunks ``[size, value]``: ``size`` None for one answer's
        score, else the number of answers a list covers; a value may still be awaitable."""
        if i in self._models:
            return [[len(answers), self._models[i](questions, answers)]]
        kind = _kind(f)
        if kind == "answer":
            return [[None, _call(f, self._per_answer(ex, q, a))] for ex, q, a in zip(examples, questions, answers)]
        spans = _groups(examples) if kind == "group" else [(0, len(answers))] if answers else []
        return [[b - a, _call(f, self._lists(examples[a:b], questions[a:b], answers[a:b]))] for a, b in spans]

    def _lists(self, examples: Sequence[Example], questions: Sequence[str], answers: Sequence[str]) -> dict:
        kwargs = {
            "prompts": list(questions),
            "completions": list(answers),
            "answers": [ex.get("answer") for ex in examples],
            "states": [{} for _ in examples],
            "tasks": [self.name] * len(examples),
            "infos": list(examples),
        }
        for key in examples[0] if examples else ():
            if key not in kwargs:
                kwargs[key] = [ex.get(key) for ex in examples]
        kwargs.update(self._objects)
        return kwargs

    def _per_answer(self, example: Example, question: str, answer: str) -> dict:
        kwargs = {k: v for k, v in example.items() if k not in _PER_ANSWER}
        kwargs.update(
            prompt=question, completion=answer, answer=example.get("answer"), state={}, task=self.name, info=example
        )
        kwargs.update(self._objects)
        return kwargs

    def transform(self, raw: np.ndarray) -> np.ndarray:
        """Raw scores ``[..., d]`` to the reward vector: rescaled to [0, 1] by each range (a
        sigmoid for a reward model without one), clipped, flipped where the weight is negative."""
        raw = np.asarray(raw, dtype=np.float64)
        r = np.empty_like(raw)
        for i, rng in enumerate(self._ranges):
            x = raw[..., i]
            if rng is None:
                r[..., i] = np.vectorize(_sigmoid, otypes=[float])(x)
            else:
                r[..., i] = (x - rng[0]) / (rng[1] - rng[0])
        r = np.clip(np.nan_to_num(r, nan=0.0), 0.0, 1.0)
        flip = self.weights < 0
        r[..., flip] = 1.0 - r[..., flip]
        return r

    def rubric_score(self, raw: np.ndarray) -> np.ndarray:
        """The original rubric's scalar ``Σ w_i f_i`` of raw scores ``[..., d]``."""
        return np.asarray(raw, dtype=np.float64) @ self.weights

    def rubric_offset_scale(self) -> tuple[float, float]:
        """``(c, s)`` with ``w*ᵀr = (R − c) / s`` for raw scores inside their ranges. With every
        range of one width h: ``r_i = (f_i − lo_i)/h``, flipped where ``w_i < 0``, so
        ``c = Σ w_i lo_i − h Σ_{w_i<0} |w_i|`` and ``s = h Σ |w_i|``."""
        if any(r is None for r in self._ranges):
            raise ValueError("rubric_task: a reward model without a range goes through a sigmoid: no affine map to R")
        lo = np.array([r[0] for r in self._ranges])
        width = np.array([r[1] - r[0] for r in self._ranges])
        if not np.allclose(width, width[0]):
            raise ValueError(
                "rubric_task: ranges of different widths rescale the components by different factors, so w*ᵀr is "
                "a reweighted sum, not an affine map of the rubric's score; give ranges of one width for that"
            )
        w, h = self.weights, float(width[0])
        return float(w @ lo - h * np.abs(w[w < 0]).sum()), float(h * np.abs(w).sum())

    def score_answers(self, examples: Sequence[Example], answers: Sequence[Sequence[str]]) -> list[list[Any]]:
        """Scored in one batch; when that raises, example by example (a group function keeps its
        group), and within an example that raises, answer by answer (counted as scorer errors)."""
        owner = [i for i, ans in enumerate(answers) for _ in ans]
        flat = [a for ans in answers for a in ans]
        if not flat:
            return [[] for _ in answers]
        try:
            rewards = self.transform(self.raw_scores([examples[o] for o in owner], flat))
        except Exception:  # noqa: BLE001 - find the examples, then the answers, that fail
            return [self._score_group(ex, list(ans)) for ex, ans in zip(examples, answers)]
        out: list[list[Any]] = [[] for _ in answers]
        for o, r in zip(owner, rewards):
            out[o].append(r)
        return out

    def _score_group(self, example: Example, answers: list[str]) -> list[Any]:
        if not answers:
            return []
        try:
            return list(self.transform(self.raw_scores([example] * len(answers), answers)))
        except Exception:  # noqa: BLE001 - one call per answer (counted as scorer errors)
            out: list[Any] = []
            for a in answers:
                try:
                    out.append(self.transform(self.raw_scores([example], [a]))[0])
                except Exception as e:  # noqa: BLE001 - counted by score_completions
                    out.append(e)
            return out

    def score(self, example: Example, answer: str) -> np.ndarray:
        return self.transform(self.raw_scores([example], [answer]))[0]


def _kind(f: Callable) -> str:
    """``"group"`` (verifiers' group function), ``"batch"`` (TRL-style) or ``"answer"`` (module docstring)."""
    try:
        sig = inspect.signature(f)
    except (TypeError, ValueError):
        return "answer"
    params = set(sig.parameters)
    ret = sig.return_annotation
    returns_list = ret is list or get_origin(ret) is list or (isinstance(ret, str) and ret.startswith(("list", "List")))
    if params & _GROUP or returns_list:
        return "group"
    return "batch" if params & {"prompts", "completions"} else "answer"


def _groups(examples: Sequence[Example]) -> list[tuple[int, int]]:
    """``[start, stop)`` of each run of consecutive answers to one example (the same object)."""
    spans: list[tuple[int, int]] = []
    for k, ex in enumerate(examples):
        if spans and examples[spans[-1][0]] is ex:
            spans[-1] = (spans[-1][0], k + 1)
        else:
            spans.append((k, k + 1))
    return spans


def _call(f: Callable, kwargs: dict) -> Any:
    """``f`` with the keyword arguments its signature takes (all of them if it takes ``**kwargs``)."""
    try:
        params = inspect.signature(f).parameters
    except (TypeError, ValueError):
        return f(**kwargs)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return f(**kwargs)
    return f(**{k: v for k, v in kwargs.items() if k in params})


def rubric_task(
    rubric: Any,
    weights: Sequence[float] | None = None,
    examples: Sequence[Example] | Mapping[str, Sequence[Example]] | Callable[[str], Sequence[Example]] = (),
    **options: Any,
) -> RubricTask:
    """A vpo task from a rubric (module docstring): ``rubric`` is a verifiers-style Rubric object,
    or a list of reward functions / reward models (``(model, tokenizer)`` pairs, paths) with ``weights`` (TRL's ``reward_funcs`` and
    ``reward_weights``; default: all 1). ``examples`` as for :class:`~vpo.tasks.FunctionTask` (a
    list, ``{split: list}`` or ``split -> list``). Options: ``name``, ``objectives`` (names; default
    the functions' ``__name__``), ``ranges`` (per objective ``(lo, hi)``, by name or position;
    default ``(0, 1)``), ``question`` (the example key or a function; default ``"question"``),
    ``answer_format`` (``"tags"`` or ``"code"``), ``parser`` (given to every function that takes
    ``parser``; default a rubric object's own), ``class_objects`` (more such arguments by name;
    default a rubric object's ``class_objects``)."""
    if isinstance(rubric, list):
        funcs = list(rubric)
    else:
        funcs, rubric_weights = _rubric_parts(rubric)
        if weights is not None:
            raise ValueError("rubric_task: the rubric carries its own weights; do not pass weights= as well")
        weights = rubric_weights or None
        options.setdefault("class_objects", getattr(rubric, "class_objects", None))
        options.setdefault("parser", getattr(rubric, "parser", None))
    return RubricTask(funcs, weights, examples, **options)
