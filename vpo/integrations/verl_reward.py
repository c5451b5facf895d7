"""veRL reward side of the vpo plugin: a score function, a reward manager, group-shared weightings.

How a reward vector reaches the advantage in veRL 0.9.1 (read from its source, not guessed):

* veRL's ``compute_advantage`` (``verl/trainer/ppo/ray_trainer.py``) calls a registered estimator
  with ``token_level_rewards [bs, T]``, ``response_mask [bs, T]``, ``index`` (the group uid per
  sample), ``config`` and nothing else; only the estimator named ``"gdpo"`` also gets
  ``non_tensor_batch``. The V1 trainer (the default, ``trainer.use_v1=True``) fetches only
  ``uid, response_mask, rm_scores, ...`` from its transfer queue before computing advantages, so
  the score function's extra keys never reach an estimator at all.
* Hence the route used here: the **score function computes the method's per-rollout scalar**
  (VPO's Monte Carlo set score, ``w*^T r`` for GRPO, ...) with :mod:`vpo.core`, veRL writes it at the
  last response token, and the registered estimator (:mod:`vpo.integrations.verl_plugin`) turns the
  per-rollout scalars into group-normalised advantages, again with :func:`vpo.core.compute_advantages`.
  The reward matrix itself is still returned in fixed-length extra keys (``vpo_r{i}_{objective}``,
  ``vpo_valid{i}``) for logging and for :func:`reward_matrix_from_extra`.

Sharing the K weightings within a group. docs/method.md §3 draws K weightings per group per step, shared
by the G rollouts of the group. veRL scores rollouts one by one, on several reward workers, so the
weightings are a deterministic function of the group: ``seed_g = blake2b(seed, group key)`` seeds a
:class:`vpo.core.SimplexSampler` (iid Dirichlet or scrambled Sobol, same code as the trainer), and
every worker that scores a rollout of group g draws the same K weightings. The group key is the
sample's ``uid`` — veRL draws a fresh ``uuid4`` per prompt per step, so weightings are re-drawn for
every group at every step, as the spec asks. :class:`VPORewardManager` (a subclass of veRL's
``NaiveRewardManager``) is what hands the uid to the score function (as ``extra_info["vpo_group"]``)
together with the method name taken from ``algorithm.adv_estimator``.

Simplifications / limits:

* runs are reproducible given the uids; veRL draws them with ``uuid4``, so two runs of the same
  seed see different (equally distributed) weightings;
* without :class:`VPORewardManager` (e.g. the plain ``naive`` manager) there is no uid; the key
  falls back to the prompt (data source, row index, ground truth), which is shared by the group but
  repeats when the prompt is seen again in a later epoch (a warning says so);
* ``algorithm.use_kl_in_reward`` must be off (the paper uses the KL *loss*): otherwise the token
  rewards hold score + KL and their sum is not the score (the estimator refuses);
* the method's scalar is computed per rollout from the shared weightings; the estimator-side group
  statistics (population vs Bessel std, Max@k transform, ...) are vpo.core's.

Shapes: a completion gives ``rewards [m, d]`` and ``valid [m]``; :func:`reward_matrix_from_extra`
returns ``rewards [N, m, d]``, ``valid [N, m]``.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from vpo._util import positive_int
from vpo.core.estimators import EstimatorConfig, compute_advantages, get_estimator, row_weights
from vpo.core.weights import SimplexSampler, validate_sampler_args

__all__ = [
    "VERL_METHODS",
    "verl_methods",
    "core_method",
    "group_seed",
    "group_weightings",
    "HashedGroupSampler",
    "compute_score",
    "reward_matrix_from_extra",
    "make_verl_rows",
    "VPORewardManager",  # noqa: F822 (built on first access by __getattr__ below: it needs veRL)
]

VERL_METHODS: dict[str, str] = {
    "vpo": "vpo",
    "vpo_grpo": "grpo",
    "vpo_multi_rlvr": "multi_rlvr",
    "vpo_max_at_k": "max_at_k",
    "vpo_maxrl": "maxrl",
    "vpo_random_weight": "random_weight",
    "vpo_union_coverage": "union_coverage",
}
"""veRL ``algorithm.adv_estimator`` name -> vpo.core estimator it runs (the built-in ones; a set
objective registered later with ``vpo.core.register_set_objective`` is ``vpo_<name>``, see
:func:`verl_methods`)."""

_FALLBACK_WARNED = False


def verl_methods() -> dict[str, str]:
    """:data:`VERL_METHODS` plus ``vpo_<name> -> name`` for every registered set objective (those
    registered by the user too: import their module in every veRL process, then call
    ``vpo.integrations.verl_plugin.register()`` again)."""
    from vpo.core.set_objectives import SET_OBJECTIVES

    out = dict(VERL_METHODS)
    for name in SET_OBJECTIVES:
        if name not in out.values():
            out[f"vpo_{name}"] = name
    return out


def core_method(verl_name: str) -> str:
    """The vpo.core estimator of a veRL name; ``ValueError`` naming the choices otherwise."""
    methods = verl_methods()
    if verl_name not in methods:
        raise ValueError(f"unknown vpo veRL estimator {verl_name!r}; choose one of {', '.join(methods)}")
    return methods[verl_name]


# ---------------------------------------------------------------------------------------------
# group-shared weightings
# ---------------------------------------------------------------------------------------------


def group_seed(group_key: Any, seed: int = 0) -> int:
    """A 63-bit seed from ``(seed, group_key)``; identical in every process (no ``hash()``)."""
    digest = hashlib.blake2b(f"{int(seed)}\x00{group_key}".encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)


def group_weightings(
    group_key: Any,
    d: int,
    num_weightings: int = 100,
    weight_alpha: float = 1.0,
    weight_sampler: str = "iid",
    seed: int = 0,
) -> torch.Tensor:
    """The ``[K, d]`` float64 weightings of one group: a :class:`SimplexSampler` seeded by
    :func:`group_seed`. Same key and settings -> bit-identical weightings, in any process."""
    s = SimplexSampler(num_weightings, weight_alpha, weight_sampler, seed=group_seed(group_key, seed))
    return s.sample(1, d)[0]


class HashedGroupSampler(SimplexSampler):
    """A :class:`SimplexSampler` whose g-th group gets :func:`group_weightings` of ``group_keys[g]``.

    Pass it to :func:`vpo.core.compute_advantages` with ``group_ids`` whose first-appearance order
    is ``group_keys`` to get exactly the weightings the score function used.
    """

    def __init__(
        self,
        group_keys: Sequence[Any],
        num_weightings: int = 100,
        weight_alpha: float = 1.0,
        weight_sampler: str = "iid",
        seed: int = 0,
    ) -> None:
        super().__init__(num_weightings, weight_alpha, weight_sampler, seed)
        self.group_keys = list(group_keys)

    def sample(
        self, num_groups: int, d: int, num_weightings: int | None = None, dtype: torch.dtype = torch.float64
    ) -> torch.Tensor:
        """The float64 weightings of each group key (the score function's), cast to ``dtype``."""
        if num_groups != len(self.group_keys):
            raise ValueError(
                f"HashedGroupSampler holds {len(self.group_keys)} group keys but {num_groups} groups "
                "were requested; build it with the batch's group ids in first-appearance order"
            )
        k = self.num_weightings if num_weightings is None else int(num_weightings)
        if num_groups == 0:
            return torch.zeros(0, k, d, dtype=dtype)
        return torch.stack(
            [group_weightings(g, d, k, self.weight_alpha, self.weight_sampler, self.seed) for g in self.group_keys]
        ).to(dtype)


# ---------------------------------------------------------------------------------------------
# the score function
# ---------------------------------------------------------------------------------------------

_TASKS: dict[str, Any] = {}


def _plain(x: Any) -> Any:
    """``x`` with mappings as dicts and sequences as lists: reward_kwargs arrive from Hydra as
    OmegaConf ``DictConfig``/``ListConfig``, which a task's option checks do not take for a list."""
    if isinstance(x, Mapping):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, Sequence) and not isinstance(x, (str, bytes)):
        return [_plain(v) for v in x]
    return x


def _get_task(name: str, options: Mapping | None):
    from vpo import tasks

    options = _plain(dict(options or {}))
    key = f"{name}|{json.dumps(options, sort_keys=True, default=str)}"
    if key not in _TASKS:
        _TASKS[key] = tasks.get(name, **options)
    return _TASKS[key]


def _parse_example(ground_truth: Any, where: str) -> dict:
    if isinstance(ground_truth, Mapping):
        return dict(ground_truth)
    if isinstance(ground_truth, (str, bytes)):
        try:
            ex = json.loads(ground_truth)
        except json.JSONDecodeError as e:
            raise ValueError(
                f"{where}: reward_model.ground_truth must be the task example as a JSON object "
                f"(what vpo.integrations.verl_reward.make_verl_rows writes); JSON error: {e}"
            ) from None
        if isinstance(ex, dict):
            return ex
    raise ValueError(
        f"{where}: reward_model.ground_truth must be the task example (a JSON object string or a dict), "
        f"got {type(ground_truth).__name__}; prepare the data with examples/verl/prepare_data.py"
    )


def _group_key(data_source: str, ground_truth: Any, extra_info: Mapping) -> str:
    global _FALLBACK_WARNED
    if extra_info.get("vpo_group") is not None:
        return str(extra_info["vpo_group"])
    if not _FALLBACK_WARNED:
        _FALLBACK_WARNED = True
        warnings.warn(
            "vpo compute_score: no group uid in extra_info['vpo_group'] (use "
            "reward.reward_manager.name=VPORewardManager); weightings are keyed by the prompt instead, "
            "so a prompt seen again in a later epoch reuses its weightings",
            RuntimeWarning,
            stacklevel=3,
        )
    gt = ground_truth if isinstance(ground_truth, str) else json.dumps(ground_truth, sort_keys=True, default=str)
    digest = hashlib.blake2b(gt.encode("utf-8"), digest_size=8).hexdigest()
    return f"{data_source}|{extra_info.get('index')}|{digest}"


def _resolve_method(method: str | None, extra_info: Mapping) -> str:
    from_manager = extra_info.get("vpo_method")
    if method is not None and from_manager is not None and method != from_manager:
        raise ValueError(
            f"vpo compute_score: reward_kwargs.method={method!r} but algorithm.adv_estimator="
            f"{from_manager!r}; the score and the estimator must be the same method (drop reward_kwargs.method)"
        )
    name = method if method is not None else from_manager
    if name is None:
        raise ValueError(
            "vpo compute_score: which method's score? Use reward.reward_manager.name=VPORewardManager "
            "(it passes algorithm.adv_estimator) or set reward.custom_reward_function.reward_kwargs.method"
        )
    if name not in verl_methods():
        raise ValueError(f"vpo compute_score: unknown method {name!r}; choose one of {', '.join(verl_methods())}")
    return name


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping | None = None,
    *,
    task: str | None = None,
    task_options: Mapping | None = None,
    num_answers: int = 3,
    method: str | None = None,
    num_weightings: int = 100,
    weight_alpha: float = 1.0,
    weight_sampler: str = "iid",
    weight_seed: int = 0,
    invalid_score: float = 0.0,
    dedup_answers: bool = True,
    weight_schedule: str = "per_step",
    **unknown: Any,
) -> dict[str, float]:
    """veRL score function (``reward.custom_reward_function``): one completion in, a dict out.

    Parses up to ``num_answers`` (m) answers from ``solution_str``, scores them with the vpo task (``task`` or the
    ``vpo/<task>`` suffix of ``data_source``) against the example in ``ground_truth`` (JSON), and
    returns

    * ``score``: the method's per-rollout scalar — for ``vpo`` the Monte Carlo set score with the K
      weightings of this rollout's group (see the module docstring); ``w*^T r`` of the single
      answer for ``vpo_grpo``/``vpo_max_at_k``/``vpo_maxrl``; the sum over answers for
      ``vpo_multi_rlvr``; ``w^T r`` with the group's one random ``w`` for ``vpo_random_weight``
      (with ``weight_schedule='per_row'``: the row's ``vpo.core.row_weights(weight_seed,
      extra_info['index'])``, the same w for the row all run); a set objective's score for
      ``vpo_<set objective>``; ``invalid_score`` when no answer parsed;
    * ``vpo_r{i}_{objective}`` / ``vpo_valid{i}`` (i < m): the ``[m, d]`` reward matrix and mask;
    * ``vpo_num_answers``, ``vpo_num_parsed``, ``vpo_best_target`` (best ``w*^T r`` over the answers),
      ``vpo_unscored`` (1.0 when an answer could not be scored).

    A rollout with an answer the task could not score (``ScoredBatch.unscored``: the scorer raised,
    returned :class:`~vpo.errors.ScoringUnavailable`, NaN, ...) gets ``score`` NaN: vpo's veRL
    estimators (:mod:`vpo.integrations.verl_plugin`) give it advantage 0 and leave it out of its
    group's statistics, rather than train on a false zero. veRL's own estimators do not know this
    convention: pair this score function with vpo's (``VPORewardManager`` checks it).

    Keyword options come from ``reward.custom_reward_function.reward_kwargs``, under the names of
    ``vpo train`` (``num_answers``, ``num_weightings``, ``weight_alpha``, ``weight_sampler``,
    ``weight_seed``, ``invalid_score``, ``dedup_answers``); any other keyword is an error (one
    that names the new key for a former name: ``m``, ``dedup``, ``alpha``, ``sampler``, ``seed``).
    ``extra_info`` may carry ``vpo_group`` (the uid) and ``vpo_method`` (from
    :class:`VPORewardManager`).
    """
    unknown = {k: v for k, v in unknown.items() if k not in _VERL_PASSES}
    if unknown:
        hints = [f"{k} is now {_RENAMED[k]}" for k in sorted(unknown) if k in _RENAMED]
        raise ValueError(
            f"vpo compute_score: unknown reward_kwargs {sorted(unknown)}"
            + (f" ({'; '.join(hints)})" if hints else "")
            + f"; the options are {', '.join(SCORE_OPTIONS)}"
        )
    m = num_answers
    extra_info = dict(extra_info or {})
    name = _resolve_method(method, extra_info)
    core = core_method(name)
    positive_int(m, "num_answers (answers per rollout)", "vpo compute_score")
    if not get_estimator(core).multi_answer and m != 1:
        raise ValueError(
            f"vpo compute_score: method {name!r} scores one answer per rollout, but num_answers={m}; "
            "set reward_kwargs.num_answers=1 and prepare the prompts with --num-answers 1"
        )
    validate_sampler_args(num_weightings, weight_alpha, weight_sampler)
    task_name = task or (data_source[4:] if isinstance(data_source, str) and data_source.startswith("vpo/") else None)
    if not task_name:
        raise ValueError(
            f"vpo compute_score: no task; set reward_kwargs.task or use data_source='vpo/<task>' (got {data_source!r})"
        )
    t = _get_task(task_name, task_options)
    example = _parse_example(ground_truth, f"vpo compute_score (task {task_name!r})")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # scorer errors are counted in the batch
        batch = t.score_completions([example], [solution_str], m, dedup_answers=dedup_answers)
    rewards, valid = batch.rewards[0], batch.valid[0]  # [m, d], [m]
    group = _group_key(data_source, ground_truth, extra_info)
    cfg = EstimatorConfig(
        num_weightings=num_weightings,
        weight_alpha=weight_alpha,
        weight_sampler=weight_sampler,
        invalid_score=invalid_score,
        weight_schedule=weight_schedule,
    )
    rollout_weights = None
    if core == "random_weight" and weight_schedule == "per_row":
        if extra_info.get("index") is None:
            raise ValueError(
                "vpo compute_score: weight_schedule='per_row' keys w by the dataset row, but extra_info has no 'index' "
                "(make_verl_rows writes it); prepare the data with examples/verl/prepare_data.py"
            )
        row = int(extra_info["index"])
        rollout_weights = row_weights(weight_seed, [row, row], len(t.objectives), weight_alpha)
    # vpo.core computes the scalar; the group statistics come later in the veRL estimator. Two copies
    # make a legal group of 2 (core needs G >= 2); only .scores[0] is used.
    res = compute_advantages(
        core,
        np.stack([rewards, rewards]),
        np.stack([valid, valid]),
        group_ids=[group, group],
        target_weights=t.target_weights,
        rollout_weights=rollout_weights,
        config=cfg,
        sampler=HashedGroupSampler([group], num_weightings, weight_alpha, weight_sampler, weight_seed),
    )
    target = rewards @ np.asarray(t.target_weights, dtype=np.float64)
    unscored = bool(batch.unscored[0])
    # an answer the scorer could not score (ScoringUnavailable, a scorer bug, NaN): the rollout's score is
    # NaN, which vpo's veRL estimators read as "leave this rollout out" (advantage 0, outside its group's
    # statistics); never a false zero
    out: dict[str, float] = {"score": float("nan") if unscored else float(res.scores[0])}
    for i in range(m):
        for j, obj in enumerate(t.objectives):
            out[f"vpo_r{i}_{obj}"] = float(rewards[i, j])
        out[f"vpo_valid{i}"] = float(valid[i])
    out["vpo_num_answers"] = float(valid.sum())
    out["vpo_num_parsed"] = float(batch.num_parsed[0])
    out["vpo_best_target"] = float(target[valid].max()) if valid.any() else float(invalid_score)
    out["vpo_unscored"] = float(unscored)
    _dump_score(group, name, rewards, valid, out["score"])
    return out


SCORE_OPTIONS = (
    "task",
    "task_options",
    "num_answers",
    "method",
    "num_weightings",
    "weight_alpha",
    "weight_sampler",
    "weight_seed",
    "invalid_score",
    "dedup_answers",
    "weight_schedule",
)
"""The ``reward.custom_reward_function.reward_kwargs`` that :func:`compute_score` takes."""

_VERL_PASSES = ("reward_router_address", "reward_model_tokenizer")
"""Keywords veRL's naive reward manager adds when a reward model serves (not used here)."""

_RENAMED = {
    "m": "num_answers",
    "dedup": "dedup_answers",
    "alpha": "weight_alpha",
    "sampler": "weight_sampler",
    "seed": "weight_seed",
}
"""Former reward_kwargs names, named in the error that refuses them."""

DUMP_ENV = "VPO_VERL_DUMP_DIR"
"""When set, :func:`compute_score` appends each rollout's reward matrix and score to
``$VPO_VERL_DUMP_DIR/scores.<pid>.jsonl`` and the estimators each batch they see to
``estimator.<pid>.jsonl`` (the tests check the advantages of a real veRL run against vpo.core)."""


def _dump_score(group: str, method: str, rewards: np.ndarray, valid: np.ndarray, score: float) -> None:
    d = os.environ.get(DUMP_ENV)
    if not d:
        return
    os.makedirs(d, exist_ok=True)
    rec = {
        "uid": group,
        "method": method,
        "rewards": np.asarray(rewards, dtype=np.float64).tolist(),
        "valid": np.asarray(valid, dtype=bool).tolist(),
        "score": float(score),
    }
    with open(os.path.join(d, f"scores.{os.getpid()}.jsonl"), "a") as f:
        f.write(json.dumps(rec) + "\n")


def reward_matrix_from_extra(
    extra: Mapping[str, Sequence[float]], m: int, objectives: Sequence[str]
) -> tuple[np.ndarray, np.ndarray]:
    """Rebuild ``rewards [N, m, d]`` and ``valid [N, m]`` from the score function's extra keys
    (a mapping key -> per-sample values, e.g. veRL's ``reward_extra_infos_dict`` or ``non_tensor_batch``)."""
    missing = [f"vpo_valid{i}" for i in range(m) if f"vpo_valid{i}" not in extra]
    missing += [f"vpo_r{i}_{o}" for i in range(m) for o in objectives if f"vpo_r{i}_{o}" not in extra]
    if missing:
        raise ValueError(
            f"reward extra info lacks the keys {missing[:4]}...; was it written by vpo compute_score with num_answers={m}?"
        )
    n = len(np.asarray(extra["vpo_valid0"]))
    rewards = np.zeros((n, m, len(objectives)))
    valid = np.zeros((n, m), dtype=bool)
    for i in range(m):
        valid[:, i] = np.asarray(extra[f"vpo_valid{i}"], dtype=np.float64) > 0.5
        for j, o in enumerate(objectives):
            rewards[:, i, j] = np.asarray(extra[f"vpo_r{i}_{o}"], dtype=np.float64)
    return rewards, valid


def make_verl_rows(task, examples: Sequence[Mapping], num_answers: int, split: str = "train") -> list[dict]:
    """veRL RLHFDataset rows for ``examples`` of ``task``: the ``num_answers``-answer prompt as a chat message,
    ``data_source='vpo/<task>'``, the example as JSON in ``reward_model.ground_truth``."""
    rows = []
    for i, ex in enumerate(examples):
        messages = []
        if getattr(task, "system_prompt", None):
            messages.append({"role": "system", "content": task.system_prompt})
        messages.append({"role": "user", "content": task.build_prompt(ex, num_answers)})
        rows.append(
            {
                "data_source": f"vpo/{task.name}",
                "prompt": messages,
                "ability": task.name,
                "reward_model": {"style": "rule", "ground_truth": json.dumps(ex, default=str)},
                "extra_info": {"split": split, "index": i},
            }
        )
    return rows


# ---------------------------------------------------------------------------------------------
# reward manager (needs verl; built lazily so this module imports without it)
# ---------------------------------------------------------------------------------------------


def _build_reward_manager_cls():
    try:
        from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager
    except ImportError as e:  # pragma: no cover - exercised only without verl
        raise ImportError(
            f"VPORewardManager needs verl==0.9.1 ({e}); install it in its own environment: "
            "bash scripts/setup_verl_env.sh"
        ) from e

    class VPORewardManager(NaiveRewardManager):
        """veRL's naive reward manager plus two entries in ``extra_info`` for the score function:
        ``vpo_group`` (the sample's uid, so the group's weightings are shared and fresh each step) and
        ``vpo_method`` (``algorithm.adv_estimator``, so score and estimator are the same method)."""

        def __init__(self, config, tokenizer, compute_score, **kwargs):
            super().__init__(config, tokenizer, compute_score, **kwargs)
            est = str(config.algorithm.adv_estimator)
            if est not in verl_methods():
                raise ValueError(
                    f"VPORewardManager: algorithm.adv_estimator={est!r} is not a vpo estimator; "
                    f"use one of {', '.join(verl_methods())}"
                )
            self.vpo_method = est

        async def run_single(self, data):
            last = len(data) - 1  # the naive manager scores the last sequence of a trajectory
            ntb = data.non_tensor_batch
            if "extra_info" not in ntb:
                ntb["extra_info"] = np.array([{} for _ in range(len(data))], dtype=object)
            info = dict(ntb["extra_info"][last] or {})
            if "uid" in ntb:
                info["vpo_group"] = str(ntb["uid"][last])
            info["vpo_method"] = self.vpo_method
            ntb["extra_info"][last] = info
            return await super().run_single(data)

    VPORewardManager.__module__ = __name__
    return VPORewardManager


_LAZY: dict[str, Any] = {}


def __getattr__(name: str):
    if name == "VPORewardManager":
        if name not in _LAZY:
            _LAZY[name] = _build_reward_manager_cls()
        return _LAZY[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
