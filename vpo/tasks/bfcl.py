"""BFCL (Berkeley Function Calling Leaderboard) single-turn function calling, read from ``bfcl-eval``.

The items and their ground truth are the JSON-lines files ``bfcl_eval/data/BFCL_v4_<category>.json``
and ``bfcl_eval/data/possible_answer/BFCL_v4_<category>.json`` of the PyPI package ``bfcl-eval``
(Apache-2.0). Only the data files are read: the package's code is never imported, so it can be
installed with ``pip install --no-deps bfcl-eval`` (its dependency tree pins numpy 1.26 and pulls
model-provider SDKs, vLLM extras and faiss; none of it is needed here). docs/paper_tasks.md ("BFCL").

Categories: the eight single-turn categories with Python-syntax answers and ground truth
(``simple_python``, ``multiple``, ``parallel``, ``parallel_multiple`` and their ``live_``
counterparts): 2,351 items, of which 4 are left out because no answer can pass BFCL's own checker on
them (``UNSATISFIABLE``). Java and JavaScript (values are Java/JS source text that BFCL converts by
type) and the irrelevance, multi-turn, memory and web-search categories are not included.

An answer is the call(s), in Python syntax (``f(a=1)``, ``[f(a=1), g(b="x")]``, or one call per line)
or JSON (``{"name": "f", "arguments": {"a": 1}}``, a list of them, BFCL's ``{"f": {"a": 1}}``); Python
is parsed with :mod:`ast` and values read with :func:`ast.literal_eval` (nothing is evaluated). The
reward vector (d = 4, ToolRL's shape, ``w*`` uniform) against the ground truth, whose arguments each
list their acceptable values (``""`` among them: the argument may be left out):

* ``format``: the whole body parses as calls with keyword arguments and literal values;
* ``function_name``: predicted calls are paired one-to-one with gold calls, in any order (greedily,
  the pair with the most matching name, keys and values first); the number of pairs with the
  gold's function name over max(#gold, #predicted) calls;
* ``arg_key``: the mean over pairs of the F1 of the argument keys: precision = keys BFCL allows
  (in the gold and the function's schema) / keys given, recall = required keys given / required
  keys (a required key is one whose acceptable values lack ``""``);
* ``arg_value``: over the keys given that the gold allows, pooled over pairs, the fraction whose
  value BFCL accepts (:func:`value_accepted`: BFCL's type check and its string standardisation); with
  no such key, 1 if no paired gold call requires an argument, else 0.

So a wrong function name lowers only ``function_name``, a missing argument only ``arg_key``, a wrong
value only ``arg_value``, and a missing or extra call ``function_name`` (and the mean of the others
over the pairs that remain).
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from vpo._util import read_jsonl
from vpo.tasks.base import Example, Task, package_data
from vpo.tasks.registry import TaskSpecError

PACKAGE = "bfcl-eval"
PACKAGE_VERSION = "2026.3.23"
CATEGORIES = (
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
)
SPLITS = ("validation", "test", "all")
UNSATISFIABLE = {
    "live_simple_106-63-0": "arguments whose acceptable-value list is empty",
    "live_simple_112-68-0": "arguments whose acceptable-value list is empty",
    "live_multiple_862-181-3": "a required argument (journey_start_time) absent from the function's schema",
    "live_multiple_964-207-0": "a required argument (question) absent from the function's schema",
}
"""Items left out: BFCL's checker rejects every answer to them (a required argument it would also
call unexpected, or one with no acceptable value)."""
MAX_ANSWER_CHARS = 20_000
_PY_TYPES = {
    "string": str,
    "integer": int,
    "float": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "any": str,
}
"""BFCL's schema types as Python types (its checker's mapping)."""
_STANDARDIZE = re.compile(r"[ ,./\-_*^]")


def data_dir() -> Path:
    """``bfcl_eval/data`` of the installed package (located, not imported). Raises
    :class:`TaskSpecError` (one line: what to install) when it is missing."""
    found = package_data("bfcl_eval", "data", lambda d: (d / "possible_answer").is_dir())
    if found is not None:
        return found
    raise TaskSpecError(
        f"task 'bfcl' reads its items from the {PACKAGE} package, which is not installed: "
        f"pip install --no-deps {PACKAGE}=={PACKAGE_VERSION} (--no-deps: only its data files are read)"
    )


def read_items(categories: Sequence[str] = CATEGORIES) -> list[Example]:
    """The items of ``categories`` with their ground truth, in the package's order."""
    d = data_dir()
    items = []
    for cat in categories:
        questions = read_jsonl(d / f"BFCL_v4_{cat}.json")
        answers = {a["id"]: a["ground_truth"] for a in read_jsonl(d / "possible_answer" / f"BFCL_v4_{cat}.json")}
        for q in questions:
            if q["id"] in UNSATISFIABLE or q["id"] not in answers:
                continue
            if len(q["question"]) != 1:
                raise ValueError(f"bfcl: item {q['id']} of {cat} has {len(q['question'])} turns; expected one")
            items.append(
                {
                    "id": q["id"],
                    "category": cat,
                    "messages": q["question"][0],
                    "functions": q["function"],
                    "ground_truth": answers[q["id"]],
                }
            )
    return items


def _split_of(item_id: str) -> str:
    """About one item in five is validation, chosen by a hash of its id (stable across versions)."""
    return "validation" if int(hashlib.sha256(item_id.encode()).hexdigest(), 16) % 5 == 0 else "test"


# -------------------------------------------------------------------------------------------
# parsing answers
# -------------------------------------------------------------------------------------------


class _NotLiteral:
    """An argument value that is not a literal (a name, an expression): never accepted."""

    def __init__(self, source: str) -> None:
        self.source = source

    def __repr__(self) -> str:
        return f"<not a literal: {self.source}>"


@dataclass
class ParsedCalls:
    """The calls of one answer, and whether the whole body parsed cleanly."""

    calls: list[tuple[str, dict]] = field(default_factory=list)
    clean: bool = False


_DEFINITION = re.compile(r"^\s*(async\s+def|def|class)\s")
_FENCE = re.compile(r"^\s*```[A-Za-z0-9_+-]*\s*\n(.*?)\n?\s*```\s*$", re.DOTALL)


def parse_calls(text: Any) -> ParsedCalls:
    """The function calls of an answer body (JSON or Python call syntax; module docstring). Never
    raises; a body that is not entirely calls parses as what could be read, with ``clean=False``."""
    s = str(text) if text is not None else ""
    if len(s) > MAX_ANSWER_CHARS:
        return ParsedCalls()
    m = _FENCE.match(s)
    s = (m.group(1) if m else s).strip()
    if not s:
        return ParsedCalls()
    parsed = _parse_body(s)
    if parsed.calls:
        return parsed
    # prose around the calls: the calls are read from the first span of lines that parses (from a
    # call's start on its first line to the last bracket on its last line); the format stays 0
    lines = s.split("\n")
    spots = [i for i, ln in enumerate(lines) if any(c in ln for c in "([{")][:10]
    for a, i in enumerate(spots):
        for j in reversed(spots[a:]):
            cut = max(lines[j].rfind(c) for c in ")]}")
            if cut < 0 or (i == j and cut < 1):
                continue
            for start in _starts(lines[i]):
                span = [*lines[i:j], lines[j][: cut + 1]] if i < j else [lines[i][: cut + 1]]
                span[0] = span[0][start:]
                found = _parse_body("\n".join(span).strip() or " ")
                if found.calls:
                    return ParsedCalls(found.calls, clean=False)
    return parsed


def _parse_body(s: str) -> ParsedCalls:
    if s[0] in "[{":
        parsed = _parse_json(s)
        if parsed is not None:
            return parsed
    return _parse_python(s)


def _starts(line: str) -> list[int]:
    """Where a call could begin on a line of prose: its start, and each ``[``, ``{`` or identifier
    directly followed by ``(`` (the first 5 places). A ``def``/``class`` line defines, not calls:
    none (a model writing ``def the_function(...)`` gets no credit for the name)."""
    if _DEFINITION.match(line):
        return []
    spots = [0] + [m.start() for m in re.finditer(r"[\[{]|\b[A-Za-z_][\w.]*\(", line)]
    return sorted(set(spots))[:5]


def _parse_json(s: str) -> ParsedCalls | None:
    decoder = json.JSONDecoder()
    objs: list[Any] = []
    i, n = 0, len(s)
    try:
        while i < n:
            while i < n and s[i] in " \t\r\n,":
                i += 1
            if i >= n:
                break
            obj, i = decoder.raw_decode(s, i)
            objs.extend(obj if isinstance(obj, list) else [obj])
    except (ValueError, RecursionError):
        return None  # not JSON (a Python list of calls starts with "[" too)
    calls, clean = [], bool(objs)
    for obj in objs:
        call = _json_call(obj)
        if call is None:
            clean = False
        else:
            calls.append(call)
    return ParsedCalls(calls, clean)


def _json_call(obj: Any) -> tuple[str, dict] | None:
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("name"), str):
        args = obj.get("arguments", obj.get("parameters", {}))
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except (ValueError, RecursionError):
                return None
        extra = set(obj) - {"name", "arguments", "parameters"}
        if not isinstance(args, dict) or extra or not obj["name"].strip():
            return None
        return obj["name"].strip(), args
    if len(obj) == 1:  # BFCL's own {"function": {"arg": value}}
        ((name, args),) = obj.items()
        if isinstance(args, dict) and name.strip():
            return name.strip(), args
    return None


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        left = _dotted(node.value)
        return None if left is None else f"{left}.{node.attr}"
    return None


def _parse_python(s: str) -> ParsedCalls:
    try:
        tree = ast.parse(s, mode="exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ParsedCalls()
    nodes: list[ast.AST] = []
    clean = bool(tree.body)
    for stmt in tree.body:
        if not isinstance(stmt, ast.Expr):
            clean = False
            continue
        v = stmt.value
        nodes.extend(v.elts if isinstance(v, (ast.List, ast.Tuple)) else [v])
    calls = []
    for node in nodes:
        name = _dotted(node.func) if isinstance(node, ast.Call) else None
        if name is None:
            clean = False
            continue
        if node.args or any(k.arg is None for k in node.keywords):
            clean = False  # positional or **kwargs arguments: BFCL takes keyword arguments only
        args = {}
        for kw in node.keywords:
            if kw.arg is None:
                continue
            try:
                args[kw.arg] = ast.literal_eval(kw.value)
            except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
                args[kw.arg] = _NotLiteral(ast.unparse(kw.value)[:200])
                clean = False
        calls.append((name, args))
    return ParsedCalls(calls, clean and bool(calls))


# -------------------------------------------------------------------------------------------
# BFCL's value rules
# -------------------------------------------------------------------------------------------


def standardize(s: str) -> str:
    """BFCL's string standardisation: spaces and ``,./-_*^`` removed, lower case, ``'`` as ``"``."""
    return _STANDARDIZE.sub("", s).lower().replace("'", '"')


def _optional(a: Any) -> bool:
    """``""`` among acceptable values marks an argument that may be left out."""
    return isinstance(a, str) and a == ""


def _std(v: Any) -> Any:
    return standardize(v) if isinstance(v, str) else v


def _in(value: Any, options: Sequence[Any]) -> bool:
    """``value`` equals one of ``options`` (Python equality, as BFCL's checker: inside a list or a
    dict 1, 1.0 and True are equal; the top-level type check keeps them apart)."""
    return any(value == o for o in options)


def _values(acceptable: Sequence[Any]) -> list[Any]:
    """The acceptable values without ``""`` (which marks an argument that may be left out)."""
    return [a for a in acceptable if not _optional(a)]


def _dict_accepted(value: dict, specs: Sequence[Any]) -> bool:
    """A dict argument against its acceptable dicts (each maps a key to its acceptable values)."""
    for spec in specs:
        if not isinstance(spec, dict):
            continue
        if all(k in spec and _in(_std(v), [_std(o) for o in _values(spec[k])]) for k, v in value.items()) and all(
            k in value or "" in opts for k, opts in spec.items()
        ):
            return True
    return False


def _items_typed(value: list, item_type: type | None) -> bool:
    return item_type is None or all(type(x) is item_type for x in value)


def value_accepted(value: Any, acceptable: Sequence[Any], schema: dict | None) -> bool:
    """Whether BFCL's checker accepts ``value`` for an argument with these acceptable values and
    this schema: the value must have the schema's type (an int where a float is expected counts as
    the float; a tuple where a tuple is expected as a list), or the acceptable values' own type (BFCL's
    "variable" case, compared as is); strings, lists of strings and dict entries compare after
    :func:`standardize`; a dict must match one acceptable dict (missing keys only where ``""`` is
    acceptable); a list of dicts matches one acceptable list pointwise."""
    schema = schema or {}
    strings = list(acceptable)
    acceptable = _values(acceptable)
    t = schema.get("type")
    if isinstance(value, tuple) and t == "tuple":
        value = list(value)
    if t == "float" and type(value) is int:
        value = float(value)
    expected = _PY_TYPES.get(t)
    answer_type = type(acceptable[0]) if acceptable else None
    item_type = _PY_TYPES.get((schema.get("items") or {}).get("type")) if t in ("array", "tuple") else None
    typed = (
        expected is not None
        and type(value) is expected
        and (not isinstance(value, list) or _items_typed(value, item_type))
    )
    if not typed:
        if answer_type is not None and type(value) is answer_type:
            return _in(value, acceptable)  # BFCL's "variable" case: compared as is
        return expected is None and _in(value, acceptable)  # no schema type to check against
    if expected is dict:
        return _dict_accepted(value, acceptable)
    if expected is list and item_type is dict:
        return any(
            isinstance(a, list) and len(a) == len(value) and all(_dict_accepted(v, [s]) for v, s in zip(value, a))
            for a in acceptable
        )
    if expected is str:  # as BFCL: "" (the marker) is among the strings, so an empty string is accepted
        return _in(standardize(value), [standardize(a) for a in strings if isinstance(a, str)])
    if expected is list:
        std = [_std(v) for v in value]
        return any(isinstance(a, list) and std == [_std(x) for x in a] for a in acceptable)
    return _in(value, acceptable)


# -------------------------------------------------------------------------------------------
# scoring
# -------------------------------------------------------------------------------------------


@dataclass
class _Gold:
    name: str
    acceptable: dict  # key -> acceptable values
    schema: dict  # key -> the function's schema of that argument (absent: not in the schema)
    schema_required: frozenset = frozenset()  # the function schema's required arguments

    @property
    def allowed(self) -> set:
        return {k for k in self.acceptable if k in self.schema}

    @property
    def required(self) -> set:
        """Keys an answer must give: those without ``""`` among their acceptable values, and those
        the function's schema requires (BFCL checks both)."""
        return {k for k, opts in self.acceptable.items() if "" not in opts} | set(self.schema_required)


def gold_calls(example: Example) -> list[_Gold]:
    """The ground-truth calls of an item with their acceptable values and argument schemas."""
    params = {f["name"]: f.get("parameters") or {} for f in example["functions"]}
    out = []
    for call in example["ground_truth"]:
        ((name, acceptable),) = call.items()
        p = params.get(name, {})
        out.append(_Gold(name, acceptable, p.get("properties") or {}, frozenset(p.get("required") or ())))
    return out


def _pair_parts(gold: _Gold, name: str, args: dict) -> tuple[float, float, int, int]:
    """(name match, key F1, values accepted, keys compared) of one predicted call against one gold call."""
    given = set(args)
    allowed, required = gold.allowed, gold.required
    precision = len(given & allowed) / len(given) if given else 1.0
    recall = len(given & required) / len(required) if required else 1.0
    key_f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    shared = [k for k in args if k in allowed]
    ok = sum(value_accepted(args[k], gold.acceptable[k], gold.schema.get(k)) for k in shared)
    return float(name == gold.name), key_f1, ok, len(shared)


def _best_pairing(gold: list[_Gold], pred: list[tuple[str, dict]]) -> list[tuple[int, int]]:
    """A one-to-one pairing of gold and predicted calls, order-free: greedily, the pair with the
    highest total of name match, key F1 and value share first (ties: gold order, then answer order)."""

    def value(gi: int, pj: int) -> float:
        name, keys, ok, total = _pair_parts(gold[gi], *pred[pj])
        return name + keys + (ok / total if total else 0.0)

    table = sorted(((-value(i, j), i, j) for i in range(len(gold)) for j in range(len(pred))))
    pairs, used_g, used_p = [], set(), set()
    for _, i, j in table:
        if i not in used_g and j not in used_p:
            pairs.append((i, j))
            used_g.add(i)
            used_p.add(j)
    return pairs


def score_calls(parsed: ParsedCalls, gold: list[_Gold]) -> np.ndarray:
    """``[format, function_name, arg_key, arg_value]`` of parsed calls against the gold calls."""
    pred = parsed.calls
    if not pred:
        return np.zeros(4, dtype=np.float64)
    pairs = _best_pairing(gold, pred)
    names = keys = 0.0
    ok = total = 0
    for i, j in pairs:
        n, k, o, t = _pair_parts(gold[i], *pred[j])
        names += n
        keys += k
        ok += o
        total += t
    name_score = names / max(len(gold), len(pred))
    key_score = keys / len(pairs) if pairs else 0.0
    if total:
        value_score = ok / total
    else:
        value_score = float(bool(pairs) and not any(gold[i].required for i, _ in pairs))
    return np.array([float(parsed.clean), name_score, key_score, value_score], dtype=np.float64)


def _first(acceptable: Sequence[Any], top: bool = True) -> Any:
    """The first acceptable value that is not ``""``. At the top level a dict (or a list of dicts)
    is BFCL's nested form, each key listing its own acceptable values; those values are literal."""
    for a in acceptable:
        if _optional(a):
            continue
        if top and isinstance(a, dict):
            return _spec_value(a)
        if top and isinstance(a, list) and a and all(isinstance(x, dict) for x in a):
            return [_spec_value(x) for x in a]
        return a
    return ""


def _spec_value(spec: dict) -> dict:
    return {k: _first(v, top=False) for k, v in spec.items() if any(not _optional(x) for x in v)}


def reference_calls(example: Example) -> list[tuple[str, dict]]:
    """The ground truth as calls: each argument's first acceptable value; arguments that may be
    left out and have no other value, and those the function's schema lacks (BFCL calls them
    unexpected), are left out."""
    out = []
    for g in gold_calls(example):
        keep = g.required | {k for k, v in g.acceptable.items() if any(not _optional(x) for x in v)}
        args = {k: _first(v) for k, v in g.acceptable.items() if k in g.schema and k in keep}
        out.append((g.name, args))
    return out


def format_calls(calls: Sequence[tuple[str, dict]], style: str = "python") -> str:
    """Calls written as an answer: ``python`` (``f(a=1)``, several as a list) or ``json``."""
    if style == "json":
        objs = [{"name": n, "arguments": a} for n, a in calls]
        return json.dumps(objs[0] if len(objs) == 1 else objs)
    if style != "python":
        raise ValueError(f"style must be 'python' or 'json', got {style!r}")
    text = [f"{n}({', '.join(f'{k}={v!r}' for k, v in a.items())})" for n, a in calls]
    return text[0] if len(text) == 1 else "[" + ", ".join(text) + "]"


class BFCLTask(Task):
    """BFCL single-turn function calling with a (format, function name, argument key, argument
    value) vector (module docstring).

    Options (``vpo.tasks.get("bfcl", **options)``):
        categories: BFCL categories to load (default: the eight of :data:`CATEGORIES`).
    """

    name = "bfcl"
    objectives = ("format", "function_name", "arg_key", "arg_value")
    answer_noun = "answer"

    def __init__(self, categories: Sequence[str] | str | None = None) -> None:
        cats = [categories] if isinstance(categories, str) else list(categories or CATEGORIES)
        unknown = [c for c in cats if c not in CATEGORIES]
        if unknown or not cats:
            raise ValueError(f"bfcl: unknown categories {unknown}; choose from {list(CATEGORIES)}")
        data_dir()  # fail now, in one line, when the package is missing
        self.categories = tuple(cats)
        self._items: list[Example] | None = None

    # -- data -------------------------------------------------------------------------------
    def items(self) -> list[Example]:
        if self._items is None:
            self._items = read_items(self.categories)
        return self._items

    def load(self, split: str = "test", n: int | None = None, seed: int = 0) -> list[Example]:
        """Items of ``split`` (``validation``: about one in five of each category, by a hash of the
        id; ``test``: the rest; ``all``), in package order; ``n`` drawn with ``seed`` when given."""
        if split not in SPLITS:
            raise ValueError(f"bfcl has no split {split!r}; choose one of {list(SPLITS)} (BFCL is an evaluation set)")
        data = [x for x in self.items() if split == "all" or _split_of(x["id"]) == split]
        if n is not None:
            idx = np.random.default_rng(seed).permutation(len(data))[:n]
            data = [data[i] for i in sorted(idx)]
        return data

    # -- prompting --------------------------------------------------------------------------
    def question(self, example: Example) -> str:
        tools = json.dumps(example["functions"], ensure_ascii=False)
        turns = []
        for msg in example["messages"]:
            role = str(msg.get("role", "user"))
            turns.append(f"{role.capitalize()}: {msg.get('content', '')}")
        dialogue = "\n".join(turns)
        return (
            f"You can call these functions (JSON schemas):\n{tools}\n\n{dialogue}\n\n"
            "Answer with the function call(s) that fulfil the request and nothing else, with keyword "
            'arguments: Python syntax such as get_weather(city="Paris", days=3) (several calls as a list: '
            '[f(a=1), g(b="x")]), or JSON such as {"name": "get_weather", "arguments": {"city": "Paris"}}.'
        )

    # -- scoring ----------------------------------------------------------------------------
    def reference_answer(self, example: Example, style: str = "python") -> str:
        """The ground truth as an answer body (each argument's first acceptable value)."""
        return format_calls(reference_calls(example), style)

    def score(self, example: Example, answer: str) -> np.ndarray:
        return score_calls(parse_calls(answer), gold_calls(example))

    def canonical(self, answer: str) -> Any:
        p = parse_calls(answer)
        if not p.calls:
            return ("text", " ".join(str(answer).split()))
        calls = sorted((n, json.dumps(a, sort_keys=True, default=repr)) for n, a in p.calls)
        return ("calls", p.clean, tuple(calls))
