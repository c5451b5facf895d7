"""Multi-answer format (vpo.core.answers): parser robustness, dedup, padding.

The 5 MB inputs carry a pytest-timeout guard (a hang guard, not a performance assertion): the
parser is linear and takes ~1 s on the worst of them here; a quadratic parser would take hours.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vpo.core import (
    answer_instruction,
    compute_advantages,
    dedup,
    dedup_rows,
    normalize_text,
    pad_rows,
    parse_answers,
    stack_rows,
)
from vpo.core.answers import MAX_ANSWER_CHARS

# ---------------------------------------------------------------------------------------------
# a slow reference for the documented tag rules
# ---------------------------------------------------------------------------------------------

TOKEN = re.compile(r"<(/?)answer(?:_(\d{1,4}))?\s*>", re.IGNORECASE)


def ref_parse_tags(text: str, m: int) -> list[str]:
    """For each i in 1..m: the first <answer_i> that has a later </answer_i> opens, the first such
    close ends; tags inside the body are removed; empty bodies dropped; number order. With m = 1
    the plain <answer> tags count as number 1."""
    toks = []
    for t in TOKEN.finditer(text):
        num = 1 if (t.group(2) is None and m == 1) else (int(t.group(2)) if t.group(2) else None)
        toks.append((num, t.group(1) == "/", t.start(), t.end()))
    out = []
    for i in range(1, m + 1):
        body = None
        for a, (num, closing, _, end) in enumerate(toks):
            if num != i or closing:
                continue
            for num2, closing2, start2, _ in toks[a + 1 :]:
                if num2 == i and closing2:
                    body = text[end:start2]
                    break
            break  # only the first open counts
        if body is not None:
            body = TOKEN.sub("", body).strip()
            if body:
                out.append(body[:MAX_ANSWER_CHARS])
    return out


# ---------------------------------------------------------------------------------------------
# tags format
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, m, expected",
    [
        ("", 3, []),
        ("just reasoning, no tags", 3, []),
        (
            "<answer_1>a</answer_1><answer_2>b</answer_2><answer_3>c</answer_3><answer_4>d</answer_4>",
            3,
            ["a", "b", "c"],
        ),
        ("<answer_2>b</answer_2> then <answer_1>a</answer_1>", 3, ["a", "b"]),  # out of order
        ("<answer_1>unclosed", 3, []),
        ("<answer_1>a</answer_1><answer_1>repeat</answer_1>", 3, ["a"]),  # repeated number: first
        ("<answer_1>x<answer_2>y</answer_2>z</answer_1>", 3, ["xyz", "y"]),  # nested tags removed
        ("<answer_1>   \n </answer_1><answer_2>b</answer_2>", 3, ["b"]),  # empty body
        ("</answer_1>stray close<answer_1>b</answer_1>", 3, ["b"]),
        ("<ANSWER_1 >Case</Answer_1>", 2, ["Case"]),
        ("<answer>plain</answer>", 1, ["plain"]),  # m = 1 format
        ("<answer>plain</answer>", 3, []),  # plain tags are not numbered answers for m > 1
        ("<answer_1>a</answer_2>", 3, []),  # mismatched close
        ("<answer_0>zero</answer_0><answer_9>nine</answer_9>", 3, []),  # numbers outside 1..m
        ("<answer_3>  spaced  </answer_3>", 3, ["spaced"]),
        ("<answer_1>a</answer_1><answer_2>a</answer_2>", 2, ["a", "a"]),  # dedup is a later step
    ],
)
def test_tag_parsing_rules(text, m, expected):
    assert parse_answers(text, m) == expected
    assert ref_parse_tags(text, m) == expected


def test_long_answer_is_truncated():
    body = "z" * (MAX_ANSWER_CHARS + 500)
    assert parse_answers(f"<answer_1>{body}</answer_1>", 2) == ["z" * MAX_ANSWER_CHARS]


def test_non_string_inputs():
    assert parse_answers(b"\xff\xfe<answer_1>bytes</answer_1>", 2) == ["bytes"]
    assert parse_answers(None, 2) == []
    assert parse_answers(12345, 2) == []


@pytest.mark.parametrize("m", [0, -1, 1.5, True, "3"])
def test_bad_m_raises(m):
    with pytest.raises(ValueError, match="m \\(answers per rollout\\) must be an integer >= 1"):
        parse_answers("<answer_1>a</answer_1>", m)


def test_unknown_format_raises():
    with pytest.raises(ValueError, match="unknown answer format 'json'"):
        parse_answers("x", 2, fmt="json")
    with pytest.raises(ValueError, match="unknown answer format"):
        answer_instruction(2, fmt="json")


TAGGY = st.one_of(
    st.sampled_from(
        [f"<answer_{i}>" for i in range(0, 5)]
        + [f"</answer_{i}>" for i in range(0, 5)]
        + ["<answer>", "</answer>", "<ANSWER_2 >", "</answer_1 >", "<answer_", "answer_1>", "<", ">", "/"]
        + ["```", "```python\n", "\n---\n", "\n", " "]
    ),
    st.text(max_size=12),
    st.binary(max_size=8).map(lambda b: b.decode("latin-1")),
)
TAGGY_TEXT = st.lists(TAGGY, max_size=30).map("".join)


@settings(max_examples=200, deadline=None)
@given(text=TAGGY_TEXT, m=st.integers(1, 5), fmt=st.sampled_from(["tags", "code"]))
def test_parser_never_raises_and_returns_at_most_m_clean_answers(text, m, fmt):
    out = parse_answers(text, m, fmt)
    assert isinstance(out, list) and len(out) <= m
    for a in out:
        assert isinstance(a, str) and a.strip() and len(a) <= MAX_ANSWER_CHARS
        if fmt == "tags":
            assert a == a.strip() and not TOKEN.search(a)
    if fmt == "tags":
        assert out == ref_parse_tags(text, m)


BODY = st.text(
    alphabet=st.characters(blacklist_characters="<>`", blacklist_categories=("Cs",)), min_size=1, max_size=30
)


@settings(max_examples=100, deadline=None)
@given(
    bodies=st.lists(BODY, min_size=1, max_size=5),
    reasoning=st.text(alphabet=st.characters(blacklist_characters="<>", blacklist_categories=("Cs",)), max_size=40),
    data=st.data(),
)
def test_well_formed_answers_round_trip_in_any_order(bodies, reasoning, data):
    m = len(bodies)
    order = data.draw(st.permutations(range(m)))
    text = reasoning + "".join(f"\n<answer_{i + 1}>{bodies[i]}</answer_{i + 1}>" for i in order)
    expected = [b.strip() for b in bodies if b.strip()]
    assert parse_answers(text, m) == expected


# ---------------------------------------------------------------------------------------------
# code format
# ---------------------------------------------------------------------------------------------


def test_code_blocks_separated_by_dashes():
    text = "Two approaches.\n```python\ndef f(x):\n    return x\n```\n---\n```\nprint(2)\n```\n---\n```py\nz = 3\n```"
    assert parse_answers(text, 2, fmt="code") == ["def f(x):\n    return x", "print(2)"]
    assert parse_answers(text, 5, fmt="code") == ["def f(x):\n    return x", "print(2)", "z = 3"]
    assert parse_answers("```python\n\n```\n---\n```python\nok\n```", 2, fmt="code") == ["ok"]  # empty block
    assert parse_answers("```python\nno closing fence", 2, fmt="code") == []
    assert parse_answers("no code at all", 2, fmt="code") == []


# ---------------------------------------------------------------------------------------------
# huge inputs (linear time; hang guard via pytest-timeout)
# ---------------------------------------------------------------------------------------------

MB5 = 5_000_000
HUGE = {
    "plain": lambda: "x" * MB5,
    "many_opens": lambda: "<answer_1>" * (MB5 // 10),
    "many_closes": lambda: "</answer_1>" * (MB5 // 11),
    "open_then_huge_body": lambda: "<answer_1>" + "y" * MB5 + "</answer_1>",
    "tag_prefix_then_spaces": lambda: "<answer_1" + " " * MB5,
    "lt_only": lambda: "<" * MB5,
    "fence_openers": lambda: "```\n" * (MB5 // 4),
    "fence_unclosed_huge": lambda: "```python\n" + "a" * MB5,
    "backticks": lambda: "`" * MB5,
    "mismatched": lambda: "<answer_1>a</answer_2><answer_3>" * (MB5 // 32),
    "deep_nesting": lambda: "<answer_1>" + "<answer_2>x" * (MB5 // 11) + "</answer_1>",
    "binary": lambda: bytes(range(256)).decode("latin-1") * (MB5 // 256),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", sorted(HUGE))
def test_huge_inputs_parse_in_linear_time(name):
    text = HUGE[name]()
    for fmt in ("tags", "code"):
        out = parse_answers(text, 3, fmt)
        assert len(out) <= 3 and all(0 < len(a) <= MAX_ANSWER_CHARS for a in out)
    if name == "open_then_huge_body":
        assert parse_answers(text, 3) == ["y" * MAX_ANSWER_CHARS]


# ---------------------------------------------------------------------------------------------
# dedup and padding
# ---------------------------------------------------------------------------------------------


def test_normalize_and_dedup_by_text():
    assert normalize_text("  Hello\n\tWORLD  ") == "hello world"
    answers = ["Paris", "paris ", "  PARIS", "Lyon", "lyon\n", "Nice"]
    assert dedup(answers) == [0, 3, 5]
    assert dedup([]) == []

    # a task canonicaliser (e.g. AST dump) that fails on junk keeps the answer instead of dropping it
    def canon(a):
        if "(" in a:
            raise SyntaxError("junk")
        return a.replace(" ", "")

    assert dedup(["x=1", "x = 1", "f((", "f(("], key=canon) == [0, 2]  # equal junk still dedups


def ref_dedup_rows(rewards, valid):
    out = valid.copy()
    for idx in np.ndindex(valid.shape[:-1]):
        for j in range(valid.shape[-1]):
            for i in range(j):
                if out[idx + (i,)] and out[idx + (j,)] and np.array_equal(rewards[idx + (i,)], rewards[idx + (j,)]):
                    out[idx + (j,)] = False
    return out


@settings(max_examples=50, deadline=None)
@given(
    n=st.integers(1, 4),
    m=st.integers(1, 5),
    d=st.integers(1, 3),
    seed=st.integers(0, 1000),
)
def test_dedup_rows_matches_loop(n, m, d, seed):
    rng = np.random.default_rng(seed)
    rewards = rng.integers(0, 2, size=(n, m, d)).astype(float)  # many exact repeats
    valid = rng.random((n, m)) > 0.3
    before = valid.copy()
    got = dedup_rows(rewards, valid)
    assert np.array_equal(valid, before)  # the input mask is not modified
    assert np.array_equal(got, ref_dedup_rows(rewards, valid))


def test_dedup_rows_keeps_row_equal_only_to_an_invalid_one_and_nan_rows():
    r = np.array([[[1.0, 0.0], [1.0, 0.0], [np.nan, 0.0], [np.nan, 0.0]]])
    v = np.array([[False, True, True, True]])
    assert dedup_rows(r, v).tolist() == [[False, True, True, True]]


def test_pad_rows_and_stack():
    rows, valid = pad_rows([[0.1, 0.2], [0.3, 0.4]], m=3, d=2)
    assert rows.tolist() == [[0.1, 0.2], [0.3, 0.4], [0.0, 0.0]] and valid.tolist() == [True, True, False]
    rows, valid = pad_rows([[1, 1], [2, 2], [3, 3], [4, 4]], m=3, d=2)  # extra answers dropped
    assert rows[:, 0].tolist() == [1, 2, 3] and valid.all()
    rows, valid = pad_rows([], m=2, d=3)
    assert rows.shape == (2, 3) and not valid.any()
    with pytest.raises(ValueError, match="reward row 1 has 3 entries, expected d=2"):
        pad_rows([[0, 0], [0, 0, 0]], m=3, d=2)
    with pytest.raises(ValueError, match="m \\(answers per rollout\\)"):
        pad_rows([], m=0, d=2)
    r, v = stack_rows([pad_rows([[1, 2]], 2, 2), pad_rows([[3, 4], [5, 6]], 2, 2)])
    assert r.shape == (2, 2, 2) and v.tolist() == [[True, False], [True, True]]
    with pytest.raises(ValueError, match="no rollouts to stack"):
        stack_rows([])


def test_padded_rows_feed_the_estimator_as_masked_slots():
    """End to end: parse -> dedup -> score -> pad -> VPO. A rollout's duplicate answer and its
    missing third answer are masked, so its set score is that of its distinct answers."""
    texts = [
        "<answer_1>ab</answer_1><answer_2>AB </answer_2><answer_3>b</answer_3>",
        "<answer_1>b</answer_1><answer_2>ab</answer_2>",
    ]
    score = lambda a: [a.lower().count("a") / 2, a.lower().count("b") / 2]  # noqa: E731
    pairs = []
    for t in texts:
        answers = parse_answers(t, 3)
        kept = [answers[i] for i in dedup(answers)]
        pairs.append(pad_rows([score(a) for a in kept], m=3, d=2))
    rewards, valid = stack_rows(pairs)
    assert valid.tolist() == [[True, True, False], [True, True, False]]
    res = compute_advantages("vpo", rewards, valid, group_size=2, seed=0)
    assert float(res.scores[0]) == pytest.approx(float(res.scores[1]), abs=1e-12)  # same answer sets
    assert res.advantages.abs().max() == 0.0  # flat group


# ---------------------------------------------------------------------------------------------
# the instruction
# ---------------------------------------------------------------------------------------------


def test_instruction_names_the_format_the_parser_reads():
    one = answer_instruction(1)
    assert "<answer>" in one and "</answer>" in one
    three = answer_instruction(3, what="route")
    for i in (1, 2, 3):
        assert f"<answer_{i}>...</answer_{i}>" in three
    assert "<answer_4>" not in three and "3 genuinely different routes" in three
    assert answer_instruction(1, style="tags") == "<answer>"
    assert answer_instruction(3, style="tags") == "<answer_1>..<answer_3>"
    assert answer_instruction(2, fmt="code", style="tags") == answer_instruction(2, fmt="code", style="short")
    code = answer_instruction(2, fmt="code", what="solution")
    assert "```python" in code and "---" in code and "2 genuinely different solutions" in code
    with pytest.raises(ValueError, match="must be an integer >= 1"):
        answer_instruction(0)
