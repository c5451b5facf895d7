"""Shop lists: a recommendation task built for a pretrained chat model (the pretrained-model study).

Each request shows six products, each with a price, a star rating and how many people bought it, and
asks for a recommendation. Three offline shoppers score an answer, one objective each, all in [0, 1]:

* ``budget``: 1 for the cheapest product on the list, 0 for the dearest, linear between;
* ``critic``: 1 for the best rated, 0 for the worst rated, linear between;
* ``explorer``: a shopper who avoids best-sellers, 1 for the least bought, 0 for the most bought
  (on a log scale).

The lists are a designed conflict: each has a cheap product, a well-rated one and a rarely bought
one (each best on its own attribute and poor on the others), two compromises that are middling on
all three, and a decoy that is poor on all three. No single answer pleases every shopper, a set of
three can, and the best single answer under uniform weights is a compromise, not a specialist.

``answer="letter"`` (default) labels the products A-F and asks for the letter (one token: the cheap
format the demo trains); ``answer="name"`` asks for the product's name (the first candidate, kept
for ``examples/smollm2/shop_task.py``). Either way a product's exact name is accepted too, and an
answer naming no listed product scores 0 on every objective.

The splits draw product names from disjoint adjectives (train, validation and test share no name),
so a model cannot score by remembering names; ``test_seed`` draws a fresh test split.
"""

from __future__ import annotations

import string
from typing import Any

import numpy as np

from vpo.tasks.base import Example, Task

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
ANSWERS = ("letter", "name")

# (price, rating, buyers) as fractions of the list's range: 0 = worst for its shopper, 1 = best
PROFILES = {
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
    """One request: six products with the profiles above, names from the split's adjectives, shuffled."""
    adjectives = rng.choice(SPLIT_ADJ[split], size=len(PROFILES), replace=False)
    nouns = rng.choice(_NOUN, size=len(PROFILES), replace=True)
    items = [_item(rng, f"{a} {n}", profile) for a, n, profile in zip(adjectives, nouns, PROFILES.values())]
    order = rng.permutation(len(items))
    return {"id": f"{split}-{rid}", "items": [items[i] for i in order]}


def requests(split: str, seed: int | None = None) -> list[dict]:
    """A split's requests (``seed``: another draw of that split, e.g. a fresh test split)."""
    if split not in SPLIT_SIZE:
        raise ValueError(f"the shop task has splits {sorted(SPLIT_SIZE)}, not {split!r}")
    rng = np.random.default_rng(SPLIT_SEED[split] if seed is None else seed)
    return [make_request(rng, split, i) for i in range(SPLIT_SIZE[split])]


def item_rewards(example: dict) -> np.ndarray:
    """``[6, 3]``: each listed product's (budget, critic, explorer) reward, in list order."""
    items = example["items"]
    cols = []
    for attr, higher, log in (("price", False, False), ("rating", True, False), ("buyers", False, True)):
        v = np.array([float(it[attr]) for it in items])
        if log:
            v = np.log(v)
        lo, hi = v.min(), v.max()
        frac = np.zeros_like(v) if hi == lo else (v - lo) / (hi - lo)
        cols.append(frac if higher else 1.0 - frac)
    return np.stack(cols, axis=1)


def pareto_items(example: dict) -> np.ndarray:
    """The reward vectors of the products no other listed product dominates (the exact front)."""
    return front_of(item_rewards(example))


def front_of(r: np.ndarray) -> np.ndarray:
    """The rows of ``r [items, d]`` that no other row dominates (a list task's exact Pareto front)."""
    keep = [
        i for i in range(len(r)) if not any((r[j] >= r[i]).all() and (r[j] > r[i]).any() for j in range(len(r)))
    ]  # fmt: skip
    return r[keep]


def find_item(example: dict, answer: str, letters: bool = True) -> int | None:
    """The listed product an answer names (its exact name, or with ``letters`` its letter), or None."""
    key = " ".join(str(answer).strip().strip(".\"'*()[]:").split()).lower()
    items = example["items"]
    if letters and len(key) == 1 and key in string.ascii_lowercase[: len(items)]:
        return string.ascii_lowercase.index(key)
    for i, it in enumerate(items):
        if it["name"].lower() == key:
            return i
    return None


def random_answer(example: dict, rng: np.random.Generator, answer: str = "name") -> str:
    """A uniformly random listed product (its letter or name): the format warm start's answers."""
    i = int(rng.integers(len(example["items"])))
    return string.ascii_uppercase[i] if answer == "letter" else example["items"][i]["name"]


class ShopTask(Task):
    """Six-product shop lists scored by three shoppers (module docstring)."""

    name = "shop"
    objectives = OBJECTIVES
    preferences = {
        "budget_first": (0.6, 0.2, 0.2),
        "critic_first": (0.2, 0.6, 0.2),
        "explorer_first": (0.2, 0.2, 0.6),
        "budget_and_critic": (0.5, 0.5, 0.0),
    }

    def __init__(self, answer: str = "letter", test_seed: int | None = None, instruction: str = "full") -> None:
        if answer not in ANSWERS:
            raise ValueError(f"shop: answer must be one of {', '.join(ANSWERS)}, got {answer!r}")
        if test_seed is not None and (isinstance(test_seed, bool) or not isinstance(test_seed, int)):
            raise ValueError(f"shop: test_seed must be an integer, got {test_seed!r}")
        self.answer = answer
        self.test_seed = test_seed
        self.instruction_style = instruction
        self.answer_noun = "letter" if answer == "letter" else "product name"

    def load(self, split: str = "train", n: int | None = None, seed: int = 0) -> list[Example]:
        rows = requests(split, self.test_seed if split == "test" else None)
        return rows if n is None else rows[:n]

    def question(self, example: Example) -> str:
        lines = [
            f"{string.ascii_uppercase[i]}) {it['name']}: ${it['price']}, {it['rating']} stars, {it['buyers']} buyers"
            if self.answer == "letter"
            else f"- {it['name']}: ${it['price']}, {it['rating']} stars, {it['buyers']} buyers"
            for i, it in enumerate(example["items"])
        ]
        ask = "Answer with the product's letter." if self.answer == "letter" else "Answer with the product's name."
        return "Recommend one product from this list.\n" + "\n".join(lines) + "\n" + ask

    def dedup_key(self, example: Example, answer: str) -> Any:
        """The product an answer names (``A``, ``a``, ``(A)``, ``A.`` and, in letter mode, the product's
        name are one answer), else the default key."""
        i = find_item(example, answer, letters=self.answer == "letter")
        return ("item", i) if i is not None else self.canonical(answer)

    def score(self, example: Example, answer: str) -> np.ndarray:
        i = find_item(example, answer, letters=self.answer == "letter")
        if i is None:
            return np.zeros(len(OBJECTIVES))
        return item_rewards(example)[i]
