"""The host side of the sandbox: :class:`Sandbox` launches one worker per program and collects its
results; :class:`SandboxConfig` holds the limits; :class:`TestInput`, :class:`TestOutcome` and
:class:`ProgramResult` are what goes in and comes out.

:meth:`Sandbox.run` makes a scratch directory and the per-sandbox cgroups, starts
:mod:`vpo.sandbox.worker` by path (inside ``unshare`` when namespaces work here, else with rlimits
only, with a warning), sends it the job (the tests' inputs in a memfd it inherits), reads its
results (a JSON line per test, then the test's raw output bytes) under a hard outer timeout and
always kills and removes whatever the sandbox left. :meth:`Sandbox.run_many` runs ``concurrency``
sandboxes at once on threads. Outcomes are raw (stdout, the returned value's JSON): the caller
compares them with the expected outputs, which never enter the sandbox. Linux only.
"""

from __future__ import annotations

import functools
import json
import os
import select
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from vpo.errors import VPOError
from vpo.sandbox import worker as _worker
from vpo.sandbox.cgroups import _Cgroups
from vpo.sandbox.config import SandboxConfig
from vpo.sandbox.cleanup import kill_session, kill_uid, remove_tree, sweep_stale
from vpo.sandbox.probe import probe_namespaces, unshare_flags
from vpo.sandbox.seccomp import seccomp_filter
from vpo.sandbox.worker import SAFE_PATH, SANDBOX_UID_BASE, STATUSES, WORKER_FLAG

WORKER_PATH = os.path.abspath(_worker.__file__)
"""The worker script, run by path in a fresh interpreter."""


class SandboxError(VPOError, RuntimeError):
    """The sandbox cannot run here (not Linux, or ``isolation="namespaces"`` without namespaces).
    A ``RuntimeError`` too, as these errors were before :mod:`vpo.errors` existed."""


@dataclass(frozen=True)
class TestInput:
    """One execution: ``stdin`` text for a stdin/stdout program, or ``call`` (a function name, or a
    method of a ``Solution`` class) with positional ``args`` (JSON-serialisable)."""

    __test__ = False  # not a pytest test class

    stdin: str = ""
    call: str | None = None
    args: tuple = ()


@dataclass
class TestOutcome:
    """What happened to one test. ``stdout`` is capped at ``max_output_bytes``; ``value_json`` is the
    JSON text of a call-based test's return value (``None`` otherwise)."""

    __test__ = False  # not a pytest test class

    status: str
    stdout: str = ""
    value_json: str | None = None
    stderr: str = ""
    time_s: float = 0.0
    exit_code: int | None = None
    signal: int | None = None
    cpu_s: float | None = None
    """CPU seconds the test's processes used (what its time limit is judged on)."""
    limit: str | None = None
    """For a ``timeout``: which limit ended it, ``"cpu"`` or ``"wall"`` (``None``: RLIMIT_CPU)."""
    cleanup_s: float | None = None
    """Seconds the sandbox spent after the test clearing what it left (killing and reaping its
    processes, emptying its working directory); bounded, and a test that leaves more than the bound
    fails (``cleanup_limit``)."""

    @property
    def ok(self) -> bool:
        """Ran to a normal end (not: produced the right answer; the caller compares)."""
        return self.status == "ok"


@dataclass
class ProgramResult:
    """All tests of one program: ``outcomes[i]`` for test i, plus what the sandbox reported.

    ``error``: what ended the sandbox early or went wrong, whoever's fault (None: nothing did).
    ``unavailable``: set (to the reason) when some test has no verdict because of the sandbox, not
    the program: an infrastructure failure (setup, cleanup, protocol, worker death, hard timeout, a
    host-side exception). Those tests are ``sandbox_error``; tests that finished before it keep their
    outcome. A caller must not read such a result as a wrong answer (the code task returns
    :class:`~vpo.errors.ScoringUnavailable`). The program's own failures never set it: a test that
    left more than the sandbox clears is ``cleanup_limit`` and the tests after it ``not_run``; a
    program too large is ``program_too_large``; and where the program shares the worker's uid
    (``isolation="rlimits"`` as non-root) and so can kill it, a worker that dies while the program
    runs is charged to the test that was running (``killed``). docs/sandbox.md, "Whose failure"."""

    outcomes: list[TestOutcome]
    wall_s: float
    isolation: str
    setup: dict = field(default_factory=dict)
    error: str | None = None
    uid: int | None = None
    unavailable: str | None = None

    @property
    def scorable(self) -> bool:
        """Every test has a verdict of the program's own (``unavailable`` is None)."""
        return self.unavailable is None


@functools.lru_cache(maxsize=None)
def _seccomp_filter(machine: str, rlimits: bool) -> dict:
    """The worker's seccomp filter for this kernel's architecture and isolation mode, built here (it is
    data) once per process."""
    return seccomp_filter(machine, rlimits)


def _cpu_count() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _scrubbed_env(home: str) -> dict[str, str]:
    return {
        "PATH": SAFE_PATH,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": home,
        "TMPDIR": home,
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


class Sandbox:
    """Runs programs on test inputs under :class:`SandboxConfig` limits.

    >>> sb = Sandbox(SandboxConfig(timeout_s=2))                      # doctest: +SKIP
    >>> r = sb.run("print(int(input()) * 2)", [TestInput(stdin="21\\n")])  # doctest: +SKIP
    >>> r.outcomes[0].status, r.outcomes[0].stdout                   # doctest: +SKIP
    ('ok', '42\\n')
    """

    def __init__(self, config: SandboxConfig | None = None, **overrides) -> None:
        if config is None:
            config = SandboxConfig(**overrides)
        elif overrides:
            from dataclasses import replace

            config = replace(config, **overrides)
        if not sys.platform.startswith("linux"):
            raise SandboxError(
                f"the vpo sandbox runs on Linux only (this is {sys.platform}): it relies on "
                "fork, prctl, pidfds and, for isolation, Linux namespaces"
            )
        self.config = config
        self.root = os.geteuid() == 0
        ns_ok, reason = probe_namespaces()
        if config.isolation == "namespaces" and not ns_ok:
            raise SandboxError(
                f"SandboxConfig(isolation='namespaces') but Linux namespaces are unavailable here: {reason}. "
                "Install util-linux (`unshare`), enable unprivileged user namespaces "
                "(sysctl kernel.unprivileged_userns_clone=1) or run as root; or choose isolation='rlimits' "
                "knowing what it does not protect (docs/sandbox.md)."
            )
        self.isolation = "namespaces" if (ns_ok and config.isolation != "rlimits") else "rlimits"
        self.isolation_reason = reason
        if self.isolation == "rlimits" and config.isolation == "auto":
            import warnings

            warnings.warn(
                f"vpo sandbox: Linux namespaces unavailable ({reason}); running programs with rlimits only "
                "(no network or filesystem isolation, see docs/sandbox.md)",
                RuntimeWarning,
                stacklevel=2,
            )
        if not config.seccomp:
            import warnings

            warnings.warn(
                "vpo sandbox: SandboxConfig(seccomp=False): programs can connect to host services listening on "
                "path unix sockets (D-Bus, journald, /dev/log...) and use every other socket family and system "
                "call the filter refuses (docs/sandbox.md)",
                RuntimeWarning,
                stacklevel=2,
            )
        sweep_stale(config.scratch_root, self.root and config.use_cgroups)
        self._unshare = None
        if self.isolation == "namespaces":
            import shutil

            self._unshare = shutil.which("unshare")

    # -- one program ------------------------------------------------------------------------------
    def run(self, program: str, tests: Sequence[TestInput]) -> ProgramResult:
        """Run ``program`` on every test (in order, one fork each) inside one sandbox."""
        import subprocess
        import tempfile

        cfg = self.config
        tests = list(tests)
        t0 = time.monotonic()
        if not isinstance(program, str):
            program = program.decode("utf-8", "replace") if isinstance(program, bytes) else str(program)
        if len(program.encode("utf-8", "replace")) > cfg.max_program_bytes:
            return self._all_failed(
                tests, "program_too_large", t0, f"program larger than {cfg.max_program_bytes} bytes: not run"
            )
        if not tests:
            return ProgramResult([], 0.0, self.isolation)
        job_tests, blob = _inputs(tests)
        biggest_io = max(t["stdin"][1] + (t["args"][1] if "args" in t else 0) for t in job_tests)
        tmpfs_bytes = cfg.scratch_mb * 2**20 + 2 * biggest_io + 3 * cfg.max_output_bytes + 4096
        scratch = tempfile.mkdtemp(prefix=f"vpo-sbx-{os.getpid()}-", dir=cfg.scratch_root)
        os.chmod(scratch, 0o711)
        rfd, wfd = os.pipe()
        inputs_fd = _memfd(blob)
        proc = None
        cg = None
        uid = None
        err_file = None
        try:
            err_file = open(os.path.join(scratch, ".worker-stderr"), "w+b")
            worker = [sys.executable, "-I", *([] if cfg.site_packages else ["-S"]), WORKER_PATH, WORKER_FLAG, str(wfd)]
            cmd = (
                [self._unshare, *unshare_flags(self.root), "--", *worker] if self.isolation == "namespaces" else worker
            )
            # the cgroups must exist before the launch; their name can't include the pid yet
            tag = os.path.basename(scratch)  # vpo-sbx-<our pid>-<random>
            cg = _Cgroups(cfg, tag, tmpfs_bytes) if self.root else None
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=err_file,
                pass_fds=(wfd, inputs_fd),
                cwd=scratch,
                env=_scrubbed_env(os.path.join(scratch, "work")),
                start_new_session=True,
                close_fds=True,
            )
            os.close(wfd)
            wfd = -1
            uid = SANDBOX_UID_BASE + proc.pid if self.root else None
            cpu, wall = cfg.cpu_limit_s, cfg.wall_limit_s
            capped = cg is not None and cg.cpu_cap is not None
            job = {
                "program": program,
                "prelude": cfg.prelude,
                "tests": job_tests,
                "scratch": scratch,
                "namespaces": self.isolation == "namespaces",
                "uid": uid,
                "cgroup_procs": cg.procs_files if cg else [],
                "cpu_usage": cg.cpu_usage if cg else None,
                "inputs_fd": inputs_fd,
                "cleanup_s": float(cfg.cleanup_s),
                "wipe_s": float(cfg.wipe_s),
                "tmpfs_bytes": tmpfs_bytes,
                "tmpfs_inodes": cfg.scratch_inodes,
                "stop_after_timeouts": cfg.stop_after_timeouts,
                "seccomp": bool(cfg.seccomp),
                "seccomp_filter": _seccomp_filter(os.uname().machine, self.isolation == "rlimits")
                if cfg.seccomp
                else None,
                "limits": {
                    "timeout_s": wall,
                    "cpu_time_s": cpu,
                    "cpu_parallel": -(-cg.cpu_cap // 1) if capped else _cpu_count(),
                    "cpu_s": int(-(-cpu // 1)) + 1,  # RLIMIT_CPU per process: a backstop behind cpu_time_s
                    "memory_bytes": cfg.memory_mb * 2**20,
                    "file_bytes": cfg.max_output_bytes,
                    "nproc": cfg.max_processes,
                    "nofile": cfg.max_open_files,
                    "output_bytes": cfg.max_output_bytes,
                },
            }
            try:
                proc.stdin.write(json.dumps(job).encode("utf-8"))
                proc.stdin.close()
            except BrokenPipeError:
                pass
            hard = cfg.hard_timeout_s or cfg.startup_slack_s + len(tests) * (wall + 0.5)
            lines, problem = _read_records(
                rfd, t0 + hard, max_bytes=len(tests) * (3 * cfg.max_output_bytes + 65536) + 65536
            )
            if problem:
                kill_session(proc)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                kill_session(proc)
                proc.wait()
            err_file.seek(0)
            worker_err = err_file.read(4000).decode("utf-8", "replace")
            return self._collect(lines, tests, t0, uid, problem, worker_err, proc.returncode)
        finally:
            if err_file is not None:
                err_file.close()
            if wfd >= 0:
                os.close(wfd)
            os.close(rfd)
            os.close(inputs_fd)
            if proc is not None and proc.poll() is None:
                kill_session(proc)
                proc.wait()
            if cg is not None:
                cg.kill_and_remove(cfg.cleanup_s)
            if uid is not None and self.isolation == "rlimits":
                kill_uid(uid, cfg.cleanup_s)
            remove_tree(scratch)

    def _collect(self, lines, tests, t0, uid, problem, worker_err, rc) -> ProgramResult:
        """The program's result from the worker's records. Tests with a record keep it; the others
        are the sandbox's failure (``sandbox_error``, and ``unavailable`` says why) unless the program
        could have caused it: see :class:`ProgramResult` and docs/sandbox.md, "Whose failure"."""
        outcomes, setup, error, ready = _parse_records(lines, len(tests))
        if problem and error is None:
            error = problem
        ended_early = error is None and any(o is None for o in outcomes)
        if ended_early:
            error = f"the sandbox ended early (exit status {rc}); worker stderr: {worker_err.strip()[-500:]}"
        final = list(outcomes)
        unavailable = None
        missing = [k for k, o in enumerate(outcomes) if o is None]
        if missing and ended_early and ready and self.isolation == "rlimits" and not self.root:
            # the program runs as the worker's uid here and can kill it: the test that was running
            # when it died is the program's failure, and the rest are not run because of it
            why = f"{error} (in isolation='rlimits' without root the program can kill the sandbox's worker)"
            final[missing[0]] = TestOutcome(status="killed", stderr=why)
            for k in missing[1:]:
                final[k] = TestOutcome(status="not_run", stderr=why)
        elif missing:
            unavailable = error
            for k in missing:
                final[k] = TestOutcome(status="sandbox_error", stderr=error or "")
        if unavailable is None:
            bad = next((o for o in final if o.status == "sandbox_error"), None)
            if bad is not None:
                unavailable = error or bad.stderr.strip() or "the sandbox failed to run a test"
        return ProgramResult(final, time.monotonic() - t0, self.isolation, setup, error, uid, unavailable)

    def _all_failed(self, tests, status, t0, why) -> ProgramResult:
        return ProgramResult(
            [TestOutcome(status=status, stderr=why) for _ in tests], time.monotonic() - t0, self.isolation, error=why
        )

    # -- many programs ----------------------------------------------------------------------------
    def run_many(
        self, jobs: Iterable[tuple[str, Sequence[TestInput]]], progress: bool = False, desc: str = "running programs"
    ) -> list[ProgramResult]:
        """Run ``(program, tests)`` jobs, ``concurrency`` sandboxes at a time; results in job order."""
        from concurrent.futures import ThreadPoolExecutor

        jobs = list(jobs)
        if not jobs:
            return []
        workers = min(self.config.concurrency or _cpu_count(), len(jobs))
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(jobs), desc=desc, unit="prog")
        out: list[ProgramResult | None] = [None] * len(jobs)

        def one(k: int) -> None:
            prog, tests = jobs[k]
            try:
                out[k] = self.run(prog, tests)
            except Exception as e:  # noqa: BLE001 - a host-side failure fails this program, not the batch
                why = f"the sandbox failed on the host: {type(e).__name__}: {e}"
                out[k] = ProgramResult(
                    [TestOutcome("sandbox_error", stderr=why) for _ in tests],
                    0.0,
                    self.isolation,
                    error=why,
                    unavailable=why,
                )
            if bar is not None:
                bar.update(1)

        if workers == 1:
            for k in range(len(jobs)):
                one(k)
        else:
            with ThreadPoolExecutor(max_workers=workers) as ex:
                list(ex.map(one, range(len(jobs))))
        if bar is not None:
            bar.close()
        return out  # type: ignore[return-value]


def _parse_records(lines, n: int) -> tuple[list, dict, str | None, bool]:
    """The worker's records as ``(outcomes, with None where a test has none; setup report; the fatal
    or protocol error, if any; whether the worker said it was ready)``."""
    outcomes: list[TestOutcome | None] = [None] * n
    setup: dict = {}
    error = None
    ready = False
    for msg, payload in lines:
        if not isinstance(msg, dict):
            error = "sandbox protocol error: unreadable result line"
            continue
        if "fatal" in msg:
            error = str(msg["fatal"])
        elif msg.get("ready"):
            setup, ready = msg.get("setup", {}), True
        elif "i" in msg and isinstance(msg["i"], int) and 0 <= msg["i"] < n:
            st = msg.get("status")
            out, err, value = payload if payload is not None else (None, None, None)
            outcomes[msg["i"]] = TestOutcome(
                status=st if st in STATUSES else "sandbox_error",
                stdout=out.decode("utf-8", "replace") if out is not None else str(msg.get("stdout", "")),
                value_json=value.decode("utf-8", "replace") if value else None,
                stderr=err.decode("utf-8", "replace") if err is not None else str(msg.get("stderr", "")),
                time_s=float(msg.get("time_s", 0.0)),
                exit_code=msg.get("exit_code"),
                signal=msg.get("signal"),
                cpu_s=msg.get("cpu_s"),
                limit=msg.get("limit"),
                cleanup_s=msg.get("cleanup_s"),
            )
    return outcomes, setup, error, ready


_PAYLOAD = ("stdout_bytes", "stderr_bytes", "value_bytes")


def _read_records(fd: int, deadline: float, max_bytes: int) -> tuple[list[tuple], str | None]:
    """Read the worker's records from ``fd`` until the ``done`` record, EOF or the deadline: one JSON
    object per line, and after a test's record the raw bytes of its stdout, stderr tail and returned
    value (lengths in the record: the worker sends them file-to-pipe, never through its memory).
    Returns ``[(object, (stdout, stderr, value) or None)]`` and ``None``, or what went wrong (then the
    caller kills the sandbox)."""
    stream = _RecordStream(max_bytes)
    total = 0
    while True:
        problem = stream.take_complete()
        if problem is not None or stream.done:
            return stream.records, problem
        remaining = deadline - time.monotonic()
        r = select.select([fd], [], [], remaining)[0] if remaining > 0 else []
        if not r:
            return stream.records, "hard timeout: the sandbox was killed"
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return stream.records, None
        total += len(chunk)
        if total > max_bytes:  # a worker never sends this much: treat as broken
            return stream.records, f"sandbox protocol error: more than {max_bytes} bytes of results"
        stream.buf += chunk


class _RecordStream:
    """The worker's records, parsed from the bytes read so far (:func:`_read_records` appends to ``buf``)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.buf = bytearray()
        self.records: list[tuple] = []
        self.pending: tuple[dict, list[int]] | None = None
        """A test's record waiting for its payload, with the payload's lengths."""
        self.done = False
        """True once the ``done`` record has arrived."""

    def take_complete(self) -> str | None:
        """Move every complete record (and payload) out of ``buf`` into ``records``, up to the ``done``
        record; returns a protocol error, or None."""
        while not self.done:
            if self.pending is not None:
                if not self._take_payload():
                    return None
                continue
            nl = self.buf.find(b"\n")
            if nl < 0:
                return None
            line = bytes(self.buf[:nl])
            del self.buf[: nl + 1]
            try:
                msg = json.loads(line)
            except ValueError:
                msg = None
            if isinstance(msg, dict) and "i" in msg and any(k in msg for k in _PAYLOAD):
                lengths = [msg.get(k, 0) for k in _PAYLOAD]
                if not all(isinstance(n, int) and 0 <= n <= self.max_bytes for n in lengths):
                    return "sandbox protocol error: bad payload lengths"
                self.pending = (msg, lengths)
                continue
            self.records.append((msg, None))
            self.done = isinstance(msg, dict) and bool(msg.get("done"))
        return None

    def _take_payload(self) -> bool:
        """Attach the pending record's payload once all of it is in ``buf``; False while it is not."""
        msg, lengths = self.pending
        need = sum(lengths)
        if len(self.buf) < need:
            return False
        parts, at = [], 0
        for n in lengths:
            parts.append(bytes(self.buf[at : at + n]))
            at += n
        del self.buf[:need]
        self.records.append((msg, tuple(parts)))
        self.pending = None
        return True


def _inputs(tests: Sequence[TestInput]) -> tuple[list[dict], bytes]:
    """The job's per-test records and one blob of every test's input: the records carry only
    ``[offset, length]`` spans into it (and the function name of a call test)."""
    records, parts, at = [], [], 0

    def span(data: bytes) -> list[int]:
        nonlocal at
        parts.append(data)
        at += len(data)
        return [at - len(data), len(data)]

    for t in tests:
        rec = {"stdin": span(t.stdin.encode("utf-8"))}
        if t.call is not None:
            rec["call"] = t.call
            rec["args"] = span(json.dumps(list(t.args)).encode("utf-8"))
        records.append(rec)
    return records, b"".join(parts)


def _memfd(data: bytes) -> int:
    """An anonymous in-memory file holding ``data`` (inherited by the worker, by no test process)."""
    try:
        fd = os.memfd_create("vpo-sandbox-inputs", os.MFD_CLOEXEC)
    except (AttributeError, OSError):  # no memfd: an unlinked temporary file
        import tempfile

        fd = os.dup(tempfile.TemporaryFile().fileno())
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    return fd
