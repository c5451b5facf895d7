"""Budgeted search (vpo eval --search bon|beam|tree) on a hand-built model whose odds are known.

The model writes answers of four bits: each bit is 1 with probability 0.3 (so 1111 has odds 0.0081
a sample); in "copy" mode (m > 1) every answer after the first copies the one before it with one bit
redrawn. The true reward is the share of ones (two components: first half, second half), so only
1111 scores 1. A step scorer that counts the ones written so far is a good guide; one that counts
zeros is a bad one. Every token the model emits is counted by the model itself, so the tests can
check the searches' token accounting against it.
"""

from __future__ import annotations

import json
import zlib

import numpy as np
import pytest

from vpo.errors import UserError
from vpo.search.backends import Generation, PoolConfig
from vpo.search.step.run import run_search, search_metrics
from vpo.search.step.score import StepScorer, aggregate, make_step_scorer
from vpo.search.step.search import SearchConfig, parse_step, search_prompt
from vpo.tasks.base import FunctionTask, partial_answers
from helpers.step_records import search_record  # noqa: E402

BITS = 4
ASSISTANT = "<|assistant|>"


def _half(a: str, lo: int, hi: int) -> float:
    return sum(c == "1" for c in a[lo:hi]) / (hi - lo) if len(a) == BITS and set(a) <= {"0", "1"} else 0.0


def make_task() -> FunctionTask:
    examples = [{"id": f"p{i}", "question": f"bits {i}"} for i in range(12)]
    return FunctionTask(
        "bits",
        {"first": lambda ex, a: _half(a, 0, 2), "second": lambda ex, a: _half(a, 2, 4)},
        examples,
    )


class BitModel:
    """A hand-built 'language model': tokens are one character or one answer tag; ``total`` counts every
    token it has generated (EOS included), across calls."""

    def __init__(self, m: int = 1, p: float = 0.3, copy: bool = False) -> None:
        self.m, self.p, self.copy = m, p, copy
        self.cfg = PoolConfig(max_new_tokens=64)
        self.name = "bits-model"
        self.total = 0
        self.calls = 0
        self.closed = 0  # answers finished (closing tags written), every call
        self.limits = []  # each call's max_new_tokens

    def format(self, text: str, system=None) -> str:
        return f"{text}\n{ASSISTANT}"

    def _tags(self, j: int) -> tuple[str, str]:
        return ("<answer>", "</answer>") if self.m == 1 else (f"<answer_{j}>", f"</answer_{j}>")

    def _next(self, text: str, rng) -> str | None:
        """The next token after completion ``text`` (None = EOS)."""
        closed, open_ = partial_answers(text)
        if open_ is None:
            if len(closed) >= self.m:
                return None
            return self._tags(len(closed) + 1)[0]
        if len(open_) == BITS:
            return self._tags(len(closed) + 1)[1]
        if self.copy and closed:
            prev = closed[-1]
            pos = len(open_)
            flip = zlib.crc32(text.encode()) % BITS  # one redrawn bit per answer (fixed by the text so far)
            if pos != flip:
                return prev[pos]
            return "1" if rng.random() < self.p else "0"
        return "1" if rng.random() < self.p else "0"

    def generate(self, prompts, n, seed=0, stop=(), max_new_tokens=None):
        self.calls += 1
        limit = self.cfg.max_new_tokens if max_new_tokens is None else max_new_tokens
        self.limits.append(max_new_tokens)
        rng = np.random.default_rng(seed)
        out = []
        for prompt in prompts:
            done = prompt.split(ASSISTANT, 1)[1]
            row = []
            for _ in range(n):
                text, count = "", 0
                while count < limit:
                    tok = self._next(done + text, rng)
                    count += 1
                    if tok is None:
                        break
                    text += tok
                    self.closed += tok.startswith("</")
                    if any(text.endswith(s) for s in stop):
                        break
                self.total += count
                row.append(Generation(text, float(count)))
            out.append(row)
        return out


def ones_so_far(example, partial_text: str) -> float:
    closed, open_ = partial_answers(partial_text)
    texts = [a for a in closed] + ([open_] if open_ else [])
    return max((t.count("1") / BITS for t in texts), default=0.0)


def last_answer_ones(example, partial_text: str) -> float:
    closed, _ = partial_answers(partial_text)
    return closed[-1].count("1") / BITS if closed else 0.0


def zeros_so_far(example, partial_text: str) -> float:
    closed, open_ = partial_answers(partial_text)
    texts = [a for a in closed] + ([open_] if open_ else [])
    return max((t.count("0") / BITS for t in texts), default=0.0)


W = np.array([0.5, 0.5])
GOOD = StepScorer("ones", ones_so_far, W)
BAD = StepScorer("zeros", zeros_so_far, W)


def _best_at_budget(model, cfg, scorer, n_prompts=12):
    task = make_task()
    meta, records = run_search(model, task, task.load()[:n_prompts], cfg, scorer, progress=False)
    return search_metrics(meta, records, bootstrap=0), records


def _cfg(search, budget, **kw):
    return SearchConfig(search=search, budget_tokens=budget, max_new_tokens=64, **kw)


def _found(res) -> int:
    """Prompts on which the search found 1111 within its budget."""
    return int((np.asarray(res["per_prompt"]["best_at_budget"])[:, -1] == 1.0).sum())


def test_beam_and_tree_find_the_answer_bon_misses_at_the_same_token_budget():
    pytest.importorskip("treequest")  # installed in CI: pip install -e ".[dev,tree]"
    budget = 192  # 32 whole rollouts of 6 tokens: bon finds 1111 with odds 1 - (1 - 0.3**4) ** 32 = 23 % a prompt
    runs = {
        "bon": _cfg("bon", budget),
        "beam": _cfg("beam", budget, step="tokens:1", beam_width=2, expand=3),
        "best_first": _cfg("tree", budget, step="tokens:1", tree_algo="best_first", expand=4),
        "abmcts": _cfg("tree", budget, step="tokens:1"),
        "abmcts_batch": _cfg("tree", budget, step="tokens:1", tree_batch=4),
    }
    res = {name: _best_at_budget(BitModel(), cfg, GOOD)[0] for name, cfg in runs.items()}
    found = {name: _found(r) for name, r in res.items()}
    best = {name: r["best_at_budget"]["mean"][-1] for name, r in res.items()}
    assert found["bon"] <= 4 and found["beam"] >= 9 and found["best_first"] >= 7 and found["abmcts"] >= 7, found
    assert found["abmcts_batch"] >= 6, found  # four expansions a call: the tree sees scores a batch late
    for name in ("beam", "best_first", "abmcts"):
        assert best[name] > best["bon"] + 0.1, best
    assert best["abmcts_batch"] > best["bon"] + 0.05, best
    for name in ("beam", "best_first", "abmcts", "abmcts_batch"):
        assert res[name]["tokens"]["generated_mean"] <= budget + 6  # matched: one call's steps past B at most
    # the exact verifier picks the best answer found; the curve rises with the tokens spent
    assert res["beam"]["final"]["verifier"]["hit_rate"]["mean"] == 1.0
    assert res["beam"]["final"]["verifier"]["selected"]["mean"] == best["beam"]
    curve = res["beam"]["best_at_budget"]["mean"]
    assert curve == sorted(curve) and curve[0] < curve[-1]


def test_answer_level_beam_and_tree_improve_on_bon_with_a_model_that_revises():
    pytest.importorskip("treequest")
    # m = 6 answers a rollout; each answer after the first is the one before it with one bit redrawn:
    # keeping the rollouts whose last answer is best (one answer a step) is a hill climb bon cannot do
    budget, m = 480, 6
    last = StepScorer("last answer", last_answer_ones, W)
    runs = {
        "bon": _cfg("bon", budget, num_answers=m),
        "beam": _cfg("beam", budget, num_answers=m, beam_width=2, expand=3),
        "best_first": _cfg("tree", budget, num_answers=m, tree_algo="best_first", expand=3),
        "abmcts": _cfg("tree", budget, num_answers=m),
    }
    res = {name: _best_at_budget(BitModel(m=m, copy=True), cfg, last)[0] for name, cfg in runs.items()}
    found = {name: _found(r) for name, r in res.items()}
    assert found["bon"] <= 2 and found["beam"] >= 5 and found["best_first"] >= 5 and found["abmcts"] > found["bon"], (
        found
    )


def test_a_bad_step_scorer_makes_beam_worse_than_bon():
    budget = 192
    beam = dict(step="tokens:1", beam_width=2, expand=3)
    bon, _ = _best_at_budget(BitModel(), _cfg("bon", budget), GOOD)
    bad, _ = _best_at_budget(BitModel(), _cfg("beam", budget, **beam), BAD)
    blind, _ = _best_at_budget(BitModel(), _cfg("beam", budget, **beam), StepScorer("constant", lambda ex, t: 0.5, W))
    at_b = {n: r["best_at_budget"]["mean"][-1] for n, r in (("bon", bon), ("bad", bad), ("blind", blind))}
    assert at_b["bad"] < at_b["bon"] - 0.2, at_b
    # the scorer itself did the harm: a beam that keeps arbitrary children (ties) does better than the bad one
    assert at_b["bad"] < at_b["blind"] - 0.1, at_b


@pytest.mark.parametrize(
    "search,kw",
    [
        ("bon", {}),
        ("beam", {"step": "tokens:2", "beam_width": 3, "expand": 2}),
        ("beam", {"step": "answer", "num_answers": 3, "beam_width": 2, "expand": 2}),
        ("beam", {"step": "delim:1", "beam_width": 2, "expand": 2}),
        ("tree", {"step": "tokens:1"}),
        ("tree", {"step": "tokens:1", "tree_batch": 4}),
        ("tree", {"step": "answer", "num_answers": 3, "tree_batch": 3}),
        ("tree", {"step": "answer", "num_answers": 3, "tree_algo": "best_first", "expand": 2}),
    ],
)
def test_every_generated_token_is_counted_once(search, kw):
    if search == "tree":
        pytest.importorskip("treequest")
    task = make_task()
    model = BitModel(m=kw.get("num_answers", 1), copy=kw.get("num_answers", 1) > 1)
    cfg = _cfg(search, 50, **kw)
    ex = task.load()[0]
    ledger = search_prompt(model, task, ex, model.format("q"), cfg, GOOD, seed=3)
    assert ledger.spent == model.total  # pruned branches included: the model counted every token it wrote
    assert ledger.calls == model.calls
    assert len(ledger.answers) == model.closed  # each finished answer handed over once, shared prefixes or not
    assert ledger.spent >= 50
    tokens_at = [a.tokens_at for a in ledger.answers]
    assert tokens_at == sorted(tokens_at) and all(0 < t <= ledger.spent for t in tokens_at)


class _FrozenConfig:
    """A backend config shared with other threads: the search must not set it."""

    max_new_tokens = 64

    def __setattr__(self, name, value):
        raise AssertionError(f"the search set gen.cfg.{name} = {value!r}")


def test_each_step_s_token_limit_is_passed_per_call_and_the_backend_config_is_left_alone():
    task = make_task()
    model = BitModel()
    model.cfg = _FrozenConfig()
    ex, prompt = task.load()[0], model.format("q")
    search_prompt(model, task, ex, prompt, _cfg("beam", 40, step="tokens:2"), GOOD, seed=1)
    beam_limits, model.limits = model.limits, []
    # a step of tokens:2 (1 where the rollout or the budget has 1 left); the calls that close the last answers
    # within the budget get what is left of it
    assert 2 in beam_limits and max(beam_limits) <= 40
    search_prompt(model, task, ex, prompt, _cfg("bon", 40), GOOD, seed=1)
    assert model.limits and set(model.limits) == {64}  # bon: a whole rollout per call


def test_revising_a_finished_node_drops_the_answer_the_scorer_misses_least():
    from vpo.search.step.search import Candidate, Ledger, Stepper, _drop_weakest

    task = make_task()
    cfg = _cfg("tree", 50, num_answers=3)
    ledger = Ledger(task, task.load()[0], 3)
    stepper = Stepper(BitModel(m=3), "q\n" + ASSISTANT, cfg, task, ledger, StepScorer("sum", _ones_total, W), seed=0)
    text = "<answer_1>1100</answer_1><answer_2>0001</answer_2><answer_3>1110</answer_3>"
    start = _drop_weakest(stepper, Candidate(text, 30, [0.5], True, 3))
    assert start.text == "<answer_1>1100</answer_1><answer_2>1110</answer_2>" and not start.done
    assert start.tokens == 20  # 30 tokens for 72 characters, scaled to the 48 kept
    assert _drop_weakest(stepper, Candidate("<answer_1>1</answer_1>", 3, [], True, 1)).text == ""


def _ones_total(example, partial_text: str) -> float:
    closed, _ = partial_answers(partial_text)
    return sum(a.count("1") for a in closed) / 12


def test_best_at_budget_counts_only_answers_finished_within_the_budget():
    meta = {
        "target_weights": [0.5, 0.5],
        "objectives": ["a", "b"],
        "search": {"budget_tokens": 100},
        "task": "t",
        "model": "m",
    }
    rec = {
        "prompt_id": "p",
        "tokens_generated": 130,
        "calls": 3,
        "answers": [
            {"text": "x", "reward": [0.2, 0.2], "valid": True, "tokens_at": 30},
            {"text": "y", "reward": [0.6, 0.6], "valid": True, "tokens_at": 100},
            {"text": "z", "reward": [1.0, 1.0], "valid": True, "tokens_at": 130},  # past the budget
        ],
    }
    res = search_metrics(meta, [rec], num_points=4, bootstrap=0, selectors=["noisy:0"])
    assert res["best_at_budget"]["tokens"] == [25, 50, 75, 100]
    assert res["best_at_budget"]["mean"] == [0.0, 0.2, 0.2, 0.6]
    assert res["final"]["verifier"]["selected"]["mean"] == 0.6
    assert res["tokens"]["over_budget_mean"] == 30.0
    # a prompt without any answer within the budget: its pick scores 0 and has no hit rate to count
    empty = {"prompt_id": "q", "tokens_generated": 100, "calls": 1, "answers": []}
    res = search_metrics(meta, [rec, empty], num_points=4, bootstrap=0)
    assert res["final"]["verifier"]["selected"]["mean"] == 0.3 and res["final"]["verifier"]["hit_rate"]["mean"] == 1.0


def test_search_report_headings_follow_the_ci_level():
    from vpo.search.step.report import replicate_table, search_markdown

    meta = {"target_weights": [0.5, 0.5], "objectives": ["a", "b"], "task": "t"}
    meta["search"] = {"search": "bon", "budget_tokens": 10}

    def run(seed):
        rng = np.random.default_rng(seed)
        recs = [
            {"prompt_id": f"p{i}", "tokens_generated": 10, "calls": 1,
             "answers": [{"text": "x", "reward": [float(v)] * 2, "valid": True, "tokens_at": 5}]}
            for i, v in enumerate(rng.random(8))
        ]  # fmt: skip
        return search_metrics({**meta, "model": f"m{seed}"}, recs, num_points=2, bootstrap=200, ci_level=0.5)

    results = {f"r{i}": run(i) for i in range(4)}
    groups = {"A": ["r0", "r1"], "B": ["r2", "r3"]}
    from vpo.search.step.report import paired_search

    text = search_markdown(results, paired=paired_search(results), replicated=replicate_table(results, groups, 0.5))
    assert "95 %" not in text and "95%" not in text
    assert "50 % bootstrap interval over prompts" in text
    assert "| vs | prompts | difference [50 % CI] |" in text and "| group | replicates | best@b [50 % CI] |" in text
    results95 = {n: {**r, "config": {**r["config"], "ci_level": 0.95}} for n, r in results.items()}
    assert "(mean over prompts, 95 % bootstrap interval over prompts)" in search_markdown(results95)


def test_search_records_are_fsynced_and_a_torn_tail_is_repaired(tmp_path, monkeypatch):
    import os

    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
    task = make_task()
    exs = task.load()[:3]
    run_search(BitModel(), task, exs, _cfg("bon", 20), GOOD, out_dir=tmp_path, progress=False)
    assert len(synced) == 3  # one per prompt's record, as a pool's rollouts (it only flushed before)
    path = tmp_path / "search" / "records.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:2]) + "\n" + lines[2][:10])  # a crash while writing the third
    with pytest.warns(RuntimeWarning, match="torn last line"):
        _, records = run_search(BitModel(), task, exs, _cfg("bon", 20), GOOD, out_dir=tmp_path, progress=False)
    assert [r["prompt_id"] for r in records] == ["p0", "p1", "p2"] and len(path.read_text().splitlines()) == 3


def test_step_aggregates_and_step_parsing():
    assert aggregate([0.5, 0.2, 0.8], "last") == 0.8
    assert aggregate([0.5, 0.2, 0.8], "min") == 0.2
    assert aggregate([0.5, 0.5], "prod") == 0.25
    assert aggregate([], "min") == 0.0
    assert parse_step("tokens:8") == ("tokens", 8)
    assert parse_step("delim:\\n") == ("delim", "\n")
    for bad in ("tokens:0", "tokens:x", "delim:", "lines"):
        with pytest.raises(UserError, match="--step"):
            parse_step(bad)


def test_step_scorer_errors_are_one_clear_line(tmp_path):
    task = make_task()
    with pytest.raises(UserError, match="has no step_score"):
        make_step_scorer("task", task, 1)
    with pytest.raises(UserError, match="--step-scorer 'nomodule_xyz:f'"):
        make_step_scorer("nomodule_xyz:f", task, 1)
    wrong = StepScorer("three", lambda ex, t: [1.0, 2.0, 3.0], W)
    with pytest.raises(UserError, match="vector of 3 entries"):
        wrong({}, "")
    assert StepScorer("vec", lambda ex, t: [1.0, 0.0], W)({}, "") == 0.5


def test_scorer_errors_are_counted_and_warned_not_silent_zeros():
    def picky(ex, a):
        if a.startswith("00"):
            raise RuntimeError("cannot score this")
        return _half(a, 0, 4)

    task = FunctionTask("picky", {"ones": picky, "again": picky}, make_task().load())
    exs = task.load()[:4]
    # the answers found: kept as invalid zeros, counted in the records and warned about once
    with pytest.warns(RuntimeWarning, match=r"raised on \d+ answer\(s\) the search found.*cannot score") as rec:
        _, records = run_search(BitModel(), task, exs, _cfg("bon", 60), GOOD, progress=False)
    assert len([w for w in rec if "search found" in str(w.message)]) == 1
    bad = [a for r in records for a in r["answers"] if a["text"].startswith("00")]
    assert bad and not any(a["valid"] for a in bad)
    assert sum(r.get("score_errors", 0) for r in records) == len(bad)
    # the verifier step scorer: the answers it passed over while guiding the search, counted and warned
    verifier = make_step_scorer("verifier", task, 1)
    beam = _cfg("beam", 60, step="answer", beam_width=2, expand=3)
    with pytest.warns(RuntimeWarning) as rec:
        run_search(BitModel(), task, exs, beam, verifier, progress=False)
    guided = [str(w.message) for w in rec if str(w.message).startswith("step scorer")]
    assert len(guided) == 1 and "step scorer 'verifier': task 'picky''s scorer raised on" in guided[0], guided
    assert verifier.errors > 0 and isinstance(verifier.first_error, RuntimeError)


def test_tree_without_treequest_says_how_to_install(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_treequest(name, *a, **k):
        if name == "treequest" or name.startswith("treequest."):
            raise ImportError("No module named 'treequest'")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_treequest)
    task = make_task()
    with pytest.raises(UserError, match=r'pip install -e "\.\[tree\]"'):
        search_prompt(BitModel(), task, task.load()[0], "q\n" + ASSISTANT, _cfg("tree", 20), GOOD, seed=0)


# -- the command line, on the session's real (randomly initialised) tiny Qwen2 ---------------------

MAZE = ["--task", "maze", "--task-options", '{"size": 5, "compact": true}', "--split", "validation"]


def _cli(argv, capsys):
    from vpo.cli import main as vpo_main

    code = vpo_main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_vpo_eval_search_end_to_end_resume_and_compare(tiny_model_dir, tmp_path, capsys):
    pytest.importorskip("treequest")
    common = ["eval", "--model", tiny_model_dir, *MAZE, "--num-prompts", "2", "--num-answers", "2"]
    common += ["--max-new-tokens", "16", "--budget-tokens", "48", "--bootstrap", "50", "--quiet", "--threads", "1"]
    runs = {
        "bon": ["--search", "bon"],
        "beam": ["--search", "beam", "--step", "tokens:4", "--beam-width", "2", "--beam-expand", "2"],
        "tree": ["--search", "tree", "--step", "answer", "--tree-algo", "best_first", "--beam-expand", "2"],
    }
    for name, extra in runs.items():
        code, out, err = _cli(common + extra + ["--out", str(tmp_path / name), "--selector", "noisy:0.1"], capsys)
        assert code == 0, err
        assert f"[{name}]" in out and (tmp_path / name / "search.md").exists()
        assert (tmp_path / name / "tokens_vs_best.png").stat().st_size > 1000
        doc = json.loads((tmp_path / name / "search.json").read_text())
        res = next(iter(doc["results"].values()))
        recs = [json.loads(x) for x in (tmp_path / name / "search" / "records.jsonl").read_text().splitlines()]
        assert len(recs) == 2 and all(r["tokens_generated"] >= 48 for r in recs)
        assert res["tokens"]["generated_total"] == sum(r["tokens_generated"] for r in recs)
        assert set(res["final"]) == {"verifier", "noisy:0.1"}
    # a rerun with the same settings resumes (nothing left to generate: the records stay as they are)
    before = (tmp_path / "beam" / "search" / "records.jsonl").read_text()
    code, _, err = _cli(common + runs["beam"] + ["--out", str(tmp_path / "beam")], capsys)
    assert code == 0 and (tmp_path / "beam" / "search" / "records.jsonl").read_text() == before
    # ... and other settings are refused there
    code, _, err = _cli(common + runs["bon"] + ["--out", str(tmp_path / "beam")], capsys)
    assert code == 2 and "other settings" in err
    code, out, err = _cli(["compare", *(str(tmp_path / n) for n in runs), "--out", str(tmp_path / "cmp")], capsys)
    assert code == 0, err
    md = (tmp_path / "cmp" / "search.md").read_text()
    assert "Paired difference at b=48" in md and "beam (w=2x2, step tokens:4, task/last)" in md


def test_search_flag_mistakes_exit_2_with_one_line(tiny_model_dir, tmp_path, capsys):
    base = ["eval", "--model", tiny_model_dir, *MAZE, "--num-prompts", "1", "--out", str(tmp_path / "x"), "--quiet"]
    cases = [
        (["--search", "beam"], "needs --budget-tokens"),
        (["--search", "beam", "--budget-tokens", "0"], "--budget-tokens must be an integer >= 1"),
        (["--search", "beam", "--budget-tokens", "9", "--step", "lines"], "--step 'lines'"),
        (["--search", "beam", "--budget-tokens", "9", "--step-scorer", "nomodule_xyz:f"], "--step-scorer"),
    ]
    for extra, want in cases:
        code, _, err = _cli(base + extra, capsys)
        assert code == 2 and want in err, (extra, err)
    code, _, err = _cli(["eval", "--pool", str(tmp_path), "--search", "beam", "--budget-tokens", "9"], capsys)
    assert code == 2 and "--pool only recomputes" in err


def test_compare_refuses_search_and_pool_runs_together(tmp_path, capsys):
    (tmp_path / "s" / "search").mkdir(parents=True)
    (tmp_path / "s" / "search" / "meta.json").write_text("{}")
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "report.json").write_text("{}")
    code, _, err = _cli(["compare", str(tmp_path / "s"), str(tmp_path / "p"), "--out", str(tmp_path / "c")], capsys)
    assert code == 2 and "compare each kind on its own" in err


def test_beam_refuses_the_chat_api():
    task = make_task()
    with pytest.raises(UserError, match="--api completions"):
        search_prompt(
            BitModel(), task, task.load()[0], [{"role": "user", "content": "q"}], _cfg("beam", 9), GOOD, seed=0
        )


# -- the budget kept, answers finished within it, and the report when few were (issue #51, item 7) ----------

BUDGET_CASES = [
    ("beam", {"step": "tokens:1", "beam_width": 4, "expand": 4}),
    ("beam", {"step": "tokens:2", "beam_width": 4, "expand": 4}),
    ("beam", {"step": "answer", "num_answers": 3, "beam_width": 4, "expand": 4}),
    ("beam", {"step": "delim:1", "beam_width": 2, "expand": 3}),
    ("tree", {"step": "tokens:1"}),
    ("tree", {"step": "tokens:2", "tree_batch": 4}),
    ("tree", {"step": "answer", "num_answers": 3, "tree_algo": "best_first", "expand": 3}),
]


@pytest.mark.parametrize("search,kw", BUDGET_CASES)
def test_beam_and_tree_spend_the_budget_and_not_a_token_more(search, kw):
    if search == "tree":
        pytest.importorskip("treequest")
    task = make_task()
    m = kw.get("num_answers", 1)
    for budget in (7, 24, 50, 97):
        for i, ex in enumerate(task.load()[:3]):
            model = BitModel(m=m, copy=m > 1)
            ledger = search_prompt(model, task, ex, model.format("q"), _cfg(search, budget, **kw), GOOD, seed=i)
            assert ledger.spent == model.total == budget, (
                budget,
                i,
                ledger.spent,
            )  # every call fitted to what was left
            assert all(a.tokens_at <= budget for a in ledger.answers)


def _finished_at(res) -> float:
    return res["finished"]["mean"][-1]


def test_token_step_beam_and_tree_finish_answers_at_small_budgets():
    pytest.importorskip("treequest")
    # answers of 6 tokens (tag, 4 bits, tag): best-of-n finishes B / 6 a prompt. A 4 x 4 beam of 1-token steps
    # used to finish its first answers after ~100 tokens and AB-MCTS finished almost none below that; both now
    # step while the budget left holds a step and closing their best candidates, then close those
    runs = {
        "bon": {},
        "beam": dict(step="tokens:1", beam_width=4, expand=4),
        "abmcts": dict(step="tokens:1"),
        "best_first": dict(step="tokens:1", tree_algo="best_first"),
    }
    for budget in (24, 48):
        res = {n: _best_at_budget(BitModel(), _cfg(n if n in ("bon", "beam") else "tree", budget, **kw), GOOD)[0]
               for n, kw in runs.items()}  # fmt: skip
        fin = {n: _finished_at(r) for n, r in res.items()}
        assert fin["bon"] == budget / 6, fin
        for n in ("beam", "abmcts", "best_first"):
            assert fin[n] >= fin["bon"] / 2, (budget, fin)
            assert res[n]["finished"]["prompts_without"][-1] == 0 and "warnings" not in res[n], res[n].get("warnings")
        if budget == 48:  # guided by a good scorer, they now beat best-of-n at a small budget too
            best = {n: r["best_at_budget"]["mean"][-1] for n, r in res.items()}
            assert min(best["beam"], best["abmcts"], best["best_first"]) > best["bon"], best


def test_the_report_counts_finished_answers_and_warns_when_few_were():
    from vpo.search.step.report import search_markdown

    meta = {"target_weights": [0.5, 0.5], "objectives": ["a", "b"], "search": {"search": "beam", "budget_tokens": 100,
            "beam_width": 4, "expand": 4, "step": "tokens:4", "step_scorer": "task", "step_aggregate": "last"},
            "task": "t", "model": "m"}  # fmt: skip
    # answers of 10 tokens: best-of-n would finish 10 in 100 tokens; this search finished 2 and 3
    few = [search_record("p0", [(0.5, 60), (1.0, 100)]), search_record("p1", [(0.2, 30), (0.3, 80), (0.9, 120)])]
    res = search_metrics(meta, few, num_points=2, bootstrap=0)
    assert res["finished"]["tokens"] == [50, 100] and res["finished"]["mean"] == [0.5, 2.0]
    assert res["finished"]["min"] == [0, 2] and res["finished"]["prompts_without"] == [1, 0]
    assert res["finished"]["bon_expected"] == [5.0, 10.0] and res["per_prompt"]["finished"] == [[0, 2], [1, 2]]
    assert len(res["warnings"]) == 1 and "few answers finished: 2.0 per prompt within 100 tokens" in res["warnings"][0]
    md = search_markdown({"beam run": res})
    assert "**Warning** (beam run): few answers finished" in md
    assert "| beam run | 0.5 (0) | 2.0 (2) | 10.0 |" in md
    # as many as best-of-n would finish: no warning
    many = [search_record(f"p{i}", [(0.5, 10 * (j + 1)) for j in range(10)]) for i in range(2)]
    assert "warnings" not in search_metrics(meta, many, num_points=2, bootstrap=0)
    # a prompt without any answer within the budget is named, whatever the others did
    none = many + [search_record("p9", [(1.0, 130)])]
    w = search_metrics(meta, none, num_points=2, bootstrap=0)["warnings"]
    assert len(w) == 1 and w[0].startswith("1 of 3 prompt(s) finished no answer within 100 generated tokens")
    # beside a best-of-n run, a search that finished under half of its answers at the shared budget is named
    from vpo.search.step.report import few_against_bon

    bon = search_metrics({**meta, "search": {**meta["search"], "search": "bon"}}, many, num_points=2, bootstrap=0)
    against = few_against_bon({"bon": bon, "beam run": res})
    assert against == [
        "beam run finished 2.0 answers per prompt within 100 tokens, under 0.5 of best-of-n's 10.0 (bon): its "
        "best@100 compares how many answers were written more than how well they were searched"
    ]
    assert "**Warning**: beam run finished 2.0" in search_markdown({"bon": bon, "beam run": res})
    assert few_against_bon({"bon": bon, "beam": search_metrics(meta, many, num_points=2, bootstrap=0)}) == []
    assert few_against_bon({"beam run": res}) == []  # no best-of-n run to hold it against
    # reports written before answers were counted still render
    old = {k: v for k, v in res.items() if k not in ("finished", "warnings")}
    assert "Warning" not in search_markdown({"old": old}) and "best-of-n would finish" not in search_markdown(
        {"old": old}
    )


def test_vpo_eval_search_warns_on_the_console_and_in_the_report_when_the_budget_finished_nothing(
    tiny_model_dir, tmp_path, capsys
):
    # 6 tokens cannot hold a maze route: nothing is finished, which the report and the console say
    argv = ["eval", "--model", tiny_model_dir, *MAZE, "--num-prompts", "2", "--max-new-tokens", "16"]
    argv += ["--budget-tokens", "6", "--search", "beam", "--step", "tokens:2", "--beam-width", "2"]
    argv += ["--beam-expand", "2", "--bootstrap", "20", "--quiet", "--threads", "1", "--no-plots"]
    code, out, err = _cli(argv + ["--out", str(tmp_path / "s")], capsys)
    assert code == 0, err
    assert "0.0 answers finished per prompt" in out
    assert "vpo eval: warning:" in err and "2 of 2 prompt(s) finished no answer within 6 generated tokens" in err
    assert "**Warning**" in (tmp_path / "s" / "search.md").read_text()
    res = next(iter(json.loads((tmp_path / "s" / "search.json").read_text())["results"].values()))
    assert res["warnings"] and res["finished"]["mean"][-1] == 0.0


def test_the_step_note_names_a_beam_that_samples_as_best_of_n():
    from vpo.search.step.cli import step_note

    assert "samples as best-of-n does" in step_note(_cfg("beam", 96))  # m = 1, --step answer (the default)
    assert step_note(_cfg("tree", 96, num_answers=3)) is None  # answer steps of a 3-answer rollout: each closes one
    assert "closes them" in step_note(_cfg("tree", 96, step="tokens:4"))
    assert step_note(_cfg("bon", 96)) is None
