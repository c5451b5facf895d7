"""What an evolve run is given: the model, the problem, the search settings, and the error type.

Plain dataclasses that check their fields on construction (a ``ValueError`` naming the field), so
a bad spec fails before any process starts. ``"module:attr"`` strings (client factories, task
factories) are resolved by :func:`import_attr`. No heavy imports here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vpo._util import positive_int
from vpo.errors import VPOError

SOLVED_AT = 1.0 - 1e-9
"""A candidate solves its problem when every reward component is at least this."""


class EvolveError(VPOError, RuntimeError):
    """A failure whose message says what went wrong and what to do (the CLI prints it as is).

    A :class:`~vpo.errors.VPOError`, and still a ``RuntimeError`` for code that catches that."""


@dataclass
class EvolveModel:
    """One model to evolve with: an OpenAI-compatible endpoint or an in-process client."""

    name: str
    """Label in reports, plots and output folders."""
    num_answers: int = 1
    """m: programs the model writes per call (1 = a plain single-answer model)."""
    api_base: str | None = None
    """OpenAI-compatible endpoint, e.g. ``http://127.0.0.1:8000/v1`` (vLLM's server)."""
    model: str | None = None
    """Model id the endpoint serves (default: ``name``)."""
    api_key: str = "EMPTY"
    """API key sent to the endpoint (vLLM accepts any unless started with ``--api-key``)."""
    client: Any = None
    """In-process client instead of ``api_base``: an object with ``async generate_with_context``,
    a factory, or ``"module:attr"`` (called with ``client_options``)."""
    client_options: dict = field(default_factory=dict)
    """Keyword arguments for the ``client`` factory."""
    temperature: float = 1.0
    """Sampling temperature (paper: 1.0)."""
    max_tokens: int = 4096
    """Completion length limit per call."""
    timeout: float = 300.0
    """Seconds one endpoint request may take."""
    retries: int = 1
    """Endpoint retries per call (OpenEvolve's OpenAILLM) before the call counts as failed."""

    def __post_init__(self) -> None:
        if not self.name or any(c in self.name for c in "/\\"):
            raise ValueError(f"model name must be a non-empty label without slashes, got {self.name!r}")
        positive_int(self.num_answers, "answers (m)", f"model {self.name!r}")
        if (self.api_base is None) == (self.client is None):
            raise ValueError(
                f"model {self.name!r}: give exactly one of api_base (an OpenAI-compatible endpoint) "
                "or client (an in-process client)"
            )


@dataclass
class EvolveProblem:
    """One problem: a starting program and a way to score programs into a reward vector."""

    name: str
    """Label in reports and output folders."""
    initial_program: str
    """Source code of the starting program."""
    evaluator: str | None = None
    """Path of an OpenEvolve evaluation file (``evaluate(program_path) -> dict``)."""
    task: str | None = None
    """Or a vpo task name (``vpo.tasks.get``) or ``"module:attr"`` factory, scoring ``example``."""
    task_options: dict = field(default_factory=dict)
    """Options for the task factory."""
    example: dict | None = None
    """The task example this problem is (with ``task``)."""
    objectives: list[str] | None = None
    """Metric names forming the reward vector, in order (task: its objectives; evaluator: default
    = the numeric metrics of the initial program, sorted)."""
    target_weights: list[float] | None = None
    """``w*`` over the objectives (default uniform)."""
    description: str = ""
    """Problem statement put in the system message."""

    def __post_init__(self) -> None:
        if (self.evaluator is None) == (self.task is None):
            raise ValueError(f"problem {self.name!r}: give exactly one of evaluator (a file) or task (a vpo task)")
        if self.task is not None and self.example is None:
            raise ValueError(f"problem {self.name!r}: a task problem needs its example")
        if self.evaluator is not None and not Path(self.evaluator).is_file():
            raise ValueError(f"problem {self.name!r}: evaluator file {self.evaluator} does not exist")


@dataclass
class EvolveSettings:
    """How long and how to search."""

    budget: int = 40
    """Budget per (model, problem) run, in ``budget_unit``s."""
    budget_unit: str = "candidates"
    """'candidates' (matched answer budget, docs/method.md §6) or 'calls' (LLM calls = OpenEvolve iterations)."""
    eval_timeout: float = 30.0
    """Seconds one evaluation may take before the worker is killed and the candidate scores 0."""
    num_islands: int = 2
    """OpenEvolve islands."""
    population_size: int = 200
    """OpenEvolve population limit per database."""
    archive_size: int = 50
    """OpenEvolve elite archive size."""
    migration_interval: int = 20
    """Island generations between migrations."""
    checkpoint_interval: int = 10
    """Calls between checkpoints (a final one is always written)."""
    max_llm_failures: int = 3
    """Consecutive failed LLM calls that stop a run (with a checkpoint)."""
    max_code_length: int = 20_000
    """Longer candidate programs are dropped (OpenEvolve's rule)."""
    seed: int = 0
    """Seeds OpenEvolve's sampling (``random``, numpy) and the LLM requests."""
    language: str = "python"
    """Language of the programs (prompt and code fences)."""
    stop_when_solved: bool = False
    """End a run at its first solving candidate (curves then stay flat)."""
    selection: str = "vpo"
    """'vpo': each island ranks by its own ``w_i ~ Dir(weight_alpha)`` and a Pareto archive feeds
    parents and inspirations; 'default': OpenEvolve's selection on ``w*^T r`` (docs/evolve.md)."""
    weight_alpha: float = 1.0
    """Concentration of the islands' weightings (``selection='vpo'``; 1 = uniform on the simplex)."""
    archive_parent_ratio: float = 0.25
    """Probability that a call's parent is a uniformly drawn Pareto archive member (``selection='vpo'``)."""
    archive_inspirations: int = 2
    """Pareto archive members shown as inspirations per call, besides the island's (``selection='vpo'``)."""
    eval_workers: int | None = None
    """Evaluation worker processes, i.e. a call's candidates evaluated at once; default
    ``min(m, usable CPU cores)`` (the cores the sandbox's default concurrency uses). 1 = sequential."""

    def __post_init__(self) -> None:
        if self.budget_unit not in ("candidates", "calls"):
            raise ValueError(f"budget_unit must be 'candidates' or 'calls', got {self.budget_unit!r}")
        for name in ("budget", "num_islands", "checkpoint_interval", "max_llm_failures"):
            positive_int(getattr(self, name), name)
        if self.selection not in ("default", "vpo"):
            raise ValueError(f"selection must be 'vpo' or 'default', got {self.selection!r}")
        if not (self.weight_alpha > 0):
            raise ValueError(f"weight_alpha must be > 0, got {self.weight_alpha!r}")
        if not (0 <= self.archive_parent_ratio <= 1):
            raise ValueError(f"archive_parent_ratio must be in [0, 1], got {self.archive_parent_ratio!r}")
        positive_int(self.archive_inspirations, "archive_inspirations", minimum=0)
        if self.eval_workers is not None and (
            not isinstance(self.eval_workers, int) or isinstance(self.eval_workers, bool) or self.eval_workers < 1
        ):
            raise ValueError(f"eval_workers must be None or an integer >= 1, got {self.eval_workers!r}")
        if not (self.eval_timeout > 0):
            raise ValueError(f"eval_timeout must be > 0 seconds, got {self.eval_timeout!r}")


def import_attr(spec: str, what: str):
    """The attribute a ``"package.module:attribute"`` string names; ``ValueError`` saying why not."""
    import importlib

    if ":" not in spec:
        raise ValueError(f"{what} {spec!r} must look like 'package.module:attribute'")
    mod, attr = spec.split(":", 1)
    try:
        return getattr(importlib.import_module(mod), attr)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"{what} {spec!r} cannot be imported: {e}") from e
