"""Small helpers shared by several layers: integer option checks and a JSON-lines reader.

They sit at the bottom of the import graph with :mod:`vpo.errors` (stdlib only), so core, tasks,
search and train use the same check and the same reader instead of each writing its own.
"""

from __future__ import annotations

import json
import numbers
import os
import warnings
from pathlib import Path
from typing import Any


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
