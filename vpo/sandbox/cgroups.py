"""Per-sandbox cgroups (root only): a pids and a memory cgroup created before each launch, joined by
the worker, and on the way out emptied (every process SIGKILLed, pidfd-checked so a recycled pid is
never hit) and removed.

They back up the rlimits: ``RLIMIT_NPROC`` and ``RLIMIT_AS`` act per process or per uid, a cgroup caps
the whole sandbox, and it finds leftovers wherever they moved. Which cgroup parents are writable is
probed once (:func:`vpo.sandbox.probe._cgroup_dirs`); where none is, sandboxes run without cgroups.
"""

from __future__ import annotations

import os
import signal
import time
from typing import TYPE_CHECKING

from vpo.sandbox.probe import _cgroup_dirs

if TYPE_CHECKING:
    from vpo.sandbox.host import SandboxConfig


class _Cgroups:
    """Per-sandbox cgroups: created before the launch, joined by the worker, killed and removed after."""

    def __init__(self, cfg: SandboxConfig, tag: str, extra_bytes: int) -> None:
        self.dirs: list[str] = []
        if not cfg.use_cgroups:
            return
        for ctl, base in _cgroup_dirs().items():
            d = os.path.join(base, tag)
            try:
                os.mkdir(d)
            except OSError:
                continue
            self.dirs.append(d)
            try:
                if ctl == "pids":
                    _write(os.path.join(d, "pids.max"), str(cfg.max_processes + 4))
                else:
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
            except OSError:
                pass

    @property
    def procs_files(self) -> list[str]:
        return [os.path.join(d, "cgroup.procs") for d in self.dirs]

    def kill_and_remove(self) -> list[int]:
        """SIGKILL whatever is still in the cgroups (pidfd-checked, no pid-reuse race), remove them.
        Returns the pids that had to be killed (should be empty: the namespace already killed all)."""
        killed: list[int] = []
        for d in self.dirs:
            for _ in range(200):
                pids = _read_pids(os.path.join(d, "cgroup.procs"))
                if not pids:
                    break
                for pid in pids:
                    _kill_if_in_cgroup(pid, d)
                    killed.append(pid)
                time.sleep(0.005)
            for _ in range(200):
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.005)
        return killed


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _read_pids(path: str) -> list[int]:
    try:
        with open(path) as f:
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return []


def _kill_if_in_cgroup(pid: int, cgdir: str) -> None:
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return
    try:
        rel = cgdir.split("/sys/fs/cgroup/", 1)[1].split("/", 1)[-1]
        with open(f"/proc/{pid}/cgroup") as f:
            mine = any(line.rstrip("\n").endswith("/" + rel) for line in f)
        if mine:  # the pidfd pins the process we checked: no pid-reuse race
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except OSError:
        pass
    finally:
        os.close(pidfd)
