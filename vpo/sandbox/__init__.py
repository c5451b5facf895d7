"""Run untrusted, model-written Python programs against test inputs, behind an OS isolation boundary.

The code task (:mod:`vpo.tasks.code`) scores answers by running them; everything a model writes runs
here and nowhere else: one sandboxed interpreter per program (Linux namespaces when available, else
rlimits only), one fork per test, raw outputs back, expected outputs never inside. Layout:

* ``worker.py``: the worker that runs inside the sandbox, launched by path; standard library only.
* ``host.py``: :class:`Sandbox` (launch, collect, clean up), :class:`SandboxConfig` and the data classes.
* ``cgroups.py``: per-sandbox pids + memory cgroups (root). ``cleanup.py``: killing leftovers,
  removing scratch directories, sweeping what dead scoring processes left.
* ``probe.py``: cached probes of what the machine allows (namespaces, writable cgroups);
  ``capabilities.py``: :func:`sandbox_capabilities`, the measured report.

Simplifications: Linux and Python only (the seccomp filter knows x86_64 and aarch64), world-readable
host files stay readable.
The threat model, what each mode enforces and the measured figures are in docs/sandbox.md.
"""

from vpo.sandbox.capabilities import sandbox_capabilities
from vpo.sandbox.config import ISOLATION_MODES, SandboxConfig
from vpo.sandbox.host import ProgramResult, Sandbox, SandboxError, TestInput, TestOutcome
from vpo.sandbox.worker import SANDBOX_UID_BASE, STATUSES, WORKER_FLAG

__all__ = [
    "ISOLATION_MODES",
    "SANDBOX_UID_BASE",
    "STATUSES",
    "WORKER_FLAG",
    "ProgramResult",
    "Sandbox",
    "SandboxConfig",
    "SandboxError",
    "TestInput",
    "TestOutcome",
    "sandbox_capabilities",
]
