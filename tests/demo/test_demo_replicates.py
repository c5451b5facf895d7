"""A replicate is independent end to end: with ``warm_start='per_replicate'`` (the default) each seed
trains from its own warm start, drawn from the seed (seed 0 draws what the shared warm start drew),
and the warm start is evaluated once per replicate; ``'shared'`` is the former design. A fresh test
split (``test_seed``) reaches the evaluations only. Records written before these settings read as the
shared warm start and the two-level bootstrap they were made with."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from vpo.demo.config import DemoConfig
from vpo.demo.stages import build_jobs, eval_entries, make_task, warm_dir, warm_pairs


def _train_inits(jobs) -> dict[str, str]:
    out = {}
    for j in jobs:
        if j.name.startswith("train"):
            conf = yaml.safe_load(open(j.argv[-1]).read())
            out[j.name] = conf["model_name_or_path"]
    return out


def test_each_replicate_trains_from_its_own_warm_start(tmp_path):
    cfg = DemoConfig(out=str(tmp_path), seeds=(0, 1), methods=("grpo", "vpo"))
    assert cfg.warm_start == "per_replicate" and cfg.warm_seeds() == (0, 1)
    jobs = build_jobs(cfg, tmp_path)
    inits = _train_inits(jobs)
    assert inits["train vpo s0"] == inits["train grpo s0"] == str(warm_dir(tmp_path, 0))
    assert inits["train vpo s1"] == str(warm_dir(tmp_path, 1)) != inits["train vpo s0"]
    names = {j.name for j in jobs}
    assert {"eval warmstart_m1_s0", "eval warmstart_m1_s1", "eval warmstart_m3_s0", "eval warmstart_m3_s1"} <= names
    assert "eval warmstart_m1" not in names
    by_name = {j.name: j for j in jobs}
    # each replicate's jobs depend on its own warm start's settings, and the two differ
    w0, w1 = cfg.warm_settings(0), cfg.warm_settings(1)
    assert w0 != w1 and by_name["train vpo s1"].settings["warm_start"] == w1
    assert by_name["eval warmstart_m3_s1"].settings["upstream"]["warm_start"] == w1
    rows = dict((k, runs) for k, _, runs in eval_entries(cfg))
    assert rows["warmstart_m1"] == ["warmstart_m1_s0", "warmstart_m1_s1"]


def test_the_shared_warm_start_is_the_former_design(tmp_path):
    cfg = DemoConfig(out=str(tmp_path), seeds=(0, 1), methods=("vpo",), warm_start="shared")
    jobs = build_jobs(cfg, tmp_path)
    assert set(_train_inits(jobs).values()) == {str(tmp_path / "warmstart")}
    assert {j.name for j in jobs if "warmstart" in j.name} == {"eval warmstart_m1", "eval warmstart_m3"}
    assert "replicate_seed" not in cfg.warm_settings()  # the shared record (and its hash) as before


def test_replicate_zero_draws_the_shared_warm_starts_answers_and_others_differ():
    cfg = DemoConfig(warm_answers_per_problem=2)
    task = make_task(cfg)
    train = task.load("train", n=6)
    shared = warm_pairs(cfg, task, train)
    assert warm_pairs(cfg, task, train, 0) == shared
    assert warm_pairs(cfg, task, train, 1) != shared


def test_a_fresh_test_split_reaches_the_evaluations_only(tmp_path):
    cfg = DemoConfig(out=str(tmp_path), seeds=(0,), methods=("vpo",), test_seed=7331)
    jobs = {j.name: j for j in build_jobs(cfg, tmp_path)}
    ev = jobs["eval vpo_s0"].argv
    assert json.loads(ev[ev.index("--task-options") + 1])["test_seed"] == 7331
    conf = yaml.safe_load(open(jobs["train vpo s0"].argv[-1]).read())
    assert "test_seed" not in json.loads(conf["task_options"])
    assert make_task(cfg).load("test", n=3) == make_task(DemoConfig()).load("test", n=3)  # training's task


def test_records_from_before_these_settings_read_as_what_they_were_run_with():
    shipped = json.loads((Path(__file__).resolve().parents[2] / "docs" / "demo" / "demo.json").read_text())["config"]
    cfg = DemoConfig.from_dict(shipped)
    assert cfg.warm_start == "shared" and cfg.interval == "two_level_bootstrap" and cfg.test_seed is None
    now = DemoConfig.from_dict(DemoConfig().as_dict())
    assert now.warm_start == "per_replicate" and now.interval == "replicate_t"
