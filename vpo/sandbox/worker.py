"""The sandbox worker: the one vpo process inside the isolation boundary, and the protocol it speaks.

The host (:mod:`vpo.sandbox.host`) runs this file by path, ``python -I -S worker.py
--vpo-sandbox-worker FD`` (under ``unshare`` when namespaces are available), writes one JSON job to
its stdin (the tests' inputs are not in it: they wait in a memfd the worker inherits) and reads the
results from pipe fd FD, which no program process holds: a JSON line per test, then the test's raw
output bytes. The worker sets the sandbox up (joins the cgroups, makes the mounts read-only, puts a
capped tmpfs over /tmp with the interpreter's library dirs bound read-only inside it), compiles the
program once, drops the capabilities it no longer needs and installs the seccomp filter the host
built and sent in the job (:mod:`vpo.sandbox.seccomp`; no filter, no program), then forks one child per test: the child drops privileges,
applies the rlimits and runs the program; the worker judges the test's time limit on its CPU time
(wall clock as a backstop), kills and reaps whatever the test left until nothing is, and reports raw
output only (expected outputs never enter the sandbox). Inputs and outputs move file-to-file inside
the kernel, so no test finds another's in the memory it inherits from the worker.

Standard library only, never vpo: it starts in a scrubbed ``-I -S`` interpreter that may not see
site-packages, next to hostile code (tests/sandbox/test_sandbox_worker_imports.py checks its
imports). The host imports the protocol constants (statuses, flag, uid base) from here: one
definition for both sides. What is and is not enforced: docs/sandbox.md. One file on purpose, past
the ~600-line guide for modules: it is run by path and may import no sibling module.
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
    "cleanup_limit",  # the test left more entries in its directory than the sandbox clears (scratch_inodes)
    "program_too_large",  # the program is larger than max_program_bytes: not run
    "not_run",  # not run because of the program (stop_after_timeouts, an earlier cleanup_limit...)
    "sandbox_error",  # not run or not judged because the sandbox failed (setup, cleanup, protocol, worker
    # death): an infrastructure failure, never the program's (ProgramResult.unavailable says why)
)

# exit codes the per-test child uses to tell the worker what happened. A program can exit with
# these numbers itself; that only turns one failure into another kind of failure.
_EXIT_EXCEPTION = 101
_EXIT_MEMORY = 102
_EXIT_OUTPUT = 103
_EXIT_NO_FUNCTION = 104
_EXIT_BAD_RETURN = 105
_EXIT_SETUP = 106
_SETUP_FD = 250
_READS_FD = 251
"""In each test child until its Landlock setup (``isolation="rlimits"`` only): the ruleset that
confines reads to the host's files outside ``/dev`` and the harmless ``/dev`` nodes
(:func:`_landlock_reads_ruleset`)."""
_LL_READ_FILE = 1 << 2
_DEV_READABLE = ("null", "zero", "full", "random", "urandom", "fd", "stdin", "stdout", "stderr", "shm")
""":data:`_DEV_NODES` and the links of the private ``/dev``, plus ``/dev/shm``: what a program may open
for reading under the host's ``/dev`` in rlimits mode (no ``ptmx``, ``pts``, ``tty``, GPU or disk)."""
"""In each test child until its setup is done: the write end of a pipe the worker reads. A child whose
setup fails writes a byte there before exiting ``_EXIT_SETUP``; the program never holds it, so a
program that exits 106 itself is a ``runtime_error``, not an infrastructure failure it could forge."""

SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"


# -- the worker; entry point: _worker_main -------------------------------------------------------

_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND = 32, 4096
_MOUNT_ATTR_RDONLY, _MOUNT_ATTR_NOSUID, _MOUNT_ATTR_NODEV = 0x1, 0x2, 0x4
_AT_FDCWD, _AT_RECURSIVE = -100, 0x8000
_SYS_MOUNT_SETATTR = 442  # same number on every architecture (asm-generic table, Linux >= 5.12)
_PR_SET_NO_NEW_PRIVS, _PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 38, 24, 47, 4
_PR_SET_CHILD_SUBREAPER = 36
_PRELOAD = (
    "collections",
    "heapq",
    "bisect",
    "itertools",
    "functools",
    "math",
    "re",
    "string",
    "typing",
    "random",
    "fractions",
    "decimal",
    "statistics",
    "copy",
    "operator",
    "array",
    "io",
    "json",
)
"""Imported by the worker before forking tests when the program runs as an unprivileged uid without
a mount namespace (root, ``isolation="rlimits"``): the uid may be unable to read the stdlib."""


# -- the seccomp filter: built by the host (vpo.sandbox.seccomp, data), installed here -------------

CLONE_NEWIPC = 0x08000000
"""``unshare`` with exactly this flag is allowed: after a test that left SysV IPC objects, the worker
moves to a fresh IPC namespace, so none is visible to the next test (:func:`_fresh_ipc_if_used`). A
program cannot use it: the kernel wants CAP_SYS_ADMIN, which a test process no longer has. Any other
``unshare`` gets EPERM."""
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2


def _seccomp_prepare(job: dict) -> tuple:
    """The filter the host built (the job's ``seccomp_filter``: :func:`vpo.sandbox.seccomp.seccomp_filter`)
    as ``(fprog, buffer, instructions)``; the children install the same ``struct sock_fprog``. Raises
    with the host's reason when it could not build one."""
    import ctypes
    import struct

    built = job.get("seccomp_filter") or {"error": "the job carries no seccomp filter"}
    if "error" in built:
        raise OSError(built["error"])
    prog = [tuple(ins) for ins in built["program"]]
    buf = ctypes.create_string_buffer(b"".join(struct.pack("=HBBI", *ins) for ins in prog))

    class Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    return Fprog(len(prog), ctypes.addressof(buf)), buf, len(prog)


def _seccomp_worker(job: dict, libc) -> str | bool:
    """Install the filter on the worker, once, after its setup and before any test (unless the job
    says ``seccomp: false``); raises if that fails. Every test child inherits it (one shared,
    refcounted filter: installing one per child costs ~4 ms a test in kernel work). Nothing the worker
    or a child does from here on (fork, privilege drop, rlimits, kill, wait, file I/O) is on the
    deny-list, and no test process ever runs without it."""
    if not job.get("seccomp", True):
        return False
    prepared = _seccomp_prepare(job)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError("prctl(PR_SET_NO_NEW_PRIVS) failed")
    _seccomp_install(libc, prepared)
    return f"filter: {prepared[2]} instructions, {os.uname().machine}"


def _seccomp_install(libc, prepared: tuple) -> None:
    """After ``no_new_privs``: the filter applies to this process and every process it starts."""
    import ctypes

    ul = ctypes.c_ulong
    if libc.prctl(ul(_PR_SET_SECCOMP), ul(_SECCOMP_MODE_FILTER), ctypes.byref(prepared[0]), ul(0), ul(0)) != 0:
        e = ctypes.get_errno()
        raise OSError(
            e,
            f"the kernel refused the seccomp filter ({os.strerror(e)}); no program runs without it "
            "unless SandboxConfig(seccomp=False) says so (docs/sandbox.md)",
        )


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
        _fields_ = [
            ("attr_set", ctypes.c_uint64),
            ("attr_clr", ctypes.c_uint64),
            ("propagation", ctypes.c_uint64),
            ("userns_fd", ctypes.c_uint64),
        ]

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


_DEV_NODES = ("null", "zero", "full", "random", "urandom")
_DEV_LINKS = (
    ("fd", "/proc/self/fd"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
)


_S_IFCHR = 0o020000


def _minimal_dev(libc, mknod: bool) -> list[str]:
    """Put a fresh ``/dev`` over the host's in this mount namespace: a small read-only tmpfs holding
    only ``null``, ``zero``, ``full``, ``random`` and ``urandom`` and the ``fd``/``std*`` links. No
    ``/dev/ptmx`` or ``/dev/pts`` (host pseudo-terminals), no GPU, disk, ``kvm`` or ``tty`` node stays
    reachable. ``mknod``: make the nodes (real root: cheaper than five mounts, ~5 ms a sandbox here);
    where that is refused (a user namespace; a devices cgroup), bind the host's nodes one by one.
    Returns the nodes made; raises if the tmpfs or a node cannot be made (fail closed: the host's
    /dev would stay)."""
    nodes = []
    for name in _DEV_NODES:  # handles first: the tmpfs is about to cover the host's nodes
        try:
            st = os.stat(f"/dev/{name}")
            nodes.append((name, st.st_rdev, os.open(f"/dev/{name}", os.O_PATH)))
        except OSError:
            pass  # this host has no such node: the sandbox has none either
    try:
        flags = _MS_NOSUID | _MS_NOEXEC | (0 if mknod else _MS_NODEV)  # nodev would close made nodes
        _mount(libc, b"tmpfs", b"/dev", b"tmpfs", flags, b"size=65536,nr_inodes=64,mode=0755")
        for name, rdev, fd in nodes:
            target = f"/dev/{name}"
            if mknod:
                try:
                    os.mknod(target, 0o666 | _S_IFCHR, rdev)
                    os.chmod(target, 0o666)  # past the umask
                    continue
                except OSError:
                    mknod = False  # refused here: bind this node and the rest
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            # a bind mount keeps the flags of the host's /dev (read-only, nosuid, not nodev)
            _mount(libc, f"/proc/self/fd/{fd}".encode(), target.encode(), None, _MS_BIND, None)
        for name, dest in _DEV_LINKS:
            os.symlink(dest, f"/dev/{name}")
        _mount_setattr(libc, b"/dev", _MOUNT_ATTR_RDONLY | _MOUNT_ATTR_NOSUID, 0, recursive=True)
    finally:
        for _, _, fd in nodes:
            os.close(fd)
    return [name for name, _, _ in nodes]


_CGROUPFS = "/sys/fs/cgroup"


def _hide_cgroupfs(libc, job: dict) -> bool:
    """Cover ``/sys/fs/cgroup`` with an empty read-only tmpfs in this mount namespace, so a program
    cannot read other sandboxes' (or the host's) cgroups: their CPU and memory counters are a side
    channel. The worker has joined its cgroups already; the two files it reads later (its CPU counter,
    its memory cgroup's ``memory.failcnt``) are opened first and read through those fds
    (``job["cpu_usage_fd"]``, ``job["failcnt_fds"]``). Returns whether there was anything to hide."""
    if not os.path.isdir(_CGROUPFS):
        return False
    if job.get("cpu_usage"):
        job["cpu_usage_fd"] = os.open(job["cpu_usage"], os.O_RDONLY | os.O_CLOEXEC)
    failcnt = []
    for procs in job.get("cgroup_procs", []):
        try:
            failcnt.append(os.open(os.path.join(os.path.dirname(procs), "memory.failcnt"), os.O_RDONLY | os.O_CLOEXEC))
        except OSError:
            continue  # not a memory cgroup (or v2: memory.events, not read)
    job["failcnt_fds"] = failcnt
    opts = b"size=4096,nr_inodes=2,mode=0555"
    _mount(libc, b"tmpfs", _CGROUPFS.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC | _MS_RDONLY, opts)
    return True


def _setup(job: dict) -> dict:
    """Namespace-side setup, run once by the worker before any program code. Returns a report."""
    rep: dict = {"pid": os.getpid(), "readonly_root": False, "tmpfs_scratch": False, "cgroups": []}
    scratch = job["scratch"]
    _join_cgroups(job, rep)  # first: needs a writable /sys
    libc = None
    if job["namespaces"]:
        libc = _libc()
        scratch = _setup_namespaces(job, libc, rep)
    job["scratch"] = rep["scratch"] = scratch  # from here on: the directory as seen inside
    os.chdir(scratch)
    os.makedirs("io", mode=0o700, exist_ok=True)
    os.makedirs("work", mode=0o700, exist_ok=True)
    if job.get("uid") is not None:
        os.chown("work", job["uid"], job["uid"])
    # the worker must survive the memory cgroup's OOM killer; children undo this
    _write_setting("/proc/self/oom_score_adj", "-1000", rep, "oom_shield", "oom_score_adj")
    if not job["namespaces"]:
        try:  # orphans of a test come back to us, so we can find and kill them
            (libc or _libc()).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        except Exception:  # noqa: BLE001
            pass
    return rep


def _write_setting(path: str, value: str, rep: dict, key: str, warning: str) -> None:
    """Write ``value`` to the kernel setting at ``path``; ``rep[key]`` says whether it took, and a
    failure is a warning (``"{warning}: {error}"``), not an error."""
    try:
        with open(path, "w") as f:
            f.write(value)
        rep[key] = True
    except OSError as e:
        rep[key] = False
        rep.setdefault("warnings", []).append(f"{warning}: {e}")


def _join_cgroups(job: dict, rep: dict) -> None:
    """Move the worker into the per-sandbox cgroups (``job["cgroup_procs"]``); a failure is a warning."""
    for procs in job.get("cgroup_procs", []):
        try:
            with open(procs, "w") as f:
                f.write("0")
            rep["cgroups"].append(procs)
        except OSError as e:
            rep.setdefault("warnings", []).append(f"cgroup {procs}: {e}")


def _setup_namespaces(job: dict, libc, rep: dict) -> str:
    """The mount-namespace part of :func:`_setup`, in this order: read-only root, a minimal /dev, the
    cgroup tree hidden, a writable /proc, the scratch tmpfs with the interpreter's directories inside,
    nested user namespaces blocked (user-namespace mode). Returns the scratch directory as seen inside."""
    rep["readonly_root"] = _make_readonly(libc)
    rep["dev"] = _minimal_dev(libc, mknod=job.get("uid") is not None)  # root mode: real root
    rep["cgroupfs_hidden"] = _hide_cgroupfs(libc, job)
    # a fresh, writable view of our own pid namespace's /proc (children lower their OOM shield)
    try:
        _mount_setattr(libc, b"/proc", 0, _MOUNT_ATTR_RDONLY, recursive=False)
    except OSError:
        try:
            _mount(libc, b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None)
        except OSError as e:
            rep.setdefault("warnings", []).append(f"/proc stays read-only: {e}")
    scratch = _scratch_tmpfs(job, libc, rep)
    if job.get("uid") is None:
        rep["mode"] = "user-namespace"
        # these limits belong to the opener's user namespace (ours), never the host's
        _write_setting(
            "/proc/sys/user/max_user_namespaces",
            "0",
            rep,
            "nested_userns_blocked",
            "nested user namespaces stay allowed",
        )
    else:
        rep["mode"] = "root"
    return scratch


def _scratch_tmpfs(job: dict, libc, rep: dict) -> str:
    """Mount the capped scratch tmpfs (over /tmp) and bind the interpreter's ``sys.path`` directories
    read-only inside it (``rep["py_map"]``: real path -> path inside). Returns the scratch directory."""
    size = int(job["tmpfs_bytes"])
    # The interpreter's own directories, bound read-only inside the scratch tmpfs: the
    # unprivileged uid may not be able to traverse to the real ones (e.g. a Python under /root).
    # O_PATH handles first: the tmpfs below may cover them (a virtualenv under /tmp).
    py_dirs = [(p, os.open(p, os.O_PATH | os.O_DIRECTORY)) for p in sys.path if p and os.path.isdir(p)]
    # The scratch tmpfs goes over /tmp: a path every uid can traverse (the host-side directory
    # may sit below a 0700 parent), and the host's /tmp is hidden from the program as a bonus.
    scratch = "/tmp" if os.path.isdir("/tmp") else job["scratch"]
    opts = f"size={size},nr_inodes={int(job['tmpfs_inodes'])},mode=0755"
    _mount(libc, b"tmpfs", scratch.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, opts.encode())
    rep["tmpfs_scratch"] = scratch
    py_map = []
    for k, (path, fd) in enumerate(py_dirs):
        target = os.path.join(scratch, ".py", str(k))
        os.makedirs(target, mode=0o755)
        _mount(libc, f"/proc/self/fd/{fd}".encode(), target.encode(), None, _MS_BIND, None)
        os.close(fd)
        _mount_setattr(
            libc, target.encode(), _MOUNT_ATTR_RDONLY | _MOUNT_ATTR_NOSUID | _MOUNT_ATTR_NODEV, 0, recursive=True
        )
        py_map.append([path, target])
    if py_map:
        os.chmod(os.path.join(scratch, ".py"), 0o755)
    rep["py_map"] = py_map
    return scratch


_WORKER_CAPS = {
    0: "CAP_CHOWN",  # hand the working directory to the sandbox uid after each wipe
    1: "CAP_DAC_OVERRIDE",  # remove what a program left in its 0700 directories
    3: "CAP_FOWNER",  # ... and chmod-ed away from us
    5: "CAP_KILL",  # kill the sandbox uid's processes
    6: "CAP_SETGID",  # the test child's setgroups / setresgid
    7: "CAP_SETUID",  # the test child's setresuid
    8: "CAP_SETPCAP",  # the test child empties its capability bounding set
    21: "CAP_SYS_ADMIN",  # a fresh IPC namespace after a test that used SysV IPC (unshare CLONE_NEWIPC)
}
"""What the worker still needs once its setup is done; every other capability (CAP_NET_ADMIN,
CAP_SYS_PTRACE, CAP_SYS_MODULE, CAP_SYS_RAWIO, CAP_MKNOD, CAP_NET_RAW, CAP_SYS_RESOURCE, CAP_BPF,
CAP_SYS_BOOT...) leaves its bounding, permitted, effective, inheritable and ambient sets for good.
Mounts, namespaces other than IPC, ptrace and the rest stay refused by the seccomp filter, which the
worker installs on itself right after."""


def _drop_worker_privileges(libc) -> str | bool:
    """After the setup, before the filter: keep only :data:`_WORKER_CAPS`. Returns the kept set
    (hex), or False when the worker has no capabilities to drop (non-root without namespaces)."""
    import ctypes

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    hdr, data = Header(0x20080522, 0), (Data * 2)()  # _LINUX_CAPABILITY_VERSION_3: two 32-bit words
    if libc.capget(ctypes.byref(hdr), data) != 0:
        raise OSError(ctypes.get_errno(), "capget failed")
    have = data[0].permitted | data[1].permitted << 32
    if not have:
        return False
    keep = sum(1 << bit for bit in _WORKER_CAPS) & have
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    for cap in range(64):
        if not keep >> cap & 1:
            libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)  # EINVAL past the last capability: ignored
    lo, hi = keep & 0xFFFFFFFF, keep >> 32
    data[0].effective = data[0].permitted = lo
    data[1].effective = data[1].permitted = hi
    data[0].inheritable = data[1].inheritable = 0
    if libc.capset(ctypes.byref(hdr), data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")
    return f"{keep:#x}"


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
            _fields_ = [
                ("effective", ctypes.c_uint32),
                ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32),
            ]

        hdr, data = Header(0x20080522, 0), (Data * 2)()
        if libc.capset(ctypes.byref(hdr), data) != 0:
            raise OSError("capset failed")


_SYS_LANDLOCK_CREATE_RULESET, _SYS_LANDLOCK_ADD_RULE, _SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446  # every arch
_LANDLOCK_CREATE_RULESET_VERSION, _LANDLOCK_RULE_PATH_BENEATH = 1, 1
_LL_WRITE_FILE, _LL_TRUNCATE, _LL_REFER = 1 << 1, 1 << 14, 1 << 13
_LL_WRITES_V1 = (
    _LL_WRITE_FILE
    | 1 << 4  # REMOVE_DIR
    | 1 << 5  # REMOVE_FILE
    | 1 << 6  # MAKE_CHAR
    | 1 << 7  # MAKE_DIR
    | 1 << 8  # MAKE_REG
    | 1 << 9  # MAKE_SOCK
    | 1 << 10  # MAKE_FIFO
    | 1 << 11  # MAKE_BLOCK
    | 1 << 12  # MAKE_SYM
)
"""Every Landlock access right that writes (ABI 1): opening any file for writing (regular files,
FIFOs, devices alike), removing, creating any kind of node; ABI 2 adds REFER (linking or renaming
across directories), ABI 3 TRUNCATE. Reads and execution are not handled: they stay as the mounts and
file permissions allow."""


def _landlock_abi(libc) -> int:
    """The kernel's Landlock ABI version, or 0 where it has none (older than 5.13, or not among the
    active security modules: ENOSYS / EOPNOTSUPP)."""
    abi = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, None, 0, _LANDLOCK_CREATE_RULESET_VERSION)
    return max(0, int(abi))


def _landlock_prepare(libc, abi: int) -> tuple:
    """Built once in the worker, used by every test child: the ``ctypes`` objects the Landlock calls
    take (defining a ``ctypes`` structure in each child cost ~0.1 ms a test). Returns ``(syscall,
    ruleset attr, path-beneath rule, handled access rights)``."""
    import ctypes

    class PathBeneath(ctypes.Structure):  # struct landlock_path_beneath_attr (packed)
        _pack_ = 1
        _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    handled = _LL_WRITES_V1 | (_LL_REFER if abi >= 2 else 0) | (_LL_TRUNCATE if abi >= 3 else 0)
    attr = ctypes.c_uint64(handled)  # struct landlock_ruleset_attr, first field (the ABI 1 size)
    return libc.syscall, attr, PathBeneath(handled, -1), handled


def _landlock_reads_ruleset(libc, abi: int) -> int:
    """Rlimits mode (the host's ``/dev``): a Landlock ruleset, built once in the worker, under which
    files may be opened for reading beneath every entry of ``/`` but ``/dev``, and in ``/dev`` only
    :data:`_DEV_READABLE`. A read-only open of ``/dev/ptmx`` allocates a host pseudo-terminal, and
    one of a GPU node reaches its driver; the write rules cannot see either. From ABI 2 it also handles
    ``REFER`` and grants it beneath every directory it lists: any ruleset denies linking or renaming
    across directories unless a rule of its own grants it, and that stays the write layer's call
    (beneath the working directory only). Returns the ruleset fd (each test child restricts itself
    with it, then closes it)."""
    import ctypes

    syscall = libc.syscall

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    refer = _LL_REFER if abi >= 2 else 0
    attr = ctypes.c_uint64(_LL_READ_FILE | refer)
    ruleset = syscall(_SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), 8, 0)
    if ruleset < 0:
        e = ctypes.get_errno()
        raise OSError(e, f"landlock_create_ruleset: {os.strerror(e)}")
    paths = [os.path.join("/", n) for n in sorted(os.listdir("/")) if n != "dev"]
    paths += [os.path.join("/dev", n) for n in _DEV_READABLE if os.path.lexists(os.path.join("/dev", n))]
    rule = PathBeneath(_LL_READ_FILE, -1)
    for path in paths:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)  # a link is followed: /dev/stdout -> /proc/...
        except OSError:
            continue
        try:
            is_dir = os.path.isdir(f"/proc/self/fd/{fd}")
            rule.parent_fd, rule.allowed_access = fd, _LL_READ_FILE | (refer if is_dir else 0)
            if syscall(_SYS_LANDLOCK_ADD_RULE, ruleset, _LANDLOCK_RULE_PATH_BENEATH, ctypes.byref(rule), 0) != 0:
                e = ctypes.get_errno()
                os.close(ruleset)
                raise OSError(e, f"landlock_add_rule({path}): {os.strerror(e)}")
        finally:
            os.close(fd)
    return ruleset


def _landlock_restrict_reads(libc) -> None:
    """In the test child (rlimits mode): apply the ruleset of :func:`_landlock_reads_ruleset`."""
    import ctypes

    try:
        if libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, _READS_FD, 0) != 0:
            e = ctypes.get_errno()
            raise OSError(e, f"landlock_restrict_self (reads): {os.strerror(e)}")
    finally:
        os.close(_READS_FD)


def _landlock_writes_only_beneath(prepared: tuple, work: str, own_files: tuple[int, ...] = ()) -> None:
    """In the test child, after ``no_new_privs``: a Landlock domain in which this process and all it
    starts may write only beneath ``work`` (the test's working directory), to ``/dev/null`` and to the
    files open on ``own_files`` (the test's stdout and stderr, so that ``/dev/stdout`` and
    ``/proc/self/fd/1`` work): no host FIFO, device or other file can be opened for writing, whatever
    its permissions or its mount's. ``prepared``: :func:`_landlock_prepare`. Raises if any step fails
    (the caller then runs no program: fail closed); a rule for ``own_files`` that the kernel refuses
    only leaves that file closed to reopening (it grants, never restricts)."""
    import ctypes

    syscall, attr, rule, handled = prepared
    ruleset = syscall(_SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), 8, 0)
    if ruleset < 0:
        e = ctypes.get_errno()
        raise OSError(e, f"landlock_create_ruleset: {os.strerror(e)}")
    fds = [ruleset]
    try:
        for path, allowed in ((work, handled), ("/dev/null", handled & (_LL_WRITE_FILE | _LL_TRUNCATE))):
            fds.append(os.open(path, os.O_PATH | os.O_CLOEXEC))
            rule.allowed_access, rule.parent_fd = allowed, fds[-1]
            if syscall(_SYS_LANDLOCK_ADD_RULE, ruleset, _LANDLOCK_RULE_PATH_BENEATH, ctypes.byref(rule), 0) != 0:
                e = ctypes.get_errno()
                raise OSError(e, f"landlock_add_rule({path}): {os.strerror(e)}")
        rule.allowed_access = handled & (_LL_WRITE_FILE | _LL_TRUNCATE)
        for fd in own_files:
            rule.parent_fd = fd
            syscall(_SYS_LANDLOCK_ADD_RULE, ruleset, _LANDLOCK_RULE_PATH_BENEATH, ctypes.byref(rule), 0)
        if syscall(_SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0) != 0:
            e = ctypes.get_errno()
            raise OSError(e, f"landlock_restrict_self: {os.strerror(e)}")
    finally:
        for fd in fds:
            os.close(fd)


def _child(job: dict, test: dict, code, prelude, libc, fds: tuple[int, ...]) -> None:  # noqa: C901 (one ordered post-fork sequence ending in os._exit)
    """The per-test child: never returns. One piece on purpose: it runs between fork and _exit, and
    its order (session, fds, chdir, privilege drop, streams, program, flush) is the sandbox's. ``fds``: stdin, stdout, stderr, the result file, and (call tests) the arguments file."""
    try:
        os.setsid()
        for target, fd in enumerate(fds[:4]):
            os.dup2(fd, target)
        args_json = _read_all(fds[4]).decode("utf-8") if len(fds) > 4 else None
        os.closerange(4, _SETUP_FD)
        os.closerange(_READS_FD + 1 if job.get("landlock_reads") else _SETUP_FD + 1, 1 << 16)
        try:
            with open("/proc/self/oom_score_adj", "w") as f:
                f.write("1000")  # we, not the worker, are what the OOM killer should take
        except OSError:
            pass
        work = os.path.join(job["scratch"], "work")
        os.chdir(work)  # before dropping privileges: the path's parents may be closed to the sandbox uid
        os.environ["HOME"] = os.environ["TMPDIR"] = work
        _drop_privileges(job, libc)
        if job.get("landlock") is not None:  # the working directory, and the test's own stdout/stderr files
            _landlock_writes_only_beneath(job["landlock"], ".", own_files=(1, 2))
        if job.get("landlock_reads"):
            _landlock_restrict_reads(libc)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.umask(0o077)
        import builtins
        import io

        sys.stdin = io.TextIOWrapper(
            io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8", errors="replace"
        )
        sys.stdout = io.TextIOWrapper(
            io.BufferedWriter(io.FileIO(1, "w", closefd=False), 1 << 16),
            encoding="utf-8",
            errors="replace",
            write_through=False,
        )
        sys.stderr = io.TextIOWrapper(
            io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="replace", write_through=True
        )
        sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
        sys.argv = ["solution.py"]
        sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
        g = {"__name__": "__main__", "__builtins__": builtins, "__file__": "solution.py"}
        os.close(_SETUP_FD)  # no program code holds it
    except BaseException as e:  # noqa: BLE001
        try:
            os.write(2, f"sandbox child setup failed: {type(e).__name__}: {e}\n".encode("utf-8", "replace"))
            os.write(_SETUP_FD, b"!")
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
                value = fn(*json.loads(args_json))
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
                return target + x[len(orig) :]
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


class _CleanupError(OSError):
    """What a test left could not be cleared (its processes outlived the cleanup deadline, its
    working directory could not be emptied and made again, its SysV IPC objects could not be left
    behind): the worker runs no further test."""


def _reap_all(job: dict) -> None:
    """Kill and reap everything a test left behind, and return only once it is all gone: the worker
    (PID 1 of the namespace, or a child subreaper without one) has no child left, so no process of
    the test exists any more and none counts against the next test's ``RLIMIT_NPROC`` or pids cgroup.
    Raises :class:`_CleanupError` past ``job["cleanup_s"]`` seconds (a real deadline, not a count of
    rounds: a dying process that holds much memory, on a loaded machine, can take a while)."""
    in_pid_ns = job["namespaces"] and os.getpid() == 1
    deadline = time.monotonic() + float(job.get("cleanup_s", 10.0))
    pause = 0.0005
    while True:
        if in_pid_ns:  # kill(-1) from a namespace's PID 1 reaches only the namespace
            try:
                os.kill(-1, signal.SIGKILL)
            except OSError:
                pass
        else:
            _kill_sandbox_uid(job)
            for pid in _children_of(os.getpid()):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return  # no child at all: every process of the test is gone
            if pid == 0:
                break
        if time.monotonic() > deadline:
            raise _CleanupError(
                f"a test's processes were still alive {job.get('cleanup_s', 10.0)} s after being killed; "
                "no further test runs in this sandbox"
            )
        time.sleep(pause)
        pause = min(pause * 2, 0.02)


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


def _cpu_clock(job: dict):
    """``(clock, cheap, source)``: functions giving the CPU seconds used so far by the sandbox's
    processes, and where ``clock`` reads it (``"cgroup"`` or ``"proc"``).

    ``clock``, where the host gave the sandbox a CPU counter (``job["cpu_usage"]``: a v1 cpuacct
    cgroup's ``cpuacct.usage``, in ns, or a v2 cgroup's ``cpu.stat`` ``usage_usec``): that counter,
    less the worker's own CPU time (it is in the cgroup too). It pools every process the test made,
    wherever it moved and whether or not anyone reaped it (a program that ignores SIGCHLD has its
    children reaped by the kernel, and their CPU time reaches no parent's ``cutime``). A counter
    named but unreadable raises (fail closed: no fallback that such a program escapes).

    Without one (no cgroups: non-root), the worker's reaped children plus, in a PID namespace, every
    live process but the worker (read from ``/proc/PID/stat`` into one buffer that is zeroed after
    use: no program-chosen name stays in the worker's memory); children the kernel reaped itself are
    missed there (docs/sandbox.md).

    ``cheap``: the worker's reaped children (one ``getrusage``), what a test that ended before its
    first poll is charged (:func:`_wait_test`; its verdict needs no counter: it cannot have used its
    budget yet). With the cgroup counter as ``cheap`` too, the trivial benchmark program's tests took
    ~3 ms longer each (7.6 against 4.5 ms, paired rounds), an effect measured, not explained."""
    usage = job.get("cpu_usage")
    if usage:
        fd = job["cpu_usage_fd"] if "cpu_usage_fd" in job else os.open(usage, os.O_RDONLY | os.O_CLOEXEC)
        buf = bytearray(4096)
        stat = os.path.basename(usage) == "cpu.stat"
        worker_cpu = time.process_time

        def cgroup_clock() -> float:
            n = os.preadv(fd, [buf], 0)
            if stat:
                i = buf.index(b"usage_usec ", 0, n)
                used = int(buf[i + 11 : buf.index(b"\n", i)]) / 1e6
            else:
                used = int(buf[:n]) / 1e9
            return used - worker_cpu()

        cgroup_clock()  # raises if it cannot be read or parsed
        return cgroup_clock, _reaped_cpu, "cgroup"

    tick = os.sysconf("SC_CLK_TCK")
    buf = bytearray(1024)
    me = os.getpid()
    scan = job["namespaces"] and me == 1

    def proc_clock() -> float:
        total = _reaped_cpu()
        if not scan:
            return total
        ticks = 0
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == me:
                continue
            try:
                fd = os.open(f"/proc/{name}/stat", os.O_RDONLY)
            except OSError:
                continue
            try:
                n = os.readv(fd, [buf])
                f = bytes(buf[buf.rindex(b")", 0, n) + 2 : n]).split()
                ticks += int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])  # utime stime cutime cstime
            except (OSError, ValueError, IndexError):
                pass
            finally:
                os.close(fd)
                buf[:] = bytes(len(buf))
        return total + ticks / tick

    return proc_clock, _reaped_cpu, "proc"


def _reaped_cpu() -> float:
    """CPU seconds of the worker's reaped children (and what they reaped)."""
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _wait_test(pid: int, t0: float, lim: dict, clocks) -> tuple[str | None, int, float]:
    """Wait for the test child until its CPU time (every process of the sandbox, from ``clocks``, see
    :func:`_cpu_clock`) reaches ``lim["cpu_time_s"]`` or the wall clock ``t0 + lim["timeout_s"]``;
    SIGKILL it past either, and reap it. Returns ``(None | "cpu" | "wall", wait status, CPU seconds
    used)``. The CPU time is read only when the child has run long enough to possibly have used it
    all (at most ``lim["cpu_parallel"]`` CPUs at once): a short test is never polled, and is charged
    what its reaped processes used (``cheap``); a polled one is charged by ``clock``, from a baseline
    taken at its start (no live process but the new child, which has used next to nothing yet)."""
    clock, cheap, source = clocks
    why = None
    cheap0 = cheap()
    cpu0 = clock() if source == "cgroup" else cheap0  # /proc: nothing live to scan but the child
    polled = False
    cpu_limit, par = float(lim["cpu_time_s"]), max(1.0, float(lim.get("cpu_parallel", 1)))
    deadline = t0 + float(lim["timeout_s"])
    try:
        pidfd = os.pidfd_open(pid)
    except (OSError, AttributeError):
        pidfd = None
    used = 0.0
    while True:
        now = time.monotonic()
        if now >= deadline:
            why = "wall"
            break
        step = min(deadline - now, max(0.005, (cpu_limit - used) / par))
        if _child_exited(pid, pidfd, step):
            break
        used, polled = clock() - cpu0, True
        if used >= cpu_limit:
            why = "cpu"
            break
    if pidfd is not None:
        os.close(pidfd)
    status = _kill_and_reap(pid, kill=why is not None)
    if why is not None or (polled and source == "cgroup"):
        return why, status, max(used, clock() - cpu0)
    return why, status, max(used, cheap() - cheap0)


def _child_exited(pid: int, pidfd: int | None, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for the test child to exit (without reaping it); True if it did."""
    if pidfd is not None:
        return bool(select.select([pidfd], [], [], timeout)[0])
    # no pidfd (very old kernel): poll
    end, gone = time.monotonic() + timeout, False
    while not gone and time.monotonic() < end:
        gone = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        time.sleep(0 if gone else 0.002)
    return gone


def _kill_and_reap(pid: int, kill: bool) -> int:
    """SIGKILL the test child first if ``kill``, then reap it; returns its wait status (0 if it was
    already reaped)."""
    if kill:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        status = 0
    return status


def _setup_failed(job: dict) -> bool:
    """Whether the test child that just exited reported a failed setup on the setup pipe (consumed)."""
    try:
        return bool(os.read(job["setup_r"], 64))
    except (BlockingIOError, KeyError, OSError):
        return False


def _exit_status(status: int, timed_out: bool, setup_failed: bool = False) -> dict:
    """The result fields a test's wait status gives: ``status`` and ``signal`` or ``exit_code``;
    ``_EXIT_SETUP`` is ``sandbox_error`` only when the child reported it on the setup pipe."""
    if timed_out:
        return {"status": "timeout"}
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return {
            "signal": sig,
            "status": {signal.SIGXCPU: "timeout", signal.SIGXFSZ: "output_limit", signal.SIGKILL: "killed"}.get(
                sig, "runtime_error"
            ),
        }
    code_ = os.WEXITSTATUS(status)
    return {
        "exit_code": code_,
        "status": {
            0: "ok",
            _EXIT_MEMORY: "memory_limit",
            _EXIT_OUTPUT: "output_limit",
            _EXIT_NO_FUNCTION: "no_function",
            _EXIT_BAD_RETURN: "bad_return",
            _EXIT_SETUP: "sandbox_error" if setup_failed else "runtime_error",
        }.get(code_, "runtime_error"),
    }


def _copy_input(src: int, dst_path: str, span) -> int:
    """Copy bytes ``span = [offset, length]`` of the job's input file (the host's memfd) into a new
    file, inside the kernel (``sendfile``): a test's input never passes through the worker's memory,
    so no later test, forked from the worker, finds it there. Returns an fd open for reading."""
    off, length = (int(x) for x in span)
    out = os.open(dst_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        while length > 0:
            n = os.sendfile(out, src, off, length)
            if n <= 0:
                raise OSError(errno.EIO, "the job's input file ended early")
            off, length = off + n, length - n
    finally:
        os.close(out)
    return os.open(dst_path, os.O_RDONLY)


def _clear_after_test(job: dict, libc) -> tuple[str | None, str | None]:
    """Kill and reap the test's processes, wipe its directory, drop its IPC objects. Returns ``(why
    the test left more than the sandbox clears, or None; why the cleanup failed, or None)``: the
    first is the test's failure (``cleanup_limit``), the second the sandbox's (it stops after
    reporting the test, which keeps its verdict)."""
    try:
        _reap_all(job)
        left = _wipe(job)
        if left is None:
            _fresh_ipc_if_used(job, libc, _IPC_BUF)
        return left, None
    except _CleanupError as e:
        return None, f"sandbox cleanup failed: {e}"


def _run_test(i: int, job: dict, test: dict, code, prelude, libc, clocks) -> tuple[dict, list]:
    """Run test ``i``; returns its result record and the ``(path, offset, length)`` of the output
    bytes that follow it on the result pipe (stdout, the stderr tail, the returned value's JSON)."""
    lim = job["limits"]
    io_dir = os.path.join(job["scratch"], "io")
    paths = [os.path.join(io_dir, n) for n in ("in", "out", "err", "ret", "args")]
    fds = [
        _copy_input(job["inputs_fd"], paths[0], test["stdin"]),
        os.open(paths[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
        os.open(paths[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
        os.open(paths[3], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
    ]
    if test.get("call") is not None:
        fds.append(_copy_input(job["inputs_fd"], paths[4], test["args"]))
    if job.get("uid") is not None:  # the test's own streams, reopened by path (/dev/stdin, /proc/self/fd/1)
        for fd in fds[:3]:
            os.fchown(fd, job["uid"], job["uid"])
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        _child(job, test, code, prelude, libc, tuple(fds))
    for fd in fds:
        os.close(fd)
    why, status, cpu = _wait_test(pid, t0, lim, clocks)
    elapsed = time.monotonic() - t0
    setup_failed = os.WIFEXITED(status) and os.WEXITSTATUS(status) == _EXIT_SETUP and _setup_failed(job)
    left, failed = _clear_after_test(job, libc)
    cap = lim["output_bytes"]
    sizes = [_size(p) for p in paths[1:4]]
    res = {
        "i": i,
        "time_s": round(elapsed, 6),
        "cpu_s": round(cpu, 4),
        **_exit_status(status, why is not None, setup_failed),
    }
    res["cleanup_s"] = round(time.monotonic() - t0 - elapsed, 6)
    if why is not None:
        res["limit"] = why
    if left is not None:  # the test's own mess: its failure, and the sandbox stops (its directory is not clean)
        res["status"], res["stop"] = "cleanup_limit", left
    if failed is not None:
        res["fatal_after"] = failed
    if res["status"] == "ok" and sizes[0] >= cap:
        res["status"] = "output_limit"
    if res["status"] == "killed" and _memcg_oom(job):
        res["status"] = "memory_limit"
    payload = [
        (paths[1], 0, min(sizes[0], cap)),
        (paths[2], max(0, sizes[1] - 4000), min(sizes[1], 4000)),
        (paths[3], 0, min(sizes[2], cap) if test.get("call") is not None else 0),
    ]
    if test.get("call") is not None and res["status"] == "ok" and sizes[2] == 0:
        res["status"] = "no_return"
    res["stdout_bytes"], res["stderr_bytes"], res["value_bytes"] = (n for _, _, n in payload)
    return res, payload


_SYSVIPC = ("/proc/sysvipc/shm", "/proc/sysvipc/sem", "/proc/sysvipc/msg")
_IPC_BUF = bytearray(4096)  # enough to see a second line


def _fresh_ipc_if_used(job: dict, libc, buf: bytearray) -> bool:
    """After a test (its processes all gone): if it left SysV shared memory, semaphores or message
    queues in the IPC namespace, move the worker, and so every later test, to a fresh one; the old
    one, and what is in it, goes with its last user. Returns whether it did. (A namespace per test
    would cost ~1.5 ms a test, to tear down at each exit; this costs three small reads, into one
    buffer that is zeroed after, as the keys are the program's.) POSIX message queues are refused by
    the filter. Raises when the namespace is used and cannot be replaced (no capability: rlimits mode
    as non-root, where IPC is the host's)."""
    used = False
    for path in _SYSVIPC:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            n = os.readv(fd, [buf])
            used = used or buf.count(b"\n", 0, n) > 1  # a header line, then one line per object
        finally:
            os.close(fd)
            buf[:] = bytes(len(buf))
    if not used:
        return False
    if libc.unshare(CLONE_NEWIPC) != 0:
        import ctypes

        e = ctypes.get_errno()
        if job["namespaces"] or job.get("uid") is not None:
            raise _CleanupError(e, f"a test left SysV IPC objects and unshare(CLONE_NEWIPC) failed: {os.strerror(e)}")
        return False
    return True


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _emit_test(fd: int, res: dict, payload: list) -> None:
    """The result record, then its output bytes sent file-to-pipe by the kernel (``sendfile``): what
    a test printed (often derived from its input) never enters the worker's memory either."""
    _emit(fd, res)
    for path, off, length in payload:
        if length <= 0:
            continue
        src = os.open(path, os.O_RDONLY)
        try:
            while length > 0:
                n = os.sendfile(fd, src, off, length)
                if n <= 0:  # the file shrank (it cannot: no test process is left): pad, keep framing
                    _write_all(fd, b"\0" * length)
                    break
                off, length = off + n, length - n
        finally:
            os.close(src)


_FAILCNT_BUF = bytearray(64)


def _memcg_oom(job: dict) -> bool:
    """Whether the sandbox's memory cgroup has hit its limit (``memory.failcnt`` > 0): read through the
    fds opened before ``/sys/fs/cgroup`` was hidden, else by path."""
    if "failcnt_fds" in job:
        for fd in job["failcnt_fds"]:
            n = os.preadv(fd, [_FAILCNT_BUF], 0)
            if int(_FAILCNT_BUF[:n].strip() or 0) > 0:
                return True
        return False
    for procs in job.get("cgroup_procs", []):
        d = os.path.dirname(procs)
        try:
            with open(os.path.join(d, "memory.failcnt")) as f:
                if int(f.read().strip() or 0) > 0:
                    return True
        except OSError:
            continue
    return False


def _wipe(job: dict) -> str | None:
    """After every test (its processes all gone): remove the working directory and make a new one,
    so the next test starts in an empty directory with fresh metadata (mode, owner, timestamps,
    extended attributes). An empty directory goes by one ``rmdir``; one with entries is emptied first
    by a forked helper (:func:`empty_tree`: the names were chosen by the program and may spell its
    input, so they never enter the worker's memory), in time linear in the entries and bounded: past
    ``job["tmpfs_inodes"]`` entries (``scratch_inodes``; the tmpfs of namespace mode holds no more) or
    ``job["wipe_s"]`` seconds (``SandboxConfig.wipe_s``; what a slow host disk costs in rlimits mode)
    the helper stops and this returns why: the test that left them fails (``cleanup_limit``) and no
    further test runs (the program's own doing, not the sandbox's). Returns None when the directory is
    fresh. Fails closed: raises :class:`_CleanupError` when the directory cannot be removed or made
    again for another reason, and no further test runs."""
    path, uid = os.path.join(job["scratch"], "work"), job.get("uid")
    try:
        os.rmdir(path)
    except FileNotFoundError:
        pass
    except OSError as e:
        if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise _CleanupError(
                e.errno, f"the working directory could not be removed: {os.strerror(e.errno)}"
            ) from None
        cap = int(job.get("tmpfs_inodes") or 4096)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                empty_tree(path, max_entries=cap)
                code = 0
            except _TooManyEntries:
                code = _EXIT_TOO_MANY
            finally:
                os._exit(code)
        budget = float(job.get("wipe_s", 2.0))
        code = _wait_helper(pid, budget)
        if code == _EXIT_TOO_MANY:
            return f"the test left more than {cap} entries in its working directory (SandboxConfig.scratch_inodes)"
        if code is None:
            return f"emptying the test's working directory took more than {budget} s (SandboxConfig.wipe_s)"
        try:
            os.rmdir(path)  # the check that counts: whatever the helper said, nothing may be left
        except OSError as e2:
            raise _CleanupError(
                e2.errno, f"the working directory could not be emptied: {os.strerror(e2.errno)}"
            ) from None
    try:
        os.mkdir(path, 0o700)
        if uid is not None:
            os.chown(path, uid, uid)
    except OSError as e:
        raise _CleanupError(e.errno, f"the working directory could not be made again: {os.strerror(e.errno)}") from None
    return None


_EXIT_TOO_MANY = 3


class _TooManyEntries(OSError):
    """:func:`empty_tree` met more entries than its ``max_entries``."""


def _wait_helper(pid: int, deadline_s: float) -> int | None:
    """Reap the wipe helper ``pid``; returns its exit code, or None when it ran past ``deadline_s``
    seconds (then it is SIGKILLed and reaped first)."""
    end = time.monotonic() + deadline_s
    pause = 0.0005
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
        if time.monotonic() > end:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None
        time.sleep(pause)
        pause = min(pause * 2, 0.01)


def empty_tree(path: str, max_entries: int | None = None) -> None:
    """Remove everything beneath directory ``path`` (not ``path`` itself), iteratively and in time
    linear in the entries: no recursion (``shutil.rmtree`` raises RecursionError past ~1000 nested
    directories), no path longer than one name (every call is relative to an open directory), no
    symbolic link followed, one open directory at a time. Each directory is read once
    (:func:`_clear_dir`: files go, empty subdirectories go by one ``rmdir``); the others are visited
    (down by name, back up through ``..``: nothing else runs in the tree meanwhile) and removed on the
    way back. A directory whose owner closed it (``chmod 0``) is opened by giving it back its owner's
    rights. Raises :class:`_TooManyEntries` past ``max_entries`` entries seen (None: no bound), and on
    any failure; the caller then finds the directory not empty (fail closed)."""
    seen = [0, max_entries]
    fd = _open_dir(path, None)
    stack: list[tuple[str, list[str]]] = []  # the way down from ``path``: (name, its siblings still to visit)
    try:
        pending = _clear_dir(fd, seen)
        while True:
            if pending:
                sub = pending.pop()
                down = _open_dir(sub, fd)
                os.close(fd)
                fd = down
                stack.append((sub, pending))
                pending = _clear_dir(fd, seen)
                continue
            if not stack:  # back at ``path``, and it is empty
                return
            sub, pending = stack.pop()
            up = os.open("..", _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = up
            os.rmdir(sub, dir_fd=fd)
    finally:
        os.close(fd)


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_dir(name: str, at: int | None) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=at)
    except PermissionError:  # no CAP_DAC_OVERRIDE (rlimits mode as non-root): the owner may chmod
        os.chmod(name, 0o700, dir_fd=at)  # a directory (lstat below), and nothing else moves it
        return os.open(name, _DIR_FLAGS, dir_fd=at)


def _clear_dir(fd: int, seen: list) -> list[str]:
    """Remove the files and empty subdirectories of the directory open on ``fd``, reading it once;
    returns the names of the subdirectories that are not empty. ``seen``: ``[entries so far, bound]``."""
    full: list[str] = []
    with os.scandir(fd) as it:
        for e in it:
            seen[0] += 1
            if seen[1] is not None and seen[0] > seen[1]:
                raise _TooManyEntries(errno.EMLINK, f"more than {seen[1]} entries")
            is_dir = e.is_dir(follow_symlinks=False)
            try:
                if not _remove_entry(fd, e.name, is_dir):
                    full.append(e.name)
            except PermissionError:  # the owner closed the directory (chmod): give it back its rights
                os.chmod(fd, 0o700)
                if not _remove_entry(fd, e.name, is_dir):
                    full.append(e.name)
    return full


def _remove_entry(fd: int, name: str, is_dir: bool) -> bool:
    """Unlink a file, or rmdir a directory; False for a directory that is not empty."""
    if not is_dir:
        os.unlink(name, dir_fd=fd)
        return True
    try:
        os.rmdir(name, dir_fd=fd)
        return True
    except OSError as err:
        if err.errno in (errno.ENOTEMPTY, errno.EEXIST):
            return False
        raise


def _kill_sandbox_uid(job: dict) -> None:
    """Outside a PID namespace, as root: kill every process of the sandbox uid (setsid-proof), once;
    :func:`_reap_all` repeats it until nothing is left."""
    uid = job.get("uid")
    if job["namespaces"] or uid is None or not procs_of_uid(uid):
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


def _harden(job: dict, libc) -> tuple[dict | None, tuple | None, str | None]:
    """The worker's setup, in order, failing closed at the first step that fails: namespace-side
    setup, its own capability drop, the Landlock probe, the seccomp filter, the CPU counter. Returns
    ``(setup report, clocks, None)`` or ``(None, None, why)``."""
    try:
        setup = _setup(job)
    except BaseException as e:  # noqa: BLE001
        return None, None, f"sandbox setup failed: {type(e).__name__}: {e}"
    try:
        setup["worker_capabilities"] = _drop_worker_privileges(libc)
    except BaseException as e:  # noqa: BLE001 - fail closed
        return None, None, f"sandbox setup failed: dropping the worker's privileges: {e}"
    setup["landlock"] = abi = _landlock_abi(libc)
    job["landlock"] = _landlock_prepare(libc, abi) if abi else None  # each test child applies it
    if abi and not job["namespaces"]:  # the host's /dev: read-only opens of ptmx would allocate host ptys
        try:
            fd = _landlock_reads_ruleset(libc, abi)
            os.dup2(fd, _READS_FD)
            os.close(fd)
            job["landlock_reads"] = True
            setup["landlock_reads"] = True
        except OSError as e:
            return None, None, f"sandbox setup failed: Landlock read rules: {e}"
    try:
        setup["seccomp"] = _seccomp_worker(job, libc)
    except BaseException as e:  # noqa: BLE001 - fail closed: no filter, no program
        return None, None, f"sandbox setup failed: seccomp: {e}"
    try:
        clocks = _cpu_clock(job)
    except (OSError, ValueError) as e:  # fail closed: the counter the host named must be the one read
        return None, None, f"sandbox setup failed: the sandbox's CPU counter {job.get('cpu_usage')}: {e}"
    setup["cpu_time_source"] = clocks[2]
    return setup, clocks, None


def _worker_main(result_fd: int) -> None:
    """The worker's life: read the job, harden the sandbox, compile the program once, run the tests;
    every step reports on ``result_fd`` (a ``fatal`` record ends the sandbox early). The program is
    compiled and its tests run from here, not from a helper, so that the stack below a program, and
    with it the recursion depth the program gets, stays as it was. SIGINT is ignored: as the PID 1 of
    a user namespace's PID namespace, the worker gets the signals it has a handler for from a program
    of the same uid, and Python's KeyboardInterrupt handler would let a program end the sandbox."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # each test child restores Python's handler
    try:
        job = json.loads(_read_all(0).decode("utf-8"))
        os.close(0)
        os.open(os.devnull, os.O_RDONLY)  # fd 0 again, harmless
    except BaseException as e:  # noqa: BLE001
        _emit(result_fd, {"fatal": f"sandbox setup failed: {type(e).__name__}: {e}"})
        return
    libc = _libc()
    setup, clocks, why = _harden(job, libc)
    if why is not None:
        _emit(result_fd, {"fatal": why})
        return
    r, w = os.pipe()
    os.dup2(w, _SETUP_FD)
    os.close(w)
    os.set_blocking(r, False)
    job["setup_r"] = r
    _emit(result_fd, {"ready": True, "setup": setup})
    _prepare_imports(job, setup)  # once, here: every forked test inherits the import state
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
    _run_tests(result_fd, job, code, prelude, libc, clocks)


def _run_tests(result_fd: int, job: dict, code, prelude, libc, clocks) -> None:
    """Run every test in order and report each; a ``fatal`` record (an infrastructure failure, after
    the records of the tests that finished) or the ``done`` record ends the stream."""
    timeouts, stop_after = 0, job.get("stop_after_timeouts")
    for i, test in enumerate(job["tests"]):
        if stop_after is not None and timeouts >= stop_after:
            _emit(
                result_fd,
                {
                    "i": i,
                    "status": "not_run",
                    "stdout": "",
                    "time_s": 0.0,
                    "stderr": f"skipped after {timeouts} timed-out tests",
                },
            )
            continue
        try:
            res, payload = _run_test(i, job, test, code, prelude, libc, clocks)
        except Exception as e:  # noqa: BLE001 - the worker's own failure (its files, a fork): say what, stop
            _emit(result_fd, {"fatal": f"sandbox worker failed running test {i}: {type(e).__name__}: {e}"})
            return
        timeouts += res["status"] == "timeout"
        fatal = res.pop("fatal_after", None)
        _emit_test(result_fd, res, payload)
        if fatal is not None:  # an infrastructure failure after this test: it keeps its verdict, no more run
            _emit(result_fd, {"fatal": fatal})
            return
        if res.get("stop"):
            for k in range(i + 1, len(job["tests"])):
                _emit(result_fd, {"i": k, "status": "not_run", "stdout": "", "time_s": 0.0, "stderr": res["stop"]})
            break
    _emit(result_fd, {"done": True})


def _prepare_imports(job: dict, setup: dict) -> None:
    """Before the tests fork: point the import paths at the interpreter's directories bound inside the
    scratch tmpfs, or (no mounts: root mode without namespaces) import now the modules the
    unprivileged uid may not be able to read."""
    if setup.get("py_map"):
        _remap_import_paths(setup["py_map"])
    if not job["namespaces"] and job.get("uid") is not None:
        for name in _PRELOAD:
            try:
                __import__(name)
            except ImportError:
                pass


def procs_of_uid(uid: int) -> list[int]:
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
        os._exit(0)  # no interpreter teardown: nothing is left to flush, and it only costs time
