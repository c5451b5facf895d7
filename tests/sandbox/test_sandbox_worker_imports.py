"""The sandbox worker (vpo/sandbox/worker.py) imports only the standard library, never vpo: it runs
by path in a scrubbed ``python -I -S`` interpreter, where site-packages (and so vpo) may be absent,
next to hostile code. Checked twice: statically (every import in the file, at any depth) and by
loading the file in such an interpreter. Also: the deprecated ``vpo.tasks.sandbox`` alias still
gives the same objects as ``vpo.sandbox``.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import warnings
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


def test_deprecated_alias_still_works():
    sys.modules.pop("vpo.tasks.sandbox", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        alias = importlib.import_module("vpo.tasks.sandbox")
    assert any(issubclass(w.category, DeprecationWarning) and "vpo.sandbox" in str(w.message) for w in caught)
    for name in vpo.sandbox.__all__:
        assert getattr(alias, name) is getattr(vpo.sandbox, name), name
    assert {"Sandbox", "SandboxConfig", "TestInput", "TestOutcome", "ProgramResult", "sandbox_capabilities"} <= set(
        vpo.sandbox.__all__
    )
