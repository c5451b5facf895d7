"""Evolutionary search with the prog demo's trained checkpoints (docs/demo.md, "Search with the trained models").

    python scripts/prog_evolve_study.py --demo runs/prog --out docs/demo/prog/evolve --methods grpo,grpo_3x,max_at_k,vpo
    python scripts/prog_evolve_study.py --demo runs/prog --out /tmp/evo --problems 4 --calls 10 --seeds 0 --json

Two parts, both real ``vpo evolve`` runs (OpenEvolve's database and evaluator, vpo's islands and
Pareto archive) on the hardest held-out problems of a finished ``vpo demo --domain prog`` run:
the ``--problems`` that the fewest of its evaluation pools (every method and seed, k = 30 answers
each) solved, starting with those that none solved.

1. **OpenEvolve's own prompt.** Each checkpoint is asked with the real evolve prompt
   (``LocalHFClient``) for ``--probe-calls`` calls on one problem; the script reports the prompt's
   length in the checkpoint's tokens against its context window and the prompts it was trained on,
   and the share of calls that gave any program at all.
2. **Search with the task's prompt.** Each checkpoint writes through
   :class:`vpo.integrations.evolve.TaskPromptClient` (the demo's own m-answer prompt; the parent is
   not shown to the model, so this is a resampling search with OpenEvolve's/vpo's selection and
   archive), ``--calls`` calls per problem and seed; the curves count problems solved (a program
   passing every test) against model calls, and the table compares methods at matched calls and at
   matched candidates (m programs per call for m-answer policies).

The last line with ``--json`` is one JSON object (``solved_at_calls_<method>``,
``solved_at_candidates_<method>``, ``probe_tokens``, ``probe_context``, ``probe_parsed_share``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np


def study_problems(cfg) -> tuple[dict, list]:
    """``(task options, problems)``: the problems the demo's evaluation pools ran on, in pool order
    (the task options of its evaluations, with ``test_seed`` when the run set one: the pools' prompt
    indices count these problems)."""
    from vpo.integrations.evolve import problems_from_task

    opts = cfg.eval_task_options()
    return opts, problems_from_task("prog", opts, split=cfg.split, n=cfg.eval_problems)


def pools_solving(demo: Path, n_problems: int) -> tuple[np.ndarray, int]:
    """([P] int, pools): per problem, how many evaluation pools (every method and seed, the warm
    starts) hold an all-pass answer among their answers."""
    count = np.zeros(n_problems, dtype=int)
    pools = sorted((demo / "eval").glob("*/pool/pool.npz"))
    if not pools:
        raise SystemExit(f"no evaluation pools under {demo / 'eval'}: run `vpo demo --domain prog --out {demo}` first")
    for path in pools:
        z = np.load(path)
        ok = (z["rewards"] >= 1).all(-1) & z["valid"]  # [rollouts, m]
        count[np.unique(z["prompt_index"][ok.any(1)]).astype(int)] += 1
    return count, len(pools)


def _run_one(args: tuple) -> tuple[str, dict]:
    """One checkpoint on every problem (a process of its own: the runs are independent)."""
    problems, model, settings, out = args
    import torch

    from vpo.integrations.evolve import run_comparison

    torch.set_num_threads(1)
    rep = run_comparison(problems, [model], settings, out, progress=False)
    return model.name, rep["models"][model.name]


def checkpoints(demo: Path, cfg, methods, seeds) -> list[tuple[str, int, Path, int]]:
    from vpo.demo.config import method_spec

    out = []
    for method in methods:
        for seed in seeds:
            path = demo / "runs" / f"{method}_s{seed}"
            if not (path / "model.safetensors").exists():
                raise SystemExit(f"no trained checkpoint at {path}; the demo's methods are {', '.join(cfg.methods)}")
            out.append((method, seed, path, method_spec(method)[2]))
    return out


def probe_openevolve_prompt(problem, ckpt: Path, m: int, calls: int, out: Path, max_tokens: int) -> dict:
    """The real evolve prompt through LocalHFClient: its length in tokens and the calls that gave a program."""
    from transformers import AutoConfig, AutoTokenizer

    from vpo.integrations.evolve import EvolveModel, EvolveSettings, run_comparison
    from vpo.integrations.evolve.clients import LocalHFClient

    lengths: list[int] = []

    class Measuring(LocalHFClient):  # the real client; also records the untruncated prompt length
        def _generate(self, messages):
            self._load()
            lengths.append(_chat_tokens(self._tok, messages))
            return super()._generate(messages)

    client = Measuring(str(ckpt), max_new_tokens=max_tokens, seed=0)
    model = EvolveModel(name="openevolve_prompt", num_answers=m, client=client)
    settings = EvolveSettings(budget=calls, budget_unit="calls", seed=0, num_islands=2)
    rep = run_comparison([problem], [model], settings, out, progress=False)
    run = next(iter(rep["models"]["openevolve_prompt"]["runs"].values()))
    tok = AutoTokenizer.from_pretrained(ckpt)
    ctx = int(AutoConfig.from_pretrained(ckpt).max_position_embeddings)
    from vpo.tasks import get

    return {
        "prompt_tokens_median": float(np.median(lengths)) if lengths else float("nan"),
        "context": ctx,
        "calls": int(run["llm_calls"]),
        "calls_with_a_program": int(run["llm_calls"] - run["malformed_calls"]),
        "candidates": int(run["candidates"]),
        "task_prompt_tokens": _chat_tokens(
            tok, [{"role": "user", "content": get("prog", **problem.task_options).build_prompt(problem.example, m)}]
        ),
    }


def _chat_tokens(tok, messages: list[dict]) -> int:
    """Tokens of ``messages`` under the checkpoint's chat template, as LocalHFClient encodes them."""
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return len(tok(text, add_special_tokens=False)["input_ids"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--demo", default="runs/prog", help="a finished `vpo demo --domain prog` output folder")
    ap.add_argument("--out", default="runs/prog_evolve")
    ap.add_argument("--methods", default="grpo,grpo_3x,vpo", help="demo methods whose checkpoints evolve")
    ap.add_argument("--seeds", default=None, help="demo seeds (default: all of the demo's)")
    ap.add_argument("--problems", type=int, default=10, help="hardest held-out problems to evolve")
    ap.add_argument("--calls", type=int, default=30, help="model calls per (checkpoint, problem)")
    ap.add_argument("--probe-calls", type=int, default=5, help="calls with OpenEvolve's own prompt (part 1)")
    ap.add_argument("--temperature", type=float, default=1.0, help="sampling temperature of the search (paper: 1.0)")
    ap.add_argument("--jobs", type=int, default=2, help="checkpoints evolved at a time (one process each)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    from vpo.integrations.evolve import EvolveSettings

    demo, out = Path(args.demo), Path(args.out)
    from vpo.demo.config import DemoConfig

    cfg = DemoConfig.load(demo)
    if cfg.domain != "prog":
        raise SystemExit(f"{demo} is a {cfg.domain!r} demo; this study needs --domain prog")
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else list(cfg.seeds)
    opts, problems = study_problems(cfg)
    count, n_pools = pools_solving(demo, len(problems))
    order = sorted(range(len(problems)), key=lambda i: (count[i], i))[: args.problems]
    hard = [problems[i] for i in order]
    print(
        f"{int((count == 0).sum())} of {len(problems)} {cfg.split} problems unsolved by all {n_pools} evaluation pools "
        f"(k = {cfg.eval_budget}); evolving the {len(hard)} solved by the fewest (pools solving each: "
        f"{', '.join(str(count[i]) for i in order)})"
    )
    ckpts = checkpoints(demo, cfg, methods, seeds)
    t0 = time.time()

    by_m = {m: (path, mm) for m, s, path, mm in ckpts if s == seeds[0]}
    probe = {}
    for method in ("vpo", "grpo"):
        if method in by_m:
            path, mm = by_m[method]
            probe[method] = probe_openevolve_prompt(
                hard[0],
                path,
                mm,
                args.probe_calls,
                out / "openevolve_prompt" / method,
                cfg.max_tokens_multi if mm > 1 else cfg.max_tokens_single,
            )

    models = [_evolve_model(method, seed, path, m, opts, cfg, args.temperature) for method, seed, path, m in ckpts]
    settings = EvolveSettings(budget=args.calls, budget_unit="calls", seed=0, num_islands=2, eval_workers=1)
    from concurrent.futures import ProcessPoolExecutor

    work = [(hard, mo, settings, out / "search" / mo.name) for mo in models]
    if args.jobs <= 1:
        rep = {"models": dict(map(_run_one, work))}
    else:
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            rep = {"models": dict(pool.map(_run_one, work))}

    figures: dict = {
        "problems": len(hard),
        "calls": args.calls,
        "seconds": round(time.time() - t0, 1),
        "pools": n_pools,
        "pools_solving": [int(count[i]) for i in order],
    }
    rows, diffs = _tabulate(rep, methods, seeds, ckpts, hard, args.calls, figures)
    for method, p in probe.items():
        figures[f"probe_tokens_{method}"] = p["prompt_tokens_median"]
        figures[f"probe_parsed_share_{method}"] = p["calls_with_a_program"] / max(1, p["calls"])
    figures["probe_context"] = next(iter(probe.values()))["context"] if probe else None

    lines = [
        f"# Evolutionary search with the trained checkpoints ({len(hard)} hardest {cfg.split} problems, {args.calls} calls each)",
        "",
        f"Problems: the {len(hard)} of {len(problems)} {cfg.split} problems that the fewest of the demo's {n_pools} evaluation "
        f"pools solved within their {cfg.eval_budget} answers (pools solving each: {', '.join(str(count[i]) for i in order)}): "
        + ", ".join(f"`{p.example['reference']}`" for p in hard)
        + ".",
        "",
    ]
    lines += _probe_section(probe, seeds[0])
    lines += [
        "## 2. Search with the task's prompt (TaskPromptClient: the parent is not shown)",
        "",
        f"| method | m | solved at {args.calls} calls (per seed) | mean | solved at {args.calls} candidates (per seed) | mean |",
        "|---|---|---|---|---|---|",
    ]
    for method, m, pc, pk, _ in rows:
        lines.append(
            f"| {method} | {m} | {', '.join(map(str, pc))} | {np.mean(pc):.2f} | {', '.join(map(str, pk))} | {np.mean(pk):.2f} |"
        )
    lines += [
        "",
        f"Matched candidates: an m-answer policy is counted at its first floor({args.calls}/m) calls, so it has "
        f"written at most as many programs as a single-answer policy in {args.calls} calls.",
    ]
    lines += _difference_section(diffs, methods)
    lines += [
        "",
        f"Wall time: {figures['seconds'] / 60:.1f} min. Reproduce: `python scripts/prog_evolve_study.py --demo {demo} "
        f"--out {out} --methods {args.methods} --problems {args.problems} --calls {args.calls}`.",
        "",
    ]
    out.mkdir(parents=True, exist_ok=True)
    (out / "study.md").write_text("\n".join(lines))
    (out / "study.json").write_text(
        json.dumps(
            {
                **figures,
                "curves": {me: c.tolist() for me, _, _, _, c in rows},
                "probe": probe,
                "problems_evolved": [p.name for p in hard],
            },
            indent=1,
        )
    )
    _plot(rows, args.calls, out / "solved_over_calls.png")
    print("\n".join(lines))
    if args.json:
        print(json.dumps(figures))
    return 0


def _evolve_model(method: str, seed: int, path, m: int, opts: dict, cfg, temperature: float):
    """The EvolveModel of one checkpoint: the task's own prompt (TaskPromptClient) on the demo's split."""
    from vpo.integrations.evolve import EvolveModel

    return EvolveModel(
        name=f"{method}_s{seed}",
        num_answers=m,
        client="vpo.integrations.evolve:TaskPromptClient",
        client_options={
            "path": str(path),
            "task": "prog",
            "task_options": opts,
            "split": cfg.split,
            "n": cfg.eval_problems,
            "num_answers": m,
            "temperature": temperature,
            "seed": 1000 + seed,
            "max_new_tokens": cfg.max_tokens_multi if m > 1 else cfg.max_tokens_single,
        },
    )


def _probe_section(probe: dict, seed: int) -> list[str]:
    """Part 1 of study.md: OpenEvolve's own prompt per probed checkpoint (nothing without probes)."""
    if not probe:
        return []
    lines = [
        "## 1. OpenEvolve's own prompt",
        "",
        "| checkpoint | evolve prompt (tokens, median) | context window | task prompt (tokens) | calls | calls with a program |",
        "|---|---|---|---|---|---|",
    ]
    for method, p in probe.items():
        lines.append(
            f"| {method} (seed {seed}) | {p['prompt_tokens_median']:.0f} | {p['context']} | {p['task_prompt_tokens']} | "
            f"{p['calls']} | {p['calls_with_a_program']} |"
        )
    lines.append("")
    return lines


def _difference_section(diffs: dict, methods: list[str]) -> list[str]:
    """study.md's table of VPO minus each other method (nothing without differences)."""
    if not diffs:
        return []
    lines = [
        "",
        "VPO minus each method, share of the problems solved, paired by seed and problem: mean [95 % t "
        "interval over seeds and problems (vpo.search.intervals.replicate_interval)]",
        "",
        "| vs | at matched calls | at matched candidates |",
        "|---|---|---|",
    ]
    for method in methods:
        if method != "vpo":
            c, k = diffs[(method, "calls")], diffs[(method, "candidates")]
            lines.append(
                f"| {method} | {c[0]:+.3f} [{c[1]:+.3f}, {c[2]:+.3f}] | {k[0]:+.3f} [{k[1]:+.3f}, {k[2]:+.3f}] |"
            )
    return lines


def _tabulate(rep: dict, methods, seeds, ckpts, hard, calls: int, figures: dict):
    """Per method: problems solved per seed at matched calls and at matched candidates, the mean
    curve over calls; VPO minus each method with the replicate t interval (the demo's; the shipped
    study, docs/demo/prog/evolve, was tabulated before with the two-level bootstrap over seeds, then
    problems). Adds the figures."""
    from vpo.search.intervals import replicate_interval

    rows, solved = [], {}
    for method in methods:
        m = next(mm for me, _, _, mm in ckpts if me == method)
        cand_budget = calls // m  # the calls of an m-answer policy that write at most as many programs as the others'
        at = np.array(
            [[_solved_at(rep["models"][f"{method}_s{seed}"]["runs"], p.name) for p in hard] for seed in seeds],
            dtype=float,
        )  # [S, P], NaN: never solved
        solved[method] = {
            "calls": np.nan_to_num(at <= calls).astype(float),
            "candidates": np.nan_to_num(at <= cand_budget).astype(float),
        }
        curves = np.mean([rep["models"][f"{method}_s{seed}"]["curve_solved"] for seed in seeds], 0)
        for unit in ("calls", "candidates"):
            figures[f"solved_at_{unit}_{method}"] = float(solved[method][unit].sum(1).mean())
        rows.append(
            (
                method,
                m,
                solved[method]["calls"].sum(1).astype(int).tolist(),
                solved[method]["candidates"].sum(1).astype(int).tolist(),
                curves,
            )
        )
    diffs = {}
    if "vpo" in solved:
        for method in methods:
            if method == "vpo":
                continue
            for unit in ("calls", "candidates"):
                d = solved["vpo"][unit] - solved[method][unit]  # [S, P] paired by seed index and problem
                ci = replicate_interval(d)
                lo, hi = ci["ci_low"], ci["ci_high"]
                diffs[(method, unit)] = (float(d.mean()), lo, hi)
                figures[f"vpo_minus_{method}_solved_share_{unit}"] = float(d.mean())
    return rows, diffs


def _solved_at(runs: dict, name: str) -> float:
    at = runs[name]["solved_at"]
    return float("nan") if at is None else float(at)


def _plot(rows, calls: int, path: Path) -> None:
    """Problems solved against model calls (left) and against programs written (right)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    for method, m, _, _, curve in rows:
        x = np.arange(len(curve))
        axes[0].step(x, curve, where="post", label=f"{method} (m={m})")
        axes[1].step(x * m, curve, where="post", label=f"{method} (m={m})")
    axes[0].set_xlabel("model calls")
    axes[1].set_xlabel("programs written (calls x m)")
    axes[0].set_ylabel("problems solved (mean over seeds)")
    axes[0].set_xlim(0, calls)
    axes[1].set_xlim(0, calls)
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[1].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
