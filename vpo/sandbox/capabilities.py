"""``sandbox_capabilities()``: what isolation this machine actually gives, measured rather than assumed.

It runs one probe program in a default sandbox (does it reach the network, write /etc, see host
processes?) and combines the answers with the setup report and the cached probes of
:mod:`vpo.sandbox.probe`. The security suite (tests/sandbox/test_sandbox.py) uses it to decide which checks
apply here; docs/sandbox.md shows the report for the development machine.
"""

from __future__ import annotations

import os
from typing import Any

from vpo.sandbox.config import SandboxConfig
from vpo.sandbox.host import Sandbox, TestInput
from vpo.sandbox.probe import PROBE_CACHE, cgroup_dirs


def sandbox_capabilities(refresh: bool = False) -> dict[str, Any]:
    """What this machine enforces, measured by running a probe program (cached).

    Keys: ``isolation`` (namespaces | rlimits), ``reason`` (why, if not namespaces), ``user`` (root |
    non-root), ``network_isolated``, ``pid_namespace``, ``readonly_filesystem`` (how),
    ``tmpfs_scratch``, ``unique_uid`` (root: per-sandbox unprivileged uid), ``user_namespace``
    (non-root), ``cgroup_pids``, ``cgroup_memory``, ``rlimits`` (always: AS, CPU, FSIZE, NPROC,
    NOFILE, CORE), ``no_new_privs`` (always), ``seccomp_available`` (the host built the filter, the
    kernel accepted it), ``seccomp`` (the probe program ran under it: ``Seccomp: 2``),
    ``unix_sockets_blocked`` (the probe program's ``socket(AF_UNIX)`` was refused: host services on
    path unix sockets are out of reach; **False with** ``seccomp=False``), ``cgroup_cpu`` (per-sandbox
    CPU cap), ``cgroup_kill`` (v2 ``cgroup.kill`` for the final cleanup), ``cpu_time_source`` (where
    the worker reads a test's CPU time: ``cgroup``, a counter that pools every process the test made,
    or ``proc``, which misses children the kernel reaped itself), ``landlock`` (the kernel's Landlock
    ABI, applied in every test process: writes only beneath the working directory and to /dev/null;
    False where the kernel has none), ``private_dev`` (the sandbox has its own five-node ``/dev``: no
    host pty or GPU node), ``worker_capabilities`` (the capability set the worker kept, hex, or False
    when it had none).
    """
    if "caps" in PROBE_CACHE and not refresh:
        return dict(PROBE_CACHE["caps"])
    if refresh:
        PROBE_CACHE.clear()
    sb = Sandbox(SandboxConfig(timeout_s=5, isolation="auto"))
    probe = (
        "import os, socket\n"
        "ok = []\n"
        "try:\n    socket.create_connection(('1.1.1.1', 53), timeout=1); ok.append('net')\n"
        "except OSError: pass\n"
        "try:\n    open('/etc/.vpo-probe', 'w'); ok.append('etc')\nexcept OSError: pass\n"
        "ok.append('pid1=%d' % len([p for p in os.listdir('/proc') if p.isdigit()]))\n"
        "ok.append('seccomp=' + open('/proc/self/status').read().split('Seccomp:')[1].split()[0])\n"
        "try:\n    socket.socket(socket.AF_UNIX).close(); ok.append('unix')\nexcept OSError: pass\n"
        "print(' '.join(ok))\n"
    )
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = sb.run(probe, [TestInput()])
    out = res.outcomes[0].stdout.split() if res.outcomes else []
    ns = sb.isolation == "namespaces"
    nprocs = next((int(x.split("=")[1]) for x in out if x.startswith("pid1=")), None)
    cg = cgroup_dirs() if (sb.root and sb.config.use_cgroups) else {}
    caps = {
        "isolation": sb.isolation,
        "reason": sb.isolation_reason,
        "user": "root" if sb.root else "non-root",
        "network_isolated": "net" not in out and res.outcomes[0].ok,
        "pid_namespace": ns and nprocs is not None and nprocs <= 3,
        "readonly_filesystem": res.setup.get("readonly_root") or False,
        "host_files_writable_by_probe": "etc" in out,
        "tmpfs_scratch": bool(res.setup.get("tmpfs_scratch")),
        "unique_uid": sb.root,
        "user_namespace": ns and not sb.root,
        "cgroup_pids": "pids" in cg,
        "cgroup_memory": "memory" in cg,
        "rlimits": ["AS", "CPU", "FSIZE", "NPROC", "NOFILE", "CORE"],
        "no_new_privs": True,
        "seccomp_available": bool(res.setup.get("seccomp")) and res.outcomes[0].ok,
        "seccomp": "seccomp=2" in out,
        "unix_sockets_blocked": "unix" not in out and res.outcomes[0].ok,
        "cgroup_cpu": "cpu" in cg,
        "cgroup_kill": "unified" in cg and _has_cgroup_kill(cg["unified"]),
        "cpu_time_source": res.setup.get("cpu_time_source", "none"),
        "landlock": res.setup.get("landlock") or False,
        "private_dev": bool(res.setup.get("dev")),
        "worker_capabilities": res.setup.get("worker_capabilities"),
        "probe_status": res.outcomes[0].status if res.outcomes else "none",
    }
    PROBE_CACHE["caps"] = caps
    return dict(caps)


def _has_cgroup_kill(base: str) -> bool:
    """Whether a child cgroup of ``base`` has ``cgroup.kill`` (Linux >= 5.14; root cgroups never do)."""
    probe = os.path.join(base, f"vpo-probe-kill-{os.getpid()}")
    try:
        os.mkdir(probe)
    except OSError:
        return False
    try:
        return os.path.exists(os.path.join(probe, "cgroup.kill"))
    finally:
        try:
            os.rmdir(probe)
        except OSError:
            pass
