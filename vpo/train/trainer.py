"""``VPOTrainer``: TRL's ``GRPOTrainer`` with vector rewards, m answers per rollout, and vpo's estimators.

It overrides two private TRL 1.16 hooks (docs/design.md "Integration points"; the TRL minor version
is pinned and ``tests/train/test_trl_contract.py`` fails loudly when they move):

1. ``_calculate_rewards``: ``Task.score_completions`` turns completions into ``rewards [n, m, d]`` +
   ``valid [n, m]`` (TRL reward functions, one per objective, are wrapped in
   :class:`~vpo.tasks.RewardFunctionsTask`: one scoring path), gathered across processes; TRL gets
   the per-objective mean over each rollout's valid answers, so its own reward logs stay meaningful.
2. ``_generate_and_score_completions``: after TRL's, ``output["advantages"]`` and the advantages TRL
   logged are replaced by ``vpo.core.compute_advantages`` (``trl_grpo``/``trl_gdpo`` keep TRL's own).

Unscored rollouts (an answer the scorer could not score: ``ScoredBatch.unscored``) are dropped, not
read as zeros: :func:`vpo.core.unscored.advantages_without` computes the advantages over the scored
rollouts only (their groups' statistics without them), a dropped rollout's advantage is 0, and its
tokens leave the loss (TRL's loss mask ``tool_mask``, which the loss multiplies in and attention does
not read). ``trl_grpo``/``trl_gdpo`` keep TRL's own baseline, but the dropped rollouts' advantages are
still 0 and masked. ``vpo/unscored_frac`` logs the share of unscored rollouts.

The weight sampler's state is saved in every checkpoint (``vpo_state.pt``) and restored on resume;
goal-conditioned weightings derive from (seed, step, example index), or (seed, example index) with
``weight_schedule="per_row"`` (random_weight too), so processes and resumed runs agree.
"""

from __future__ import annotations

import functools
import json
import os
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import torch
from trl import GRPOTrainer

from vpo.core.answers import answer_instruction
from vpo.core.estimators import row_weights
from vpo.core.no_signal import NoSignalWatch, flat_group_fraction
from vpo.core.unscored import advantages_without
from vpo.core.weights import SimplexSampler, dirichlet
from vpo.errors import UserError
from vpo.tasks import RewardFunctionsTask, Task
from vpo.tasks import get as get_task
from vpo.tasks.base import RewardShapeError
from vpo.tasks.constrained import constrained
from vpo.tasks.registry import load_split
from vpo.train.config import TRL_NATIVE_ESTIMATORS, TrainerSetupError, VPOConfig, silence_checkpointing_renames

silence_checkpointing_renames()

STATE_FILE = "vpo_state.pt"
ARGS_FILE = "vpo_args.json"
"""Saved next to every model and checkpoint: m, the answer format, the estimator and the task, in
plain JSON so that ``vpo eval`` reads them without unpickling ``training_args.bin``."""
EXAMPLE_COLUMN = "vpo_example"
INDEX_COLUMN = "vpo_index"
WEIGHTS_COLUMN = "vpo_weights"


def completion_text(completion) -> str:
    """The assistant text of a TRL completion (a string, or a list of chat messages)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        return "".join(
            m.get("content", "") if isinstance(m.get("content"), str) else ""
            for m in completion
            if isinstance(m, dict) and m.get("role", "assistant") == "assistant"
        )
    return str(completion)


def _objective_function(name: str) -> Callable:
    """A named placeholder reward function: GRPOTrainer needs one per objective for its logs.

    It is never called: ``VPOTrainer._calculate_rewards`` scores with the task instead.
    """

    def f(*args, **kwargs):  # pragma: no cover - guarded
        raise RuntimeError(f"objective {name!r} is scored by VPOTrainer._calculate_rewards, not called directly")

    f.__name__ = name
    return f


class RewardFunctionError(RewardShapeError):
    """A TRL reward function that returned something other than one number per answer (a vector
    per answer, a string): stops training at once instead of counting every answer as invalid."""


def _checked_reward_function(f: Callable) -> Callable:
    """``f`` (a TRL reward function) with its return value checked: one number (or None) per answer.
    A vector per answer, or a string, is refused in one line saying what to do instead."""
    name = getattr(f, "__name__", repr(f))

    @functools.wraps(f)
    def checked(*args, **kwargs):
        out = f(*args, **kwargs)
        n = len(kwargs.get("completions") or kwargs.get("prompts") or [])
        try:
            values = list(out)
        except TypeError:
            raise RewardFunctionError(
                f"reward function {name!r} returned a {type(out).__name__}, not a list of one number per answer"
            ) from None
        for v in values:
            if isinstance(v, (str, bytes)):
                raise RewardFunctionError(
                    f"reward function {name!r} returned a {type(v).__name__} ({v!r}) as a reward: rewards must be "
                    "numbers, one float per answer (None for no reward); convert it with float(...) in the function"
                )
            if np.ndim(v) > 0 and np.size(v) != 1:
                per = int(np.size(v))
                raise RewardFunctionError(
                    f"reward function {name!r} returned {per} values per answer (a vector), but VPOTrainer takes "
                    f"one reward function per objective, each returning one float per answer: split it into {per} "
                    f"functions (reward_funcs=[f_1, ..., f_{per}], objectives=[...] names them), or write a vpo Task "
                    "whose objectives score the answer (docs/tasks.md)"
                )
        if n and len(values) != n and len(values) % n == 0:
            per = len(values) // n
            raise RewardFunctionError(
                f"reward function {name!r} returned {len(values)} values for {n} answers ({per} values per answer, "
                f"flattened): VPOTrainer takes one reward function per objective, each returning one float per answer; "
                f"split it into {per} functions (reward_funcs=[f_1, ..., f_{per}]), or write a vpo Task (docs/tasks.md)"
            )
        return out

    return checked


def build_task_dataset(task: Task, examples: Sequence[dict], m: int, chat: bool):
    """A ``datasets.Dataset`` with the prompt TRL reads plus the example (JSON) and its index."""
    from datasets import Dataset

    rows = []
    for i, ex in enumerate(examples):
        text = task.build_prompt(ex, m)
        prompt: Any = [{"role": "user", "content": text}] if chat else text
        if chat and task.system_prompt:
            prompt = [{"role": "system", "content": task.system_prompt}] + prompt
        rows.append({"prompt": prompt, EXAMPLE_COLUMN: json.dumps(ex), INDEX_COLUMN: i})
    return Dataset.from_list(rows)


_TRL_HOOKS = (
    "_calculate_rewards",
    "_generate_and_score_completions",
    "_compute_loss",
    "_save_checkpoint",
    "_load_optimizer_and_scheduler",
    # shared_prompt_forward: without these two upstream, the option would silently take TRL's path
    "_generate_single_turn",
    "_get_per_token_logps_and_entropies",
)
"""GRPOTrainer methods VPOTrainer overrides or calls into (tests/train/test_trl_contract.py checks
that every private method VPOTrainer overrides is listed)."""


def check_trl_hooks() -> None:
    """Fail loudly, naming the method, if the installed TRL lacks a hook VPOTrainer overrides."""
    import trl

    for name in _TRL_HOOKS:
        if not callable(getattr(GRPOTrainer, name, None)):
            raise RuntimeError(
                f"trl {trl.__version__}: GRPOTrainer.{name} is missing, and VPOTrainer overrides it; "
                'install the TRL version vpo pins (pip install -e ".[trl]" in the vpo clone)'
            )


@dataclass
class _GatheredScores:
    """One batch's scores, gathered from every process: what ``_calculate_rewards`` (called by TRL)
    hands to the advantage step and the logs of ``_generate_and_score_completions``."""

    rewards: torch.Tensor
    """``[N, m, d]`` reward vectors."""
    valid: torch.Tensor
    """``[N, m]`` bool: a real, valid answer."""
    weights: torch.Tensor | None
    """``[N, d]`` the weighting each rollout was given (goal-conditioned / per-row random weights), or None."""
    no_answer: float
    """Completions without a parsed answer."""
    parsed: float
    """Answers parsed, before dedup."""
    duplicates: float
    """Answers dropped as repeats."""
    completions: float
    """Completions scored."""
    violations: float = 0.0
    """Valid answers the ``constraints`` made invalid."""
    score_errors: float = 0.0
    """Answers that could not be scored (unscored, see ``ScoredBatch``)."""
    unscored: torch.Tensor | None = None
    """``[N]`` bool: rollouts with an unscored answer (dropped from the update)."""
    nonfinite: torch.Tensor | None = None
    """``[d]`` unscored answers that were NaN/inf on each objective."""
    nonfinite_answers: float = 0.0
    """Answers unscored because a reward was NaN/inf."""
    dropped: torch.Tensor | None = None
    """``[N]`` bool: rollouts the update left out (set when the advantages are computed; None: none)."""


class StrictRewardsError(UserError):
    """``strict_rewards: true`` stopped training on a NaN/inf reward or a scorer exception."""


class ZeroSignalError(UserError):
    """``zero_signal_patience`` training batches in a row had no valid answer or no finite reward."""


ZERO_SIGNAL_WARN_EVERY = 10
"""At most one zero-signal warning per this many optimizer steps (the counters are logged every step)."""


def _declared_target(task: Task) -> np.ndarray | None:
    """The w* a task states (``target_weights=``, or a task class with its own), looking through
    wrappers such as ``ConstrainedTask`` (``.inner``); ``None`` for the uniform default."""
    while isinstance(getattr(task, "inner", None), Task):
        task = task.inner
    return getattr(task, "declared_target_weights", None)


def _fmt(w) -> str:
    return "[" + ", ".join(f"{float(x):.4g}" for x in w) + "]"


def _checked_objectives(task: Task, args: VPOConfig) -> tuple[list[str], np.ndarray, list[float]]:
    """The task's objective names, w*, and TRL's ``reward_weights``, checked.

    TRL's ``reward_weights`` (when given) become w*, normalised to sum to 1, unless the task states
    its own w* (a task class's, or ``target_weights=``): then they must be proportional to it. TRL's
    weights stay as given for TRL's own logged ``reward`` and the ``trl_*`` estimators; unset, they
    are w*. ``args`` is not modified."""
    names = list(task.objectives)
    w = np.asarray(task.target_weights, dtype=np.float64)
    if len(names) < 1:
        raise ValueError("the task has no objectives")
    if w.shape != (len(names),):
        raise ValueError(
            f"target weights w* have {w.size} entries but there are d={len(names)} objectives ({', '.join(names)})"
        )
    if (w < 0).any() or not np.isclose(w.sum(), 1.0):
        raise ValueError(f"target weights w* must be non-negative and sum to 1, got {w.tolist()}")
    if args.reward_weights is None:
        return names, w, w.tolist()
    rw = np.asarray(args.reward_weights, dtype=np.float64).reshape(-1)
    what = f"task {task.name!r} has d={len(names)} objectives ({', '.join(names)})"
    if rw.size != len(names):
        raise TrainerSetupError(
            f"reward_weights has {rw.size} entries but {what}; give {len(names)} weights, or leave reward_weights unset (w*)"
        )
    if not np.isfinite(rw).all() or (rw < 0).any() or rw.sum() <= 0:
        raise TrainerSetupError(
            f"reward_weights {_fmt(rw)} for {what}: VPO's w* is a weighting of objectives where higher is better, so "
            "the weights must be >= 0 with a positive sum; negate a penalty inside its reward function instead"
        )
    declared = _declared_target(task)
    if declared is not None and not np.allclose(rw / rw.sum(), declared, rtol=1e-6, atol=1e-9):
        raise TrainerSetupError(
            f"reward_weights {_fmt(rw)} (normalised {_fmt(rw / rw.sum())}) disagree with the target weights w* "
            f"{_fmt(declared)} of task {task.name!r} (objectives {', '.join(names)}); give one of the two, or make "
            "them proportional"
        )
    return names, rw / rw.sum(), rw.tolist()


class VPOTrainer(GRPOTrainer):
    """GRPOTrainer with vector rewards and the vpo estimators (one switch: ``args.estimator``).

    Args:
        model: model id/path or a loaded model (as GRPOTrainer).
        args: :class:`VPOConfig`.
        task: a vpo Task (or set ``args.task``); builds the datasets when they are not given.
        reward_funcs: instead of a task, ordinary TRL reward functions, one per objective, each called
            with ``prompts``/``completions`` where every completion is one parsed answer.
        objectives: names of the objectives for ``reward_funcs`` (default: the functions' names).
        target_weights: w* for ``reward_funcs`` (default uniform; a task brings its own).
        Other keyword arguments go to GRPOTrainer.
    """

    _tag_names = ["trl", "vpo"]  # not "grpo": the card names the estimator (create_model_card)
    _name = "VPO"
    _paper: dict = {}  # not TRL's GRPO paper: the card names the estimator instead (create_model_card)

    def __init__(
        self,
        model,
        args: VPOConfig,
        task: Task | str | None = None,
        reward_funcs: Sequence[Callable] | None = None,
        objectives: Sequence[str] | None = None,
        target_weights: Sequence[float] | None = None,
        train_dataset=None,
        eval_dataset=None,
        processing_class=None,
        **kwargs,
    ):
        check_trl_hooks()
        silence_checkpointing_renames()
        if not isinstance(args, VPOConfig):
            raise TypeError(f"args must be a VPOConfig, got {type(args).__name__}")
        if task is None and args.task is not None:
            task = args.task
        if isinstance(task, str):
            task = get_task(task, **(args.task_options or {}))
        if (task is None) == (reward_funcs is None):
            raise ValueError("give exactly one of `task` (or args.task) and `reward_funcs` (one per objective)")
        if callable(reward_funcs):  # TRL accepts one function as well as a list
            reward_funcs = [reward_funcs]
        if reward_funcs is not None:
            reward_funcs = [_checked_reward_function(f) for f in reward_funcs]
        # user reward functions become a task too, so there is one scoring path (Task.score_completions)
        self._vpo_task_data = task is not None
        if task is None:
            task = RewardFunctionsTask(
                reward_funcs, objectives, target_weights, context=self._reward_context, tokenize=self._tokenize_answers
            )
        if args.constraints:
            task = constrained(task, args.constraints)  # a violating answer scores as invalid
        self.vpo_task: Task = task
        self.num_answers = int(args.num_answers)
        names, w, trl_weights = _checked_objectives(task, args)
        self.vpo_objectives = names
        self.vpo_target = w

        self._vpo_base_model = model if isinstance(model, str) else getattr(model.config, "_name_or_path", None)
        if processing_class is None:
            from transformers import AutoTokenizer

            name_or_path = model if isinstance(model, str) else model.config._name_or_path
            processing_class = AutoTokenizer.from_pretrained(name_or_path)
        train_dataset, eval_dataset = self._vpo_datasets(task, args, processing_class, train_dataset, eval_dataset)

        super().__init__(
            model=model,
            reward_funcs=[_objective_function(n) for n in names],
            args=args,
            train_dataset=train_dataset,
            eval_dataset=eval_dataset,
            processing_class=processing_class,
            **kwargs,
        )
        from vpo.train.resume import EpochOrderCallback

        # resumed runs replay the finished epochs' data order (vpo/train/resume.py): on by default,
        # so a Python user's resume is exact too, not only `vpo train`'s
        if not any(isinstance(c, EpochOrderCallback) for c in self.callback_handler.callbacks):
            self.add_callback(EpochOrderCallback())
        seed = args.seed if args.weight_seed is None else args.weight_seed
        self.vpo_estimator_config = args.estimator_config()
        self.vpo_sampler = SimplexSampler(args.num_weightings, args.weight_alpha, args.weight_sampler, seed=seed)
        self._goal_seed = seed
        self._example_cache: dict[int, dict] = {}
        self._pending: _GatheredScores | None = None
        if args.search_eval_steps:  # held-out search evaluation every N global steps (vpo.train.callbacks)
            from vpo.train.callbacks import SearchEvalCallback

            self.add_callback(SearchEvalCallback(self))
        self.vpo_last: dict | None = None  # the last batch's tensors, for inspection and tests
        # TRL's logged "reward" and the trl_* advantages use reward_weights as given (w* when unset)
        self.reward_weights = torch.tensor(trl_weights, dtype=torch.float32)
        self._zero_signal = {"total": 0, "streak": 0, "warned_at": None}
        self._flat = NoSignalWatch(ZERO_SIGNAL_WARN_EVERY)
        self._local_violations = 0.0
        self._local_score_errors = 0.0
        self._local_unscored: np.ndarray | None = None
        self._local_nonfinite: np.ndarray | None = None
        self._local_nonfinite_answers = 0.0
        from vpo.train import fastpath

        # the CPU step's fast path (vpo/train/fastpath.py): decided once, said once in the log
        self.vpo_fast = fastpath.resolve(self)
        self._fast_rollouts = None

    def _vpo_datasets(self, task: Task, args: VPOConfig, processing_class, train_dataset, eval_dataset):
        """The train and eval datasets: built from the task where not given (chat prompts when the
        tokenizer has a chat template); a user dataset gets the m-answer instruction appended."""
        chat = getattr(processing_class, "chat_template", None) is not None
        spec = args.task if isinstance(args.task, str) else None
        if self._vpo_task_data:
            if train_dataset is None:
                train_dataset = build_task_dataset(
                    task,
                    load_split(
                        task, "train", args.train_size, args.data_seed_task, spec, required=True, purpose="train on"
                    ),
                    self.num_answers,
                    chat,
                )
            if eval_dataset is None and args.eval_size:
                eval_dataset = build_task_dataset(
                    task,
                    load_split(
                        task, "test", args.eval_size, args.data_seed_task, spec, required=True, purpose="evaluate on"
                    ),
                    self.num_answers,
                    chat,
                )
        elif self.num_answers > 1 and train_dataset is not None:
            train_dataset = train_dataset.map(
                lambda row: {"prompt": _append_instruction(row["prompt"], self.num_answers)}
            )
        if train_dataset is None:
            raise ValueError("no train_dataset: pass one, or a task to build it from")
        if len(train_dataset) == 0:
            raise TrainerSetupError("the train dataset has no rows, so there is nothing to train on")
        if args.estimator == "goal_conditioned" and (
            not self._vpo_task_data or EXAMPLE_COLUMN not in train_dataset.column_names
        ):
            raise ValueError("goal_conditioned writes the weighting into the prompt, so it needs a vpo task dataset")
        if (
            args.estimator == "random_weight"
            and args.weight_schedule == "per_row"
            and INDEX_COLUMN not in train_dataset.column_names
        ):
            raise TrainerSetupError(
                f"weight_schedule: per_row fixes each training row's w from its row index, but the train dataset has no "
                f"{INDEX_COLUMN!r} column; train on a vpo task (it adds one), add that column, or use weight_schedule: per_step"
            )
        return train_dataset, eval_dataset

    # ---------------------------------------------------------------------------------------
    # what a run says about itself: start-of-run summary, model card, saved VPO settings
    # ---------------------------------------------------------------------------------------
    def vpo_settings(self) -> dict:
        """The settings that define this run's method (saved as ``vpo_args.json``, shown in the summary)."""
        a = self.args
        return {
            "estimator": a.estimator,
            "num_answers": self.num_answers,
            "answer_format": "tags",
            "num_weightings": a.num_weightings,
            "weight_alpha": a.weight_alpha,
            "weight_sampler": a.weight_sampler,
            "objectives": list(self.vpo_objectives),
            "target_weights": [float(x) for x in self.vpo_target],
            "num_generations": a.num_generations,
            "task": a.task if isinstance(a.task, str) else getattr(self.vpo_task, "name", None),
            "task_options": a.task_options,
        }

    def run_summary(self) -> str:
        """A one-screen description of the run: estimator, m, K, d, w*, G and prompts per step."""
        a = self.args
        procs = self.accelerator.num_processes
        rollouts = a.per_device_train_batch_size * a.gradient_accumulation_steps * procs
        G = self.num_generations
        d = len(self.vpo_objectives)
        w = ", ".join(f"{n} {x:.3g}" for n, x in zip(self.vpo_objectives, self.vpo_target))
        multi = a.estimator not in TRL_NATIVE_ESTIMATORS and a.is_multi_answer_estimator
        lines = [
            f"vpo: estimator {a.estimator}, m = {self.num_answers} answer(s) per rollout"
            + (f", K = {a.num_weightings} Dir({a.weight_alpha:g}) weightings ({a.weight_sampler})" if multi else ""),
            f"vpo: task {getattr(self.vpo_task, 'name', '?')}, d = {d} objectives; w* = {w}",
            f"vpo: G = {G} rollouts per prompt; {rollouts} rollouts = {rollouts // max(G, 1)} prompts per optimizer step "
            f"({a.per_device_train_batch_size} per device x {a.gradient_accumulation_steps} accumulation x {procs} process(es))",
            f"vpo: max_completion_length {a.max_completion_length}, learning_rate {a.learning_rate:g}, beta {a.beta:g}, "
            f"max_steps {a.max_steps}, vLLM {'on' if a.use_vllm else 'off'}, output_dir {a.output_dir}",
        ]
        if self.accelerator.device.type == "cpu":
            from vpo.train.fastpath import describe

            lines.append(describe(self.vpo_fast, bool(a.bf16)))
        if a.constraints:
            lines.insert(
                2,
                f"vpo: constraints: {', '.join(a.constraints)} (a violating answer scores as invalid; "
                "vpo/constraint_violations counts them per step)",
            )
        return "\n".join(lines)

    def train(self, *args, **kwargs):
        if self.is_world_process_zero():
            print(self.run_summary(), flush=True)
        return super().train(*args, **kwargs)

    def create_model_card(self, model_name=None, dataset_name=None, tags=None):
        """TRL's card, naming VPO (estimator, m, K, objectives, w*) instead of "trained with GRPO"."""
        a = self.args
        what = f"estimator {a.estimator}, m = {self.num_answers} answers per rollout"
        if a.estimator not in TRL_NATIVE_ESTIMATORS and a.is_multi_answer_estimator:
            what += f", K = {a.num_weightings} weightings"
        self._name = f"vpo's VPOTrainer (Vector Policy Optimization on TRL's GRPOTrainer; {what})"
        super().create_model_card(model_name=model_name, dataset_name=dataset_name, tags=tags)
        if not self.is_world_process_zero():
            return
        path = os.path.join(self.args.output_dir, "README.md")
        if os.path.exists(path):
            self._name_local_base(path)
            objectives = ", ".join(f"{n} (w* {x:.3g})" for n, x in zip(self.vpo_objectives, self.vpo_target))
            with open(path, "a") as f:
                f.write(
                    f"\n## VPO settings\n\n- estimator: {a.estimator}\n- answers per rollout m: {self.num_answers} "
                    f"(answers in <answer_i> tags)\n- task: {self.vpo_settings()['task']}\n- objectives: {objectives}\n"
                    "- `vpo eval --model DIR` reads m and the answer format from `vpo_args.json` next to the model\n"
                )

    def _name_local_base(self, path: str) -> None:
        """TRL's card says "fine-tuned version of [None](https://huggingface.co/None)" for a base model
        loaded from a local directory: name that directory instead."""
        base = self._vpo_base_model or "an unnamed base model"
        text = open(path).read()
        fixed = text.replace("[None](https://huggingface.co/None)", f"`{base}` (a local model directory)")
        if fixed != text:
            with open(path, "w") as f:
                f.write(fixed)

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False):
        super().save_model(output_dir, _internal_call)
        out = output_dir if output_dir is not None else self.args.output_dir
        if self.args.should_save and out:
            os.makedirs(out, exist_ok=True)
            with open(os.path.join(out, ARGS_FILE), "w") as f:
                json.dump(self.vpo_settings(), f, indent=1, default=str)

    # ---------------------------------------------------------------------------------------
    # scoring
    # ---------------------------------------------------------------------------------------
    def _example(self, row: dict) -> dict:
        idx = row.get(INDEX_COLUMN)
        if idx is not None and idx in self._example_cache:
            return self._example_cache[idx]
        ex = json.loads(row[EXAMPLE_COLUMN])
        if idx is not None:
            self._example_cache[idx] = ex
        return ex

    def _reward_context(self) -> dict:
        """The keywords TRL 1.16 passes every reward function besides the batch and the dataset columns."""
        return {"trainer_state": self.state, "log_metric": self._log_metric, "log_extra": self._log_completion_extra}

    def _tokenize_answers(self, texts: list[str]) -> list[list[int]]:
        """``completion_ids`` of m > 1 answers: each answer's text through the trainer's tokenizer."""
        tok = getattr(self.processing_class, "tokenizer", self.processing_class)
        return [list(ids) for ids in tok(list(texts), add_special_tokens=False)["input_ids"]]

    def _score_local(self, inputs, prompts, completions, completion_ids=None):
        """rewards [n, m, d], valid [n, m], per-completion stats for this process's rollouts."""
        texts = [completion_text(c) for c in completions]
        if self._vpo_task_data:
            examples = [self._example(x) for x in inputs]
        else:  # RewardFunctionsTask: the TRL row, with the prompt the model was given and its ids
            examples = [{**x, "prompt": p} for x, p in zip(inputs, prompts)]
            for i, ex in enumerate(examples):
                if completion_ids is not None:
                    ex["completion_ids"] = completion_ids[i]
                if getattr(self, "environments", None) is not None:  # TRL's per-completion environments
                    ex["environments"] = self.environments[i]
        try:
            sb = self.vpo_task.score_completions(
                examples,
                texts,
                self.num_answers,
                dedup_answers=self.args.dedup_answers,
                strict=self.args.strict_rewards,
            )
        except Exception as e:
            if not self.args.strict_rewards or isinstance(e, UserError):
                raise
            notes = "".join(f"; {n}" for n in getattr(e, "__notes__", []))
            raise StrictRewardsError(
                f"strict_rewards: true stopped training at step {self.state.global_step}: task "
                f"{getattr(self.vpo_task, 'name', '?')!r}'s scorer raised {type(e).__name__}: {e}{notes}; fix the "
                "scorer, or set strict_rewards: false to count such answers as invalid"
            ) from e
        if self.args.strict_rewards:
            self._check_finite(sb.rewards, sb.valid)
        self._local_violations = float(getattr(sb, "num_violations", 0) or 0)
        self._local_score_errors = float(sb.score_errors)
        self._local_unscored = np.asarray(sb.unscored, dtype=bool)
        self._local_nonfinite = np.asarray(sb.nonfinite, dtype=np.float64)
        self._local_nonfinite_answers = float(sb.unscored_reasons.get("non-finite reward", 0))
        return sb.rewards, sb.valid, sb.num_parsed, sb.num_duplicates

    def _check_finite(self, rewards: np.ndarray, valid: np.ndarray) -> None:
        """strict_rewards: one line naming the first NaN/inf reward's rollout, answer and objective(s)."""
        bad = valid & ~np.isfinite(rewards).all(-1)
        if not bad.any():
            return
        i, j = (int(x) for x in np.argwhere(bad)[0])
        objs = [n for n, x in zip(self.vpo_objectives, rewards[i, j]) if not np.isfinite(x)]
        raise StrictRewardsError(
            f"strict_rewards: true stopped training at step {self.state.global_step}: task "
            f"{getattr(self.vpo_task, 'name', '?')!r} gave a NaN/inf reward for objective(s) {', '.join(objs)} "
            f"(rollout {i}, answer {j}; {int(bad.sum())} answer(s) in all); fix the scorer, or set "
            "strict_rewards: false to count such answers as invalid"
        )

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        from accelerate.utils import gather

        device = self.accelerator.device
        rewards, valid, num_parsed, dups = self._score_local(inputs, prompts, completions, completion_ids_list)
        r = torch.as_tensor(rewards, dtype=torch.float32, device=device)
        v = torch.as_tensor(valid, dtype=torch.int64, device=device)
        stats = torch.as_tensor(
            [
                float((num_parsed == 0).sum()),
                float(num_parsed.sum()),
                float(dups),
                float(len(num_parsed)),
                self._local_violations,
                self._local_score_errors,
                self._local_nonfinite_answers,
            ],
            device=device,
        )
        n_local, d = r.shape[0], r.shape[-1]
        unscored_local = self._local_unscored if self._local_unscored is not None else np.zeros(n_local, bool)
        u = torch.as_tensor(unscored_local.astype(np.int64), device=device)
        nf_local = self._local_nonfinite if self._local_nonfinite is not None else np.zeros(d)
        nf = torch.as_tensor(np.asarray(nf_local, dtype=np.float64), dtype=torch.float32, device=device)
        weights = None
        if WEIGHTS_COLUMN in inputs[0]:
            weights = torch.as_tensor(np.array([x[WEIGHTS_COLUMN] for x in inputs]), dtype=torch.float32, device=device)
        r_all = gather(r)
        v_all = gather(v).bool()
        stats_all = gather(stats.unsqueeze(0)).sum(0)
        w_all = gather(weights) if weights is not None else None
        no_answer, parsed, dups, n, violations, errors, nonfinite_answers = (float(x) for x in stats_all.tolist())
        u_all = gather(u).bool()
        nf_all = gather(nf.unsqueeze(0)).sum(0)
        self._pending = _GatheredScores(
            r_all, v_all, w_all, no_answer, parsed, dups, n, violations, errors, u_all, nf_all, nonfinite_answers
        )
        # what TRL sees: the per-objective mean over each rollout's valid answers (0 without one)
        rf = r_all.nan_to_num(0.0)
        cnt = v_all.sum(1, keepdim=True).clamp(min=1)
        return (rf * v_all.unsqueeze(-1)).sum(1) / cnt

    # ---------------------------------------------------------------------------------------
    # advantages
    # ---------------------------------------------------------------------------------------
    def _goal_weights(self, inputs) -> list[list[float]]:
        d = len(self.vpo_objectives)
        if self.args.weight_schedule == "per_row":  # the row's w for the whole run: a function of (seed, row)
            return row_weights(
                self._goal_seed, [int(x[INDEX_COLUMN]) for x in inputs], d, self.args.weight_alpha
            ).tolist()
        step = int(self.state.global_step)
        out = []
        for x in inputs:
            g = torch.Generator().manual_seed(hash((self._goal_seed, step, int(x[INDEX_COLUMN]))) & 0x7FFFFFFF)
            out.append(dirichlet(1, 1, d, self.args.weight_alpha, g)[0, 0].tolist())
        return out

    def _generate_and_score_completions(self, inputs):
        if self.args.estimator == "goal_conditioned":
            chat = isinstance(inputs[0]["prompt"], list)
            new = []
            for x, w in zip(inputs, self._goal_weights(inputs)):
                text = self.vpo_task.build_prompt(self._example(x), self.num_answers, weights=w)
                prompt = [{"role": "user", "content": text}] if chat else text
                new.append({**x, "prompt": prompt, WEIGHTS_COLUMN: w})
            inputs = new
        elif self.args.estimator == "random_weight" and self.args.weight_schedule == "per_row":
            inputs = [{**x, WEIGHTS_COLUMN: w} for x, w in zip(inputs, self._goal_weights(inputs))]  # hidden w
        output = super()._generate_and_score_completions(inputs)
        p = self._pending
        n_local = output["advantages"].shape[0]
        start = self.accelerator.process_index * n_local
        if self.args.estimator in TRL_NATIVE_ESTIMATORS:
            if p.unscored is not None and bool(p.unscored.any()):  # TRL's baseline, but no step from a false zero
                p.dropped = p.unscored.cpu()
                dropped = p.unscored.to(output["advantages"].device)[start : start + n_local]
                output["advantages"] = torch.where(dropped, 0.0, output["advantages"])
                self._mask_out(output, dropped)
            self._log_vpo(None)
            return output
        mode = "train" if self.model.training else "eval"
        G = self.num_generations if mode == "train" else self.num_generations_eval
        lengths = None
        if self.args.estimator == "gdpo" and self.vpo_estimator_config.gdpo_whitening == "tokens":
            from accelerate.utils import gather

            lengths = gather(output["completion_mask"].sum(1)).cpu()  # response tokens per rollout
        scored = advantages_without(
            self.args.estimator,
            p.rewards,
            p.valid,
            None if p.unscored is None else p.unscored.cpu(),
            group_size=G,
            target_weights=self.vpo_target,
            rollout_weights=p.weights,
            config=self.vpo_estimator_config,
            sampler=self.vpo_sampler,
            response_lengths=lengths,
        )
        res = scored.result
        p.dropped = scored.dropped.cpu() if scored.num_dropped else None
        adv_all = scored.advantages.to(torch.float32).to(self.accelerator.device)
        output["advantages"] = adv_all[start : start + n_local]
        if scored.num_dropped:
            self._mask_out(output, scored.dropped.to(adv_all.device)[start : start + n_local])
        # TRL logged its own advantages for this batch; replace them with the ones used in the loss
        logged = self._logs["advantages"]
        for _ in range(min(adv_all.numel(), len(logged))):
            logged.pop()
        logged.extend(adv_all.tolist())
        self.vpo_last = {
            "rewards": p.rewards.detach().cpu(),
            "valid": p.valid.detach().cpu(),
            "weights": None if p.weights is None else p.weights.detach().cpu(),
            "advantages": adv_all.detach().cpu(),
            "group_size": G,
            "dropped": scored.dropped.detach().cpu(),
        }
        if res is None:  # every rollout dropped: nothing to learn from this batch
            self._log_vpo(None)
        else:
            self._log_vpo(res.diagnostics, flat_group_fraction(res.scores, res.group_index))
        return output

    @staticmethod
    def _mask_out(output: dict, dropped: torch.Tensor) -> None:
        """Leave the ``dropped [n_local]`` rollouts' tokens out of the loss: TRL's loss multiplies
        ``completion_mask`` by ``tool_mask`` when the batch has one (attention reads only
        ``completion_mask``, so the forward pass is unchanged)."""
        cm = output["completion_mask"]
        keep = (~dropped.to(cm.device)).to(cm.dtype).unsqueeze(1)
        tm = output.get("tool_mask")
        output["tool_mask"] = (torch.ones_like(cm) if tm is None else tm) * keep

    def _log_vpo(self, diag: dict | None, flat_frac: float | None = None) -> None:
        mode = "train" if self.model.training else "eval"
        p = self._pending
        metrics = self._metrics[mode]
        metrics["vpo/parse_failure_rate"].append(p.no_answer / max(p.completions, 1))
        metrics["vpo/answers_per_completion"].append(float(p.valid.sum(1).float().mean()))
        metrics["vpo/duplicate_answers"].append(p.duplicates / max(p.completions, 1))
        G = self.num_generations if mode == "train" else self.num_generations_eval
        metrics["vpo/diversity"].append(group_reward_diversity(p.rewards, p.valid, G))
        if diag is not None:
            metrics["vpo/score"].append(diag["score_mean"])
            metrics["vpo/pool_set_score"].append(diag["pool_set_score"])
            metrics["vpo/group_std"].append(diag["group_std_mean"])
            metrics["vpo/zero_std_frac"].append(diag["zero_std_frac"])
            for name, val in zip(self.vpo_objectives, diag["objective_means"]):
                metrics[f"vpo/objective/{name}"].append(val)
        if self.args.constraints:
            metrics["vpo/constraint_violations"].append(p.violations)
        metrics["vpo/score_errors"].append(p.score_errors)
        unscored = 0.0 if p.unscored is None else float(p.unscored.float().mean())
        metrics["vpo/unscored_frac"].append(unscored)
        if self.args.log_pool_stats:  # the VPO reference's pool statistics (vpo.search.poolstats)
            from vpo.train.callbacks import pool_stat_logs

            for key, val in pool_stat_logs(p.rewards, p.valid, G, self.vpo_target).items():
                metrics[key].append(val)
        cause = self._check_zero_signal(mode, metrics)
        if flat_frac is not None:
            self._check_flat_groups(mode, metrics, flat_frac, zero_signal=cause is not None)

    def _check_flat_groups(self, mode: str, metrics, flat_frac: float, zero_signal: bool) -> None:
        """Log ``vpo/flat_group_frac`` (groups whose rollouts all scored alike, vpo.core.no_signal's rule) and
        ``vpo/flat_group_batches`` (training batches where every group was flat, so the gradient is 0;
        counted beside ``vpo/zero_signal_batches``), and warn about such a batch at most once every
        ``ZERO_SIGNAL_WARN_EVERY`` steps."""
        metrics["vpo/flat_group_frac"].append(float(flat_frac))
        if mode != "train":
            return
        flat = flat_frac >= 1.0 and not zero_signal  # a batch without signal for another cause is said there
        step = int(self.state.global_step)
        total = self._flat.observe(
            step,
            flat,
            lambda total: (
                f"vpo: step {step}: every group is flat: all {self.num_generations} rollouts of each prompt scored "
                f"the same, so every advantage is 0 and this batch teaches nothing ({total} such batch(es) in "
                "all, vpo/flat_group_batches); the prompts are too easy or too hard for the model now, or the "
                "rewards too coarse: raise num_generations or temperature, or check the task's scorer"
            ),
            stacklevel=3,
        )
        metrics["vpo/flat_group_batches"].append(float(total))

    def _zero_signal_cause(self, rewards: torch.Tensor, valid: torch.Tensor, parsed: float) -> str | None:
        """Why this batch has no learning signal (no answer parsed, none valid, no finite reward), or None."""
        finite = torch.isfinite(rewards).all(-1)
        p = self._pending
        task = getattr(self.vpo_task, "name", "?")
        if bool((valid & finite).any()):
            return self._all_dropped_cause(p, task)
        if parsed == 0:
            if self.vpo_task.answer_format == "code":
                fmt = "fenced code blocks"
            else:
                fmt = (
                    f"<answer_1>..<answer_{self.num_answers}> tags"
                    if self.num_answers > 1
                    else "<answer>...</answer> tags"
                )
            return (
                f"no completion contained a parsable answer (task {task!r} parses {fmt}); check that the prompts ask "
                "for that format and the model writes it (a fresh model needs a warm start, docs/tasks.md)"
            )
        nf = p.nonfinite if p is not None and p.nonfinite is not None else None
        if nf is not None and p.nonfinite_answers > 0 and p.nonfinite_answers >= p.score_errors:
            bad = [n for j, n in enumerate(self.vpo_objectives) if float(nf[j]) >= p.nonfinite_answers]
            which = f"objective(s) {', '.join(bad)}" if bad else "some objective"
            return (
                f"no answer got a finite reward: {which} of task {task!r} returned NaN/inf (or None) for every "
                "answer, so every answer is unscored; check that scorer or reward function"
            )
        if not bool(valid.any()):
            return (
                f"answers were parsed but none was valid: task {task!r}'s scorer could not score "
                f"{int(p.score_errors) if p is not None else '?'} of them (unscored, see its warnings), or every "
                "answer broke a constraint"
            )
        bad = [n for j, n in enumerate(self.vpo_objectives) if not bool(torch.isfinite(rewards[..., j][valid]).any())]
        which = f"objective(s) {', '.join(bad)}" if bad else "some objective"
        return (
            f"no answer got a finite reward: {which} of task {task!r} returned NaN/inf (or None) for every answer; "
            "check that scorer or reward function"
        )

    def _all_dropped_cause(self, p, task: str) -> str | None:
        """Why a batch with valid answers still teaches nothing: the update left every rollout out
        (``p.dropped``, as the advantages were computed: unscored, or in a group with fewer than 2 scored
        rollouts under vpo's estimators), or None."""
        if p is None or p.dropped is None or not bool(p.dropped.all()):
            return None
        n_unscored = 0 if p.unscored is None else int(p.unscored.sum())
        return (
            f"every rollout was left out of the update: {n_unscored} of {len(p.dropped)} have an answer task {task!r} "
            "could not score (unscored, see its warnings) and a group needs two scored rollouts; fix the scorer "
            f"(`vpo rewards audit {task}` tries it on hostile answers)"
        )

    def _check_zero_signal(self, mode: str, metrics) -> None:
        """Log ``vpo/nonfinite_answers`` and ``vpo/zero_signal_batches``; warn (at most once every
        ``ZERO_SIGNAL_WARN_EVERY`` steps) about a training batch without learning signal, and stop after
        ``zero_signal_patience`` such batches in a row."""
        p = self._pending
        rewards, valid = p.rewards, p.valid
        metrics["vpo/nonfinite_answers"].append(
            float((valid & ~torch.isfinite(rewards).all(-1)).sum()) + float(p.nonfinite_answers)
        )
        if mode != "train":
            return None
        z = self._zero_signal
        cause = self._zero_signal_cause(rewards, valid, p.parsed)
        z["streak"] = z["streak"] + 1 if cause else 0
        z["total"] += bool(cause)
        metrics["vpo/zero_signal_batches"].append(float(z["total"]))
        if cause is None:
            return None
        step, patience = int(self.state.global_step), self.args.zero_signal_patience
        what = (
            f"vpo: step {step}: no learning signal in this batch ({z['streak']} in a row, {z['total']} in all): {cause}"
        )
        if patience and z["streak"] >= patience:
            raise ZeroSignalError(
                f"{what}. Stopped after zero_signal_patience = {patience} such batches in a row (every advantage was 0, "
                "so nothing was learned); fix the cause, or set zero_signal_patience: 0 to train on regardless"
            )
        if z["warned_at"] is None or step - z["warned_at"] >= ZERO_SIGNAL_WARN_EVERY:
            z["warned_at"] = step
            warnings.warn(f"{what} (every advantage is 0)", RuntimeWarning, stacklevel=2)
        return cause

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        """TRL's, or with ``shared_prompt_forward`` the prompt prefill once per distinct prompt
        (``vpo.search.shared_prefix.shared_prefix_generate``: the same tokens, tested)."""
        args = (prompt_ids, images, multimodal_fields, num_generations, has_tool_images)
        if self.vpo_fast["fast_generation"] and images is None and not multimodal_fields:
            from vpo.train.fastpath import Rollouts

            if self._fast_rollouts is None:
                self._fast_rollouts = Rollouts(self)
            return self._fast_rollouts(prompt_ids), None
        if (
            not self.vpo_fast["shared_prompt_forward"]
            or self.use_vllm
            or images is not None
            or multimodal_fields
            or getattr(self, "tools", None)
        ):
            return super()._generate_single_turn(*args)
        from vpo.search.shared_prefix import shared_prefix_generate

        model = self.accelerator.unwrap_model(self.model)
        model.generate = functools.partial(shared_prefix_generate, model.generate, model)  # this call only
        try:
            return super()._generate_single_turn(*args)
        finally:
            del model.generate

    def _get_per_token_logps_and_entropies(
        self,
        model,
        input_ids,
        attention_mask,
        logits_to_keep,
        batch_size=None,
        compute_entropy=False,
        compute_aux_loss=False,
        **multimodal,
    ):
        """TRL's, or with ``shared_prompt_forward`` each distinct prompt once (vpo/search/shared_prefix.py)."""
        from vpo.search.shared_prefix import shared_prefix_logps, shared_prefix_supported
        from vpo.train.fastpath import float32_head, no_checkpointing

        if self.vpo_fast["shared_prompt_forward"] and shared_prefix_supported(
            model, multimodal, compute_aux_loss, checkpointing_off=True
        ):
            # checkpointed layers refuse the prompt's cache: this pass keeps its activations instead
            with self.accelerator.autocast(), no_checkpointing(model), float32_head(model):
                logps, ent = shared_prefix_logps(
                    model,
                    input_ids,
                    attention_mask,
                    logits_to_keep,
                    self.temperature,
                    compute_entropy=compute_entropy,
                    batch_size=batch_size,
                )
            return logps, ent, None
        return super()._get_per_token_logps_and_entropies(
            model,
            input_ids,
            attention_mask,
            logits_to_keep,
            batch_size=batch_size,
            compute_entropy=compute_entropy,
            compute_aux_loss=compute_aux_loss,
            **multimodal,
        )

    # ---------------------------------------------------------------------------------------
    # checkpoints
    # ---------------------------------------------------------------------------------------
    def _save_checkpoint(self, model, trial):
        super()._save_checkpoint(model, trial)
        if self.args.should_save:
            from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

            folder = os.path.join(
                self._get_output_dir(trial=trial), f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
            )
            torch.save({"sampler": self.vpo_sampler.state_dict()}, os.path.join(folder, STATE_FILE))

    def _load_optimizer_and_scheduler(self, checkpoint):
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is not None:
            path = os.path.join(checkpoint, STATE_FILE)
            if not os.path.exists(path):
                raise FileNotFoundError(
                    f"{path} is missing: this checkpoint was not written by VPOTrainer, so the weight sampler's "
                    "state cannot be restored and the resumed run would not match the original"
                )
            state = torch.load(path, weights_only=False)
            self.vpo_sampler.load_state_dict(state["sampler"])


def group_reward_diversity(rewards: torch.Tensor, valid: torch.Tensor, group_size: int) -> float:
    """Reward-space diversity (``vpo.search.metrics.reward_space_diversity``, the eval metric) of
    each group of ``group_size`` consecutive rollouts' valid answers, averaged over groups with >= 2
    valid answers (0 when there are none). ``rewards [N, m, d]``, ``valid [N, m]`` -> float in [0, d].
    """
    from vpo.search.metrics import reward_space_diversity

    N, m, d = rewards.shape
    per_group = reward_space_diversity(
        rewards.detach().cpu().double().numpy().reshape(N // group_size, group_size * m, d),
        valid.detach().cpu().numpy().reshape(N // group_size, group_size * m),
    )
    ok = np.isfinite(per_group)
    return float(per_group[ok].mean()) if ok.any() else 0.0


def _append_instruction(prompt, m: int):
    instr = answer_instruction(m, "tags")
    if isinstance(prompt, list):
        last = dict(prompt[-1])
        last["content"] = f"{last['content']}\n\n{instr}"
        return prompt[:-1] + [last]
    return f"{prompt}\n\n{instr}"
