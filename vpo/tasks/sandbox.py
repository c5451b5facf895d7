"""Run untrusted, model-written Python programs against test inputs, behind an OS isolation boundary.

The code task (:mod:`vpo.tasks.code`) scores answers by running them; everything a model writes runs
here and nowhere else. One *sandbox* runs one program on up to a few dozen test inputs:

* **One interpreter per program, one fork per test.** The parent starts a worker (``python -I -S
  this_file --vpo-sandbox-worker``) inside fresh Linux namespaces; the worker compiles the program
  once, then forks one child per test. The child drops privileges, applies resource limits and
  runs the program with the test's stdin (stdin/stdout tests) or calls the named function with the
  test's arguments (call-based tests). The worker enforces the per-test wall-clock timeout and kills
  whatever the test left behind before the next test starts.
* **Many programs in parallel**: :meth:`Sandbox.run_many` runs ``concurrency`` sandboxes at once
  (default: the number of usable CPU cores).
* **The sandbox only executes.** Expected outputs never enter it: the worker returns raw stdout /
  the JSON of the returned value (both capped) and the caller compares them on the host, so a
  program cannot read the answers from memory.
* **Robust protocol.** Results travel as JSON lines on a dedicated pipe fd that no program process
  holds (children get only their own stdin/stdout/stderr files, plus a result file for call-based
  tests); a program printing garbage, closing fds or exiting strangely can only fail its own test.

What is enforced, where (:func:`sandbox_capabilities` reports what this machine actually gives):

======================================  =============================================================
protection                              mechanism
======================================  =============================================================
network                                 new network namespace (only a downed loopback)
other processes (signal, ptrace, see)   new PID namespace; the worker is its PID 1; ``--kill-child``
kill everything afterwards              PID 1 exit kills the namespace; per test ``kill(-1)`` from PID 1
host files (write / delete)             mount namespace, whole tree re-mounted read-only and nosuid
                                        (``mount_setattr(AT_RECURSIVE)``); only a fresh, size-capped
                                        tmpfs mounted over ``/tmp`` is writable, gone afterwards (the
                                        interpreter's library dirs are bound read-only inside it)
privileges                              root: a unique unprivileged uid/gid per sandbox
                                        (``SANDBOX_UID_BASE + pid``), no groups, all capabilities and
                                        the bounding set dropped; non-root: a user namespace, all
                                        capabilities dropped; ``no_new_privs`` always
CPU / wall clock                        ``RLIMIT_CPU`` per process; wall-clock per test (worker) and a
                                        hard outer timeout per sandbox (parent kills the session)
memory                                  ``RLIMIT_AS`` per process; a memory cgroup per sandbox when
                                        cgroups are writable (root)
process count / fork bombs              ``RLIMIT_NPROC`` on the unique uid (root) or per user
                                        namespace (non-root); a pids cgroup per sandbox when writable
output / disk                           ``RLIMIT_FSIZE`` per file, stdout/stderr capture capped,
                                        tmpfs ``size=``/``nr_inodes=``
environment                             scrubbed (fixed PATH/LANG/HOME), ``python -I -S``
======================================  =============================================================

Simplifications and what is *not* enforced: Linux only; Python programs only; no seccomp filter
(system calls are not filtered: the kernel itself is the boundary; as root, nested user namespaces
stay possible, as non-root they are blocked by a zero ``max_user_namespaces`` in ours); files that
are world-readable on the host stay readable (read-only); time is not virtualised.

Where namespaces are unavailable (``isolation="rlimits"``: no ``unshare`` binary, or no
permission), only the rlimits, the session/process-group kill, the scrubbed environment and the
scratch cwd remain; as root the unique uid and the cgroups still apply (so
root-owned files and root processes stay protected, and leftovers are killed through the cgroup /
uid), but there is no network isolation and world-writable host directories (``/tmp``) are
writable. As non-root without namespaces a program can signal the caller's processes and a
daemonising program can outlive the sandbox: do not run untrusted code that way. See
docs/sandbox.md for the threat model and measured figures.

This module imports only the standard library at module level: the same file is the worker script.
"""

from __future__ import annotations

import errno
import json
import os
import select
import signal
import sys
import time

WORKER_FLAG = "--vpo-sandbox-worker"
SANDBOX_UID_BASE = 1_900_000_000
"""Root mode runs each sandbox's programs as uid/gid ``SANDBOX_UID_BASE + pid of its launcher``: a
uid no other process has, so ``RLIMIT_NPROC`` counts only that sandbox and ``kill(-1)`` as that uid
reaches only its leftovers."""

STATUSES = (
    "ok",  # exited normally (exit code 0 / SystemExit(0)); correctness is judged by the caller
    "syntax_error",  # the program does not compile
    "runtime_error",  # an uncaught exception, a non-zero exit or a crash (e.g. SIGSEGV)
    "timeout",  # wall-clock or CPU-time limit
    "memory_limit",  # MemoryError under RLIMIT_AS, or killed by the memory cgroup
    "output_limit",  # wrote more than max_output_bytes to stdout/stderr/a file
    "no_function",  # call-based test: the named function (or Solution method) is not defined
    "bad_return",  # call-based test: the return value is not JSON-serialisable
    "no_return",  # call-based test: exited without returning (e.g. os._exit inside the function)
    "killed",  # killed by a signal we did not send (e.g. the OOM killer)
    "not_run",  # the sandbox died or hit its hard timeout before this test ran
    "sandbox_error",  # the sandbox itself failed (setup, protocol): a bug or a host problem
)

# exit codes the per-test child uses to tell the worker what happened. A program can exit with
# these numbers itself; that only turns one failure into another kind of failure.
_EXIT_EXCEPTION = 101
_EXIT_MEMORY = 102
_EXIT_OUTPUT = 103
_EXIT_NO_FUNCTION = 104
_EXIT_BAD_RETURN = 105
_EXIT_SETUP = 106

_SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"


# =================================================================================================
# worker side: runs inside the sandbox, stdlib only. Entry point: _worker_main (bottom of file).
# =================================================================================================

_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND = 32, 4096
_MOUNT_ATTR_RDONLY, _MOUNT_ATTR_NOSUID, _MOUNT_ATTR_NODEV = 0x1, 0x2, 0x4
_AT_FDCWD, _AT_RECURSIVE = -100, 0x8000
_SYS_MOUNT_SETATTR = 442  # same number on every architecture (asm-generic table, Linux >= 5.12)
_PR_SET_NO_NEW_PRIVS, _PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 38, 24, 47, 4
_PR_SET_CHILD_SUBREAPER = 36
_PRELOAD = ("collections", "heapq", "bisect", "itertools", "functools", "math", "re", "string", "typing",
            "random", "fractions", "decimal", "statistics", "copy", "operator", "array", "io", "json")
"""Imported by the worker before forking tests when the program runs as an unprivileged uid without
a mount namespace (root, ``isolation="rlimits"``): the uid may be unable to read the stdlib."""


def _libc():
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _emit(fd: int, obj: dict) -> None:
    _write_all(fd, (json.dumps(obj, ensure_ascii=True) + "\n").encode("ascii"))


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        b = os.read(fd, 1 << 20)
        if not b:
            return b"".join(chunks)
        chunks.append(b)


def _mount_setattr(libc, path: bytes, set_flags: int, clr_flags: int, recursive: bool) -> None:
    import ctypes

    class MountAttr(ctypes.Structure):
        _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                    ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]

    attr = MountAttr(set_flags, clr_flags, 0, 0)
    flags = _AT_RECURSIVE if recursive else 0
    if libc.syscall(_SYS_MOUNT_SETATTR, _AT_FDCWD, path, flags, ctypes.byref(attr), ctypes.sizeof(attr)) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"mount_setattr({path!r}): {os.strerror(e)}")


def _mount(libc, source, target: bytes, fstype, flags: int, data) -> None:
    import ctypes

    if libc.mount(source, target, fstype, flags, data) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"mount({target!r}, {fstype!r}): {os.strerror(e)}")


def _make_readonly(libc) -> str:
    """Make every mount of this (private) mount namespace read-only and nosuid. (Not nodev: that
    would close /dev/null too; device nodes stay governed by their permissions.)"""
    flags = _MOUNT_ATTR_RDONLY | _MOUNT_ATTR_NOSUID
    try:
        _mount_setattr(libc, b"/", flags, 0, recursive=True)
        return "mount_setattr"
    except OSError:
        pass
    # older kernels: remount each mount point read-only; a mount that refuses stays as it was
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f]
    failed = 0
    for mp in points:
        mp = mp.encode().decode("unicode_escape").encode()
        try:
            _mount(libc, None, mp, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID, None)
        except OSError:
            failed += 1
    return "remount" if not failed else f"remount-partial({failed} of {len(points)} mounts stayed writable)"


def _setup(job: dict) -> dict:
    """Namespace-side setup, run once by the worker before any program code. Returns a report."""
    rep: dict = {"pid": os.getpid(), "readonly_root": False, "tmpfs_scratch": False, "cgroups": []}
    scratch = job["scratch"]
    for procs in job.get("cgroup_procs", []):  # join the per-sandbox cgroups first (needs writable /sys)
        try:
            with open(procs, "w") as f:
                f.write("0")
            rep["cgroups"].append(procs)
        except OSError as e:
            rep.setdefault("warnings", []).append(f"cgroup {procs}: {e}")
    libc = None
    if job["namespaces"]:
        libc = _libc()
        how = _make_readonly(libc)
        rep["readonly_root"] = how
        # a fresh, writable view of our own pid namespace's /proc (children lower their OOM shield)
        try:
            _mount_setattr(libc, b"/proc", 0, _MOUNT_ATTR_RDONLY, recursive=False)
        except OSError:
            try:
                _mount(libc, b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None)
            except OSError as e:
                rep.setdefault("warnings", []).append(f"/proc stays read-only: {e}")
        size = int(job["tmpfs_bytes"])
        uid = job.get("uid")
        # The interpreter's own directories, bound read-only inside the scratch tmpfs: the
        # unprivileged uid may not be able to traverse to the real ones (e.g. a Python under /root).
        # O_PATH handles first: the tmpfs below may cover them (a virtualenv under /tmp).
        py_dirs = [(p, os.open(p, os.O_PATH | os.O_DIRECTORY)) for p in sys.path if p and os.path.isdir(p)]
        # The scratch tmpfs goes over /tmp: a path every uid can traverse (the host-side directory
        # may sit below a 0700 parent), and the host's /tmp is hidden from the program as a bonus.
        scratch = "/tmp" if os.path.isdir("/tmp") else scratch
        opts = f"size={size},nr_inodes={int(job['tmpfs_inodes'])},mode=0755"
        _mount(libc, b"tmpfs", scratch.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, opts.encode())
        rep["tmpfs_scratch"] = scratch
        py_map = []
        for k, (path, fd) in enumerate(py_dirs):
            target = os.path.join(scratch, ".py", str(k))
            os.makedirs(target, mode=0o755)
            _mount(libc, f"/proc/self/fd/{fd}".encode(), target.encode(), None, _MS_BIND, None)
            os.close(fd)
            _mount_setattr(libc, target.encode(), _MOUNT_ATTR_RDONLY | _MOUNT_ATTR_NOSUID | _MOUNT_ATTR_NODEV, 0,
                           recursive=True)
            py_map.append([path, target])
        if py_map:
            os.chmod(os.path.join(scratch, ".py"), 0o755)
        rep["py_map"] = py_map
        if uid is None:
            rep["mode"] = "user-namespace"
            # these limits belong to the opener's user namespace (ours), never the host's
            try:
                with open("/proc/sys/user/max_user_namespaces", "w") as f:
                    f.write("0")
                rep["nested_userns_blocked"] = True
            except OSError as e:
                rep["nested_userns_blocked"] = False
                rep.setdefault("warnings", []).append(f"nested user namespaces stay allowed: {e}")
        else:
            rep["mode"] = "root"
    job["scratch"] = rep["scratch"] = scratch  # from here on: the directory as seen inside
    os.chdir(scratch)
    os.makedirs("io", mode=0o700, exist_ok=True)
    os.makedirs("work", mode=0o700, exist_ok=True)
    if job.get("uid") is not None:
        os.chown("work", job["uid"], job["uid"])
    try:  # the worker must survive the memory cgroup's OOM killer; children undo this
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("-1000")
        rep["oom_shield"] = True
    except OSError as e:
        rep["oom_shield"] = False
        rep.setdefault("warnings", []).append(f"oom_score_adj: {e}")
    if not job["namespaces"]:
        try:  # orphans of a test come back to us, so we can find and kill them
            (libc or _libc()).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        except Exception:  # noqa: BLE001
            pass
    return rep


def _drop_privileges(job: dict, libc) -> None:
    """In the per-test child, before any program code: no new privileges, no capabilities, limits."""
    import resource

    lim = job["limits"]
    uid = job.get("uid")
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError("prctl(PR_SET_NO_NEW_PRIVS) failed")
    if os.getuid() == 0 or uid is not None:  # root in some namespace: shed the capability sets
        libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
        for cap in range(64):
            libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)  # EINVAL past the last capability: ignored
    limits = [
        (resource.RLIMIT_AS, lim["memory_bytes"]),
        (resource.RLIMIT_CPU, lim["cpu_s"]),
        (resource.RLIMIT_FSIZE, lim["file_bytes"]),
        (resource.RLIMIT_NPROC, lim["nproc"]),
        (resource.RLIMIT_NOFILE, lim["nofile"]),
        (resource.RLIMIT_CORE, 0),
    ]
    for which, value in limits:
        hard = value + 1 if which == resource.RLIMIT_CPU else value
        cur_hard = resource.getrlimit(which)[1]
        if cur_hard != resource.RLIM_INFINITY:  # never ask for more than we may (non-root)
            value, hard = min(value, cur_hard), min(hard, cur_hard)
        resource.setrlimit(which, (value, hard))
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)  # from real root: clears every capability set
        if os.getuid() != uid or os.geteuid() != uid:
            raise OSError("setresuid did not take effect")
    elif os.getuid() == 0:  # user-namespace root: drop all capabilities explicitly
        import ctypes

        class Header(ctypes.Structure):
            _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

        class Data(ctypes.Structure):
            _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                        ("inheritable", ctypes.c_uint32)]

        hdr, data = Header(0x20080522, 0), (Data * 2)()
        if libc.capset(ctypes.byref(hdr), data) != 0:
            raise OSError("capset failed")


def _child(job: dict, test: dict, code, prelude, libc, fds: tuple[int, int, int, int]) -> None:
    """The per-test child: never returns."""
    try:
        os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.closerange(4, 1 << 16)
        try:
            with open("/proc/self/oom_score_adj", "w") as f:
                f.write("1000")  # we, not the worker, are what the OOM killer should take
        except OSError:
            pass
        work = os.path.join(job["scratch"], "work")
        os.chdir(work)  # before dropping privileges: the path's parents may be closed to the sandbox uid
        os.environ["HOME"] = os.environ["TMPDIR"] = work
        _drop_privileges(job, libc)
        os.umask(0o077)
        import builtins
        import io

        sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8",
                                     errors="replace")
        sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False), 1 << 16),
                                      encoding="utf-8", errors="replace", write_through=False)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="replace",
                                      write_through=True)
        sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
        sys.argv = ["solution.py"]
        sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
        g = {"__name__": "__main__", "__builtins__": builtins, "__file__": "solution.py"}
    except BaseException as e:  # noqa: BLE001
        try:
            os.write(2, f"sandbox child setup failed: {type(e).__name__}: {e}\n".encode("utf-8", "replace"))
        finally:
            os._exit(_EXIT_SETUP)
    status = 0
    try:
        if prelude is not None:
            exec(prelude, g)
        exec(code, g)
        if test.get("call") is not None:
            fn = _resolve(g, test["call"])
            if fn is None:
                status = _EXIT_NO_FUNCTION
            else:
                value = fn(*json.loads(test["args_json"]))
                try:
                    text = json.dumps(value, allow_nan=True)
                except (TypeError, ValueError, RecursionError):
                    status = _EXIT_BAD_RETURN
                else:
                    _write_all(3, text.encode("utf-8"))
    except SystemExit as e:
        status = 0 if e.code in (None, 0) else 1
    except MemoryError:
        status = _EXIT_MEMORY
    except OSError as e:
        status = _EXIT_OUTPUT if e.errno == errno.EFBIG else _EXIT_EXCEPTION
        _print_tail_exception()
    except BaseException:  # noqa: BLE001 - any failure of the program is its own test failing
        status = _EXIT_EXCEPTION
        _print_tail_exception()
    try:
        sys.stdout.flush()
    except MemoryError:
        status = status or _EXIT_MEMORY
    except OSError as e:
        status = status or (_EXIT_OUTPUT if e.errno == errno.EFBIG else _EXIT_EXCEPTION)
    except BaseException:  # noqa: BLE001
        status = status or _EXIT_EXCEPTION
    os._exit(status)


def _remap_import_paths(py_map: list) -> None:
    """Point ``sys.path`` and the ``__path__`` of already-imported packages at the read-only copies
    of the interpreter's directories inside the scratch tmpfs."""

    def remap(x: str) -> str:
        for orig, target in py_map:
            if x == orig or x.startswith(orig + "/"):
                return target + x[len(orig):]
        return x

    sys.path[:] = [t for _, t in py_map]
    sys.path_importer_cache.clear()
    for mod in list(sys.modules.values()):
        p = getattr(mod, "__path__", None)
        if type(p) is list:
            p[:] = [remap(x) for x in p]


def _print_tail_exception() -> None:
    """``Type: message (solution.py line N)`` on stderr, without importing traceback."""
    try:
        e = sys.exc_info()[1]
        tb, line = e.__traceback__, None
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == "solution.py":
                line = tb.tb_lineno
            tb = tb.tb_next
        where = f" (solution.py line {line})" if line else ""
        text = f"{type(e).__name__}: {e}"[:1500] + where + "\n"
        os.write(2, text.encode("utf-8", "replace"))
    except BaseException:  # noqa: BLE001
        pass


def _resolve(g: dict, name: str):
    """The callable for a call-based test: ``Solution().name`` if a Solution class defines it, else a
    module-level function ``name``."""
    sol = g.get("Solution")
    if isinstance(sol, type) and callable(getattr(sol, name, None)):
        return getattr(sol(), name)
    fn = g.get(name)
    return fn if callable(fn) else None


def _reap_all(in_pid_ns: bool) -> None:
    """Kill and reap everything a test left behind (in a PID namespace: every process but us)."""
    for _ in range(100):
        if in_pid_ns and os.getpid() == 1:  # kill(-1) from a namespace's PID 1 reaches only the namespace
            try:
                os.kill(-1, signal.SIGKILL)
            except OSError:
                pass
        else:
            for pid in _children_of(os.getpid()):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        reaped_any = False
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                break
            reaped_any = True
        if not reaped_any:
            time.sleep(0.001)


def _children_of(ppid: int) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
            if int(stat[stat.rindex(b")") + 2 :].split()[1]) == ppid:
                out.append(int(name))
        except (OSError, ValueError):
            continue
    return out


def _run_test(i: int, job: dict, test: dict, code, prelude, libc, uid_kill) -> dict:
    lim = job["limits"]
    io_dir = os.path.join(job["scratch"], "io")
    paths = [os.path.join(io_dir, n) for n in ("in", "out", "err", "ret")]
    with open(paths[0], "wb") as f:
        f.write(test.get("stdin", "").encode("utf-8"))
    fds = (
        os.open(paths[0], os.O_RDONLY),
        os.open(paths[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
        os.open(paths[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
        os.open(paths[3], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
    )
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        _child(job, test, code, prelude, libc, fds)
    for fd in fds:
        os.close(fd)
    timed_out = False
    try:
        pidfd = os.pidfd_open(pid)
    except (OSError, AttributeError):
        pidfd = None
    deadline = t0 + lim["timeout_s"]
    if pidfd is not None:
        ready, _, _ = select.select([pidfd], [], [], lim["timeout_s"])
        os.close(pidfd)
        if not ready:
            timed_out = True
    else:  # no pidfd (very old kernel): poll
        while os.waitpid(pid, os.WNOHANG)[0] == 0:
            if time.monotonic() > deadline:
                timed_out = True
                break
            time.sleep(0.002)
    if timed_out:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        status = 0
    elapsed = time.monotonic() - t0
    uid_kill()
    _reap_all(job["namespaces"])
    cap = lim["output_bytes"]
    out = _read_cap(paths[1], cap)
    err = _read_cap(paths[2], 4000, tail=True)
    ret = _read_cap(paths[3], cap)
    res = {"i": i, "time_s": round(elapsed, 6), "stderr": err.decode("utf-8", "replace")}
    if timed_out:
        res["status"] = "timeout"
    elif os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        res["signal"] = sig
        res["status"] = {signal.SIGXCPU: "timeout", signal.SIGXFSZ: "output_limit",
                         signal.SIGKILL: "killed"}.get(sig, "runtime_error")
    else:
        code_ = os.WEXITSTATUS(status)
        res["exit_code"] = code_
        res["status"] = {0: "ok", _EXIT_MEMORY: "memory_limit", _EXIT_OUTPUT: "output_limit",
                         _EXIT_NO_FUNCTION: "no_function", _EXIT_BAD_RETURN: "bad_return",
                         _EXIT_SETUP: "sandbox_error"}.get(code_, "runtime_error")
    if res["status"] == "ok" and os.path.getsize(paths[1]) >= cap:
        res["status"] = "output_limit"
    if res["status"] == "killed" and _memcg_oom(job):
        res["status"] = "memory_limit"
    res["stdout"] = out.decode("utf-8", "replace")
    if test.get("call") is not None:
        if res["status"] == "ok" and not ret:
            res["status"] = "no_return"
        res["value_json"] = ret.decode("utf-8", "replace") if ret else None
    # wipe the program's working directory so the next test starts clean
    _wipe(os.path.join(job["scratch"], "work"), job.get("uid"))
    return res


def _memcg_oom(job: dict) -> bool:
    for procs in job.get("cgroup_procs", []):
        d = os.path.dirname(procs)
        try:
            with open(os.path.join(d, "memory.failcnt")) as f:
                if int(f.read().strip() or 0) > 0:
                    return True
        except OSError:
            continue
    return False


def _read_cap(path: str, cap: int, tail: bool = False) -> bytes:
    try:
        with open(path, "rb") as f:
            if tail:
                size = os.fstat(f.fileno()).st_size
                f.seek(max(0, size - cap))
            return f.read(cap)
    except OSError:
        return b""


def _wipe(path: str, uid) -> None:
    import shutil

    try:
        if os.listdir(path):
            shutil.rmtree(path, ignore_errors=True)
            os.makedirs(path, mode=0o700, exist_ok=True)
            if uid is not None:
                os.chown(path, uid, uid)
    except OSError:
        pass


def _worker_main(result_fd: int) -> None:
    try:
        job = json.loads(_read_all(0).decode("utf-8"))
        os.close(0)
        os.open(os.devnull, os.O_RDONLY)  # fd 0 again, harmless
        setup = _setup(job)
    except BaseException as e:  # noqa: BLE001
        _emit(result_fd, {"fatal": f"sandbox setup failed: {type(e).__name__}: {e}"})
        return
    _emit(result_fd, {"ready": True, "setup": setup})
    if setup.get("py_map"):  # once, here: every forked test inherits the remapped import state
        _remap_import_paths(setup["py_map"])
    if not job["namespaces"] and job.get("uid") is not None:
        # no mounts here: modules the unprivileged uid may not be able to read are imported now
        for name in _PRELOAD:
            try:
                __import__(name)
            except ImportError:
                pass
    libc = _libc()
    uid = job.get("uid")

    def uid_kill() -> None:
        # outside a PID namespace, as root: kill every process of the sandbox uid (setsid-proof)
        if job["namespaces"] or uid is None:
            return
        for _ in range(20):
            if not _procs_of_uid(uid):
                return
            pid = os.fork()
            if pid == 0:
                try:
                    os.setresgid(uid, uid, uid)
                    os.setresuid(uid, uid, uid)
                    os.kill(-1, signal.SIGKILL)  # as this uid: reaches only its processes
                finally:
                    os._exit(0)
            os.waitpid(pid, 0)

    try:
        prelude = compile(job["prelude"], "<prelude>", "exec") if job.get("prelude") else None
        code = compile(job["program"], "solution.py", "exec")
    except BaseException as e:  # noqa: BLE001 - SyntaxError, ValueError (NUL bytes), RecursionError...
        msg = f"{type(e).__name__}: {e}"[-2000:]
        for i in range(len(job["tests"])):
            _emit(result_fd, {"i": i, "status": "syntax_error", "stderr": msg, "time_s": 0.0, "stdout": ""})
        _emit(result_fd, {"done": True})
        return
    if prelude is not None:
        try:  # trusted (configured by the caller): import its modules once, before forking the tests
            exec(prelude, {"__name__": "__prelude__"})
        except BaseException:  # noqa: BLE001 - each test re-runs it and reports the failure
            pass
    timeouts, stop_after = 0, job.get("stop_after_timeouts")
    for i, test in enumerate(job["tests"]):
        if stop_after is not None and timeouts >= stop_after:
            _emit(result_fd, {"i": i, "status": "not_run", "stdout": "", "time_s": 0.0,
                              "stderr": f"skipped after {timeouts} timed-out tests"})
            continue
        res = _run_test(i, job, test, code, prelude, libc, uid_kill)
        timeouts += res["status"] == "timeout"
        _emit(result_fd, res)
    _emit(result_fd, {"done": True})


def _procs_of_uid(uid: int) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", "rb") as f:
                for line in f:
                    if line.startswith(b"Uid:"):
                        if int(line.split()[1]) == uid:
                            out.append(int(name))
                        break
        except (OSError, ValueError, IndexError):
            continue
    return out


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == WORKER_FLAG:
    try:
        _worker_main(int(sys.argv[2]))
    finally:
        os._exit(0)  # the parent-side code below is never needed inside the sandbox

# =================================================================================================
# parent side
# =================================================================================================

from dataclasses import dataclass, field  # noqa: E402  (worker above needs none of this)
from typing import Any, Iterable, Sequence  # noqa: E402

ISOLATION_MODES = ("auto", "namespaces", "rlimits")


@dataclass
class SandboxConfig:
    """Limits and isolation of one sandbox (one program, all its tests). Defaults follow the paper's
    code setup (6 s per test)."""

    timeout_s: float = 6.0
    """Wall-clock limit of one test, enforced by the worker (the paper: 6 s)."""
    cpu_time_s: float | None = None
    """``RLIMIT_CPU`` of each test process, whole seconds rounded up; default = ``timeout_s``."""
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
    """Maximum number of files/directories in the tmpfs scratch directory."""
    concurrency: int | None = None
    """Sandboxes running at once in :meth:`Sandbox.run_many`; default = usable CPU cores."""
    isolation: str = "auto"
    """``namespaces`` (fail if unavailable), ``rlimits`` (no namespaces) or ``auto`` (the best here)."""
    use_cgroups: bool = True
    """Add a per-sandbox pids + memory cgroup when the cgroup tree is writable (root)."""
    startup_slack_s: float = 10.0
    """Added to the sum of per-test timeouts to make the sandbox's hard outer timeout."""
    hard_timeout_s: float | None = None
    """The hard outer timeout of one sandbox; default = ``startup_slack_s + tests * (timeout_s + 0.5)``."""
    stop_after_timeouts: int | None = None
    """After this many timed-out tests, skip the program's remaining tests (status ``not_run``):
    faster on programs that loop forever, but no longer exact per test. ``None``: run every test."""
    site_packages: bool = False
    """Let programs import from site-packages (numpy...). Off: stdlib only, and ~20 ms faster start."""
    prelude: str = ""
    """Python run in the program's namespace before it (e.g. ``from typing import *``)."""
    max_program_bytes: int = 1 << 20
    """Programs larger than this are not run (every test fails with ``sandbox_error``)."""
    scratch_root: str | None = None
    """Where the host-side scratch directories are created (default: the system temp dir)."""

    def __post_init__(self) -> None:
        if not (self.timeout_s > 0):
            raise ValueError(f"SandboxConfig.timeout_s must be > 0 seconds, got {self.timeout_s!r}")
        for name in ("memory_mb", "max_processes", "max_output_bytes", "max_open_files", "scratch_mb",
                     "scratch_inodes", "max_program_bytes"):
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
        if self.stop_after_timeouts is not None and (not isinstance(self.stop_after_timeouts, int)
                                                     or self.stop_after_timeouts < 1):
            raise ValueError(f"SandboxConfig.stop_after_timeouts must be None or an integer >= 1, "
                             f"got {self.stop_after_timeouts!r}")
        if self.cpu_time_s is not None and not (self.cpu_time_s > 0):
            raise ValueError(f"SandboxConfig.cpu_time_s must be None or > 0, got {self.cpu_time_s!r}")


@dataclass(frozen=True)
class TestInput:
    """One execution: ``stdin`` text for a stdin/stdout program, or ``call`` (a function name, or a
    method of a ``Solution`` class) with positional ``args`` (JSON-serialisable)."""

    __test__ = False  # not a pytest test class

    stdin: str = ""
    call: str | None = None
    args: tuple = ()

    def to_job(self) -> dict:
        if self.call is None:
            return {"stdin": self.stdin}
        return {"call": self.call, "args_json": json.dumps(list(self.args)), "stdin": self.stdin}


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

    @property
    def ok(self) -> bool:
        """Ran to a normal end (not: produced the right answer; the caller compares)."""
        return self.status == "ok"


@dataclass
class ProgramResult:
    """All tests of one program: ``outcomes[i]`` for test i, plus what the sandbox reported."""

    outcomes: list[TestOutcome]
    wall_s: float
    isolation: str
    setup: dict = field(default_factory=dict)
    error: str | None = None
    uid: int | None = None


def _cpu_count() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _unshare_flags(root: bool) -> list[str]:
    flags = ["--net", "--pid", "--mount", "--ipc", "--uts", "--fork", "--kill-child", "--mount-proc"]
    return flags if root else ["--map-root-user", *flags]


_PROBE_CACHE: dict = {}


def _probe_namespaces() -> tuple[bool, str]:
    """Can we create the namespaces here? (cached) Returns (ok, reason)."""
    if "ns" in _PROBE_CACHE:
        return _PROBE_CACHE["ns"]
    import shutil
    import subprocess

    if not sys.platform.startswith("linux"):
        res = (False, f"namespaces need Linux (this is {sys.platform})")
    elif shutil.which("unshare") is None:
        res = (False, "the `unshare` binary (util-linux) is not installed")
    else:
        cmd = [shutil.which("unshare"), *_unshare_flags(os.geteuid() == 0), "true"]
        try:
            p = subprocess.run(cmd, capture_output=True, timeout=20, env={"PATH": _SAFE_PATH})
            ok = p.returncode == 0
            res = (ok, "ok" if ok else f"`unshare` failed: {p.stderr.decode(errors='replace').strip()[:300]}")
        except (OSError, subprocess.TimeoutExpired) as e:
            res = (False, f"`unshare` could not run: {e}")
    _PROBE_CACHE["ns"] = res
    return res


def _cgroup_dirs() -> dict[str, str]:
    """Writable cgroup parents for the pids and memory controllers (v1 or v2), or {} (cached)."""
    if "cg" in _PROBE_CACHE:
        return _PROBE_CACHE["cg"]
    found: dict[str, str] = {}
    try:
        with open("/proc/self/cgroup") as f:
            lines = [ln.strip().split(":", 2) for ln in f if ln.strip()]
    except OSError:
        lines = []
    for hid, controllers, path in lines:
        for ctl in controllers.split(","):
            if ctl in ("pids", "memory"):
                base = f"/sys/fs/cgroup/{ctl}{path.rstrip('/')}"
                if _try_mkdir_cgroup(base):
                    found[ctl] = base
        if hid == "0" and controllers == "" and not found:  # cgroup v2 only
            base = f"/sys/fs/cgroup{path.rstrip('/')}"
            try:
                with open(os.path.join(base, "cgroup.subtree_control")) as f:
                    enabled = f.read().split()
            except OSError:
                enabled = []
            for ctl in ("pids", "memory"):
                if ctl in enabled and _try_mkdir_cgroup(base):
                    found[ctl] = base
    _PROBE_CACHE["cg"] = found
    return found


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


def _scrubbed_env(home: str) -> dict[str, str]:
    return {
        "PATH": _SAFE_PATH,
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
            raise RuntimeError(f"the vpo sandbox runs on Linux only (this is {sys.platform}): it relies on "
                               "fork, prctl, pidfds and, for isolation, Linux namespaces")
        self.config = config
        self.root = os.geteuid() == 0
        ns_ok, reason = _probe_namespaces()
        if config.isolation == "namespaces" and not ns_ok:
            raise RuntimeError(
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
        _sweep_stale(config.scratch_root, self.root and config.use_cgroups)
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
            return self._all_failed(tests, "sandbox_error", t0, f"program larger than {cfg.max_program_bytes} bytes")
        if not tests:
            return ProgramResult([], 0.0, self.isolation)
        job_tests = [t.to_job() for t in tests]
        biggest_io = max(len(t.get("stdin", "")) + len(t.get("args_json", "")) for t in job_tests)
        tmpfs_bytes = cfg.scratch_mb * 2**20 + 2 * biggest_io + 3 * cfg.max_output_bytes + 4096
        scratch = tempfile.mkdtemp(prefix=f"vpo-sbx-{os.getpid()}-", dir=cfg.scratch_root)
        os.chmod(scratch, 0o711)
        rfd, wfd = os.pipe()
        proc = None
        cg = None
        uid = None
        err_file = None
        try:
            err_file = open(os.path.join(scratch, ".worker-stderr"), "w+b")
            worker = [sys.executable, "-I", *([] if cfg.site_packages else ["-S"]), os.path.abspath(__file__),
                      WORKER_FLAG, str(wfd)]
            cmd = [self._unshare, *_unshare_flags(self.root), "--", *worker] if self.isolation == "namespaces" else worker
            # the cgroups must exist before the launch; their name can't include the pid yet
            tag = os.path.basename(scratch)  # vpo-sbx-<our pid>-<random>
            cg = _Cgroups(cfg, tag, tmpfs_bytes) if self.root else None
            proc = subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err_file, pass_fds=(wfd,),
                cwd=scratch, env=_scrubbed_env(os.path.join(scratch, "work")), start_new_session=True,
                close_fds=True,
            )
            os.close(wfd)
            wfd = -1
            uid = SANDBOX_UID_BASE + proc.pid if self.root else None
            cpu = cfg.cpu_time_s if cfg.cpu_time_s is not None else cfg.timeout_s
            job = {
                "program": program,
                "prelude": cfg.prelude,
                "tests": job_tests,
                "scratch": scratch,
                "namespaces": self.isolation == "namespaces",
                "uid": uid,
                "cgroup_procs": cg.procs_files if cg else [],
                "tmpfs_bytes": tmpfs_bytes,
                "tmpfs_inodes": cfg.scratch_inodes,
                "stop_after_timeouts": cfg.stop_after_timeouts,
                "limits": {
                    "timeout_s": float(cfg.timeout_s),
                    "cpu_s": max(1, int(-(-cpu // 1))),
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
            hard = cfg.hard_timeout_s or cfg.startup_slack_s + len(tests) * (cfg.timeout_s + 0.5)
            lines, problem = _read_lines(rfd, t0 + hard, max_bytes=len(tests) * (3 * cfg.max_output_bytes + 65536) + 65536)
            if problem:
                _kill_session(proc)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                _kill_session(proc)
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
            if proc is not None and proc.poll() is None:
                _kill_session(proc)
                proc.wait()
            if cg is not None:
                cg.kill_and_remove()
            if uid is not None and self.isolation == "rlimits":
                _kill_uid(uid)
            _rmtree(scratch)

    def _collect(self, lines, tests, t0, uid, problem, worker_err, rc) -> ProgramResult:
        outcomes: list[TestOutcome | None] = [None] * len(tests)
        setup: dict = {}
        error = None
        for line in lines:
            try:
                msg = json.loads(line)
            except ValueError:
                error = "sandbox protocol error: unreadable result line"
                continue
            if not isinstance(msg, dict):
                continue
            if "fatal" in msg:
                error = str(msg["fatal"])
            elif msg.get("ready"):
                setup = msg.get("setup", {})
            elif "i" in msg and isinstance(msg["i"], int) and 0 <= msg["i"] < len(tests):
                st = msg.get("status")
                outcomes[msg["i"]] = TestOutcome(
                    status=st if st in STATUSES else "sandbox_error",
                    stdout=str(msg.get("stdout", "")),
                    value_json=msg.get("value_json"),
                    stderr=str(msg.get("stderr", "")),
                    time_s=float(msg.get("time_s", 0.0)),
                    exit_code=msg.get("exit_code"),
                    signal=msg.get("signal"),
                )
        if problem and error is None:
            error = problem
        if error is None and any(o is None for o in outcomes):
            error = f"the sandbox ended early (exit status {rc}); worker stderr: {worker_err.strip()[-500:]}"
        missing = "not_run" if problem or error is None or "ended early" in error else "sandbox_error"
        final = [o if o is not None else TestOutcome(status=missing, stderr=error or "") for o in outcomes]
        return ProgramResult(final, time.monotonic() - t0, self.isolation, setup, error, uid)

    def _all_failed(self, tests, status, t0, why) -> ProgramResult:
        return ProgramResult([TestOutcome(status=status, stderr=why) for _ in tests], time.monotonic() - t0,
                             self.isolation, error=why)

    # -- many programs ----------------------------------------------------------------------------
    def run_many(self, jobs: Iterable[tuple[str, Sequence[TestInput]]], progress: bool = False,
                 desc: str = "running programs") -> list[ProgramResult]:
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
                out[k] = ProgramResult([TestOutcome("sandbox_error", stderr=repr(e)) for _ in tests], 0.0,
                                       self.isolation, error=f"{type(e).__name__}: {e}")
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


def _read_lines(fd: int, deadline: float, max_bytes: int) -> tuple[list[bytes], str | None]:
    """Read newline-terminated records from ``fd`` until the ``done`` record, EOF or the deadline.
    Returns the records and ``None``, or what went wrong (then the caller kills the sandbox)."""
    buf = bytearray()
    lines: list[bytes] = []
    total = 0
    while True:
        remaining = deadline - time.monotonic()
        r = select.select([fd], [], [], remaining)[0] if remaining > 0 else []
        if not r:
            return lines, "hard timeout: the sandbox was killed"
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return lines, None
        total += len(chunk)
        if total > max_bytes:  # a worker never sends this much: treat as broken
            return lines, f"sandbox protocol error: more than {max_bytes} bytes of results"
        buf += chunk
        while True:
            nl = buf.find(b"\n")
            if nl < 0:
                break
            line = bytes(buf[:nl])
            del buf[: nl + 1]
            lines.append(line)
            if line.startswith(b'{"done"'):
                return lines, None


_SWEPT: set = set()


def _sweep_stale(scratch_root: str | None, cgroups: bool) -> None:
    """Remove scratch directories and cgroups left by scoring processes that died (SIGKILL leaves
    no chance to clean up). Names carry the owner's pid; only dead owners' entries are touched."""
    import re
    import tempfile

    root = scratch_root or tempfile.gettempdir()
    key = (root, cgroups)
    if key in _SWEPT:
        return
    _SWEPT.add(key)
    pattern = re.compile(r"vpo-sbx-(\d+)-")

    def dead(name: str) -> bool:
        m = pattern.match(name)
        if not m or int(m.group(1)) == os.getpid():
            return False
        try:
            os.kill(int(m.group(1)), 0)
        except ProcessLookupError:
            return True
        except OSError:
            return False
        return False

    try:
        for name in os.listdir(root):
            if dead(name):
                _rmtree(os.path.join(root, name))
    except OSError:
        pass
    if cgroups:
        for base in _cgroup_dirs().values():
            try:
                names = os.listdir(base)
            except OSError:
                continue
            for name in names:
                if dead(name):
                    d = os.path.join(base, name)
                    for pid in _read_pids(os.path.join(d, "cgroup.procs")):
                        _kill_if_in_cgroup(pid, d)
                    try:
                        os.rmdir(d)
                    except OSError:
                        pass


def _kill_session(proc) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass


def _kill_uid(uid: int) -> None:
    """Kill every process of ``uid`` (root, no namespaces): a helper becomes that uid and kill(-1)s."""
    import subprocess

    for _ in range(20):
        if not _procs_of_uid(uid):
            return
        subprocess.run([sys.executable, "-I", "-S", "-c", "import os; os.kill(-1, 9)"], user=uid, group=uid,
                       extra_groups=[], env={"PATH": _SAFE_PATH}, cwd="/", check=False)


def _rmtree(path: str) -> None:
    import shutil
    import stat

    def fix(func, p, exc):  # a program may have removed permissions from what it wrote
        try:  # directories only, looked up without following links: never chmod a link's target
            for d in (os.path.dirname(p), p):
                if stat.S_ISDIR(os.lstat(d).st_mode):
                    os.chmod(d, stat.S_IRWXU)
        except OSError:
            pass
        try:
            func(p)
        except OSError:
            pass

    shutil.rmtree(path, onerror=fix)


def sandbox_capabilities(refresh: bool = False) -> dict[str, Any]:
    """What this machine enforces, measured by running a probe program (cached).

    Keys: ``isolation`` (namespaces | rlimits), ``reason`` (why, if not namespaces), ``user`` (root |
    non-root), ``network_isolated``, ``pid_namespace``, ``readonly_filesystem`` (how),
    ``tmpfs_scratch``, ``unique_uid`` (root: per-sandbox unprivileged uid), ``user_namespace``
    (non-root), ``cgroup_pids``, ``cgroup_memory``, ``rlimits`` (always: AS, CPU, FSIZE, NPROC,
    NOFILE, CORE), ``no_new_privs`` (always).
    """
    if "caps" in _PROBE_CACHE and not refresh:
        return dict(_PROBE_CACHE["caps"])
    if refresh:
        _PROBE_CACHE.clear()
    sb = Sandbox(SandboxConfig(timeout_s=5, isolation="auto"))
    probe = (
        "import os, socket\n"
        "ok = []\n"
        "try:\n    socket.create_connection(('1.1.1.1', 53), timeout=1); ok.append('net')\n"
        "except OSError: pass\n"
        "try:\n    open('/etc/.vpo-probe', 'w'); ok.append('etc')\nexcept OSError: pass\n"
        "ok.append('pid1=%d' % len([p for p in os.listdir('/proc') if p.isdigit()]))\n"
        "print(' '.join(ok))\n"
    )
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = sb.run(probe, [TestInput()])
    out = res.outcomes[0].stdout.split() if res.outcomes else []
    ns = sb.isolation == "namespaces"
    nprocs = next((int(x.split("=")[1]) for x in out if x.startswith("pid1=")), None)
    cg = _cgroup_dirs() if (sb.root and sb.config.use_cgroups) else {}
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
        "probe_status": res.outcomes[0].status if res.outcomes else "none",
    }
    _PROBE_CACHE["caps"] = caps
    return dict(caps)


