"""VPO-native selection in ``vpo evolve``: per-island Dirichlet weightings, the
Pareto archive, parallel evaluation of a call's candidates, and end-to-end OpenEvolve runs on the
shipped example problems (examples/evolve/) driven by ``MutationLLM`` (a seeded random-mutation
fake, not a model) and ``ScriptedLLM`` (fixed completions)."""

from __future__ import annotations

import itertools
import json
import random
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("openevolve", reason="openevolve is not installed (pip install -e '.[evolve]')")

from vpo.integrations.evolve import (  # noqa: E402
    EvolveModel,
    EvolveSettings,
    MutationLLM,
    ParetoArchive,
    ScriptedLLM,
    VPOSelector,
    coverage,
    evolve_problem,
    island_weights,
    problem_from_dir,
)
from vpo.integrations.evolve.selection import dominates, population_strategy  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "evolve"


def _history(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "history.jsonl").read_text().splitlines() if x.strip()]


# -- island weightings --------------------------------------------------------------------------


def test_island_weights_differ_per_island_and_are_reproducible_from_the_seed():
    w = island_weights(4, 5, 1.0, seed=7)
    assert len(w) == 4 and all(len(row) == 5 for row in w)
    for row in w:
        assert min(row) >= 0 and abs(sum(row) - 1) < 1e-12
    assert len({tuple(row) for row in w}) == 4  # every island its own weighting
    assert island_weights(4, 5, 1.0, seed=7) == w  # same seed, same draw (whatever else ran)
    random.seed(123)
    assert island_weights(4, 5, 1.0, seed=7) == w  # independent of the global RNG
    assert island_weights(4, 5, 1.0, seed=8) != w
    # a small alpha concentrates each weighting on few components, a large one near uniform
    spiky, flat = island_weights(50, 5, 0.05, 0), island_weights(50, 5, 100.0, 0)
    assert sum(max(r) for r in spiky) / 50 > 0.8 and sum(max(r) for r in flat) / 50 < 0.3
    with pytest.raises(ValueError):
        island_weights(2, 3, 0.0, 0)


# -- island ranking uses its own weighting ------------------------------------------------------

# reward vectors: under w0 = (0.9, 0.1) the best is "a", under w1 = (0.1, 0.9) it is "b", and under
# the uniform w* it is "c" (0.6 > 0.5): each island's best differs by its weighting.
VECTORS = {"a": [1.0, 0.0], "b": [0.0, 1.0], "c": [0.6, 0.6], "d": [0.2, 0.1]}
WEIGHTS = [[0.9, 0.1], [0.1, 0.9]]


def _db_with_both_islands():
    """A real OpenEvolve ProgramDatabase with every program of VECTORS in both islands."""
    from openevolve.config import DatabaseConfig
    from openevolve.database import Program, ProgramDatabase

    db = ProgramDatabase(DatabaseConfig(num_islands=2, random_seed=0))
    for island in (0, 1):
        for name, r in VECTORS.items():
            pid = f"{name}{island}"
            db.programs[pid] = Program(
                id=pid,
                code=f"# {name}\n",
                metrics={"m0": r[0], "m1": r[1], "combined_score": sum(r) / 2},
                metadata={"vpo_rewards": r, "island": island},
            )
            db.islands[island].add(pid)
    return db


def _rewards(p):
    return p.metadata["vpo_rewards"]


def test_each_island_ranks_by_its_own_weighting():
    sel = VPOSelector(
        WEIGHTS,
        _rewards,
        exploration_ratio=0.0,
        exploitation_ratio=1.0,
        elite_count=1,
        archive_parent_ratio=0.0,
        archive_inspirations=0,
    )
    db = _db_with_both_islands()
    progs = [db.programs[f"{n}0"] for n in "abcd"]
    assert [p.id[0] for p in sel.ranked(progs, 0)] == ["a", "c", "d", "b"]
    assert [p.id[0] for p in sel.ranked(progs, 1)] == ["b", "c", "d", "a"]
    assert max(progs, key=lambda p: p.metrics["combined_score"]).id[0] == "c"  # OpenEvolve's w*^T r pick
    random.seed(0)
    for island, best in ((0, "a"), (1, "b")):
        for _ in range(5):  # exploitation with one elite: always the island's best under its own w
            parent, insp, how = sel.sample(db, island, ParetoArchive(), 2, None)
            assert (parent.id, how) == (f"{best}{island}", "exploitation")
            assert all(p.id.endswith(str(island)) for p in insp)  # inspirations stay in the island
    # the island's best leads the inspirations when the parent is someone else
    sel.exploitation_ratio, sel.exploration_ratio = 0.0, 1.0
    for _ in range(10):
        parent, insp, how = sel.sample(db, 1, ParetoArchive(), 2, None)
        assert how == "exploration"
        if parent.id != "b1":
            assert insp[0].id == "b1"


def test_population_strategy_ranks_cells_and_migrants_by_the_island_weighting():
    sel = VPOSelector(WEIGHTS, _rewards)
    strat = population_strategy(sel, migration_rate=0.25)
    db = _db_with_both_islands()
    a, c = db._program_state(db.programs["a0"]), db._program_state(db.programs["c0"])
    assert strat.replace_cell(None, a, c, 0) and not strat.replace_cell(None, c, a, 0)  # island 0: a beats c
    assert strat.replace_cell(None, c, a, 1) and not strat.replace_cell(None, a, c, 1)  # island 1: c beats a
    # migration: each island sends its top quarter (1 of 4) under its own w to its neighbour
    moves = strat.migrate(db._population_snapshot())
    assert sorted((m.program_id, m.target_island) for m in moves) == [("a0", 1), ("b1", 0)]


# -- Pareto archive -----------------------------------------------------------------------------


def _slow_front(added: list[tuple[str, list[float]]]) -> list[tuple[str, tuple]]:
    """Brute force: each distinct vector no other vector dominates, with the first id that reached it."""
    first: dict[tuple, str] = {}
    for pid, r in added:
        first.setdefault(tuple(r), pid)
    keep = []
    for v, pid in first.items():
        if not any(all(x >= y for x, y in zip(u, v)) and u != v for u in first):
            keep.append((pid, v))
    return sorted(keep)


def test_pareto_archive_is_exactly_the_non_dominated_set():
    arc = ParetoArchive()
    assert arc.add("p", [1, 0]) and arc.add("q", [0, 1])
    assert not arc.add("dup", [1, 0])  # an equal vector: the first program stays
    assert not arc.add("worse", [0.5, 0])  # dominated
    assert arc.add("tie", [0.5, 0.5])  # incomparable with both: kept
    assert arc.add("r", [1, 1])  # dominates everything: alone
    assert arc.ids() == ["r"] and arc.best == [1.0, 1.0]
    assert dominates([1, 1], [1, 0]) and not dominates([1, 0], [1, 0]) and not dominates([1, 0], [0, 1])

    rng = random.Random(0)
    for trial in range(300):  # small value sets: many ties and duplicates
        d = rng.choice([1, 2, 3, 4])
        values = rng.choice([[0.0, 1.0], [0.0, 0.5, 1.0], [0.0, 0.25, 0.5, 0.75, 1.0]])
        added = [(f"p{i}", [rng.choice(values) for _ in range(d)]) for i in range(rng.randint(1, 40))]
        arc = ParetoArchive()
        for pid, r in added:
            arc.add(pid, r)
        got = sorted((m["id"], tuple(m["rewards"])) for m in arc.members)
        assert got == _slow_front(added), (trial, added)
        assert arc.best == [max(r[j] for _, r in added) for j in range(d)]
        # what the archive says is non-dominated, pairwise
        for m1, m2 in itertools.permutations(arc.members, 2):
            assert not dominates(m1["rewards"], m2["rewards"]) and m1["rewards"] != m2["rewards"]
    state = json.loads(json.dumps(arc.state()))
    assert ParetoArchive.from_state(state).members == arc.members


def test_coverage_is_the_fraction_of_per_component_maxima_reached():
    assert coverage([1.0, 1.0, 1.0]) == 1.0
    assert coverage([1.0, 0.5, 0.0, 0.5]) == pytest.approx(0.5)
    assert coverage([1.5, -1.0]) == pytest.approx(0.5)  # clipped to [0, ceiling]
    assert coverage([]) == 0.0


# -- the mutation client ------------------------------------------------------------------------


def test_mutation_client_edits_the_current_program_reproducibly():
    import asyncio

    prompt = (
        "## Top Performing Programs\n### Program 1\n```python\nA = 7\nB = 9\n\ndef f(x):\n    return A * x + B\n```\n"
        "# Current Program\n```python\nA = 1\nB = 2\n\ndef f(x):\n    return A * x + B\n```\n"
        "```python\n# Your rewritten program here\n```\nWrite 3 genuinely different programs, each ..."
    )
    cur, others = MutationLLM.programs_in(prompt)
    assert cur.startswith("A = 1") and len(others) == 1 and others[0].startswith("A = 7")
    outs = [
        asyncio.run(MutationLLM(seed=s, crossover=0.0).generate_with_context("", [{"role": "user", "content": prompt}]))
        for s in (0, 0, 1)
    ]
    assert outs[0] == outs[1] and outs[0] != outs[2]
    from vpo.integrations.evolve import split_programs

    progs = split_programs(outs[0], 3)
    assert len(progs) == 3
    for p in progs:  # one constant moved by a nonzero step of at most 2; the function is untouched
        a, b = (int(line.split("=")[1]) for line in p.splitlines()[:2])
        assert (a != 1) + (b != 2) == 1 and abs(a - 1) + abs(b - 2) <= 2
        assert "return A * x + B" in p
    cross = asyncio.run(
        MutationLLM(seed=3, crossover=1.0).generate_with_context("", [{"role": "user", "content": prompt}])
    )
    assert any("A = 7" in p or "B = 9" in p or "A = 8" in p or "B = 10" in p for p in split_programs(cross, 3))


# -- parallel evaluation ------------------------------------------------------------------------

SLOW_EVALUATOR = """
import os
import time

def evaluate(program_path):
    t0 = time.time()
    time.sleep(1.0)
    code = open(program_path).read()
    with open(os.environ["VPO_TEST_EVAL_LOG"], "a") as f:
        f.write(f"{os.getpid()} {t0} {time.time()}\\n")
    return {"t0": float("A = 1" in code), "t1": float("B = 1" in code), "t2": float("A = 1" in code and "B = 1" in code)}
"""


def _prog(a: int, b: int) -> str:
    return f"```python\nA = {a}\nB = {b}\n\ndef f(x):\n    return A * x + B\n```"


def test_parallel_evaluation_matches_sequential_and_overlaps(tmp_path, monkeypatch):
    d = tmp_path / "slow"
    d.mkdir()
    (d / "initial_program.py").write_text("A = 0\nB = 0\n\ndef f(x):\n    return A * x + B\n")
    (d / "evaluator.py").write_text(SLOW_EVALUATOR)
    (d / "problem.yaml").write_text("objectives: [t0, t1, t2]\n")
    completion = "\n---\n".join([_prog(1, 0), _prog(0, 1), _prog(1, 1)])
    rows = {}
    for workers in (1, 3):
        log = tmp_path / f"eval_{workers}.log"
        monkeypatch.setenv("VPO_TEST_EVAL_LOG", str(log))
        model = EvolveModel("s", num_answers=3, client=ScriptedLLM([completion]))
        settings = EvolveSettings(budget=3, eval_workers=workers, eval_timeout=20.0, seed=0)
        s = evolve_problem(problem_from_dir(d), model, settings, tmp_path / f"run{workers}", progress=False)
        assert s["eval_workers"] == workers
        rows[workers] = [[c["rewards"] for c in r["candidates"]] for r in _history(tmp_path / f"run{workers}")]
        spans = [tuple(map(float, line.split()[1:])) for line in log.read_text().splitlines()][1:]  # call 1's three
        pids = {line.split()[0] for line in log.read_text().splitlines()[1:]}
        overlap = any(a[0] < b[1] and b[0] < a[1] for a, b in itertools.combinations(spans, 2))
        assert len(spans) == 3
        assert overlap == (workers == 3) and (len(pids) == 3) == (workers == 3)
    assert rows[1] == rows[3]  # same metrics, same slot order
    assert rows[3] == [[[0.0, 0.0, 0.0]], [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 1.0]]]


# -- end to end on the example problems ---------------------------------------------------------


def test_examples_score_through_the_sandbox():
    """Each example problem's evaluator: one component per test, 1 only for the exact value."""
    from vpo.integrations.evolve.worker import _load_evaluator_file

    for name, good, n in (("poly_fit", "A = 2\nB = -3\nC = 1\n", 8), ("tradeoff", "A = 2\nB = 5\n", 6)):
        d = EXAMPLES / name
        ev = _load_evaluator_file(d / "evaluator.py")
        init = (d / "initial_program.py").read_text()
        body = init.split("\n\n\n", 1)[1]
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write(good + "\n\n" + body)
        r = ev(f.name)
        assert len(r) == n
        if name == "poly_fit":
            assert all(v == 1.0 for v in r.values())
        else:  # client a's three tests pass, client b's do not (the clients disagree everywhere)
            assert [r[k] == 1.0 for k in ("a_0", "a_2", "a_4", "b_0", "b_2", "b_4")] == [True] * 3 + [False] * 3
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write("def f(x):\n    raise ValueError('no')\n")
        assert set(ev(f.name).values()) == {0.0}


def test_cli_selection_vpo_end_to_end_writes_the_new_report_fields(tmp_path, capsys):
    from vpo.cli import main

    out = tmp_path / "out"
    rc = main(
        [
            "evolve",
            "--problem",
            str(EXAMPLES / "tradeoff"),
            "--selection",
            "vpo",
            "--islands",
            "2",
            "--seed",
            "3",
            "--weight-alpha",
            "0.5",
            "--budget",
            "12",
            "--no-progress",
            "--out",
            str(out),
            "--model",
            "name=mut,num_answers=3,client=vpo.integrations.evolve:MutationLLM,seed=3",
        ]
    )
    assert rc == 0
    printed = capsys.readouterr().out
    assert "coverage" in printed and "archive" in printed
    report = json.loads((out / "report.json").read_text())
    r = report["models"]["mut"]
    run = r["runs"]["tradeoff"]
    sel = run["selection"]
    assert sel["mode"] == "vpo" and sel["seed"] == 3 and sel["weight_alpha"] == 0.5
    assert sel["island_weights"] == island_weights(2, 6, 0.5, 3)
    hist = _history(out / "mut" / "tradeoff")
    assert {h["parent_from"] for h in hist[1:]} <= {"archive", "exploration", "exploitation", "weighted"}
    cands = [(c["id"], c["rewards"]) for h in hist for c in h["candidates"]]
    assert sorted((m["id"], tuple(m["rewards"])) for m in run["pareto_archive"]) == _slow_front(cands)
    best = [max(v[j] for _, v in cands) for j in range(6)]
    assert run["component_best"] == best and run["coverage"] == pytest.approx(coverage(best))
    assert r["mean_coverage"] == pytest.approx(run["coverage"])
    assert r["mean_archive_size"] == len(run["pareto_archive"])
    assert len(r["curve_mean_coverage"]) == 13 and r["curve_mean_coverage"][-1] == pytest.approx(run["coverage"])
    assert all(a <= b + 1e-12 for a, b in zip(r["curve_mean_coverage"], r["curve_mean_coverage"][1:]))
    assert [h["budget_used"] for h in hist] == [0, 3, 6, 9, 12]
    # the archive is saved with the checkpoint and has each member's program
    ck = json.loads(next((out / "mut" / "tradeoff" / "checkpoints").glob("checkpoint_*/vpo_state.json")).read_text())
    assert [m["id"] for m in ck["archive"]["members"]] == [m["id"] for m in run["pareto_archive"]]
    assert all("def f(x)" in m["program"]["code"] for m in ck["archive"]["members"])


def test_vpo_run_is_reproducible_from_its_seed_across_processes(tmp_path):
    """Same seed, different string hashing (PYTHONHASHSEED): the same parents, candidates and archive."""
    import os
    import subprocess
    import sys

    hists = []
    for hs in ("1", "2"):
        out = tmp_path / hs
        cmd = [
            sys.executable,
            "-m",
            "vpo.cli",
            "evolve",
            "--problem",
            str(EXAMPLES / "poly_fit"),
            "--islands",
            "2",
            "--budget",
            "12",
            "--no-progress",
            "--out",
            str(out),
            "--model",
            "name=mut,num_answers=3,client=vpo.integrations.evolve:MutationLLM,seed=5,crossover=0.5",
        ]
        r = subprocess.run(
            cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONHASHSEED": hs}
        )
        assert r.returncode == 0, r.stderr[-2000:]
        hists.append(
            [
                (
                    h.get("parent_id"),
                    h.get("parent_from"),
                    [(c["id"], c["rewards"]) for c in h["candidates"]],
                    h["archive_ids"],
                )
                for h in _history(out / "mut" / "poly_fit")
            ]
        )
    assert hists[0] == hists[1] and len(hists[0]) == 5


def test_the_archive_survives_resume(tmp_path):
    """A run stopped after 6 candidates and resumed to 12 ends with the front of all 12 (and the
    initial program), so the archive came back from the checkpoint."""
    prob = problem_from_dir(EXAMPLES / "tradeoff")
    out = tmp_path / "run"
    for budget in (6, 12):
        s = evolve_problem(
            prob,
            EvolveModel("m", num_answers=3, client=MutationLLM(seed=2)),
            EvolveSettings(budget=budget, num_islands=2, seed=2, checkpoint_interval=1),
            out,
            resume=budget == 12,
            progress=False,
        )
    hist = _history(out)
    assert [h["budget_used"] for h in hist] == [0, 3, 6, 9, 12]
    cands = [(c["id"], c["rewards"]) for h in hist for c in h["candidates"]]
    front = _slow_front(cands)
    assert sorted((m["id"], tuple(m["rewards"])) for m in s["pareto_archive"]) == front
    assert any(pid in hist[2]["archive_ids"] for pid, _ in front)  # a pre-resume member is still there


def test_island_focus_in_the_prompt_and_default_selection_still_reports_the_archive(tmp_path):
    prob = problem_from_dir(EXAMPLES / "poly_fit")
    runs = {}
    for sel in ("vpo", "default"):
        llm = MutationLLM(seed=1)
        s = evolve_problem(
            prob,
            EvolveModel("m", num_answers=2, client=llm),
            EvolveSettings(budget=4, num_islands=2, selection=sel, seed=1),
            tmp_path / sel,
            progress=False,
        )
        runs[sel] = (s, llm)
    s, llm = runs["vpo"]
    w = island_weights(2, 8, 1.0, 1)
    first = llm.calls[0]["messages"][0]["content"]
    assert "# Island focus" in first and f"x_0: {w[0][0]:.2f}" in first
    s, llm = runs["default"]
    assert s["selection"]["mode"] == "default" and s["selection"]["island_weights"] is None
    assert "# Island focus" not in llm.calls[0]["messages"][0]["content"]
    assert s["pareto_archive"] and 0 < s["coverage"] <= 1
    assert {h["parent_from"] for h in _history(tmp_path / "default")[1:]} == {"openevolve"}
