"""The sandbox worker (vpo/sandbox/worker.py) imports only the standard library, never vpo: it runs
by path in a scrubbed ``python -I -S`` interpreter, where site-packages (and so vpo) may be absent,
next to hostile code. Checked twice: statically (every import in the file, at any depth) and by
loading the file in such an interpreter. Also: ``vpo.sandbox`` is the sandbox's one module name.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

import vpo.sandbox
from vpo.sandbox.host import WORKER_PATH

WORKER = Path(vpo.sandbox.__file__).resolve().parent / "worker.py"


def worker_imports(source: str) -> list[tuple[int, str]]:
    """``(line, top-level module)`` of every import in ``source``; a relative import shows as ``.name``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name.split(".")[0]) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            out.append((node.lineno, "." * node.level + (node.module or "").split(".")[0]))
    return out


def non_stdlib(source: str) -> list[str]:
    allowed = set(sys.stdlib_module_names) | {"__future__"}
    return [f"line {line}: {name}" for line, name in worker_imports(source) if name not in allowed]


def test_the_launcher_runs_this_file():
    assert Path(WORKER_PATH) == WORKER and WORKER.is_file()


def test_worker_imports_only_the_stdlib():
    imports = worker_imports(WORKER.read_text(encoding="utf-8"))
    assert {"os", "json", "ctypes", "resource"} <= {name for _, name in imports}  # it sees the lazy ones too
    assert non_stdlib(WORKER.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(
    "source",
    [
        "import numpy\n",
        "def f():\n    from vpo.errors import VPOError\n",  # lazy imports count too
        "from . import host\n",
        "import vpo.sandbox\n",
    ],
)
def test_the_check_flags_a_non_stdlib_import(source):
    assert non_stdlib(source)


@pytest.mark.parametrize("flags", [["-I", "-S"], ["-I"]], ids=["stdlib-only", "site_packages"])
def test_worker_loads_without_vpo(flags):
    """Load the file as the launcher would (``-S`` unless ``SandboxConfig.site_packages``) but without
    running the worker, and list the vpo modules it pulled in. With ``-I -S`` vpo is not importable,
    so an import of it would fail; with ``-I`` alone it is, so it would show up."""
    code = (
        "import runpy, sys\n"
        f"runpy.run_path({str(WORKER)!r}, run_name='not_main')\n"
        "print(sorted(m for m in sys.modules if m == 'vpo' or m.startswith('vpo.')))\n"
    )
    p = subprocess.run([sys.executable, *flags, "-c", code], capture_output=True, text=True, timeout=60, cwd="/")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"


def test_the_sandbox_has_one_home():
    """``vpo.sandbox`` is the sandbox's only module name (the old ``vpo.tasks.sandbox`` alias is gone)."""
    assert importlib.util.find_spec("vpo.tasks.sandbox") is None
    assert {"Sandbox", "SandboxConfig", "TestInput", "TestOutcome", "ProgramResult", "sandbox_capabilities"} <= set(
        vpo.sandbox.__all__
    )
