"""Per-sandbox cgroups (root only): a pids and a memory cgroup created before each launch, joined by
the worker, and on the way out emptied (every process SIGKILLed, pidfd-checked so a recycled pid is
never hit) and removed.

They back up the rlimits: ``RLIMIT_NPROC`` and ``RLIMIT_AS`` act per process or per uid, a cgroup caps
the whole sandbox, and it finds leftovers wherever they moved. Which cgroup parents are writable is
probed once (:func:`vpo.sandbox.probe.cgroup_dirs`); where none is, sandboxes run without cgroups.
"""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time
from typing import TYPE_CHECKING

from vpo.sandbox.probe import cgroup_dirs

if TYPE_CHECKING:
    from vpo.sandbox.config import SandboxConfig


_POOL_LOCK = threading.Lock()
_CPU_POOL: dict[tuple[str, float | None], list[str]] = {}
"""Free per-sandbox cgroups of v1 cpu and cpuacct hierarchies, by (parent, cores; None for a
cpuacct-only one). Creating and removing a cpu cgroup for every sandbox cost ~8 % of the throughput
benchmark's one-sandbox-per-test and scorer figures (paired runs); an empty one is as good as new (its
only state is its quota, and a cumulative CPU counter the worker reads as differences), so a sandbox
takes a free one, and gives it back once nothing is left in it. At most one per hierarchy and sandbox
running at once; removed at exit, or by the sweep of a later process if this one is killed (the name
carries our pid: ``vpo-pool-<pid>-cpu<n>``)."""
_POOLED: list[str] = []
_POOL_IDS = itertools.count()
_POOLABLE = {"cpu", "cpuacct"}
"""v1 controllers whose cgroups keep no state a sandbox could leave to the next one."""


def _remove_pool() -> None:
    with _POOL_LOCK:
        dirs, _POOLED[:] = list(_POOLED), []
        _CPU_POOL.clear()
    for d in dirs:
        try:
            os.rmdir(d)
        except OSError:
            pass


def _take_cpu_cgroup(base: str, cores: float | None) -> str:
    """A free pooled cgroup of hierarchy ``base``, its cpu quota set to ``cores`` (``None``: a
    cpuacct-only hierarchy, no quota)."""
    with _POOL_LOCK:
        free = _CPU_POOL.setdefault((base, cores), [])
        if free:
            return free.pop()
        first = not _POOLED
        d = os.path.join(base, f"vpo-pool-{os.getpid()}-cpu{next(_POOL_IDS)}")
        os.mkdir(d)
        _POOLED.append(d)
    if first:
        import atexit

        atexit.register(_remove_pool)
    if cores is not None:
        period = 100_000
        _write(os.path.join(d, "cpu.cfs_period_us"), str(period))
        _write(os.path.join(d, "cpu.cfs_quota_us"), str(max(1000, int(cores * period))))
    return d


class _Cgroups:
    """Per-sandbox cgroups: created before the launch, joined by the worker, killed and removed after.

    One directory per hierarchy (v1 pids, memory, cpu, cpuacct; the v2 one): limits on processes,
    memory and CPU (``cpu_cores``: ``cpu.max`` or ``cpu.cfs_quota_us``; a cgroup of its own also makes
    the sandbox one entity for the scheduler, however many processes it runs), the CPU counter the
    worker judges a test's limit on (v1 ``cpuacct.usage`` or v2 ``cpu.stat``: every process the test
    made, reaped or not), and ``cgroup.kill`` + ``cgroup.events`` for the final cleanup. The v1 cpu
    and cpuacct cgroups come from a pool (:data:`_CPU_POOL`)."""

    def __init__(self, cfg: SandboxConfig, tag: str, extra_bytes: int) -> None:
        self.dirs: list[str] = []
        self.unified: str | None = None
        self.cpu_cap: float | None = None
        self.pooled: list[tuple[str, tuple[str, float | None]]] = []
        self.cpu_usage: str | None = None
        """The counter the worker judges a test's CPU time on: ``cpuacct.usage`` (v1) or ``cpu.stat``
        (v2) of a cgroup every process of the sandbox is in (or None: no cgroups)."""
        if not cfg.use_cgroups:
            return
        by_dir: dict[str, list[str]] = {}
        for ctl, base in cgroup_dirs().items():
            by_dir.setdefault(os.path.join(base, tag), []).append(ctl)
        for d, ctls in list(by_dir.items()):
            if not set(ctls) <= _POOLABLE or os.path.exists(os.path.join(os.path.dirname(d), "cgroup.controllers")):
                continue
            # a v1 cpu and/or cpuacct hierarchy of its own: a pooled cgroup, already limited
            del by_dir[d]
            self._join_pooled(os.path.dirname(d), ctls, cfg)
        for d, ctls in by_dir.items():
            self._create(d, ctls, cfg, extra_bytes)

    def _join_pooled(self, base: str, ctls: list[str], cfg: SandboxConfig) -> None:
        """Take a pooled cgroup of the v1 cpu and/or cpuacct hierarchy ``base`` (none if that fails)."""
        cores = float(cfg.cpu_cores) if "cpu" in ctls and cfg.cpu_cores is not None else None
        key = (base, cores)
        try:
            pooled = _take_cpu_cgroup(*key)
        except OSError:
            return
        self.dirs.append(pooled)
        self.pooled.append((pooled, key))
        if cores is not None:
            self.cpu_cap = max(1000, int(cores * 100_000)) / 100_000
        if "cpuacct" in ctls:
            self.cpu_usage = os.path.join(pooled, "cpuacct.usage")

    def _create(self, d: str, ctls: list[str], cfg: SandboxConfig, extra_bytes: int) -> None:
        """Make the sandbox's own cgroup ``d`` for the controllers ``ctls`` and set their limits (a
        cgroup or limit that cannot be made is left out)."""
        try:
            os.mkdir(d)
        except OSError:
            return
        self.dirs.append(d)
        if "unified" in ctls:
            self.unified = d
            if self.cpu_usage is None and os.path.exists(os.path.join(d, "cpu.stat")):
                self.cpu_usage = os.path.join(d, "cpu.stat")
        if "cpuacct" in ctls:
            self.cpu_usage = os.path.join(d, "cpuacct.usage")
        for ctl in ctls:
            try:
                self._limit(ctl, d, cfg, extra_bytes)
            except OSError:
                pass

    def _limit(self, ctl: str, d: str, cfg: SandboxConfig, extra_bytes: int) -> None:
        if ctl == "pids":
            _write(os.path.join(d, "pids.max"), str(cfg.max_processes + 4))
        elif ctl == "memory":
            limit = cfg.memory_mb * 2**20 + extra_bytes + 128 * 2**20
            if os.path.exists(os.path.join(d, "memory.limit_in_bytes")):  # v1
                _write(os.path.join(d, "memory.limit_in_bytes"), str(limit))
                sw = os.path.join(d, "memory.memsw.limit_in_bytes")
                if os.path.exists(sw):
                    _write(sw, str(limit))
            else:  # v2
                _write(os.path.join(d, "memory.max"), str(limit))
                if os.path.exists(os.path.join(d, "memory.swap.max")):
                    _write(os.path.join(d, "memory.swap.max"), "0")
        elif ctl == "cpu" and cfg.cpu_cores is not None:
            period = 100_000
            quota = max(1000, int(cfg.cpu_cores * period))
            if os.path.exists(os.path.join(d, "cpu.cfs_quota_us")):  # v1
                _write(os.path.join(d, "cpu.cfs_period_us"), str(period))
                _write(os.path.join(d, "cpu.cfs_quota_us"), str(quota))
            else:  # v2
                _write(os.path.join(d, "cpu.max"), f"{quota} {period}")
            self.cpu_cap = quota / period

    @property
    def procs_files(self) -> list[str]:
        return [os.path.join(d, "cgroup.procs") for d in self.dirs]

    def kill_and_remove(self, deadline_s: float = 10.0) -> list[int]:
        """SIGKILL whatever is still in the cgroups and remove them, waiting until they are really
        empty (v2: ``cgroup.kill``, then ``populated 0`` in ``cgroup.events``; v1: pidfd-checked kills,
        no pid-reuse race, until ``cgroup.procs`` is empty), up to ``deadline_s`` seconds in all.
        Returns the pids that had to be killed (should be none: the namespace already took them)."""
        killed: list[int] = []
        deadline = time.monotonic() + deadline_s
        if self.unified is not None and read_pids(os.path.join(self.unified, "cgroup.procs")):
            try:
                _write(os.path.join(self.unified, "cgroup.kill"), "1")
            except OSError:
                pass
        pause = 0.001
        for d in self.dirs:
            while time.monotonic() < deadline:
                pids = read_pids(os.path.join(d, "cgroup.procs"))
                if not pids and (d != self.unified or _unpopulated(d)):
                    break
                for pid in pids:
                    kill_if_in_cgroup(pid, d)
                    killed.append(pid)
                time.sleep(pause)
                pause = min(pause * 2, 0.05)
        self._return_pooled()
        for d in self.dirs:
            pause = 0.001
            while True:
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        break  # left for the sweep of a later Sandbox (it carries our pid)
                    time.sleep(pause)
                    pause = min(pause * 2, 0.05)
        return killed

    def _return_pooled(self) -> None:
        """An empty pooled cgroup goes back to the pool; one that is not (a process that could not
        be killed) leaves the pool and is removed like the others."""
        pooled, self.pooled = self.pooled, []
        for d, key in pooled:
            self.dirs.remove(d)
            empty = not read_pids(os.path.join(d, "cgroup.procs"))
            with _POOL_LOCK:
                if d not in _POOLED:
                    continue
                if empty:
                    _CPU_POOL.setdefault(key, []).append(d)
                    continue
                _POOLED.remove(d)
            self.dirs.append(d)


def _unpopulated(d: str) -> bool:
    try:
        with open(os.path.join(d, "cgroup.events")) as f:
            return "populated 0" in f.read()
    except OSError:
        return True


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def read_pids(path: str) -> list[int]:
    try:
        with open(path) as f:
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return []


def kill_if_in_cgroup(pid: int, cgdir: str) -> None:
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return
    try:
        rel = os.path.basename(cgdir.rstrip("/"))
        with open(f"/proc/{pid}/cgroup") as f:
            mine = any(line.rstrip("\n").endswith("/" + rel) for line in f)
        if mine:  # the pidfd pins the process we checked: no pid-reuse race
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except OSError:
        pass
    finally:
        os.close(pidfd)
