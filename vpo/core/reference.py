"""The VPO advantage as a readable per-group loop: the method in twenty lines, and the tests' oracle.

:func:`vpo_advantages_reference` is docs/method.md §3 written as plainly as possible, with plain
numpy loops over groups, rollouts, weightings and answers. Read it first; then read
:func:`vpo.core.estimators.vpo_estimator`, which computes the same numbers for a whole batch at
once (docs/method.md §3 maps one onto the other). Fed the same weightings, the two agree to
float64 rounding with ``EstimatorConfig(compute_dtype="float64")``; ``tests/core/test_estimators.py``
uses this function as its VPO oracle. It shares no code with the vectorised estimator.

Simplifications: no input checks, no diagnostics, no weight sampling. The caller passes the
weightings, one ``[K, d]`` set per group; ``SimplexSampler(K, alpha, kind, seed).sample(P, d)``
with ``compute_advantages``'s seed gives exactly the ones the vectorised estimator draws (group p
is the p-th group to appear in the batch). It is slow: use ``compute_advantages`` to train.
"""

from __future__ import annotations

import numpy as np

__all__ = ["vpo_advantages_reference"]


def vpo_advantages_reference(rewards, groups, weights, valid=None, *, invalid_score=0.0, eps=1e-6):
    """VPO set scores and advantages, one group at a time (docs/method.md §3).

    Args:
        rewards: ``[N, m, d]`` reward vectors: N rollouts, m answer slots, d objectives.
        groups: ``G`` (an int: G consecutive rollouts per prompt) or ``[N]`` group ids.
        weights: ``[P, K, d]``; ``weights[p]`` are the K weightings of the p-th group to appear.
        valid: ``[N, m]`` bool, which slots hold a real answer (default: all).
        invalid_score: the score of a rollout with no valid answer (it still counts in its group).
        eps: added to the std; a group whose std is below it gets advantage 0.

    Returns:
        ``(scores [N], advantages [N])`` float64 numpy arrays.

    Two prompts (G = 2), one rollout with two answers each, d = 2, one weighting per group:

    >>> rewards = [[[1, 0], [0, 1]], [[1, 0], [1, 0]], [[0.5, 0.5], [0, 0]], [[0, 0], [0, 0]]]
    >>> valid = [[True, True], [True, True], [True, False], [False, False]]
    >>> weights = [[[0.25, 0.75]], [[0.5, 0.5]]]
    >>> scores, adv = vpo_advantages_reference(rewards, 2, weights, valid)
    >>> scores.tolist()  # max over answers of w.r: 0.75, 0.25; then 0.5, and 0 for no answer
    [0.75, 0.25, 0.5, 0.0]
    >>> adv.round(6).tolist()  # (s - mean) / (population std + eps)
    [0.999996, -0.999996, 0.999996, -0.999996]

    The same numbers as the vectorised estimator, fed the weightings it draws:

    >>> from vpo.core import EstimatorConfig, SimplexSampler, compute_advantages
    >>> r = np.random.default_rng(0).uniform(size=(8, 3, 4))  # N = 8, m = 3, d = 4
    >>> w = SimplexSampler(num_weightings=16, seed=0).sample(2, 4)  # P = 2 groups of G = 4
    >>> fast = compute_advantages("vpo", r, group_size=4, seed=0,
    ...                           config=EstimatorConfig(num_weightings=16, compute_dtype="float64"))
    >>> bool(np.allclose(vpo_advantages_reference(r, 4, w)[1], fast.advantages, rtol=0, atol=1e-12))
    True
    """
    r = np.asarray(rewards, dtype=np.float64)
    n_rollouts, m, _ = r.shape
    ok = np.ones((n_rollouts, m), bool) if valid is None else np.asarray(valid, bool)
    ok = ok & np.isfinite(r).all(-1)  # a NaN/inf reward makes that answer invalid
    contiguous = isinstance(groups, (int, np.integer))  # G consecutive rollouts, or one id each
    ids = np.arange(n_rollouts) // groups if contiguous else np.asarray(groups).tolist()
    members: dict = {}
    for n, g in enumerate(ids):
        members.setdefault(g, []).append(n)  # groups in order of first appearance
    scores, advantages = np.zeros(n_rollouts), np.zeros(n_rollouts)
    for p, rows in enumerate(members.values()):
        w = np.asarray(weights[p], dtype=np.float64)  # [K, d], shared by every rollout of the group
        for n in rows:
            answers = [r[n, i] for i in range(m) if ok[n, i]]
            if not answers:  # no valid answer: a fixed score, still part of the group's statistics
                scores[n] = invalid_score
                continue
            # the set score: mean over the K weightings of the best answer under that weighting
            scores[n] = np.mean([max(w_k @ a for a in answers) for w_k in w])
        s = scores[rows]
        std = s.std()  # population std: divide by G
        advantages[rows] = 0.0 if std < eps else (s - s.mean()) / (std + eps)
    return scores, advantages
