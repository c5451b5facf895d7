"""The sandbox's seccomp filter, built on the host: classic BPF written by hand (no libseccomp), as
data (``(code, jt, jf, k)`` instructions) the host hands to the worker in its job
(:func:`seccomp_filter`); the worker (:mod:`vpo.sandbox.worker`) only installs it, so the program
that builds it never runs beside untrusted code. What the filter refuses and why: docs/sandbox.md,
"The seccomp filter"."""

from __future__ import annotations

import errno

from vpo.sandbox.worker import CLONE_NEWIPC

_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
"""The architectures the filter knows; a system call made under any other (i386 via ``int 0x80``,
x32 on x86_64) kills the process."""
_X32_SYSCALL_BIT = 0x40000000
_SECCOMP_DENY: dict[str, tuple[int | None, int | None]] = {
    # name: (x86_64 number, aarch64 number); None where the call does not exist. Answered EPERM.
    # namespaces and mounts: a program must not build a new view of the system
    "setns": (308, 268),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "chroot": (161, 51),
    "mount_setattr": (442, 442),
    "move_mount": (429, 429),
    "open_tree": (428, 428),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    # reaching into other processes
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "pidfd_getfd": (438, 438),
    "process_madvise": (440, 440),
    # large kernel attack surface that no test program needs
    "keyctl": (250, 219),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "bpf": (321, 280),
    "perf_event_open": (298, 241),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "userfaultfd": (323, 282),
    "open_by_handle_at": (304, 265),
    "name_to_handle_at": (303, 264),
    "lookup_dcookie": (212, 18),
    "fanotify_init": (300, 262),
    # watching host directories for activity (who reads or writes what, when): a side channel
    "inotify_init": (253, None),
    "inotify_init1": (294, 26),
    "inotify_add_watch": (254, 27),
    # POSIX message queues live in the IPC namespace and cannot be listed without a mount: refused,
    # so that SysV IPC (seen in /proc/sysvipc) is all a test can leave there (_fresh_ipc_if_used)
    "mq_open": (240, 180),
    "modify_ldt": (154, None),
    "uselib": (134, None),
    # the machine itself: modules, kexec, reboot, swap, clocks, accounting, kernel log
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "create_module": (174, None),
    "query_module": (178, None),
    "get_kernel_syms": (177, None),
    "reboot": (169, 142),
    "swapon": (167, 224),
    "swapoff": (168, 225),
    "syslog": (103, 116),
    "acct": (163, 89),
    "quotactl": (179, 60),
    "quotactl_fd": (443, 443),
    "nfsservctl": (180, 42),
    "_sysctl": (156, None),
    "iopl": (172, None),
    "ioperm": (173, None),
    "settimeofday": (164, 170),
    "clock_settime": (227, 112),
    "adjtimex": (159, 171),
    "clock_adjtime": (305, 266),
    "vhangup": (153, 58),
    "sethostname": (170, 161),
    "setdomainname": (171, 162),
}
_SECCOMP_DENY_RLIMITS: dict[str, tuple[int | None, int | None]] = {
    # isolation="rlimits" only (no read-only mounts): Landlock handles writes to file contents and
    # the tree, not metadata, so these would change host files the uid may write (world-writable
    # ones, /dev/null and /dev/ptmx included; as non-root every file of the user). Answered EPERM, in
    # the working directory too (a program there rarely sets timestamps or extended attributes).
    # chmod/chown stay allowed: the worker itself needs them (the wipe, handing over the directory).
    "utime": (132, None),
    "utimes": (235, None),
    "futimesat": (261, None),
    "utimensat": (280, 88),  # utimensat(fd, NULL, ...) is futimens too
    "setxattr": (188, 5),
    "lsetxattr": (189, 6),
    "fsetxattr": (190, 7),
    "removexattr": (197, 14),
    "lremovexattr": (198, 15),
    "fremovexattr": (199, 16),
    "setxattrat": (463, 463),
    "removexattrat": (466, 466),
}
_SECCOMP_ARG_CHECKED = {
    "clone": (56, 220),
    "clone3": (435, 435),
    "personality": (135, 92),
    "unshare": (272, 97),
    "socket": (41, 198),
    "socketpair": (53, 199),
}
_SECCOMP_LAST_REVIEWED = 466
"""The highest system call number whose call was reviewed for this filter (``removexattrat``, Linux
6.13; the same on both architectures, whose tables share numbers from 424 on). Every higher number
answers ENOSYS, as on a kernel without the call (``open_tree_attr``, 467, is a mount call; the next
kernel's calls will be refused until someone reviews them and raises this number)."""
_AF_UNIX, _AF_INET, _AF_INET6 = 1, 2, 10
_SOCK_TYPE_MASK, _SOCK_STREAM, _SOCK_DGRAM, _SOCK_SEQPACKET = 0xF, 1, 2, 5
_IPPROTO_TCP, _IPPROTO_UDP = 6, 17
"""``socket`` is allowed for TCP and UDP only, inside the empty network namespace: family AF_INET or
AF_INET6, type SOCK_STREAM or SOCK_DGRAM (the SOCK_NONBLOCK / SOCK_CLOEXEC bits masked off; the kernel
refuses any other bit itself), protocol 0, IPPROTO_TCP or IPPROTO_UDP. Everything else gets EPERM:
AF_UNIX (which reaches host services listening on a path: read-only mounts do not stop ``connect``),
AF_VSOCK, AF_NETLINK, AF_PACKET and every other family; SOCK_RAW, SOCK_PACKET (an AF_INET type that
reaches the packet family) and SOCK_SEQPACKET; MPTCP (262), UDP-Lite (136), SCTP, ICMP "ping" sockets
and every other protocol. ``socketpair`` is allowed for AF_UNIX stream and seqpacket pairs (asyncio,
multiprocessing); a datagram pair could be re-connected or ``sendto`` any path, so it gets EPERM
too."""
_CLONE_NEW_FLAGS = 0x7E020000
"""CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET: ``clone`` with any of them
gets EPERM. ``clone3`` passes its flags in memory a filter cannot read, so it gets ENOSYS and libc
falls back to ``clone``."""
_PERSONA_ALLOWED = (0, 0xFFFFFFFF)  # PER_LINUX, and the "query only" value
_SECCOMP_RET_KILL_PROCESS, _SECCOMP_RET_ERRNO, _SECCOMP_RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
_BPF_LD_W_ABS, _BPF_JEQ_K, _BPF_JGE_K, _BPF_JSET_K, _BPF_RET_K, _BPF_AND_K = 0x20, 0x15, 0x35, 0x45, 0x06, 0x54
_SECCOMP_NR, _SECCOMP_ARCH, _SECCOMP_ARG0_LO = 0, 4, 16  # offsets in struct seccomp_data (little-endian)


# The program is written with named pieces, as the kernel's samples/seccomp/bpf-helper.h names them
# (LOAD_SYSCALL_NR, a jump to a LABEL, ALLOW, DENY...), and assembled by _bpf_assemble, which resolves
# the labels into the relative jump offsets of classic BPF and refuses what it cannot encode.


def _bpf_label(name: str) -> tuple:
    """Marks the position the next instruction will have; jumps name it."""
    return ("label", name)


def _bpf_load(offset: int) -> tuple:
    """Load the 32-bit word at ``offset`` in ``struct seccomp_data`` into the accumulator."""
    return ("ld", offset)


def _bpf_load_arch() -> tuple:
    return _bpf_load(_SECCOMP_ARCH)


def _bpf_load_syscall_nr() -> tuple:
    return _bpf_load(_SECCOMP_NR)


def _bpf_load_arg_lo(index: int) -> tuple:
    """The low 32 bits of system call argument ``index`` (little-endian layout)."""
    return _bpf_load(_SECCOMP_ARG0_LO + 8 * index)


def _bpf_jump(op: int, k: int, then: str | None, otherwise: str | None = None) -> tuple:
    """Compare the accumulator with ``k`` (``op``: JEQ, JGE or JSET) and go to label ``then`` if true,
    label ``otherwise`` if false; ``None`` falls through to the next instruction."""
    return ("jump", op, k, then, otherwise)


def _bpf_jeq(k: int, then: str | None, otherwise: str | None = None) -> tuple:
    return _bpf_jump(_BPF_JEQ_K, k, then, otherwise)


def _bpf_jge(k: int, then: str | None, otherwise: str | None = None) -> tuple:
    return _bpf_jump(_BPF_JGE_K, k, then, otherwise)


def _bpf_jset(k: int, then: str | None, otherwise: str | None = None) -> tuple:
    return _bpf_jump(_BPF_JSET_K, k, then, otherwise)


def _bpf_syscall(nr: int, then: str) -> tuple:
    """bpf-helper.h's SYSCALL: with the syscall number loaded, go to ``then`` if it is ``nr``."""
    return _bpf_jeq(nr, then)


def _bpf_and(mask: int) -> tuple:
    """Accumulator &= ``mask``."""
    return ("and", mask)


def _bpf_ret(action: int) -> tuple:
    return ("ret", action)


def _bpf_allow() -> tuple:
    return _bpf_ret(_SECCOMP_RET_ALLOW)


def _bpf_deny(err: int) -> tuple:
    """Refuse the call: it returns -1 with ``errno`` set to ``err``."""
    return _bpf_ret(_SECCOMP_RET_ERRNO | err)


def _bpf_kill() -> tuple:
    return _bpf_ret(_SECCOMP_RET_KILL_PROCESS)


class SeccompAssemblyError(ValueError):
    """The filter program cannot be encoded (a jump past 255 instructions, a missing or repeated
    label, an unknown piece): the worker then runs no program."""


def _bpf_assemble(pieces: list[tuple]) -> list[tuple[int, int, int, int]]:
    """Pieces -> classic-BPF ``(code, jt, jf, k)`` instructions, labels resolved to jump offsets."""
    labels = _bpf_labels(pieces)
    prog: list[tuple[int, int, int, int]] = []
    for piece in pieces:
        kind, at = piece[0], len(prog)
        if kind == "label":
            continue
        if kind == "ld":
            prog.append((_BPF_LD_W_ABS, 0, 0, piece[1]))
        elif kind == "ret":
            prog.append((_BPF_RET_K, 0, 0, piece[1]))
        elif kind == "and":
            prog.append((_BPF_AND_K, 0, 0, piece[1]))
        elif kind == "jump":
            _, op, k, then, otherwise = piece
            prog.append((op, _bpf_offset(labels, then, at), _bpf_offset(labels, otherwise, at), k))
        else:
            raise SeccompAssemblyError(f"seccomp program: unknown piece {piece!r}")
    return prog


def _bpf_labels(pieces: list[tuple]) -> dict[str, int]:
    """Each label's position: the index of the instruction that follows it."""
    labels: dict[str, int] = {}
    n = 0
    for piece in pieces:
        if piece[0] == "label":
            if piece[1] in labels:
                raise SeccompAssemblyError(f"seccomp program: label {piece[1]!r} defined twice")
            labels[piece[1]] = n
        else:
            n += 1
    return labels


def _bpf_offset(labels: dict[str, int], target: str | None, at: int) -> int:
    """The jump offset from instruction ``at`` to label ``target`` (None: the next instruction)."""
    if target is None:
        return 0
    if target not in labels:
        raise SeccompAssemblyError(f"seccomp program: jump to undefined label {target!r}")
    off = labels[target] - at - 1
    if not 0 <= off <= 255:  # classic BPF jumps only forward, by at most 255 instructions
        raise SeccompAssemblyError(
            f"seccomp program: jump from instruction {at} to {target!r} ({off:+d}) is out of range"
        )
    return off


def seccomp_program(machine: str, rlimits: bool = False) -> list[tuple[int, int, int, int]]:
    """The filter for ``machine`` (``os.uname().machine``) as ``(code, jt, jf, k)`` instructions:
    foreign architecture (and x32) -> kill; numbers past :data:`_SECCOMP_LAST_REVIEWED` -> ENOSYS;
    the deny-list -> EPERM (``rlimits``: :data:`_SECCOMP_DENY_RLIMITS` too, the calls that change a
    host file's timestamps or extended attributes); ``clone`` with namespace flags -> EPERM; ``clone3`` -> ENOSYS;
    ``personality`` other than 0 / 0xffffffff -> EPERM; ``unshare`` other than CLONE_NEWIPC -> EPERM;
    ``socket`` other than TCP or UDP over AF_INET / AF_INET6 -> EPERM; ``socketpair`` other than an AF_UNIX stream or
    seqpacket pair -> EPERM; all else allowed."""
    if machine not in _AUDIT_ARCH:
        raise OSError(
            errno.ENOSYS,
            f"the sandbox has no seccomp filter for the {machine!r} architecture "
            f"(it knows {', '.join(_AUDIT_ARCH)}); no program runs without it unless "
            "SandboxConfig(seccomp=False) says so (docs/sandbox.md)",
        )
    col = 0 if machine == "x86_64" else 1
    nr = {name: v[col] for name, v in _SECCOMP_ARG_CHECKED.items()}
    deny = {**_SECCOMP_DENY, **(_SECCOMP_DENY_RLIMITS if rlimits else {})}
    denied = sorted({v[col] for v in deny.values()} - {None})
    pieces = [
        _bpf_load_arch(),
        _bpf_jeq(_AUDIT_ARCH[machine], "native"),
        _bpf_kill(),
        _bpf_label("native"),
        _bpf_load_syscall_nr(),
    ]
    if machine == "x86_64":  # x32 calls carry the x86_64 audit arch: tell them apart by number
        pieces.append(_bpf_jge(_X32_SYSCALL_BIT, "kill"))
    pieces.append(_bpf_jge(_SECCOMP_LAST_REVIEWED + 1, "enosys"))  # not reviewed yet: as if absent
    pieces += [_bpf_syscall(n, "eperm") for n in denied]
    pieces += [
        _bpf_syscall(nr["clone"], "clone"),
        _bpf_syscall(nr["clone3"], "enosys"),
        _bpf_syscall(nr["personality"], "personality"),
        _bpf_syscall(nr["unshare"], "unshare"),
        _bpf_syscall(nr["socket"], "socket"),
        _bpf_syscall(nr["socketpair"], "socketpair"),
        _bpf_allow(),
        _bpf_label("clone"),  # plain fork and threads pass, any CLONE_NEW* flag does not
        _bpf_load_arg_lo(0),
        _bpf_jset(_CLONE_NEW_FLAGS, "eperm", "allow"),
        _bpf_label("personality"),
        _bpf_load_arg_lo(0),
        _bpf_jeq(_PERSONA_ALLOWED[0], "allow"),
        _bpf_jeq(_PERSONA_ALLOWED[1], "allow", "eperm"),
        _bpf_label("unshare"),
        _bpf_load_arg_lo(0),
        _bpf_jeq(CLONE_NEWIPC, "allow", "eperm"),
        _bpf_label("socket"),  # TCP and UDP over IP only (the network namespace is empty)
        _bpf_load_arg_lo(0),  # the family
        _bpf_jeq(_AF_INET, "socket_type"),
        _bpf_jeq(_AF_INET6, "socket_type", "eperm"),
        _bpf_label("socket_type"),
        _bpf_load_arg_lo(1),
        _bpf_and(_SOCK_TYPE_MASK),  # without SOCK_NONBLOCK / SOCK_CLOEXEC
        _bpf_jeq(_SOCK_STREAM, "socket_protocol"),
        _bpf_jeq(_SOCK_DGRAM, "socket_protocol", "eperm"),
        _bpf_label("socket_protocol"),
        _bpf_load_arg_lo(2),
        _bpf_jeq(0, "allow"),
        _bpf_jeq(_IPPROTO_TCP, "allow"),
        _bpf_jeq(_IPPROTO_UDP, "allow", "eperm"),
        _bpf_label("socketpair"),  # an unnamed, connected AF_UNIX stream or seqpacket pair only
        _bpf_load_arg_lo(0),
        _bpf_jeq(_AF_UNIX, None, "eperm"),
        _bpf_load_arg_lo(1),
        _bpf_and(_SOCK_TYPE_MASK),  # without SOCK_NONBLOCK / SOCK_CLOEXEC
        _bpf_jeq(_SOCK_STREAM, "allow"),
        _bpf_jeq(_SOCK_SEQPACKET, "allow", "eperm"),
        _bpf_label("eperm"),
        _bpf_deny(errno.EPERM),
        _bpf_label("enosys"),
        _bpf_deny(errno.ENOSYS),
        _bpf_label("allow"),
        _bpf_allow(),
        _bpf_label("kill"),
        _bpf_kill(),
    ]
    return _bpf_assemble(pieces)


def seccomp_filter(machine: str, rlimits: bool = False) -> dict:
    """What the host puts in the worker's job (``seccomp_filter``): ``{"program": instructions}`` for
    ``machine`` (``os.uname().machine``, the kernel the worker runs on; ``rlimits``: for
    ``isolation="rlimits"``), or ``{"error": why}`` when it cannot be built; the worker then fails
    closed with that reason, as when it built the filter itself."""
    try:
        return {"program": seccomp_program(machine, rlimits)}
    except (OSError, ValueError) as e:  # an unknown architecture, a program the assembler refuses
        return {"error": str(e)}
