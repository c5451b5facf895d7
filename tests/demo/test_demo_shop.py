"""The demo's pretrained-model domain (vpo/demo/shop.py): its own defaults and quick settings, the
LoRA train config with a resolved base path, the adapter as the train job's output, --model, and
the statistics' hooks (the same product twice is one answer; the fronts are the task's)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from vpo.demo.cli import config_from_args
from vpo.demo.config import DemoConfig
from vpo.demo.domains import DOMAINS
from vpo.demo.report import reproduce_command
from vpo.demo.stages import build_jobs, train_config
from vpo.errors import UserError


class Args:
    """What argparse hands config_from_args."""

    def __init__(self, **kw):
        self.out = self.seeds = self.methods = self.jobs = self.set = self.domain = self.model = None
        self.quick = self.warm_only = False
        self.__dict__.update(kw)


def test_the_domain_starts_from_its_own_defaults_and_the_maze_keeps_its_own():
    shop = config_from_args(Args(domain="shop"))
    assert shop.methods == ("grpo_3x", "max_at_k", "vpo") and shop.rl_lr == 1e-3 and shop.beta == 0.0
    assert shop.ks == (1, 3, 10, 30) and shop.shop_model == "smollm2"
    assert config_from_args(Args()) == DemoConfig()
    assert config_from_args(Args(quick=True)) == DemoConfig.quick()
    quick = config_from_args(Args(domain="shop", quick=True, set=["rl_steps=3"]))
    assert quick.seeds == (0,) and quick.methods == ("grpo", "vpo") and quick.rl_steps == 3 and quick.eval_budget == 6


def test_model_flag_sets_the_shop_model_and_is_refused_for_the_tiny_model_domains(tmp_path):
    assert config_from_args(Args(domain="shop", model=str(tmp_path))).shop_model == str(tmp_path)
    with pytest.raises(UserError, match="--model applies to --domain shop"):
        config_from_args(Args(model="smollm2"))
    with pytest.raises(UserError, match="lora_r"):
        DemoConfig.for_domain("shop", lora_r=0)
    with pytest.raises(UserError, match="shop_answer"):
        DemoConfig.for_domain("shop", shop_answer="index")


def test_train_config_is_lora_on_a_resolved_base_and_the_job_waits_for_the_adapter(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = DemoConfig.for_domain("shop", out="rel/demo", seeds=(0,))
    tc = train_config(cfg, "vpo", 0, Path("rel/demo/warmstart_s0"), Path("rel/demo/runs/vpo_s0"))
    assert tc["use_peft"] and tc["lora_r"] == 16 and tc["lora_alpha"] == 32 and "down_proj" in tc["lora_target_modules"]
    assert "cache_implementation" not in tc and tc["num_answers"] == 3 and tc["max_completion_length"] == 40
    assert tc["model_name_or_path"] == str(tmp_path / "rel/demo/warmstart_s0")
    g3 = train_config(cfg, "grpo_3x", 0, Path("w"), Path("r"))
    assert g3["num_generations"] == 3 * tc["num_generations"] and g3["max_completion_length"] == 12
    jobs = {j.name: j for j in build_jobs(cfg, Path("rel/demo"))}
    assert jobs["train vpo s0"].done_marker.name == "adapter_model.safetensors"
    maze = {j.name: j for j in build_jobs(DemoConfig(out="m", seeds=(0,)), Path("m"))}
    assert maze["train vpo s0"].done_marker.name == "model.safetensors"


def test_reproduce_command_names_the_domain_and_only_what_differs_from_its_defaults():
    cfg = DemoConfig.for_domain("shop", seeds=(0, 1), shop_model="/models/mine").as_dict()
    assert reproduce_command(cfg) == "vpo demo --out runs/demo --domain shop --set seeds=0,1 --model /models/mine"
    assert reproduce_command(DemoConfig(domain="prog").as_dict()) == "vpo demo --out runs/demo --domain prog"


def test_answer_key_counts_a_letter_and_its_name_as_one_product_and_fronts_are_the_tasks():
    from vpo.tasks.shop import ShopTask, pareto_items

    spec = DOMAINS["shop"]
    exs = ShopTask().load("validation", n=3)
    key = spec.answer_key(exs)
    assert key(1, "B") == key(1, exs[1]["items"][1]["name"]) == 1 and key(1, "Q") is None
    for f, ex in zip(spec.fronts(exs), exs):
        np.testing.assert_array_equal(f, pareto_items(ex))


def test_a_missing_model_directory_is_a_user_error(tmp_path):
    cfg = DemoConfig.for_domain("shop", shop_model=str(tmp_path / "nowhere"))
    with pytest.raises(UserError, match="holds no config.json"):
        cfg.domain_spec.prepare(cfg)


def test_on_a_gpu_the_warm_start_rl_and_evaluations_use_it():
    from vpo.demo.stages import eval_argv

    gpu = DemoConfig.for_domain("shop", shop_device="cuda")
    tc = train_config(gpu, "vpo", 0, Path("w"), Path("r"))
    assert tc["use_cpu"] is False and tc["bf16"] is True
    assert gpu.domain_spec.warm_kwargs(gpu)["device"] == "cuda"
    argv = eval_argv(gpu, Path("m"), 3, Path("e"), "vpo_s0", 0)
    assert argv[argv.index("--device") + 1] == "cuda"
    cpu = DemoConfig.for_domain("shop")
    assert train_config(cpu, "vpo", 0, Path("w"), Path("r"))["use_cpu"] is True
    assert "--device" not in eval_argv(DemoConfig(), Path("m"), 3, Path("e"), "vpo_s0", 0)
    with pytest.raises(UserError, match="shop_device"):
        DemoConfig.for_domain("shop", shop_device="tpu")


def test_demo_help_names_every_method_that_all_adds_and_the_shop_domain():
    import re

    from vpo.demo import cli
    from vpo.demo.config import ALL_METHODS, DEFAULT_METHODS, METHODS

    text = " ".join(cli.__doc__.split())
    for name in ALL_METHODS[len(DEFAULT_METHODS) :]:
        label = re.sub(r" \(m=3.*\)| \(ours\)", "", METHODS[name][0]).replace("GRPO", "").strip()
        assert label.split()[0].lower() in text.lower(), name
    assert "--model smollm2 --domain shop" in text
