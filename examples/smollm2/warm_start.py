"""Teach SmolLM2-135M-Instruct the m-answer tag format on the maze before RL (docs/gpu.md).

`vpo check runs/smollm2 --task maze ...` says "warm start first": the untuned model writes no
answer tags, so every rollout scores zero and RL has no signal. This fine-tunes the whole model on
(prompt, completion) pairs whose completions are random valid routes in the single- and 3-answer
tag formats (as the CPU demo's warm start does for its tiny model), with the model's chat template:

    vpo models fetch smollm2 --out runs/smollm2
    python examples/smollm2/warm_start.py --model runs/smollm2 --out runs/smollm2_maze_warm --device cuda
    vpo check runs/smollm2_maze_warm --task maze --task-options '{"size": 5}' --num-answers 3 ...
    vpo train examples/smollm2/maze_vpo_lora.yaml          # RL from the warm start, LoRA

Defaults are for one GPU (about a minute on an H100-class card: an estimate, not a measurement);
on CPU use --steps 30 --batch-size 4 to see it run (4.6-5.0 s a step here: scripts/smollm2_cpu_probe.sh).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np


def maze_route(rng):
    """A random valid route with the breadth of the CPU demo's warm start (its warm_waypoints and
    warm_wander defaults)."""
    from vpo.demo.domains import DOMAINS
    from vpo.tasks.maze import Maze, random_route

    maze = DOMAINS["maze"].settings
    waypoints, wander = maze["warm_waypoints"].default, maze["warm_wander"].default

    def route(ex):
        return random_route(Maze.from_example(ex), rng, waypoints=waypoints, wander=wander).moves

    return route


def pairs_for(task, examples, rng, answers_per_problem: int = 1, m: int = 3, answer=None) -> list[tuple[str, str]]:
    """(prompt, completion) pairs in the single- and m-answer tag formats; ``answer(example)`` draws
    one random valid answer (default: a maze route)."""
    from vpo.train.warmstart import format_answers

    route = answer or maze_route(rng)
    out = []
    for ex in examples:
        for _ in range(answers_per_problem):
            out.append((task.build_prompt(ex, 1), format_answers([route(ex)], 1)))
            out.append((task.build_prompt(ex, m), format_answers([route(ex) for _ in range(m)], m)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="the base checkpoint (vpo models fetch smollm2 --out DIR)")
    ap.add_argument("--out", required=True, help="where the warm-started checkpoint goes")
    ap.add_argument(
        "--task", default="maze",
        help="maze (default), or a path/to/file.py:factory whose module has random_answer(example, rng), "
        "e.g. examples/smollm2/shop_task.py:make_task",
    )  # fmt: skip
    ap.add_argument("--task-options", default=None, help="the task's options (JSON; default for the maze: 5x5)")
    ap.add_argument("--problems", type=int, default=500, help="training mazes (default 500)")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--dtype", default=None, help="weights' dtype, e.g. bfloat16 on a GPU (default float32)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if not (Path(args.model) / "config.json").exists():
        print(f"warm_start.py: {args.model} has no config.json; fetch the model first: "
              "vpo models fetch smollm2 --out runs/smollm2", file=sys.stderr)  # fmt: skip
        return 2
    from vpo.tasks import get
    from vpo.train.warmstart import supervised_warm_start

    options = json.loads(args.task_options) if args.task_options else ({"size": 5} if args.task == "maze" else {})
    task = get(args.task, **options)
    rng = np.random.default_rng(args.seed)
    answer = None
    if args.task != "maze":
        answer = _random_answer(args.task, rng)
        if answer is None:
            return 2
    pairs = pairs_for(task, task.load("train", n=args.problems), rng, answer=answer)
    info = supervised_warm_start(
        args.model, args.out, pairs, steps=args.steps, batch_size=args.batch_size, learning_rate=args.lr,
        warmup_steps=min(50, max(1, args.steps // 10)), seed=args.seed, device=args.device, dtype=args.dtype,
        log_every=max(1, min(50, args.steps // 4)),
    )  # fmt: skip
    print(
        f"warm start: {len(pairs)} pairs, {args.steps} steps, loss {info['loss_first']:.3f} -> {info['loss_last']:.3f}"
    )
    print(f"saved to {args.out}")
    return 0


def _random_answer(spec: str, rng):
    """The ``random_answer(example, rng)`` beside a path:factory task, bound to ``rng``."""
    from vpo.tasks.registry import load_factory

    module = sys.modules[load_factory(spec).__module__]
    fn = getattr(module, "random_answer", None)
    if fn is None:
        print(f"warm_start.py: {spec.split(':')[0]} defines no random_answer(example, rng); the warm start "
              "needs one to draw valid answers", file=sys.stderr)  # fmt: skip
        return None
    return lambda ex: fn(ex, rng)


if __name__ == "__main__":
    sys.exit(main())
