"""Per-step numbers of a CPU recipe run, from the files it wrote (``--dump`` dir and veRL's metrics file).

For every training step: the step time veRL logged, the mean score, and, pooling each prompt's G
rollouts x m answers as the TRL demo does (:mod:`vpo.search.poolstats`): the fraction of answers
that complete the maze (``completion`` = 1; ``--completion-index -1`` for tasks without such a
component, e.g. prog: an answer completes when any component is > 0) and the reward-space diversity among the completed ones
(mean pairwise L1 over a prompt's completed answers, 0 with fewer than two; averaged over prompts).

    python examples/verl/analyze_run.py --dump runs/verl_cpu/vpo/dump --metrics runs/verl_cpu/vpo/metrics.long.jsonl
"""

from __future__ import annotations

import argparse
import glob
import json
import os
from collections import defaultdict

import numpy as np


def _jsonl(paths):
    out = []
    for p in sorted(paths):
        with open(p) as f:
            out += [json.loads(line) for line in f if line.strip()]
    return out


def per_step(
    dump: str,
    metrics: str | None = None,
    completion_index: int | None = 0,
    prompts_per_step: int | None = None,
    rollouts: int | None = None,
) -> list[dict]:
    from vpo.search.poolstats import completed_diversity, completed_mask

    calls = sorted(_jsonl(glob.glob(os.path.join(dump, "estimator.*.jsonl"))), key=lambda r: r["time"])
    records = _jsonl(glob.glob(os.path.join(dump, "scores.*.jsonl")))
    scored = defaultdict(list)
    if calls:
        for r in records:
            scored[r["uid"]].append(r)
    else:
        # veRL's own estimators (e.g. grpo) write no estimator file, and without VPORewardManager the
        # score function keys a group by its prompt (repeated across epochs): the records, in the
        # order the one reward worker wrote them, are the steps, prompts_per_step x rollouts at a time
        if not (prompts_per_step and rollouts):
            raise SystemExit(
                "no estimator.*.jsonl in the dump (a veRL estimator): give --prompts-per-step and --rollouts"
            )
        size = prompts_per_step * rollouts
        for k in range(len(records) // size):
            chunk = records[k * size : (k + 1) * size]
            keys = [f"{k}|{r['uid']}" for r in chunk]
            for key, r in zip(keys, chunk):
                scored[key].append(r)
            calls.append({"uid": keys, "score": [r["score"] for r in chunk]})
    logged = {}
    if metrics:
        logged = {r["step"]: r["data"] for r in _jsonl([metrics]) if "timing_s/step" in r["data"]}
    first_step = min(logged) if logged else 1
    rows = []
    for k, call in enumerate(calls):
        step = first_step + k
        uids = list(dict.fromkeys(call["uid"]))
        done_frac, div = [], []
        for u in uids:
            rewards = np.array([r["rewards"] for r in scored[u]])  # [G, m, d]
            valid = np.array([r["valid"] for r in scored[u]])
            g, m, d = rewards.shape
            done = completed_mask(rewards, valid, completion_index).reshape(1, g * m)
            div.append(float(completed_diversity(rewards.reshape(1, g * m, d), done)[0]))
            done_frac.append(float(done.mean()))
        row = {
            "step": step,
            "score_mean": float(np.mean(call["score"])),
            "completed_frac": float(np.mean(done_frac)),
            "completed_diversity": float(np.mean(div)),
        }
        if step in logged:
            row["step_s"] = logged[step]["timing_s/step"]
        rows.append(row)
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dump", required=True)
    p.add_argument("--metrics", default=None)
    p.add_argument("--prompts-per-step", type=int, default=None, help="for runs with a veRL estimator (grpo)")
    p.add_argument("--rollouts", type=int, default=None, help="rollouts per prompt, for runs with a veRL estimator")
    p.add_argument("--completion-index", type=int, default=0, help="the 0/1 completion component; -1: any > 0")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = p.parse_args(argv)
    ci = None if args.completion_index < 0 else args.completion_index
    rows = per_step(args.dump, args.metrics, ci, prompts_per_step=args.prompts_per_step, rollouts=args.rollouts)
    if args.json:
        print(json.dumps(rows))
        return 0
    print("step  step_s  score  completed  completed_div")
    for r in rows:
        print(
            f"{r['step']:4d}  {r.get('step_s', float('nan')):6.1f}  {r['score_mean']:.3f}  "
            f"{r['completed_frac']:.3f}      {r['completed_diversity']:.3f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
