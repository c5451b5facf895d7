"""Every exception vpo raises on purpose is a ``vpo.errors.VPOError``, and those whose message is a
user's whole story are ``UserError`` (the CLI prints them on one line and exits 2), so no command
has to re-wrap another layer's errors."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import vpo
from vpo.errors import UserError, VPOError

# modules whose optional dependencies may be missing here, or that must stay stdlib-only
SKIP_MODULES = ("vpo.integrations.verl_", "vpo.sandbox.worker")
# internal exceptions that never leave their module (caught where they are raised)
INTERNAL = {"_CleanupError", "SeccompAssemblyError"}  # the latter: caught in seccomp.py, the worker gets the reason
USER_ERRORS = {
    "MetricsError",
    "PoolError",
    "ReportError",
    "EndpointError",
    "ModelLoadError",
    "DatasetUnavailableError",
    "EmbeddingUnavailable",
    "TaskSpecError",
    "ConstraintError",
}


def _exception_classes():
    found = {}
    for info in pkgutil.walk_packages(vpo.__path__, "vpo."):
        if info.name.startswith(SKIP_MODULES):
            continue
        try:
            mod = importlib.import_module(info.name)
        except ImportError:  # an optional dependency (openevolve, vllm) is not installed
            continue
        for name, obj in vars(mod).items():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == info.name:
                found[f"{info.name}.{name}"] = obj
    return found


def test_every_vpo_exception_is_a_vpo_error():
    classes = _exception_classes()
    assert len(classes) >= 15, sorted(classes)  # the walk really found the package's errors
    outside = sorted(q for q, c in classes.items() if not issubclass(c, VPOError) and c.__name__ not in INTERNAL)
    assert not outside, f"exception classes outside VPOError: {outside}"


@pytest.mark.parametrize("name", sorted(USER_ERRORS))
def test_user_mistakes_are_user_errors(name):
    matches = [c for q, c in _exception_classes().items() if q.rsplit(".", 1)[1] == name]
    assert matches, name
    assert all(issubclass(c, UserError) for c in matches), name
