"""Problems to evolve, and how one completion becomes candidate programs.

A problem is an OpenEvolve example folder (:func:`problem_from_dir`: ``initial_program.py`` +
``evaluator.py`` + optional ``problem.yaml``) or one example of a vpo task
(:func:`problems_from_task`, e.g. ``code``: the task's objectives are the reward vector, its
``w*`` the weights). :func:`split_programs` cuts a completion into at most m programs with vpo's
``code`` answer format; :func:`code_key` is the whitespace-insensitive identity used to drop
duplicates and unchanged rewrites.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from vpo.integrations.evolve.config import EvolveProblem


def code_key(code: str) -> str:
    return "\n".join(line.rstrip() for line in code.strip().splitlines() if line.strip())


def split_programs(completion: str, m: int) -> list[str]:
    """The first ``m`` fenced code blocks of ``completion`` (vpo's ``code`` answer format), in order.

    Never raises on any string; a completion without a fenced block gives ``[]``.
    """
    from vpo.core.answers import parse_answers

    return [p.strip("\n") + "\n" for p in parse_answers(completion, m, "code")]


def problem_from_dir(path: str | os.PathLike) -> EvolveProblem:
    """An OpenEvolve example folder: ``initial_program.py`` + ``evaluator.py`` (+ ``problem.yaml``
    with optional ``name``, ``description``, ``objectives``, ``target_weights``)."""
    import yaml

    d = Path(path)
    init, ev = d / "initial_program.py", d / "evaluator.py"
    for f in (init, ev):
        if not f.is_file():
            raise ValueError(
                f"problem folder {d}: missing {f.name} (OpenEvolve layout: initial_program.py + evaluator.py)"
            )
    meta = {}
    if (d / "problem.yaml").is_file():
        meta = yaml.safe_load((d / "problem.yaml").read_text()) or {}
        if not isinstance(meta, dict):
            raise ValueError(f"problem folder {d}: problem.yaml must be a mapping")
    unknown = set(meta) - {"name", "description", "objectives", "target_weights"}
    if unknown:
        raise ValueError(f"problem folder {d}: unknown keys in problem.yaml: {sorted(unknown)}")
    return EvolveProblem(
        name=str(meta.get("name") or d.name),
        initial_program=init.read_text(),
        evaluator=str(ev.resolve()),
        objectives=meta.get("objectives"),
        target_weights=meta.get("target_weights"),
        description=str(meta.get("description") or ""),
    )


def problems_from_task(
    task: str,
    task_options: Mapping | None = None,
    split: str = "test",
    n: int | None = None,
    seed: int | None = None,
) -> list[EvolveProblem]:
    """One problem per example of a vpo task (e.g. ``code``): the statement is the description, the
    starting program is the example's ``starter_code`` (or a stub), the task scores candidates.

    The problems are the task's own ``split`` (its ``load(split, n)``), the ones training and
    ``vpo eval`` use; ``seed`` (default None: the task's default) is passed to ``load`` only when
    given. It is not the search seed: for generated tasks (maze, prog) a load seed replaces the
    split's own seed and gives other problems."""
    t = build_task(task, task_options)
    out = []
    from vpo.tasks.registry import load_split

    loaded = load_split(t, split, n=n, seed=seed, spec=task)
    for i, ex in enumerate(loaded):
        start = ex.get("starter_code") or ex.get("initial_program") or "# write the solution here\n"
        pid = str(ex.get("id", i)).replace("/", "_")
        out.append(
            EvolveProblem(
                name=f"{t.name}-{pid}",
                initial_program=start if start.endswith("\n") else start + "\n",
                task=task,
                task_options=dict(task_options or {}),
                example=json.loads(json.dumps(ex, default=str)),
                objectives=list(t.objectives),
                target_weights=[float(x) for x in t.target_weights],
                description=t.question(ex),
            )
        )
    return out


def build_task(task: str, options: Mapping | None):
    """The task ``vpo.tasks.get`` builds (the one resolver: a registered name, ``module:factory``
    with the module found from the working directory too, or ``path/to/file.py:factory``)."""
    from vpo import tasks

    return tasks.get(task, **dict(options or {}))
