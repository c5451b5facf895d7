"""MuSiQue (answerable): multi-hop QA over numbered paragraphs, scored per reasoning hop + answer F1.

Reward vector (d = 5, docs/method.md §5): ``hop_1..hop_4`` (did the answer cite the gold supporting
paragraph of reasoning step i, times the precision of its citations) and ``answer_f1`` (SQuAD token
F1 against the gold answer and its aliases, no more than its worst part when it lists alternatives:
:func:`answer_f1`); ``w* = (hop_1 + hop_2 + hop_3 + hop_4 + 3·answer_f1) / 7``. An answer body reads
``Paragraphs: 3, 7`` / ``Answer: ...``; :func:`parse_musique_answer` is lenient about labels, order
and number formats. Choices the paper leaves open: 2- and 3-hop questions stretch their k steps over
the four hop slots (``short_chains="stretch"``: every step weighs the same in ``w*`` and no slot is
free reward; ``"pass"`` fills them with 1 like the authors' reference), only the first
``max_citations`` distinct paragraphs can hit, and no answer text scores 0. Precision is MuSiQue's
support-F1 precision: gold paragraphs hit over distinct numbers cited, where a number past the cap
or naming no paragraph is a wrong citation; so the mean hop credit is recall × precision, never
above the official support F1, and citing more than the gold (up to the cap with wrong paragraphs)
lowers every hop instead of scoring like the exact answer. An answer is scored as it commits:
a body holding several answers (``Answer:`` lines with different texts) scores no more than its
worst, component by component; an answer that denies itself (a negation word in its answer that
no gold has, or a negation before the whole body: "not Nolan", "Nolan? No.", "It is not
Paragraphs: ...") scores 0; echoed paragraph headers ("[3] Title", the question copied back) and
float literals ("1e400") cite nothing; invisible format characters are dropped.
``load("validation", n=300, seed=42)`` is the reference's hop-stratified eval split.
docs/paper_tasks.md ("MuSiQue") has the parsing rules, the hand-worked vectors and the data layout.
Simplification: paragraphs are shown in full, unshortened; there is no retrieval step.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

import numpy as np

from vpo._util import positive_int
from vpo.tasks._negation import NEGATION_WORDS, negated_before
from vpo.tasks.base import Example, Task
from vpo.tasks.text import as_text, best_f1, load_hub, load_local, normalize_answer, sample_records

HUB_ID = "dgslibisey/MuSiQue"
MAX_HOPS = 4
SHORT_CHAIN_MODES = ("stretch", "pass")
SPLITS = {
    "train": ("train", ("train", "musique_ans_v1.0_train")),
    "validation": ("validation", ("validation", "dev", "musique_ans_v1.0_dev")),
}
SPLITS["dev"] = SPLITS["validation"]

_ANSWER_LABEL = r"(?<![A-Za-z])(?:final\s++)?answer\s*+[:=]"
_CITE_LABEL = (
    r"(?<![A-Za-z])(?:supporting\s+|cited\s+)?"
    r"(?:paragraphs?|paras?|support(?:ing)?|evidence|citations?|sources?|references?|refs?)"
    r"(?:\(s\))?\s*+(?:[:=]|(?=[\[#(]?\s*+\d))"  # possessive: linear on long whitespace runs
)
_LABELS = re.compile(rf"(?P<ans>{_ANSWER_LABEL})|(?P<cit>{_CITE_LABEL})", re.IGNORECASE)
_NUMBER = re.compile(r"(?<!\d)\d{1,4}(?!\d)")
_NOT_A_CITATION = re.compile(r"\d*\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+")  # 2.5, 1e400: not paragraph numbers
_ANSWER_IS = re.compile(r"^(?:the\s+)?(?:final\s+)?answer\s+is\s+", re.IGNORECASE)
_BRACKET_REF = re.compile(r"\[\s*(\d{1,4}(?:\s*[,;]\s*\d{1,4})*)\s*\]")


def parse_musique_answer(text: Any) -> tuple[list[int], str]:
    """``(cited paragraph numbers in order of appearance, answer text)`` of one answer body.

    Never raises; numbers are returned as written (validity is checked against the example).
    """
    text = as_text(text)
    labels = list(_LABELS.finditer(text))
    cited: list[int] = []
    answers: list[str] = []
    spans: list[tuple[int, int]] = []  # label + segment spans, removed when looking for a bare answer
    for i, lab in enumerate(labels):
        end = text.find("\n", lab.end())
        end = len(text) if end < 0 else end
        if i + 1 < len(labels):
            end = min(end, labels[i + 1].start())
        segment = text[lab.end() : end]
        spans.append((lab.start(), end))
        if lab.group("cit") is not None:
            cited.extend(int(x) for x in _NUMBER.findall(_NOT_A_CITATION.sub(" ", segment)))
        else:
            answers.append(_BRACKET_REF.sub(" ", segment))
    has_cite_label = any(lab.group("cit") is not None for lab in labels)
    if not has_cite_label:
        for ref in _BRACKET_REF.finditer(text):
            cited.extend(int(x) for x in _NUMBER.findall(ref.group(1)))
    answer = next((a.strip() for a in reversed(answers) if a.strip()), "")
    if not answer and not any(lab.group("ans") is not None for lab in labels):
        rest, pos = [], 0
        for a, b in spans:
            rest.append(text[pos:a])
            pos = b
        rest.append(text[pos:])
        remaining = _BRACKET_REF.sub(" ", "".join(rest))
        answer = next((ln.strip() for ln in reversed(remaining.splitlines()) if ln.strip()), "")
    answer = _ANSWER_IS.sub("", answer.strip(), count=1)
    answer = answer.strip("*_`\"' ").rstrip("([{,;:-*_ ").strip()
    return cited, answer


def hop_slot_matrix(k: int, slots: int = MAX_HOPS) -> np.ndarray:
    """``[slots, k]`` weights mapping k gold-step hits onto the hop slots ("stretch" mode).

    Row j is the overlap of the slot's share of the chain [j/slots, (j+1)/slots] with each step's
    share [i/k, (i+1)/k], rescaled so rows sum to 1. Columns sum to ``slots / k``: equal total
    weight per gold step.
    """
    if k < 1:
        raise ValueError(f"a MuSiQue question needs at least one reasoning step, got {k}")
    j = np.arange(slots)[:, None]
    i = np.arange(k)[None, :]
    lo = np.maximum(j / slots, i / k)
    hi = np.minimum((j + 1) / slots, (i + 1) / k)
    return np.clip(hi - lo, 0.0, None) * slots


_ALTERNATIVES = re.compile(r"\s*(?:[,;/|&\n]|\b(?:or|and|nor|either|vs\.?|versus)\b)\s*", re.IGNORECASE)


def answer_f1(text: str, golds: list[str]) -> float:
    """SQuAD token F1 of ``text`` against the gold answer and its aliases (max over them), with one
    guard against listing candidates: an answer that does not match a gold exactly and splits into
    several parts on ``, ; / | &``, newlines, "or", "and", "nor", "either", "vs" scores no more than
    its worst part (token F1 alone gives "Nolan or Lee" 2/3 where either name alone gets 1 or 0, so
    listing candidates would beat committing to one)."""
    whole = best_f1(text, golds)
    norm = normalize_answer(text)
    if whole == 1.0 or any(norm == normalize_answer(g) for g in golds if isinstance(g, str)):
        return whole
    parts = [p for p in _ALTERNATIVES.split(text) if normalize_answer(p)]
    if len(parts) < 2:
        return whole
    return min(whole, *(best_f1(p, golds) for p in parts))


class MusiqueTask(Task):
    """MuSiQue multi-hop QA with a per-hop citation + answer-F1 reward vector.

    Options (``vpo.tasks.get("musique", **options)``):
        path: local data file or directory in the MuSiQue JSONL schema (``None``: the Hub).
        hub_id: Hugging Face dataset id used when ``path`` is None.
        short_chains: how 2/3-hop questions fill the four hop slots: "stretch" (default) or "pass".
        max_citations: only the first this-many distinct valid cited paragraphs count (None: all).
        stratify_hops: with ``n`` given, sample equally per hop count (the paper's eval split).
    """

    name = "musique"
    objectives = ("hop_1", "hop_2", "hop_3", "hop_4", "answer_f1")
    answer_noun = "answer"

    def __init__(
        self,
        path: str | None = None,
        hub_id: str = HUB_ID,
        short_chains: str = "stretch",
        max_citations: int | None = MAX_HOPS,
        stratify_hops: bool = True,
    ) -> None:
        if short_chains not in SHORT_CHAIN_MODES:
            raise ValueError(f"musique: short_chains must be one of {SHORT_CHAIN_MODES}, got {short_chains!r}")
        positive_int(max_citations, "max_citations", "musique", allow_none=True)
        self.path = path
        self.hub_id = hub_id
        self.short_chains = short_chains
        self.max_citations = max_citations
        self.stratify_hops = bool(stratify_hops)
        self._cache: dict[str, list[Example]] = {}

    @property
    def target_weights(self) -> np.ndarray:
        return np.array([1.0, 1.0, 1.0, 1.0, 3.0]) / 7.0

    # -- data -------------------------------------------------------------------------------
    def load(self, split: str = "train", n: int | None = None, seed: int = 0) -> list[Example]:
        """Examples of ``split`` ("train" or "validation"/"dev"); ``n`` of them drawn with ``seed``
        (hop-stratified when ``stratify_hops``), all of them in data order when ``n`` is None."""
        rows = self._rows(split)
        if n is None or not self.stratify_hops:
            return sample_records(rows, n, seed)
        sample_records([], n, seed)  # validates n
        buckets: dict[int, list[Example]] = {}
        for r in rows:
            buckets.setdefault(len(r["question_decomposition"]), []).append(r)
        hops = sorted(buckets)
        per, extra = divmod(n, len(hops)) if hops else (0, 0)
        picked: list[Example] = []
        for j, h in enumerate(hops):
            want = per + (1 if j < extra else 0)
            order = np.random.default_rng(seed).permutation(len(buckets[h]))[:want]
            picked.extend(buckets[h][i] for i in order.tolist())
        order = np.random.default_rng(seed).permutation(len(picked))
        return [picked[i] for i in order.tolist()]

    def _rows(self, split: str) -> list[Example]:
        if split not in SPLITS:
            raise ValueError(f"musique has no split {split!r}; choose one of {sorted(SPLITS)}")
        hub_split, aliases = SPLITS[split]
        if hub_split not in self._cache:
            if self.path is not None:
                raw = load_local(self.path, hub_split, aliases, task=self.name)
                where = f"{self.path}"
            else:
                raw = load_hub(self.hub_id, hub_split, task=self.name)
                where = f"{self.hub_id}[{hub_split}]"
            rows = [r for r in raw if r.get("answerable", True) is not False]
            for i, r in enumerate(rows):
                _check_example(r, f"{where} record {i}")
            self._cache[hub_split] = rows
        return self._cache[hub_split]

    # -- prompting --------------------------------------------------------------------------
    def question(self, example: Example) -> str:
        paragraphs = "\n\n".join(
            f"[{i}] {p.get('title', '')}\n{p.get('paragraph_text', '')}".strip()
            for i, p in enumerate(example["paragraphs"], 1)
        )
        return (
            "Answer the question using the numbered paragraphs below. The question takes several "
            "reasoning steps, and each step is supported by one of the paragraphs.\n\n"
            f"{paragraphs}\n\n"
            f"Question: {example['question']}\n\n"
            "Write each answer in two lines: first 'Paragraphs:' followed by the numbers of the paragraphs "
            f"that support your reasoning steps, in the order of the steps (at most {self.max_citations or MAX_HOPS}), "
            "then 'Answer:' followed by a short answer (a name, date or phrase, no explanation). For example:\n"
            "Paragraphs: 3, 7\nAnswer: Paris"
        )

    # -- scoring ----------------------------------------------------------------------------
    def gold_paragraphs(self, example: Example) -> list[int]:
        """Displayed numbers (1-based) of the gold supporting paragraph of each reasoning step."""
        return _gold_numbers(example)

    def reference_answer(self, example: Example) -> str:
        """The gold answer body: every gold paragraph in step order, then the gold answer."""
        nums = ", ".join(str(x) for x in dict.fromkeys(self.gold_paragraphs(example)))
        return f"Paragraphs: {nums}\nAnswer: {example['answer']}"

    def _counted_citations(self, cited: list[int], num_paragraphs: int | None) -> list[int]:
        out: list[int] = []
        for c in cited:
            if c in out or (num_paragraphs is not None and not 1 <= c <= num_paragraphs):
                continue
            out.append(c)
            if self.max_citations is not None and len(out) >= self.max_citations:
                break
        return out

    def score(self, example: Example, answer: str) -> np.ndarray:
        answer = _without_headers(as_text(answer), example["paragraphs"])
        members = _members(answer)
        if len(members) > 1:  # several answers in one body: candidates, worth no more than the worst
            return np.min([self._score_one(example, m) for m in members], axis=0)
        return self._score_one(example, answer)

    def _score_one(self, example: Example, answer: str) -> np.ndarray:
        cited, text = parse_musique_answer(answer)
        text = _visible(text)
        golds = [example["answer"], *(example.get("answer_aliases") or [])]
        if not text or _denies(answer, text, golds):
            return np.zeros(self.d)
        counted = set(self._counted_citations(cited, len(example["paragraphs"])))
        gold = self.gold_paragraphs(example)
        hits = np.array([float(g in counted) for g in gold])
        # precision as MuSiQue's support F1 has it: every distinct number cited counts (past the cap
        # or naming no paragraph: a wrong citation), so citing more than the gold lowers every hop
        precision = len(counted & set(gold)) / len(set(cited)) if cited else 0.0
        k = len(gold)
        if self.short_chains == "pass" and k <= MAX_HOPS:
            hops = np.concatenate([hits * precision, np.ones(MAX_HOPS - k)])
        else:
            hops = hop_slot_matrix(k) @ hits * precision
        f1 = answer_f1(text, golds)
        return np.clip(np.round(np.append(hops, f1), 12), 0.0, 1.0)

    def canonical(self, answer: str) -> Any:
        cited, text = parse_musique_answer(answer)
        return tuple(sorted(self._counted_citations(cited, None))), normalize_answer(_visible(text))


def _without_headers(text: str, paragraphs: list) -> str:
    """``text`` without echoes of the prompt's paragraph headers (``[3] Title``, matched on the
    title's first word): the question copied back lists every paragraph number in brackets, which
    is no citation (a citation follows its claim: "... born in Venice [2].")."""
    if "[" not in text:
        return text
    for i, p in enumerate(paragraphs, 1):
        title = str(p.get("title", "")).split() if isinstance(p, dict) else []
        if title:  # the title's first word: an echo cut short keeps at least that much
            text = re.sub(rf"\[\s*{i}\s*\]\s*{re.escape(title[0])}", " ", text)
    return text


def _members(text: str) -> list[str]:
    """The answers of a body that holds several ``Answer:`` lines with text (say, three complete
    answers one after another): each from where the previous one's answer line ended to the end of
    its own (what follows the last joins it). One answer: ``[text]``."""
    ends = []
    for lab in _LABELS.finditer(text):
        if lab.group("ans") is None:
            continue
        end = text.find("\n", lab.end())
        end = len(text) if end < 0 else end
        nxt = _LABELS.search(text, lab.end())
        if nxt is not None and nxt.start() < end:
            end = nxt.start()
        if normalize_answer(_BRACKET_REF.sub(" ", text[lab.end() : end])):
            ends.append(end)
    if len(ends) < 2:
        return [text]
    cuts = [0, *ends[:-1], len(text)]
    return [text[a:b] for a, b in zip(cuts, cuts[1:])]


def _denies(body: str, text: str, golds: list[str]) -> bool:
    """Whether the answer denies itself: a negation word in its answer text that no gold answer has
    ("not Nolan", "Nolan? No."), or a negation just before the whole body ("It is not Paragraphs:
    ..."). Such an answer earns nothing: its citations and its words are what it rejects."""
    gold_words = {w for g in golds if isinstance(g, str) for w in normalize_answer(g).split()}
    if any(w in NEGATION_WORDS and w not in gold_words for w in normalize_answer(text).split()):
        return True
    first = _LABELS.search(body)
    return first is not None and negated_before(body[: first.start()])


def _visible(text: str) -> str:
    """``text`` without invisible format characters (zero-width spaces and joiners, soft hyphens):
    "Nolan\u200b" is the answer "Nolan", for the F1 and for the dedup."""
    return "".join(c for c in text if unicodedata.category(c) != "Cf").strip()


def _gold_numbers(example: Example) -> list[int]:
    paragraphs = example["paragraphs"]
    by_idx = {p["idx"]: i + 1 for i, p in enumerate(paragraphs) if isinstance(p, dict) and "idx" in p}
    out = []
    for step in example["question_decomposition"]:
        idx = step["paragraph_support_idx"]
        if by_idx:
            if idx not in by_idx:
                raise ValueError(
                    f"musique example {example.get('id')!r}: paragraph_support_idx {idx} names no paragraph "
                    f"(paragraph idx values: {sorted(by_idx)})"
                )
            out.append(by_idx[idx])
        else:
            out.append(int(idx) + 1)
    return out


def _check_example(row: Any, where: str) -> None:
    if not isinstance(row, dict):
        raise ValueError(f"musique: {where} is not a JSON object")
    missing = [k for k in ("question", "paragraphs", "question_decomposition", "answer") if k not in row]
    if missing:
        raise ValueError(
            f"musique: {where} (id {row.get('id')!r}) lacks field(s) {missing}; expected the MuSiQue schema "
            "(id, paragraphs[idx, title, paragraph_text, is_supporting], question, "
            "question_decomposition[paragraph_support_idx, ...], answer, answer_aliases, answerable)"
        )
    if not isinstance(row["paragraphs"], list) or not row["paragraphs"]:
        raise ValueError(f"musique: {where} (id {row.get('id')!r}) has no paragraphs")
    decomp = row["question_decomposition"]
    if (
        not isinstance(decomp, list)
        or not decomp
        or any(not isinstance(s, dict) or "paragraph_support_idx" not in s for s in decomp)
    ):
        raise ValueError(
            f"musique: {where} (id {row.get('id')!r}) needs a non-empty question_decomposition whose steps "
            "each have paragraph_support_idx"
        )
    try:
        _gold_numbers(row)
    except (TypeError, ValueError, KeyError) as e:
        raise ValueError(f"musique: {where}: {e}") from None
