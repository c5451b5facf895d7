"""``VPOConfig``: TRL's ``GRPOConfig`` plus the fields VPO and its baselines need.

Every field added here has help text naming what it does and where it comes from. Everything else
(learning rate, ``beta`` for the k3 KL, ``epsilon`` clip, ``loss_type``, ``num_generations`` G,
``use_vllm``, ``report_to`` ...) is TRL's own and behaves as in TRL. One default differs: ``bf16``
left unset is True where a bf16-capable accelerator is in use (TRL's own default) and on a CPU with
bf16 units under ``use_cpu``, and False on other CPUs (TRL's would autocast to bf16 on any CPU with
``use_cpu``, slower where bf16 is emulated, and refuse to start without it).

Paper settings (docs/method.md §3) live in the shipped YAML configs (``vpo/configs/*.yaml``), not in these
defaults, so that a config file states what it reproduces.

The weighting settings (``num_weightings``, ``weight_alpha``, ``weight_sampler``, ``weight_seed``,
``invalid_score``, ``strict_rewards``, ``compute_dtype``) have the same names as in
:class:`vpo.core.EstimatorConfig`, ``vpo eval`` and the veRL score function. The former name
``invalid_answer_score`` is refused, with an error naming ``invalid_score``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import warnings
from dataclasses import dataclass, field
from typing import Any

from transformers.utils import is_torch_bf16_gpu_available, is_torch_xla_available
from trl import GRPOConfig

from vpo._util import field_docs, positive_int
from vpo.core.estimators import ESTIMATORS, EstimatorConfig, get_estimator
from vpo.errors import UserError

_CHECKPOINTING_RENAMES = r"`(is_)?gradient_checkpointing(_enable|_disable)?` is deprecated"


class TrainerSetupError(UserError, ValueError):
    """A setting that does not fit the task or the trainer (e.g. ``reward_weights`` of the wrong
    length): a user mistake (one line from the CLI) and a ``ValueError`` as before."""


def silence_checkpointing_renames() -> None:
    """Hide transformers' four "`gradient_checkpointing...` is deprecated" FutureWarnings: TRL 1.16 reads
    ``gradient_checkpointing`` and calls the old methods, so the user can do nothing about them. Narrow:
    only those messages, only FutureWarning."""
    warnings.filterwarnings("ignore", message=_CHECKPOINTING_RENAMES, category=FutureWarning)


silence_checkpointing_renames()

# estimators that are TRL's own advantage code, reachable for side-by-side comparison
TRL_NATIVE_ESTIMATORS = {
    "trl_grpo": "sum_then_normalize",
    "trl_gdpo": "normalize_then_sum",
}


def _shared(name: str):
    """A field of :class:`vpo.core.EstimatorConfig` that VPOConfig repeats under the same name: its default
    and its help (the attribute docstring) are EstimatorConfig's, so they are written once."""
    f = {f.name: f for f in dataclasses.fields(EstimatorConfig)}[name]
    return field(default=f.default, metadata={"help": field_docs(EstimatorConfig)[name]})


SHARED_WITH_ESTIMATOR = (
    "num_weightings",
    "weight_alpha",
    "weight_sampler",
    "invalid_score",
    "strict_rewards",
    "max_at_k",
    "compute_dtype",
    "gdpo_weighting",
    "gdpo_whitening",
    "gdpo_preset",
    "weight_schedule",
)
"""The estimator settings VPOConfig takes from :class:`vpo.core.EstimatorConfig` (same name, default, help)."""


@dataclass
class VPOConfig(GRPOConfig):
    r"""Configuration of :class:`vpo.train.VPOTrainer`: TRL's ``GRPOConfig`` plus vpo's fields, in
    sections (as TRL groups its own): the estimator; VPO's weightings; rewards; the baselines' own
    settings and the numerics; the task and its data; speed; logging; held-out search evaluation
    during training. Each field's ``help`` is what ``vpo train --help`` prints."""

    # -- the estimator: which advantage, how many answers per rollout ----------------------------
    estimator: str = field(
        default="vpo",
        metadata={
            "help": "Advantage estimator: 'vpo' (Bahlous-Boldi et al. 2026), 'grpo', 'gdpo' (arXiv 2601.05242), "
            "'multi_rlvr' (arXiv 2603.24844), 'random_weight', 'goal_conditioned', 'max_at_k' (arXiv 2510.23393), "
            "'maxrl' (arXiv 2602.02710), 'union_coverage', any set objective registered with "
            "vpo.core.register_set_objective (see --import), or TRL's own 'trl_grpo' / 'trl_gdpo' (multi_objective_aggregation)."
        },
    )
    num_answers: int | None = field(
        default=None,
        metadata={
            "help": "m, answers per rollout (VPO paper: 3). Default: 3 for multi-answer estimators (vpo, multi_rlvr), "
            "1 for single-answer ones. Single-answer estimators require 1."
        },
    )
    # -- VPO's weightings (named as in vpo.core.EstimatorConfig, vpo eval and veRL's score) ------
    num_weightings: int = _shared("num_weightings")
    weight_alpha: float = _shared("weight_alpha")
    weight_sampler: str = _shared("weight_sampler")
    weight_seed: int | None = field(
        default=None,
        metadata={"help": "Seed of the weight sampler's generator (default: `seed`). Saved in every checkpoint."},
    )
    # -- rewards: invalid answers, Max@k, duplicates, strictness, w*, no-signal stop -------------
    invalid_score: float = _shared("invalid_score")
    max_at_k: int | None = _shared("max_at_k")
    dedup_answers: bool = field(
        default=True,
        metadata={"help": "Drop repeated answers within a rollout (by the task's canonical form) before scoring."},
    )
    strict_rewards: bool = _shared("strict_rewards")
    reward_weights: list[float] | None = field(
        default=None,
        metadata={
            "help": "TRL's weights of the reward functions / objectives. In vpo they set w* (normalised to sum to 1) "
            "unless the task or target_weights states w*, which they must then be proportional to; TRL's logged "
            "'reward' uses them as given. Unset: w* (docs/training.md#reward_weights-and-w)."
        },
    )
    zero_signal_patience: int = field(
        default=20,
        metadata={
            "help": "Stop with an error after this many training batches in a row without learning signal (no "
            "parsable answer, no valid answer, or no finite reward: every advantage is 0); each such batch is also "
            "counted in vpo/zero_signal_batches and warned about. 0 disables the error."
        },
    )
    # -- baselines' own settings (GDPO, random-weight GRPO) and the numerics ---------------------
    gdpo_weighting: str = _shared("gdpo_weighting")
    gdpo_whitening: str = _shared("gdpo_whitening")
    gdpo_preset: str | None = _shared("gdpo_preset")
    weight_schedule: str = _shared("weight_schedule")
    compute_dtype: str = _shared("compute_dtype")
    # -- the task and its data -------------------------------------------------------------------
    task: str | None = field(
        default=None,
        metadata={"help": "Name of a registered vpo task (maze, musique, eureqa, toolrl, code, ...) to train on."},
    )
    task_options: dict[str, Any] | str | None = field(
        default=None,
        metadata={"help": "Keyword options of the task constructor, as a dict or a JSON string."},
    )
    train_size: int | None = field(
        default=None,
        metadata={"help": "Number of training examples to load from the task's train split (default: all)."},
    )
    eval_size: int | None = field(
        default=None,
        metadata={"help": "Number of examples from the task's test split used as eval_dataset (default: none)."},
    )
    data_seed_task: int | None = field(
        default=None,
        metadata={
            "help": "Seed passed to task.load() for subsampling/generating the splits (default: the task's own)."
        },
    )
    constraints: list[str] | None = field(
        default=None,
        metadata={
            "help": "Hard constraints on the reward vector, e.g. ['avoid_lava>=1'] (OBJECTIVE>=X, OBJECTIVE<=X, or "
            "module:function, a predicate rewards[..., d] -> bool): a violating answer counts as invalid, so it can "
            "never win a rollout's set max (vpo.tasks.constrained; docs/constraints.md)."
        },
    )
    # -- speed -----------------------------------------------------------------------------------
    shared_prompt_forward: bool | None = field(
        default=None,
        metadata={
            "help": "Run each distinct prompt of a batch through the model once when computing log-probabilities "
            "(policy and reference), repeating its key/value cache to the G rollouts that share it; equal to TRL's "
            "per-row forward up to float rounding, cheaper when prompts are long next to completions; activation "
            "checkpointing is off for that pass. Unset: on when training on a CPU with a model it runs exactly "
            "(docs/performance.md)."
        },
    )
    fast_generation: bool | None = field(
        default=None,
        metadata={
            "help": "Rollouts by vpo's lean CPU sampler (vpo/search/fast_decode.py: a weight snapshot in the step's "
            "precision refreshed once per step, a preallocated cache, one uniform draw per token) instead of "
            "transformers' generate. Unset: on when training on a CPU, without vLLM or tools, for Llama, Mistral, "
            "Qwen2 and Qwen3 models and sampling by temperature/top-k/top-p; true refuses to start where it cannot "
            "run; false keeps generate (docs/performance.md)."
        },
    )
    # -- logging ---------------------------------------------------------------------------------
    log_pool_stats: bool = field(
        default=True,
        metadata={
            "help": "Log the VPO reference's pool statistics of every training batch as vpo/pool/... (docs/eval.md)."
        },
    )
    # -- held-out search evaluation during training (vpo.train.callbacks) ------------------------
    search_eval_steps: int = field(
        default=0,
        metadata={
            "help": "Held-out search evaluation at every global step that is a multiple of N (kept across resumes): "
            "best@k at a matched answer budget, pass@k and diversity, logged as search/... (docs/training.md). 0 = off."
        },
    )
    search_eval_examples: int = field(
        default=16, metadata={"help": "Prompts of search_eval_split per search evaluation."}
    )
    search_eval_budget: int = field(
        default=12,
        metadata={"help": "Answer slots per prompt in a search evaluation (ceil(budget / m) rollouts of m answers)."},
    )
    search_eval_temperature: float = field(
        default=1.0, metadata={"help": "Sampling temperature of search evaluation (0 = greedy)."}
    )
    search_eval_split: str = field(
        default="test", metadata={"help": "Task split the search evaluation samples prompts from."}
    )
    search_eval_max_new_tokens: int | None = field(
        default=None,
        metadata={"help": "Completion length limit of search evaluation (default: max_completion_length)."},
    )
    search_eval_seed: int | None = field(
        default=None,
        metadata={"help": "Sampling seed of search evaluation, the same at every evaluation (default: seed)."},
    )

    def __post_init__(self):
        if isinstance(self.task_options, str):
            try:
                self.task_options = json.loads(self.task_options) if self.task_options.strip() else None
            except json.JSONDecodeError as e:
                raise ValueError(f"task_options must be a JSON object, got {self.task_options!r}: {e}") from None
        if isinstance(self.constraints, str):
            self.constraints = [self.constraints]
        if self.estimator not in ESTIMATORS and self.estimator not in TRL_NATIVE_ESTIMATORS:
            raise ValueError(
                f"unknown estimator {self.estimator!r}; choose one of "
                f"{', '.join(sorted(ESTIMATORS) + sorted(TRL_NATIVE_ESTIMATORS))}"
            )
        multi = self.is_multi_answer_estimator
        if self.num_answers is None:
            self.num_answers = 3 if multi else 1
        positive_int(self.num_answers, "num_answers (m)")
        if not multi and self.num_answers != 1:
            raise ValueError(
                f"estimator {self.estimator!r} scores one answer per rollout, but num_answers={self.num_answers}; "
                "set num_answers: 1, or use a multi-answer estimator (vpo, multi_rlvr)"
            )
        if self.estimator == "multi_rlvr" and self.num_answers == 1:
            raise ValueError("multi_rlvr with num_answers=1 is plain GRPO; use estimator: grpo, or num_answers > 1")
        est = self.estimator_config()  # the one validation of the estimator settings
        self.gdpo_weighting, self.gdpo_whitening = est.gdpo_weighting, est.gdpo_whitening  # gdpo_preset applied
        if (
            isinstance(self.zero_signal_patience, bool)
            or not isinstance(self.zero_signal_patience, int)
            or self.zero_signal_patience < 0
        ):
            raise ValueError(
                f"zero_signal_patience must be an integer >= 0 (0: never stop), got {self.zero_signal_patience!r}"
            )
        if self.estimator in TRL_NATIVE_ESTIMATORS:
            self.multi_objective_aggregation = TRL_NATIVE_ESTIMATORS[self.estimator]
        if self.num_generations is not None and self.num_generations < 2:
            raise ValueError(
                f"num_generations (G) must be >= 2: advantages are normalised within a group; got {self.num_generations}"
            )
        validate_search_eval_args(self)
        if self.bf16 is None and not self.fp16:
            # TRL resolves an unset bf16 to True everywhere: on a CPU that is bf16 autocast with use_cpu,
            # an error without it, and slower than float32 on a CPU without bf16 units
            self.bf16 = default_bf16(self.use_cpu)
        silence_checkpointing_renames()  # again here: a caller's warning filters may have been reset since import
        super().__post_init__()

    def estimator_config(self) -> EstimatorConfig:
        """The :class:`vpo.core.EstimatorConfig` of these settings (the same field names)."""
        return EstimatorConfig(
            num_weightings=self.num_weightings,
            weight_alpha=self.weight_alpha,
            weight_sampler=self.weight_sampler,
            invalid_score=self.invalid_score,
            strict_rewards=self.strict_rewards,
            max_at_k=self.max_at_k,
            compute_dtype=self.compute_dtype,
            gdpo_weighting=self.gdpo_weighting,
            gdpo_whitening=self.gdpo_whitening,
            gdpo_preset=self.gdpo_preset,
            weight_schedule=self.weight_schedule,
        )

    @property
    def is_multi_answer_estimator(self) -> bool:
        if self.estimator in TRL_NATIVE_ESTIMATORS:
            return False
        return get_estimator(self.estimator).multi_answer


def default_bf16(use_cpu: bool) -> bool:
    """What an unset ``bf16`` of :class:`VPOConfig` means: True when training runs on an accelerator
    with bf16 support (a CUDA GPU from Ampere on, an XPU/NPU/MPS device that has it, a TPU), and on a
    CPU (``use_cpu``) with bf16 units (AVX512-BF16 or AMX: bf16 products about 3x faster than float32
    there, docs/performance.md); False on other CPUs, where torch emulates bf16 and it is slower."""
    if use_cpu:
        from vpo.search.fast_decode import bf16_cpu

        return bf16_cpu()
    return bool(is_torch_bf16_gpu_available() or is_torch_xla_available())


def validate_search_eval_args(args) -> None:
    """Check the ``search_eval_*`` settings of a :class:`~vpo.train.VPOConfig` (raises ``ValueError``)."""
    positive_int(args.search_eval_steps, "search_eval_steps", minimum=0, hint=" (0 = off)")
    for name in ("search_eval_examples", "search_eval_budget", "search_eval_max_new_tokens"):
        positive_int(getattr(args, name), name, allow_none=name == "search_eval_max_new_tokens")
    t = args.search_eval_temperature
    if not isinstance(t, (int, float)) or not math.isfinite(t) or t < 0:
        raise ValueError(f"search_eval_temperature must be >= 0 (0 = greedy), got {t!r}")
