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


def _record(d: Path, hashes: list[str], curves: dict[str, list[list[float]]], seeds=(1, 2)) -> None:
    d.mkdir(parents=True)
    rec = {
        "config": {"seeds": list(seeds)},
        "warm_start": {"replicates": [{"weights_sha256": h} for h in hashes]},
        "training_curves": {m: {"reward": v, "diversity": [[0.0] * len(x) for x in v]} for m, v in curves.items()},
    }
    (d / "demo.json").write_text(json.dumps(rec))


def test_report_folders_are_compared_by_their_records(tmp_path, capsys):
    """A shipped report folder has no model files: the warm starts' recorded hashes and every logged
    training-curve value are compared exactly instead."""
    mod = _mod()
    curves = {"vpo": [[0.1, 0.2], [0.3, 0.4]], "grpo": [[0.5, 0.5], [0.6, 0.7]]}
    _record(tmp_path / "a", ["aa" * 32, "bb" * 32], curves)
    _record(tmp_path / "b", ["aa" * 32, "bb" * 32], curves)
    assert mod.main([str(tmp_path / "a"), str(tmp_path / "b"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["records"] and out["shared"] == out["identical"] == 2 + 4
    changed = {"vpo": [[0.1, 0.2], [0.3, 0.4000001]], "grpo": curves["grpo"]}
    _record(tmp_path / "c", ["aa" * 32, "bc" * 32], changed)
    assert mod.main([str(tmp_path / "a"), str(tmp_path / "c")]) == 1
    res = mod.compare_records(tmp_path / "a", tmp_path / "c")
    assert [r["model"] for r in res["rows"] if not (r["same_weights"] or r["same_losses"])] == [
        "warmstart_s2",
        "runs/vpo_s2",
    ]
    _record(tmp_path / "d", ["aa" * 32], {"vpo": [[0.1, 0.2]]}, seeds=(1,))  # another seed set: only seed 1 shared
    res = mod.compare_records(tmp_path / "a", tmp_path / "d")
    assert res["shared"] == 2 and res["identical"] == 2 and "runs/grpo_s1" in res["only_in_a"]


def test_runs_with_neither_models_nor_records_exit_2(tmp_path, capsys):
    mod = _mod()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert mod.main([str(tmp_path / "a"), str(tmp_path / "b")]) == 2
