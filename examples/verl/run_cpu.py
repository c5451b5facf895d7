"""veRL's real ``main_ppo`` with the vpo plugin on CPU: data, policy, overrides, one Ray run.

Runs in the veRL environment (``bash scripts/setup_verl_env.sh``); ``scripts/verl_cpu_run.sh`` is the
same with that interpreter. What it does:

1. writes the task's m-answer prompts as veRL parquet (``examples/verl/prepare_data.py``; any task
   ``vpo train`` takes: a registered name, ``module:factory`` or ``path/to/file.py:factory``, with
   ``--task-options``; ``--num-answers`` from the method: 3 for ``vpo``, 1 for ``grpo``/``vpo_grpo``;
   the ``--train-split`` and ``--val-split`` splits, by default train and validation, or test for a
   task without validation), cached per task, options, m, splits, sizes and task file content, and
   refuses prompts that veRL would all drop for length;
2. builds the policy once for maze or prog (``examples/verl/make_policy.py``: the tiny Qwen2 and the
   demo's warm start); another task needs ``--policy`` (a folder with ``config.json``: a path that
   does not exist is refused at once, exit 2);
3. runs ``python -m verl.trainer.main_ppo`` with :func:`overrides`: the vpo estimator and score
   function, 2 FSDP2 ranks on gloo (``VERL_PLATFORM=cpu``, :mod:`vpo.integrations.verl_cpu`), the
   ``vpo_hf`` rollout sampling from an HF copy of the policy, metrics to ``<out>/metrics.<tag>.jsonl``
   (with vpo's per-step ``vpo/...`` figures, :mod:`vpo.integrations.verl_metrics`), a progress line
   every 20 s;
4. Ray: main_ppo starts a local cluster in its own temp dir; the run's processes (its process tree,
   this script being their subreaper, its session, and any naming that dir) are watched for memory
   and, when it exits, stopped by pid, and the count of leftovers is recorded.
5. after a run that saved a checkpoint, the latest one is merged into ``<out>/model`` (veRL's
   ``model_merger``) with the run's task, options and m in its ``vpo_args.json``: ``vpo eval --model
   <out>/model`` evaluates it as it evaluates a ``vpo train`` checkpoint (``--no-model``: no merge).

``<out>/run.jsonl`` gets one JSON line per run of this script into ``<out>`` (a resumed run adds a
line; :func:`read_runs` reads them): the command, the task, the exit status, the wall time, the peak
PSS and summed RSS of the run's processes, their number, the Ray leftovers, the steps without
learning signal (every group flat) and the rollouts veRL's agent loop logged as failed (both also
said on stderr at the end, a failed rollout with its traceback).

    .venv-verl/bin/python examples/verl/run_cpu.py --method vpo --steps 4 --out runs/verl_cpu/vpo
    .venv-verl/bin/python examples/verl/run_cpu.py --method grpo --steps 4 --out runs/verl_cpu/grpo
    # extra Hydra overrides after --, e.g.  -- trainer.save_freq=2
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

METHODS = {
    # veRL estimator -> (answers per rollout, reward manager, reward_kwargs.method)
    "vpo": (3, "vpo", None),
    "vpo_grpo": (1, "vpo", None),
    # veRL's own GRPO on vpo's single-answer score (w*^T r): veRL's naive manager
    "grpo": (1, "naive", "vpo_grpo"),
}
"""The methods this recipe runs; any other vpo estimator works with ``--method`` too (m from vpo.core)."""


def answers_for(method: str) -> int:
    if method in METHODS:
        return METHODS[method][0]
    from vpo.core.estimators import get_estimator
    from vpo.integrations.verl_reward import core_method

    return 3 if get_estimator(core_method(method)).multi_answer else 1


def demo_task_options(task: str) -> dict:
    """The CPU demo's options of ``task`` (small mazes / programs with the short instruction, what the
    tiny policy's warm start saw)."""
    from vpo.demo.config import DemoConfig

    return DemoConfig(domain=task).task_options()


def hydra_value(v) -> str:
    """``v`` (dicts, lists, scalars) in Hydra's override grammar."""
    if isinstance(v, dict):
        return "{" + ",".join(f"{k}:{hydra_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(hydra_value(x) for x in v) + "]"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)
    return str(v)


def stop_string(num_answers: int) -> str:
    """The closing tag of the last answer: the rollout stops there."""
    return "</answer>" if num_answers == 1 else f"</answer_{num_answers}>"


class RecipeError(ValueError):
    """A setting the run cannot start with, found before Ray starts (exit 2, with the reason)."""


def check_world(prompts_per_step: int, rollouts: int, ranks: int, nodes: int) -> None:
    """Refuse a world veRL would refuse later (its micro-batch assertion, after Ray has started): every
    rank must get a whole share of each step's prompts_per_step x rollouts sequences."""
    for name, v in (("ranks", ranks), ("nodes", nodes)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"--{name} must be an integer >= 1, got {v!r}")
    world = ranks * nodes
    if (prompts_per_step * rollouts) % world:
        raise ValueError(
            f"--ranks {ranks} x --nodes {nodes} = {world} ranks cannot split a step's {prompts_per_step} prompts x "
            f"{rollouts} rollouts = {prompts_per_step * rollouts} sequences evenly; choose --prompts-per-step and "
            f"--rollouts whose product is a multiple of {world}"
        )


def overrides(
    *,
    method: str,
    task: str,
    model: str,
    data_dir: str,
    out: str,
    steps: int,
    prompts_per_step: int = 4,
    rollouts: int = 4,
    ranks: int = 2,
    nodes: int = 1,
    lr: float = 1e-4,
    max_prompt_length: int = 128,
    max_response_length: int = 48,
    save_freq: int = -1,
    cpu: bool = True,
    rollout: str | None = None,
    num_weightings: int = 100,
    task_options: dict | None = None,
) -> list[str]:
    """The Hydra overrides of one run (``cpu=False``: the same recipe for GPUs, with veRL's vLLM rollout)."""
    m = answers_for(method)
    manager = METHODS.get(method, (m, "vpo", None))[1]
    score_method = METHODS.get(method, (m, "vpo", None))[2]
    rollout = rollout or ("vpo_hf" if cpu else "vllm")
    check_world(prompts_per_step, rollouts, ranks, nodes)
    micro = max(1, prompts_per_step * rollouts // (ranks * nodes))
    ov = [
        f"algorithm.adv_estimator={method}",
        "algorithm.use_kl_in_reward=False",
        f"data.train_files={data_dir}/train.parquet",
        f"data.val_files={data_dir}/validation.parquet",
        f"data.train_batch_size={prompts_per_step}",
        f"data.max_prompt_length={max_prompt_length}",
        f"data.max_response_length={max_response_length}",
        "data.filter_overlong_prompts=True",
        "data.dataloader_num_workers=0",
        f"actor_rollout_ref.model.path={model}",
        "+actor_rollout_ref.model.override_config.attn_implementation=sdpa",
        "actor_rollout_ref.actor.strategy=fsdp2",
        "actor_rollout_ref.ref.strategy=fsdp2",
        f"actor_rollout_ref.actor.optim.lr={lr}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={prompts_per_step}",
        f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={micro}",
        "actor_rollout_ref.actor.ppo_epochs=1",
        "actor_rollout_ref.actor.clip_ratio=0.2",
        "actor_rollout_ref.actor.loss_agg_mode=token-mean",
        "actor_rollout_ref.actor.use_kl_loss=True",
        "actor_rollout_ref.actor.kl_loss_coef=0.001",
        "actor_rollout_ref.actor.kl_loss_type=low_var_kl",
        f"actor_rollout_ref.rollout.name={rollout}",
        f"actor_rollout_ref.rollout.n={rollouts}",
        "actor_rollout_ref.rollout.temperature=1.0",
        "actor_rollout_ref.rollout.top_p=1.0",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        "actor_rollout_ref.rollout.calculate_log_probs=True",
        f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={micro}",
        "actor_rollout_ref.rollout.agent.num_workers=1",
        f"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu={micro}",
        "reward.num_workers=1",
        "reward.custom_reward_function.path=pkg://vpo.integrations.verl_reward",
        "reward.custom_reward_function.name=compute_score",
        f"+reward.custom_reward_function.reward_kwargs.task={hydra_value(task)}",
        f"+reward.custom_reward_function.reward_kwargs.task_options={hydra_value(task_options or {})}",
        f"+reward.custom_reward_function.reward_kwargs.num_answers={m}",
        f"+reward.custom_reward_function.reward_kwargs.num_weightings={num_weightings}",
        "+reward.custom_reward_function.reward_kwargs.weight_sampler=iid",
        "+reward.custom_reward_function.reward_kwargs.weight_seed=0",
        f"trainer.n_gpus_per_node={ranks}",
        f"trainer.nnodes={nodes}",
        f"trainer.total_training_steps={steps}",
        'trainer.logger=["console","file"]',
        "trainer.val_before_train=False",
        "trainer.test_freq=-1",
        f"trainer.save_freq={save_freq}",
        f"trainer.default_local_dir={out}/checkpoints",
        "trainer.resume_mode=auto",
        "trainer.project_name=vpo_verl",
        f"trainer.experiment_name={method}_{short_name(task)}",
        f"hydra.run.dir={out}/hydra",
    ]
    if manager == "vpo":
        ov += [
            "reward.reward_manager.source=importlib",
            "reward.reward_manager.name=VPORewardManager",
            "reward.reward_manager.module.path=pkg://vpo.integrations.verl_reward",
        ]
    else:
        ov.append(f"+reward.custom_reward_function.reward_kwargs.method={score_method}")
    if rollout == "vpo_hf":
        ov.append(f'+actor_rollout_ref.rollout.custom={{stop:["{stop_string(m)}"]}}')
    if cpu:
        ov += [
            "trainer.device=cpu",
            # fp32 compute (bf16 autocast on CPU is slow and would blur the rollout-vs-actor check)
            "+actor_rollout_ref.actor.fsdp_config.mixed_precision={param_dtype:fp32,reduce_dtype:fp32,buffer_dtype:fp32}",
            "+actor_rollout_ref.ref.fsdp_config.mixed_precision={param_dtype:fp32,reduce_dtype:fp32,buffer_dtype:fp32}",
            # veRL's resource pools count Ray GPU resources only: logical GPUs drive the placement
            f"+ray_kwargs.ray_init.num_gpus={ranks}",
            "+ray_kwargs.ray_init.num_cpus=16",
            # TransferQueue's storage units each hold a logical CPU
            "transfer_queue.backend.SimpleStorage.num_data_storage_units=2",
            # no KV cache or device memory to free between rollout and training on the CPU (veRL would
            # otherwise resume the replica's weights and cache and hold a barrier in a side thread)
            "actor_rollout_ref.rollout.free_cache_engine=False",
        ]
    return ov


# ---------------------------------------------------------------------------------------------
# process bookkeeping: peak memory, and stopping what the run started
# ---------------------------------------------------------------------------------------------


PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Make this process the subreaper of what it starts (Linux ``prctl``): a process of the run whose
    parent exits (Ray's daemons double-fork) is re-parented here instead of to init, so it stays in
    this process's tree. Returns False where the call is unavailable."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, session id) of ``pid`` from ``/proc/<pid>/stat``; None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[-1].split()
    except OSError:
        return None
    return fields[0], int(fields[1]), int(fields[3])


def run_processes(marker: str, sid: int, root: int | None = None) -> list[int]:
    """The live processes of a run: the descendants of ``root`` (default: this process, a subreaper,
    see :func:`become_subreaper`), those in session ``sid`` (main_ppo's, started with
    ``start_new_session``), and those whose command line names ``marker`` (the run's Ray temp dir).
    Ray's workers share neither the run's process group nor (all of them) its session, so each of
    the three alone misses some."""
    root = os.getpid() if root is None else root
    me = os.getpid()
    info: dict[int, tuple[str, int, int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != me and (st := _stat(int(d))) is not None:
            info[int(d)] = st
    children: dict[int, list[int]] = {}
    for pid, (_, ppid, _) in info.items():
        children.setdefault(ppid, []).append(pid)
    mine, todo = set(), [root]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in mine:
                mine.add(c)
                todo.append(c)
    for pid, (_, _, s) in info.items():
        if pid in mine:
            continue
        if sid > 0 and s == sid:
            mine.add(pid)
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker in f.read().decode(errors="replace"):
                    mine.add(pid)
        except OSError:
            continue
    return sorted(p for p in mine if p in info and info[p][0] != "Z")  # a zombie has exited already


def _memory(pid: int) -> tuple[int, int]:
    """(RSS, PSS) of ``pid`` in bytes. PSS splits each shared page among the processes that map it,
    so PSS sums to what the run holds; summed RSS counts shared libraries once per process."""
    rss = pss = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Rss:"):
                    rss = int(line.split()[1]) * 1024
                elif line.startswith("Pss:"):
                    pss = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return rss, pss


class MemoryWatch(threading.Thread):
    """Samples the run's processes (:func:`run_processes`) every ``every`` seconds: the peaks of their
    summed PSS and summed RSS (bytes) and of their number."""

    def __init__(self, marker: str, every: float = 1.0) -> None:
        super().__init__(daemon=True)
        self.marker, self.every = marker, every
        self.sid = -1
        self.peak_pss = self.peak_rss = 0
        self.max_procs = 0
        self._halt = threading.Event()

    def sample(self) -> None:
        pids = run_processes(self.marker, self.sid)
        mem = [_memory(p) for p in pids]
        self.peak_rss = max(self.peak_rss, sum(r for r, _ in mem))
        self.peak_pss = max(self.peak_pss, sum(p for _, p in mem))
        self.max_procs = max(self.max_procs, len(pids))

    def run(self) -> None:
        while not self._halt.is_set():
            self.sample()
            self._halt.wait(self.every)

    def stop(self) -> None:
        self._halt.set()


def stop_processes(marker: str, sid: int, grace: float = 10.0) -> int:
    """SIGTERM, then SIGKILL, the run's leftover processes (by pid); returns how many there were."""
    pids = run_processes(marker, sid)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in pids:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
        deadline = time.time() + grace
        while time.time() < deadline and any(os.path.exists(f"/proc/{p}") for p in pids):
            time.sleep(0.2)
            _reap()
        pids = [p for p in pids if os.path.exists(f"/proc/{p}") and (_stat(p) or ("Z",))[0] != "Z"]
        if not pids:
            break
    return len(pids)


def _reap() -> None:
    """Collect exited children (as a subreaper this process inherits the run's orphans)."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass


# ---------------------------------------------------------------------------------------------


def prepare(
    task: str,
    num_answers: int,
    data_dir: Path,
    train_n: int,
    val_n: int,
    task_options: dict,
    splits: tuple[str, str] = ("train", "validation"),
) -> None:
    """The task's ``splits`` (train, validation) as ``train.parquet`` and ``validation.parquet`` in
    ``data_dir`` (:func:`data_dir_for`), unless both are there already."""
    if (data_dir / "train.parquet").exists() and (data_dir / "validation.parquet").exists():
        return
    sys.path.insert(0, str(HERE))
    import prepare_data

    rc = prepare_data.main(
        [
            "--task",
            task,
            "--task-options",
            json.dumps(task_options),
            "--num-answers",
            str(num_answers),
            "--out",
            str(data_dir),
            "--train-n",
            str(train_n),
            "--val-n",
            str(val_n),
            "--train-split",
            splits[0],
            "--val-split",
            splits[1],
        ],
        split_hint=SPLIT_HINT,
    )
    if rc:
        raise RecipeError(
            f"writing the task's prompts as veRL data failed (prepare_data.py, exit {rc}; its reason is above)"
        )


SPLIT_HINT = "run_cpu.py's --train-split and --val-split choose the splits"
"""What prepare_data.py's error line suggests when the recipe runs it (its own --train-split none,
a validation file alone, is no training run)."""

VAL_SPLITS = ("validation", "test")
"""The validation split the recipe takes without ``--val-split``: the first of these the task has
(the docs/tasks.md example has train and test only)."""


def choose_val_split(spec: str, options: dict, requested: str | None) -> str:
    """``--val-split`` as given, else the first of :data:`VAL_SPLITS` the task loads an example of;
    ``ValueError`` (exit 2, before Ray) naming the flag when it has neither."""
    if requested:
        return requested
    from vpo import tasks

    task = tasks.get(spec, **options)
    reasons = []
    for split in VAL_SPLITS:
        try:
            if task.load(split, n=1):
                return split
            reasons.append(f"{split!r}: no examples")
        except Exception as e:  # noqa: BLE001 - the task's load(): its reason goes into the message
            reasons.append(f"{split!r}: {' '.join(str(e).split())}")
    raise ValueError(
        f"--task {spec}: no split to validate on ({'; '.join(reasons)}); give --val-split SPLIT, a split the task has "
        "(--val-split train validates on training prompts)"
    )


def check_policy(policy: str | None) -> None:
    """``--policy`` must be an HF checkpoint folder (its ``config.json``): a typo is refused at once
    (exit 2) instead of failing in make_policy's arguments or building a fresh policy at the typo."""
    if policy is None:
        return
    path = Path(policy).expanduser()
    if not path.exists():
        raise ValueError(
            f"--policy {policy}: no such directory (cwd {Path.cwd()}); give an HF checkpoint folder, or leave "
            "--policy out for maze and prog (the recipe builds their tiny policy)"
        )
    if not (path / "config.json").is_file():
        raise ValueError(
            f"--policy {policy}: no config.json there, so it is no HF checkpoint folder; give the folder that "
            "holds config.json and the weights"
        )


POLICY_TASKS = ("maze", "prog")
"""The tasks whose tiny policy the recipe builds itself (examples/verl/make_policy.py); any other task
needs ``--policy``."""


def resolve_task(task: str, options_json: str | None, policy: str | None) -> tuple[str, dict]:
    """``--task`` as every veRL process can import it (a ``path/to/file.py:factory`` made absolute: the
    workers run in the run directory) and its options: ``--task-options`` as given, else the CPU demo's
    options for maze and prog (what the built policy's warm start saw) and none for other tasks. The
    task is built once here, so a mistake is said before Ray starts (``ValueError``)."""
    spec = task.strip()
    left, sep, attr = spec.rpartition(":")
    if sep and (left.endswith(".py") or "/" in left):
        spec = f"{Path(left).expanduser().resolve()}:{attr}"
    if options_json is None:
        options = demo_task_options(spec) if spec in POLICY_TASKS else {}
    else:
        try:
            options = json.loads(options_json)
        except json.JSONDecodeError as e:
            raise ValueError(f"--task-options must be a JSON object, e.g. '{{\"size\": 7}}' ({e})") from None
        if not isinstance(options, dict):
            raise ValueError(f"--task-options must be a JSON object, got {type(options).__name__}")
    from vpo import tasks
    from vpo.errors import UserError

    try:
        tasks.get(spec, **options)
    except UserError as e:
        raise ValueError(" ".join(str(e).split())) from None
    if spec not in POLICY_TASKS and policy is None:
        raise ValueError(
            f"--task {task}: the recipe builds a policy for maze and prog only; give --policy, a checkpoint that "
            "can answer this task's prompts"
        )
    return spec, options


def short_name(task: str) -> str:
    """A file-name-safe name for a task spec (``/a/b/my_task.py:make`` -> ``my_task.py_make``)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", task.rpartition("/")[2])[-40:]


def task_source_digest(task: str) -> str | None:
    """A digest of the file that defines ``task`` (``path/to/file.py:factory``, or the module of
    ``module:factory``), so an edited task file writes its prompts anew; None for a registered name
    (vpo's own code) or a module whose file cannot be found."""
    import hashlib
    import importlib.util

    left, sep, _ = task.rpartition(":")
    if not sep:
        return None
    if left.endswith(".py") or "/" in left:
        path = Path(left).expanduser()
    else:
        try:
            found = importlib.util.find_spec(left)
        except (ImportError, ValueError):
            return None
        if found is None or not found.origin or not Path(found.origin).is_file():
            return None
        path = Path(found.origin)
    try:
        return hashlib.sha1(path.read_bytes()).hexdigest()
    except OSError:
        return None


def data_dir_for(
    work: Path,
    task: str,
    options: dict,
    m: int,
    splits: tuple[str, str] = ("train", "validation"),
    sizes: tuple[int | None, int | None] = (256, 16),
) -> Path:
    """Where the prompts of ``task`` with ``options`` and m answers are cached: a changed option,
    split, example count or task file (:func:`task_source_digest`) writes them anew."""
    import hashlib

    name = short_name(task)
    what = [task, options, task_source_digest(task), list(splits), list(sizes)]
    key = hashlib.sha1(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:8]
    return work / f"data_{name}_{key}_m{m}"


def prompt_lengths(policy: Path, prompts: list) -> list[int]:
    """Token counts of chat ``prompts`` (lists of messages) under the policy's chat template, as veRL
    counts them for ``data.max_prompt_length`` (generation prompt included)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(policy))
    out = []
    for p in prompts:
        ids = tok.apply_chat_template(list(p), add_generation_prompt=True, tokenize=True)
        out.append(len(ids["input_ids"] if hasattr(ids, "keys") else ids))  # transformers 5 returns a dict
    return out


def check_prompt_lengths(policy: Path, data_dir: Path, limit: int) -> None:
    """veRL drops prompts longer than ``limit`` tokens (``data.filter_overlong_prompts``), and an empty
    split then fails deep inside Ray: refuse that here, and say how many a split loses."""
    import pandas as pd

    for split in ("train", "validation"):
        path = data_dir / f"{split}.parquet"
        if not path.exists():
            continue
        lengths = prompt_lengths(policy, [list(p) for p in pd.read_parquet(path)["prompt"]])
        over = sum(n > limit for n in lengths)
        if lengths and over == len(lengths):
            raise RecipeError(
                f"every {split} prompt is longer than --max-prompt-length {limit} tokens (the shortest has "
                f"{min(lengths)}), so veRL would drop them all; raise --max-prompt-length"
            )
        if over:
            print(
                f"[run_cpu] warning: {over} of {len(lengths)} {split} prompts are longer than --max-prompt-length "
                f"{limit} tokens and veRL drops them (the longest has {max(lengths)})",
                file=sys.stderr,
            )


def flat_steps(metrics_path: Path) -> tuple[int, int]:
    """(steps in which every group was flat, steps with vpo's metrics) in a veRL metrics file."""
    flat = total = 0
    if not metrics_path.exists():
        return 0, 0
    for line in metrics_path.read_text().splitlines():
        try:
            data = json.loads(line).get("data", {})
        except json.JSONDecodeError:
            continue
        if "vpo/flat_group_frac" in data:
            total += 1
            flat += data["vpo/flat_group_frac"] >= 1.0
    return flat, total


ROLLOUT_ERROR = "Error in _run_prompt"
"""What veRL's agent loop logs when a rollout (one session of a prompt) raised; the prompt's other
rollouts are still trained (``vpo.integrations.verl_plugin``: a lone survivor gets advantage 0)."""


def failed_rollouts(log: Path, context: int = 30) -> tuple[int, str]:
    """(how many rollouts veRL logged as failed, the first one's log lines with its traceback)."""
    if not log.exists():
        return 0, ""
    lines = log.read_text(errors="replace").splitlines()
    hits = [i for i, line in enumerate(lines) if ROLLOUT_ERROR in line]
    if not hits:
        return 0, ""
    # Ray prefixes each worker's lines with "(Name pid=N)": the traceback is that worker's lines that
    # follow, up to its next failure
    worker = re.match(r"^\S*\([^)]*pid=\d+[^)]*\)", lines[hits[0]])
    excerpt = [lines[hits[0]]]
    for line in lines[hits[0] + 1 : hits[0] + context]:
        if ROLLOUT_ERROR in line:
            break
        if worker is None or line.startswith(worker.group(0)):  # Ray interleaves other workers' lines
            excerpt.append(line)
    return len(hits), "\n".join(excerpt)


PROGRESS_EVERY = 20.0
"""Seconds between the progress lines printed while main_ppo runs (its own output goes to the log)."""


def steps_logged(metrics_path: Path) -> tuple[int, int]:
    """(the last training step veRL's file logger has written, how many steps it wrote): after a
    resume from a checkpoint at step s, the run's first step is s + 1, so the two differ."""
    last = count = 0
    try:
        lines = metrics_path.read_text().splitlines()
    except OSError:
        return 0, 0
    for line in lines:
        if '"training/global_step"' not in line:
            continue
        try:
            rec = json.loads(line)
            step = int(rec.get("data", {}).get("training/global_step", rec.get("step", 0)))
        except (json.JSONDecodeError, AttributeError, TypeError, ValueError):
            continue
        count += 1
        last = max(last, step)
    return last, count


def progress_phase(metrics_path: Path, steps: int) -> str:
    """What the progress line says of the steps: the last step done of ``steps``, and how many this
    run trained when it resumed from a checkpoint."""
    last, count = steps_logged(metrics_path)
    if count == 0:
        return "starting Ray, the workers and the model"
    if last > count:
        return f"step {last}/{steps} done ({count} in this run, resumed after step {last - count})"
    return f"step {last}/{steps} done"


def wait_with_progress(proc, timeout: float, watch: MemoryWatch, metrics_path: Path, steps: int, log: Path) -> int:
    """``proc.wait(timeout)``, printing a line to stderr every :data:`PROGRESS_EVERY` seconds: elapsed
    time, steps logged, the run's memory (PSS) and processes so far."""
    t0 = time.time()
    next_line = t0 + PROGRESS_EVERY
    while True:
        try:
            return proc.wait(timeout=max(0.1, min(next_line, t0 + timeout) - time.time()))
        except subprocess.TimeoutExpired:
            now = time.time()
            if now - t0 >= timeout:
                raise
            if now >= next_line:
                next_line = now + PROGRESS_EVERY
                phase = progress_phase(metrics_path, steps)
                print(
                    f"[run_cpu {time.strftime('%H:%M:%S')}] main_ppo {now - t0:.0f} s: {phase}; "
                    f"{watch.peak_pss / 2**30:.1f} GiB PSS, {watch.max_procs} processes at most (log: {log})",
                    file=sys.stderr,
                    flush=True,
                )


def run(args, extra: list[str]) -> dict:
    out = Path(args.out).expanduser().resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.work).expanduser().resolve() if args.work else out.parent
    m = answers_for(args.method)
    task, task_options = args.task_spec, args.task_option_values
    splits = (args.train_split, args.val_split)
    data_dir = data_dir_for(work, task, task_options, m, splits, (args.train_n, args.val_n))
    prepare(task, m, data_dir, args.train_n, args.val_n, task_options, splits)
    policy = Path(args.policy).expanduser().resolve() if args.policy else work / f"policy_{task}"
    if not (policy / "config.json").exists():
        sys.path.insert(0, str(HERE))
        import make_policy

        print(
            f"[run_cpu] building the tiny {task} policy ({args.warm_steps} warm-start steps, about 1-2 min on 2 "
            f"cores) -> {policy}",
            file=sys.stderr,
            flush=True,
        )
        make_policy.main(["--out", str(policy), "--domain", task, "--steps", str(args.warm_steps)])
    check_prompt_lengths(policy, data_dir, args.max_prompt_length)
    ov = overrides(
        method=args.method,
        task=task,
        model=str(policy),
        data_dir=str(data_dir),
        out=str(out),
        steps=args.steps,
        prompts_per_step=args.prompts_per_step,
        rollouts=args.rollouts,
        ranks=args.ranks,
        nodes=args.nodes,
        lr=args.lr,
        max_prompt_length=args.max_prompt_length,
        max_response_length=args.max_response_length,
        save_freq=args.save_freq,
        task_options=task_options,
    )
    ov += extra
    ray_tmp = f"/tmp/vpo_ray_{os.getpid()}_{int(time.time()) % 100000}"
    ov.append(f"+ray_kwargs.ray_init._temp_dir={ray_tmp}")
    tag = args.tag or f"run{int(time.time())}"
    env = {
        **os.environ,
        "VERL_PLATFORM": "cpu",
        "VERL_FILE_LOGGER_PATH": str(out / f"metrics.{tag}.jsonl"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "HYDRA_FULL_ERROR": "1",
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
        "MKL_NUM_THREADS": os.environ.get("MKL_NUM_THREADS", "1"),
        "VPO_VERL_THREADS": os.environ.get("VPO_VERL_THREADS", "1"),
        "RAY_DEDUP_LOGS": "0",
        "RAY_USAGE_STATS_ENABLED": "0",
        # a module:factory task is imported in every worker, which runs in the run directory
        "PYTHONPATH": os.pathsep.join(p for p in (os.getcwd(), os.environ.get("PYTHONPATH", "")) if p),
    }
    if args.dump:
        env["VPO_VERL_DUMP_DIR"] = str(Path(args.dump).expanduser().resolve())
    cmd = [sys.executable, "-m", "verl.trainer.main_ppo", *ov]
    (out / f"command.{tag}.json").write_text(json.dumps({"cmd": cmd}, indent=1))
    subreaper = become_subreaper()
    watch = MemoryWatch(ray_tmp)
    t0 = time.time()
    log_path = out / f"main_ppo.{tag}.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            cmd, env=env, cwd=str(out), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        watch.sid = proc.pid  # start_new_session: main_ppo leads a session of its own
        watch.start()
        try:
            rc = wait_with_progress(proc, args.timeout, watch, Path(env["VERL_FILE_LOGGER_PATH"]), args.steps, log_path)
        except (subprocess.TimeoutExpired, KeyboardInterrupt) as e:
            rc = 124 if isinstance(e, subprocess.TimeoutExpired) else 130
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    wall = time.time() - t0
    watch.stop()
    watch.join()
    leftovers = stop_processes(ray_tmp, proc.pid)
    _reap()
    shutil.rmtree(ray_tmp, ignore_errors=True)
    metrics_path = Path(env["VERL_FILE_LOGGER_PATH"])
    flat, logged = flat_steps(metrics_path)
    failed, _ = failed_rollouts(log_path)
    rec = {
        "tag": tag,
        "method": args.method,
        "task": task,
        "task_options": task_options,
        "steps": args.steps,
        "returncode": rc,
        "wall_s": round(wall, 1),
        "peak_pss_gib": round(watch.peak_pss / 2**30, 2),
        "peak_rss_sum_gib": round(watch.peak_rss / 2**30, 2),
        "max_processes": watch.max_procs,
        "process_tree": "subreaper" if subreaper else "session and Ray temp dir only",
        "leftover_processes": leftovers,
        "flat_steps": flat,
        "vpo_metric_steps": logged,
        "failed_rollouts": failed,
        "timed_out": rc == 124,
        "log": str(log_path),
        "metrics": env["VERL_FILE_LOGGER_PATH"],
    }
    if rc == 0 and args.save_freq > 0 and not args.no_model:
        settings = model_settings(task, task_options, m, args.method)
        model, why = export_model(out, settings, env, out / f"merge.{tag}.log")
        rec.update(model=str(model) if model else None, model_error=why or None)
    with open(out / RUNS_FILE, "a") as f:
        f.write(json.dumps(rec) + "\n")
    return rec


MODEL_DIR = "model"
"""``<out>/model``: the latest checkpoint's actor merged into an HF model (veRL's model_merger) with the
run's task, its options and m in ``vpo_args.json``, so ``vpo eval --model <out>/model`` evaluates it
as it evaluates a ``vpo train`` checkpoint (veRL's own ``huggingface/`` folder holds no weights)."""


def latest_actor(checkpoints: Path) -> tuple[Path, int] | None:
    """(the actor folder, its step) of the latest checkpoint veRL saved under ``checkpoints``
    (``latest_checkpointed_iteration.txt``); None without one."""
    try:
        step = int((checkpoints / "latest_checkpointed_iteration.txt").read_text().strip())
    except (OSError, ValueError):
        return None
    actor = checkpoints / f"global_step_{step}" / "actor"
    return (actor, step) if actor.is_dir() else None


def merge_command(actor: Path, target: Path) -> list[str]:
    """veRL's model merger: an FSDP actor checkpoint -> HF weights, config and tokenizer in ``target``."""
    return [
        sys.executable, "-m", "verl.model_merger", "merge", "--backend", "fsdp",
        "--local_dir", str(actor), "--target_dir", str(target),
    ]  # fmt: skip


def model_settings(task: str, task_options: dict, num_answers: int, method: str) -> dict:
    """The ``vpo_args.json`` beside the merged model: what ``vpo eval`` takes from a checkpoint (the
    task, its options, m) and where the weights came from (:func:`export_model` adds the step)."""
    return {
        "task": task,
        "task_options": task_options,
        "num_answers": num_answers,
        "verl_method": method,
        "trained_by": "veRL main_ppo (examples/verl/run_cpu.py)",
    }


def export_model(out: Path, settings: dict, env: dict, log: Path, run=subprocess.run) -> tuple[Path | None, str]:
    """Merge the latest checkpoint into ``<out>/model`` (:data:`MODEL_DIR`) and write its
    ``vpo_args.json``: (the folder, "") or (None, why not). The merger's output goes to ``log``; a
    failed merge leaves any earlier model in place."""
    found = latest_actor(out / "checkpoints")
    if found is None:
        return None, f"no checkpoint under {out / 'checkpoints'}"
    actor, step = found
    tmp, target = out / f"{MODEL_DIR}.partial", out / MODEL_DIR
    shutil.rmtree(tmp, ignore_errors=True)
    with open(log, "a") as f:
        rc = run(merge_command(actor, tmp), env=env, stdout=f, stderr=subprocess.STDOUT).returncode
    if rc != 0 or not any(tmp.glob("*.safetensors")) or not (tmp / "config.json").exists():
        shutil.rmtree(tmp, ignore_errors=True)
        return None, f"veRL's model_merger failed on {actor} (exit {rc}; its output is in {log})"
    (tmp / "vpo_args.json").write_text(json.dumps({**settings, "global_step": step}, indent=1))
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)
    return target, ""


RUNS_FILE = "run.jsonl"
"""The run records in ``<out>``: JSON Lines, one per run of this script there (a resume adds one)."""


def read_runs(out: Path) -> list[dict]:
    """The records of the runs into ``out`` (:data:`RUNS_FILE`), oldest first."""
    path = Path(out) / RUNS_FILE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def say_model(rec: dict) -> None:
    """Where the evaluable model is, and the command that evaluates it (or why there is none)."""
    if rec.get("model"):
        print(
            f"model: {rec['model']} (the latest checkpoint merged, with the run's task, options and m in its "
            f"vpo_args.json); evaluate it: vpo eval --model {rec['model']} --out {Path(rec['model']).parent / 'eval'}",
            file=sys.stderr,
        )
    elif rec.get("model_error"):
        print(f"warning: no evaluable model: {rec['model_error']}", file=sys.stderr)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1 :]
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--method", default="vpo", help="algorithm.adv_estimator: vpo, vpo_grpo, grpo (veRL's), ...")
    p.add_argument(
        "--task", default="maze",
        help="a registered task (maze, prog, ...; `vpo tasks`), module:factory or path/to/file.py:factory; "
        "a task other than maze or prog needs --policy",
    )  # fmt: skip
    p.add_argument(
        "--task-options", default=None,
        help="the task's options as a JSON object (default: the CPU demo's for maze and prog, none otherwise)",
    )  # fmt: skip
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--out", required=True, help="run directory (logs, metrics, checkpoints)")
    p.add_argument("--work", default=None, help="where data and the policy are cached (default: the out's parent)")
    p.add_argument("--policy", default=None, help="an HF checkpoint to start from (default: build the tiny one)")
    p.add_argument("--warm-steps", type=int, default=300, help="warm-start steps of the built policy")
    p.add_argument("--prompts-per-step", type=int, default=4)
    p.add_argument("--rollouts", type=int, default=4, help="rollouts per prompt (G)")
    p.add_argument(
        "--ranks", type=int, default=2,
        help="FSDP ranks per node (trainer.n_gpus_per_node, the micro batches and Ray's logical GPUs follow)",
    )  # fmt: skip
    p.add_argument("--nodes", type=int, default=1, help="Ray nodes (trainer.nnodes); more than 1 needs a Ray cluster")
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument(
        "--max-prompt-length", type=int, default=128,
        help="prompt tokens (data.max_prompt_length; longer prompts are dropped, and a split with none left is refused)",
    )  # fmt: skip
    p.add_argument("--max-response-length", type=int, default=48, help="response tokens (data.max_response_length)")
    p.add_argument(
        "--save-freq", type=int, default=None,
        help="checkpoint every N steps (default: --steps, one checkpoint at the end; -1: none). A rerun of the "
        "same command with a larger --steps resumes from the latest (trainer.resume_mode=auto)",
    )  # fmt: skip
    p.add_argument("--train-n", type=int, default=256)
    p.add_argument("--val-n", type=int, default=16)
    p.add_argument("--train-split", default="train", help="the task's split to train on (default: train)")
    p.add_argument(
        "--val-split", default=None,
        help="the task's split for veRL's validation file (default: validation, or test for a task without one)",
    )  # fmt: skip
    p.add_argument(
        "--no-model", action="store_true",
        help="do not merge the latest checkpoint into <out>/model (an HF model with the run's task, options and m "
        "in its vpo_args.json, for vpo eval --model)",
    )  # fmt: skip
    p.add_argument("--dump", default=None, help="VPO_VERL_DUMP_DIR: evidence files for the tests")
    p.add_argument("--tag", default=None, help="name of this run's log and metrics files")
    p.add_argument("--timeout", type=float, default=1800)
    args = p.parse_args(argv)
    if args.save_freq is None:  # a run that can be continued: one checkpoint at the end, at least
        args.save_freq = args.steps
    try:
        check_world(args.prompts_per_step, args.rollouts, args.ranks, args.nodes)
        check_policy(args.policy)
        args.task_spec, args.task_option_values = resolve_task(args.task, args.task_options, args.policy)
        args.val_split = choose_val_split(args.task_spec, args.task_option_values, args.val_split)
    except ValueError as e:
        print(f"run_cpu.py: {e}", file=sys.stderr)
        return 2
    try:
        rec = run(args, extra)
    except RecipeError as e:
        print(f"run_cpu.py: {e}", file=sys.stderr)
        return 2
    print(json.dumps(rec))
    if rec.get("flat_steps"):
        print(
            f"warning: no learning signal in {rec['flat_steps']} of {rec['vpo_metric_steps']} steps: every group's "
            "rollouts scored alike, so every advantage was 0 (vpo/flat_group_frac, vpo/parse_failure_rate in "
            f"{rec['metrics']})",
            file=sys.stderr,
        )
    first_failure = failed_rollouts(Path(rec["log"]))[1] if rec.get("failed_rollouts") else ""
    if first_failure:
        print(
            f"warning: {rec['failed_rollouts']} rollout(s) failed in veRL's agent loop ({ROLLOUT_ERROR!r} in "
            f"{rec['log']}); their prompts trained on the rollouts they had. The first:\n{first_failure}",
            file=sys.stderr,
        )
    if rec["returncode"] == 0 and args.save_freq > 0:
        print(
            f"checkpoints: {Path(args.out).expanduser().resolve() / 'checkpoints'}; to train further, rerun this "
            "command with a larger --steps: it resumes from the latest checkpoint",
            file=sys.stderr,
        )
        say_model(rec)
    if rec["returncode"] != 0:
        lines = open(rec["log"], errors="replace").readlines()
        # Ray interleaves the workers' output: the cause (a Python error, a native abort) is rarely last
        marks = ("Error", "Traceback", "SIGABRT", "SIGSEGV", "malloc", "Killed", "OOM")
        errors = list(dict.fromkeys(line for line in lines if any(k in line for k in marks) and "Warning" not in line))
        print(f"main_ppo failed (exit {rec['returncode']}); error lines of {rec['log']}:", file=sys.stderr)
        print("".join(errors[:40]), file=sys.stderr)
        print("last lines:", file=sys.stderr)
        print("".join(lines[-25:]), file=sys.stderr)
        if first_failure:  # last, where a caller that keeps the tail of stderr still sees it
            print(f"{rec['failed_rollouts']} rollout(s) failed first; the first:\n{first_failure}", file=sys.stderr)
    return 0 if rec["returncode"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
