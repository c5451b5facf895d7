"""OpenEvolve bridge (``vpo evolve``): evolutionary program search where one LLM call yields m programs.

A VPO policy writes m different programs per call; OpenEvolve asks for one per iteration. This
package drives OpenEvolve's own components (database, prompt sampler, LLM ensemble, evaluator)
with its own loop so that each of the m programs enters the database as its own candidate, and
compares models at a matched answer budget. The evaluator's metric dict is the reward vector;
``combined_score = w*^T r`` is OpenEvolve's fitness; a candidate solves its problem when every
component is >= 1 (docs/method.md §6). docs/evolve.md describes the loop, the budget, the
failures and the code layout.

Modules: ``config`` (model, problem, settings, :class:`EvolveError`), ``clients`` (LLM clients,
endpoint check), ``problems`` (problems, splitting completions), ``worker`` (evaluation in a
killable process), ``selection`` (per-island weightings, Pareto archive), ``run`` (one model on one problem), ``report`` (models side by side, plot),
``cli`` (``vpo evolve``). Importing the package is light: openevolve and torch load when a run starts.
"""

from vpo.integrations.evolve.clients import LocalHFClient, MutationLLM, ScriptedLLM, TaskPromptClient, check_endpoint
from vpo.integrations.evolve.config import (
    SOLVED_AT,
    EvolveError,
    EvolveModel,
    EvolveProblem,
    EvolveSettings,
)
from vpo.integrations.evolve.problems import (
    problem_from_dir,
    problems_from_task,
    split_programs,
)
from vpo.integrations.evolve.report import plot_report, run_comparison
from vpo.integrations.evolve.run import evolve_problem
from vpo.integrations.evolve.selection import ParetoArchive, VPOSelector, coverage, island_weights
from vpo.integrations.evolve.worker import shim_evaluate

__all__ = [
    "SOLVED_AT",
    "EvolveError",
    "EvolveModel",
    "EvolveProblem",
    "EvolveSettings",
    "LocalHFClient",
    "MutationLLM",
    "ParetoArchive",
    "ScriptedLLM",
    "TaskPromptClient",
    "VPOSelector",
    "check_endpoint",
    "coverage",
    "evolve_problem",
    "island_weights",
    "plot_report",
    "problem_from_dir",
    "problems_from_task",
    "run_comparison",
    "shim_evaluate",
    "split_programs",
]
