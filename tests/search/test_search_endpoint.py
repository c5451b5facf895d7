"""`vpo eval --search` through an OpenAI-compatible endpoint (--endpoint, --api completions): a real
tiny model behind a loopback server (TinyModelServer from test_eval.py). Beam continues its partial
candidates by sending prompt + partial text to /v1/completions; every choice's tokens are counted
(from the server's usage, split over the choices), so the budget holds as with a local model."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

MAZE = ["--task", "maze", "--task-options", '{"size": 5, "compact": true}', "--split", "validation"]


def _server_class():
    path = Path(__file__).resolve().parent / "test_eval.py"
    spec = importlib.util.spec_from_file_location("vpo_test_eval_server", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.TinyModelServer


def test_beam_and_bon_search_through_an_endpoint(tiny_model_dir, tmp_path, capsys):
    from vpo.cli import main as vpo_main

    with _server_class()(tiny_model_dir) as srv:
        common = ["eval", "--endpoint", srv.url, "--api", "completions", *MAZE, "--num-prompts", "2"]
        common += ["--num-answers", "2", "--max-new-tokens", "16", "--budget-tokens", "40", "--bootstrap", "20"]
        common += ["--quiet", "--no-plots"]
        runs = {
            "bon": ["--search", "bon"],
            "beam": ["--search", "beam", "--step", "tokens:4", "--beam-width", "2", "--beam-expand", "2"],
        }
        for name, extra in runs.items():
            srv.requests.clear()
            code = vpo_main(common + extra + ["--out", str(tmp_path / name)])
            err = capsys.readouterr().err
            assert code == 0, err
            recs = [json.loads(x) for x in (tmp_path / name / "search" / "records.jsonl").read_text().splitlines()]
            assert len(recs) == 2 and all(r["tokens_generated"] >= 40 for r in recs)
            assert srv.requests and all(r["path"] == "/v1/completions" for r in srv.requests)
            # what the server generated is what the ledger charged (usage, summed over requests)
            caps = [r["max_tokens"] for r in srv.requests]
            assert sum(r["tokens_generated"] for r in recs) <= sum(c * r["n"] for c, r in zip(caps, srv.requests))
            if name == "beam":
                # 4-token steps: a stepping request asks for at most 4 tokens (the requests that close the last
                # answers get what is left of the budget), and later requests extend an earlier prompt with the
                # partial text the search kept; the beam spends the budget and no more
                assert sum(c <= 4 for c in caps) > len(caps) / 2 and max(caps) <= 40, caps
                assert [r["tokens_generated"] for r in recs] == [40, 40], recs
                prompts = [r["prompt"] for r in srv.requests]
                assert any(p != q and p.startswith(q) for p in prompts for q in prompts)
