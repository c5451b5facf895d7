"""The shop lists with answers given as product names: the pretrained-model study's first candidate.

The task itself is built in: :mod:`vpo.tasks.shop` (``vpo eval --task shop``, letters by default).
This file keeps the first candidate, which asks for the product's *name*, as a task by path, the way
docs/gpu.md's first `vpo check` ran it::

    vpo check MODEL --task examples/smollm2/shop_task.py:make_task --split validation ...

``random_answer(example, rng)`` draws a random listed name, which ``examples/smollm2/warm_start.py``
uses for the format warm start. The demo's study (``vpo demo --domain shop``) asks for letters:
a name copied from the list came out right in only 21 % of the warm start's slots (docs/gpu.md).
"""

from __future__ import annotations

import numpy as np

from vpo.tasks.shop import OBJECTIVES, SPLIT_ADJ, SPLIT_SEED, SPLIT_SIZE, ShopTask, make_request, requests  # noqa: F401
from vpo.tasks.shop import random_answer as _random_answer


def random_answer(example: dict, rng: np.random.Generator) -> str:
    """A uniformly random name from the list: the name-format warm start's answers."""
    return _random_answer(example, rng, answer="name")


def make_task() -> ShopTask:
    return ShopTask(answer="name")
