"""Test-time search evaluation: candidate pools, search metrics, reports (``vpo eval``/``vpo compare``).

Python API (see docs/eval.md)::

    from vpo.search import generate_pool, evaluate_pool, write_report, load_pool

    pool = generate_pool("runs/vpo-maze", "maze", num_answers=3, n_rollouts=10, num_prompts=100,
                         out_dir="runs/eval/vpo/pool")                  # -> Pool [N, m, d]
    results = {"vpo": evaluate_pool(pool, ks=(1, 3, 5, 10, 30), seeds=range(5))}
    write_report(results, "runs/eval/vpo")                              # JSON, markdown, PNGs

Where things live (a new metric of a pool goes in :mod:`metrics` if every answer counts, in
:mod:`poolstats` if failing answers must not win it, and is reported by :mod:`report`):

* generating pools: :mod:`backends` (transformers, vLLM, OpenAI-compatible), :mod:`generate`,
  :mod:`shared_prefix` (each prompt prefilled once), :mod:`fast_decode` (the lean CPU sampler of
  Llama-family models, also the CPU training step's rollouts), :mod:`pools` (on disk, resumable);
* metrics of a pool: :mod:`at_k` (best@k, pass@k estimators), :mod:`metrics` (:func:`evaluate`,
  E_w[best@k], diversity, Pareto coverage), :mod:`poolstats` (completed diversity, union coverage,
  the reference's pool statistics), :mod:`set_scores` (set objectives as diagnostics),
  :mod:`constraints`, :mod:`selection` (imperfect verifiers), :mod:`embed` (text diversity),
  :mod:`failures` (where answers were lost);
* comparing runs: :mod:`paired` (paired differences), :mod:`intervals` (replicate intervals);
* search beyond best-of-n: the wing :mod:`step` (:mod:`vpo.search.step`): ``step.search`` (bon,
  beam, tree at matched tokens), ``step.score`` (step scorers), ``step.run``, ``step.report``,
  ``step.cli``;
* output and commands: :mod:`report`, :mod:`plots`, :mod:`cli` (``vpo eval``/``vpo compare``),
  :mod:`evalsetup` (what both ``vpo eval`` paths set up: checkpoint settings, m, the generation
  flags), :mod:`check` (``vpo check``).

Importing this package is light: numpy only; transformers/torch/vLLM load when a backend is built,
matplotlib when a plot is drawn.
"""

from vpo.search.backends import (
    EndpointError,
    Generation,
    ModelLoadError,
    OpenAIGenerator,
    PoolConfig,
    TransformersGenerator,
    VLLMGenerator,
    make_generator,
)
from vpo.search.generate import generate_pool
from vpo.search.metrics import EvalConfig, MetricsError, evaluate
from vpo.search.pools import Pool, PoolError, PoolWriter, evaluate_pool, load_pool
from vpo.search.report import ReportError, load_report, markdown_report, write_report

__all__ = [
    "EndpointError",
    "EvalConfig",
    "Generation",
    "MetricsError",
    "ModelLoadError",
    "OpenAIGenerator",
    "Pool",
    "PoolConfig",
    "PoolError",
    "PoolWriter",
    "ReportError",
    "TransformersGenerator",
    "VLLMGenerator",
    "evaluate",
    "evaluate_pool",
    "generate_pool",
    "load_pool",
    "load_report",
    "make_generator",
    "markdown_report",
    "write_report",
]
