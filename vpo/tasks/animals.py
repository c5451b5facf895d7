"""Animal lists: a task over facts a pretrained chat model half-knows (the pretrained-model study's second task).

Each request lists ``list_size`` (default 8) well-known animals by name and asks for one that is small,
fast and long-lived. The attributes are not shown: a model answers from what it knows, and RL can
teach it the rest. Three objectives score an answer, each in [0, 1], normalised within the list on a
log scale (1 for the list's best animal on that attribute, 0 for its worst):

* ``small``: the lightest (adult body mass);
* ``fast``: the fastest (top speed on land, in water or in the air, as commonly quoted);
* ``long_lived``: the longest recorded lifespan.

The objectives conflict by nature: small animals are short-lived, long-lived ones are large or slow
(a tortoise, a whale), and the compromises (a swift, a bat, a parrot, a lobster) are what a model
must learn to look for. An answer naming no listed animal scores 0 on every objective.

The table (:data:`ANIMALS`) holds round figures from common references: it is what the task rewards,
a catalogue the policy learns, not a claim about biology to three digits. Every split draws its lists
from the whole table (a catalogue shared by every request, as in a recommender); the splits differ in
their lists (seeds), so a test list is a combination of animals that no training request showed in
that set. ``test_seed`` draws a fresh test split.
"""

from __future__ import annotations

import math
import re

import numpy as np

from vpo.tasks.base import Example, Task
from vpo.tasks.shop import front_of

# name: (adult body mass in kg, top speed in km/h, longest recorded lifespan in years)
ANIMALS: dict[str, tuple[float, float, float]] = {
    "elephant": (6000, 40, 70),
    "blue whale": (150000, 50, 90),
    "cheetah": (50, 110, 14),
    "mouse": (0.02, 13, 4),
    "giant tortoise": (250, 0.3, 170),
    "horse": (500, 88, 50),
    "rabbit": (2, 56, 10),
    "bald eagle": (5, 100, 30),
    "dog": (30, 45, 20),
    "snail": (0.01, 0.05, 5),
    "lion": (190, 80, 16),
    "sloth": (5, 0.3, 30),
    "giraffe": (1200, 60, 25),
    "hippopotamus": (1500, 30, 45),
    "grizzly bear": (300, 56, 30),
    "wolf": (40, 60, 15),
    "fox": (6, 50, 10),
    "cat": (4, 48, 25),
    "zebra": (350, 65, 25),
    "kangaroo": (60, 70, 20),
    "koala": (10, 30, 18),
    "chimpanzee": (50, 40, 60),
    "gorilla": (160, 40, 50),
    "ostrich": (110, 70, 50),
    "penguin": (30, 10, 20),
    "peregrine falcon": (1, 390, 17),
    "hummingbird": (0.004, 50, 9),
    "parrot": (1, 55, 80),
    "owl": (1.5, 65, 28),
    "crocodile": (500, 29, 70),
    "komodo dragon": (70, 20, 30),
    "camel": (500, 65, 45),
    "gazelle": (20, 80, 12),
    "polar bear": (450, 40, 30),
    "rhinoceros": (2300, 50, 45),
    "bison": (800, 56, 25),
    "moose": (500, 56, 20),
    "deer": (70, 55, 15),
    "squirrel": (0.5, 24, 12),
    "hamster": (0.15, 10, 3),
    "bat": (0.01, 35, 35),
    "salmon": (5, 13, 8),
    "shark": (1100, 56, 70),
    "dolphin": (200, 35, 50),
    "octopus": (15, 25, 3),
    "sailfish": (60, 110, 13),
    "tuna": (250, 70, 40),
    "goldfish": (0.1, 8, 40),
    "frog": (0.05, 8, 10),
    "box turtle": (0.5, 0.3, 100),
    "lobster": (1, 18, 100),
    "pigeon": (0.35, 90, 15),
    "albatross": (8, 110, 70),
    "swift": (0.04, 110, 20),
    "raven": (1.2, 60, 20),
    "pig": (150, 17, 20),
    "cow": (700, 40, 22),
    "sheep": (70, 40, 12),
    "chicken": (2.5, 14, 10),
    "duck": (1.2, 80, 12),
}  # fmt: skip
OBJECTIVES = ("small", "fast", "long_lived")
SPLIT_SIZE = {"train": 512, "validation": 64, "test": 100}
SPLIT_SEED = {"train": 11, "validation": 12, "test": 13}
DEFAULT_LIST_SIZE = 8


def make_request(rng: np.random.Generator, split: str, rid: int, list_size: int) -> dict:
    """One request: ``list_size`` distinct animals of the table, in random order."""
    names = list(ANIMALS)
    pick = rng.choice(len(names), size=list_size, replace=False)
    return {"id": f"{split}-{rid}", "split": split, "animals": [names[i] for i in pick]}


def requests(split: str, list_size: int = DEFAULT_LIST_SIZE, seed: int | None = None) -> list[dict]:
    """A split's requests (``seed``: another draw of that split, e.g. a fresh test split)."""
    if split not in SPLIT_SIZE:
        raise ValueError(f"the animals task has splits {sorted(SPLIT_SIZE)}, not {split!r}")
    rng = np.random.default_rng(SPLIT_SEED[split] if seed is None else seed)
    return [make_request(rng, split, i, list_size) for i in range(SPLIT_SIZE[split])]


def item_rewards(example: dict) -> np.ndarray:
    """``[L, 3]``: each listed animal's (small, fast, long_lived) reward, in list order."""
    attrs = np.log(np.array([ANIMALS[a] for a in example["animals"]], dtype=np.float64))
    lo, hi = attrs.min(axis=0), attrs.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    frac = np.where(hi > lo, (attrs - lo) / span, 0.0)
    frac[:, 0] = np.where(hi[0] > lo[0], 1.0 - frac[:, 0], 0.0)  # small: the lightest is best
    return frac


def pareto_items(example: dict) -> np.ndarray:
    """The reward vectors of the listed animals no other listed animal dominates (the exact front)."""
    return front_of(item_rewards(example))


_ARTICLE = re.compile(r"^(?:the|a|an)\s+")


def normalise_name(answer: str) -> str:
    """Lower case, single spaces, no surrounding punctuation, no leading article, no plural ``s``."""
    key = " ".join(str(answer).lower().replace("-", " ").split()).strip(" .,;:!?\"'*()[]")
    key = _ARTICLE.sub("", key)
    return key


def find_item(example: dict, answer: str) -> int | None:
    """The listed animal an answer names exactly (case, spacing, an article, surrounding punctuation and
    a plural ``s`` aside), or None: a sentence that mentions several animals names none of them."""
    key = normalise_name(answer)
    for i, name in enumerate(example["animals"]):
        if key == name or key == name + "s" or key == name + "es":
            return i
    return None


def random_answer(example: dict, rng: np.random.Generator) -> str:
    """A uniformly random listed animal (the uniform answerer the report compares with)."""
    return example["animals"][int(rng.integers(len(example["animals"])))]


def first_listed_mention(example: dict, text: str) -> str | None:
    """The listed animal a free-form reply mentions first (whole words), or None: how the study reads
    the base model's own preferences from replies that ignore the answer format."""
    low = " " + " ".join(text.lower().split()) + " "
    hits = []
    for name in example["animals"]:
        m = re.search(r"(?<![a-z])" + re.escape(name) + r"(?:e?s)?(?![a-z])", low)
        if m:
            hits.append((m.start(), name))
    return min(hits)[1] if hits else None


class AnimalsTask(Task):
    """Lists of well-known animals scored as small, fast and long-lived (module docstring)."""

    name = "animals"
    objectives = OBJECTIVES
    answer_noun = "animal"
    preferences = {
        "small_first": (0.6, 0.2, 0.2),
        "fast_first": (0.2, 0.6, 0.2),
        "long_lived_first": (0.2, 0.2, 0.6),
        "fast_and_long_lived": (0.0, 0.5, 0.5),
    }

    def __init__(self, list_size: int = DEFAULT_LIST_SIZE, test_seed: int | None = None) -> None:
        if isinstance(list_size, bool) or not isinstance(list_size, int) or not 2 <= list_size <= len(ANIMALS):
            raise ValueError(f"animals: list_size must be an integer in [2, {len(ANIMALS)}], got {list_size!r}")
        if test_seed is not None and (isinstance(test_seed, bool) or not isinstance(test_seed, int)):
            raise ValueError(f"animals: test_seed must be an integer, got {test_seed!r}")
        self.list_size = list_size
        self.test_seed = test_seed

    def load(self, split: str = "train", n: int | None = None, seed: int = 0) -> list[Example]:
        rows = requests(split, self.list_size, self.test_seed if split == "test" else None)
        return rows if n is None else rows[:n]

    def question(self, example: Example) -> str:
        lines = "\n".join(f"- {a}" for a in example["animals"])
        return (
            "Pick one animal from this list. Small, fast and long-lived animals are best.\n"
            f"{lines}\nAnswer with the animal's name."
        )

    def canonical(self, answer: str):
        """The listed animal an answer names is the answer (``"Parrot."`` == ``"the parrot"``); an
        answer naming none is kept apart by its normalised text."""
        key = normalise_name(answer)
        for name in ANIMALS:
            if key in (name, name + "s", name + "es"):
                return ("animal", name)
        return ("text", key)

    def score(self, example: Example, answer: str) -> np.ndarray:
        i = find_item(example, answer)
        if i is None:
            return np.zeros(len(OBJECTIVES))
        return item_rewards(example)[i]


def ceiling(example: dict, weights=(1 / 3, 1 / 3, 1 / 3)) -> float:
    """The best listed animal's ``wᵀr``."""
    return float((item_rewards(example) @ np.asarray(weights, dtype=np.float64)).max())


def mean_pairwise_correlation(examples: list[dict]) -> float:
    """ρ̄ of the three objectives over every listed animal of ``examples`` (the conflict check)."""
    r = np.concatenate([item_rewards(ex) for ex in examples])
    c = np.corrcoef(r.T)
    vals = [c[i, j] for i in range(3) for j in range(i + 1, 3)]
    return float(np.mean(vals)) if all(math.isfinite(v) for v in vals) else float("nan")
