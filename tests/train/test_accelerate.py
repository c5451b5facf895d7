"""The trainer's multi-process path and the shipped accelerate configs.

* Two CPU processes for real: ``accelerate launch --config_file vpo/configs/accelerate/multi_gpu.yaml
  --num_processes 2 --mixed_precision no`` (torchrun; gloo, as no GPU is visible) runs
  tests/helpers/accelerate_worker.py: VPOTrainer on the tiny model for 2 steps, 6 rollouts per
  process with G = 4, so one group per step is split between the processes. Per step, the
  advantages each process kept equal ``vpo.core.compute_advantages`` on the rewards of both
  processes gathered in rank order (rollout by rollout; the weight sampler restored to the state it
  had), every group of G consecutive gathered rollouts is one prompt, and each row that reached the
  loss (after TRL's shuffle) carries the advantage of its own completion.
  (``accelerate launch --cpu --num_processes 2`` needs MPI: accelerate's CPU launcher starts one
  process without an mpirun hostfile; docs/training.md.)
* Every shipped accelerate config parses as accelerate's own ClusterConfig, with the keys a launch
  needs; the DeepSpeed ones carry a DeepSpeed plugin config whose keys ``accelerate launch`` knows.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

pytest.importorskip("trl")

ROOT = Path(__file__).resolve().parents[2]
ACCEL_DIR = ROOT / "vpo" / "configs" / "accelerate"
WORKER = ROOT / "tests" / "helpers" / "accelerate_worker.py"
G = 4


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def two_process_dumps(tmp_path_factory, tiny_model_dir):
    out = tmp_path_factory.mktemp("accel")
    env = dict(os.environ, PYTHONUNBUFFERED="1", CUDA_VISIBLE_DEVICES="")
    cmd = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--config_file",
        str(ACCEL_DIR / "multi_gpu.yaml"),
        "--num_processes",
        "2",
        "--mixed_precision",
        "no",
        "--main_process_port",
        str(_free_port()),
        str(WORKER),
        str(tiny_model_dir),
        str(out),
    ]
    r = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=500)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    return [torch.load(out / f"rank{k}.pt", weights_only=False) for k in (0, 1)]


def _key(ids, mask) -> tuple:
    return tuple(ids[mask.bool()].tolist())


@pytest.mark.slow
def test_two_cpu_processes_use_the_single_process_advantages(two_process_dumps):
    from vpo.core.estimators import compute_advantages
    from vpo.core.weights import SimplexSampler

    d0, d1 = two_process_dumps
    assert (d0["rank"], d1["rank"], d0["world"], d1["world"]) == (0, 1, 2, 2)
    assert d0["backend"] == "gloo" and d0["device"].startswith("cpu")
    assert len(d0["steps"]) == len(d1["steps"]) == 2
    for s0, s1 in zip(d0["steps"], d1["steps"]):
        # both processes drew from the same weight-sampler state
        assert s0["sampler_state"].keys() == s1["sampler_state"].keys()
        for k, v in s0["sampler_state"].items():
            w = s1["sampler_state"][k]
            assert torch.equal(v, w) if isinstance(v, torch.Tensor) else v == w, k
        index = s0["index"] + s1["index"]
        n_local = len(s0["index"])
        groups = [index[i : i + G] for i in range(0, len(index), G)]
        assert all(len(set(g)) == 1 for g in groups), index  # a group is one prompt's G rollouts
        assert len({g[0] for g in groups}) == len(groups)  # and no prompt is spread over two groups
        straddling = [i for i in range(len(groups)) if i * G < n_local < (i + 1) * G]
        assert straddling, "the run should split a group between the processes"

        rewards = torch.cat([s0["rewards"], s1["rewards"]]).float()
        valid = torch.cat([s0["valid"], s1["valid"]]).bool()
        K, alpha, kind, seed = d0["weight_sampler"]
        sampler = SimplexSampler(num_weightings=K, weight_alpha=alpha, weight_sampler=kind, seed=seed)
        sampler.load_state_dict(s0["sampler_state"])
        expected = compute_advantages(
            "vpo",
            rewards,
            valid,
            group_size=G,
            target_weights=d0["target_weights"],
            config=d0["estimator_config"],
            sampler=sampler,
        ).advantages.float()
        used = torch.cat([s0["advantages"], s1["advantages"]]).float()
        torch.testing.assert_close(used, expected, rtol=1e-5, atol=1e-6)
        # the check has teeth: the same advantages rotated within each group do not pass
        rotated = expected.view(-1, G).roll(1, dims=1).reshape(-1)
        assert not torch.allclose(used, rotated, rtol=1e-5, atol=1e-6)

    # what reached the loss on each process: a shuffle of its own rollouts, each with its advantage
    for d in (d0, d1):
        assert len(d["loss"]) == len(d["steps"])
        for s, loss in zip(d["steps"], d["loss"]):
            table: dict[tuple, list[float]] = {}
            for ids, mask, a in zip(s["completion_ids"], s["completion_mask"], s["advantages"].tolist()):
                table.setdefault(_key(ids, mask), []).append(a)
            assert len(loss["advantages"]) == len(s["advantages"])
            for ids, mask, a in zip(loss["completion_ids"], loss["completion_mask"], loss["advantages"].tolist()):
                assert any(abs(a - b) <= 1e-6 for b in table[_key(ids, mask)])


def _launch_dests() -> set[str]:
    from accelerate.commands.launch import launch_command_parser

    return {a.dest for a in launch_command_parser()._actions}


@pytest.mark.parametrize("path", sorted(ACCEL_DIR.glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_accelerate_configs_parse_as_accelerate_configs(path):
    from accelerate.commands.config.config_args import ClusterConfig, load_config_from_file
    from accelerate.utils import DistributedType

    raw = yaml.safe_load(path.read_text())
    assert isinstance(raw, dict)
    cfg = load_config_from_file(str(path))  # accelerate's own loader: unknown keys raise
    assert isinstance(cfg, ClusterConfig)
    for key in ("compute_environment", "distributed_type", "num_processes", "num_machines", "mixed_precision"):
        assert key in raw, f"{path.name}: no {key}"
    assert cfg.num_processes >= 1 and cfg.num_machines == 1 and cfg.mixed_precision in ("no", "fp16", "bf16")
    first = path.read_text().splitlines()[0]
    assert first.startswith("# accelerate launch --config_file vpo/configs/accelerate/" + path.name)
    if path.stem.startswith("deepspeed"):
        assert cfg.distributed_type == DistributedType.DEEPSPEED
        ds = raw["deepspeed_config"]
        assert isinstance(ds, dict) and ds, f"{path.name}: no DeepSpeed plugin config"
        assert ds["zero_stage"] == int(path.stem[-1])  # deepspeed_zero2 / deepspeed_zero3
        unknown = set(ds) - _launch_dests()
        assert not unknown, f"{path.name}: deepspeed_config keys accelerate launch does not know: {unknown}"
    else:
        assert cfg.distributed_type == DistributedType.MULTI_GPU and not raw.get("deepspeed_config")
