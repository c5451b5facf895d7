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


def aggregate(cfg: DemoConfig, out: Path) -> dict:
    """Everything the report shows, from a demo directory whose jobs have finished."""
    runs, labels, ms, extra = collect(cfg, out)
    agg = aggregate_runs(cfg, runs, labels, ms, [p for p in extra["preferences"] if p != "w*"] + ["w*"], extra)
    agg["training_curves"] = training_curves(out, cfg)
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
    ws = {w: warm_start(cfg, out, w) for w in cfg.warm_seeds()}
    t_warm = time.time() - t0
    jobs = build_jobs(cfg, out, ws)
    status(
        f"{len(jobs)} jobs ({len(cfg.methods)} methods x {len(cfg.seeds)} seeds + evaluations), {cfg.jobs} at a time"
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
