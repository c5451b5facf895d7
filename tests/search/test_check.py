"""vpo check: its rules on what the project knows (the shipped demos' warm starts: the default maze
and the programs should get "VPO likely to help", the maze's collinear control "VPO ≈ GRPO"), and the
command end to end on pools built to trip each rule."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from vpo.search.check import check_summary

ROOT = Path(__file__).resolve().parents[2]


def _warm_start_summary(demo_json: Path) -> dict:
    """The warm start (m = 3) row of a shipped demo as a check summary. The demo's warm starts were
    trained on the answer format, and the rows hold no valid-slot share: it is taken as 1."""
    d = json.loads(demo_json.read_text())
    row = d["methods"]["warmstart_m3"]
    at = lambda k: row["best_at_k"][str(k)]["mean"]  # noqa: E731
    kmax = max(d["config"]["ks"])
    return {
        "num_answers": 3,
        "k": kmax,
        "valid_share": 1.0,
        "rho_bar": row["collinearity"]["mean"],
        "best_at_1": at(1),
        "best_at_k": at(kmax),
    }, d["ceilings"]["w*"]


def test_the_rules_agree_with_the_shipped_demos():
    maze, maze_ceiling = _warm_start_summary(ROOT / "docs" / "demo" / "demo.json")
    got = check_summary(maze, maze_ceiling)
    assert got["verdict"] == "VPO likely to help", got
    assert any("exact ceiling" in n for n in got["notes"])  # no RL method beat this warm start at k = 30
    prog, prog_ceiling = _warm_start_summary(ROOT / "docs" / "demo" / "prog" / "demo.json")
    assert check_summary(prog, prog_ceiling)["verdict"] == "VPO likely to help"
    # the collinear control: the same warm start scored with collinear: true has rho-bar 1.00 (its table)
    table = (ROOT / "docs" / "demo" / "validation" / "collinear" / "table.md").read_text()
    rho = float(re.search(r"\| warmstart_m3 \|(?: [^|]+ \|){5} ([0-9.]+) \|", table).group(1))
    assert rho == pytest.approx(1.0)
    assert check_summary({**maze, "rho_bar": rho})["verdict"] == "VPO ≈ GRPO expected"


def test_format_and_headroom_rules():
    base = {"num_answers": 3, "k": 10, "valid_share": 0.6, "rho_bar": 0.3, "best_at_1": 0.5, "best_at_k": 0.8}
    assert check_summary({**base, "valid_share": 0.05})["verdict"] == "warm start first"
    assert check_summary({**base, "best_at_k": 0.51})["verdict"] == "no headroom"
    assert check_summary(base)["verdict"] == "VPO likely to help"
    assert check_summary({**base, "rho_bar": None})["verdict"] == "VPO likely to help"


def _save_pool(tmp_path, name, rewards, valid):
    from vpo.search.pools import Pool

    pool = Pool.from_arrays(rewards, valid, group_size=5, objectives=[f"o{j}" for j in range(rewards.shape[-1])])
    pool.save(tmp_path / name)
    return tmp_path / name


def test_the_command_on_pools_that_trip_each_rule(tmp_path, capsys):
    from vpo.cli import main

    rng = np.random.default_rng(0)
    x = rng.random((40, 3, 1))
    collinear = _save_pool(tmp_path, "collinear", np.repeat(x, 3, axis=-1), np.ones((40, 3), bool))
    spread = rng.random((40, 3, 3))
    tradeoff = _save_pool(tmp_path, "tradeoff", spread, np.ones((40, 3), bool))
    broken = _save_pool(tmp_path, "broken", spread, rng.random((40, 3)) < 0.03)
    verdicts = {}
    for p in (collinear, tradeoff, broken):
        assert main(["check", "--pool", str(p)]) == 0
        verdicts[p.name] = json.loads((p / "check.json").read_text())
        assert (p / "check.md").exists()
    out = capsys.readouterr().out
    assert "VPO ≈ GRPO expected" in out and "warm start first" in out
    assert next(iter(verdicts["collinear"].values()))["verdict"] == "VPO ≈ GRPO expected"
    assert next(iter(verdicts["tradeoff"].values()))["verdict"] == "VPO likely to help"
    assert next(iter(verdicts["broken"].values()))["verdict"] == "warm start first"
    assert main(["check"]) == 2  # nothing to check: one line, exit 2
    assert "give one of" in capsys.readouterr().err


def test_check_a_model_runs_vpo_eval_with_the_arguments_after_it(tiny_model_dir, tmp_path, capsys):
    """An untrained model does not write the answer format: warm start first."""
    from vpo.cli import main

    out = tmp_path / "chk"
    argv = ["check", str(tiny_model_dir), "--task", "maze", "--task-options", '{"size": 5}', "--num-answers", "3"]
    argv += ["--rollouts", "2", "--num-prompts", "2", "--max-new-tokens", "8", "--ks", "1,2", "--out", str(out)]
    assert main(argv) == 0
    checks = json.loads((out / "check.json").read_text())
    assert (out / "report.json").exists() and next(iter(checks.values()))["verdict"] == "warm start first"
    assert main(["check", str(tiny_model_dir), "--task", "maze"]) == 2  # no --out


def test_lost_slots_are_named_as_the_reports_columns_name_them():
    s = {
        "num_answers": 3,
        "k": 12,
        "valid_share": 0.4,
        "rho_bar": 0.2,
        "best_at_1": 0.1,
        "best_at_k": 0.5,
        "failure_shares": {"valid": 0.4, "no_tags": 0.35, "duplicates": 0.2, "malformed": 0.05},
    }
    notes = check_summary(s)["notes"]
    assert "answer slots lost: no answer tags 35.0%, duplicates 20.0%" in notes, notes
    assert not any("no_tags" in n for n in notes)
