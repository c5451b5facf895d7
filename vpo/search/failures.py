"""Where a pool's answers were lost: every answer slot is valid or lost for one reason, counted.

A pool of N rollouts with m answer slots each has ``N * m`` slots. Each slot is, in this order:

* ``valid``: an answer that was parsed, kept and scored;
* ``no_tags``: its rollout wrote no answer tag at all (the format was ignored);
* ``malformed``: its rollout wrote tags but no answer could be parsed from them (unclosed, empty);
* ``fewer_than_m``: its rollout parsed some answers, but fewer than m;
* ``duplicates``: a repeat of another answer of the same rollout, dropped before scoring;
* ``scored_invalid``: kept, but the scorer refused it (a scorer error, a NaN/inf reward, or an answer
  the task itself scores as invalid).

The six counts add up to ``N * m``; shares divide by it. Beside them, ``truncated`` counts rollouts
that used the whole generation budget (``num_tokens >= max_new_tokens``): a cause, not a category, so
it overlaps the others. Parsing is the library's answer tags (``vpo.core.answers``); for a task with a
format of its own, a rollout counts as parsed as far as the task kept answers from it. Needs the
pool's completion texts (pools saved by ``vpo eval`` keep them); ``None`` without them.
"""

from __future__ import annotations

import numpy as np

from vpo.core.answers import parse_answers

__all__ = ["FAILURE_TYPES", "failure_types"]

FAILURE_TYPES = ("valid", "no_tags", "malformed", "fewer_than_m", "duplicates", "scored_invalid")
FAILURE_WORDS = {
    "valid": "valid",
    "no_tags": "no answer tags",
    "malformed": "tags, nothing parsed",
    "fewer_than_m": "fewer than m",
    "duplicates": "duplicates",
    "scored_invalid": "scored invalid",
}
"""How reports name each failure type: the column headings of "Where answers were lost" and the words
of ``vpo check``'s notes."""


def failure_types(pool) -> dict | None:
    """Counts and shares of :data:`FAILURE_TYPES` over ``pool``'s answer slots, and truncated rollouts."""
    if pool.completions is None or pool.answers is None:
        return None
    n_rollouts, m = pool.valid.shape
    counts = dict.fromkeys(FAILURE_TYPES, 0)
    tag = "<answer" if m > 1 else "<answer>"
    for text, kept, valid in zip(pool.completions, pool.answers, pool.valid):
        # a task with its own format (the reference maze's <route_i>) parses more than the library's tags
        parsed = max(len(parse_answers(text, m)) if text else 0, len(kept))
        n_valid = int(valid.sum())
        counts["valid"] += n_valid
        if parsed == 0:
            counts["no_tags" if tag not in (text or "") else "malformed"] += m
            continue
        counts["fewer_than_m"] += m - parsed
        counts["duplicates"] += parsed - len(kept)
        counts["scored_invalid"] += len(kept) - n_valid
    slots = n_rollouts * m
    limit = pool.meta.get("max_new_tokens")
    truncated = None
    if pool.num_tokens is not None and limit:
        nt = np.asarray(pool.num_tokens, dtype=float)
        truncated = int(np.sum(np.isfinite(nt) & (nt >= float(limit))))
    return {
        "slots": slots,
        "rollouts": n_rollouts,
        "counts": counts,
        "shares": {k: v / slots if slots else float("nan") for k, v in counts.items()},
        "truncated_rollouts": truncated,
        "truncated_share": None if truncated is None else truncated / max(n_rollouts, 1),
    }
