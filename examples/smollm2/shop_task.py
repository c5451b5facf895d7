"""A recommendation task built for a pretrained chat model: pick items from a short shop list.

Each request shows a list of six products, each with a price, a star rating and how many people
bought it, and asks for a recommendation. An answer is one product's name, copied from the list
(the skill a pretrained chat model brings: reading a list and naming an entry). Three offline
shoppers score it, one objective each, every one in [0, 1]:

* ``budget``: a budget shopper, 1 for the cheapest item on the list, 0 for the dearest, linear between;
* ``critic``: a quality-first shopper, 1 for the best rated, 0 for the worst rated, linear between;
* ``explorer``: a shopper who avoids best-sellers, 1 for the least bought, 0 for the most bought.

The lists are laid out as a designed conflict: each list has a cheap item, a well-rated item and a
rarely bought item (each best on its own attribute and poor on the others), two compromise items
that are middling on all three, and a decoy that is poor on all three. So no single answer pleases
every shopper, a set of three can, and the best single answer under uniform weights is a compromise,
not a specialist. A name that is not on the list scores 0 on every objective (a wasted slot).

``make_task()`` is a plain :class:`vpo.tasks.FunctionTask`: ``vpo eval --task
examples/smollm2/shop_task.py:make_task`` and ``vpo check`` take it as they take any task by path.
Splits are drawn from disjoint product names (train, validation and test share no name), so a model
cannot score by remembering names.
"""

from __future__ import annotations

import numpy as np

from vpo.tasks import FunctionTask

# product names by split: disjoint, so a held-out list never shows a name seen in training
_ADJ = [
    "Amber", "Birch", "Cedar", "Coral", "Dune", "Ember", "Fern", "Frost", "Harbor", "Ivory", "Juniper", "Lark",
    "Maple", "Meadow", "Nova", "Onyx", "Orchid", "Pebble", "Pine", "Quartz", "Raven", "Sage", "Slate", "Sunny",
    "Tide", "Umber", "Velvet", "Willow", "Wren", "Zephyr",
]  # fmt: skip
_NOUN = [
    "Kettle", "Lamp", "Backpack", "Mug", "Blanket", "Candle", "Notebook", "Speaker", "Pillow", "Jacket",
    "Teapot", "Umbrella",
]  # fmt: skip
SPLIT_ADJ = {"train": _ADJ[:18], "validation": _ADJ[18:24], "test": _ADJ[24:]}
SPLIT_SIZE = {"train": 512, "validation": 64, "test": 100}
SPLIT_SEED = {"train": 1, "validation": 2, "test": 3}
OBJECTIVES = ("budget", "critic", "explorer")

# (price, rating, buyers) as fractions of the list's range: 0 = worst for its shopper, 1 = best
_PROFILES = {
    "cheap": (0.95, 0.10, 0.15),
    "rated": (0.10, 0.95, 0.10),
    "rare": (0.15, 0.10, 0.95),
    "compromise_a": (0.60, 0.55, 0.50),
    "compromise_b": (0.50, 0.60, 0.55),
    "decoy": (0.05, 0.05, 0.05),
}


def _item(rng: np.random.Generator, name: str, profile: tuple[float, float, float]) -> dict:
    """Attributes whose normalised scores are the profile plus a little noise (clipped to [0, 1])."""
    b, c, e = (float(np.clip(x + rng.normal(0, 0.04), 0.0, 1.0)) for x in profile)
    price = round(5 + (1 - b) * 95)  # $5 .. $100
    rating = round(2.0 + c * 3.0, 1)  # 2.0 .. 5.0 stars
    buyers = int(round(50 * 10 ** ((1 - e) * 3)))  # 50 .. 50,000 buyers, log-spaced
    return {"name": name, "price": price, "rating": rating, "buyers": buyers}


def make_request(rng: np.random.Generator, split: str, rid: int) -> dict:
    adjectives = rng.choice(SPLIT_ADJ[split], size=len(_PROFILES), replace=False)
    nouns = rng.choice(_NOUN, size=len(_PROFILES), replace=True)
    items = [
        _item(rng, f"{a} {n}", profile)
        for a, n, profile in zip(adjectives, nouns, _PROFILES.values())
    ]  # fmt: skip
    order = rng.permutation(len(items))
    return {"id": f"{split}-{rid}", "items": [items[i] for i in order]}


def requests(split: str) -> list[dict]:
    if split not in SPLIT_SIZE:
        raise ValueError(f"the shop task has splits {sorted(SPLIT_SIZE)}, not {split!r}")
    rng = np.random.default_rng(SPLIT_SEED[split])
    return [make_request(rng, split, i) for i in range(SPLIT_SIZE[split])]


def question(example: dict) -> str:
    lines = [f"- {it['name']}: ${it['price']}, {it['rating']} stars, {it['buyers']} buyers" for it in example["items"]]
    return "Recommend one product from this list.\n" + "\n".join(lines) + "\nAnswer with the product's name."


def _find(example: dict, answer: str) -> dict | None:
    key = " ".join(answer.strip().strip(".\"'*").lower().split())
    for it in example["items"]:
        if it["name"].lower() == key:
            return it
    return None


def _score(example: dict, answer: str, attr: str, higher_is_better: bool, log: bool = False) -> float:
    it = _find(example, answer)
    if it is None:
        return 0.0
    vals = [float(x[attr]) for x in example["items"]]
    v = float(it[attr])
    if log:
        vals, v = [np.log(x) for x in vals], np.log(v)
    lo, hi = min(vals), max(vals)
    frac = 0.0 if hi == lo else (v - lo) / (hi - lo)
    return float(frac if higher_is_better else 1.0 - frac)


def budget(example: dict, answer: str) -> float:
    return _score(example, answer, "price", higher_is_better=False)


def critic(example: dict, answer: str) -> float:
    return _score(example, answer, "rating", higher_is_better=True)


def explorer(example: dict, answer: str) -> float:
    return _score(example, answer, "buyers", higher_is_better=False, log=True)


def random_answer(example: dict, rng: np.random.Generator) -> str:
    """A uniformly random name from the list: the format warm start's answers."""
    return example["items"][int(rng.integers(len(example["items"])))]["name"]


def make_task() -> FunctionTask:
    task = FunctionTask(
        "shop",
        objectives={"budget": budget, "critic": critic, "explorer": explorer},
        examples=requests,
        question=question,
    )
    task.answer_noun = "product name"
    return task
