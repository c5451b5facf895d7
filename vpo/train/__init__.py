"""Trainer adapters. ``VPOConfig``/``VPOTrainer`` extend TRL's GRPO pair (imported lazily, so
``vpo.train.tiny`` works without TRL installed)."""

from __future__ import annotations

__all__ = ["VPOConfig", "VPOTrainer", "build_tiny_model"]


def __getattr__(name):
    if name == "VPOConfig":
        from vpo.train.config import VPOConfig

        return VPOConfig
    if name == "VPOTrainer":
        from vpo.train.trainer import VPOTrainer

        return VPOTrainer
    if name == "build_tiny_model":
        from vpo.train.tiny import build_tiny_model

        return build_tiny_model
    raise AttributeError(name)
