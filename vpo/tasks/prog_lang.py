"""The tiny expression language of the ``prog`` task and its safe interpreter (parse -> AST -> evaluate).

A program is one integer expression in ``x``, short enough for a character-level model to write:
``x<5?2*x+1:3*x-2``. Tokens: ``x``, decimal integers (at most 9 digits), ``+ - * / %`` (``/`` is
floor division, ``//`` is accepted as the same operator; ``%`` takes the divisor's sign, as in
Python), ``< > =`` (``==`` too; 1 when true, 0 otherwise, no chaining), the conditional ``c?a:b``
(``a`` when ``c`` is non-zero), ``min(a,b) max(a,b) abs(a)``, unary ``-`` and parentheses;
whitespace is ignored. docs/prog_task.md has the grammar and precedences.

Model text is never given to Python's ``eval``/``exec``. The parser is recursive descent with a
capped nesting depth and a capped AST depth, so it cannot exhaust the stack; the evaluator counts
steps (one per node visited) against a budget and fails when a value leaves ``[-VALUE_BOUND,
VALUE_BOUND]``. With no loops in the language, every evaluation ends after at most one step per
node. :func:`run_program` is the never-raising entry point; :func:`parse_program` and
:func:`evaluate` raise :class:`ProgramError` (a ``ValueError``) on bad programs.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from typing import Iterable

from vpo.errors import VPOError

MAX_PROGRAM_CHARS = 200
"""Longer texts are rejected before tokenizing (answers of the task are far shorter)."""
MAX_NEST = 16
"""Nesting depth of parentheses, function arguments and conditional branches the parser accepts."""
MAX_DEPTH = 48
"""Depth of the AST the parser accepts (left-associative chains such as ``1+1+...`` count too)."""
MAX_DIGITS = 9
VALUE_BOUND = 10**9
"""Every literal, intermediate and final value must lie in ``[-VALUE_BOUND, VALUE_BOUND]``."""
DEFAULT_MAX_STEPS = 1000
"""Default step budget of one evaluation (a program of :data:`MAX_PROGRAM_CHARS` has fewer nodes)."""

FUNCTIONS = {"min": 2, "max": 2, "abs": 1}
_BINARY = {"+": 2, "-": 2, "*": 3, "/": 3, "%": 3, "<": 1, ">": 1, "=": 1}
"""Binary operators and their precedence (the conditional is 0, unary minus 4)."""
_TOKEN = re.compile(r"\s*(?:([0-9]+)|(min|max|abs|x)|(//|==|[-+*/%<>=?:(),]))")


class ProgramError(VPOError, ValueError):
    """A program that does not parse, or fails while it runs (the message says which and why)."""


class Node:
    """An AST node: ``op`` is ``"x"``, ``"num"`` (``value``), ``"neg"``, a binary operator, ``"?"``
    (condition, then, else) or a function name; ``kids`` are the operands. Compared by structure."""

    __slots__ = ("op", "kids", "value", "depth")

    def __init__(self, op: str, kids: tuple[Node, ...] = (), value: int = 0) -> None:
        self.op, self.kids, self.value = op, kids, value
        self.depth = 1 + max((k.depth for k in kids), default=0)
        if self.depth > MAX_DEPTH:
            raise ProgramError(f"syntax: expression nested deeper than {MAX_DEPTH} levels")

    def key(self) -> tuple:
        return (self.op, self.value, tuple(k.key() for k in self.kids))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Node) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    def __repr__(self) -> str:
        return f"Node({render(self)!r})"

    @property
    def size(self) -> int:
        """Number of nodes."""
        return 1 + sum(k.size for k in self.kids)


def _tokenize(text: str) -> list[str]:
    out, pos, n = [], 0, len(text)
    while pos < n:
        m = _TOKEN.match(text, pos)
        if m is None:
            rest = text[pos:].lstrip()
            if not rest:
                break
            raise ProgramError(f"syntax: unexpected character {rest[0]!r} at {n - len(rest)}")
        num, word, op = m.groups()
        if num is not None and len(num.lstrip("0")) > MAX_DIGITS:
            raise ProgramError(f"syntax: number {num[:12]}... longer than {MAX_DIGITS} digits")
        out.append(num or word or {"//": "/", "==": "="}.get(op, op))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, tokens: list[str]) -> None:
        self.toks, self.i, self.nest = tokens, 0, 0

    def peek(self) -> str | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, want: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (want is not None and tok != want):
            where = "the end" if tok is None else f"{tok!r}"
            raise ProgramError(f"syntax: expected {want or 'more'} at token {self.i}, found {where}")
        self.i += 1
        return tok

    def nested(self) -> Node:
        self.nest += 1
        if self.nest > MAX_NEST:
            raise ProgramError(f"syntax: more than {MAX_NEST} nested levels")
        node = self.expr()
        self.nest -= 1
        return node

    def expr(self) -> Node:  # cond := binary(1) ['?' expr ':' expr]   (right-associative)
        cond = self.binary(1)
        if self.peek() != "?":
            return cond
        self.take("?")
        then = self.nested()
        self.take(":")
        return Node("?", (cond, then, self.nested()))

    def binary(self, level: int) -> Node:  # levels 1 (compare, no chaining), 2 (+ -), 3 (* / %)
        if level > 3:
            return self.unary()
        left = self.binary(level + 1)
        while (op := self.peek()) is not None and _BINARY.get(op) == level:
            self.take()
            left = Node(op, (left, self.binary(level + 1)))
            if level == 1:
                break
        return left

    def unary(self) -> Node:
        signs = 0
        while self.peek() == "-":
            self.take()
            signs += 1
        node = self.atom()
        if signs % 2 == 0:
            return node
        if node.op == "num":  # fold a negative literal: "-3" is the number -3
            return Node("num", value=-node.value)
        return Node("neg", (node,))

    def atom(self) -> Node:
        tok = self.take()
        if tok == "x":
            return Node("x")
        if tok.isdigit():
            return Node("num", value=int(tok))
        if tok == "(":
            node = self.nested()
            self.take(")")
            return node
        if tok in FUNCTIONS:
            self.take("(")
            args = [self.nested()]
            for _ in range(FUNCTIONS[tok] - 1):
                self.take(",")
                args.append(self.nested())
            self.take(")")
            return Node(tok, tuple(args))
        raise ProgramError(f"syntax: unexpected {tok!r} at token {self.i - 1}")


def parse_program(text: str) -> Node:
    """The AST of ``text``; raises :class:`ProgramError` when it is not one complete expression.

    >>> render(parse_program(" x < 5 ? 2*x+1 : (3*x) - 2 "))
    'x<5?2*x+1:3*x-2'
    """
    if not isinstance(text, str):
        raise ProgramError(f"syntax: a program is a string, not {type(text).__name__}")
    if len(text) > MAX_PROGRAM_CHARS:
        raise ProgramError(f"syntax: program longer than {MAX_PROGRAM_CHARS} characters")
    toks = _tokenize(text)
    if not toks:
        raise ProgramError("syntax: empty program")
    p = _Parser(toks)
    node = p.expr()
    if p.i != len(toks):
        raise ProgramError(f"syntax: unexpected {toks[p.i]!r} at token {p.i} after a complete expression")
    return node


def _checked(v: int) -> int:
    if -VALUE_BOUND <= v <= VALUE_BOUND:
        return v
    raise ProgramError(f"runtime: value out of bounds (|v| > {VALUE_BOUND})")


class _Evaluator:
    def __init__(self, x: int, max_steps: int) -> None:
        self.x, self.left = x, max_steps

    def run(self, node: Node) -> int:  # recursion depth <= MAX_DEPTH (checked when the AST is built)
        self.left -= 1
        if self.left < 0:
            raise ProgramError("runtime: step budget exhausted")
        op, kids = node.op, node.kids
        if op == "num":
            return _checked(node.value)
        if op == "x":
            return self.x
        if op == "?":
            return self.run(kids[1]) if self.run(kids[0]) != 0 else self.run(kids[2])
        vals = [self.run(k) for k in kids]
        return _checked(_apply(op, vals))


_OPS = {
    "neg": operator.neg,
    "abs": abs,
    "min": min,
    "max": max,
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.floordiv,
    "%": operator.mod,
    "<": lambda a, b: int(a < b),
    ">": lambda a, b: int(a > b),
    "=": lambda a, b: int(a == b),
}


def _apply(op: str, v: list[int]) -> int:
    if op in ("/", "%") and v[1] == 0:
        raise ProgramError(f"runtime: {'division' if op == '/' else 'modulo'} by zero")
    return _OPS[op](*v)


def evaluate(node: Node, x: int, *, max_steps: int = DEFAULT_MAX_STEPS) -> int:
    """The value of the program ``node`` at input ``x``; raises :class:`ProgramError` on a runtime
    failure (division by zero, a value out of bounds, the step budget exhausted).

    >>> evaluate(parse_program("x<5?2*x+1:3*x-2"), 7)
    19
    """
    return _Evaluator(_checked(int(x)), int(max_steps)).run(node)


@dataclass(frozen=True)
class RunResult:
    """What a program did on each input: ``outputs`` (an int, or None where it failed), ``errors``
    (the failure message per input, None where it ran), and the parsed ``program`` (None when it
    does not parse: then every output is None and every error is the syntax error)."""

    outputs: tuple[int | None, ...]
    errors: tuple[str | None, ...]
    program: Node | None

    @property
    def ok(self) -> bool:
        return self.program is not None and all(e is None for e in self.errors)


def run_program(text, inputs: Iterable[int], *, max_steps: int = DEFAULT_MAX_STEPS) -> RunResult:
    """Parse ``text`` once and evaluate it at each input. Never raises on any ``text``.

    >>> run_program("8/(x-2)", [0, 2, 4]).outputs
    (-4, None, 4)
    >>> run_program("x+", [1]).errors
    ('syntax: expected more at token 2, found the end',)
    """
    xs = list(inputs)
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    try:
        node = parse_program(text)
    except ProgramError as e:
        return RunResult((None,) * len(xs), (str(e),) * len(xs), None)
    except RecursionError:  # unreachable with the caps above; kept so that no input can raise
        return RunResult((None,) * len(xs), ("syntax: too deeply nested",) * len(xs), None)
    outs: list[int | None] = []
    errs: list[str | None] = []
    for x in xs:
        try:
            outs.append(evaluate(node, x, max_steps=max_steps))
            errs.append(None)
        except (ProgramError, RecursionError) as e:
            outs.append(None)
            errs.append(str(e) if isinstance(e, ProgramError) else "runtime: too deeply nested")
    return RunResult(tuple(outs), tuple(errs), node)


# -------------------------------------------------------------------------------------------------
# rendering: the shortest text that parses back to the same AST (the canonical form of an answer)
# -------------------------------------------------------------------------------------------------


def _prec(node: Node) -> int:
    if node.op == "?":
        return 0
    if node.op in _BINARY:
        return _BINARY[node.op]
    if node.op == "neg" or (node.op == "num" and node.value < 0):
        return 4
    return 5


def render(node: Node) -> str:
    """Compact text of ``node`` with only the parentheses its structure needs:
    ``parse_program(render(n)) == n`` for every AST the parser builds.

    >>> render(parse_program("((x))-(1-x)*(-(2))"))
    'x-(1-x)*-2'
    """
    op, kids = node.op, node.kids
    if op == "x":
        return "x"
    if op == "num":
        return str(node.value)
    if op in FUNCTIONS:
        return f"{op}({','.join(render(k) for k in kids)})"
    if op == "neg":  # "--x" would parse as x: a negated negation keeps its parentheses
        inner = kids[0]
        return "-" + (f"({render(inner)})" if _prec(inner) == 4 else _wrap(inner, 4))
    if op == "?":
        return f"{_wrap(kids[0], 1)}?{render(kids[1])}:{render(kids[2])}"
    p = _BINARY[op]
    # left-associative: the left operand may share the level, the right one may not; a comparison
    # takes neither (no chaining)
    left = _wrap(kids[0], p + 1 if p == 1 else p)
    return f"{left}{op}{_wrap(kids[1], p + 1)}"


def _wrap(node: Node, min_prec: int) -> str:
    s = render(node)
    return s if _prec(node) >= min_prec else f"({s})"


__all__ = [
    "DEFAULT_MAX_STEPS",
    "FUNCTIONS",
    "MAX_DEPTH",
    "MAX_NEST",
    "MAX_PROGRAM_CHARS",
    "Node",
    "ProgramError",
    "RunResult",
    "VALUE_BOUND",
    "evaluate",
    "parse_program",
    "render",
    "run_program",
]
