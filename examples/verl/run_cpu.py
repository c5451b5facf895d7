"""veRL's real ``main_ppo`` with the vpo plugin on CPU: data, policy, overrides, one Ray run.

Runs in the veRL environment (``bash scripts/setup_verl_env.sh``); ``scripts/verl_cpu_run.sh`` is the
same with that interpreter. What it does:

1. writes the task's m-answer prompts as veRL parquet (``examples/verl/prepare_data.py``; maze or
   prog, ``--num-answers`` from the method: 3 for ``vpo``, 1 for ``grpo``/``vpo_grpo``);
2. builds the policy once (``examples/verl/make_policy.py``: the tiny Qwen2 and the demo's warm start);
3. runs ``python -m verl.trainer.main_ppo`` with :func:`overrides`: the vpo estimator and score
   function, 2 FSDP2 ranks on gloo (``VERL_PLATFORM=cpu``, :mod:`vpo.integrations.verl_cpu`), the
   ``vpo_hf`` rollout sampling from an HF copy of the policy, metrics to ``<out>/metrics.jsonl``;
4. Ray: main_ppo starts a local cluster in its own temp dir; when it exits, every process whose
   command line names that dir (and the run's process group) is stopped, by pid, and the count of
   leftovers is recorded.

``<out>/run.json`` records the command, the exit status, the wall time, the peak resident memory
of the run's processes and the number of Ray leftovers.

    .venv-verl/bin/python examples/verl/run_cpu.py --method vpo --steps 4 --out runs/verl_cpu/vpo
    .venv-verl/bin/python examples/verl/run_cpu.py --method grpo --steps 4 --out runs/verl_cpu/grpo
    # extra Hydra overrides after --, e.g.  -- trainer.save_freq=2
"""

from __future__ import annotations

import argparse
import json
import os
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
        f"+reward.custom_reward_function.reward_kwargs.task={task}",
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
        f"trainer.experiment_name={method}_{task}",
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


def _procs_of(marker: str, pgid: int) -> list[int]:
    """Pids whose command line names ``marker`` (the run's Ray temp dir) or that are in ``pgid``."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        pid = int(d)
        if pid == os.getpid():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                if f.read().rsplit(")", 1)[-1].split()[0] == "Z":
                    continue  # a zombie has already exited (its parent has not reaped it yet)
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().decode(errors="replace")
            mine = marker in cmd
            if not mine and pgid > 0:
                mine = os.getpgid(pid) == pgid
        except (OSError, ProcessLookupError):
            continue
        if mine:
            out.append(pid)
    return out


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0


class MemoryWatch(threading.Thread):
    """Samples the summed RSS of the run's processes every ``every`` seconds; ``peak`` in bytes."""

    def __init__(self, marker: str, every: float = 1.0) -> None:
        super().__init__(daemon=True)
        self.marker, self.every = marker, every
        self.pgid = -1
        self.peak = 0
        self.max_procs = 0
        self._stop = threading.Event()

    def run(self) -> None:
        while not self._stop.is_set():
            pids = _procs_of(self.marker, self.pgid)
            self.peak = max(self.peak, sum(_rss(p) for p in pids))
            self.max_procs = max(self.max_procs, len(pids))
            self._stop.wait(self.every)

    def stop(self) -> None:
        self._stop.set()


def stop_processes(marker: str, pgid: int, grace: float = 10.0) -> int:
    """SIGTERM, then SIGKILL, the run's leftover processes (by pid); returns how many there were."""
    pids = _procs_of(marker, pgid)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in pids:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
        deadline = time.time() + grace
        while time.time() < deadline and any(os.path.exists(f"/proc/{p}") for p in pids):
            time.sleep(0.2)
        pids = [p for p in pids if os.path.exists(f"/proc/{p}")]
        if not pids:
            break
    return len(pids)


# ---------------------------------------------------------------------------------------------


def prepare(task: str, num_answers: int, data_dir: Path, train_n: int, val_n: int, task_options: dict) -> None:
    if (data_dir / "train.parquet").exists() and (data_dir / "validation.parquet").exists():
        return
    sys.path.insert(0, str(HERE))
    import prepare_data

    prepare_data.main(
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
        ]
    )


def run(args, extra: list[str]) -> dict:
    out = Path(args.out).expanduser().resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.work).expanduser().resolve() if args.work else out.parent
    m = answers_for(args.method)
    data_dir = work / f"data_{args.task}_m{m}"
    task_options = demo_task_options(args.task)
    prepare(args.task, m, data_dir, args.train_n, args.val_n, task_options)
    policy = Path(args.policy).expanduser().resolve() if args.policy else work / f"policy_{args.task}"
    if not (policy / "config.json").exists():
        sys.path.insert(0, str(HERE))
        import make_policy

        make_policy.main(["--out", str(policy), "--domain", args.task, "--steps", str(args.warm_steps)])
    ov = overrides(
        method=args.method,
        task=args.task,
        model=str(policy),
        data_dir=str(data_dir),
        out=str(out),
        steps=args.steps,
        prompts_per_step=args.prompts_per_step,
        rollouts=args.rollouts,
        ranks=args.ranks,
        nodes=args.nodes,
        lr=args.lr,
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
    }
    if args.dump:
        env["VPO_VERL_DUMP_DIR"] = str(Path(args.dump).expanduser().resolve())
    cmd = [sys.executable, "-m", "verl.trainer.main_ppo", *ov]
    (out / f"command.{tag}.json").write_text(json.dumps({"cmd": cmd}, indent=1))
    watch = MemoryWatch(ray_tmp)
    t0 = time.time()
    log_path = out / f"main_ppo.{tag}.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            cmd, env=env, cwd=str(out), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        watch.pgid = proc.pid
        watch.start()
        try:
            rc = proc.wait(timeout=args.timeout)
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
    leftovers = stop_processes(ray_tmp, proc.pid)
    shutil.rmtree(ray_tmp, ignore_errors=True)
    rec = {
        "tag": tag,
        "method": args.method,
        "task": args.task,
        "steps": args.steps,
        "returncode": rc,
        "wall_s": round(wall, 1),
        "peak_rss_gib": round(watch.peak / 2**30, 2),
        "max_processes": watch.max_procs,
        "leftover_processes": leftovers,
        "timed_out": rc == 124,
        "log": str(log_path),
        "metrics": env["VERL_FILE_LOGGER_PATH"],
    }
    with open(out / "run.json", "a") as f:
        f.write(json.dumps(rec) + "\n")
    return rec


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1 :]
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--method", default="vpo", help="algorithm.adv_estimator: vpo, vpo_grpo, grpo (veRL's), ...")
    p.add_argument("--task", default="maze", choices=["maze", "prog"])
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
        "--save-freq", type=int, default=None,
        help="checkpoint every N steps (default: --steps, one checkpoint at the end; -1: none). A rerun of the "
        "same command with a larger --steps resumes from the latest (trainer.resume_mode=auto)",
    )  # fmt: skip
    p.add_argument("--train-n", type=int, default=256)
    p.add_argument("--val-n", type=int, default=16)
    p.add_argument("--dump", default=None, help="VPO_VERL_DUMP_DIR: evidence files for the tests")
    p.add_argument("--tag", default=None, help="name of this run's log and metrics files")
    p.add_argument("--timeout", type=float, default=1800)
    args = p.parse_args(argv)
    if args.save_freq is None:  # a run that can be continued: one checkpoint at the end, at least
        args.save_freq = args.steps
    try:
        check_world(args.prompts_per_step, args.rollouts, args.ranks, args.nodes)
    except ValueError as e:
        print(f"run_cpu.py: {e}", file=sys.stderr)
        return 2
    rec = run(args, extra)
    print(json.dumps(rec))
    if rec["returncode"] == 0 and args.save_freq > 0:
        print(
            f"checkpoints: {Path(args.out).expanduser().resolve() / 'checkpoints'}; to train further, rerun this "
            "command with a larger --steps: it resumes from the latest checkpoint",
            file=sys.stderr,
        )
    if rec["returncode"] != 0:
        lines = open(rec["log"], errors="replace").readlines()
        # Ray interleaves the workers' output: the cause (a Python error, a native abort) is rarely last
        marks = ("Error", "Traceback", "SIGABRT", "SIGSEGV", "malloc", "Killed", "OOM")
        errors = list(dict.fromkeys(line for line in lines if any(k in line for k in marks) and "Warning" not in line))
        print(f"main_ppo failed (exit {rec['returncode']}); error lines of {rec['log']}:", file=sys.stderr)
        print("".join(errors[:40]), file=sys.stderr)
        print("last lines:", file=sys.stderr)
        print("".join(lines[-25:]), file=sys.stderr)
    return 0 if rec["returncode"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
