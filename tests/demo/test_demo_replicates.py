"""The demo's replication settings: warm starts as jobs (``warm_threads=1``), one shared warm start of
any seed (``shared_warm_seed``), noisy training rewards, and what a run records about where it ran."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("trl")

from vpo.demo.config import DemoConfig  # noqa: E402
from vpo.demo.stages import build_jobs, eval_argv, train_config, warm_dir  # noqa: E402
from vpo.errors import UserError  # noqa: E402


def test_warm_starts_become_jobs_with_one_thread(tmp_path):
    cfg = DemoConfig(out=str(tmp_path), seeds=(3, 4), methods=("grpo", "vpo"), warm_threads=1)
    jobs = {j.name: j for j in build_jobs(cfg, tmp_path)}
    assert {"warm start s3", "warm start s4"} <= set(jobs)
    w3 = jobs["warm start s3"]
    assert w3.argv[1:] == ["-m", "vpo.demo.warm_job", str(tmp_path), "3"]
    assert w3.done_marker == warm_dir(tmp_path, 3) / "warmstart.json"
    assert w3.settings == cfg.warm_settings(3)
    # every job of replicate 3 waits for its own warm start, and only for it
    assert jobs["train vpo s3"].after == ["warm start s3"]
    assert jobs["eval warmstart_m1_s3"].after == ["warm start s3"]
    assert jobs["eval vpo_s4"].after == ["train vpo s4"]
    assert max(jobs.values(), key=lambda j: j.cost).name.startswith("warm start")
    # two threads (the automatic count of a one-seed run): trained in process before the jobs
    two = DemoConfig(out=str(tmp_path / "b"), seeds=(3,), methods=("grpo",))
    assert not [j for j in build_jobs(two, tmp_path / "b") if j.name.startswith("warm start")]


def test_automatic_warm_threads_makes_warm_starts_jobs_when_they_fill_the_slots(tmp_path):
    default = DemoConfig(out=str(tmp_path))
    assert default.warm_threads == 0 and len(default.seeds) == 3
    assert default.warm_thread_count == 1 and default.warm_starts_as_jobs
    assert {j.name for j in build_jobs(default, tmp_path)} >= {"warm start s0", "warm start s1", "warm start s2"}
    # one warm start (one seed, or one shared by every seed) or one job slot: two threads, in process
    for cfg in (
        DemoConfig.quick(out=str(tmp_path)),
        DemoConfig(out=str(tmp_path), warm_start="shared"),
        DemoConfig(out=str(tmp_path), jobs=1),
    ):
        assert cfg.warm_thread_count == 2 and not cfg.warm_starts_as_jobs
    # an explicit count wins
    assert DemoConfig(out=str(tmp_path), warm_threads=2).warm_thread_count == 2
    assert DemoConfig(out=str(tmp_path), seeds=(0,), warm_threads=1).warm_starts_as_jobs
    # the warm start records the resolved count: a one-seed run's record is the one the explicit
    # default of before (2) wrote, so its warm start is reused on resume; three seeds record 1
    quick = DemoConfig.quick(out=str(tmp_path))
    assert quick.warm_settings(0) == DemoConfig.quick(out=str(tmp_path), warm_threads=2).warm_settings(0)
    assert default.warm_settings(0)["warm_threads"] == 1
    with pytest.raises(UserError, match="warm_threads must be a non-negative integer"):
        DemoConfig(out=str(tmp_path), warm_threads=-1)


def test_warm_job_refuses_a_seed_the_run_does_not_have(tmp_path, capsys):
    from vpo.demo.warm_job import main

    cfg = DemoConfig(out=str(tmp_path), seeds=(0, 1), methods=("grpo",), warm_threads=1)
    (tmp_path / "demo_config.json").write_text(json.dumps(cfg.as_dict()))
    assert main([str(tmp_path), "7"]) == 2
    assert "no warm start '7'" in capsys.readouterr().err
    assert main([str(tmp_path)]) == 2


def test_shared_warm_seed_picks_which_warm_start_every_replicate_shares(tmp_path):
    base = dict(out=str(tmp_path), seeds=(0, 1, 2), methods=("vpo",), warm_start="shared")
    zero = DemoConfig(**base)
    assert zero.warm_seeds() == (None,) and zero.warm_seed_of(2) is None
    one = DemoConfig(**base, shared_warm_seed=1)
    assert one.warm_seeds() == (1,) and {one.warm_seed_of(s) for s in (0, 1, 2)} == {1}
    # the shared warm start of seed 1 is replicate 1's own warm start: same record, same directory
    per = DemoConfig(out=str(tmp_path), seeds=(1,), methods=("vpo",))
    assert one.warm_settings(1) == per.warm_settings(1) and warm_dir(tmp_path, 1).name == "warmstart_s1"
    jobs = {j.name: j for j in build_jobs(one, tmp_path)}
    assert all(str(warm_dir(tmp_path, 1)) in " ".join(j.argv) for n, j in jobs.items() if n.startswith("eval warm"))
    with pytest.raises(UserError, match="warm_start=shared only"):
        DemoConfig(out=str(tmp_path), shared_warm_seed=1)


@pytest.mark.parametrize("domain,binary", [("maze", ["completion", "avoid_lava"]), ("prog", None)])
def test_noisy_training_rewards_reach_the_trainer_and_not_the_evaluation(tmp_path, domain, binary):
    cfg = DemoConfig(out=str(tmp_path), domain=domain, train_noise_sigma=0.2, train_noise_flip=0.1)
    tc = train_config(cfg, "vpo", 5, tmp_path / "init", tmp_path / "run")
    assert tc["task"] == "noisy"
    opts = json.loads(tc["task_options"])
    assert opts["task"] == cfg.domain_spec.task and opts["task_options"] == cfg.task_options()
    assert (opts["sigma"], opts["flip"], opts["seed"]) == (0.2, 0.1, 7005)
    assert opts["binary"] == (binary or [f"test_{i}" for i in range(1, cfg.prog_tests + 1)])
    task = cfg.domain_spec.make_task(cfg)
    assert set(opts["binary"]) <= set(task.objectives)
    argv = eval_argv(cfg, tmp_path / "run", 3, tmp_path / "ev", "vpo_s5", 5)
    assert argv[argv.index("--task") + 1] == cfg.domain_spec.task  # evaluation scores clean
    clean = train_config(DemoConfig(out=str(tmp_path), domain=domain), "vpo", 5, tmp_path / "init", tmp_path / "r")
    assert clean["task"] == cfg.domain_spec.task
    with pytest.raises(UserError, match="train_noise"):
        DemoConfig(out=str(tmp_path), train_noise_flip=1.5)


def test_a_run_records_its_environment_and_warm_start_fingerprints():
    from vpo.demo.report import _environment_lines
    from vpo.demo.runner import environment

    env = environment()
    assert env["versions"]["torch"] and env["versions"]["transformers"] and env["python"].count(".") == 2
    agg = {
        "config": {"seeds": [4, 5]},
        "environment": env,
        "warm_start": {
            "replicates": [
                {"loss_first": 1.8399655, "weights_sha256": "ab" * 32},
                {"loss_first": 1.84116, "weights_sha256": "cd" * 32},
            ]
        },
    }
    text = "\n".join(_environment_lines(agg))
    assert f"torch {env['versions']['torch']}" in text
    # the CPU too: the same packages train other models from the same seed on other kernels
    assert env["cpu"]["torch_capability"] and f"torch kernels {env['cpu']['torch_capability']}" in text
    old = {**agg, "environment": {k: v for k, v in env.items() if k != "cpu"}}  # a run recorded before
    assert "torch kernels" not in "\n".join(_environment_lines(old))
    assert "s4 1.83997 / abababababab" in text and "s5 1.84116 / cdcdcdcdcdcd" in text


@pytest.mark.parametrize("domain", ["maze", "prog"])
def test_the_report_reads_the_problems_the_evaluations_ran_on(tmp_path, domain):
    """With a fresh test split (test_seed) the report's problems are that split's, as the eval jobs
    (`vpo eval --task-options` with test_seed) drew them, not the task's default test split."""
    from vpo.demo.analysis import evaluation_examples

    cfg = DemoConfig(out=str(tmp_path), domain=domain, test_seed=20261201, eval_problems=5)
    task, examples = evaluation_examples(cfg)
    argv = eval_argv(cfg, tmp_path / "m", 1, tmp_path / "ev", "x", 0)
    opts = json.loads(argv[argv.index("--task-options") + 1])
    from vpo.tasks import get

    ran = get(cfg.domain_spec.task, **opts).load("test", n=5)
    assert [e["id"] for e in examples] == [e["id"] for e in ran]
    default = DemoConfig(out=str(tmp_path), domain=domain, eval_problems=5)
    assert [e["id"] for e in evaluation_examples(default)[1]] != [e["id"] for e in examples]
