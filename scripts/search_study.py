"""Does VPO's lead over GRPO survive a smarter search? best-of-n, beam and tree at matched generated tokens.

For every trained model of a ``vpo demo`` run (``DEMO/runs/METHOD_sSEED``), this runs
``vpo eval --search S --budget-tokens B`` for each search S, at the demo's own evaluation settings
(task options, split, temperature, per-rollout token limit, the replicate's seed: the argv of
:func:`vpo.demo.stages.eval_argv`, its best-of-n pool flags swapped for the search flags), then
``vpo compare --replicates`` per search (replicates x prompts intervals,
:func:`vpo.search.intervals.replicate_interval`), and writes ``OUT/study.json``, ``OUT/study.md`` and
``OUT/tokens_vs_best.png``: best@B per method and search, the VPO minus GRPO-3x difference (paired by
replicate and prompt) per search, and the final pick's hit rate under a noisy selector.

    python scripts/search_study.py --demo runs/search_maze --out docs/search_study/maze \\
        --budget-tokens 480 --step tokens:4 --num-prompts 100 --jobs 2

Runs are resumable (each ``vpo eval`` keeps its finished prompts in ``WORK/NAME/search``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

LABELS = {"vpo": "VPO (m=3)", "grpo_3x": "GRPO 3x", "max_at_k": "Max@k", "max_at_k_3x": "Max@k 3x"}
DROP = {"--rollouts", "--ks", "--eval-seeds", "--batch-rows", "--out", "--name", "--num-prompts"}


def search_argv(cfg, model: Path, m: int, out: Path, name: str, seed: int, search: str, a) -> list[str]:
    """The demo's eval argv for ``model`` with the pool flags replaced by ``search``'s."""
    from vpo.demo.stages import eval_argv

    argv = eval_argv(cfg, model, m, out, name, seed)
    kept, skip = [], False
    for x in argv:
        if skip:
            skip = False
            continue
        if x in DROP:
            skip = True
            continue
        if x != "--no-plots":
            kept.append(x)
    kept += ["--out", str(out), "--name", name, "--num-prompts", str(a.num_prompts), "--search", search]
    kept += ["--budget-tokens", str(a.budget_tokens), "--step", a.step, "--beam-width", str(a.beam_width)]
    kept += ["--beam-expand", str(a.beam_expand), "--tree-algo", a.tree_algo, "--tree-batch", str(a.tree_batch)]
    kept += ["--selector", a.selector]
    kept += ["--bootstrap", "1000", "--no-plots"]
    return kept


def _search_one(job) -> tuple[str, float]:
    """Every search of one trained model in this process (the model loaded once): what
    ``vpo eval --search S`` with the argv of :func:`search_argv` does, search by search."""
    a, cfg_dict, model, m, seed, names = job
    from vpo.demo.config import DemoConfig
    from vpo.search.backends import PoolConfig, make_generator
    from vpo.search.step.report import write_search_report
    from vpo.search.step.run import run_search, search_metrics
    from vpo.search.step.score import make_step_scorer
    from vpo.search.step.search import SearchConfig
    from vpo.tasks import get as get_task

    cfg = DemoConfig.from_dict(cfg_dict)
    t0 = time.time()
    task = get_task(cfg.domain_spec.task, **cfg.eval_task_options())
    examples = task.load(cfg.split, n=a.num_prompts)
    max_new = cfg.max_tokens_single if m == 1 else cfg.max_tokens_multi
    pcfg = PoolConfig(num_answers=m, temperature=cfg.eval_temperature, max_new_tokens=max_new, seed=seed,
                      num_threads=1, backend="transformers")  # fmt: skip
    gen = make_generator(str(model), pcfg)
    for search, (name, out) in names.items():
        scfg = SearchConfig(search=search, budget_tokens=a.budget_tokens, step=a.step, beam_width=a.beam_width,
                            expand=a.beam_expand, tree_algo=a.tree_algo, tree_batch=a.tree_batch,
                            max_new_tokens=max_new, num_answers=m, seed=seed)  # fmt: skip
        scorer = make_step_scorer(None, task, m)
        sampling = {"temperature": pcfg.temperature, "top_p": pcfg.top_p, "top_k": pcfg.top_k, "num_answers": m}
        meta, records = run_search(gen, task, examples, scfg, scorer, out_dir=out, split=cfg.split,
                                   sampling=sampling, progress=False)  # fmt: skip
        res = search_metrics(meta, records, selectors=[a.selector], bootstrap=1000)
        write_search_report({name: res}, out, plots=False)
    return str(model), time.time() - t0


def _run_all(jobs: list[tuple], n: int) -> None:
    """Each model's searches in a process of their own, ``n`` at a time, each model as soon as it is trained."""
    import multiprocessing as mp
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    pending, running, done = list(jobs), set(), 0
    with ProcessPoolExecutor(n, mp_context=mp.get_context("spawn")) as ex:
        while pending or running:
            ready = [j for j in pending if _trained(j[2])]
            while ready and len(running) < n:
                j = ready.pop(0)
                pending.remove(j)
                running.add(ex.submit(_search_one, j))
            if not running:
                time.sleep(20)  # --wait: the demo is still training them
                continue
            finished, running = wait(running, timeout=20, return_when=FIRST_COMPLETED)
            for f in finished:
                model, secs = f.result()
                done += 1
                print(f"[{done}/{len(jobs)}] {model}: {secs:.0f} s", flush=True)


def _trained(model: Path) -> bool:
    """A demo RL run is finished when its weights' settings record is written (after the weights): a full
    model's, or a LoRA adapter's (the pretrained-model domains)."""
    return any((model / f"{w}.safetensors.settings.json").exists() for w in ("model", "adapter_model"))


def _jobs(a, cfg, demo: Path, work: Path) -> list[tuple]:
    from vpo.demo.config import METHODS

    jobs = []
    for method in a.methods:
        m = METHODS[method][2]
        for seed in a.seeds or cfg.seeds:
            model = demo / "runs" / f"{method}_s{seed}"
            if not a.wait and not _trained(model):
                raise SystemExit(f"search_study: no trained model at {model}; finish `vpo demo --out {demo}` first")
            names = {s: (f"{method}_s{seed}_{s}", work / f"{method}_s{seed}_{s}") for s in a.searches}
            jobs.append((a, cfg.as_dict(), model, m, seed, names))
    return jobs


def _compare(a, cfg, work: Path, search: str) -> dict:
    """One search's runs of every method and seed in one report (``work/compare_SEARCH``): what
    ``vpo compare RUNS --names ... --replicates --recompute --selector SEL`` writes."""
    from vpo.search.step.report import write_search_report
    from vpo.search.step.run import load_records, search_metrics

    results, groups = {}, {}
    for method in a.methods:
        for seed in a.seeds or cfg.seeds:
            meta, records = load_records(work / f"{method}_s{seed}_{search}")
            key = f"{method} s{seed}"
            results[key] = search_metrics(meta, records, selectors=[a.selector], bootstrap=1000)
            groups.setdefault(method, []).append(key)
    out = work / f"compare_{search}"
    write_search_report(results, out, title=f"{search} at {a.budget_tokens} tokens", replicate_groups=groups)
    return json.loads((out / "search.json").read_text())


def _fmt(e: dict) -> str:
    return f"{e['mean']:.3f} [{e['ci_low']:.3f}, {e['ci_high']:.3f}]"


def _hit(doc: dict, method: str, selector: str) -> float:
    vals = [doc["results"][k]["final"][selector]["hit_rate"]["mean"] for k in doc["replicates"][method]]
    vals = [v for v in vals if v is not None]
    return sum(vals) / len(vals) if vals else float("nan")


def _lead(doc: dict, a, seeds):
    """VPO minus GRPO 3x best@B per replicate x prompt ``[S, P]`` (prompts in the first run's order)."""
    import numpy as np

    def at_b(key):
        r = doc["results"][key]
        return dict(zip(r["per_prompt"]["prompt_ids"], (row[-1] for row in r["per_prompt"]["best_at_budget"])))

    rows = []
    for seed in seeds:
        v, g = at_b(f"vpo s{seed}"), at_b(f"grpo_3x s{seed}")
        rows.append([v[p] - g[p] for p in v])
    return np.asarray(rows)


def lead_changes(a, docs: dict[str, dict], seeds) -> dict:
    """Per search other than bon: (its VPO - GRPO 3x lead) - (bon's), paired by replicate and problem, with
    :func:`vpo.search.intervals.replicate_interval`."""
    from vpo.search.intervals import replicate_interval

    if "bon" not in docs or not {"vpo", "grpo_3x"} <= set(a.methods):
        return {}
    base = _lead(docs["bon"], a, seeds)
    return {s: replicate_interval(_lead(d, a, seeds) - base) for s, d in docs.items() if s != "bon"}


def table(a, docs: dict[str, dict], changes: dict | None = None) -> str:
    lines = [
        f"| search | {' | '.join(LABELS.get(m, m) for m in a.methods)} | VPO − GRPO 3x | lead change vs bon "
        f"| hit rate ({a.selector}) |",
        "|---|" + "---|" * (len(a.methods) + 3),
    ]
    for search, doc in docs.items():
        rep = doc["paired_replicates"]
        cells = [_fmt(rep["groups"][m]) for m in a.methods]
        diff = _fmt(rep["vs"]["grpo_3x"]) if "grpo_3x" in rep["vs"] else "–"
        hits = ", ".join(f"{LABELS.get(m, m)} {_hit(doc, m, a.selector):.2f}" for m in a.methods)
        change = _fmt(changes[search]) if changes and search in changes else "–"
        lines.append(f"| {search} | " + " | ".join(cells) + f" | {diff} | {change} | {hits} |")
    return "\n".join(lines)


def plot(docs: dict[str, dict], path: Path, methods) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4.2 * len(docs), 3.6), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(docs), squeeze=False, sharey=True)[0]
    for ax, (search, doc) in zip(axes, docs.items()):
        for method in methods:
            curves = [doc["results"][k]["best_at_budget"] for k in doc["replicates"][method]]
            toks = curves[0]["tokens"]
            mean = [sum(c["mean"][j] for c in curves) / len(curves) for j in range(len(toks))]
            ax.plot(toks, mean, marker="o", label=LABELS.get(method, method))
        ax.set_title(search)
        ax.set_xlabel("generated tokens per prompt")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("best@budget (mean over replicates)")
    axes[0].legend(fontsize=8)
    fig.savefig(path, dpi=110)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--demo", required=True, help="a finished `vpo demo` output directory")
    p.add_argument("--out", required=True, help="where study.json, study.md and the figure go")
    p.add_argument("--work", default=None, help="the search runs (default DEMO/search_study)")
    p.add_argument("--methods", default="vpo,grpo_3x,max_at_k")
    p.add_argument("--searches", default="bon,beam,tree")
    p.add_argument("--budget-tokens", type=int, default=480)
    p.add_argument("--step", default="tokens:4")
    p.add_argument("--beam-width", type=int, default=4)
    p.add_argument("--beam-expand", type=int, default=4)
    p.add_argument("--tree-algo", default="abmcts")
    p.add_argument("--tree-batch", type=int, default=8)
    p.add_argument("--selector", default="noisy:0.2")
    p.add_argument("--num-prompts", type=int, default=100)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--seeds", type=int, nargs="*", default=None, help="a subset of the demo's seeds")
    p.add_argument("--wait", action="store_true", help="wait for models the demo is still training")
    p.add_argument(
        "--report-only", action="store_true", help="the searches are done (e.g. by runs on --seeds subsets): report"
    )
    a = p.parse_args()
    a.methods, a.searches = a.methods.split(","), a.searches.split(",")
    from vpo.demo.config import DemoConfig

    demo = Path(a.demo)
    cfg = DemoConfig.load(demo)
    work = Path(a.work) if a.work else demo / "search_study"
    work.mkdir(parents=True, exist_ok=True)
    jobs = _jobs(a, cfg, demo, work)
    t0 = time.time()
    print(f"search_study: {len(jobs)} models x {len(a.searches)} searches, {a.jobs} models at a time", flush=True)
    if not a.report_only:
        _run_all(jobs, a.jobs)
    docs = {s: _compare(a, cfg, work, s) for s in a.searches}
    changes = lead_changes(a, docs, a.seeds or cfg.seeds)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    settings = {k: v for k, v in vars(a).items() if k not in ("work",)}
    summary = {
        "settings": settings,
        "demo": {"split": cfg.split, "seeds": list(a.seeds or cfg.seeds), "domain": cfg.domain},
        "search_wall_s": None if a.report_only else time.time() - t0,  # report-only: the searches ran earlier
        "searches": {s: {"paired_replicates": d["paired_replicates"]} for s, d in docs.items()},
        "hit_rate": {s: {m: _hit(d, m, a.selector) for m in a.methods} for s, d in docs.items()},
        "lead_change_vs_bon": changes,
    }
    (out / "study.json").write_text(json.dumps(summary, indent=1) + "\n")
    md = f"best@{a.budget_tokens} tokens per prompt ({cfg.domain}, {cfg.split} split, {a.num_prompts} prompts, "
    md += f"seeds {list(a.seeds or cfg.seeds)}; mean over replicates x prompts [95 % replicate interval]):\n\n" + table(
        a, docs, changes
    )
    (out / "study.md").write_text(md + "\n")
    plot(docs, out / "tokens_vs_best.png", a.methods)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
