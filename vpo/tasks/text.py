"""Shared helpers of the text tasks (MuSiQue, EUREQA, ToolRL): answer normalisation, F1 scores,
value matching, and loading examples from local files or the Hugging Face Hub.

Scoring: :func:`normalize_answer` is SQuAD's normalisation (extension: every Unicode punctuation
character counts as punctuation, so typographic dashes and quotes behave like ASCII ones);
:func:`token_f1` / :func:`best_f1` are SQuAD's token F1 (max over aliases); :func:`multiset_f1`
compares lists as multisets; :func:`values_match` compares tool-call argument values leniently;
:func:`as_text` turns any answer-like value into a string of bounded length, so scorers never see
megabytes. Loading: :func:`read_records` (``.jsonl``/``.json``/``.parquet``), :func:`load_local`
(a split's file in a directory, by name aliases), :func:`load_hub` (``datasets``, imported lazily;
every failure becomes a :class:`DatasetUnavailableError` that says what to do),
:func:`download_cached` (once into ``$VPO_CACHE``, honouring the offline variables) and
:func:`sample_records` (the deterministic n-of-N subset every task's ``load`` uses). Nothing here
touches the network at import time.
"""

from __future__ import annotations

import json
import math
import os
import re
import string
import unicodedata
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from vpo.errors import UserError
from vpo._util import positive_int, read_jsonl
from vpo.core.answers import MAX_ANSWER_CHARS

__all__ = [
    "DatasetUnavailableError",
    "as_text",
    "best_f1",
    "download_cached",
    "load_hub",
    "load_local",
    "multiset_f1",
    "normalize_answer",
    "read_records",
    "sample_records",
    "to_jsonable",
    "token_f1",
    "values_match",
]


# -------------------------------------------------------------------------------------------
# answers and scores
# -------------------------------------------------------------------------------------------


def as_text(answer: Any) -> str:
    """Any answer-like value as a string of at most ``MAX_ANSWER_CHARS`` characters (never raises)."""
    if isinstance(answer, str):
        text = answer
    elif isinstance(answer, (bytes, bytearray)):
        text = bytes(answer[: 4 * MAX_ANSWER_CHARS]).decode("utf-8", errors="replace")
    elif answer is None:
        return ""
    else:
        try:
            text = str(answer)
        except Exception:  # noqa: BLE001 - a broken __str__ is a malformed answer, not a crash
            return ""
    return text[:MAX_ANSWER_CHARS]


_ASCII_PUNCT = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(?:a|an|the)\b")


def _strip_punctuation(text: str) -> str:
    if text.isascii():
        return text.translate(_ASCII_PUNCT)
    return "".join(ch for ch in text if ch not in string.punctuation and not unicodedata.category(ch).startswith("P"))


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower-case, remove punctuation, remove articles, collapse whitespace."""
    text = _strip_punctuation(text.lower())
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def token_f1(prediction: str, gold: str) -> float:
    """SQuAD token F1 between two answers (both normalised). Two empty answers score 1."""
    pred = normalize_answer(prediction).split()
    ref = normalize_answer(gold).split()
    if not pred or not ref:
        return float(pred == ref)
    same = sum((Counter(pred) & Counter(ref)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def best_f1(prediction: str, golds: Iterable[str]) -> float:
    """Max :func:`token_f1` of ``prediction`` over several gold strings (0 when there are none)."""
    return max((token_f1(prediction, g) for g in golds if isinstance(g, str)), default=0.0)


def multiset_f1(predicted: Sequence[Any], gold: Sequence[Any]) -> float:
    """F1 between two lists counted as multisets (hashable items). Both empty: 1; one empty: 0."""
    if not predicted and not gold:
        return 1.0
    if not predicted or not gold:
        return 0.0
    same = sum((Counter(predicted) & Counter(gold)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(gold)
    return 2 * precision * recall / (precision + recall)


def _as_number(x: Any) -> float | None:
    if isinstance(x, bool):
        return None
    if isinstance(x, (int, float)):
        return float(x)
    if isinstance(x, str) and 0 < len(x) <= 64:
        try:
            v = float(x.strip().replace(",", ""))  # "1,000" -> 1000.0
        except ValueError:
            return None
        return v if math.isfinite(v) else None
    return None


def _as_bool(x: Any) -> bool | None:
    if isinstance(x, bool):
        return x
    if isinstance(x, str) and x.strip().lower() in ("true", "false"):
        return x.strip().lower() == "true"
    return None


def values_match(predicted: Any, expected: Any, _depth: int = 0) -> bool:
    """Whether a predicted argument value (the model's, first) equals the expected one, up to
    harmless formatting; the expected value's type decides how they are compared.

    Numbers compare numerically (``5`` == ``5.0`` == ``"5"``, relative tolerance 1e-9); booleans
    accept ``"true"``/``"false"`` strings; strings compare case-insensitively with whitespace
    collapsed; lists compare as multisets of matching elements; dicts need the same keys with
    matching values; ``None`` matches only ``None``/``"null"``/``"none"``. Code results use the
    strict :func:`vpo.tasks.code.json_values_equal` instead.
    """
    if _depth > 20:  # pathological nesting: count as a mismatch rather than recurse forever
        return False
    eb = _as_bool(expected) if isinstance(expected, bool) else None
    if eb is not None:
        return _as_bool(predicted) is eb
    if expected is None:
        return predicted is None or (isinstance(predicted, str) and predicted.strip().lower() in ("null", "none"))
    en = _as_number(expected) if isinstance(expected, (int, float)) else None
    if en is not None:
        pn = _as_number(predicted)
        return pn is not None and math.isclose(pn, en, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(expected, str):
        return _string_matches(predicted, expected)
    if isinstance(expected, (list, tuple)):
        return _list_matches(predicted, expected, _depth)
    if isinstance(expected, dict):
        if not isinstance(predicted, dict) or set(predicted) != set(expected):
            return False
        return all(values_match(predicted[k], expected[k], _depth + 1) for k in expected)
    return predicted == expected


def _string_matches(predicted: Any, expected: str) -> bool:
    """:func:`values_match` for an expected string: the same words case-insensitively, or, when the
    prediction is not a string, the same number or boolean that the string spells."""
    if isinstance(predicted, str):
        return " ".join(expected.lower().split()) == " ".join(predicted.lower().split())
    pn, en = _as_number(predicted), _as_number(expected)
    if pn is not None and en is not None:
        return math.isclose(pn, en, rel_tol=1e-9, abs_tol=1e-12)
    pb = _as_bool(predicted)
    return pb is not None and _as_bool(expected) is pb


def _list_matches(predicted: Any, expected: list | tuple, depth: int) -> bool:
    """:func:`values_match` for an expected list: as multisets, each expected element taking the first
    unused predicted element that matches it."""
    if not isinstance(predicted, (list, tuple)) or len(predicted) != len(expected):
        return False
    unused = list(predicted)
    for g in expected:
        for j, p in enumerate(unused):
            if values_match(p, g, depth + 1):
                del unused[j]
                break
        else:
            return False
    return True


# -------------------------------------------------------------------------------------------
# loading
# -------------------------------------------------------------------------------------------


class DatasetUnavailableError(UserError, RuntimeError):
    """A task's data could not be loaded; the message says why and what to do."""


def to_jsonable(obj: Any) -> Any:
    """Recursively convert numpy/pyarrow scalars and arrays, tuples and sets into JSON types."""
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [to_jsonable(v) for v in obj.tolist()]
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def read_records(path: str | os.PathLike) -> list[dict]:
    """Read one data file (``.jsonl``, ``.json`` or ``.parquet``) into a list of dicts."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"data file {str(p)!r} does not exist")
    suffix = p.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        rows = read_jsonl(p)
    elif suffix == ".json":
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise ValueError(f"{p}: not valid JSON ({e.msg} at line {e.lineno})") from None
        if isinstance(data, dict) and isinstance(data.get("data"), list):
            data = data["data"]
        if not isinstance(data, list):
            raise ValueError(f"{p}: expected a JSON list of examples (or {{'data': [...]}}), got {type(data).__name__}")
        rows = data
    elif suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise ImportError(
                f"reading {p} needs pyarrow: pip install pyarrow (or pip install -e '.[data]' in the vpo clone)"
            ) from None
        rows = pq.read_table(p).to_pylist()
    else:
        raise ValueError(f"{p}: unsupported file type {suffix!r}; use .jsonl, .json or .parquet")
    bad = next((i for i, r in enumerate(rows) if not isinstance(r, dict)), None)
    if bad is not None:
        raise ValueError(f"{p}: record {bad} is a {type(rows[bad]).__name__}, expected a JSON object")
    return [to_jsonable(r) for r in rows]


_DATA_SUFFIXES = (".jsonl", ".json", ".parquet", ".ndjson")


def load_local(path: str | os.PathLike, split: str, aliases: Sequence[str], *, task: str) -> list[dict]:
    """Records of ``split`` from ``path``: a data file (used for any split) or a directory.

    In a directory (or its ``data/`` subdirectory, the Hub's layout), the split's file is the first
    data file whose name (without extension) equals one of ``aliases`` or starts with
    ``alias + "-"`` (Hub-style shards such as ``questions_hard_5-00000-of-00001.parquet``; shards are
    concatenated in name order).
    """
    p = Path(path).expanduser()
    if p.is_file():
        return read_records(p)
    if not p.is_dir():
        raise DatasetUnavailableError(f"task {task!r}: path={str(path)!r} is neither a data file nor a directory")
    dirs = [p] + ([p / "data"] if (p / "data").is_dir() else [])  # Hub repos keep shards in data/
    files = [f for d in dirs for f in sorted(d.iterdir()) if f.is_file() and f.suffix.lower() in _DATA_SUFFIXES]
    for alias in aliases:
        exact = [f for f in files if f.stem == alias]
        if exact:
            return read_records(exact[0])
        shards = [f for f in files if f.stem.startswith(alias + "-")]
        if shards:
            return [r for f in shards for r in read_records(f)]
    names = ", ".join(f.name for f in files) or "no .jsonl/.json/.parquet files"
    raise DatasetUnavailableError(
        f"task {task!r}: no file for split {split!r} in {str(p)!r} (looked for names {list(aliases)}; "
        f"found: {names}). Name the file after the split, or pass the file itself as path=."
    )


def _offline() -> bool:
    return any(
        os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
        for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "VPO_OFFLINE")
    )


def load_hub(hub_id: str, split: str, *, task: str, config: str | None = None) -> list[dict]:
    """Records of one split of a Hugging Face Hub dataset (``datasets`` imported lazily)."""
    hint = (
        f"To use local files instead, download the dataset's files and pass path=<file or directory>, "
        f"e.g. vpo.tasks.get({task!r}, path='data/{task}/')."
    )
    try:
        import datasets
    except ImportError:
        raise DatasetUnavailableError(
            f"task {task!r}: loading {hub_id!r} from the Hugging Face Hub needs the 'datasets' package "
            f"(pip install -e '.[data]' in the vpo clone). {hint}"
        ) from None
    try:
        ds = datasets.load_dataset(hub_id, config, split=split)
    except ValueError as e:
        if "split" in str(e).lower():
            raise DatasetUnavailableError(f"task {task!r}: dataset {hub_id!r} has no split {split!r} ({e})") from None
        raise DatasetUnavailableError(
            f"task {task!r}: could not load {hub_id!r} split {split!r}: {e}. {hint}"
        ) from None
    except Exception as e:  # noqa: BLE001 - network/offline/auth errors all end here with the same advice
        offline = " (offline mode is on: HF_HUB_OFFLINE/HF_DATASETS_OFFLINE)" if _offline() else ""
        raise DatasetUnavailableError(
            f"task {task!r}: could not load {hub_id!r} split {split!r} from the Hugging Face Hub{offline}: "
            f"{type(e).__name__}: {e}. {hint}"
        ) from None
    return [to_jsonable(r) for r in ds.to_list()]


def cache_dir() -> Path:
    """Where downloaded data files are kept: ``$VPO_CACHE`` or ``~/.cache/vpo``."""
    return Path(os.environ.get("VPO_CACHE") or Path.home() / ".cache" / "vpo").expanduser()


def download_cached(url: str, relpath: str, *, task: str, timeout: float = 60.0) -> Path:
    """Download ``url`` once to ``cache_dir()/relpath`` and return the local path."""
    dest = cache_dir() / relpath
    if dest.is_file() and dest.stat().st_size > 0:
        return dest
    hint = f"Download {url} yourself and pass path=<that file or its directory> to vpo.tasks.get({task!r}, ...)."
    if _offline():
        raise DatasetUnavailableError(
            f"task {task!r}: {url} is not in the cache ({dest}) and offline mode is on "
            f"(HF_HUB_OFFLINE/HF_DATASETS_OFFLINE/VPO_OFFLINE). {hint}"
        )
    import urllib.request

    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".part")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r, tmp.open("wb") as f:
            while chunk := r.read(1 << 20):
                f.write(chunk)
        tmp.replace(dest)
    except Exception as e:  # noqa: BLE001
        tmp.unlink(missing_ok=True)
        raise DatasetUnavailableError(
            f"task {task!r}: could not download {url}: {type(e).__name__}: {e}. {hint}"
        ) from None
    return dest


def sample_records(records: Sequence[dict], n: int | None, seed: int) -> list[dict]:
    """``n`` records chosen uniformly without replacement with ``default_rng(seed)``, kept in data
    order; all of them when ``n`` is None or at least ``len(records)``."""
    if n is None:
        return list(records)
    positive_int(n, "n (number of examples)", minimum=0, allow_none=True)
    if n >= len(records):
        return list(records)
    idx = np.random.default_rng(seed).permutation(len(records))[:n]
    return [records[i] for i in sorted(idx.tolist())]
