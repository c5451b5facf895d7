"""Pure numpy/torch core: simplex samplers, the VPO estimator and its baselines, answer format.

Importable without transformers/trl/verl.
"""

from vpo.core.answers import (
    answer_instruction,
    dedup,
    dedup_rows,
    normalize_text,
    pad_rows,
    parse_answers,
    stack_rows,
)
from vpo.core.estimators import (
    ESTIMATORS,
    AdvantageResult,
    EstimatorConfig,
    compute_advantages,
    get_estimator,
    list_estimators,
    list_set_objectives,
    register_set_objective,
    row_weights,
    set_score,
    unregister_set_objective,
    vpo_estimator,
)
from vpo.core.estimator_base import group_index_from
from vpo.core.reference import vpo_advantages_reference
from vpo.core.weights import SimplexSampler, check_simplex, dirichlet, fixed_weights, spacings_to_simplex

__all__ = [
    "AdvantageResult",
    "ESTIMATORS",
    "EstimatorConfig",
    "SimplexSampler",
    "answer_instruction",
    "check_simplex",
    "compute_advantages",
    "dedup",
    "dedup_rows",
    "dirichlet",
    "fixed_weights",
    "get_estimator",
    "group_index_from",
    "list_estimators",
    "list_set_objectives",
    "normalize_text",
    "pad_rows",
    "parse_answers",
    "register_set_objective",
    "row_weights",
    "set_score",
    "spacings_to_simplex",
    "stack_rows",
    "unregister_set_objective",
    "vpo_advantages_reference",
    "vpo_estimator",
]
