"""``vpo evolve --import MODULE``: a task registered by user code (a .py file outside sys.path) is
found by name, both when the problems are built and in the evaluation worker process, which builds
the task again on its own."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("openevolve", reason="openevolve is not installed (pip install -e '.[evolve]')")

from vpo.integrations.evolve.worker import IMPORTS_ENV  # noqa: E402

TASK_FILE = """
from vpo.tasks import FunctionTask, register_task


def passes(k):
    def f(ex, code):
        ns = {}
        try:
            exec(code, ns)
            return float(ns["f"](k) == k * k)
        except Exception:
            return 0.0
    return f


@register_task("evolve_import_toy")
def make():
    return FunctionTask("evolve_import_toy", objectives={f"t{k}": passes(k) for k in (1, 2, 3)},
        examples={"test": [{"id": "a", "question": "f(x) = x*x", "starter_code": "def f(x):\\n    return 0\\n"}]},
        target_weights=[0.5, 0.25, 0.25])
"""


def _prog(body: str) -> str:
    return f"```python\ndef f(x):\n    return {body}\n```"


def test_import_makes_a_user_registered_task_usable(tmp_path, monkeypatch, capsys):
    from vpo.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(IMPORTS_ENV, raising=False)
    (tmp_path / "user").mkdir()
    mod = tmp_path / "user" / "my_evolve_tasks.py"
    mod.write_text(TASK_FILE)
    script = tmp_path / "script.json"
    script.write_text(json.dumps(["Ideas.\n" + "\n---\n".join([_prog("x"), _prog("x * x"), _prog("2 * x")])]))
    model = f"name=v,num_answers=3,client=vpo.integrations.evolve:ScriptedLLM,script={script}"
    args = [
        "evolve",
        "--task",
        "evolve_import_toy",
        "--budget",
        "3",
        "--no-progress",
        "--model",
        model,
        "--eval-timeout",
        "20",
        "--out",
    ]

    # without --import the name is unknown: one line, exit 2
    assert main(args + [str(tmp_path / "without")]) == 2
    assert "evolve_import_toy" in capsys.readouterr().err

    # a relative .py path, as a user types it
    assert main(["evolve", "--import", "user/my_evolve_tasks.py"] + args[1:] + [str(tmp_path / "with")]) == 0
    report = json.loads((tmp_path / "with" / "report.json").read_text())
    assert report["models"]["v"]["problems_solved"] == 1
    # the worker scored the candidates with the user's task: x*x passes all three tests, x only k=1
    history = [json.loads(x) for x in next((tmp_path / "with").rglob("history.jsonl")).read_text().splitlines() if x]
    cands = history[1]["candidates"]  # history[0] is the initial program
    assert [c["rewards"] for c in cands] == [[1, 0, 0], [1, 1, 1], [0, 1, 0]]
    # the worker got the file as an absolute path (it may run elsewhere)
    assert json.loads(__import__("os").environ[IMPORTS_ENV]) == [str(mod.resolve())]


def test_import_of_a_missing_module_is_one_line(tmp_path, monkeypatch, capsys):
    from vpo.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(IMPORTS_ENV, raising=False)
    assert main(["evolve", "--import", "no_such_module_xyz", "--task", "x", "--model", "name=a,client=x:y"]) == 2
    err = capsys.readouterr().err
    assert "no_such_module_xyz" in err and len(err.strip().splitlines()) == 1
