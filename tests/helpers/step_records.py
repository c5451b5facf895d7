"""A step-search record (one prompt's answers and tokens), synthetic, for report tests without a model."""

from __future__ import annotations


def search_record(pid, answers, budget=100) -> dict:
    """``answers``: ``(reward, tokens_at)`` pairs; each answer's reward vector is ``[reward, reward]``."""
    return {
        "prompt_id": pid,
        "tokens_generated": budget,
        "calls": 3,
        "answers": [
            {"text": "a", "reward": [r, r], "valid": True, "tokens_at": t, "tokens_per_answer": 10.0}
            for r, t in answers
        ],
    }
