"""The sandbox's seccomp filter: hostile programs that call what it blocks (nested namespaces, ptrace
of a sibling, keyctl, bpf, io_uring, perf_event_open, personality tricks, mounts) get EPERM (clone3:
ENOSYS) with the filter and get further without it (so a no-op filter fails here); ordinary programs
(threads, subprocesses, fork) still run; the BPF program itself is decoded and executed by a small
classic-BPF interpreter below (arch check, x32, every deny-list entry, the argument checks, numbers past the last reviewed one); its
syscall numbers are checked against the kernel headers; and a worker whose filter the kernel refuses
runs no test (every test ``sandbox_error``, with an error that names the setting).
"""

from __future__ import annotations

import errno
import json
import os
import platform
import re
import struct
import time

import pytest

from vpo.sandbox import Sandbox, SandboxConfig, TestInput, sandbox_capabilities
from vpo.sandbox import seccomp as S
from vpo.sandbox import worker as W

MACHINE = platform.machine()
# Syscall numbers of the calls glibc has no wrapper for, written here independently of the worker.
RAW = {
    "x86_64": {
        "clone": 56,
        "clone3": 435,
        "keyctl": 250,
        "add_key": 248,
        "bpf": 321,
        "perf_event_open": 298,
        "io_uring_setup": 425,
        "userfaultfd": 323,
    },
    "aarch64": {
        "clone": 220,
        "clone3": 435,
        "keyctl": 219,
        "add_key": 217,
        "bpf": 280,
        "perf_event_open": 241,
        "io_uring_setup": 425,
        "userfaultfd": 282,
    },
}
NR = RAW.get(MACHINE, RAW["x86_64"])

HELPER = (
    "import ctypes, json, os, time\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "res = {}\n"
    "def call(name, fn, *args):\n"
    "    ctypes.set_errno(0)\n"
    "    r = fn(*args)\n"
    "    res[name] = ctypes.get_errno() if r == -1 else 0\n"
    "    return r\n"
)
END = "print(json.dumps(res))\n"
CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWIPC, SIGCHLD = 0x10000000, 0x00020000, 0x08000000, 17
READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE = 0x0400000, 0x0040000

ATTACKS = {
    "unshare_userns": f"call('unshare', libc.unshare, {CLONE_NEWUSER})\n",
    "clone_userns": (
        f"r = call('clone', libc.syscall, {NR['clone']}, {CLONE_NEWUSER | SIGCHLD}, 0, 0, 0, 0)\n"
        "if r == 0:\n    os._exit(0)\n"
        "if r > 0:\n    os.waitpid(r, 0)\n"
    ),
    "setns": "call('setns', libc.setns, os.open('/proc/self/ns/net', os.O_RDONLY), 0)\n",
    "mount_own_ns": (  # a private user + mount namespace first (where that is allowed), then a mount
        f"call('unshare', libc.unshare, {CLONE_NEWUSER | CLONE_NEWNS})\n"
        "os.makedirs('m', exist_ok=True)\n"
        "call('mount', libc.mount, b'none', b'm', b'tmpfs', 0, None)\n"
    ),
    "ptrace_sibling": (
        "pid = os.fork()\n"
        "if pid == 0:\n    time.sleep(5)\n    os._exit(0)\n"
        "call('ptrace', libc.ptrace, 16, pid, 0, 0)\n"  # PTRACE_ATTACH
        "os.kill(pid, 9)\nos.waitpid(pid, 0)\n"
    ),
    "ptrace_parent": "call('ptrace', libc.ptrace, 16, os.getppid(), 0, 0)\n",
    "process_vm_readv": (
        "buf = ctypes.create_string_buffer(8)\n"
        "iov = (ctypes.c_void_p * 2)(ctypes.addressof(buf), 8)\n"
        "call('process_vm_readv', libc.process_vm_readv, os.getppid(), iov, 1, iov, 1, 0)\n"
    ),
    "keyctl": (
        f"call('keyctl', libc.syscall, {NR['keyctl']}, 0, -3, 1)\n"  # KEYCTL_GET_KEYRING_ID(session, create)
        f"call('add_key', libc.syscall, {NR['add_key']}, b'user', b'vpo', b'x', 1, -2)\n"
    ),
    "bpf": (
        "attr = ctypes.create_string_buffer(128)\n"
        f"call('bpf', libc.syscall, {NR['bpf']}, 0, attr, 128)\n"  # BPF_MAP_CREATE with a zeroed attr
    ),
    "io_uring_setup": (
        "params = ctypes.create_string_buffer(120)\n"
        f"fd = call('io_uring_setup', libc.syscall, {NR['io_uring_setup']}, 4, params)\n"
    ),
    "perf_event_open": (
        "attr = ctypes.create_string_buffer(128)\n"
        "ctypes.memmove(attr, (ctypes.c_uint32 * 2)(1, 128), 8)\n"  # PERF_TYPE_SOFTWARE, size 128
        f"call('perf_event_open', libc.syscall, {NR['perf_event_open']}, attr, 0, -1, -1, 0)\n"
    ),
    "personality_exec": f"call('personality', libc.personality, {READ_IMPLIES_EXEC})\n",
    "personality_aslr": f"call('personality', libc.personality, {ADDR_NO_RANDOMIZE})\n",
    "userfaultfd": f"call('userfaultfd', libc.syscall, {NR['userfaultfd']}, 0)\n",
    "clone3": "args = ctypes.create_string_buffer(88)\n"
    f"r = call('clone3', libc.syscall, {NR['clone3']}, args, 88)\nif r == 0:\n    os._exit(0)\n",
}
EXPECTED_ERRNO = {"clone3": errno.ENOSYS}  # everything else: EPERM


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every attack once with the filter (the default) and once with ``seccomp=False``."""
    out = {}
    for on in (True, False):
        cfg = SandboxConfig(
            timeout_s=5.0,
            memory_mb=256,
            max_processes=8,
            seccomp=on,
            scratch_root=str(tmp_path_factory.mktemp(f"seccomp_{on}")),
        )
        results = Sandbox(cfg).run_many([(HELPER + prog + END, [TestInput()]) for prog in ATTACKS.values()])
        out[on] = dict(zip(ATTACKS, results))
    return out


def _errnos(res) -> dict:
    o = res.outcomes[0]
    assert o.status == "ok", (o.status, o.stderr, res.error)
    return json.loads(o.stdout.strip().splitlines()[-1])


def test_every_blocked_call_fails_with_the_filter(runs):
    rows = []
    for name, res in runs[True].items():
        got = _errnos(res)
        assert got, name
        for call, e in got.items():
            if name == "mount_own_ns" and call == "mount":
                assert e == errno.EPERM, (name, got)  # mount is denied wherever it is
                continue
            assert e == EXPECTED_ERRNO.get(call, errno.EPERM), (name, call, errno.errorcode.get(e, e))
        rows.append(f"{name:18s} {got}")
    assert runs[True]["unshare_userns"].setup["seccomp"].startswith("filter:")
    print("\nseccomp on:\n" + "\n".join(rows))


def test_without_the_filter_the_attacks_get_further(runs):
    """The same programs with ``seccomp=False``: the calls reach the kernel, which answers something
    else for at least some of them (here: success or a complaint about the arguments), so the test
    above would fail if the filter were a no-op."""
    further = {}
    for name, res in runs[False].items():
        assert res.setup["seccomp"] is False
        got = _errnos(res)
        further.update(
            {
                f"{name}.{c}": errno.errorcode.get(e, e) if e else "succeeded"
                for c, e in got.items()
                if e != EXPECTED_ERRNO.get(c, errno.EPERM)
            }
        )
    print(f"\nseccomp off, got further: {further}")
    assert len(further) >= 3, further
    # without the filter the nested user namespace is created (root mode) or refused by our
    # max_user_namespaces=0 (user-namespace mode, ENOSPC): either way not the filter's EPERM
    assert "personality_aslr.personality" in further or "keyctl.keyctl" in further, further


def test_ordinary_programs_still_run_under_the_filter(tmp_path):
    prog = (
        "import os, subprocess, threading, json\n"
        "box = []\n"
        "t = threading.Thread(target=lambda: box.append(sum(range(1000)))); t.start(); t.join()\n"
        "p = subprocess.run(['/bin/echo', 'child'], capture_output=True, text=True)\n"
        "pid = os.fork()\n"
        "if pid == 0:\n    os._exit(7)\n"
        "st = os.waitpid(pid, 0)[1]\n"
        "status = open('/proc/self/status').read()\n"
        "print(box[0], p.stdout.strip(), os.waitstatus_to_exitcode(st), status.split('Seccomp:')[1].split()[0],\n"
        "      status.split('NoNewPrivs:')[1].split()[0])\n"
    )
    for on, mode in ((True, "2"), (False, "0")):
        res = Sandbox(SandboxConfig(timeout_s=5.0, seccomp=on, scratch_root=str(tmp_path))).run(prog, [TestInput()])
        o = res.outcomes[0]
        assert (o.status, o.stdout) == ("ok", f"499500 child 7 {mode} 1\n"), (o.stderr, res.error)


def test_capabilities_report_the_filter():
    caps = sandbox_capabilities()
    assert caps["seccomp_available"] is True, caps  # x86_64 / aarch64 Linux: must be there, else fail loudly
    assert caps["seccomp"] is True  # the probe program ran under it (Seccomp: 2), as the default config says
    assert caps["unix_sockets_blocked"] is True  # its socket(AF_UNIX) was refused
    assert SandboxConfig().seccomp is True


def test_turning_the_filter_off_warns_about_path_sockets():
    with pytest.warns(RuntimeWarning, match="path unix sockets"):
        Sandbox(SandboxConfig(seccomp=False))


# -- the BPF program itself ----------------------------------------------------------------------


def _run_bpf(prog: list[tuple[int, int, int, int]], nr: int, arch: int, args=(0,) * 6) -> int:
    """A classic-BPF interpreter for the instructions the filter uses, on one ``struct seccomp_data``."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, *args)
    pc, acc = 0, 0
    for _ in range(len(prog) + 1):
        code, jt, jf, k = prog[pc]
        if code == 0x20:  # BPF_LD | BPF_W | BPF_ABS
            acc = struct.unpack_from("<I", data, k)[0]
        elif code == 0x06:  # BPF_RET | BPF_K
            return k
        elif code == 0x54:  # BPF_ALU | BPF_AND | BPF_K
            acc &= k
        elif code in (0x15, 0x35, 0x45):  # JEQ, JGE, JSET (immediate)
            hit = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[code]
            pc += jt if hit else jf
        else:
            raise AssertionError(f"unexpected BPF opcode {code:#x} at {pc}")
        pc += 1
    raise AssertionError("BPF program did not return")


KILL, ALLOW, EPERM, ENOSYS = 0x80000000, 0x7FFF0000, 0x50000 | errno.EPERM, 0x50000 | errno.ENOSYS


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_bpf_program_checks_the_architecture_first(machine):
    prog = S.seccomp_program(machine)
    arch = S._AUDIT_ARCH[machine]
    # the first instructions load the arch and kill on anything else
    assert prog[0] == (0x20, 0, 0, 4)
    assert prog[1][0] == 0x15 and prog[1][3] == arch and prog[2] == (0x06, 0, 0, KILL)
    for foreign in (0x40000003, 0xC000003E, 0xC00000B7, 0xC00000F3, 0):  # i386, x86_64, aarch64, riscv64
        if foreign != arch:
            assert _run_bpf(prog, 0, foreign) == KILL, hex(foreign)
    if machine == "x86_64":  # x32 calls share the x86_64 audit arch
        assert _run_bpf(prog, 0x40000000 | 0, arch) == KILL
        assert _run_bpf(prog, 0x40000000 | 272, arch) == KILL


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_bpf_program_decisions_by_number(machine):
    prog = S.seccomp_program(machine)
    arch, col = S._AUDIT_ARCH[machine], 0 if machine == "x86_64" else 1
    denied = {v[col] for v in S._SECCOMP_DENY.values()} - {None}
    nr = {name: v[col] for name, v in S._SECCOMP_ARG_CHECKED.items()}
    last = S._SECCOMP_LAST_REVIEWED
    for n in denied:
        assert _run_bpf(prog, n, arch) == EPERM, n
    for n in set(range(0, last + 1)) - denied - set(nr.values()):
        assert _run_bpf(prog, n, arch) == ALLOW, n
    # every number past the last reviewed one is refused as unknown (open_tree_attr is 467)
    for n in [*range(last + 1, 700), 1000, 0x3FFFFFFF, 0x7FFFFFFF if machine == "aarch64" else 0x3FFFFFFE]:
        assert _run_bpf(prog, n, arch) == ENOSYS, n


def _prog_arch_numbers(machine):
    """The filter for ``machine``, its audit arch and the numbers of the argument-checked calls."""
    col = 0 if machine == "x86_64" else 1
    return S.seccomp_program(machine), S._AUDIT_ARCH[machine], {n: v[col] for n, v in S._SECCOMP_ARG_CHECKED.items()}


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_bpf_program_decisions_on_clone_personality_unshare(machine):
    prog, arch, nr = _prog_arch_numbers(machine)
    clone, persona = nr["clone"], nr["personality"]
    assert _run_bpf(prog, nr["clone3"], arch) == ENOSYS
    assert _run_bpf(prog, clone, arch, (SIGCHLD, 0, 0, 0, 0, 0)) == ALLOW  # fork
    assert _run_bpf(prog, clone, arch, (0x3D0F00, 0, 0, 0, 0, 0)) == ALLOW  # pthread_create's flags
    for flag in (CLONE_NEWUSER, CLONE_NEWNS, 0x20000000, 0x40000000, 0x08000000, 0x04000000, 0x02000000):
        assert _run_bpf(prog, clone, arch, (flag | SIGCHLD, 0, 0, 0, 0, 0)) == EPERM, hex(flag)
    assert _run_bpf(prog, persona, arch, (0,) * 6) == ALLOW
    assert _run_bpf(prog, persona, arch, (0xFFFFFFFF, 0, 0, 0, 0, 0)) == ALLOW
    for p in (READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE, 0x0008, 1):
        assert _run_bpf(prog, persona, arch, (p, 0, 0, 0, 0, 0)) == EPERM, hex(p)
    # unshare: exactly CLONE_NEWIPC (the worker's fresh IPC namespace), nothing else
    assert _run_bpf(prog, nr["unshare"], arch, (CLONE_NEWIPC, 0, 0, 0, 0, 0)) == ALLOW
    for flags in (0, CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWIPC | CLONE_NEWUSER, CLONE_NEWIPC | CLONE_NEWNS, 0x40000000):
        assert _run_bpf(prog, nr["unshare"], arch, (flags, 0, 0, 0, 0, 0)) == EPERM, hex(flags)


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_bpf_program_decisions_on_sockets(machine):
    prog, arch, nr = _prog_arch_numbers(machine)
    # socket: TCP and UDP only: AF_INET / AF_INET6, SOCK_STREAM / SOCK_DGRAM (flags masked off),
    # protocol 0, IPPROTO_TCP or IPPROTO_UDP; SOCK_PACKET (10), raw, MPTCP (262), UDP-Lite (136)... refused
    flags = 0x80000 | 0x800  # SOCK_CLOEXEC | SOCK_NONBLOCK
    for family in (0, 1, 2, 3, 4, 9, 10, 11, 16, 17, 38, 40, 44, 45, 0x10002):
        for typ in range(0, 16):
            for proto in (0, 1, 6, 17, 132, 136, 255, 262, 0x10006, 0x100000011):
                # the kernel takes int arguments: the low 32 bits (0x100000011 is UDP to it)
                ok = family in (2, 10) and typ in (1, 2) and proto & 0xFFFFFFFF in (0, 6, 17)
                for t in (typ, typ | flags):
                    got = _run_bpf(prog, nr["socket"], arch, (family, t, proto, 0, 0, 0))
                    assert got == (ALLOW if ok else EPERM), (family, hex(t), proto)
    assert _run_bpf(prog, nr["socket"], arch, (2, 10, 0, 0, 0, 0)) == EPERM  # AF_INET, SOCK_PACKET
    # socketpair: AF_UNIX stream or seqpacket (with or without NONBLOCK/CLOEXEC) only
    for typ in (1, 5, 1 | 0x80000, 5 | 0x800 | 0x80000):
        assert _run_bpf(prog, nr["socketpair"], arch, (1, typ, 0, 0, 0, 0)) == ALLOW, hex(typ)
    for family, typ in ((1, 2), (1, 2 | 0x80000), (1, 3), (1, 4), (2, 1), (10, 1), (40, 1), (16, 3)):
        assert _run_bpf(prog, nr["socketpair"], arch, (family, typ, 0, 0, 0, 0)) == EPERM, (family, typ)


def _header_numbers(path: str, pattern: str) -> dict[str, int]:
    with open(path) as f:
        return {m.group(1): int(m.group(2)) for m in re.finditer(pattern, f.read())}


def test_syscall_numbers_match_the_kernel_headers():
    """The worker's tables against the kernel's uapi headers where installed (linux-libc-dev), else
    against this file's own independently written numbers."""
    x86 = "/usr/include/x86_64-linux-gnu/asm/unistd_64.h"
    generic = "/usr/include/asm-generic/unistd.h"
    have_x86, have_generic = os.path.exists(x86), os.path.exists(generic)
    table = {**S._SECCOMP_DENY, **S._SECCOMP_ARG_CHECKED}
    hx = _header_numbers(x86, r"#define __NR_(\w+)\s+(\d+)") if have_x86 else {}
    hg = _header_numbers(generic, r"#define __NR(?:3264)?_(\w+)\s+(\d+)") if have_generic else {}
    checked = 0
    for name, (nx, na) in table.items():
        if have_x86:
            assert hx.get(name) == nx, (name, hx.get(name), nx)
            checked += 1
        if have_generic:
            assert hg.get(name) == na, (name, hg.get(name), na)
            checked += 1
    for machine, nrs in RAW.items():
        col = 0 if machine == "x86_64" else 1
        for name, nr in nrs.items():
            assert table[name][col] == nr, (machine, name)
    assert checked or not (have_x86 or have_generic)


# -- failing closed --------------------------------------------------------------------------------


def _worker_with_program(tmp_path, program_for) -> list[tuple]:
    """:func:`_worker_with_filter` with the filter ``program_for(machine)``."""
    return _worker_with_filter(tmp_path, {"program": program_for(os.uname().machine)})


def _worker_with_filter(tmp_path, seccomp_filter: dict | None) -> list[tuple]:
    """Run the real worker main loop in a forked child, its job's ``seccomp_filter`` (which the host
    builds) the one given, on a one-test job without namespaces; its result records."""
    from vpo.sandbox.host import _inputs, _memfd

    tests, blob = _inputs([TestInput()])
    job = {
        "program": "print('ran')\n",  # (a file outside its working directory: Landlock refuses)
        "prelude": "",
        "tests": tests,
        "inputs_fd": _memfd(blob),
        "scratch": str(tmp_path),
        "namespaces": False,
        "uid": None,
        "cgroup_procs": [],
        "seccomp": True,
        "seccomp_filter": seccomp_filter,
        "tmpfs_bytes": 1 << 20,
        "tmpfs_inodes": 64,
        "stop_after_timeouts": None,
        "limits": {
            "timeout_s": 5.0,
            "cpu_time_s": 5.0,
            "cpu_s": 6,
            "memory_bytes": 1 << 30,
            "file_bytes": 1 << 20,
            "nproc": 4096,
            "nofile": 64,
            "output_bytes": 1 << 20,
        },
    }
    jr, jw = os.pipe()
    rr, rw = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.dup2(jr, 0)
            os.close(jw)
            os.close(rr)
            W._worker_main(rw)
        finally:
            os._exit(0)
    os.close(jr)
    os.close(rw)
    os.write(jw, json.dumps(job).encode())
    os.close(jw)
    from vpo.sandbox.host import _read_records

    records, problem = _read_records(rr, time.monotonic() + 60, 1 << 24)
    os.close(rr)
    os.close(job["inputs_fd"])
    os.waitpid(pid, 0)
    assert problem is None, problem
    return records


def test_a_filter_the_kernel_refuses_fails_the_sandbox_closed(tmp_path):
    """The worker with a filter the kernel rejects (an invalid opcode) runs no test: the host turns its
    report into ``sandbox_error`` for every test, with a message naming the setting that turns the
    filter off. The same worker with the real filter runs the test."""
    lines = _worker_with_program(tmp_path, lambda machine: [(0xFFFF, 0, 0, 0)])
    res = Sandbox(SandboxConfig())._collect(lines, [TestInput()], 0.0, None, None, "", 0)
    assert [o.status for o in res.outcomes] == ["sandbox_error"]
    assert "refused the seccomp filter" in res.error and "SandboxConfig(seccomp=False)" in res.error, res.error
    assert not any(isinstance(m, dict) and "i" in m for m, _ in lines), lines  # the program never ran
    lines = _worker_with_program(tmp_path, S.seccomp_program)
    res = Sandbox(SandboxConfig())._collect(lines, [TestInput()], 0.0, None, None, "", 0)
    assert [o.status for o in res.outcomes] == ["ok"] and res.setup["seccomp"].startswith("filter:"), res
    assert res.outcomes[0].stdout == "ran\n"


def test_an_unknown_architecture_has_no_filter_and_says_so():
    with pytest.raises(
        OSError, match=r"no seccomp filter for the 'riscv64' architecture.*SandboxConfig\(seccomp=False\)"
    ):
        S.seccomp_program("riscv64")
    # what the host hands the worker then: the reason, which the worker's setup report gives
    assert re.search(r"no seccomp filter for the 'riscv64'", S.seccomp_filter("riscv64")["error"])


def test_a_worker_without_the_hosts_filter_runs_no_program(tmp_path):
    """The worker builds no filter of its own: a job with the host's reason instead of a filter (an
    unknown architecture), or with none, fails closed, every test a ``sandbox_error`` that says why."""
    for built, why in (
        (S.seccomp_filter("riscv64"), "no seccomp filter for the 'riscv64' architecture"),
        (None, "the job carries no seccomp filter"),
    ):
        lines = _worker_with_filter(tmp_path, built)
        res = Sandbox(SandboxConfig())._collect(lines, [TestInput()], 0.0, None, None, "", 0)
        assert [o.status for o in res.outcomes] == ["sandbox_error"] and why in res.error, res.error
        assert "SandboxConfig(seccomp=False)" in res.error or built is None, res.error
        assert not any(isinstance(m, dict) and "i" in m for m, _ in lines), lines  # the program never ran


def test_the_assembler_resolves_labels_and_refuses_what_it_cannot_encode():
    """Labels become relative forward offsets; a jump past 255 instructions, backwards, to an
    undefined label, or a label defined twice raises (never a silently wrong filter)."""
    prog = S._bpf_assemble(
        [
            S._bpf_load_syscall_nr(),
            S._bpf_syscall(7, "deny"),
            S._bpf_allow(),
            S._bpf_label("deny"),
            S._bpf_deny(errno.EPERM),
        ]
    )
    assert prog == [(0x20, 0, 0, 0), (0x15, 1, 0, 7), (0x06, 0, 0, ALLOW), (0x06, 0, 0, EPERM)]
    assert _run_bpf(prog, 7, 0) == EPERM and _run_bpf(prog, 8, 0) == ALLOW
    far = [S._bpf_load_syscall_nr(), S._bpf_syscall(1, "end")] + [S._bpf_allow()] * 256 + [S._bpf_label("end")]
    with pytest.raises(S.SeccompAssemblyError, match="out of range"):
        S._bpf_assemble(far + [S._bpf_allow()])
    assert len(S._bpf_assemble(far[:2] + [S._bpf_allow()] * 255 + far[-1:] + [S._bpf_allow()])) == 258
    with pytest.raises(S.SeccompAssemblyError, match="out of range"):  # backwards
        S._bpf_assemble([S._bpf_label("top"), S._bpf_load_syscall_nr(), S._bpf_jeq(1, "top"), S._bpf_allow()])
    with pytest.raises(S.SeccompAssemblyError, match="undefined label 'nowhere'"):
        S._bpf_assemble([S._bpf_load_syscall_nr(), S._bpf_jeq(1, "nowhere"), S._bpf_allow()])
    with pytest.raises(S.SeccompAssemblyError, match="defined twice"):
        S._bpf_assemble([S._bpf_label("a"), S._bpf_label("a"), S._bpf_allow()])
