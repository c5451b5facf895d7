"""Vector-reward tasks: ``vpo.tasks.get(name, **options)`` builds one.

Built in: maze (synthetic designed-conflict mazes), musique, eureqa, toolrl (Hugging Face loaders +
in-repo fixtures for tests), code (per-test pass/fail in a sandbox). See :mod:`vpo.tasks.base` to
write your own; ``get`` also takes ``module:factory`` and ``path/to/file.py:factory`` references
(:mod:`vpo.tasks.registry`), so a task of your own is usable from the CLI without registering it.
"""

from vpo.tasks.base import Example, FunctionTask, RewardFunctionsTask, ScoredBatch, Task
from vpo.tasks.registry import TaskSpecError, get, import_user_modules, list_tasks, register_task

__all__ = [
    "Example",
    "FunctionTask",
    "RewardFunctionsTask",
    "ScoredBatch",
    "Task",
    "TaskSpecError",
    "get",
    "import_user_modules",
    "list_tasks",
    "register_task",
]
