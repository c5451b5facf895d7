"""Vector-reward tasks: ``vpo.tasks.get(name, **options)`` builds one.

Built in: maze (synthetic designed-conflict mazes), musique, eureqa, toolrl (Hugging Face loaders +
in-repo fixtures for tests), code (per-test pass/fail in a sandbox). See :mod:`vpo.tasks.base` to
write your own.
"""

from vpo.tasks.base import Example, FunctionTask, RewardFunctionsTask, ScoredBatch, Task, get, list_tasks, register_task

__all__ = ["Example", "FunctionTask", "RewardFunctionsTask", "ScoredBatch", "Task", "get", "list_tasks", "register_task"]
