"""The task registry and how a task is named: ``register_task`` / ``list_tasks`` (the one registry:
the built-in tasks, imported on first use, and the user's), ``vpo.tasks.get(spec, **options)`` where ``spec`` is a registered name, a
``module:factory`` reference or a ``path/to/file.py:factory`` reference, and ``import_user_modules``
(the CLI's ``--import``), which imports user code so that its ``register_task`` calls run.

The same spec works everywhere a task is named (``vpo train``'s ``task:``, ``vpo eval --task``,
``vpo.tasks.get``), so a task of one's own needs no wrapper script. A factory is any callable that
returns a :class:`~vpo.tasks.Task` when called with the task options (a Task class included).
Mistakes (unknown name, missing module or attribute, options the factory rejects) raise
:class:`TaskSpecError`: a ``UserError`` the CLI prints on one line, and a ``ValueError`` for callers
that caught the ``ValueError`` ``get`` raised before. A file imported by path gets a module name
derived from its resolved path, so importing the same file twice reuses the module (until the file
changes on disk); the import holds a lock, so threads that name the same file at once (veRL scores in
threads) all get the finished module.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
import threading
from pathlib import Path
from typing import Callable, Iterable

from vpo.errors import UserError
from vpo.tasks import base

_BUILTIN: dict[str, str] = {
    "maze": "vpo.tasks.maze:MazeTask",
    "musique": "vpo.tasks.musique:MusiqueTask",
    "eureqa": "vpo.tasks.eureqa:EureqaTask",
    "toolrl": "vpo.tasks.toolrl:ToolRLTask",
    "code": "vpo.tasks.code:CodeTask",
    "prog": "vpo.tasks.prog:ProgTask",
    "noisy": "vpo.tasks.noisy:NoisyTask",
    "humaneval": "vpo.tasks.humaneval:HumanEvalTask",
    "bfcl": "vpo.tasks.bfcl:BFCLTask",
    "shop": "vpo.tasks.shop:ShopTask",
    "animals": "vpo.tasks.animals:AnimalsTask",
}
"""Built-in tasks: name -> ``module:factory``, imported on first use."""
_REGISTRY: dict[str, Callable[..., base.Task]] = {}
"""Tasks registered with :func:`register_task` (a registered name shadows a built-in one)."""


def register_task(name: str, factory: Callable[..., base.Task] | None = None):
    """Make ``vpo.tasks.get(name, **options)`` build a task. Usable as a decorator."""

    def deco(f):
        _REGISTRY[name] = f
        return f

    return deco(factory) if factory is not None else deco


def list_tasks() -> list[str]:
    return sorted(set(_BUILTIN) | set(_REGISTRY))


def _registered_factory(name: str) -> Callable:
    if name in _REGISTRY:
        return _REGISTRY[name]
    mod, attr = _BUILTIN[name].split(":")
    try:
        return getattr(importlib.import_module(mod), attr)
    except ImportError as e:
        raise TaskSpecError(f"task {name!r} could not be imported ({e}); is its optional dependency installed?") from e


USER_TASK_HINT = (
    "a task of your own: name it as module:factory or path/to/file.py:factory, "
    "or register it with register_task in a module given to --import"
)


class TaskSpecError(UserError, ValueError):
    """A task name, reference or option the user got wrong; the message says which and what to do."""


def _is_file_ref(left: str) -> bool:
    return left.endswith(".py") or os.sep in left or "/" in left


_FILE_LOCK = threading.RLock()
"""Held while a file is imported by path: a second thread waits for the import to finish instead of
getting the half-run module from ``sys.modules`` (veRL scores rollouts in threads). Re-entrant: a
task file may name another file task while it is imported."""
_FILE_MODULES: dict[Path, tuple[tuple[int, int], object]] = {}
"""Fully imported files: resolved path -> ((mtime_ns, size) at import, module). Only a finished
import is put here; a file changed on disk since is imported anew."""


def _reset_file_lock_in_child() -> None:
    # a fork taken while another thread imported a file would copy a held lock: the child gets a free
    # one (and _FILE_MODULES holds finished imports only, so the child imports that file itself)
    global _FILE_LOCK
    _FILE_LOCK = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_file_lock_in_child)


def _import_file(path: str | Path):
    """Import a Python file by path, once per version of the file: the module is cached under a name
    made from its path and re-imported when the file's modification time or size changes. Safe from
    many threads at once (:data:`_FILE_LOCK`); each process imports the file for itself."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise TaskSpecError(f"{path}: no such Python file (cwd {Path.cwd()}); give an existing path or a module name")
    p = p.resolve()
    with _FILE_LOCK:
        st = p.stat()
        stamp = (st.st_mtime_ns, st.st_size)
        cached = _FILE_MODULES.get(p)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        module = _exec_file(p, path)
        _FILE_MODULES[p] = (stamp, module)
        return module


def _exec_file(p: Path, path: str | Path):
    """Run the file ``p`` as a module (under :data:`_FILE_LOCK`); ``sys.modules`` holds it while it
    runs (dataclasses and pickle look a module up there) and keeps it only if it ran to the end."""
    mod_name = f"_vpo_user_{p.stem}_{hashlib.sha1(str(p).encode()).hexdigest()[:8]}"
    spec = importlib.util.spec_from_file_location(mod_name, p)
    if spec is None or spec.loader is None:
        raise TaskSpecError(f"{path}: cannot be imported as a Python file")
    module = importlib.util.module_from_spec(spec)
    previous = sys.modules.get(mod_name)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as e:
        if previous is not None:
            sys.modules[mod_name] = previous
        else:
            sys.modules.pop(mod_name, None)
        if isinstance(e, UserError) or not isinstance(e, Exception):
            raise
        # the user's file: one line naming it, --debug for the traceback
        raise TaskSpecError(_raised(f"importing {path}", e, "fix that file or what it imports")) from e
    return module


def _import_module(name: str):
    """Import a module by dotted name; the working directory is searched too (as ``python -m`` does)."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name and (name == e.name or name.startswith(e.name + ".")):
            raise TaskSpecError(
                f"module {name!r} not found (searched sys.path and {cwd}); check the spelling, "
                "install it, or give a file path such as path/to/file.py"
            ) from None
        raise TaskSpecError(_raised(f"importing module {name!r}", e, "install what it imports")) from e
    except UserError:
        raise
    except Exception as e:  # noqa: BLE001 - the user's module: one line naming it, --debug for the traceback
        raise TaskSpecError(_raised(f"importing module {name!r}", e, "fix that module or what it imports")) from e


IMPORT_HELP = (
    "import a module (dotted name, found from the working directory too) or a .py file first, so its "
    "register_task / register_set_objective calls run; repeatable"
)


def add_import_argument(parser) -> None:
    """``--import MODULE`` (repeatable, into ``args.imports``) on a command's argparse parser;
    ``vpo.cli.main`` imports them with :func:`import_user_modules` before the command runs."""
    parser.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE", help=IMPORT_HELP)


def import_user_modules(modules: Iterable[str]) -> list:
    """Import each module (dotted name) or Python file (path ending in .py), so that the
    ``register_task`` calls they make run. Returns the modules."""
    out = []
    for m in modules:
        m = m.strip()
        if not m:
            continue
        out.append(_import_file(m) if _is_file_ref(m) else _import_module(m))
    return out


def load_factory(spec: str) -> Callable:
    """The object a ``module:factory`` or ``path/to/file.py:factory`` reference names."""
    left, _, attr = spec.rpartition(":")
    if not left or not attr:
        raise TaskSpecError(f"task reference {spec!r} must look like module:factory or path/to/file.py:factory")
    module = _import_file(left) if _is_file_ref(left) else _import_module(left)
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise TaskSpecError(f"task reference {spec!r}: {left} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


def get(spec: str, **options) -> base.Task:
    """Build a task from a registered name (``get("maze", size=7)``), a ``module:factory`` or a
    ``path/to/file.py:factory`` reference; ``options`` go to the factory."""
    if not isinstance(spec, str) or not spec.strip():
        raise TaskSpecError(f"task must be a non-empty name or module:factory reference, got {spec!r}")
    spec = spec.strip()
    if spec in _REGISTRY or spec in _BUILTIN:
        obj = _registered_factory(spec)
    elif ":" not in spec:
        raise TaskSpecError(f"unknown task {spec!r}; available: {', '.join(list_tasks())}; {USER_TASK_HINT}")
    else:
        obj = load_factory(spec)
    if isinstance(obj, base.Task) and not callable(obj):
        if options:
            raise TaskSpecError(
                f"task reference {spec!r} is a Task instance, so it takes no options (got {sorted(options)})"
            )
        return obj
    if not callable(obj):
        raise TaskSpecError(f"task reference {spec!r} names a {type(obj).__name__}, not a factory returning a Task")
    try:
        inspect.signature(obj).bind(**options)
    except TypeError as e:  # the options do not fit the factory's signature (a TypeError inside it is a bug)
        raise TaskSpecError(f"bad options for task {spec!r}: {e}{_options_hint(spec, options)}") from None
    except ValueError:  # no signature to check (a builtin): let the call decide
        pass
    return _build(obj, spec, options)


def _build(obj: Callable, spec: str, options: dict) -> base.Task:
    """``obj(**options)``, checked to be a Task; whatever the factory raises is one line."""
    try:
        task = obj(**options)
    except UserError:
        raise
    except ValueError as e:
        raise TaskSpecError(f"task {spec!r}: {e}{_options_hint(spec, options)}") from e
    except TypeError as e:
        if "keyword argument" not in str(e):  # a TypeError inside the factory: the user's code to fix
            raise TaskSpecError(_raised(f"task {spec!r}: its factory", e, "fix the factory")) from e
        # a factory whose signature takes **options (MazeTask.__new__) rejects a name only when called
        raise TaskSpecError(f"bad options for task {spec!r}: {e}{_options_hint(spec, options)}") from None
    except ImportError as e:
        raise TaskSpecError(
            _raised(f"task {spec!r}: its factory", e, "install what it imports, or fix the import")
        ) from e
    except Exception as e:  # noqa: BLE001 - the user's factory: one line naming it, --debug for the traceback
        raise TaskSpecError(_raised(f"task {spec!r}: its factory", e, "fix the factory")) from e
    if not isinstance(task, base.Task):
        raise TaskSpecError(
            f"task {spec!r}: its factory returned a {type(task).__name__}, not a Task; return a vpo.tasks.Task "
            "(FunctionTask, TextTask, or a Task subclass; docs/tasks.md)"
        )
    return task


def _raised(what: str, err: BaseException, todo: str) -> str:
    text = " ".join(str(err).split()) or "(no message)"
    return f"{what} raised {type(err).__name__}: {text}; {todo} (--debug shows the traceback)"


def load_split(
    task: base.Task,
    split: str,
    n: int | None = None,
    seed: int | None = None,
    spec=None,
    *,
    required: bool = False,
    purpose: str = "train or evaluate on",
) -> list:
    """``task.load(split, n=n[, seed=seed])``, with any exception the task's ``load`` raises (a
    missing data file, a split it does not have, a bug) turned into one :class:`TaskSpecError` line
    naming the task, the split and the cause (``--debug`` shows the traceback). ``required``: an
    empty split is refused too (training or evaluating on it would do nothing and report success);
    ``purpose`` says what it was for."""
    name = spec if spec is not None else getattr(task, "name", "?")
    examples = _load_split(task, split, n, seed, name)
    if required and not examples:
        raise TaskSpecError(
            f"task {name!r}: its {split!r} split has no examples, so there is nothing to {purpose}; check the task's "
            "data (task_options / --task-options) and the split name"
        )
    return examples


def _load_split(task: base.Task, split: str, n: int | None, seed: int | None, name: str) -> list:
    try:
        return task.load(split, n=n) if seed is None else task.load(split, n=n, seed=seed)
    except UserError:
        raise
    except ValueError as e:  # the task's data settings (no such split, a bad option): the user's to fix
        raise TaskSpecError(
            f"task {name!r} could not load its {split!r} split: {' '.join(str(e).split())}; set the task's data in "
            "task_options (YAML) / --task-options JSON (CLI), or choose another split (--debug shows the traceback)"
        ) from e
    except Exception as e:  # noqa: BLE001 - the user's load(): one line naming it, --debug for the traceback
        raise TaskSpecError(
            _raised(f"task {name!r} could not load its {split!r} split: load()", e, "fix the task's data or its load()")
        ) from e


def _options_hint(spec: str, options: dict) -> str:
    given = f" (given: {options})" if options else ""
    return f"{given}; fix task_options (YAML) / --task-options JSON (CLI)"
