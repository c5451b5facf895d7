"""The uniform random answerer of a demo run as a job: ``python -m vpo.demo.baselines OUT SEED``.

With ``random_answerer`` set (the animals domain's default), every replicate gets a row that no model
wrote: for each evaluated problem, ``eval_budget`` answers drawn uniformly from what the problem lists
(:meth:`vpo.demo.domains.Domain.random_answer`), one answer per rollout (m = 1). The answers go
through the task's own parser and scorer in the answer format a policy writes, are saved as a pool in
``OUT/eval/random_s<SEED>/pool`` and evaluated by ``vpo eval --pool`` with the evaluation settings of
every other row, so the report compares them like any method: a method whose search is no better than
this row has learned nothing search can use. Token counts are 0 (nothing was generated).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

RANDOM_SEED_BASE = 31_337
"""The answerer's generator is seeded from this and the replicate's seed (apart from every other stream)."""


def random_pool(cfg, seed: int):
    """The uniform random answerer's pool on the evaluation problems (``vpo.search.Pool``)."""
    from vpo.demo.analysis import evaluation_examples
    from vpo.search.generate import prompt_ids
    from vpo.search.pools import Pool
    from vpo.train.warmstart import format_answers

    draw = cfg.domain_spec.random_answer(cfg)
    if draw is None:
        raise ValueError(f"the {cfg.domain} domain defines no uniform random answerer")
    task, examples = evaluation_examples(cfg)
    rng = np.random.default_rng([RANDOM_SEED_BASE, seed])
    R = cfg.eval_budget
    records = []
    for pid, ex in zip(prompt_ids(examples), examples):
        completions = [format_answers([draw(ex, rng)], 1) for _ in range(R)]
        scored = task.score_completions([ex] * R, completions, 1)
        records.append(
            {
                "prompt_id": pid,
                "completions": completions,
                "answers": scored.answers,
                "rewards": scored.rewards.tolist(),
                "valid": scored.valid.tolist(),
                "num_tokens": [0] * R,
            }
        )
    meta = {
        "task": task.name,
        "objectives": list(task.objectives),
        "target_weights": [float(x) for x in task.target_weights],
        "m": 1,
        "model": "uniform random answerer",
        "backend": "none",
        "split": cfg.split,
        "seed": seed,
        "name": f"random_s{seed}",
    }
    return Pool.from_records(records, task.objectives, task.target_weights, 1, meta)


def eval_argv(cfg, pool_dir: Path, out_dir: Path, name: str) -> list[str]:
    """``vpo eval --pool`` with the metrics settings of the demo's other evaluations."""
    return [
        "eval", "--pool", str(pool_dir), "--out", str(out_dir), "--name", name,
        "--ks", ",".join(map(str, cfg.ks)), "--eval-seeds", str(cfg.eval_seeds), "--no-plots", "--quiet",
    ]  # fmt: skip


def run(out: Path, seed: int) -> Path:
    """Write ``OUT/eval/random_s<seed>/`` (pool and report) for the run in ``OUT``; returns its folder."""
    import shutil
    import subprocess

    from vpo.demo.config import DemoConfig

    cfg = DemoConfig.load(out)
    name = f"random_s{seed}"
    ev = out / "eval" / name
    if ev.exists():
        shutil.rmtree(ev)  # a half-written folder of an interrupted job: redrawn (seconds)
    pool = random_pool(cfg, seed)
    pool.save(ev / "pool")
    # the command line in a child, as the demo's other evaluations run (vpo.cli sits above vpo.demo)
    rc = subprocess.run([sys.executable, "-m", "vpo.cli", *eval_argv(cfg, ev / "pool", ev, name)]).returncode
    if rc:
        raise SystemExit(rc)
    return ev


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or not args[1].lstrip("-").isdigit():
        print("usage: python -m vpo.demo.baselines OUT SEED", file=sys.stderr)
        return 2
    run(Path(args[0]), int(args[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
