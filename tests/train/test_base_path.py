"""A LoRA adapter names its base model by the path `vpo train` was given: that path is recorded
absolute (the adapter loads from any directory), and an adapter whose base moved, or that holds a
relative path from an older run, says so instead of suggesting a hub download."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from vpo.search.backends import ModelLoadError, adapter_base
from vpo.train.cli import check_run


def _model_dir(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text("{}")
    return path


def test_vpo_train_records_a_local_base_model_by_its_absolute_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _model_dir(tmp_path / "runs" / "base")
    model_args = SimpleNamespace(model_name_or_path="runs/base", use_peft=True)
    training_args = SimpleNamespace(task="maze", use_vllm=False, report_to=[])
    check_run(training_args, model_args)
    assert model_args.model_name_or_path == str(tmp_path / "runs" / "base")
    hub = SimpleNamespace(model_name_or_path=str(tmp_path / "runs" / "base"), use_peft=False)
    check_run(training_args, hub)  # already absolute: unchanged
    assert hub.model_name_or_path == str(tmp_path / "runs" / "base")


def _adapter(path: Path, base: str) -> Path:
    path.mkdir(parents=True)
    (path / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": base}))
    return path


def test_an_adapter_whose_base_moved_says_so(tmp_path):
    ad = _adapter(tmp_path / "adapter", str(tmp_path / "gone" / "base"))
    with pytest.raises(ModelLoadError, match="is gone"):
        adapter_base(ad)
    _model_dir(tmp_path / "gone" / "base")
    assert adapter_base(ad) == str(tmp_path / "gone" / "base")


def test_a_relative_base_from_an_older_run_names_where_it_was_relative_to(tmp_path, monkeypatch):
    ad = _adapter(tmp_path / "runs" / "lora", "runs/p35/warm")
    monkeypatch.chdir(tmp_path / "runs")  # not where the training ran
    with pytest.raises(ModelLoadError, match="relative to the directory the training ran in") as e:
        adapter_base(ad)
    assert "hf download" not in str(e.value)
    _model_dir(tmp_path / "runs" / "p35" / "warm")
    monkeypatch.chdir(tmp_path)  # where it ran: loads
    assert adapter_base(ad) == "runs/p35/warm"
