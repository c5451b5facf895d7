"""A ``path/to/file.py:factory`` task resolved and scored from many threads at once (veRL scores
rollouts in threads, #51 item 1): every thread gets the finished module, none a half-imported one;
the file is imported once per version of it, and a forked child resolves it too."""

from __future__ import annotations

import os
import threading
import time

import pytest

import vpo.tasks
from vpo.tasks import registry

THREADS = 16

# a test-only task file whose import takes a while (so the threads overlap inside it) and counts its runs
TASK_FILE = """
import time
import vpo.tasks
from vpo.tasks import FunctionTask

IMPORTS = getattr(vpo.tasks, "_thread_test_imports", 0) + 1
vpo.tasks._thread_test_imports = IMPORTS
time.sleep(0.3)


def make(bonus=0.0):
    return FunctionTask(
        "thread_test", {"long": lambda ex, a: min(1.0, len(a) / 10 + bonus)},
        {"train": [{"id": 0, "question": "say something"}]},
    )
"""


def _all_at_once(fn):
    """``fn()`` in THREADS threads released together by a barrier: (results, exceptions)."""
    barrier = threading.Barrier(THREADS)
    results, errors = [], []

    def worker():
        barrier.wait()
        try:
            results.append(fn())
        except Exception as e:  # noqa: BLE001 - collected for the assertion
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return results, errors


@pytest.fixture
def task_file(tmp_path, monkeypatch):
    monkeypatch.setattr(vpo.tasks, "_thread_test_imports", 0, raising=False)
    path = tmp_path / "mytask.py"
    path.write_text(TASK_FILE)
    return path


def test_a_file_task_resolves_from_many_threads_at_once(task_file):
    results, errors = _all_at_once(lambda: vpo.tasks.get(f"{task_file}:make"))
    assert errors == [], errors[:3]
    assert len(results) == THREADS and all(t.name == "thread_test" for t in results)
    assert vpo.tasks._thread_test_imports == 1  # imported once, the other threads waited for it


def test_the_veRL_score_function_scores_a_file_task_from_many_threads_at_once(task_file, monkeypatch):
    from vpo.integrations import verl_reward

    monkeypatch.setattr(verl_reward, "_TASKS", {})
    results, errors = _all_at_once(
        lambda: verl_reward.compute_score(
            "vpo/mine",
            "<answer_1>hello</answer_1>",
            {"id": 0, "question": "say something"},
            {"vpo_group": "g0"},
            task=f"{task_file}:make",
            num_answers=1,
            method="vpo_grpo",
        )
    )
    assert errors == [], errors[:3]
    assert [r["score"] for r in results] == [pytest.approx(0.5)] * THREADS


def test_a_changed_file_is_imported_anew_and_an_unchanged_one_is_reused(task_file):
    first = registry.load_factory(f"{task_file}:make")
    assert registry.load_factory(f"{task_file}:make") is first
    task_file.write_text(TASK_FILE.replace("len(a) / 10", "len(a) / 5"))
    st = task_file.stat()
    os.utime(task_file, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # a later edit, whatever the clock
    second = registry.load_factory(f"{task_file}:make")
    assert second is not first and vpo.tasks._thread_test_imports == 2
    ex = {"id": 0, "question": "q"}
    assert second().score(ex, "hello")[0] == pytest.approx(1.0)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_child_forked_during_an_import_resolves_the_file_itself(task_file):
    """A fork taken while another thread holds the import lock: the child does not deadlock."""
    importer = threading.Thread(target=lambda: vpo.tasks.get(f"{task_file}:make"))
    importer.start()
    time.sleep(0.1)  # inside the file's 0.3 s import
    pid = os.fork()
    if pid == 0:  # the child: resolve, then leave without running pytest's teardown
        try:
            ok = vpo.tasks.get(f"{task_file}:make").name == "thread_test"
        except BaseException:  # noqa: BLE001
            ok = False
        os._exit(0 if ok else 1)
    importer.join()
    deadline = time.time() + 30
    while time.time() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail("the forked child hung resolving the file task")
