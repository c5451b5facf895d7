"""``run_demo``: the warm start, the training and evaluation jobs, then the report."""

from __future__ import annotations

import json
import time
from pathlib import Path

from vpo.demo.analysis import aggregate_runs, collect
from vpo.demo.config import DemoConfig, current_names
from vpo.demo.jobs import run_jobs, status
from vpo.demo.report import write_report
from vpo.demo.stages import build_jobs, warm_dir, warm_start


def training_curves(out: Path, cfg: DemoConfig) -> dict:
    """Per method: per-seed lists of the logged within-group diversity, reward and completion length."""
    curves: dict[str, dict[str, list[list[float]]]] = {}
    for method in cfg.methods:
        for seed in cfg.seeds:
            state = out / "runs" / f"{method}_s{seed}" / "trainer_state.json"
            if not state.exists():
                continue
            rows = [h for h in json.loads(state.read_text())["log_history"] if "vpo/diversity" in h]
            c = curves.setdefault(method, {})
            c.setdefault("diversity", []).append([h["vpo/diversity"] for h in rows])
            c.setdefault("reward", []).append([h.get("reward", float("nan")) for h in rows])
            c.setdefault("completion_tokens", []).append([h.get("completions/mean_length", float("nan")) for h in rows])
    return curves


PACKAGES = ("vpo", "torch", "transformers", "trl", "accelerate", "peft", "numpy", "tokenizers", "safetensors")
"""The libraries whose versions a run records (``demo.json``'s ``environment``)."""


def environment() -> dict:
    """What produced a run: Python, the platform, the CPU count, the versions of :data:`PACKAGES` and
    vpo's git commit (when vpo runs from a checkout; ``dirty`` when it had uncommitted changes). A
    rerun elsewhere differs in float rounding at least (docs/demo.md, "How far a rerun moves")."""
    import importlib.metadata as md
    import os
    import platform
    import subprocess

    versions = {}
    for pkg in PACKAGES:
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            versions[pkg] = None
    commit = dirty = None
    root = Path(__file__).resolve().parents[2]
    if (root / ".git").exists():
        try:
            git = ["git", "-C", str(root)]
            commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout
            commit = commit.strip()
            st = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True)
            dirty = bool(st.stdout.strip())
        except (OSError, subprocess.CalledProcessError):
            commit = dirty = None
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "versions": versions,
        "git_commit": commit,
        "git_dirty": dirty,
    }


def aggregate(cfg: DemoConfig, out: Path) -> dict:
    """Everything the report shows, from a demo directory whose jobs have finished."""
    runs, labels, ms, extra = collect(cfg, out)
    agg = aggregate_runs(cfg, runs, labels, ms, [p for p in extra["preferences"] if p != "w*"] + ["w*"], extra)
    agg["training_curves"] = training_curves(out, cfg)
    agg["environment"] = environment()
    infos = []
    for w in cfg.warm_seeds():
        marker = warm_dir(out, w) / "warmstart.json"
        infos.append(json.loads(marker.read_text()) if marker.exists() else {})
    # the first (or only) warm start's record, as the report has always read it, and every replicate's
    agg["warm_start"] = {**infos[0], "replicates": infos} if len(infos) > 1 else infos[0]
    return agg


def run_demo(cfg: DemoConfig, workers: bool = True) -> dict:
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    (out / "demo_config.json").write_text(json.dumps(cfg.as_dict(), indent=1))
    # several threads per warm start (the default): each alone, in this process, before the jobs; one
    # thread: the warm starts are jobs, `jobs` at a time beside the others
    ws = {w: warm_start(cfg, out, w) for w in cfg.warm_seeds()} if cfg.warm_threads > 1 else None
    t_warm = time.time() - t0
    jobs = build_jobs(cfg, out, ws)
    status(
        f"{len(jobs)} jobs ({'' if ws is not None else f'{len(cfg.warm_seeds())} warm start(s), '}"
        f"{len(cfg.methods)} methods x {len(cfg.seeds)} seeds, evaluations), {cfg.jobs} at a time"
    )
    job_seconds = run_jobs(jobs, cfg.jobs, workers=workers, log_dir=out / "logs")
    t_report = time.time()
    agg = aggregate(cfg, out)
    elapsed = time.time() - t0
    old = json.loads((out / "demo.json").read_text()) if (out / "demo.json").exists() else {}
    # a resumed demo counts the work of earlier invocations with the same settings
    same = current_names(old.get("config", {})) == agg["config"]  # a demo.json from before a rename reads as today's
    prev = old.get("wall_seconds", 0.0) if same else 0.0
    agg["timing"] = {"warm_start_s": t_warm, "jobs_s": job_seconds, "report_s": time.time() - t_report}
    agg["last_invocation_seconds"] = elapsed
    agg["wall_seconds"] = prev + elapsed  # summed over invocations: a resumed demo counts all its work
    write_report(agg, out)
    status(
        f"report: {out / 'report.md'} ({elapsed / 60:.1f} min; {agg['wall_seconds'] / 60:.1f} min over all invocations)"
    )
    return agg
