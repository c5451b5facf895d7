"""What separates a sandboxed program from the host's services, from its neighbours and from the
tests before it: path unix sockets of host services are unreachable, socket families a test has no
use for are refused (vsock, netlink, packet), system call numbers past the last reviewed one are
refused, a CPU-hungry neighbour cannot push an honest program past its time limit, a test's dying
processes never count against the next test, SysV IPC does not cross tests, a test's memory holds no
other test's input or output, and the worker itself runs without the capabilities it no longer
needs. Every program here is run for real in the default sandbox; each check has a counterpart that
shows the attack or the starvation works when the protection is off (or is documented to).
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import threading
import time

import pytest

from expected_skips import needs
from vpo.sandbox import Sandbox, SandboxConfig, TestInput, sandbox_capabilities

CAPS = sandbox_capabilities()
NAMESPACES = CAPS["isolation"] == "namespaces"
ROOT = os.geteuid() == 0
needs_ns = needs("namespaces", NAMESPACES, f"Linux namespaces unavailable here: {CAPS['reason']}")

ERRNO_OF = (
    "import ctypes, errno, json, os, socket\n"
    "def errno_of(fn):\n"
    "    try:\n        r = fn()\n"
    "    except OSError as e:\n        return errno.errorcode.get(e.errno, e.errno)\n"
    "    try:\n        r.close()\n    except Exception:\n        pass\n"
    "    return 'opened'\n"
)


class _UnixListener:
    """A host service on a path unix socket (stream and datagram) that counts what reaches it."""

    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, "service.sock")
        self.dgram_path = os.path.join(directory, "service-dgram.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(8)
        self.sock.settimeout(0.05)
        self.dgram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.dgram.bind(self.dgram_path)
        self.dgram.settimeout(0.05)
        for p in (self.path, self.dgram_path):
            os.chmod(p, 0o777)  # world-connectable, like /dev/log or the D-Bus system bus
        self.accepted = 0
        self.datagrams = 0
        self._stop = False
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
                self.accepted += 1
                conn.sendall(b"hello from the host\n")
                conn.close()
            except OSError:
                pass
            try:
                self.dgram.recv(100)
                self.datagrams += 1
            except OSError:
                pass

    def close(self) -> None:
        self._stop = True
        self.thread.join(2)
        self.sock.close()
        self.dgram.close()


@pytest.fixture
def host_service():
    # outside every scratch directory and outside /tmp (which the sandbox covers): a path the
    # sandbox sees read-only, as it sees /run or /dev
    d = tempfile.mkdtemp(prefix="vpo-host-service-", dir="/var/tmp" if os.path.isdir("/var/tmp") else None)
    os.chmod(d, 0o755)
    svc = _UnixListener(d)
    try:
        yield svc
    finally:
        svc.close()
        for p in (svc.path, svc.dgram_path):
            os.unlink(p)
        os.rmdir(d)


def _socket_attack(path: str, dgram_path: str) -> str:
    return ERRNO_OF + (
        f"path, dpath = {path!r}, {dgram_path!r}\n"
        "out = {}\n"
        "def stream():\n"
        "    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
        "    s.settimeout(2)\n    s.connect(path)\n    out['read'] = s.recv(100).decode()\n    return s\n"
        "def dgram():\n"
        "    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n    s.sendto(b'x', dpath)\n    return s\n"
        "def pair_connect():\n"  # a datagram socketpair may be re-connected to any path
        "    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)\n    a.connect(dpath)\n    a.send(b'x')\n"
        "    return a\n"
        "def pair_sendto():\n"
        "    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)\n    a.sendto(b'x', dpath)\n    return a\n"
        "for name, fn in (('stream', stream), ('dgram', dgram), ('pair_connect', pair_connect),"
        " ('pair_sendto', pair_sendto)):\n"
        "    out[name] = errno_of(fn)\n"
        "print(json.dumps(out))\n"
    )


@needs_ns
def test_a_host_service_on_a_path_unix_socket_is_unreachable(host_service, tmp_path):
    sb = Sandbox(SandboxConfig(timeout_s=5.0, scratch_root=str(tmp_path)))
    res = sb.run(_socket_attack(host_service.path, host_service.dgram_path), [TestInput()])
    o = res.outcomes[0]
    assert o.status == "ok", (o.stderr, res.error)
    got = json.loads(o.stdout)
    time.sleep(0.2)
    assert host_service.accepted == 0 and host_service.datagrams == 0, got
    assert "read" not in got, got
    assert {k: got[k] for k in ("stream", "dgram", "pair_connect", "pair_sendto")} == dict.fromkeys(
        ("stream", "dgram", "pair_connect", "pair_sendto"), "EPERM"
    ), got


@needs_ns
def test_without_the_filter_the_host_service_answers(host_service, tmp_path):
    """The counterpart, as the docs say: ``seccomp=False`` reopens the path-socket route (read-only
    mounts do not stop ``connect()``), so the test above fails if the filter's socket rule goes."""
    sb = Sandbox(SandboxConfig(timeout_s=5.0, seccomp=False, scratch_root=str(tmp_path)))
    res = sb.run(_socket_attack(host_service.path, host_service.dgram_path), [TestInput()])
    got = json.loads(res.outcomes[0].stdout)
    time.sleep(0.2)
    assert got["stream"] == "opened" and got["read"] == "hello from the host\n", got
    assert host_service.accepted >= 1 and host_service.datagrams >= 1


AF_VSOCK, AF_NETLINK, AF_PACKET, AF_ALG = 40, 16, 17, 38

FAMILIES = ERRNO_OF + (
    "out = {}\n"
    f"out['vsock'] = errno_of(lambda: socket.socket({AF_VSOCK}, socket.SOCK_STREAM))\n"
    f"out['netlink'] = errno_of(lambda: socket.socket({AF_NETLINK}, socket.SOCK_RAW, 0))\n"
    f"out['packet'] = errno_of(lambda: socket.socket({AF_PACKET}, socket.SOCK_RAW, 0))\n"
    f"out['alg'] = errno_of(lambda: socket.socket({AF_ALG}, socket.SOCK_SEQPACKET, 0))\n"
    "out['unix'] = errno_of(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))\n"
    # what a test may still use: TCP/UDP sockets (in an empty network namespace) and stream socketpairs
    "out['inet'] = errno_of(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))\n"
    "out['inet6_udp'] = errno_of(lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM))\n"
    "a, b = socket.socketpair()\na.sendall(b'ping')\nout['pair'] = b.recv(4).decode()\n"
    "a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)\na.send(b'seq')\nout['seqpacket'] = b.recv(4).decode()\n"
    "print(json.dumps(out))\n"
)


def test_unneeded_socket_families_are_refused(tmp_path):
    sb = Sandbox(SandboxConfig(timeout_s=5.0, scratch_root=str(tmp_path)))
    o = sb.run(FAMILIES, [TestInput()]).outcomes[0]
    assert o.status == "ok", o.stderr
    got = json.loads(o.stdout)
    assert {k: got[k] for k in ("vsock", "netlink", "packet", "alg", "unix")} == dict.fromkeys(
        ("vsock", "netlink", "packet", "alg", "unix"), "EPERM"
    ), got
    assert (got["inet"], got["inet6_udp"], got["pair"], got["seqpacket"]) == ("opened", "opened", "ping", "seq"), got


def test_without_the_filter_vsock_and_netlink_open(tmp_path):
    """The counterpart: the kernel itself lets these families open in the sandbox (netlink always;
    vsock where the vsock module is loaded), so only the filter refuses them."""
    sb = Sandbox(SandboxConfig(timeout_s=5.0, seccomp=False, scratch_root=str(tmp_path)))
    got = json.loads(sb.run(FAMILIES, [TestInput()]).outcomes[0].stdout)
    assert got["netlink"] == "opened" and got["unix"] == "opened", got
    print(f"\nwithout the filter: {got}")


UNKNOWN_CALLS = ERRNO_OF + (
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "out = {}\n"
    "for nr in (467, 468, 469, 470, 500, 1000):\n"
    "    ctypes.set_errno(0)\n"
    "    r = libc.syscall(nr, -1, 0, 0, 0, 0, 0)\n"
    "    out[nr] = errno.errorcode.get(ctypes.get_errno(), 0) if r == -1 else 'succeeded'\n"
    "print(json.dumps(out))\n"
)


def test_system_calls_past_the_last_reviewed_one_are_refused(tmp_path):
    """``open_tree_attr`` (467, Linux 6.15) and every later number answer ENOSYS, as on a kernel that
    lacks them; the kernel here knows 467-469, so without the filter they answer something else."""
    sb = Sandbox(SandboxConfig(timeout_s=5.0, scratch_root=str(tmp_path)))
    o = sb.run(UNKNOWN_CALLS, [TestInput()]).outcomes[0]
    assert o.status == "ok", o.stderr
    assert set(json.loads(o.stdout).values()) == {"ENOSYS"}, o.stdout
    off = Sandbox(SandboxConfig(timeout_s=5.0, seccomp=False, scratch_root=str(tmp_path)))
    got = json.loads(off.run(UNKNOWN_CALLS, [TestInput()]).outcomes[0].stdout)
    print(f"\nwithout the filter: {got}")
    if os.uname().release.split(".")[:2] >= ["6", "15"]:
        assert got["467"] != "ENOSYS", got


SYSV = (
    "import ctypes, sys\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "libc.shmat.restype = ctypes.c_void_p\n"
    "KEY, MSGKEY = 0x5650, 0x5651\n"
    "if sys.stdin.read().strip() == 'write':\n"
    "    shm = libc.shmget(KEY, 4096, 0o1666)\n"  # IPC_CREAT | 0666
    "    addr = libc.shmat(shm, None, 0)\n"
    "    ctypes.memmove(addr, b'left by test 0', 14)\n"
    "    print(shm, libc.msgget(MSGKEY, 0o1666))\n"
    "else:\n"
    "    shm = libc.shmget(KEY, 0, 0)\n"
    "    seen = ctypes.string_at(libc.shmat(shm, None, 0), 14).decode() if shm >= 0 else ''\n"
    "    print(shm, libc.msgget(MSGKEY, 0), repr(seen), open('/proc/sysvipc/shm').read().count('\\n') - 1)\n"
)


def test_sysv_ipc_does_not_cross_tests(tmp_path):
    sb = Sandbox(SandboxConfig(timeout_s=5.0, scratch_root=str(tmp_path)))
    res = sb.run(SYSV, [TestInput(stdin="write"), TestInput(stdin="read"), TestInput(stdin="read")])
    out = [o.stdout.split() for o in res.outcomes]
    assert [o.status for o in res.outcomes] == ["ok"] * 3, [o.stderr for o in res.outcomes]
    assert int(out[0][0]) >= 0 and int(out[0][1]) >= 0  # test 0 did create both
    for row in out[1:]:
        assert row == ["-1", "-1", "''", "0"], row  # nothing of it is visible to the next tests


def test_a_program_cannot_make_ipc_namespaces_or_posix_queues_itself(tmp_path):
    """The filter lets ``unshare(CLONE_NEWIPC)`` through for the worker; a test process still cannot
    use it (the kernel wants CAP_SYS_ADMIN, which it no longer has), and POSIX message queues, which
    cannot be listed to clean up, are refused."""
    prog = (
        "import ctypes, errno\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "r = libc.unshare(0x08000000)\n"
        "e1 = errno.errorcode[ctypes.get_errno()] if r else 'succeeded'\n"
        "r = libc.syscall(240 if ctypes.sizeof(ctypes.c_void_p) == 8 and __import__('os').uname().machine == 'x86_64'"
        " else 180, b'vpo-q', 0o100, 0o600, None)\n"  # mq_open(name, O_CREAT, 0600, NULL)
        "e2 = errno.errorcode[ctypes.get_errno()] if r == -1 else 'succeeded'\n"
        "print(e1, e2)\n"
    )
    o = Sandbox(SandboxConfig(timeout_s=5.0, scratch_root=str(tmp_path))).run(prog, [TestInput()]).outcomes[0]
    assert (o.status, o.stdout) == ("ok", "EPERM EPERM\n"), o.stderr


INPUT_SCAN = (
    "import ctypes, re, sys\n"
    "line = sys.stdin.read().strip()\n"
    "mine = line.split()[0]\n"
    "print(line)\n"  # the output of a test carries its input too
    "found = set()\n"
    "pat = re.compile(rb'tok' + rb'en-[0-9]-[0-9a-f]{12}')\n"
    "for line in open('/proc/self/maps').read().splitlines():\n"  # every readable mapping, read in place
    "    addr, perms = line.split()[:2]\n"
    "    if not perms.startswith('r') or line.endswith(('[vvar]', '[vsyscall]', '[vvar_vclock]')):\n"
    "        continue\n"
    "    lo, hi = (int(x, 16) for x in addr.split('-'))\n"
    "    found.update(m.decode() for m in pat.findall(ctypes.string_at(lo, hi - lo)))\n"
    "print(sorted(found - {mine}))\n"
)


def test_a_test_sees_only_its_own_input(tmp_path):
    """Each test's process memory (every readable mapping, read in place) holds its own input and no
    other test's: neither the inputs still to come nor what earlier tests read or printed."""
    tokens = [f"token-{i}-{os.urandom(6).hex()}" for i in range(3)]
    # of different lengths, so that no test's own input or output lands in a freed block of another's
    lines = [f"{t} {'x' * (300 * i)}".strip() for i, t in enumerate(tokens)]
    sb = Sandbox(SandboxConfig(timeout_s=10.0, memory_mb=1024, scratch_root=str(tmp_path)))
    res = sb.run(INPUT_SCAN, [TestInput(stdin=line + "\n") for line in lines])
    for tok, line, o in zip(tokens, lines, res.outcomes):
        assert o.status == "ok", o.stderr
        first, rest = o.stdout.split("\n", 1)
        assert first == line
        assert rest.strip() == "[]", (tok, rest)


SPINNERS = (
    "import os, time\n"
    "for _ in range(15):\n"
    "    if os.fork() == 0:\n"
    "        os.setsid()\n"
    "        while True:\n            pass\n"
    "time.sleep(30)\n"
)
HONEST = "x = 0\nfor i in range({n}):\n    x += i * i\nprint(x % 7)\n"


def _cpu_seconds_of(program: str) -> float:
    pid = os.fork()
    if pid == 0:
        exec(program, {"print": lambda *a: None})
        os._exit(0)
    _, _, ru = os.wait4(pid, 0)
    return ru.ru_utime + ru.ru_stime


@needs_ns
def test_fifteen_spinners_next_door_leave_an_honest_program_within_its_limit(tmp_path):
    """A program that forks 15 CPU spinners (each in its own session) runs in one sandbox; an honest
    program needing ~0.5 s of CPU runs in another with a 2 s limit, three rounds. The honest one must
    pass every round: its limit is judged on its own CPU time, and each sandbox's CPU share is capped."""
    n = 2_000_000
    alone = _cpu_seconds_of(HONEST.format(n=n))
    n = max(200_000, int(n * 0.5 / max(alone, 1e-3)))  # about 0.5 s of CPU on this machine
    noisy = Sandbox(SandboxConfig(timeout_s=6.0, max_processes=20, scratch_root=str(tmp_path)))
    honest = Sandbox(SandboxConfig(timeout_s=2.0, scratch_root=str(tmp_path)))
    rows = []
    for _ in range(3):
        t = threading.Thread(target=noisy.run, args=(SPINNERS, [TestInput()]))
        t.start()
        time.sleep(1.0)  # the spinners are up
        r = honest.run(HONEST.format(n=n), [TestInput()])
        t.join()
        o = r.outcomes[0]
        rows.append((o.status, round(o.time_s, 2), getattr(o, "cpu_s", None)))
    print(f"\nhonest program beside 15 spinners (status, wall s, cpu s): {rows}")
    assert [row[0] for row in rows] == ["ok"] * 3, rows


LEFTOVERS = (
    "import os, sys, time\n"
    "if sys.stdin.read().strip() == 'leave':\n"
    "    for _ in range(15):\n"
    "        if os.fork() == 0:\n"
    "            keep = bytearray(24 << 20)\n"  # dying takes a while: 24 MB to free each
    "            for i in range(0, len(keep), 4096):\n                keep[i] = 1\n"
    "            time.sleep(60)\n"
    "    time.sleep(0.8)\n"
    "    print('left')\n"
    "else:\n"
    "    n = 0\n"
    "    for _ in range(15):\n"
    "        try:\n            pid = os.fork()\n        except OSError:\n            break\n"
    "        if pid == 0:\n            time.sleep(30)\n            os._exit(0)\n"
    "        n += 1\n"
    "    print(n)\n"
)


def test_a_tests_leftovers_never_count_against_the_next(tmp_path):
    """Test 0 leaves 15 processes holding memory (RLIMIT_NPROC is 16: itself + 15), beside a sandbox
    of CPU spinners that slows their dying; each following test must still start all 15 of its own."""
    noisy = Sandbox(SandboxConfig(timeout_s=8.0, max_processes=20, scratch_root=str(tmp_path)))
    sb = Sandbox(SandboxConfig(timeout_s=5.0, max_processes=16, memory_mb=512, scratch_root=str(tmp_path)))
    t = threading.Thread(target=noisy.run, args=(SPINNERS, [TestInput()]))
    t.start()
    try:
        time.sleep(0.5)
        jobs = [(LEFTOVERS, [TestInput(stdin="leave"), TestInput(stdin="count"), TestInput(stdin="count")])] * 3
        counts = [[o.stdout.strip() for o in sb.run(*job).outcomes] for job in jobs]
    finally:
        t.join()
    assert counts == [["left", "15", "15"]] * 3, counts


def test_the_worker_runs_without_the_capabilities_it_no_longer_needs(tmp_path):
    """The worker (PID 1 in the sandbox, or the program's parent) keeps only what running tests needs:
    no CAP_NET_ADMIN, CAP_SYS_PTRACE, CAP_SYS_MODULE, CAP_MKNOD, CAP_NET_RAW, CAP_SYS_RAWIO,
    CAP_SYS_RESOURCE, CAP_BPF... in any of its sets, bounding set included."""
    prog = (
        "import os\n"
        "st = open(f'/proc/{os.getppid()}/status').read()\n"
        "print({l.split(':')[0]: int(l.split()[1], 16) for l in st.splitlines() if l.startswith('Cap')})\n"
    )
    o = Sandbox(SandboxConfig(timeout_s=5.0, scratch_root=str(tmp_path))).run(prog, [TestInput()]).outcomes[0]
    assert o.status == "ok", o.stderr
    caps = eval(o.stdout)  # noqa: S307 - our own probe's dict literal
    allowed = 0
    for bit in (0, 1, 3, 5, 6, 7, 8, 21):  # CHOWN DAC_OVERRIDE FOWNER KILL SETGID SETUID SETPCAP SYS_ADMIN
        allowed |= 1 << bit
    for name in ("CapEff", "CapPrm", "CapBnd", "CapInh", "CapAmb"):
        assert caps[name] & ~allowed == 0, (name, hex(caps[name]))
    assert caps["CapInh"] == caps["CapAmb"] == 0


def test_cpu_cgroups_are_pooled_limited_and_removed_at_exit(tmp_path):
    """Where the cpu controller has a v1 hierarchy of its own, sandboxes reuse empty cpu cgroups
    (creating and removing one per sandbox cost throughput) limited to ``cpu_cores``; a scoring
    process removes its pool when it exits, and one that was killed leaves it to the sweep."""
    import subprocess
    import sys

    from vpo.sandbox.probe import cgroup_dirs

    base = cgroup_dirs().get("cpu")
    if not (CAPS["cgroup_cpu"] and base and not os.path.exists(os.path.join(base, "cgroup.controllers"))):
        pytest.skip("no v1 cpu hierarchy here")  # pure v2: the cpu limit is in the sandbox's own cgroup
    prog = "print([l for l in open('/proc/self/cgroup').read().splitlines() if ':cpu:' in l][0])"
    sb = Sandbox(SandboxConfig(timeout_s=5.0, cpu_cores=0.5, scratch_root=str(tmp_path)))
    first, second = (sb.run(prog, [TestInput()]).outcomes[0].stdout.strip() for _ in range(2))
    name = first.rsplit("/", 1)[1]
    assert first == second and name.startswith(f"vpo-pool-{os.getpid()}-cpu"), (first, second)
    with open(os.path.join(base, name, "cpu.cfs_quota_us")) as f:
        assert int(f.read()) == 50_000  # half of the 100 ms period
    code = (
        "import os, sys\nfrom vpo.sandbox import Sandbox, SandboxConfig, TestInput\n"
        f"Sandbox(SandboxConfig(timeout_s=5.0, scratch_root={str(tmp_path)!r})).run('print(1)', [TestInput()])\n"
        "print(os.getpid())\nif sys.argv[1] == 'kill':\n    sys.stdout.flush()\n    os._exit(0)\n"
    )
    for how in ("exit", "kill"):
        child = subprocess.run([sys.executable, "-c", code, how], capture_output=True, text=True, timeout=60)
        pid = int(child.stdout.split()[-1])
        left = [d for d in os.listdir(base) if d.startswith(f"vpo-pool-{pid}-")]
        if how == "exit":
            assert left == [], left  # removed by the exiting process itself
        else:
            assert left, "a killed process cannot clean up: its pool stays for the sweep"
    from vpo.sandbox.cleanup import _SWEPT, sweep_stale

    _SWEPT.clear()
    sweep_stale(str(tmp_path), True)  # as the next Sandbox does: the dead owner's pool goes
    assert [d for d in os.listdir(base) if d.startswith(f"vpo-pool-{pid}-")] == []
