"""OpenEvolve bridge: real ``openevolve`` runs (database, prompt sampler, LLM ensemble, evaluator)
driven by a scripted LLM (``ScriptedLLM`` / ``ScriptedChatServer``: fixed multi-answer completions,
named as fakes), plus the in-process tiny model and the endpoint path over real HTTP.

Problem used throughout: ``square`` — write ``f(x) = x**2``; the reward vector is pass/fail on four
tests, so ``return x`` and ``return 2 * x`` score 0.5 and ``return x * x`` solves it.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
from helpers.loopback import JSONHandler, start_server

pytest.importorskip("openevolve", reason="openevolve is not installed (pip install -e '.[evolve]')")

from vpo.integrations.evolve import (  # noqa: E402
    EvolveError,
    EvolveModel,
    EvolveProblem,
    EvolveSettings,
    LocalHFClient,
    ScriptedLLM,
    evolve_problem,
    problem_from_dir,
    problems_from_task,
    run_comparison,
    split_programs,
)

EVALUATOR = """
import importlib.util
import time

TESTS = [(0, 0), (1, 1), (2, 4), (-3, 9)]


def evaluate(program_path):
    code = open(program_path).read()
    if "BOOM" in code:
        raise ValueError("the evaluator refuses BOOM programs")
    if "HANG" in code:
        while True:
            time.sleep(0.05)
    spec = importlib.util.spec_from_file_location("candidate", program_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = {}
    for i, (x, y) in enumerate(TESTS):
        try:
            out[f"test_{i}"] = float(mod.f(x) == y)
        except Exception:
            out[f"test_{i}"] = 0.0
    return out
"""


def _prog(body: str) -> str:
    return f"```python\ndef f(x):\n    return {body}\n```"


THREE = "Three different ideas.\n" + "\n---\n".join([_prog("x"), _prog("x * x"), _prog("2 * x")])
ONE = "One idea.\n" + _prog("abs(x)")
SETTINGS = dict(eval_timeout=10.0, checkpoint_interval=2, num_islands=2)


@pytest.fixture()
def square(tmp_path) -> Path:
    d = tmp_path / "square"
    d.mkdir()
    (d / "initial_program.py").write_text("def f(x):\n    return 0\n")
    (d / "evaluator.py").write_text(EVALUATOR)
    (d / "problem.yaml").write_text("description: Write f(x) returning the square of x.\n")
    return d


def _history(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "history.jsonl").read_text().splitlines() if x.strip()]


def _load_db(checkpoint: Path, islands: int = 2):
    from openevolve.config import DatabaseConfig
    from openevolve.database import ProgramDatabase

    db = ProgramDatabase(DatabaseConfig(num_islands=islands))
    db.load(str(checkpoint))
    return db


def test_split_programs_takes_the_first_m_fenced_blocks():
    assert [p.strip() for p in split_programs(THREE, 3)] == [
        "def f(x):\n    return x",
        "def f(x):\n    return x * x",
        "def f(x):\n    return 2 * x",
    ]
    assert len(split_programs(THREE, 2)) == 2
    assert split_programs("no code at all", 3) == []
    assert split_programs("```python\n```", 3) == []  # an empty block is not a program
    assert split_programs(None, 3) == []


def test_m_programs_per_call_enter_openevolve_database_and_budget(square, tmp_path):
    """Two models side by side at a matched answer budget of 6: the 3-answer model makes 2 calls,
    each adding up to 3 programs with one parent; the 1-answer model makes 6 calls."""
    vpo_llm, grpo_llm = ScriptedLLM([THREE]), ScriptedLLM([ONE])
    models = [EvolveModel("vpo", num_answers=3, client=vpo_llm), EvolveModel("grpo", num_answers=1, client=grpo_llm)]
    out = tmp_path / "out"
    report = run_comparison(
        [problem_from_dir(square)], models, EvolveSettings(budget=6, **SETTINGS), out, progress=False
    )

    assert len(vpo_llm.calls) == 2 and len(grpo_llm.calls) == 6
    user = vpo_llm.calls[0]["messages"][0]["content"]
    assert "# Current Program" in user and "3 genuinely different programs" in user  # OpenEvolve's prompt + vpo's
    assert "square of x" in vpo_llm.calls[0]["system"]
    r = report["models"]
    assert (r["vpo"]["llm_calls"], r["grpo"]["llm_calls"]) == (2, 6)
    assert (r["vpo"]["problems_solved"], r["grpo"]["problems_solved"]) == (1, 0)
    assert r["vpo"]["mean_best_score"] == 1.0 and r["grpo"]["mean_best_score"] == 0.5
    assert r["vpo"]["curve_solved"] == [0, 0, 0, 1, 1, 1, 1]  # solved by the first call's programs
    assert r["grpo"]["curve_mean_best"][:2] == [0.25, 0.5]

    run = out / "vpo" / "square"
    hist = _history(run)
    assert [h["call"] for h in hist] == [0, 1, 2] and hist[-1]["budget_used"] == 6
    first = hist[1]
    assert first["parsed"] == 3 and first["units"] == 3 and [c["slot"] for c in first["candidates"]] == [0, 1, 2]
    assert [c["rewards"] for c in first["candidates"]] == [[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 1, 0]]
    assert [c["score"] for c in first["candidates"]] == [0.5, 1.0, 0.5]

    # the programs are in OpenEvolve's own checkpoint, loadable by OpenEvolve's ProgramDatabase
    db = _load_db(run / "checkpoints" / "checkpoint_2")
    initial = [p for p in db.programs.values() if p.metadata.get("vpo_call") == 0]
    call1 = sorted(
        (p for p in db.programs.values() if p.metadata.get("vpo_call") == 1), key=lambda p: p.metadata["vpo_slot"]
    )
    assert len(initial) == 1 and [p.metadata["vpo_slot"] for p in call1] == [0, 1, 2]
    assert {p.parent_id for p in call1} == {initial[0].id}
    assert {(p.generation, p.iteration_found) for p in call1} == {(1, 1)}
    assert call1[1].metrics["combined_score"] == 1.0 and "x * x" in call1[1].code
    assert db.get_best_program().metrics["combined_score"] == 1.0
    assert (run / "best" / "best_program.py").read_text().count("x * x") == 1
    assert (out / "report.json").is_file() and (out / "evolve_progress.png").stat().st_size > 10_000


def test_budget_truncates_the_last_call_and_malformed_output_costs_one_unit(square, tmp_path):
    prob = problem_from_dir(square)
    s = evolve_problem(
        prob,
        EvolveModel("v", num_answers=3, client=ScriptedLLM([THREE])),
        EvolveSettings(budget=4, **SETTINGS),
        tmp_path / "a",
        progress=False,
    )
    hist = _history(tmp_path / "a")
    assert s["llm_calls"] == 2 and s["budget_used"] == 4
    assert (hist[2]["parsed"], hist[2]["units"]) == (3, 1)  # only the first answer of call 2 fits
    bad = ScriptedLLM(["I would square it, but here is no code.", _prog("x") + "\n" + _prog("x")])
    s = evolve_problem(
        prob,
        EvolveModel("b", num_answers=3, client=bad),
        EvolveSettings(budget=4, **SETTINGS),
        tmp_path / "b",
        progress=False,
    )
    hist = _history(tmp_path / "b")
    assert s["llm_calls"] == 3 and s["budget_used"] == 4 and s["malformed_calls"] == 2
    assert [h.get("malformed") for h in hist[1:]] == [True, False, True]
    assert hist[2]["units"] == 2 and hist[2]["duplicates"] == 1 and len(hist[2]["candidates"]) == 1
    # the calls unit counts LLM calls, whatever they yield
    s = evolve_problem(
        prob,
        EvolveModel("c", num_answers=3, client=ScriptedLLM([THREE])),
        EvolveSettings(budget=2, budget_unit="calls", **SETTINGS),
        tmp_path / "c",
        progress=False,
    )
    assert s["llm_calls"] == 2 and s["budget_used"] == 2 and s["candidates"] >= 4


def test_evaluator_that_raises_or_hangs_scores_zero_and_the_run_goes_on(square, tmp_path):
    text = "\n".join([_prog("BOOM"), _prog("x  # HANG"), _prog("x * x")])
    t0 = time.monotonic()
    s = evolve_problem(
        problem_from_dir(square),
        EvolveModel("v", num_answers=3, client=ScriptedLLM([text])),
        EvolveSettings(budget=3, eval_timeout=1.5, checkpoint_interval=5),
        tmp_path / "r",
        progress=False,
    )
    elapsed = time.monotonic() - t0
    cands = _history(tmp_path / "r")[1]["candidates"]
    assert "raised ValueError: the evaluator refuses BOOM programs" in cands[0]["error"]
    assert "timed out after 1.5s" in cands[1]["error"] and "killed" in cands[1]["error"]
    assert cands[0]["score"] == cands[1]["score"] == 0.0
    assert cands[2]["solved"] and "error" not in cands[2]  # a fresh worker took over after the kill
    assert s["solved"] and s["eval_errors"] == 2
    assert (tmp_path / "r" / "checkpoints" / "checkpoint_1" / "vpo_state.json").is_file()
    assert elapsed < 60  # the hang cost one timeout, not the run


def test_evaluator_that_cannot_load_is_a_clear_error(square, tmp_path):
    (square / "evaluator.py").write_text("def evaluate(path):\n    return {'x': 1.0\n")
    with pytest.raises(EvolveError, match="evaluator could not be loaded: SyntaxError"):
        evolve_problem(
            problem_from_dir(square),
            EvolveModel("v", client=ScriptedLLM([ONE])),
            EvolveSettings(budget=1),
            tmp_path / "r",
            progress=False,
        )
    (square / "evaluator.py").write_text("def score(path):\n    return {}\n")
    with pytest.raises(EvolveError, match="defines no evaluate"):
        evolve_problem(
            problem_from_dir(square),
            EvolveModel("v", client=ScriptedLLM([ONE])),
            EvolveSettings(budget=1),
            tmp_path / "r2",
            progress=False,
        )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ScriptedChatServer:
    """A fake OpenAI-compatible server (named as one): replays ``responses`` on
    /v1/chat/completions, lists ``model_id`` on /v1/models, and answers HTTP 500 once
    ``fail_after`` requests were served."""

    def __init__(self, responses, model_id="scripted-vpo"):
        self.responses, self.model_id, self.fail_after, self.requests = list(responses), model_id, None, []
        outer = self

        class Handler(JSONHandler):
            def do_GET(self):
                if self.path.endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": outer.model_id, "object": "model"}]})
                else:
                    self._send(404, {"error": "not found"})

            def do_POST(self):
                req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if outer.fail_after is not None and len(outer.requests) >= outer.fail_after:
                    return self._send(500, {"error": {"message": "scripted outage", "type": "server_error"}})
                outer.requests.append(req)
                text = outer.responses[(len(outer.requests) - 1) % len(outer.responses)]
                self._send(
                    200,
                    {
                        "id": "c",
                        "object": "chat.completion",
                        "created": 0,
                        "model": outer.model_id,
                        "choices": [
                            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                        ],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30},
                    },
                )

        self.httpd, thread, self.url = start_server(Handler)
        thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_endpoint_path_outage_keeps_checkpoint_and_resume_finishes(square, tmp_path):
    server = ScriptedChatServer([THREE])
    try:
        model = EvolveModel("vpo", num_answers=3, api_base=server.url, model="scripted-vpo", retries=0, timeout=20)
        settings = EvolveSettings(budget=9, max_llm_failures=2, **SETTINGS)
        prob = problem_from_dir(square)
        # one good call, then the endpoint fails: the run stops with a checkpoint and says how to go on
        server.fail_after = 1
        with pytest.raises(EvolveError, match=r"2 LLM calls failed in a row .*checkpoint kept at .*--resume") as err:
            evolve_problem(prob, model, settings, tmp_path / "r", progress=False)
        assert err.value.__cause__ is not None and type(err.value.__cause__).__name__ in str(err.value)
        req = server.requests[0]
        assert req["model"] == "scripted-vpo" and "3 genuinely different programs" in req["messages"][-1]["content"]
        assert (tmp_path / "r" / "checkpoints" / "checkpoint_1" / "vpo_state.json").is_file()
        # the endpoint is back: resume from the checkpoint, finish the budget
        server.fail_after = None
        s = evolve_problem(prob, model, settings, tmp_path / "r", resume=True, progress=False)
        assert s["budget_used"] == 9 and s["llm_calls"] == 3 and s["llm_errors"] == 2 and s["solved"]
        assert len(server.requests) == 3
        assert [h["call"] for h in _history(tmp_path / "r") if not h.get("aborted")] == [0, 1, 2, 3]
        # a model id the server does not serve
        with pytest.raises(EvolveError, match=r"serves \['scripted-vpo'\], not 'other'"):
            evolve_problem(
                prob, EvolveModel("x", api_base=server.url, model="other"), settings, tmp_path / "x", progress=False
            )
    finally:
        server.close()


def test_unreachable_endpoint_fails_before_any_work(square, tmp_path):
    url = f"http://127.0.0.1:{_free_port()}/v1"
    models = [EvolveModel("ok", client=ScriptedLLM([ONE])), EvolveModel("down", api_base=url)]
    with pytest.raises(EvolveError, match=r"'down': cannot reach the OpenAI-compatible endpoint .*vllm") as err:
        run_comparison([problem_from_dir(square)], models, EvolveSettings(budget=2), tmp_path / "o", progress=False)
    assert isinstance(err.value.__cause__, OSError)  # the connection error stays attached as the cause
    assert not (tmp_path / "o" / "ok").exists()


def test_cli_runs_models_side_by_side_and_reports_user_errors(square, tmp_path, capsys):
    from vpo.cli import main

    script = tmp_path / "script.json"
    script.write_text(json.dumps([THREE]))
    out = tmp_path / "cli"
    rc = main(
        [
            "evolve",
            "--problem",
            str(square),
            "--budget",
            "3",
            "--out",
            str(out),
            "--no-progress",
            "--model",
            f"name=vpo,num_answers=3,client=vpo.integrations.evolve:ScriptedLLM,script={script}",
            "--model",
            f"name=vpo-1,num_answers=1,client=vpo.integrations.evolve:ScriptedLLM,script={script}",
        ]
    )
    text = capsys.readouterr().out
    assert rc == 0 and "report:" in text
    report = json.loads((out / "report.json").read_text())
    assert report["models"]["vpo"]["problems_solved"] == 1 and report["models"]["vpo-1"]["llm_calls"] == 3
    assert main(["evolve", "--problem", str(square), "--model", "num_answers=3"]) == 2
    assert "name= is required" in capsys.readouterr().err
    assert main(["evolve", "--problem", str(tmp_path), "--model", "name=a,client=x:y"]) == 2
    assert "missing initial_program.py" in capsys.readouterr().err
    assert (
        main(
            [
                "evolve",
                "--problem",
                str(square),
                "--model",
                f"name=a,api_base=http://127.0.0.1:{_free_port()}/v1",
                "--out",
                str(tmp_path / "o2"),
            ]
        )
        == 2
    )
    assert "cannot reach" in capsys.readouterr().err


def test_task_problems_score_through_a_vpo_task(tmp_path, monkeypatch):
    """A vpo Task as the evaluator: the reward vector is the task's objectives, w* its weights."""
    mod = tmp_path / "evolve_toy_task.py"
    mod.write_text(
        "from vpo.tasks import FunctionTask\n"
        "def make():\n"
        "    def passes(k):\n"
        "        def f(ex, code):\n"
        "            ns = {}\n"
        "            try:\n"
        "                exec(code, ns)\n"
        "                return float(ns['f'](k) == ex['scale'] * k * k)\n"
        "            except Exception:\n"
        "                return 0.0\n"
        "        return f\n"
        "    return FunctionTask('toy_square', objectives={f't{k}': passes(k) for k in (1, 2, 3)},\n"
        "        examples={'test': [{'id': 'a', 'scale': 1, 'question': 'f(x) = x*x', 'starter_code': 'def f(x):\\n    return 0\\n'}]},\n"
        "        target_weights=[0.5, 0.25, 0.25])\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    probs = problems_from_task("evolve_toy_task:make", split="test")
    assert [p.name for p in probs] == ["toy_square-a"] and probs[0].objectives == ["t1", "t2", "t3"]
    s = evolve_problem(
        probs[0],
        EvolveModel("v", num_answers=3, client=ScriptedLLM([THREE])),
        EvolveSettings(budget=3, **SETTINGS),
        tmp_path / "t",
        progress=False,
    )
    cands = _history(tmp_path / "t")[1]["candidates"]
    assert [c["rewards"] for c in cands] == [[1, 0, 0], [1, 1, 1], [0, 1, 0]]
    assert [c["score"] for c in cands] == [0.5, 1.0, 0.25]  # w* = (0.5, 0.25, 0.25)
    assert s["solved"] and s["objectives"] == ["t1", "t2", "t3"]


def test_in_process_tiny_model_drives_a_run(square, tmp_path, tiny_model_dir):
    """The real model path without a server: a random tiny Qwen2 writes (junk) completions; the
    run counts its calls, records malformed outputs and finishes."""
    client = LocalHFClient(tiny_model_dir, max_new_tokens=24, seed=0)
    s = evolve_problem(
        problem_from_dir(square),
        EvolveModel("tiny", num_answers=3, client=client),
        EvolveSettings(budget=2, budget_unit="calls", **SETTINGS),
        tmp_path / "tiny",
        progress=False,
    )
    assert client.num_calls == 2 and s["llm_calls"] == 2 and s["budget_used"] == 2
    hist = _history(tmp_path / "tiny")
    assert len(hist) == 3 and all("parsed" in h for h in hist[1:])
    assert s["best_score"] == 0.25  # the initial program; junk cannot beat it


def test_bad_configuration_is_rejected_with_reasons(square):
    with pytest.raises(ValueError, match="exactly one of api_base"):
        EvolveModel("x")
    with pytest.raises(ValueError, match="answers"):
        EvolveModel("x", num_answers=0, client=ScriptedLLM([ONE]))
    with pytest.raises(ValueError, match="budget_unit"):
        EvolveSettings(budget_unit="tokens")
    with pytest.raises(ValueError, match="exactly one of evaluator"):
        EvolveProblem("p", "x = 1\n")
    with pytest.raises(ValueError, match="non-empty list"):
        ScriptedLLM([])


def test_code_task_problem_per_test_rewards(tmp_path):
    """The paper's setting: a vpo ``code`` task problem (sandboxed programs, one reward per test)."""
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "code" / "problems.jsonl"
    probs = [p for p in problems_from_task("code", {"data": str(fixture), "max_tests": 5}) if p.name == "code-add_two"]
    assert len(probs) == 1 and probs[0].objectives == [f"test_{i}" for i in range(1, 6)]
    text = "\n---\n".join(
        f"```python\na, b = map(int, input().split())\nprint({expr})\n```" for expr in ("a - b", "a + b")
    )
    s = evolve_problem(
        probs[0],
        EvolveModel("v", num_answers=2, client=ScriptedLLM([text])),
        EvolveSettings(budget=2, **SETTINGS),
        tmp_path / "code",
        progress=False,
    )
    cands = _history(tmp_path / "code")[1]["candidates"]
    assert cands[1]["rewards"] == [1.0] * 5 and cands[1]["solved"]
    assert cands[0]["rewards"][2] == 1.0 and 0 < cands[0]["score"] < 1  # "0 0" passes for a - b only
    assert s["solved"]


class _BrokenPipeStdin:
    """Stands in for the worker's stdin when the worker vanished mid-write: every write raises
    BrokenPipeError, as writing to a dead process's pipe does."""

    def __init__(self, real):
        self.real = real

    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self):
        pass

    def close(self):
        self.real.close()


def test_lost_evaluator_process_is_reported_with_its_cause(square, tmp_path):
    """Writing a program to a worker whose pipe broke scores 0 with the OS error in the message
    (the reason used to be built and then dropped, leaving a bare 'the evaluator process died')."""
    from vpo.integrations.evolve.worker import _EvalWorker, write_eval_files

    spec = write_eval_files(problem_from_dir(square), tmp_path)
    worker = _EvalWorker(spec, timeout=10.0, log_path=tmp_path / "stderr.log")
    try:
        worker.start()
        worker.proc.stdin = _BrokenPipeStdin(worker.proc.stdin)
        metrics, artifacts, error = worker.evaluate(str(square / "initial_program.py"))
        assert metrics is None and artifacts == {}
        assert "the evaluator process is gone" in error and "BrokenPipeError" in error and "Broken pipe" in error
        assert worker.proc is None  # closed, so the next evaluation starts a fresh worker
    finally:
        worker.close()


def test_cli_help_example_passes_options_the_code_task_accepts():
    """The --task-options example in `vpo evolve --help` builds a CodeTask (it once passed `path`)."""
    import re

    from vpo import tasks
    from vpo.integrations.evolve.cli import _EPILOG

    example = re.search(r"--task (\w+) --task-options '([^']*)'", _EPILOG)
    assert example is not None
    task = tasks.get(example.group(1), **json.loads(example.group(2)))
    assert task.name == "code"


def test_package_keeps_the_old_import_paths_and_worker_entry_point():
    import subprocess
    import sys

    import vpo.integrations.evolve as ev

    for name in (
        "EvolveError",
        "EvolveModel",
        "EvolveProblem",
        "EvolveSettings",
        "ScriptedLLM",
        "LocalHFClient",
        "split_programs",
        "problem_from_dir",
        "problems_from_task",
        "evolve_problem",
        "run_comparison",
        "plot_report",
        "check_endpoint",
        "shim_evaluate",
    ):
        assert name in ev.__all__ and hasattr(ev, name)
    from vpo.errors import VPOError

    assert issubclass(ev.EvolveError, VPOError) and issubclass(ev.EvolveError, RuntimeError)
    # the worker is started as `python -m vpo.integrations.evolve --eval-worker SPEC`
    from vpo.integrations.evolve.worker import _WORKER_MODULE

    res = subprocess.run([sys.executable, "-m", _WORKER_MODULE], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "--eval-worker SPEC.json" in res.stderr
