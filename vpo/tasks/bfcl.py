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
  gold's function name over the number of gold calls;
* ``arg_key``: the mean over the gold calls of required keys given / (required keys + unexpected
  keys given) (a required key is one whose acceptable values lack ``""`` or that the schema
  requires; an unexpected key is one BFCL does not allow: not in the gold or not in the schema);
  an unpaired gold call scores 0;
* ``arg_value``: pooled over the gold calls, the required values given that BFCL accepts
  (:func:`value_accepted`: BFCL's type check and its string standardisation) over the values
  demanded: the required keys, plus each optional key given a value BFCL rejects; 1 when nothing is
  demanded.

Every denominator is fixed by the gold or grows with the answer's mistakes, so no answer raises a
fraction by adding what the gold does not demand (partial credit never rewards what BFCL's
all-or-nothing rule rejects more than the plain wrong answer): an optional argument given an
accepted value (``""`` included) counts nowhere, as good as leaving it out and never better; an
unexpected key lowers ``arg_key``, a rejected optional value ``arg_value``. An answer with more
calls than the gold (candidates for the one call wanted, a repeated call) scores 0 on
``function_name``, ``arg_key`` and ``arg_value``: BFCL rejects the count, and a set of candidates
earns no more than its worst member. All four are 1 exactly when BFCL's checker accepts the calls
(tested against it, type-flipped lists and nested values included).

Calls are read from JSON or Python as written (a list or tuple of calls, nested or not; the
alternatives of ``a or b`` and ``a if c else b`` count as calls; ``not f(x)`` is no call) or, when
the body is neither, from every call written in its prose except those the prose negates ("It is
not f(x).", "f(x)? No."; :mod:`vpo.tasks._negation`), with ``format`` 0.

So a wrong function name lowers only ``function_name``, a wrong value only ``arg_value``, an
unexpected argument only ``arg_key``; a missing required argument lowers ``arg_key`` and
``arg_value`` (its value was not given), a missing call all three, an extra call all three to 0.
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
from vpo.tasks._negation import negated
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
    if parsed is not None:
        return parsed  # JSON or Python: read as written (no calls are searched for inside it)
    # prose around the calls: every call in it is read (each bracketed span from a call's start to
    # its matching bracket that parses), so listing candidates in prose ("f(a=1) or maybe f(a=2)")
    # is scored as the candidate calls it lists; the format stays 0
    return ParsedCalls(_prose_calls(s), clean=False)


_CALL_START = re.compile(r"[\[{]|\b[A-Za-z_][\w.]*\(")
_MAX_PROSE_STARTS = 200
_MAX_PROSE_SPAN = 4000


def _closing(s: str, start: int) -> int | None:
    """Index of the bracket closing the one that opens at or after ``start`` (quotes respected),
    or None (also past :data:`_MAX_PROSE_SPAN` characters)."""
    depth, quote, i = 0, "", start
    while i < min(len(s), start + _MAX_PROSE_SPAN):
        c = s[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif c in "\"'":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return i
            if depth < 0:
                return None
        i += 1
    return None


def _prose_calls(s: str) -> list[tuple[str, dict]]:
    """The calls written anywhere in prose, in order: from each place a call could start (``[``,
    ``{`` or a name directly followed by ``(``, not on a ``def``/``class`` line: a definition is not
    a call) to its closing bracket, the spans that parse as calls (a span is not read twice), less
    those its clause negates (:mod:`vpo.tasks._negation`: "It is not f(x).", "f(x)? No.")."""
    calls: list[tuple[str, dict]] = []
    done = 0
    for n, m in enumerate(_CALL_START.finditer(s)):
        if n >= _MAX_PROSE_STARTS:
            break
        if m.start() < done:
            continue
        line_end = s.find("\n", m.start())
        if _DEFINITION.match(s[s.rfind("\n", 0, m.start()) + 1 : line_end if line_end >= 0 else len(s)]):
            continue
        end = _closing(s, m.start())
        if end is None:
            continue
        found = _parse_body(s[m.start() : end + 1])
        if found is not None and found.calls:
            done = end + 1
            if not negated(s, m.start(), end + 1):  # "not f(x)", "f(x)? No.": not a call
                calls.extend(found.calls)
    return calls


def _parse_body(s: str) -> ParsedCalls | None:
    """The calls of a body that is JSON or Python; None when it is neither."""
    if s[0] in "[{":
        parsed = _parse_json(s)
        if parsed is not None:
            return parsed
    return _parse_python(s)


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
    stack = list(reversed(objs))
    while stack:  # lists nested in the list are read too (candidates hidden one level down count)
        obj = stack.pop()
        if isinstance(obj, list):
            clean = False
            stack.extend(reversed(obj))
            continue
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


def _call_nodes(node: ast.AST, out: list[ast.Call]) -> bool:
    """Collect the calls an expression lists (a call, a list or tuple of them, nested); True when it is
    nothing else. The alternatives of ``a or b`` and ``a if c else b`` are collected as calls (a
    set of candidates, scored as such); a negated call (``not f(x)``) is not a call."""
    if isinstance(node, ast.Call):
        out.append(node)
        return True
    if isinstance(node, (ast.List, ast.Tuple)):
        return all([_call_nodes(e, out) for e in node.elts]) and bool(node.elts)
    if isinstance(node, ast.BoolOp):
        for v in node.values:
            _call_nodes(v, out)
    elif isinstance(node, ast.IfExp):
        _call_nodes(node.body, out)
        _call_nodes(node.orelse, out)
    elif isinstance(node, ast.Await):
        _call_nodes(node.value, out)
    return False


def _parse_python(s: str) -> ParsedCalls | None:
    """The calls of a body that is Python (None when it is not): each statement's expression, or
    the value an assignment gives, read by :func:`_call_nodes`."""
    try:
        tree = ast.parse(s, mode="exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    nodes: list[ast.Call] = []
    clean = bool(tree.body)
    for stmt in tree.body:
        if isinstance(stmt, ast.Expr):
            clean &= _call_nodes(stmt.value, nodes)
        else:
            clean = False
            if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and stmt.value is not None:
                _call_nodes(stmt.value, nodes)
    calls = []
    for node in nodes:
        name = _dotted(node.func)
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
    try:
        return any(value == o for o in options)
    except Exception:  # a literal never raises here; guard anyway: a comparison error is no match
        return False


def _values(acceptable: Sequence[Any]) -> list[Any]:
    """The acceptable values without ``""`` (which marks an argument that may be left out)."""
    return [a for a in acceptable if not _optional(a)]


def _answer_type(acceptable: Sequence[Any]) -> type | None:
    """The type of the first acceptable value that is not ``""`` (BFCL's "possible answer type")."""
    return next((type(a) for a in acceptable if not _optional(a)), None)


def _type_check(value: Any, acceptable: Sequence[Any], expected: type, item_type: type | None) -> tuple[bool, bool]:
    """``(type accepted, compared as a "variable")`` under BFCL's type check. The value must have the
    schema's type or, failing that, the acceptable values' own type (BFCL's "variable" case, then
    compared as is). A list is checked one level deep: each element must have the schema's item
    type (no int-for-float there: ``[1, 3]`` is not a list of floats) or the type of that acceptable
    list's first element; an acceptable value that is not a list (``""`` among them) does not
    constrain the elements, as in BFCL."""
    answer_type = _answer_type(acceptable)
    variable = answer_type is not None and answer_type is not expected
    if type(value) is expected:
        if item_type is None:
            return True, variable
        for a in acceptable:
            if type(a) is not list:
                return True, variable
            inner = _answer_type(a)
            if all(type(v) is item_type or (inner is not None and type(v) is inner) for v in value):
                return True, variable
        return False, False
    if answer_type is not None and type(value) is answer_type:
        return True, True
    return False, False


def _std_items(xs: Any) -> list[Any]:
    return [standardize(x) if type(x) is str else x for x in xs]


def _dict_accepted(value: Any, specs: Sequence[Any]) -> bool:
    """A dict argument against its acceptable dicts (each maps a key to its acceptable values):
    every key given must be in the spec with an accepted value (strings standardised; ``""`` is
    accepted where the spec lists it, as BFCL does), every key whose values lack ``""`` present."""
    if not isinstance(value, dict):
        return False
    for spec in specs:
        if not isinstance(spec, dict):
            continue
        if all(
            k in spec
            and isinstance(spec[k], (list, tuple))
            and _in(standardize(v) if type(v) is str else v, _std_items(spec[k]))
            for k, v in value.items()
        ) and all(k in value or (isinstance(opts, (list, tuple)) and "" in opts) for k, opts in spec.items()):
            return True
    return False


def value_accepted(value: Any, acceptable: Sequence[Any], schema: dict | None) -> bool:
    """Whether BFCL's checker accepts ``value`` for an argument with these acceptable values and
    this schema, following its Python rules one by one: a tuple counts as a list where the schema
    says tuple; an int counts as a float where the schema says float (at the top level only);
    :func:`_type_check`; then, unless the value was taken as a "variable" (compared as is, by
    equality), a string compares after :func:`standardize` (``""`` is accepted where it is
    listed), a dict must match one acceptable dict, a list of dicts one acceptable list pointwise,
    another list one acceptable list element by element (strings standardised; ``[]`` is accepted
    where ``""`` is listed, as BFCL reads ``""`` as an empty list), anything else by equality."""
    schema = schema or {}
    t = schema.get("type")
    expected = _PY_TYPES.get(t)
    if expected is None:  # no schema type to check against (BFCL's data always has one)
        return _in(value, _values(acceptable))
    if isinstance(value, tuple) and t == "tuple":
        value = list(value)
    if t == "float" and type(value) is int:
        try:
            value = float(value)
        except OverflowError:  # past float range: no acceptable float equals it (BFCL's checker raises)
            return False
    item_type = _PY_TYPES.get((schema.get("items") or {}).get("type")) if t in ("array", "tuple") else None
    typed, variable = _type_check(value, acceptable, expected, item_type)
    if not typed:
        return False
    if not variable:
        if expected is dict:
            return _dict_accepted(value, acceptable)
        if expected is list and item_type is dict:
            return any(
                isinstance(a, (list, str))
                and len(a) == len(value)
                and all(_dict_accepted(v, [s]) for v, s in zip(value, a))
                for a in acceptable
            )
        if expected is str:
            return _in(standardize(value), [standardize(a) for a in acceptable if type(a) is str])
        if expected is list:
            std = _std_items(value)
            return any(isinstance(a, (list, str)) and std == _std_items(a) for a in acceptable)
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
    """(name match, key score, required values accepted, values demanded) of one predicted call
    against one gold call. Both fractions have denominators the answer cannot inflate: the key score
    is required keys given / (required keys + unexpected keys given); the values demanded are the
    required keys plus the optional keys given with a value BFCL rejects. An optional argument given
    an accepted value (``""`` included) counts nowhere: it is as good as leaving it out, never more."""
    allowed, required = gold.allowed, gold.required
    unexpected = sum(k not in allowed for k in args)
    key_den = len(required) + unexpected
    key = sum(k in args for k in required) / key_den if key_den else 1.0
    ok, demanded = 0, len(required)
    for k in args:
        if k not in allowed:
            continue
        accepted = value_accepted(args[k], gold.acceptable[k], gold.schema.get(k))
        if k in required:
            ok += accepted
        elif not accepted:
            demanded += 1
    return float(name == gold.name), key, ok, demanded


def _pairing(parts: dict, gold_idx: Sequence[int], pred_idx: Sequence[int]) -> list[tuple[int, int]]:
    """A one-to-one pairing of gold and predicted calls, order-free: greedily, the pair with the
    highest total of name match, key score and value share first (ties: gold order, then answer order)."""

    def value(i: int, j: int) -> float:
        name, key, ok, demanded = parts[i, j]
        return name + key + (ok / demanded if demanded else 1.0)

    table = sorted((-value(i, j), i, j) for i in gold_idx for j in pred_idx)
    pairs, used_g, used_p = [], set(), set()
    for _, i, j in table:
        if i not in used_g and j not in used_p:
            pairs.append((i, j))
            used_g.add(i)
            used_p.add(j)
    return pairs


def _calls_score(parts: dict, gold: list[_Gold], pred_idx: Sequence[int]) -> tuple[float, float, float]:
    """(calls with the gold's name, mean key score over the gold calls, pooled value share) of the
    predicted calls ``pred_idx`` (at most as many as the gold calls); an unpaired gold call scores 0
    on keys and demands all its required values."""
    pairs = _pairing(parts, range(len(gold)), pred_idx)
    names = sum(parts[i, j][0] for i, j in pairs)
    keys = sum(parts[i, j][1] for i, j in pairs) / len(gold)
    paired = {i for i, _ in pairs}
    ok = sum(parts[i, j][2] for i, j in pairs)
    demanded = sum(parts[i, j][3] for i, j in pairs) + sum(
        len(gold[i].required) for i in range(len(gold)) if i not in paired
    )
    return names, keys, (ok / demanded if demanded else 1.0)


def score_calls(parsed: ParsedCalls, gold: list[_Gold]) -> np.ndarray:
    """``[format, function_name, arg_key, arg_value]`` of parsed calls against the gold calls (module
    docstring). More calls than the gold (candidates for a call, a repeated call) score 0 on the
    three call components: BFCL's checker rejects the count, and read as a set of candidates the
    answer earns no more than its worst member."""
    pred = parsed.calls
    if not pred or not gold:
        return np.zeros(4, dtype=np.float64)
    clean = float(parsed.clean)
    if len(pred) > len(gold):
        return np.array([clean, 0.0, 0.0, 0.0], dtype=np.float64)
    parts = {(i, j): _pair_parts(gold[i], *pred[j]) for i in range(len(gold)) for j in range(len(pred))}
    names, keys, values = _calls_score(parts, gold, range(len(pred)))
    return np.array([clean, names / len(gold), keys, values], dtype=np.float64)


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


def _fold(value: Any, depth: int = 0) -> Any:
    """A value with its strings standardised (:func:`standardize`) and its dict keys lower-cased,
    for :meth:`BFCLTask.canonical`."""
    if depth > 20:
        return None
    if isinstance(value, str):
        return standardize(value)
    if isinstance(value, dict):
        return {str(k).lower(): _fold(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_fold(v, depth + 1) for v in value]
    return value


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
        # the calls alone, folded as BFCL's string standardisation folds values: "f(x)", "f(x).",
        # "**f(x)**" and "F(X)" are one answer (the format and letter case are not part of it)
        calls = sorted((n.lower(), json.dumps(_fold(a), sort_keys=True, default=repr)) for n, a in p.calls)
        return ("calls", tuple(calls))
