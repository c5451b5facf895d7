"""``vpo evolve --selection vpo`` (per-island Dirichlet weightings + Pareto archive) against
``--selection default`` (OpenEvolve's selection on ``w*^T r``) on the shipped example problems.

Real OpenEvolve runs (its database, prompt sampler, evaluator) on examples/evolve/poly_fit and
examples/evolve/tradeoff, candidates scored in vpo's sandbox, driven by ``MutationLLM``: a seeded
random-mutation client (not a model) that edits the integer constants of the programs the prompt
shows. The figures therefore show the search machinery (which parents and inspirations selection
puts in front of the writer), not a model's skill. Per (problem, selection), over seeds: problems
solved, the budget at which they were solved, the best ``w*^T r``, the Pareto archive's coverage
(mean over components of the best value reached) at thirds of the budget, and the archive's size.
Runs are reproducible: program ids follow (seed, call, slot) and the script runs with PYTHONHASHSEED=0.

    python benchmarks/evolve_islands.py                  # table
    python benchmarks/evolve_islands.py --json           # table, then one JSON object on the last line
    python benchmarks/evolve_islands.py --quick          # seconds, tiny sizes (CI: does it run)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBLEMS = ["poly_fit", "tradeoff"]
SELECTIONS = ["default", "vpo"]


def _at(curve: list, x: int) -> float:
    """A step curve ``[[budget, value, ...], ...]``'s value after ``x`` budget units."""
    v = float("nan")
    for row in sorted(curve, key=lambda r: r[0]):
        if row[0] <= x:
            v = row[1]
    return v


def one_run(problem: str, selection: str, seed: int, budget: int, answers: int, islands: int, out: Path) -> dict:
    from vpo.integrations.evolve import EvolveModel, EvolveSettings, MutationLLM, evolve_problem, problem_from_dir

    prob = problem_from_dir(ROOT / "examples" / "evolve" / problem)
    model = EvolveModel("mutation", num_answers=answers, client=MutationLLM(seed=seed))
    settings = EvolveSettings(
        budget=budget,
        num_islands=islands,
        seed=seed,
        selection=selection,
        checkpoint_interval=10_000,
        eval_timeout=30.0,
    )
    t0 = time.perf_counter()
    s = evolve_problem(prob, model, settings, out / f"{problem}_{selection}_{seed}", progress=False)
    thirds = [round(budget * k / 3) for k in (1, 2, 3)]
    return {
        "solved": bool(s["solved"]),
        "solved_at": s["solved_at"],
        "best_score": s["best_score"],
        "coverage": [_at(s["curve_archive"], x) for x in thirds],
        "archive_size": len(s["pareto_archive"]),
        "wall_s": time.perf_counter() - t0,
        "eval_workers": s["eval_workers"],
    }


def measure(budget: int, seeds: int, answers: int, islands: int, problems: list[str]) -> dict:
    out: dict = {
        "budget": budget,
        "seeds": seeds,
        "answers_per_call": answers,
        "islands": islands,
        "client": "MutationLLM (seeded random mutation, not a model)",
    }
    with tempfile.TemporaryDirectory(prefix="vpo_evolve_islands_") as tmp:
        for problem in problems:
            for sel in SELECTIONS:
                runs = [one_run(problem, sel, seed, budget, answers, islands, Path(tmp)) for seed in range(seeds)]
                key = f"{problem}_{sel}"
                at = [r["solved_at"] for r in runs if r["solved"]]
                out[f"{key}_solved"] = sum(r["solved"] for r in runs)
                out[f"{key}_solved_at_mean"] = statistics.mean(at) if at else None
                out[f"{key}_best_score_mean"] = statistics.mean(r["best_score"] for r in runs)
                for k, name in enumerate(("third", "two_thirds", "final")):
                    out[f"{key}_coverage_{name}"] = statistics.mean(r["coverage"][k] for r in runs)
                out[f"{key}_archive_size_mean"] = statistics.mean(r["archive_size"] for r in runs)
                out[f"{key}_coverage_final_per_seed"] = [r["coverage"][2] for r in runs]
                out[f"{key}_best_score_per_seed"] = [r["best_score"] for r in runs]
                out[f"{key}_wall_s_mean"] = statistics.mean(r["wall_s"] for r in runs)
                out[f"{key}_eval_workers"] = runs[0]["eval_workers"]
    return out


def table(r: dict, problems: list[str]) -> str:
    b = r["budget"]
    lines = [
        f"budget {b} candidates, m = {r['answers_per_call']}, {r['islands']} islands, {r['seeds']} seed(s); "
        f"client: {r['client']}",
        f"{'problem':10s} {'selection':9s} {'solved':>7s} {'at (mean)':>9s} {'best w*r':>9s} "
        f"{'cov@' + str(round(b / 3)):>7s} {'cov@' + str(round(2 * b / 3)):>7s} {'cov@' + str(b):>7s} "
        f"{'archive':>7s} {'wall s':>7s}",
    ]
    for p in problems:
        for sel in SELECTIONS:
            k = f"{p}_{sel}"
            at = r[f"{k}_solved_at_mean"]
            lines.append(
                f"{p:10s} {sel:9s} {r[k + '_solved']:>3d}/{r['seeds']:<3d} {'-' if at is None else f'{at:.1f}':>9s} "
                f"{r[k + '_best_score_mean']:9.3f} {r[k + '_coverage_third']:7.3f} {r[k + '_coverage_two_thirds']:7.3f} "
                f"{r[k + '_coverage_final']:7.3f} {r[k + '_archive_size_mean']:7.1f} {r[k + '_wall_s_mean']:7.1f}"
            )
    lines.append(f"per seed (seed 0..{r['seeds'] - 1}), coverage at the full budget / best w*r:")
    for p in problems:
        for sel in SELECTIONS:
            k = f"{p}_{sel}"
            cov = " ".join(f"{x:.3f}" for x in r[k + "_coverage_final_per_seed"])
            best = " ".join(f"{x:.3f}" for x in r[k + "_best_score_per_seed"])
            lines.append(f"  {p:10s} {sel:9s} {cov}  /  {best}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budget", type=int, default=45, help="candidates per run (default 45)")
    ap.add_argument("--seeds", type=int, default=4, help="seeds per (problem, selection) (default 4)")
    ap.add_argument("--answers", type=int, default=3, help="programs per call, m (default 3)")
    ap.add_argument("--islands", type=int, default=3, help="islands (default 3)")
    ap.add_argument("--quick", action="store_true", help="tiny sizes: budget 6, one seed")
    ap.add_argument("--json", action="store_true", help="also print one JSON object on the last line")
    a = ap.parse_args(argv)
    if argv is None and os.environ.get("PYTHONHASHSEED") != "0":
        # OpenEvolve's own selection draws from sets of ids, whose order follows string hashing:
        # fix it so that both selections give the same table on every run
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "PYTHONHASHSEED": "0"})
    if a.quick:
        a.budget, a.seeds = 6, 1
    r = measure(a.budget, a.seeds, a.answers, a.islands, PROBLEMS)
    print(table(r, PROBLEMS))
    if a.json:
        print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
