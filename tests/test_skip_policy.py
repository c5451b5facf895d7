"""The CI skip policy (tests/expected_skips.py), run for real: pytest in a subprocess on a tiny
synthetic test file with the policy's hooks active. A machine without namespaces (the capability
forced off, no opt-out) fails under CI=true with a message naming what was not tested; the opt-out
makes it pass and still says what was not tested; an unexpected skip (a broken install) fails CI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent

CONFTEST = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
from expected_skips import SkipPolicy

def pytest_configure(config):
    config.pluginmanager.register(SkipPolicy(), "vpo-skip-policy")
"""

SYNTHETIC = """
import pytest
from expected_skips import needs

# the real sandbox capability would be probed here; the run forces it off
needs_ns = needs("namespaces", True, "Linux namespaces unavailable here")

@needs_ns
def test_hostile_program_is_contained():
    pass

def test_unrelated():
    pass

def test_optional_dependency():
    pytest.importorskip("a_module_that_is_not_installed_vpo")
"""


def _run(tmp_path, env_extra: dict, select: str) -> subprocess.CompletedProcess:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_synthetic.py").write_text(SYNTHETIC)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CI", "VPO_CI_ALLOW_MISSING", "VPO_TEST_FORCE_MISSING", "PYTEST_ADDOPTS")
    }
    env.update(env_extra)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", "-k", select, str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_ci_without_namespaces_fails_and_names_what_was_not_tested(tmp_path):
    r = _run(tmp_path, {"CI": "true", "VPO_TEST_FORCE_MISSING": "namespaces"}, "not optional")
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "CI FAILS: NOT TESTED" in out
    assert "missing capability 'namespaces'" in out and "test_hostile_program_is_contained was not tested" in out
    assert "VPO_CI_ALLOW_MISSING=namespaces" in out  # says how to opt out
    assert "1 passed" in out  # the rest still ran


def test_the_opt_out_passes_and_still_lists_what_was_not_tested(tmp_path):
    r = _run(
        tmp_path,
        {"CI": "true", "VPO_TEST_FORCE_MISSING": "namespaces", "VPO_CI_ALLOW_MISSING": "cgroups,namespaces"},
        "not optional",
    )
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "NOT TESTED (allowed skips)" in out and "test_hostile_program_is_contained: [missing:namespaces]" in out


def test_outside_ci_a_missing_capability_is_an_ordinary_skip(tmp_path):
    r = _run(tmp_path, {"VPO_TEST_FORCE_MISSING": "namespaces"}, "not optional")
    assert r.returncode == 0 and "1 skipped" in r.stdout, r.stdout


def test_an_unexpected_skip_fails_ci(tmp_path):
    """importorskip of something that should be installed (a broken install) is not a skip in CI."""
    r = _run(tmp_path, {"CI": "true"}, "optional")
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "unexpected skip under CI=true" in out and "a_module_that_is_not_installed_vpo" in out


def test_a_skipped_module_fails_ci_without_stopping_the_other_tests(tmp_path):
    """A module-level importorskip (e.g. trl missing from a broken install) fails the run at the end;
    the other modules still run."""
    (tmp_path / "test_broken_module.py").write_text(
        'import pytest\npytest.importorskip("a_module_that_is_not_installed_vpo")\n'
    )
    r = _run(tmp_path, {"CI": "true"}, "not optional")
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "2 passed, 1 skipped" in out  # the other file's tests ran
    assert "CI FAILS: NOT TESTED" in out and "test_broken_module.py" in out


def test_every_expected_skip_is_commented_and_names_a_real_test():
    from expected_skips import EXPECTED_SKIPS

    src = (TESTS / "expected_skips.py").read_text()
    for pattern, _, why in EXPECTED_SKIPS:
        assert why.strip()
        lines = src.splitlines()
        line = next(i for i, ln in enumerate(lines) if repr(pattern)[1:-1] in ln)
        if lines[line - 1].strip() == "(":  # the formatter put a long entry's tuple on lines of its own
            line -= 1
        assert lines[line - 1].strip().startswith("#"), f"{pattern}: no comment above it"
        path, _, name = pattern.partition("::")
        assert f"def {name}(" in (TESTS.parent / path).read_text(), f"{pattern}: no such test"
