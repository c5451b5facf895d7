"""The examples in vpo's docstrings run: every module under vpo/ whose source has a ``>>>`` is
imported and its doctests executed, one test per module.

A module that cannot be imported fails its test (never skips): an example nobody can run is an
example nobody checks. So does a module whose ``>>>`` no doctest finder sees (e.g. in a nested
function's docstring), since that example would silently never run.
"""

from __future__ import annotations

import doctest
import importlib
import io
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "vpo"
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = sorted(
    _module_name(p)
    for p in PACKAGE.rglob("*.py")
    if "__pycache__" not in p.parts and ">>>" in p.read_text(encoding="utf-8")
)


def test_the_package_has_doctests():
    assert "vpo.core.reference" in MODULES, MODULES


@pytest.mark.parametrize("module", MODULES)
def test_doctests(module):
    mod = importlib.import_module(module)  # an ImportError fails the test
    tests = [t for t in doctest.DocTestFinder().find(mod) if t.examples]
    assert tests, f"{module} has '>>>' but no docstring example that doctest finds"
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    report = io.StringIO()
    for t in tests:
        runner.run(t, out=report.write)
    failed, attempted = runner.failures, runner.tries
    assert failed == 0, f"{failed} of {attempted} doctest examples in {module} failed:\n{report.getvalue()}"
