"""One VPOConfig builder for the tiny-model training tests (test_trainer, test_search_callback,
test_wiring), so the shared CPU-run defaults live in one place; each test file passes its own
settings (estimator, sizes, schedules) explicitly as overrides."""

from __future__ import annotations

from pathlib import Path

from vpo.train import VPOConfig

TINY_DEFAULTS = dict(
    num_generations=4,
    per_device_train_batch_size=8,
    max_completion_length=12,
    max_steps=2,
    learning_rate=5e-2,
    beta=0.0,
    logging_steps=1,
    report_to="none",
    save_strategy="no",
    use_cpu=True,
    seed=0,
    num_weightings=16,
    disable_tqdm=True,
)


def tiny_vpo_args(output_dir: str | Path, **overrides) -> VPOConfig:
    """VPOConfig writing to ``output_dir`` with TINY_DEFAULTS, each overridden by ``overrides``."""
    return VPOConfig(output_dir=str(output_dir), **{**TINY_DEFAULTS, **overrides})
