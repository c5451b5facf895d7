"""Cleanup after sandboxes on the host: killing a sandbox's session or every process of its uid, removing
scratch directories a hostile program tried to make undeletable, and sweeping what sandboxes of dead
scoring processes left behind.

A SIGKILLed scoring process cannot clean up after itself; its scratch directories and cgroups carry
its pid in their names (``vpo-sbx-<pid>-...``), so the next :class:`~vpo.sandbox.host.Sandbox` on the
machine removes those whose owner is dead (once per process and scratch root).
"""

from __future__ import annotations

import os
import re
import signal
import sys

from vpo.sandbox.cgroups import kill_if_in_cgroup, read_pids
from vpo.sandbox.probe import cgroup_dirs
from vpo.sandbox.worker import SAFE_PATH, empty_tree, procs_of_uid

_SWEPT: set = set()
"""(scratch root, cgroups) pairs already swept by this process."""


_STALE_NAME = re.compile(r"vpo-(?:sbx|pool)-(\d+)-")


def _owner_dead(name: str) -> bool:
    """Whether ``name`` is a sandbox entry (``vpo-sbx-<pid>-...``, or a pooled cgroup
    ``vpo-pool-<pid>-...``) of another process that no longer exists; False for anything else,
    including our own entries and owners we cannot signal."""
    m = _STALE_NAME.match(name)
    if not m or int(m.group(1)) == os.getpid():
        return False
    try:
        os.kill(int(m.group(1)), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def sweep_stale(scratch_root: str | None, cgroups: bool) -> None:
    """Remove scratch directories and cgroups left by scoring processes that died (SIGKILL leaves
    no chance to clean up). Names carry the owner's pid; only dead owners' entries are touched."""
    import tempfile

    root = scratch_root or tempfile.gettempdir()
    key = (root, cgroups)
    if key in _SWEPT:
        return
    _SWEPT.add(key)
    try:
        for name in os.listdir(root):
            if _owner_dead(name):
                remove_tree(os.path.join(root, name))
    except OSError:
        pass
    if cgroups:
        _sweep_stale_cgroups()


def _sweep_stale_cgroups() -> None:
    """Kill what is left in dead owners' cgroups and remove them."""
    for base in cgroup_dirs().values():
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for name in names:
            if _owner_dead(name):
                d = os.path.join(base, name)
                for pid in read_pids(os.path.join(d, "cgroup.procs")):
                    kill_if_in_cgroup(pid, d)
                try:
                    os.rmdir(d)
                except OSError:
                    pass


def kill_session(proc) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass


def kill_uid(uid: int, deadline_s: float = 10.0) -> None:
    """Kill every process of ``uid`` (root, no namespaces): a helper becomes that uid and kill(-1)s,
    again until none is left or ``deadline_s`` has passed (a deadline, not a count of rounds)."""
    import subprocess
    import time

    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if not procs_of_uid(uid):
            return
        subprocess.run(
            [sys.executable, "-I", "-S", "-c", "import os; os.kill(-1, 9)"],
            user=uid,
            group=uid,
            extra_groups=[],
            env={"PATH": SAFE_PATH},
            cwd="/",
            check=False,
        )


def remove_tree(path: str) -> None:
    """Remove a scratch directory and everything a program left in it, however deep (iterative, see
    :func:`vpo.sandbox.worker.empty_tree`) and whatever permissions it set. Best effort: what cannot
    be removed stays for the sweep of a later Sandbox (the name carries the owner's pid)."""
    try:
        empty_tree(path)
        os.rmdir(path)
    except OSError:
        pass
