"""scripts/compare_runs.py: which models two demo runs share bit for bit (the reproduction check)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _mod():
    spec = importlib.util.spec_from_file_location("compare_runs", ROOT / "scripts" / "compare_runs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _model(d: Path, weights: bytes, losses: list[float] | None = None) -> None:
    d.mkdir(parents=True)
    (d / "model.safetensors").write_bytes(weights)
    if losses is not None:
        hist = [{"loss": x, "step": i} for i, x in enumerate(losses)] + [{"train_runtime": 1.0}]
        (d / "trainer_state.json").write_text(json.dumps({"log_history": hist}))


def test_identical_models_pass_and_one_changed_byte_fails(tmp_path, capsys):
    mod = _mod()
    a, b = tmp_path / "a", tmp_path / "b"
    for run in (a, b):
        _model(run / "warmstart_s1", b"warm")
        _model(run / "runs" / "vpo_s1", b"vpo", [0.5, 0.25])
    _model(a / "runs" / "grpo_s1", b"grpo", [0.1])  # only in a: not compared
    assert mod.main([str(a), str(b), "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["shared"] == out["identical"] == out["same_losses"] == 2 and out["only_in_a"] == ["runs/grpo_s1"]
    (b / "runs" / "vpo_s1" / "model.safetensors").write_bytes(b"vpO")
    assert mod.main([str(a), str(b)]) == 1
    assert "1 of 2 shared models identical" in capsys.readouterr().out
    res = mod.compare(a, b)
    assert [r["model"] for r in res["rows"] if not r["same_weights"]] == ["runs/vpo_s1"]


def test_losses_are_compared_exactly(tmp_path):
    mod = _mod()
    _model(tmp_path / "a" / "runs" / "vpo_s1", b"w", [0.5, 0.25])
    _model(tmp_path / "b" / "runs" / "vpo_s1", b"w", [0.5, 0.2500001])
    (row,) = mod.compare(tmp_path / "a", tmp_path / "b")["rows"]
    assert row["same_weights"] and not row["same_losses"]


def test_runs_that_share_no_model_exit_2(tmp_path, capsys):
    mod = _mod()
    _model(tmp_path / "a" / "runs" / "vpo_s1", b"w")
    (tmp_path / "b").mkdir()
    assert mod.main([str(tmp_path / "a"), str(tmp_path / "b")]) == 2
    assert "share no model" in capsys.readouterr().err
