"""What this machine allows the sandbox, probed once per process and cached in ``PROBE_CACHE``.

Two questions, both asked on the host before any sandbox starts: can ``unshare`` create the
namespaces the launcher needs here (it is tried with the very flags the launcher uses, which live
here for that reason), and which cgroup parents (pids, memory; v1 or v2) are writable. The full
report, measured by running a probe program, is :func:`vpo.sandbox.capabilities.sandbox_capabilities`,
which shares this cache (``refresh=True`` clears it).
"""

from __future__ import annotations

import os
import sys

from vpo.sandbox.worker import SAFE_PATH


def unshare_flags(root: bool) -> list[str]:
    """The ``unshare`` flags of every launch (non-root adds a user namespace); the probe tries these."""
    flags = ["--net", "--pid", "--mount", "--ipc", "--uts", "--fork", "--kill-child", "--mount-proc"]
    return flags if root else ["--map-root-user", *flags]


PROBE_CACHE: dict = {}


def probe_namespaces() -> tuple[bool, str]:
    """Can we create the namespaces here? (cached) Returns (ok, reason)."""
    if "ns" in PROBE_CACHE:
        return PROBE_CACHE["ns"]
    import shutil
    import subprocess

    if not sys.platform.startswith("linux"):
        res = (False, f"namespaces need Linux (this is {sys.platform})")
    elif shutil.which("unshare") is None:
        res = (False, "the `unshare` binary (util-linux) is not installed")
    else:
        cmd = [shutil.which("unshare"), *unshare_flags(os.geteuid() == 0), "true"]
        try:
            p = subprocess.run(cmd, capture_output=True, timeout=20, env={"PATH": SAFE_PATH})
            ok = p.returncode == 0
            res = (ok, "ok" if ok else f"`unshare` failed: {p.stderr.decode(errors='replace').strip()[:300]}")
        except (OSError, subprocess.TimeoutExpired) as e:
            res = (False, f"`unshare` could not run: {e}")
    PROBE_CACHE["ns"] = res
    return res


def cgroup_dirs() -> dict[str, str]:
    """Writable cgroup parents (cached), ``{}`` where none is: ``pids``, ``memory`` and ``cpu`` (v1
    hierarchies or the v2 one, wherever the controller is), ``cpuacct`` (v1: the CPU counter a test is
    judged on), and ``unified``, the v2 hierarchy when one of those controllers is in it, or when no
    v1 cpuacct hierarchy is writable (then for its ``cpu.stat``, the CPU counter); its cgroups also
    have ``cgroup.kill`` and ``cgroup.events``. On a pure v2 machine several keys name the same
    directory."""
    if "cg" in PROBE_CACHE:
        return PROBE_CACHE["cg"]
    found: dict[str, str] = {}
    try:
        with open("/proc/self/cgroup") as f:
            lines = [ln.strip().split(":", 2) for ln in f if ln.strip()]
    except OSError:
        lines = []
    for hid, controllers, path in lines:
        if hid == "0" and controllers == "":  # the v2 hierarchy: /sys/fs/cgroup, or .../unified (hybrid)
            _v2_dirs(path, found, counter_only=False)
            continue
        ctls = controllers.split(",")
        for ctl in ctls:
            if ctl in ("pids", "memory", "cpu", "cpuacct"):
                # a co-mounted hierarchy is mounted under its joined name (cpu,cpuacct), often with
                # links for each controller: the joined name is the real one
                mount = next((m for m in (",".join(ctls), ctl) if os.path.isdir(f"/sys/fs/cgroup/{m}")), ",".join(ctls))
                base = f"/sys/fs/cgroup/{mount}{path.rstrip('/')}"
                if _try_mkdir_cgroup(base):
                    found[ctl] = base  # a v1 controller wins over the same controller in v2
    v2 = next((path for hid, controllers, path in lines if hid == "0" and controllers == ""), None)
    if "cpuacct" not in found and "unified" not in found and v2 is not None:
        # no CPU counter yet: the v2 hierarchy's own cpu.stat (every v2 cgroup has one, with or
        # without controllers) is what a test's CPU time is judged on, whatever it costs
        _v2_dirs(v2, found, counter_only=True)
    PROBE_CACHE["cg"] = found
    return found


def _v2_dirs(path: str, found: dict[str, str], counter_only: bool) -> None:
    """Add the v2 hierarchy at ``path`` to ``found`` where it is writable: for the controllers enabled
    in it (``counter_only=False``), or as ``unified`` alone, for its CPU counter (``True``)."""
    for mount in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        if not os.path.exists(os.path.join(mount, "cgroup.controllers")):
            continue
        base = f"{mount}{path.rstrip('/')}"
        if not _try_mkdir_cgroup(base):
            return
        if counter_only:
            found["unified"] = base
            return
        try:
            with open(os.path.join(base, "cgroup.subtree_control")) as f:
                enabled = f.read().split()
        except OSError:
            enabled = []
        for ctl in ("pids", "memory", "cpu"):
            if ctl in enabled:
                found.setdefault(ctl, base)
        # used only where a controller lives there: a controller-less v2 cgroup beside the v1 ones (a
        # hybrid machine) cost ~10 % of the throughput benchmark, measured; see the counter above
        if set(enabled) & {"pids", "memory", "cpu"}:
            found["unified"] = base
        return


def _try_mkdir_cgroup(base: str) -> bool:
    probe = os.path.join(base, f"vpo-probe-{os.getpid()}")
    try:
        os.mkdir(probe)
    except OSError:
        return False
    try:
        os.rmdir(probe)
    except OSError:
        pass
    return True
