"""EUREQA (5-hop): identify every masked entity of a reasoning chain; exact match per entity.

A question is a short narrative built from a DBpedia chain of six entities; the first five are
masked ("Person A", "Film B", ...), the last is named, and the model must name A..E (A answers the
question). Reward vector (d = 5, docs/method.md §5): ``entity_A..entity_E``, each 1 if the answer
names that entity exactly after normalisation (underscores to spaces, accents folded, SQuAD
normalisation), else 0; ``w*`` uniform. An answer body has lines ``A: ...`` to ``E: ...``;
:func:`parse_eureqa_answer` accepts any order and many label styles, and a body without labels is
read positionally. Extension of the reference's exact match: a trailing parenthesised Wikipedia
disambiguator is optional on either side (``Queen_(band)`` matches "Queen").
``load("train")``/``load("test")`` give the paper's split (``questions_hard_5`` permuted with
``default_rng(split_seed)``: test = its second half, train = ``questions_normal_5`` + the first
half). docs/paper_tasks.md ("EUREQA") has the parsing rules and data layout.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

import numpy as np

from vpo._util import positive_int
from vpo.tasks.base import Example, Task
from vpo.tasks.text import as_text, load_hub, load_local, normalize_answer, sample_records

HUB_ID = "vincentleebang/EUREQA"
LETTERS = ("A", "B", "C", "D", "E")
RAW_SPLITS = ("questions_hard_5", "questions_normal_5")
DERIVED_SPLITS = ("train", "test")

_TAG = re.compile(r"<(/?)(?:entity_)?([A-Ea-e])\s*>")
_SPLIT = re.compile(r"\n|;|\||,\s*(?=(?:[A-Za-z]+\s+)?\(?[A-E]\)?\s*(?:[:=]|->))")
_SEP = r"(?::|=|->|\u2192|\u2014|\u2013|-|\.(?=\s)|\bis\b)"
_LINE = re.compile(
    r"^[\s>*\-\u2022\u00b7]*(?:\d{1,2}[.)]\s*)?(?:\*\*|__)?"
    r"(?:[A-Za-z][\w'-]{0,30}[ \t]+){0,3}?"
    r"(?:[(\[]([A-E])[)\]](?:\*\*|__)?[ \t]*" + _SEP + r"?"  # (A) or [A]: separator optional
    r"|([A-E])\)(?:\*\*|__)?[ \t]*" + _SEP + r"?"  # A): separator optional
    r"|(?<![\w])([A-E])(?![\w])(?:\*\*|__)?[ \t]*" + _SEP + r")"  # bare letter: separator required
    r"(.*)$"
)
_BULLET = re.compile(r"^[\s>*\-\u2022\u00b7]*(?:\d{1,2}[.)]\s+)?")
_TRAILING_PAREN = re.compile(r"[\s_]*\([^()]*\)\s*$")


def parse_eureqa_answer(text: Any) -> dict[str, str]:
    """``{letter: named entity}`` for the letters A..E found in one answer body (never raises)."""
    text = as_text(text)
    out: dict[str, str] = {}
    # 1. tags: pair each letter's first open tag with the next matching close tag (linear scan)
    opens: dict[str, int] = {}
    for tok in _TAG.finditer(text):
        letter = tok.group(2).upper()
        if letter in out:
            continue
        if not tok.group(1):
            opens.setdefault(letter, tok.end())
        elif letter in opens:
            value = _clean(text[opens[letter] : tok.start()])
            if value:
                out[letter] = value
    if out:
        text = _TAG.sub("\n", text)
    # 2. labelled lines
    pieces = _SPLIT.split(text)
    labelled = False
    for piece in pieces:
        m = _LINE.match(piece)
        if not m:
            continue
        labelled = True
        letter = m.group(1) or m.group(2) or m.group(3)
        value = _clean(m.group(4))
        if value and letter not in out:
            out[letter] = value
    # 3. no labels at all: the first five non-empty lines, in order
    if not out and not labelled:
        lines = [_clean(_BULLET.sub("", ln)) for ln in text.splitlines()]
        for letter, value in zip(LETTERS, [ln for ln in lines if ln]):
            out[letter] = value
    return out


def _clean(value: str) -> str:
    return value.strip().strip("*`\"'").strip().rstrip(".,;").strip()


def _fold(text: str) -> str:
    if text.isascii():
        return text
    return "".join(ch for ch in unicodedata.normalize("NFKD", text) if not unicodedata.combining(ch))


def entity_keys(name: str) -> set[str]:
    """Normalised forms under which ``name`` matches: with and without a trailing "(...)"."""
    base = _fold(name.replace("_", " "))
    keys = {normalize_answer(base), normalize_answer(_TRAILING_PAREN.sub("", base))}
    keys.discard("")
    return keys


def entity_match(predicted: str, gold: str) -> bool:
    """Exact match of two entity names after normalisation (see the module docstring)."""
    return bool(entity_keys(predicted) & entity_keys(gold))


class EureqaTask(Task):
    """EUREQA 5-hop chains with one exact-match objective per masked entity.

    Options (``vpo.tasks.get("eureqa", **options)``):
        path: local data file or directory in the Hub schema (``None``: the Hub).
        hub_id: Hugging Face dataset id used when ``path`` is None.
        split_seed: seed of the permutation of questions_hard_5 behind the "train"/"test" splits.
    """

    name = "eureqa"
    objectives = tuple(f"entity_{x}" for x in LETTERS)
    answer_noun = "answer"

    def __init__(self, path: str | None = None, hub_id: str = HUB_ID, split_seed: int = 0) -> None:
        positive_int(split_seed, "split_seed", "eureqa", minimum=0)
        self.path = path
        self.hub_id = hub_id
        self.split_seed = split_seed
        self._cache: dict[str, list[Example]] = {}

    # -- data -------------------------------------------------------------------------------
    def load(self, split: str = "train", n: int | None = None, seed: int = 0) -> list[Example]:
        """Examples of ``split``: "train"/"test" (the paper's split) or a raw 5-hop split name;
        ``n`` of them drawn with ``seed`` (kept in split order), all when ``n`` is None."""
        if split in RAW_SPLITS:
            rows = self._raw(split)
        elif split in DERIVED_SPLITS:
            hard = self._raw("questions_hard_5")
            order = np.random.default_rng(self.split_seed).permutation(len(hard)).tolist()
            half = len(hard) // 2
            if split == "train":
                rows = self._raw("questions_normal_5") + [hard[i] for i in order[:half]]
            else:
                rows = [hard[i] for i in order[half:]]
        else:
            raise ValueError(
                f"eureqa has no split {split!r}; choose one of {list(DERIVED_SPLITS + RAW_SPLITS)} "
                "(the task needs 5 masked entities, so only the 5-hop splits are supported)"
            )
        return sample_records(rows, n, seed)

    def _raw(self, split: str) -> list[Example]:
        if split not in self._cache:
            if self.path is not None:
                rows = load_local(self.path, split, (split,), task=self.name)
                where = str(self.path)
            else:
                rows = load_hub(self.hub_id, split, task=self.name)
                where = f"{self.hub_id}[{split}]"
            for i, r in enumerate(rows):
                _check_example(r, f"{where} record {i}")
            self._cache[split] = rows
        return self._cache[split]

    # -- prompting --------------------------------------------------------------------------
    def question(self, example: Example) -> str:
        q = example["question"]
        narrative = q if isinstance(q, str) else "\n".join(str(s) for s in q)
        masks = example["entity_masks"]
        listing = "\n".join(f"{x}: {masks[i]}" for i, x in enumerate(LETTERS))
        return (
            "The text below describes a chain of entities. Each masked entity is replaced by a label, "
            "and only the end of the chain is named; work back along the chain to identify every "
            "masked entity.\n\n"
            f"Text:\n{narrative}\n\n"
            f"Masked entities:\n{listing}\n\n"
            "Write each answer as five lines, one per masked entity, giving its full name (its English "
            "Wikipedia title):\nA: <name>\nB: <name>\nC: <name>\nD: <name>\nE: <name>\n"
            f"Entity A ({masks[0]}) is the answer to the question."
        )

    # -- scoring ----------------------------------------------------------------------------
    def reference_answer(self, example: Example) -> str:
        """The gold answer body: one ``letter: entity`` line per masked entity."""
        return "\n".join(f"{x}: {example['entities'][i]}" for i, x in enumerate(LETTERS))

    def score(self, example: Example, answer: str) -> np.ndarray:
        named = parse_eureqa_answer(answer)
        gold = example["entities"]
        return np.array([float(x in named and entity_match(named[x], gold[i])) for i, x in enumerate(LETTERS)])

    def canonical(self, answer: str) -> Any:
        named = parse_eureqa_answer(answer)
        return tuple(min(entity_keys(named[x]), default="") if x in named else "" for x in LETTERS)


def _check_example(row: Any, where: str) -> None:
    schema = "expected the EUREQA schema (idx, question: list of sentences, entity_masks: list, entities: list)"
    if not isinstance(row, dict):
        raise ValueError(f"eureqa: {where} is not a JSON object; {schema}")
    missing = [k for k in ("question", "entity_masks", "entities") if k not in row]
    if missing:
        raise ValueError(f"eureqa: {where} (idx {row.get('idx')!r}) lacks field(s) {missing}; {schema}")
    ents, masks = row["entities"], row["entity_masks"]
    if not isinstance(ents, list) or not isinstance(masks, list):
        raise ValueError(f"eureqa: {where} (idx {row.get('idx')!r}): entities and entity_masks must be lists; {schema}")
    if len(ents) < len(LETTERS) or len(masks) < len(LETTERS):
        raise ValueError(
            f"eureqa: {where} (idx {row.get('idx')!r}) has {len(ents)} entities / {len(masks)} masks; the task "
            f"scores {len(LETTERS)} masked entities, so use a 5-hop split (questions_hard_5, questions_normal_5)"
        )
    if not all(isinstance(e, str) and e.strip() for e in ents[: len(LETTERS)]):
        raise ValueError(f"eureqa: {where} (idx {row.get('idx')!r}): entities A..E must be non-empty strings")
