"""The recommendation task: a request names a genre, each answer is one catalog item id, and four
offline personas score it. Each persona is one objective in [0, 1]:

* ``budget``: a budget-conscious user, 1 at $15 or less, falling linearly to 0 at $60;
* ``novelty``: a novelty seeker, 1 − popularity;
* ``genre_fan``: a fan of the requested genre, 1 for an item of that genre, else 0;
* ``critic``: a quality-first user, the rating mapped from [2.5, 5] to [0, 1].

An unknown id scores 0 on every objective (a wasted slot). ``make_task()`` is a plain
:class:`vpo.tasks.FunctionTask`, so ``vpo train --task examples/recommend/task.py:make_task`` and
``vpo eval --task examples/recommend/task.py:make_task`` work as they do for any task.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from vpo.tasks import FunctionTask


def _load_catalog():
    """``catalog.py`` next to this file, imported by path (this folder is not a package)."""
    name = "vpo_example_recommend_catalog"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parent / "catalog.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


_catalog = _load_catalog()
GENRES, MAX_PRICE, CATALOG, item = _catalog.GENRES, _catalog.MAX_PRICE, _catalog.CATALOG, _catalog.item


def budget(example: dict, answer: str) -> float:
    it = item(answer)
    return 0.0 if it is None else min(1.0, max(0.0, (MAX_PRICE - it["price"]) / (MAX_PRICE - 15.0)))


def novelty(example: dict, answer: str) -> float:
    it = item(answer)
    return 0.0 if it is None else 1.0 - it["popularity"]


def genre_fan(example: dict, answer: str) -> float:
    it = item(answer)
    return float(it is not None and it["genre"] == example["genre"])


def critic(example: dict, answer: str) -> float:
    it = item(answer)
    return 0.0 if it is None else (it["rating"] - 2.5) / 2.5


PERSONAS = {"budget": budget, "novelty": novelty, "genre_fan": genre_fan, "critic": critic}


def requests(split: str) -> list[dict]:
    """Requests: each genre with a few phrasings; train and test use different phrasings."""
    phrasings = {
        "train": ["{g} picks?", "Some {g}, please.", "Any {g} for me?", "I like {g}."],
        "test": ["Recommend {g}.", "{g} fan here."],
    }
    if split not in phrasings:
        raise ValueError(f"the recommend task has splits train and test, not {split!r}")
    return [
        {"id": f"{split}-{g}-{i}", "genre": g, "question": p.format(g=g)}
        for g in GENRES.values()
        for i, p in enumerate(phrasings[split])
    ]


def make_task() -> FunctionTask:
    task = FunctionTask("recommend", objectives=PERSONAS, examples=requests)
    task.answer_noun = "item id"
    task.instruction_style = "short"  # one-line answer instruction: the tiny model reads every character
    return task
