"""``run_demo``: the warm start, the training and evaluation jobs, then the report."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
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
            # groups whose rollouts all scored alike (no learning signal), as the trainer's warnings count them
            c.setdefault("flat_group_frac", []).append([h.get("vpo/flat_group_frac", float("nan")) for h in rows])
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
        "cpu": cpu_record(),
        "versions": versions,
        "git_commit": commit,
        "git_dirty": dirty,
    }


CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile", "amx_bf16", "amx_int8")
"""The instruction-set flags that pick torch's CPU kernels (and so the float rounding of a run)."""


def cpu_record() -> dict:
    """The CPU a run used, as far as it shapes the numbers: the model name, which of :data:`CPU_FLAGS`
    it has, and the kernel level torch dispatches to. Two machines with the same package versions
    can still train different models from the same seed when these differ (docs/demo.md, "Every
    replicate so far")."""
    model, flags = None, set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and model is None:
                    model = value.strip()
                elif key.strip() == "flags":
                    flags = set(value.split())
                    break
    except OSError:
        pass
    try:
        import torch

        capability = torch.backends.cpu.get_cpu_capability()
    except Exception:  # noqa: BLE001 - a record, not a requirement
        capability = None
    return {"model": model, "flags": [f for f in CPU_FLAGS if f in flags], "torch_capability": capability}


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


def _timing_key(cfg: DemoConfig) -> str:
    """Invocations with the same settings (``out`` and ``jobs`` aside) are one run's work."""
    from vpo.demo.jobs import settings_hash

    return settings_hash({k: v for k, v in cfg.as_dict().items() if k not in ("out", "jobs")})


def _read_invocations(out: Path) -> list[dict]:
    p = out / "invocations.json"
    return json.loads(p.read_text()) if p.exists() else []


def _write_invocations(out: Path, rows: list[dict]) -> None:
    """``invocations.json``: each invocation's wall time, warm-start and job times (the report sums
    those with the run's settings)."""
    tmp = out / "invocations.json.tmp"
    tmp.write_text(json.dumps(rows, indent=1))
    tmp.replace(out / "invocations.json")


def _sitting(cfg: DemoConfig, out: Path, workers: bool, entry: dict, t0: float, save: Callable[[], None]) -> None:
    """One invocation's warm starts and jobs; ``entry`` (this sitting's invocation record) gets their
    times as they finish and ``save()`` writes it after each, so an interrupted sitting, even one
    killed outright, still records what it spent."""
    cfg.domain_spec.prepare(cfg)  # e.g. fetch the pretrained model, once, before jobs that read it
    (out / "demo_config.json").write_text(json.dumps(cfg.as_dict(), indent=1))
    ws = None if cfg.warm_starts_as_jobs else {w: warm_start(cfg, out, w) for w in cfg.warm_seeds()}
    # seconds of warm starts trained here, before the jobs; 0 when they run as jobs (their time is in jobs_s)
    entry["warm_start_s"] = time.time() - t0 if ws is not None else 0.0
    save()
    jobs = build_jobs(cfg, out, ws)
    status(
        f"{len(jobs)} jobs ({'' if ws is not None else f'{len(cfg.warm_seeds())} warm start(s), '}"
        f"{len(cfg.methods)} methods x {len(cfg.seeds)} seeds, evaluations), {cfg.jobs} at a time"
    )
    run_jobs(jobs, cfg.jobs, workers=workers, log_dir=out / "logs", times=entry["jobs_s"], on_done=save)


def run_demo(cfg: DemoConfig, workers: bool = True) -> dict:
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    env = environment()  # what the jobs run with (a later commit may write the report)
    entry = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t0)),
        "seconds": 0.0,
        "warm_start_s": 0.0,
        "jobs_s": {},
        "settings": _timing_key(cfg),
        "environment": env,
        "complete": False,
    }
    log = _read_invocations(out) + [entry]  # this sitting's record is the last row, rewritten as it goes

    def save() -> None:
        entry["seconds"] = time.time() - t0
        _write_invocations(out, log)

    try:
        _sitting(cfg, out, workers, entry, t0, save)
    except BaseException:  # Ctrl-C or a failed job: the sitting's time counts in the resumed run's wall time
        entry["interrupted"] = True
        save()
        raise
    t_report = time.time()
    # this invocation's timing is on disk before the report step, so a failure there loses none of it
    save()
    old = json.loads((out / "demo.json").read_text()) if (out / "demo.json").exists() else {}
    agg = aggregate(cfg, out)
    elapsed = time.time() - t0
    entry.update(seconds=elapsed, report_s=time.time() - t_report, complete=True)
    _write_invocations(out, log)
    same = [r for r in log if r.get("settings") == entry["settings"]]
    # a demo.json written before the invocation log existed counts as one earlier invocation
    legacy = 0.0
    if len(same) == 1 and current_names(old.get("config", {})) == agg["config"]:
        legacy = old.get("wall_seconds", 0.0)
    jobs_s: dict = {}
    for r in same:  # every job's latest time, over the invocations that ran it
        jobs_s.update(r.get("jobs_s", {}))
    agg["timing"] = {
        "warm_start_s": sum(r.get("warm_start_s", 0.0) for r in same),
        "warm_start_jobs_s": sum(sec for name, sec in jobs_s.items() if name.startswith("warm start")),
        "jobs_s": jobs_s,
        "report_s": entry["report_s"],
        "invocations": len(same),
        # sittings that stopped before their report (Ctrl-C, a failed job or report step): the report
        # names the sittings only then; a demo.json without the key (every shipped one) reads as none
        "unfinished_sittings": sum(1 for r in same if not r.get("complete")),
    }
    # the environment of the first invocation that ran jobs (the one that trained the models)
    ran = [r for r in same if r.get("jobs_s") and r.get("environment")]
    agg["environment"] = {**(ran[0]["environment"] if ran else env), "report": env}
    agg["last_invocation_seconds"] = elapsed
    # summed over invocations, interrupted ones included: a resumed demo counts all its work
    agg["wall_seconds"] = legacy + sum(r["seconds"] for r in same)
    write_report(agg, out)
    status(
        f"report: {out / 'report.md'} ({elapsed / 60:.1f} min; {agg['wall_seconds'] / 60:.1f} min over all invocations)"
    )
    return agg
