"""The third pass of hostile programs against the sandbox (issue 39): writes reach only the test's
working directory and /dev/null (a host FIFO is the probe), no host pseudo-terminal or device node is
reachable, sockets are TCP and UDP only, a test's CPU time counts every process it made (a program
that ignores SIGCHLD has its children reaped by the kernel, out of every parent's sight), and no test
finds what the one before it left in its working directory, however deep it buried it. Each test
here failed on the code before these protections (docs/sandbox.md, "What each protection changed").
"""

from __future__ import annotations

import json
import os
import stat
import tempfile

import pytest

from expected_skips import needs
from vpo.sandbox import Sandbox, SandboxConfig, TestInput, sandbox_capabilities
from vpo.sandbox import worker as W

CAPS = sandbox_capabilities()
NAMESPACES = CAPS["isolation"] == "namespaces"
ROOT = os.geteuid() == 0
needs_ns = needs("namespaces", NAMESPACES, f"Linux namespaces unavailable here: {CAPS['reason']}")
needs_root = needs("root", ROOT, "the sandbox's cgroups (the CPU counter) need root")
MODES = [pytest.param("namespaces", marks=needs_ns), "rlimits"]


def _sandbox(tmp_path, isolation: str = "namespaces", **kw) -> Sandbox:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # rlimits mode warns that it is rlimits mode
        kw.setdefault("timeout_s", 5.0)
        return Sandbox(SandboxConfig(isolation=isolation, scratch_root=str(tmp_path), **kw))


# -- 1. writes only beneath the working directory and to /dev/null ---------------------------------


@pytest.fixture
def host_fifo():
    """A world-writable named pipe on the host, outside /tmp (which the sandbox covers), its read end
    held open by the host (so a writer's open succeeds and its bytes would be read here)."""
    d = tempfile.mkdtemp(prefix="vpo-host-fifo-", dir="/var/tmp" if os.path.isdir("/var/tmp") else None)
    os.chmod(d, 0o755)
    path = os.path.join(d, "pipe")
    os.mkfifo(path)
    os.chmod(path, 0o666)
    reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        yield path, reader
    finally:
        os.close(reader)
        os.unlink(path)
        os.rmdir(d)


FIFO_ATTACK = (
    "import errno, json, os\n"
    "def attempt(fn):\n"
    "    try:\n        fn()\n        return 'written'\n"
    "    except OSError as e:\n        return errno.errorcode.get(e.errno, e.errno)\n"
    "def fifo():\n"
    "    fd = os.open({path!r}, os.O_WRONLY | os.O_NONBLOCK)\n"
    "    os.write(fd, b'escaped through the fifo')\n    os.close(fd)\n"
    "def own():\n"  # what a test may still write: its working directory, /dev/null
    "    os.makedirs('a/b')\n    open('a/b/f', 'w').write('x')\n    os.rename('a/b/f', 'g')\n"
    "    os.symlink('g', 'h')\n    os.mkfifo('p')\n    os.unlink('p')\n"
    "    open('/dev/null', 'w').write('x')\n"
    "print(json.dumps({{'fifo': attempt(fifo), 'own': attempt(own)}}))\n"
)


@pytest.mark.parametrize("isolation", MODES)
def test_a_host_fifo_cannot_be_written(host_fifo, tmp_path, isolation):
    """A read-only mount does not stop opening a FIFO (or a device) for writing; Landlock does: a test
    may write beneath its working directory and to /dev/null, nowhere else."""
    if not CAPS["landlock"]:
        pytest.skip("this kernel has no Landlock: host FIFOs stay writable here (docs/sandbox.md)")
    path, reader = host_fifo
    res = _sandbox(tmp_path, isolation).run(FIFO_ATTACK.format(path=path), [TestInput()])
    o = res.outcomes[0]
    assert o.status == "ok", (o.stderr, res.error)
    got = json.loads(o.stdout)
    try:
        leaked = os.read(reader, 1000)
    except BlockingIOError:
        leaked = b""
    assert leaked == b"", leaked
    assert got == {"fifo": "EACCES", "own": "written"}, got
    assert res.setup["landlock"] == CAPS["landlock"]


# -- 2. no host pseudo-terminal, no host device node ------------------------------------------------

PTY_ATTACK = (
    "import json, os\n"
    "n, why = 0, ''\n"
    "keep = []\n"
    "try:\n"
    "    for _ in range(20):\n        keep.append(os.openpty())\n        n += 1\n"
    "except OSError as e:\n    why = e.strerror\n"
    "print(json.dumps({'ptys': n, 'why': why, 'dev': sorted(os.listdir('/dev'))}))\n"
)


@pytest.mark.parametrize("isolation", MODES)
def test_no_host_pty_can_be_allocated(tmp_path, isolation):
    """Before, ``/dev/ptmx`` (0666) and the host's devpts were there: a test allocated host ptys until
    the machine-wide limit. Now the sandbox's ``/dev`` holds five nodes (namespaces), and Landlock
    refuses the read-write open of ``/dev/ptmx`` where the host's ``/dev`` is seen (rlimits)."""
    if isolation == "rlimits" and not CAPS["landlock"]:
        pytest.skip("rlimits mode without Landlock sees the host's /dev (docs/sandbox.md)")
    res = _sandbox(tmp_path, isolation).run(PTY_ATTACK, [TestInput()])
    o = res.outcomes[0]
    assert o.status == "ok", (o.stderr, res.error)
    got = json.loads(o.stdout)
    assert got["ptys"] == 0, got
    if isolation == "namespaces":
        assert got["dev"] == ["fd", "full", "null", "random", "stderr", "stdin", "stdout", "urandom", "zero"], got
        assert res.setup["dev"] == ["null", "zero", "full", "random", "urandom"]


METADATA_ATTACK = (
    "import json, os\n"
    "got = {}\n"
    "def attempt(name, f):\n"
    "    try:\n        f()\n        got[name] = 'done'\n"
    "    except OSError as e:\n        got[name] = e.strerror\n"
    "def ro_ptmx():\n    keep.append(os.open('/dev/ptmx', os.O_RDONLY))\n"
    "keep = []\n"
    "for _ in range(5):\n    attempt('ptmx_read_only', ro_ptmx)\n"
    "attempt('ptmx_utime', lambda: os.utime('/dev/ptmx', (0, 0)))\n"
    "attempt('null_utime', lambda: os.utime('/dev/null'))\n"
    "attempt('null_futimens', lambda: os.utime(os.open('/dev/null', os.O_RDONLY)))\n"
    "attempt('null_setxattr', lambda: os.setxattr('/dev/null', 'user.vpo', b'1'))\n"
    "attempt('null_removexattr', lambda: os.removexattr('/dev/null', 'user.vpo'))\n"
    "attempt('host_utime', lambda: os.utime(HOST, (0, 0)))\n"
    "attempt('host_setxattr', lambda: os.setxattr(HOST, 'user.vpo', b'1'))\n"
    "attempt('urandom', lambda: open('/dev/urandom', 'rb').read(4))\n"
    "attempt('etc', lambda: open('/etc/hostname' if os.path.exists('/etc/hostname') else '/etc/passwd').read())\n"
    "print(json.dumps(got))\n"
)


@pytest.mark.parametrize("isolation", MODES)
def test_no_pty_by_a_read_only_open_and_no_host_timestamps_or_xattrs(tmp_path, isolation):
    """Issue 50: in ``rlimits`` mode Landlock refused only the read-write open of ``/dev/ptmx``; a
    read-only open still allocated a host pty, and ``utime``/``futimens``/``setxattr`` (metadata,
    which Landlock does not handle) changed host files the uid may write. Now reads in the host's
    ``/dev`` are confined to the harmless nodes (a Landlock read layer, rlimits mode) and those calls
    answer EPERM there (seccomp); in namespace mode there is no ``ptmx`` and the mounts are read-only.
    Ordinary reads still work."""
    if isolation == "rlimits" and not CAPS["landlock"]:
        pytest.skip("rlimits mode without Landlock sees the host's /dev (docs/sandbox.md)")
    d = tempfile.mkdtemp(prefix="vpo-host-meta-", dir="/var/tmp" if os.path.isdir("/var/tmp") else None)
    try:
        os.chmod(d, 0o755)
        host = os.path.join(d, "victim")
        with open(host, "w") as f:
            f.write("x")
        os.chmod(host, 0o666)  # world-writable: the sandbox uid may write it, and so set its times
        before = [os.stat(p).st_mtime_ns for p in (host, "/dev/null", "/dev/ptmx")]
        prog = METADATA_ATTACK.replace("HOST", repr(host))
        o = _sandbox(tmp_path, isolation).run(prog, [TestInput()]).outcomes[0]
        assert o.status == "ok", o.stderr
        got = json.loads(o.stdout)
        after = [os.stat(p).st_mtime_ns for p in (host, "/dev/null", "/dev/ptmx")]
        assert after == before, got
        assert got["urandom"] == got["etc"] == "done", got
        changed = [k for k, v in got.items() if v == "done" and k not in ("urandom", "etc")]
        assert changed == [], got
        assert "user.vpo" not in os.listxattr(host)
    finally:
        import shutil

        shutil.rmtree(d, ignore_errors=True)


@needs_ns
def test_the_private_dev_nodes_work_and_are_read_only(tmp_path):
    prog = (
        "import os\n"
        "print(len(open('/dev/urandom', 'rb').read(16)), len(open('/dev/random', 'rb').read(8)),\n"
        "      open('/dev/zero', 'rb').read(4) == bytes(4), open('/dev/null', 'w').write('x'),\n"
        "      os.path.realpath('/dev/stdin'))\n"
        "for what in (lambda: open('/dev/evil', 'w'), lambda: os.mkfifo('/dev/p'), lambda: os.mkdir('/dev/pts')):\n"
        "    try:\n        what()\n        print('made')\n"
        "    except OSError as e:\n        print(e.strerror)\n"
    )
    o = _sandbox(tmp_path).run(prog, [TestInput()]).outcomes[0]
    assert o.status == "ok", o.stderr
    lines = o.stdout.splitlines()
    assert lines[0].split()[:4] == ["16", "8", "True", "1"], lines
    assert "made" not in lines[1:], lines


# -- 3. sockets: TCP and UDP only --------------------------------------------------------------------

SOCK_PACKET, IPPROTO_MPTCP, IPPROTO_UDPLITE, IPPROTO_SCTP, IPPROTO_ICMP = 10, 262, 136, 132, 1
SOCKETS = (
    "import errno, json, socket\n"
    "def attempt(family, kind, proto):\n"
    "    try:\n        socket.socket(family, kind, proto).close()\n        return 'opened'\n"
    "    except OSError as e:\n        return errno.errorcode.get(e.errno, e.errno)\n"
    "AF4, AF6, S, D = socket.AF_INET, socket.AF_INET6, socket.SOCK_STREAM, socket.SOCK_DGRAM\n"
    "F = socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC\n"
    "out = {\n"
    f"    'mptcp': attempt(AF4, S, {IPPROTO_MPTCP}), 'mptcp6': attempt(AF6, S, {IPPROTO_MPTCP}),\n"
    f"    'udplite': attempt(AF4, D, {IPPROTO_UDPLITE}), 'udplite6': attempt(AF6, D, {IPPROTO_UDPLITE}),\n"
    f"    'sctp': attempt(AF4, S, {IPPROTO_SCTP}), 'icmp': attempt(AF4, D, {IPPROTO_ICMP}),\n"
    f"    'packet': attempt(AF4, {SOCK_PACKET}, 0), 'raw': attempt(AF4, socket.SOCK_RAW, 0),\n"
    "    'seqpacket': attempt(AF4, socket.SOCK_SEQPACKET, 0),\n"
    "    'tcp': attempt(AF4, S, 0), 'tcp6': attempt(AF6, S | F, socket.IPPROTO_TCP),\n"
    "    'udp': attempt(AF4, D | F, socket.IPPROTO_UDP), 'udp6': attempt(AF6, D, 0),\n"
    "}\n"
    "print(json.dumps(out))\n"
)
REFUSED = ("mptcp", "mptcp6", "udplite", "udplite6", "sctp", "icmp", "packet", "raw", "seqpacket")


def test_only_tcp_and_udp_sockets_can_be_made(tmp_path):
    """MPTCP and UDP-Lite sockets opened before (the docs said TCP and UDP only); SOCK_PACKET reached
    the packet family (the kernel's own EPERM, no CAP_NET_RAW: the filter's part is in
    test_seccomp.py's decisions test). Now the filter refuses every type but stream and datagram and
    every protocol but 0, TCP and UDP; TCP and UDP with SOCK_NONBLOCK/SOCK_CLOEXEC still open."""
    o = _sandbox(tmp_path).run(SOCKETS, [TestInput()]).outcomes[0]
    assert o.status == "ok", o.stderr
    got = json.loads(o.stdout)
    assert {k: got[k] for k in REFUSED} == dict.fromkeys(REFUSED, "EPERM"), got
    assert {k: got[k] for k in ("tcp", "tcp6", "udp", "udp6")} == dict.fromkeys(
        ("tcp", "tcp6", "udp", "udp6"), "opened"
    )


def test_without_the_filter_mptcp_or_udplite_open(tmp_path):
    """The counterpart: the kernel here makes these sockets in the sandbox's network namespace, so
    only the filter refuses them."""
    got = json.loads(_sandbox(tmp_path, seccomp=False).run(SOCKETS, [TestInput()]).outcomes[0].stdout)
    print(f"\nwithout the filter: {got}")
    assert "opened" in (got["mptcp"], got["udplite"]), got


# -- 4. CPU time: every process the test made, reaped or not ----------------------------------------

SIGCHLD_BURNER = (
    "import os, signal, time\n"
    "signal.signal(signal.SIGCHLD, signal.SIG_IGN)\n"  # the kernel reaps the children: no cutime
    "for _ in range(6):\n"
    "    pid = os.fork()\n"
    "    if pid == 0:\n"
    "        t = time.process_time()\n"
    "        while time.process_time() - t < 0.45:\n            pass\n"
    "        os._exit(0)\n"
    "    while True:\n"  # the parent sleeps until its child is gone: it uses no CPU itself
    "        try:\n            os.kill(pid, 0)\n        except ProcessLookupError:\n            break\n"
    "        time.sleep(0.01)\n"
    "print('done')\n"
)


@needs_root
def test_cpu_time_of_children_the_kernel_reaped_counts(tmp_path):
    """2.7 s of CPU in six children a SIGCHLD-ignoring parent never waits for, under a 1 s limit:
    before, judged ``ok`` with ~0.01 s of CPU (their time reached no counter the worker read); now a
    CPU timeout at the limit, read from the sandbox's cgroup counter. (A wall limit of 20 s, so only
    the CPU rule can end it.)"""
    sb = _sandbox(tmp_path, timeout_s=1.0, wall_timeout_s=20.0, memory_mb=512)
    res = sb.run(SIGCHLD_BURNER, [TestInput()])
    o = res.outcomes[0]
    print(f"\nSIGCHLD-ignoring burner: {o.status}, limit {o.limit}, cpu {o.cpu_s} s, wall {o.time_s:.2f} s")
    assert (o.status, o.limit) == ("timeout", "cpu"), (o.status, o.limit, o.cpu_s, o.time_s, o.stdout)
    assert 1.0 <= o.cpu_s < 1.6, o.cpu_s
    assert res.setup["cpu_time_source"] == CAPS["cpu_time_source"] == "cgroup"


@needs_root
def test_an_honest_programs_cpu_time_is_its_own(tmp_path):
    """The counter pools the sandbox's processes; the worker's own CPU (polling, reading the counter)
    is taken out, so a program that uses next to nothing is charged next to nothing, and one with
    children is charged theirs once."""
    prog = (
        "import os, time\n"
        "pid = os.fork()\n"
        "if pid == 0:\n    t = time.process_time()\n    while time.process_time() - t < 0.3:\n        pass\n"
        "    os._exit(0)\n"
        "os.waitpid(pid, 0)\nprint('ok')\n"
    )
    res = _sandbox(tmp_path, timeout_s=2.0, wall_timeout_s=20.0).run(prog, [TestInput(), TestInput()])
    for o in res.outcomes:
        assert o.status == "ok", o.stderr
        assert 0.28 <= o.cpu_s < 0.6, o.cpu_s
    idle = _sandbox(tmp_path).run("import time\ntime.sleep(0.3)\n", [TestInput()]).outcomes[0]
    assert idle.status == "ok" and idle.cpu_s < 0.1, idle.cpu_s


# -- 5. the working directory: removed and made again after every test ------------------------------

DEEP = (
    "import os, sys\n"
    "how = sys.stdin.read().strip()\n"
    "if how in ('bury', 'mark'):\n"  # mark: the directory's own metadata only, no entry left in it
    "    try:\n        os.setxattr('.', 'user.vpo', b'left by test 0')\n        print('xattr set')\n"
    "    except OSError:\n        pass\n"
    "    try:\n        os.utime('.', (1e9, 1e9))\n"
    "    except OSError:\n        print('utime refused')\n"  # rlimits mode: seccomp refuses metadata calls
    "if how == 'mark':\n"
    "    print('marked')\n"
    "elif how == 'bury':\n"
    "    open('top', 'wb').write(b'x' * (8 << 20))\n"  # 8 MiB, and the scratch space it takes
    "    for i in range(1100):\n"
    "        name = 'd' * 200\n        os.mkdir(name)\n        os.chdir(name)\n"
    "        if i % 100 == 99:\n            open('f', 'w').write('secret %d' % i)\n"
    "    open('secret', 'w').write('left by test 0')\n"
    "    os.chdir('/')\n"  # leave the tree behind with a closed directory in it
    "    print('buried')\n"
    "else:\n"
    "    st = os.stat('.')\n"
    "    try:\n        xattr = os.getxattr('.', 'user.vpo').decode()\n"
    "    except OSError:\n        xattr = None\n"
    "    import time\n"
    "    print(json_dumps := __import__('json').dumps({'entries': os.listdir('.'), 'xattr': xattr,\n"
    "        'mtime_age': time.time() - st.st_mtime, 'mode': oct(st.st_mode & 0o7777)}))\n"
)


@pytest.mark.parametrize("isolation", MODES)
def test_a_1100_deep_tree_is_gone_before_the_next_test(tmp_path, isolation):
    """Test 0 buries files 1,100 directories deep (past shutil.rmtree's recursion limit and past
    PATH_MAX), sets an extended attribute and an old timestamp on its working directory; tests 1 and
    2 find an empty directory with fresh metadata. Test 3 sets the attribute and timestamp only,
    leaving no entry; test 4 finds neither. Before: RecursionError in the wipe, test 1 saw the tree
    (and the scratch space it took); an empty directory was not wiped at all, so test 4 saw the
    attribute and the 2001 timestamp."""
    # wipe_s: on a slow host disk (rlimits mode) 1,100 rmdirs take seconds; this test is about what the
    # wipe removes, test_a_slow_wipe_is_bounded_and_charged_to_the_test about its bound
    sb = _sandbox(
        tmp_path, isolation, scratch_inodes=4096, scratch_mb=32, max_output_bytes=16 << 20, timeout_s=20.0, wipe_s=60.0
    )
    order = ["bury", "look", "look", "mark", "look"]
    res = sb.run(DEEP, [TestInput(stdin=how) for how in order])
    assert res.error is None, res.error
    outcomes = dict(zip(range(len(order)), res.outcomes))
    bury, mark = outcomes[0], outcomes[3]
    # rlimits mode: timestamps and extended attributes are refused (issue 50), the wipe is still checked
    meta = ["xattr", "set"] if isolation == "namespaces" else ["utime", "refused"]
    assert bury.status == "ok" and bury.stdout.split() == [*meta, "buried"], (bury.stdout, bury.stderr)
    assert mark.status == "ok" and mark.stdout.split() == [*meta, "marked"], (mark.stdout, mark.stderr)
    for o in (outcomes[1], outcomes[2], outcomes[4]):
        assert o.status == "ok", (o.status, o.stderr)
        got = json.loads(o.stdout)
        assert got["entries"] == [] and got["xattr"] is None, got
        assert got["mtime_age"] < 60 and got["mode"] == "0o700", got


def test_the_iterative_wipe_takes_deep_closed_trees_and_follows_no_link(tmp_path):
    """:func:`empty_tree` on what a program can leave: 1,100 nested directories of 200-character
    names (a path far past PATH_MAX), directories chmod-ed to 0, a symbolic link to a directory
    outside (which must survive, contents and all)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("keep")
    work = tmp_path / "work"
    work.mkdir()
    fd = os.open(work, os.O_RDONLY)
    try:
        for i in range(1100):
            os.mkdir("d" * 200, dir_fd=fd)
            nxt = os.open("d" * 200, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nxt
            if i % 250 == 0:
                os.symlink(str(outside), "link", dir_fd=fd)
                with open(os.open("f", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd), "w") as f:
                    f.write("x")
    finally:
        os.close(fd)
    os.chmod(work / ("d" * 200), 0)
    W.empty_tree(str(work))
    assert os.listdir(work) == []
    assert (outside / "keep").read_text() == "keep"


def test_the_wipe_fails_closed(tmp_path, monkeypatch):
    """If the helper leaves anything (here: it does nothing), the working directory cannot be
    removed, and the worker raises the cleanup error that stops the sandbox (no further test runs);
    when it works, the directory is a new one."""
    scratch = tmp_path
    (scratch / "work").mkdir()
    (scratch / "work" / "left").write_text("x")
    monkeypatch.setattr(W, "empty_tree", lambda path: None)
    with pytest.raises(W._CleanupError, match="could not be emptied"):
        W._wipe({"scratch": str(scratch), "uid": None, "namespaces": False})
    assert (scratch / "work" / "left").exists()
    monkeypatch.undo()
    before = os.stat(scratch / "work")
    W._wipe({"scratch": str(scratch), "uid": None, "namespaces": False})
    after = os.stat(scratch / "work")
    assert os.listdir(scratch / "work") == [] and stat.S_IMODE(after.st_mode) == 0o700
    assert after.st_ino != before.st_ino or after.st_ctime_ns != before.st_ctime_ns


# -- 6. side channels closed: inotify on host directories, other sandboxes' cgroups -----------------

INOTIFY = (
    "import ctypes, errno, os\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "fd = libc.inotify_init1(0)\n"
    "if fd < 0:\n    print('init', errno.errorcode[ctypes.get_errno()])\n"
    "else:\n"
    "    wd = libc.inotify_add_watch(fd, b'/etc', 0xFFF)\n"  # IN_ALL_EVENTS on a host directory
    "    print('watch', wd if wd < 0 else 'ok', errno.errorcode.get(ctypes.get_errno(), 0) if wd < 0 else '')\n"
)


def test_inotify_on_host_directories_is_refused(tmp_path):
    """A watch on a host directory would tell a test when the host reads or writes there; the filter
    refuses inotify (``inotify_init``, ``inotify_init1``, ``inotify_add_watch``: EPERM). Without the
    filter the watch is set."""
    on = _sandbox(tmp_path).run(INOTIFY, [TestInput()]).outcomes[0]
    assert (on.status, on.stdout.split()) == ("ok", ["init", "EPERM"]), (on.stdout, on.stderr)
    off = _sandbox(tmp_path, seccomp=False).run(INOTIFY, [TestInput()]).outcomes[0]
    assert off.stdout.split()[:2] == ["watch", "ok"], (off.stdout, off.stderr)


@needs_ns
@needs_root
def test_other_sandboxes_cgroups_are_out_of_sight(tmp_path):
    """A sandbox's CPU and memory counters, seen from another sandbox, would show what it runs; inside
    the sandbox ``/sys/fs/cgroup`` is an empty read-only directory (the worker opened the two files it
    reads there first). A program that names another sandbox's counter path finds nothing."""
    from vpo.sandbox.probe import cgroup_dirs

    base = cgroup_dirs().get("cpuacct") or cgroup_dirs().get("unified")
    other = os.path.join(base, f"vpo-sbx-{os.getpid()}-neighbour")
    os.mkdir(other)
    try:
        prog = (
            "import os\nprint(os.listdir('/sys/fs/cgroup'))\n"
            f"print(os.path.exists({other!r}))\n"
            "try:\n    open('/sys/fs/cgroup/x', 'w')\nexcept OSError as e:\n    print(e.strerror)\n"
        )
        res = _sandbox(tmp_path, timeout_s=2.0, memory_mb=256).run(prog, [TestInput()])
        o = res.outcomes[0]
        assert o.status == "ok", o.stderr
        assert o.stdout.splitlines()[:2] == ["[]", "False"], o.stdout
        assert res.setup["cgroupfs_hidden"] is True
    finally:
        os.rmdir(other)
    # the worker still judges on its counter and still sees its memory cgroup's limit behind the cover
    hog = _sandbox(tmp_path, timeout_s=1.0, memory_mb=256).run("while True:\n    pass\n", [TestInput()])
    assert (hog.outcomes[0].status, hog.outcomes[0].limit) == ("timeout", "cpu")


def test_the_memory_verdict_reads_the_failcnt_it_opened(tmp_path):
    """Behind the cover the worker reads ``memory.failcnt`` through the fd it opened before: a count
    above 0 turns a SIGKILLed test into ``memory_limit``."""
    counts = []
    for text in ("0\n", "3\n"):
        f = tmp_path / f"failcnt{len(counts)}"
        f.write_text(text)
        fd = os.open(f, os.O_RDONLY)
        try:
            counts.append(W._memcg_oom({"failcnt_fds": [fd], "cgroup_procs": ["/nonexistent/cgroup.procs"]}))
        finally:
            os.close(fd)
    assert counts == [False, True]


def test_capabilities_report_the_third_pass():
    """``sandbox_capabilities()`` says what this machine gives: the kernel's Landlock ABI (as the
    worker probes it), the private /dev (namespaces), the CPU counter (root with cgroups)."""
    import ctypes

    abi = W._landlock_abi(ctypes.CDLL(None, use_errno=True))
    assert CAPS["landlock"] == (abi or False)
    assert CAPS["private_dev"] == NAMESPACES
    from vpo.sandbox.probe import cgroup_dirs

    counter = ROOT and bool({"cpuacct", "unified"} & set(cgroup_dirs()))
    assert CAPS["cpu_time_source"] == ("cgroup" if counter else "proc"), CAPS
