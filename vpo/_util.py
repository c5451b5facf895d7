"""Small helpers shared by several layers: integer option checks, a JSON-lines reader and the
number formatter of every report.

They sit at the bottom of the import graph with :mod:`vpo.errors` (stdlib only), so core, tasks,
search, train and demo use the same check, reader and formatter instead of each writing its own.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import warnings
from pathlib import Path
from typing import Any


NOT_A_NUMBER = "n/a"
"""What a report prints for a value that is missing or not finite (a table cell for a column that was
not evaluated at all says "–" instead)."""


def fmt_number(x: Any, digits: int = 3, signed: bool = False) -> str:
    """``x`` with ``digits`` decimals (with a sign when ``signed``); :data:`NOT_A_NUMBER` for ``None``
    or a non-finite value. The demo's reports and ``vpo eval``/``vpo search``/``vpo check``'s tables
    all write numbers with it."""
    if x is None or not math.isfinite(x):
        return NOT_A_NUMBER
    return f"{x:+.{digits}f}" if signed else f"{x:.{digits}f}"


def fmt_interval(mean: Any, lo: Any, hi: Any, digits: int = 3) -> str:
    """A mean and its interval, "0.412 [0.398, 0.431]"; the mean alone when a bound is ``None``."""
    if lo is None or hi is None:
        return fmt_number(mean, digits)
    return f"{fmt_number(mean, digits)} [{fmt_number(lo, digits)}, {fmt_number(hi, digits)}]"


def positive_int(
    value: Any,
    name: str,
    where: str = "",
    *,
    minimum: int = 1,
    allow_none: bool = False,
    hint: str = "",
    error: type[Exception] = ValueError,
) -> Any:
    """``value`` as an ``int`` if it is an integer (not a bool) ``>= minimum``, else ``error``.

    The message reads ``"{where}: {name} must be an integer >= {minimum}, got {value!r}{hint}"``
    ("a non-negative integer" when ``minimum`` is 0; "... or None" with ``allow_none``, which passes
    ``None`` through); ``where`` names the task, config or function and is left out when empty. numpy
    integers count as integers; floats, even integral ones, do not.

    >>> positive_int(3, "n")
    3
    >>> positive_int(True, "budget", "maze")
    Traceback (most recent call last):
    ...
    ValueError: maze: budget must be an integer >= 1, got True
    >>> positive_int(-1, "n", "load", minimum=0)
    Traceback (most recent call last):
    ...
    ValueError: load: n must be a non-negative integer, got -1
    """
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        prefix = f"{where}: " if where else ""
        kind = "a non-negative integer" if minimum == 0 else f"an integer >= {minimum}"
        alt = " or None" if allow_none else ""
        raise error(f"{prefix}{name} must be {kind}{alt}, got {value!r}{hint}")
    return int(value)


def read_jsonl(path: str | os.PathLike, *, torn_tail: bool = False, repair: bool = False) -> list[Any]:
    """The JSON values of a JSON-lines file, one per non-blank line, in order.

    A line that is not JSON raises ``ValueError("{path}: line {n} is not valid JSON (...)")``. With
    ``torn_tail=True`` a bad *last* line (a write cut short by a crash) is dropped with a
    ``RuntimeWarning`` instead, and ``repair=True`` also cuts it from the file so that appends
    continue cleanly; a bad line before the last is still an error.
    """
    p = Path(path)
    lines = p.read_bytes().split(b"\n")
    out, good_bytes = [], 0
    for i, line in enumerate(lines):
        if line.strip():
            try:
                out.append(json.loads(line))
            except ValueError as e:  # JSONDecodeError, or bytes that are not UTF-8
                if not torn_tail or any(rest.strip() for rest in lines[i + 1 :]):
                    raise ValueError(f"{p}: line {i + 1} is not valid JSON ({getattr(e, 'msg', e)})") from None
                warnings.warn(f"{p}: dropping a torn last line (an interrupted write)", RuntimeWarning, stacklevel=2)
                if repair:
                    with open(p, "r+b") as f:
                        f.truncate(good_bytes)
                break
        good_bytes += len(line) + 1
    return out


class JsonlRun:
    """A resumable run on disk: a ``meta.json`` beside an append-only JSON-lines file of records (a
    pool's rollouts, a search's prompts), one implementation for both.

    With ``resume=True`` and a saved meta, the saved meta is compared with ``meta`` on ``match_keys``:
    a difference raises ``mismatch(differing_keys, saved_meta)`` (the caller words it); else the
    saved records are read by ``read`` (default :func:`read_jsonl` with a torn last line dropped and
    cut from the file, so appends continue cleanly) and kept. Otherwise the records file is started
    over. ``stale`` files (made out of date by appending) are removed either way, and ``meta`` is
    written (atomically; ``meta_json``: :func:`json.dumps` options). :meth:`write` appends one record
    (``record_json``: its ``json.dumps`` options), flushed and fsynced, so a crash loses at most the
    line being written."""

    def __init__(
        self,
        meta_path: str | os.PathLike,
        records_path: str | os.PathLike,
        meta: dict,
        *,
        resume: bool,
        match_keys: Any,
        mismatch: Any,
        read: Any = None,
        load_meta: Any = None,
        stale: Any = (),
        meta_json: dict | None = None,
        record_json: dict | None = None,
    ) -> None:
        self.meta_path, self.path = Path(meta_path), Path(records_path)
        self._record_json = dict(record_json or {})
        self.records: list = []
        if resume and self.meta_path.exists():
            saved = (load_meta or (lambda p: json.loads(p.read_text(encoding="utf-8"))))(self.meta_path)
            diffs = [k for k in match_keys if saved.get(k) != meta.get(k)]
            if diffs:
                raise mismatch(diffs, saved)
            if self.path.exists():
                self.records = (
                    read(self.path) if read is not None else read_jsonl(self.path, torn_tail=True, repair=True)
                )
        elif self.path.exists():
            self.path.unlink()
        for p in stale:
            if Path(p).exists():
                Path(p).unlink()
        tmp = Path(str(self.meta_path) + ".tmp")
        tmp.write_text(json.dumps(meta, **(meta_json or {})) + "\n", encoding="utf-8")
        os.replace(tmp, self.meta_path)
        self._fh = open(self.path, "a", encoding="utf-8")

    def write(self, record: Any) -> None:
        """Append ``record`` as one line, flushed and fsynced."""
        self._fh.write(json.dumps(record, **self._record_json) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self.records.append(record)

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def field_docs(cls) -> dict[str, str]:
    """The attribute docstrings of a dataclass (the string literal right after each field), by field
    name, whitespace collapsed: the one place a setting's meaning is written."""
    import ast
    import inspect
    import textwrap

    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__[:-1]):  # a subclass's docstring wins
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for a, b in zip(body, body[1:]):
            if (
                isinstance(a, ast.AnnAssign)
                and isinstance(a.target, ast.Name)
                and isinstance(b, ast.Expr)
                and isinstance(b.value, ast.Constant)
                and isinstance(b.value.value, str)
            ):
                out[a.target.id] = " ".join(b.value.value.split())
    return out


def add_dataclass_flags(group, cls, flags: dict[str, str], choices: dict[str, Any] | None = None) -> None:
    """One argparse flag per ``{"--flag": "field"}`` of dataclass ``cls``, taking the field's default,
    its type (``int``, ``float``, ``str``, optional or not; a ``bool`` field defaulting to False is a
    switch) and its attribute docstring as the help, so a setting has one name in the code, one
    default and one help text (:func:`field_docs`). ``choices``: by field name."""
    import dataclasses

    fields = {f.name: f for f in dataclasses.fields(cls)}
    docs = field_docs(cls)
    for flag, name in flags.items():
        f = fields[name]
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        help_text = docs.get(name, "").replace("%", "%%")
        kind = str(f.type).replace(" ", "")
        if kind == "bool":
            if default is not False:
                raise ValueError(f"{cls.__name__}.{name}: a switch must default to False")
            group.add_argument(flag, action="store_true", help=help_text)
            continue
        base = kind.replace("|None", "").replace("None|", "")
        conv = {"int": int, "float": float, "str": str}.get(base)
        if conv is None:
            raise ValueError(f"{cls.__name__}.{name}: no flag for a field of type {f.type}")
        kw: dict[str, Any] = {"type": conv, "default": default}
        if choices and name in choices:
            kw["choices"] = list(choices[name])
        group.add_argument(flag, help=f"{help_text} (default {default})", **kw)


def task_options_json(text: str) -> dict:
    """``--task-options``'s argparse type: a JSON object (an empty string is ``{}``); anything else is
    an ``argparse.ArgumentTypeError`` saying what was expected (argparse turns it into exit 2)."""
    import argparse

    hint = "--task-options takes a JSON object like '{\"size\": 7}'"
    try:
        value = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"{hint}; got {text!r} ({e})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"{hint}; got {text!r}")
    return value
