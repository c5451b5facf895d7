"""The sandbox's limits (:class:`SandboxConfig`), below both :mod:`vpo.sandbox.host` (which runs with
them) and :mod:`vpo.sandbox.cgroups` (which sets them as cgroup limits)."""

from __future__ import annotations

from dataclasses import dataclass

ISOLATION_MODES = ("auto", "namespaces", "rlimits")


@dataclass
class SandboxConfig:
    """Limits and isolation of one sandbox (one program, all its tests). Defaults follow the paper's
    code setup (6 s per test)."""

    timeout_s: float = 6.0
    """The time limit of one test (the paper: 6 s), judged on the CPU time its processes use together
    (``cpu_time_s``), so that a loaded machine or a CPU-hungry neighbour does not fail an honest
    program; the wall clock (``wall_timeout_s``) is a backstop, for programs that sleep or block."""
    cpu_time_s: float | None = None
    """CPU-time limit of one test, every process of it together (the worker reads the sandbox's cgroup
    or, without one, ``/proc``). Each process also gets ``RLIMIT_CPU`` = this rounded up + 1 s, a
    backstop. Default ``timeout_s``."""
    wall_timeout_s: float | None = None
    """Wall-clock limit of one test; default ``2 * cpu_time_s + 1``: a program that gets half a CPU
    still finishes, one that sleeps ends there."""
    cpu_cores: float | None = 1.0
    """CPU cap of the whole sandbox, in cores (cgroup ``cpu.max`` / ``cpu.cfs_quota_us``, root only),
    and each sandbox is its own group for the scheduler: 15 spinners in one sandbox get one share,
    not 15. ``None``: no cap (the group share stays)."""
    memory_mb: int = 1024
    """``RLIMIT_AS`` of each test process (address space, MiB)."""
    max_processes: int = 16
    """``RLIMIT_NPROC`` (and pids cgroup limit): processes + threads a test may have at once."""
    max_output_bytes: int = 1 << 20
    """Cap on captured stdout / the returned value, and ``RLIMIT_FSIZE`` on every file written."""
    max_open_files: int = 64
    """``RLIMIT_NOFILE`` of each test process."""
    scratch_mb: int = 64
    """Size of the tmpfs scratch directory (namespace mode), on top of room for the test I/O files."""
    scratch_inodes: int = 4096
    """Maximum number of files/directories in the tmpfs scratch directory (namespace mode), and in every
    mode the most entries a test may leave in its working directory: past it the wipe stops and the
    test fails (``cleanup_limit``)."""
    concurrency: int | None = None
    """Sandboxes running at once in :meth:`Sandbox.run_many`; default = usable CPU cores."""
    isolation: str = "auto"
    """``namespaces`` (fail if unavailable), ``rlimits`` (no namespaces) or ``auto`` (the best here)."""
    use_cgroups: bool = True
    """Add a per-sandbox pids + memory cgroup when the cgroup tree is writable (root)."""
    startup_slack_s: float = 10.0
    """Added to the sum of per-test timeouts to make the sandbox's hard outer timeout."""
    hard_timeout_s: float | None = None
    """The hard outer timeout of one sandbox; default = ``startup_slack_s + tests * (wall limit + 0.5)``."""
    stop_after_timeouts: int | None = None
    """After this many timed-out tests, skip the program's remaining tests (status ``not_run``):
    faster on programs that loop forever, but no longer exact per test. ``None``: run every test."""
    site_packages: bool = False
    """Let programs import from site-packages (numpy...). Off: stdlib only, and a faster start."""
    prelude: str = ""
    """Python run in the program's namespace before it (e.g. ``from typing import *``)."""
    max_program_bytes: int = 1 << 20
    """Programs larger than this are not run (every test fails with ``program_too_large``: the answer's
    own fault, not the sandbox's)."""
    scratch_root: str | None = None
    """Where the host-side scratch directories are created (default: the system temp dir)."""
    seccomp: bool = True
    """Install the worker's seccomp filter in every test process (namespaces, mounts, ptrace, keyctl,
    bpf, io_uring, perf_event_open, unix/vsock/netlink sockets... answer EPERM). If the kernel refuses
    it, tests fail with ``sandbox_error`` and the result is ``unavailable`` (fail closed); ``False``
    runs programs without it, which also lets them reach host services on path unix sockets (a
    warning says so; docs/sandbox.md)."""
    cleanup_s: float = 10.0
    """How long the worker waits, after killing them, for a test's processes to be gone before the
    next test; past it the sandbox stops (an infrastructure failure: its remaining tests are
    ``sandbox_error`` and ``ProgramResult.unavailable`` says why)."""
    wipe_s: float = 2.0
    """How long the worker spends emptying a test's working directory. Past it, or past
    ``scratch_inodes`` entries, the test that left them fails (``cleanup_limit``: the program's
    doing) and the remaining tests are ``not_run``. On tmpfs (namespace mode) 4,000 entries take
    milliseconds; on a slow host disk (rlimits mode) a directory can cost milliseconds each."""

    def __post_init__(self) -> None:  # noqa: C901 (a flat list of independent setting checks)
        if not (self.timeout_s > 0):
            raise ValueError(f"SandboxConfig.timeout_s must be > 0 seconds, got {self.timeout_s!r}")
        for name in (
            "memory_mb",
            "max_processes",
            "max_output_bytes",
            "max_open_files",
            "scratch_mb",
            "scratch_inodes",
            "max_program_bytes",
        ):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"SandboxConfig.{name} must be a positive integer, got {v!r}")
        if self.max_open_files < 16:
            raise ValueError("SandboxConfig.max_open_files must be >= 16 (the interpreter needs a few)")
        if self.concurrency is not None and (not isinstance(self.concurrency, int) or self.concurrency < 1):
            raise ValueError(f"SandboxConfig.concurrency must be None or an integer >= 1, got {self.concurrency!r}")
        if self.isolation not in ISOLATION_MODES:
            raise ValueError(f"SandboxConfig.isolation must be one of {ISOLATION_MODES}, got {self.isolation!r}")
        if not (self.startup_slack_s >= 0):
            raise ValueError(f"SandboxConfig.startup_slack_s must be >= 0, got {self.startup_slack_s!r}")
        if self.hard_timeout_s is not None and not (self.hard_timeout_s > 0):
            raise ValueError(f"SandboxConfig.hard_timeout_s must be None or > 0, got {self.hard_timeout_s!r}")
        if self.stop_after_timeouts is not None and (
            not isinstance(self.stop_after_timeouts, int) or self.stop_after_timeouts < 1
        ):
            raise ValueError(
                f"SandboxConfig.stop_after_timeouts must be None or an integer >= 1, got {self.stop_after_timeouts!r}"
            )
        for name in ("cleanup_s", "wipe_s"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise ValueError(f"SandboxConfig.{name} must be a number > 0, got {v!r}")
        for name in ("cpu_time_s", "wall_timeout_s", "cpu_cores"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not (v > 0)):
                raise ValueError(f"SandboxConfig.{name} must be None or a number > 0, got {v!r}")

    @property
    def cpu_limit_s(self) -> float:
        """The CPU-time limit of one test in effect (``cpu_time_s`` or ``timeout_s``)."""
        return float(self.cpu_time_s if self.cpu_time_s is not None else self.timeout_s)

    @property
    def wall_limit_s(self) -> float:
        """The wall-clock limit of one test in effect (``wall_timeout_s`` or ``2 * cpu_limit_s + 1``)."""
        return float(self.wall_timeout_s if self.wall_timeout_s is not None else 2 * self.cpu_limit_s + 1)
