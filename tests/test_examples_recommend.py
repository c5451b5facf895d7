"""examples/recommend runs end to end at its --quick size: a warm start that teaches
the tiny model to write catalog ids, one VPO and one GRPO step, pools on the test requests and the
report (with the budget constraint). Checks the report's keys, that scores are in range, that the
constrained figures never exceed the unconstrained ones, and that the personas score as documented."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "recommend"


def test_personas_score_items_as_documented():
    from vpo.tasks import get

    task = get(f"{EXAMPLE / 'task.py'}:make_task")
    assert task.objectives == ("budget", "novelty", "genre_fan", "critic")
    catalog = __import__("vpo_example_recommend_catalog").CATALOG
    assert len(catalog) == 36 and len({it["genre"] for it in catalog.values()}) == 6
    ex = next(e for e in task.load("test") if e["genre"] == "sci-fi")
    a1 = catalog["A1"]
    assert task.score(ex, "a1").tolist() == pytest.approx(
        [min(1, (60 - a1["price"]) / 45), 1 - a1["popularity"], 1.0, (a1["rating"] - 2.5) / 2.5]
    )
    assert task.score(ex, "A6")[2] == 1.0 and task.score(ex, "B6")[2] == 0.0
    assert task.score(ex, "A6")[0] < task.score(ex, "A1")[0] and task.score(ex, "A6")[1] > task.score(ex, "A1")[1]
    assert task.score(ex, "Z9").tolist() == [0, 0, 0, 0]  # unknown id: a wasted slot
    # a designed conflict: no item is best on every persona
    R = np.array([task.score(ex, i) for i in catalog])
    assert not any((R[i] >= R.max(0)).all() for i in range(len(R)))
    assert {e["genre"] for e in task.load("train")} == {e["genre"] for e in task.load("test")}
    assert not {e["question"] for e in task.load("train")} & {e["question"] for e in task.load("test")}


@pytest.mark.slow  # 13 s of CPU, but 48-127 s of wall time on the loaded 2-core machine
def test_quick_run_writes_the_report(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE / "run.py"), "--out", str(tmp_path), "--quick"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    doc = json.loads((tmp_path / "eval" / "report.json").read_text())
    assert doc["methods"] == ["warmstart_m3", "vpo", "grpo"]
    for name, res in doc["results"].items():
        assert res["objectives"] == ["budget", "novelty", "genre_fan", "critic"]
        assert res["shape"]["m"] == (1 if name == "grpo" else 3)
        M, C = res["metrics"], res["constrained"]
        for key in ("best_at_k", "pass_at_k", "ew_best_at_k", "best_at_k_exact"):
            assert M[key]["k"] == [1, 3, 6]
            assert all(0.0 <= x <= 1.0 for x in M[key]["mean"]), (name, key)
        for key in ("diversity", "pass_at_1", "reward_at_1", "valid_answer_frac"):
            assert key in M
        assert 0 <= M["diversity"]["mean"] <= 4
        # the warm start taught the format: most slots hold a catalog id (0.89 at the quick size)
        assert M["valid_answer_frac"]["mean"] > 0.5, name
        assert C["constraints"] == ["budget>=0.5"] and 0.0 <= C["filtered_frac"] <= 1.0
        for key in ("best_at_k", "ew_best_at_k", "pass_at_k"):  # a constraint can only lower them
            assert all(c <= u + 1e-12 for c, u in zip(C["metrics"][key]["mean"], M[key]["mean"])), (name, key)
        assert summary[name]["best_at_k"] == pytest.approx(M["best_at_k"]["mean"], abs=1e-4)
    assert (tmp_path / "eval" / "vpo" / "pool" / "pool.npz").exists()
    md = (tmp_path / "eval" / "report.md").read_text()
    assert "## Under hard constraints" in md and "| vpo |" in md and "| grpo |" in md
