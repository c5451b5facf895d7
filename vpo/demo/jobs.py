"""Run the demo's stages a few at a time (in long-lived worker processes), and resume safely.

A stage is done when its output file exists **and** its settings record (``<output>.settings.json``,
written when the stage succeeds) equals the settings the current run would use. A stage whose
settings changed is run again, and the log names the settings that changed, so a resumed demo never
reports models that were trained under other settings.
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


def settings_hash(settings: dict) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _record_path(marker: Path) -> Path:
    return marker.with_name(marker.name + ".settings.json")


def changed_settings(old: dict, new: dict, prefix: str = "") -> list[str]:
    """Dotted names of the settings that differ between two records (for the log)."""
    from vpo.tasks.text import to_jsonable

    out = []
    for k in sorted(set(old) | set(new)):
        # a record read back from JSON holds lists where the config holds tuples: the same setting
        a, b = (to_jsonable(x.get(k, "<absent>")) for x in (old, new))
        if isinstance(a, dict) and isinstance(b, dict):
            out += changed_settings(a, b, f"{prefix}{k}.")
        elif a != b:
            out.append(f"{prefix}{k}: {a!r} -> {b!r}")
    return out


def stage_state(marker: Path, settings: dict) -> tuple[bool, list[str]]:
    """``(done, changes)``: done when the marker exists and was produced with these settings;
    ``changes`` lists what differs when the marker exists under other settings."""
    if not marker.exists():
        return False, []
    rec = _record_path(marker)
    if not rec.exists():
        return False, ["(no settings record: produced by an older vpo)"]
    old = json.loads(rec.read_text())
    if old.get("hash") == settings_hash(settings):
        return True, []
    return False, changed_settings(old.get("settings", {}), settings) or ["(settings differ)"]


def mark_done(marker: Path, settings: dict) -> None:
    _record_path(marker).write_text(
        json.dumps({"hash": settings_hash(settings), "settings": settings}, indent=1, default=str)
    )


def clear_stage(marker: Path) -> None:
    """Forget a stage's result before running it again (its record first: a crash in between
    leaves a stage that will run again, never one that looks done)."""
    for p in (_record_path(marker), marker):
        if p.exists():
            p.unlink()


@dataclass
class Job:
    name: str
    argv: list[str]
    log: Path
    done_marker: Path
    settings: dict = field(default_factory=dict)
    after: list[str] = field(default_factory=list)
    progress_total: int = 0  # steps to expect in the log (train jobs), for the status line
    output_dir: Path | None = None  # removed before a rerun under changed settings
    cost: float = 0.0  # expected relative run time: longer jobs start first


def status(msg: str) -> None:
    print(f"[vpo demo {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _train_step_from_log(log: Path) -> int | None:
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return None
    return text.count("'step_time'")


def _pending(jobs: list[Job]) -> tuple[list[Job], set[str]]:
    pending, done = [], set()
    for j in jobs:
        ok, changes = stage_state(j.done_marker, j.settings)
        if ok and all(a in done for a in j.after):
            done.add(j.name)
            continue
        if changes:
            status(f"{j.name}: settings changed, running it again ({'; '.join(changes[:4])})")
            if j.output_dir is not None:  # a pool or checkpoint made under other settings must not be resumed
                shutil.rmtree(j.output_dir, ignore_errors=True)
        clear_stage(j.done_marker)
        pending.append(j)
    return pending, done


class _ProcessLane:
    """Runs each job as a fresh process (``argv`` as given)."""

    def __init__(self, env: dict) -> None:
        self.env, self.proc = env, None

    def start(self, job: Job) -> None:
        with open(job.log, "w") as fh:
            self.proc = subprocess.Popen(job.argv, stdout=fh, stderr=subprocess.STDOUT, env=self.env)

    def poll(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()


class _WorkerLane:
    """Sends each job (``python -m ...`` / ``-c ...``) to one long-lived :mod:`vpo.demo.worker`
    process, which imports what the jobs share once."""

    def __init__(self, env: dict, log: Path) -> None:
        r, w = os.pipe()
        log.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(log, "a")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vpo.demo.worker", str(w)],
            stdin=subprocess.PIPE,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            pass_fds=(w,),
            text=True,
        )
        os.close(w)
        self._results = os.fdopen(r, "r")
        self._busy = False

    def start(self, job: Job) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"argv": job.argv[1:], "log": str(job.log)}) + "\n")
        self.proc.stdin.flush()
        self._busy = True

    def poll(self) -> int | None:
        if not self._busy:
            return None
        if select.select([self._results], [], [], 0)[0]:
            line = self._results.readline()
            if line:
                self._busy = False
                return int(json.loads(line)["rc"])
        if self.proc.poll() is not None:  # died mid-job (killed, out of memory)
            self._busy = False
            return self.proc.returncode or 1
        return None

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._results.close()
        self._log.close()


def _pick(pending: list[Job], done: set[str]) -> Job | None:
    """The ready job with the largest expected cost (longest first keeps the two lanes level)."""
    ready = [j for j in pending if all(a in done for a in j.after)]
    return max(ready, key=lambda j: j.cost) if ready else None  # max keeps the first on ties


def run_jobs(
    jobs: list[Job],
    parallel: int,
    workers: bool = True,
    log_dir: Path | None = None,
    times: dict | None = None,
    on_done: Callable[[], None] | None = None,
) -> dict[str, float]:
    """Run jobs ``parallel`` at a time, respecting ``after`` dependencies (a job whose dependency reruns
    also reruns), longest expected first. With ``workers`` each slot is one long-lived
    :mod:`vpo.demo.worker` process that runs its jobs in turn (one import of the stack per slot);
    without, every job is a fresh process. Returns seconds per job run. Prints a status line when
    a job starts or ends and every ~20 s while any runs. A failed job stops the demo with its log's
    tail (finished jobs stay on disk and are skipped next time). ``times``: the dict to fill with
    each job's seconds as it finishes (what an interrupted run had done is there); ``on_done``: called
    after each job finishes and is timed (the runner writes its record to disk there, so a sitting
    killed outright, SIGKILL included, keeps the time of every job it finished)."""
    env = dict(
        os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", PYTHONUNBUFFERED="1"
    )
    pending, done = _pending(jobs)
    if len(pending) < len(jobs):
        status(f"{len(jobs) - len(pending)} job(s) already done with the same settings, skipped")
    if not pending:
        return {}
    n_lanes = max(1, min(parallel, len(pending)))
    wlog = (log_dir or pending[0].log.parent) / "workers.log"
    lanes = [_WorkerLane(env, wlog) if workers else _ProcessLane(env) for _ in range(n_lanes)]
    running: dict[int, tuple[Job, float]] = {}
    seconds: dict[str, float] = times if times is not None else {}
    last, total = 0.0, len(pending)
    try:
        while pending or running:
            if _collect_finished(lanes, running, done, seconds, total) and on_done is not None:
                on_done()
            _start_ready(lanes, running, pending, done)
            if running and time.time() - last > 20:
                status("running: " + _running_summary(running))
                last = time.time()
            if not running and pending and _pick(pending, done) is None:
                raise RuntimeError("unsatisfiable job dependencies: " + ", ".join(j.name for j in pending))
            time.sleep(0.2)
    finally:
        for lane in lanes:
            lane.close()
    return seconds


def _collect_finished(
    lanes: list, running: dict[int, tuple[Job, float]], done: set[str], seconds: dict, total: int
) -> int:
    """Take the jobs that ended off their lanes: mark each done and time it, or raise with the tail of
    the log of one that failed (non-zero exit or no done marker). Returns how many finished."""
    finished = 0
    for i, (job, t0) in list(running.items()):
        rc = lanes[i].poll()
        if rc is None:
            continue
        del running[i]
        if rc != 0 or not job.done_marker.exists():
            tail = job.log.read_text(errors="replace")[-4000:] if job.log.exists() else ""
            raise RuntimeError(f"job {job.name} failed (exit {rc}); log {job.log}:\n{tail}")
        mark_done(job.done_marker, job.settings)
        seconds[job.name] = time.time() - t0
        done.add(job.name)
        status(f"done  {job.name} in {seconds[job.name]:.0f} s ({len(seconds)}/{total})")
        finished += 1
    return finished


def _start_ready(lanes: list, running: dict[int, tuple[Job, float]], pending: list[Job], done: set[str]) -> None:
    """Give every idle lane the next ready job (:func:`_pick`), while there is one."""
    for i in range(len(lanes)):
        if i in running:
            continue
        job = _pick(pending, done)
        if job is None:
            break
        pending.remove(job)
        job.log.parent.mkdir(parents=True, exist_ok=True)
        lanes[i].start(job)
        running[i] = (job, time.time())
        status(f"start {job.name}")


def _running_summary(running: dict[int, tuple[Job, float]]) -> str:
    """The running jobs with their training step (read from the log, when the job reports one) and time so far."""
    parts = []
    for job, t0 in running.values():
        step = _train_step_from_log(job.log) if job.progress_total else None
        prog = f" step {step}/{job.progress_total}" if step is not None else ""
        parts.append(f"{job.name}{prog} ({time.time() - t0:.0f} s)")
    return ", ".join(parts)
