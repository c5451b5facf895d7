"""Test-time search evaluation: candidate pools, search metrics, reports (``vpo eval``/``vpo compare``).

Python API (see docs/eval.md)::

    from vpo.search import generate_pool, evaluate_pool, write_report, load_pool

    pool = generate_pool("runs/vpo-maze", "maze", num_answers=3, n_rollouts=10, num_prompts=100,
                         out_dir="runs/eval/vpo/pool")                  # -> Pool [N, m, d]
    results = {"vpo": evaluate_pool(pool, ks=(1, 3, 5, 10, 30), seeds=range(5))}
    write_report(results, "runs/eval/vpo")                              # JSON, markdown, PNGs

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
