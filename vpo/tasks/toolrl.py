"""ToolRL (rlla_4k): function calling scored on format, tool names, argument keys and values.

Each example gives a system message listing the tools and a dialogue; the gold answer is ToolRL's
``<think>`` + ``<tool_call>`` (one JSON call per line) and/or ``<response>``. An answer body is a
``<tool_call>`` block and/or a ``<response>``; ``<think>`` is optional (in a VPO rollout the shared
reasoning precedes the answers). Reward vector (d = 4, docs/method.md §5), ``w*`` uniform:
``format`` (only well-formed tag blocks, calls that parse, the same sections as the gold),
``tool_name`` (gold calls paired one-to-one with same-name predicted calls: pairs / #gold),
``arg_key`` (mean over the gold calls of the key Jaccard of each pair, ToolRL's shared / union; an
unpaired gold call 0) and ``arg_value`` (gold values matched by their partner's over all gold
values, :func:`value_matches`: ToolRL's ``==``, so lists in order; a call without arguments counts
as one value, matched when it is called). No component rewards what the gold does not ask for: every
denominator is the gold's or grows with the answer's mistakes (an extra key lowers ``arg_key``, a
missing one ``arg_key`` and ``arg_value``), a wrong tool earns nothing on its arguments, and an
answer with more calls than the gold (candidates for one call, a repeated call) scores 0 on the
three call components, no more than its worst member. Where the gold only responds, the call
components credit an answer that responds and calls nothing (an empty answer earns nothing).
Content is scored even when the format fails, except calls the text around them negates ("not
<tool_call>..", ".. ? No."; :mod:`vpo.tasks._negation`); ``<response>`` text is not compared
(ToolRL does not either). Data: the ToolRL repo's
parquet files, downloaded once into ``$VPO_CACHE``, a Hub mirror (``hub_id=``) or local files
(``path=``). docs/paper_tasks.md ("ToolRL") has the full definitions and hand-worked vectors.
"""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vpo.tasks._negation import negated
from vpo.tasks.base import Example, Task
from vpo.tasks.text import (
    as_text,
    download_cached,
    load_hub,
    load_local,
    read_records,
    sample_records,
    values_match,
)

GITHUB_URL = "https://raw.githubusercontent.com/qiancheng0/ToolRL/main/dataset/rlla_4k/{split}.parquet"
SPLITS = ("train", "test")
_KINDS = ("think", "tool_call", "response")
_TAG = re.compile(r"<(/?)(think|tool_call|response)\s*>", re.IGNORECASE)
_SECTION_MARKERS = ("**Steps for Each Turn**", "**Output Format**", "**Important Notes**")
_DECODER = json.JSONDecoder()

FORMAT_INSTRUCTIONS = (
    "Write each answer in this format, with nothing outside the tags:\n"
    "<tool_call>\n"
    '{"name": "tool name", "parameters": {"parameter name": "value", "...": "..."}}\n'
    '{"name": "another tool", "parameters": {}}\n'
    "</tool_call>\n"
    "<response>your message to the user</response>\n"
    "Use <tool_call> (one JSON object per line, one line per call) when tools are needed, <response> "
    "when you reply to the user, or both; an optional <think>...</think> may come first."
)


@dataclass
class ParsedToolAnswer:
    """One answer body split into its parts (see :func:`parse_tool_answer`)."""

    calls: list[tuple[str, dict]] = field(default_factory=list)
    has_tool_block: bool = False  # a tool_call block with at least one parsed call
    has_response: bool = False  # a non-empty response block
    response: str = ""  # text of the first response block, stripped
    calls_clean: bool = True  # every tool_call block parsed completely into call objects
    well_formed: bool = False  # blocks only, in order, each once, and every call parsed cleanly


def _parse_calls(text: str) -> tuple[list[tuple[str, dict]], bool]:
    """Calls in a tool_call body and whether all of it parsed (never raises)."""
    s = text.strip()
    if not s:
        return [], True
    objs: list[Any] = []
    clean = True
    if s[0] == "[":
        try:
            arr = json.loads(s)
            return _calls_from(arr if isinstance(arr, list) else [arr], clean=True)
        except (ValueError, RecursionError):
            clean = False  # not one JSON array: read what the object stream gives, format fails
    i, n = 0, len(s)
    while i < n:
        while i < n and s[i] in " \t\r\n,":
            i += 1
        if i >= n:
            break
        try:
            obj, i = _DECODER.raw_decode(s, i)
        except (ValueError, RecursionError):
            clean = False
            break
        if isinstance(obj, list):
            objs.extend(obj)
        else:
            objs.append(obj)
    return _calls_from(objs, clean)


def _calls_from(objs: list[Any], clean: bool) -> tuple[list[tuple[str, dict]], bool]:
    calls = []
    flat, stack = [], list(reversed(objs))
    while stack:  # lists nested in the list are read too (candidates hidden one level down count)
        obj = stack.pop()
        if isinstance(obj, list):
            clean = False
            stack.extend(reversed(obj))
        else:
            flat.append(obj)
    for obj in flat:
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not obj["name"].strip():
            clean = False
            continue
        params = obj.get("parameters", obj.get("arguments", {}))
        if isinstance(params, str):
            try:
                params = json.loads(params) if params.strip() else {}
            except (ValueError, RecursionError):
                params = None
        if params is None and "parameters" not in obj and "arguments" not in obj:
            params = {}
        if not isinstance(params, dict):
            clean = False
            params = {}
        calls.append((obj["name"].strip(), params))
    return calls, clean


def parse_tool_answer(text: Any) -> ParsedToolAnswer:
    """Parse one answer body: its tool calls, whether it responds, whether its format is clean."""
    text = as_text(text)
    out = ParsedToolAnswer()
    blocks: list[tuple[str, int, int, int, int]] = []  # (kind, body start, body end, tag start, tag end)
    structure_ok = True
    open_kind: str | None = None
    open_at = open_start = 0
    outside: list[str] = []
    pos = 0
    for tok in _TAG.finditer(text):
        closing, kind = bool(tok.group(1)), tok.group(2).lower()
        if open_kind is None:
            if closing:
                structure_ok = False
                continue
            outside.append(text[pos : tok.start()])
            open_kind, open_at, open_start = kind, tok.end(), tok.start()
        elif closing and kind == open_kind:
            blocks.append((kind, open_at, tok.start(), open_start, tok.end()))
            open_kind = None
            pos = tok.end()
        else:
            structure_ok = False  # nested or mismatched tag
    if open_kind is not None:
        structure_ok = False
        outside.append(text[open_at:])  # an unclosed block's text is unstructured
    else:
        outside.append(text[pos:])
    stray = "".join(outside)
    kinds = [b[0] for b in blocks]
    if stray.strip() or len(set(kinds)) != len(kinds) or kinds != sorted(kinds, key=_KINDS.index):
        structure_ok = False
    calls_clean = True
    tool_blocks = [(a, b, ta, tb) for k, a, b, ta, tb in blocks if k == "tool_call"]
    for a, b, ta, tb in tool_blocks:
        calls, clean = _parse_calls(text[a:b])
        calls_clean &= clean
        if not negated(text, ta, tb):  # "not <tool_call>..</tool_call>", "<tool_call>..</tool_call>? No."
            out.calls.extend(calls)
    if not tool_blocks and stray.strip():
        out.calls = _bare_calls(stray)
    out.has_tool_block = bool(tool_blocks) and bool(out.calls)
    out.response = next((text[a:b].strip() for k, a, b, _, _ in blocks if k == "response"), "")
    out.has_response = bool(out.response)
    out.calls_clean = calls_clean
    out.well_formed = structure_ok and calls_clean
    return out


def _bare_calls(text: str) -> list[tuple[str, dict]]:
    """The calls of an answer written without tags: the JSON from the first ``{`` or ``[`` on, unless
    the prose around it negates it ("not {...}", "{...}? No.")."""
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if not starts:
        return []
    start, end = min(starts), max(text.rfind("}"), text.rfind("]")) + 1
    if negated(text, start, max(end, start)):
        return []
    return _parse_calls(text[start:])[0]


def value_matches(predicted: Any, expected: Any, _depth: int = 0) -> bool:
    """Whether a predicted argument value matches the gold one: ToolRL compares values with ``==``,
    so lists (and tuples) match element by element in order and dicts need the same keys; scalars
    compare up to harmless formatting (:func:`vpo.tasks.text.values_match`: ``5`` = ``"5"``,
    strings case- and whitespace-insensitively), integers exactly."""
    if _depth > 20:  # pathological nesting: a mismatch rather than unbounded recursion
        return False
    if isinstance(expected, (list, tuple)):
        return (
            isinstance(predicted, (list, tuple))
            and len(predicted) == len(expected)
            and all(value_matches(p, g, _depth + 1) for p, g in zip(predicted, expected))
        )
    if isinstance(expected, dict):
        return (
            isinstance(predicted, dict)
            and set(predicted) == set(expected)
            and all(value_matches(predicted[k], expected[k], _depth + 1) for k in expected)
        )
    if isinstance(predicted, (list, tuple, dict)):
        return False
    if type(expected) is int and type(predicted) is int:
        return predicted == expected
    try:
        return values_match(predicted, expected)
    except (OverflowError, ValueError):  # an int past float range against a float: not that number
        return False


def _align(pred: list[tuple[str, dict]], gold: list[tuple[str, dict]]) -> list[tuple[int, int]]:
    """Greedy one-to-one pairing ``(gold index, predicted index)`` of gold calls with same-name
    predicted calls: over all same-name pairs, the one with the most matching values first, then
    the most shared keys (ties: gold order, then answer order)."""
    table = []
    for i, (gname, gparams) in enumerate(gold):
        for j, (pname, pparams) in enumerate(pred):
            if pname == gname:
                shared = [k for k in gparams if k in pparams]
                matched = sum(value_matches(pparams[k], gparams[k]) for k in shared)
                table.append((-matched, -len(shared), i, j))
    pairs, used_g, used_p = [], set(), set()
    for _, _, i, j in sorted(table):
        if i not in used_g and j not in used_p:
            pairs.append((i, j))
            used_g.add(i)
            used_p.add(j)
    return pairs


def _call_scores(pred: list[tuple[str, dict]], gold: list[tuple[str, dict]]) -> tuple[float, float, float]:
    """(gold calls paired by name, mean key Jaccard over the gold calls, value share) of at most as
    many predicted calls as gold calls. Key Jaccard of a pair: shared keys / (gold keys + extra keys);
    an unpaired gold call scores 0. Value share: the gold values matched over all gold values (a
    call without arguments is one value, matched when the call is made)."""
    pairs = _align(pred, gold)
    keys = matched = 0.0
    for i, j in pairs:
        gp, pp = gold[i][1], pred[j][1]
        union = len(set(gp) | set(pp))
        keys += len(set(gp) & set(pp)) / union if union else 1.0
        matched += sum(k in pp and value_matches(pp[k], gp[k]) for k in gp) if gp else 1.0
    slots = sum(max(1, len(gp)) for _, gp in gold)
    return float(len(pairs)), keys / len(gold), matched / slots


def score_tool_answer(parsed: ParsedToolAnswer, gold_calls: list[tuple[str, dict]], gold_responds: bool) -> np.ndarray:
    """``[format, tool_name, arg_key, arg_value]`` of a parsed answer against the gold answer (module
    docstring)."""
    pred = parsed.calls
    fmt = float(
        parsed.well_formed and parsed.has_tool_block == bool(gold_calls) and parsed.has_response == gold_responds
    )
    g, p = len(gold_calls), len(pred)
    if not g or not p:
        # the gold only responds: the call components credit an answer that responds and calls
        # nothing, not even in a tool_call block that does not parse (an empty answer calls nothing
        # too, but earns nothing); otherwise there is nothing to credit
        ok = float(not g and not p and parsed.has_response and parsed.calls_clean)
        return np.array([fmt, ok, ok, ok], dtype=np.float64)
    if p > g:  # candidates for a call, a repeated call: no more than the worst member, 0
        return np.array([fmt, 0.0, 0.0, 0.0], dtype=np.float64)
    names, keys, values = _call_scores(pred, gold_calls)
    return np.array([fmt, names / g, keys, values], dtype=np.float64)


class ToolRLTask(Task):
    """ToolRL rlla_4k function calling with a (format, tool name, argument key, argument value) vector.

    Options (``vpo.tasks.get("toolrl", **options)``):
        path: local data file or directory in the rlla_4k schema (takes precedence over the rest).
        hub_id: a Hugging Face dataset id holding rlla_4k with splits train/test (optional mirror).
        url: download URL template of the parquet files, ``{split}`` filled in (default: ToolRL's repo).
    """

    name = "toolrl"
    objectives = ("format", "tool_name", "arg_key", "arg_value")
    answer_noun = "answer"

    def __init__(self, path: str | None = None, hub_id: str | None = None, url: str = GITHUB_URL) -> None:
        if "{split}" not in url:
            raise ValueError(f"toolrl: url must contain '{{split}}' (filled with train/test), got {url!r}")
        self.path = path
        self.hub_id = hub_id
        self.url = url
        self._cache: dict[str, list[Example]] = {}

    # -- data -------------------------------------------------------------------------------
    def load(self, split: str = "train", n: int | None = None, seed: int = 0) -> list[Example]:
        """Examples of ``split`` ("train" or "test"); ``n`` of them drawn with ``seed`` (kept in
        data order), all of them when ``n`` is None."""
        if split not in SPLITS:
            raise ValueError(f"toolrl has no split {split!r}; choose one of {list(SPLITS)}")
        if split not in self._cache:
            if self.path is not None:
                rows, where = load_local(self.path, split, (split,), task=self.name), str(self.path)
            elif self.hub_id is not None:
                rows, where = load_hub(self.hub_id, split, task=self.name), f"{self.hub_id}[{split}]"
            else:
                url = self.url.format(split=split)
                rows, where = read_records(download_cached(url, f"toolrl/rlla_4k/{split}.parquet", task=self.name)), url
            kept, dropped = [], []
            for i, r in enumerate(rows):
                _check_example(r, f"{where} record {i}")
                try:
                    _gold(r)
                except ValueError:
                    dropped.append(i)
                    continue
                kept.append(r)
            if dropped:
                warnings.warn(
                    f"toolrl: dropped {len(dropped)} row(s) of {where} whose gold answer does not parse "
                    f"(first: record {dropped[0]})",
                    RuntimeWarning,
                    stacklevel=2,
                )
            self._cache[split] = kept
        return sample_records(self._cache[split], n, seed)

    # -- prompting --------------------------------------------------------------------------
    def question(self, example: Example) -> str:
        system, dialogue = _messages(example)
        cut = min((i for i in (system.find(m) for m in _SECTION_MARKERS) if i >= 0), default=len(system))
        tools = system[:cut].strip()
        parts = [p for p in (tools, dialogue.strip(), FORMAT_INSTRUCTIONS) if p]
        return "\n\n".join(parts)

    # -- scoring ----------------------------------------------------------------------------
    def gold(self, example: Example) -> tuple[list[tuple[str, dict]], str]:
        """``(gold calls as (name, parameters), gold response text)`` of an example."""
        return _gold(example)

    def reference_answer(self, example: Example) -> str:
        """The gold answer body in the answer format (calls one per line, then the response)."""
        return format_tool_answer(*_gold(example))

    def score(self, example: Example, answer: str) -> np.ndarray:
        calls, response = _gold(example)
        return score_tool_answer(parse_tool_answer(answer), calls, bool(response))

    def canonical(self, answer: str) -> Any:
        p = parse_tool_answer(answer)
        # the calls and whether it responds, strings as the scorer compares them: a stray "." or
        # "**" around the block, or other letter case in the values, is the same answer
        calls = tuple(sorted((n, json.dumps(_fold(a), sort_keys=True, default=str)) for n, a in p.calls))
        return p.has_response, calls


def _fold(value: Any, depth: int = 0) -> Any:
    """A value with its strings lower-cased and their whitespace collapsed (as :func:`value_matches`
    compares strings), for :meth:`ToolRLTask.canonical`."""
    if depth > 20:
        return None
    if isinstance(value, str):
        return " ".join(value.lower().split())
    if isinstance(value, dict):
        return {str(k): _fold(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_fold(v, depth + 1) for v in value]
    return value


def _messages(example: Example) -> tuple[str, str]:
    prompt = example["prompt"]
    if isinstance(prompt, str):
        try:
            prompt = json.loads(prompt)
        except ValueError:
            return "", prompt
    system, rest = "", []
    for msg in prompt:
        if isinstance(msg, dict):
            if msg.get("role") == "system" and not system:
                system = str(msg.get("content", ""))
            else:
                rest.append(str(msg.get("content", "")))
    return system, "\n\n".join(rest)


def _gold(example: Example) -> tuple[list[tuple[str, dict]], str]:
    parsed = parse_tool_answer(example["reward_model"]["ground_truth"])
    if not parsed.calls_clean:
        raise ValueError(f"toolrl: the gold tool call of example {_where(example)} is not valid JSON calls")
    if not parsed.calls and not parsed.response:
        raise ValueError(f"toolrl: the gold answer of example {_where(example)} has neither tool calls nor a response")
    return parsed.calls, parsed.response


def _where(example: Example) -> str:
    info = example.get("extra_info") or {}
    return repr(info.get("index", "?")) if isinstance(info, dict) else "?"


def _check_example(row: Any, where: str) -> None:
    schema = (
        "expected the rlla_4k schema (prompt: [system message, user message], "
        "reward_model: {ground_truth: '<think>..</think><tool_call>..</tool_call>' or '<response>..</response>'})"
    )
    if not isinstance(row, dict):
        raise ValueError(f"toolrl: {where} is not a JSON object; {schema}")
    if (
        "prompt" not in row
        or not isinstance(row.get("reward_model"), dict)
        or "ground_truth" not in row["reward_model"]
    ):
        raise ValueError(f"toolrl: {where} lacks prompt or reward_model.ground_truth; {schema}")
    if not isinstance(row["reward_model"]["ground_truth"], str):
        raise ValueError(f"toolrl: {where}: reward_model.ground_truth must be a string; {schema}")


def format_tool_answer(calls, response: str) -> str:
    """An answer body in ToolRL's format: tool calls ``(name, parameters)`` one JSON object per
    line inside ``<tool_call>``, then the ``<response>`` text (either part may be empty)."""
    parts = []
    if calls:
        lines = "\n".join(json.dumps({"name": n, "parameters": p}, ensure_ascii=False) for n, p in calls)
        parts.append(f"<tool_call>\n{lines}\n</tool_call>")
    if response:
        parts.append(f"<response>{response}</response>")
    return "\n".join(parts)
