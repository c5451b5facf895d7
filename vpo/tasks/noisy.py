"""Noisy objectives: a task whose training rewards are corrupted and whose evaluation rewards are not.

What happens to VPO when the vector structure is noisy? ``noisy`` wraps any task: on examples of the
noisy splits (default: the training split) every valid answer's reward vector gets independent
Gaussian noise of standard deviation ``sigma`` on each component, except the objectives named in
``binary``, which are flipped (``r -> 1 - r``) with probability ``flip`` instead. Examples of the other splits
score clean, so ``vpo train --task noisy`` learns from corrupted rewards while ``vpo eval`` (on the
test or validation split, or with the plain task) measures the true ones::

    vpo train --task noisy --task_options '{"task": "maze", "task_options": {"size": 5}, "sigma": 0.2}'
    vpo eval --task maze --task-options '{"size": 5}' ...

An example's split is its ``split`` key (maze, prog and the text tasks set it); an example without one
counts as training data. Invalid answers stay invalid (their rows 0): noise never makes a failed
answer win; unscored answers stay unscored. The draws come from one generator seeded by ``seed``,
in scoring order.

The noise is drawn **per rollout**, not per answer, so that a set cannot buy luck with size: the
Gaussian draw of a rollout is one vector added to every valid answer of it, and a flip turns the
rollout's binary objective into ``1 - (its best valid answer's value)`` for every valid answer (the
set's value on that objective is what is flipped). With independent draws per answer, the max over
a set's answers (VPO's set score, union coverage) grew with every junk answer added, since each
brought one more noisy draw; now adding an answer that the others dominate changes no max. With one
answer per rollout (m = 1) this is the same noise as per answer, draw for draw.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from vpo.errors import UserError
from vpo.tasks.base import ScoredBatch, Task, TaskWrapper

__all__ = ["NoisyTask"]


class NoisyTask(TaskWrapper):
    """``task`` (a registered name or reference, built with ``task_options``) with corrupted training
    rewards; see the module docstring."""

    def __init__(
        self,
        task: str | Task,
        task_options: dict | None = None,
        sigma: float = 0.0,
        flip: float = 0.0,
        binary: Sequence[str] = (),
        seed: int = 0,
        splits: Sequence[str] = ("train",),
    ) -> None:
        from vpo.tasks.registry import get

        inner = task if isinstance(task, Task) else get(task, **dict(task_options or {}))
        if not (isinstance(sigma, (int, float)) and math.isfinite(sigma) and sigma >= 0):
            raise UserError(f"noisy: sigma must be a number >= 0, got {sigma!r}")
        if not (isinstance(flip, (int, float)) and 0 <= flip <= 1):
            raise UserError(f"noisy: flip must be a probability in [0, 1], got {flip!r}")
        unknown = [b for b in binary if b not in inner.objectives]
        if unknown:
            raise UserError(
                f"noisy: binary names objective(s) {unknown} that task {inner.name!r} does not have; "
                f"its objectives are {list(inner.objectives)}"
            )
        if flip > 0 and not binary:
            raise UserError("noisy: flip > 0 needs the binary objectives it flips (binary: [name, ...])")
        super().__init__(inner)
        self.sigma, self.flip, self.seed = float(sigma), float(flip), int(seed)
        self.binary = [list(inner.objectives).index(b) for b in binary]
        self.splits = tuple(splits)
        self.rng = np.random.default_rng(self.seed)

    def corrupt(self, rewards: np.ndarray, valid: np.ndarray) -> np.ndarray:
        """``rewards [N, m, d]`` with this task's noise on every valid answer (a copy): one Gaussian
        draw per rollout and objective shared by its answers, one flip per rollout and binary
        objective acting on the set's value (module docstring)."""
        r = np.array(rewards, dtype=np.float64)
        v = np.asarray(valid, dtype=bool)
        n = r.shape[0]
        if self.sigma > 0:
            cont = np.ones(r.shape[-1], dtype=bool)
            cont[self.binary] = False  # binary objectives are flipped, not blurred
            noise = self.rng.normal(0.0, self.sigma, size=(n, 1, r.shape[-1]))  # shared by the rollout's answers
            r = r + np.where(v[..., None] & cont, noise, 0.0)
        for j in self.binary:
            flipped = self.rng.random((n, 1)) < self.flip
            best = np.where(v, r[..., j], -np.inf).max(1, keepdims=True)  # [N, 1]: the set's value
            best = np.where(np.isfinite(best), best, 0.0)
            r[..., j] = np.where(flipped & v, 1.0 - best, r[..., j])
        return r

    def score_completions(
        self, examples, completions, m: int, *, dedup_answers: bool = True, strict: bool = False
    ) -> ScoredBatch:
        b = self.inner.score_completions(examples, completions, m, dedup_answers=dedup_answers, strict=strict)
        noisy = np.array([str(ex.get("split", "train")) in self.splits for ex in examples], dtype=bool)
        if not noisy.any() or (self.sigma == 0 and self.flip == 0):
            return b
        r = np.where(noisy[:, None, None], self.corrupt(b.rewards, b.valid & noisy[:, None]), b.rewards)
        kept = {k: getattr(b, k) for k in b.__dataclass_fields__ if k != "rewards"}
        return type(b)(rewards=r, **kept)

    def __repr__(self) -> str:
        return f"noisy({self.inner!r}, sigma={self.sigma}, flip={self.flip}, binary={self.binary})"
