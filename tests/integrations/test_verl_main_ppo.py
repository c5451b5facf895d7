"""veRL's real ``main_ppo`` trains with the VPO estimator on CPU, end to end (``-m verl``, in .venv-verl).

One recipe run (examples/verl/run_cpu.py: the maze task, 3-answer prompts, the tiny policy with a
short warm start, 2 FSDP2 ranks on gloo, the ``vpo_hf`` rollout sampling from an HF copy of the
policy, Ray started and stopped by the run) for 2 steps with a checkpoint at step 2, then the same
command resumed to step 4. From what the run itself wrote (``VPO_VERL_DUMP_DIR``: the estimator's
inputs and outputs, the score function's reward matrices, the weights' hashes on both sides of
every sync, every rollout's tokens and log-probs; and veRL's own metrics file) the tests check:

* the advantages veRL used equal :func:`vpo.core.compute_advantages` on the same rewards, valid
  masks and group ids, rollout by rollout (<= 1e-6), at every step;
* the policy changes and the rollouts follow it: the actor's weights differ after every step, each
  replica loads exactly the actor's weights (hash) after every update, and each rollout was sampled
  with the weights of its step; veRL's rollout-vs-actor probability gap stays under ``PROB_TOL``;
* the completions parse (answers per rollout), the per-objective rewards and the set-score
  diagnostics appear in veRL's logged (validation) metrics;
* the checkpoint saved at step 2 resumes, and the resumed run reaches step 4; its latest checkpoint
  is merged into ``<out>/model`` with the run's task, options and m, and ``vpo eval --model`` on it
  gives what the explicit command gives;
* veRL's *training* metrics carry vpo's per-step figures (per-objective rewards, parse failures, the
  flat-group share and the mean set score, the last two equal to what the estimator was given), and
  ``run.jsonl`` counts the run's whole process tree (33-35 processes, PSS beside summed RSS).

A third run, one step on a user's task file (``path.py:factory`` with ``--task-options``) whose rewards
are constant, checks that a run without learning signal says so in its log, on stderr and in
``run.jsonl``.

Cost: about 4-5 minutes on 2 cores (most of it Ray and model start-up, three times).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.verl

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / "examples" / "verl" / "run_cpu.py"
STEPS_FIRST, STEPS_TOTAL = 2, 4
PROMPTS, ROLLOUTS, M = 4, 4, 3
WARM_STEPS = int(os.environ.get("VPO_VERL_TEST_WARM_STEPS", "150"))
POLICY = os.environ.get("VPO_VERL_TEST_POLICY")
"""A prebuilt policy checkpoint to start from (default: build the tiny one with WARM_STEPS)."""
ADV_TOL = 1e-6
"""Max |A_verl - A_core| per rollout (measured: 4.9e-8; both sides compute the z-score in float32)."""
MIN_PROCESSES = 30
"""A 2-rank run has 35-37 processes (Ray's daemons and workers, the two ranks, the rollout and reward
workers: an outside watch of the whole session counted them); the former count by process group or
temp dir saw 21."""
PROB_TOL = 1e-4
"""Max |p_rollout - p_actor| per token (veRL's ``training/rollout_probs_diff_max``): both sides run the
same fp32 weights (measured: about 1.2e-6, float32 rounding; a random-token rollout gives 0.013)."""
LOGP_TOL = 1e-4
"""Max |log p| difference between the server's log-probs of its step-1 samples and a full forward of
the starting checkpoint on prompt + response (incremental KV-cache decoding vs one pass, fp32)."""


def _read_jsonl(paths) -> list[dict]:
    out = []
    for p in sorted(paths):
        out += [json.loads(line) for line in Path(p).read_text().splitlines() if line.strip()]
    return out


def _run(out: Path, work: Path, steps: int, dump: Path, tag: str, task: tuple = ("--task", "maze")) -> dict:
    cmd = [
        sys.executable,
        str(RUN),
        "--method",
        "vpo",
        *task,
        "--steps",
        str(steps),
        "--out",
        str(out),
        "--work",
        str(work),
        "--warm-steps",
        str(WARM_STEPS),
        *(["--policy", POLICY] if POLICY else []),
        "--prompts-per-step",
        str(PROMPTS),
        "--rollouts",
        str(ROLLOUTS),
        "--save-freq",
        "2",
        "--dump",
        str(dump),
        "--tag",
        tag,
        "--timeout",
        "600",
        "--",
        "trainer.test_freq=2",
        "data.val_max_samples=8",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    lines = [line for line in res.stdout.splitlines() if line.startswith("{")]
    assert res.returncode == 0 and lines, (
        f"run_cpu.py failed ({res.returncode}):\n{res.stdout[-3000:]}\n{res.stderr[-5000:]}"
    )
    return {**json.loads(lines[-1]), "stderr": res.stderr}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    pytest.importorskip("verl", reason="verl is not installed here (bash scripts/setup_verl_env.sh)")
    reuse = os.environ.get("VPO_VERL_TEST_RUN_DIR")  # re-check a finished run's files (development)
    root = Path(reuse) if reuse else tmp_path_factory.mktemp("verl_main_ppo")
    out, dump1, dump2 = root / "vpo", root / "dump1", root / "dump2"
    if reuse:
        first, second = _read_jsonl([out / "run.jsonl"])[-2:]
    else:
        first = _run(out, root, STEPS_FIRST, dump1, "first")
        second = _run(out, root, STEPS_TOTAL, dump2, "resumed")
    return {"root": root, "out": out, "dumps": (dump1, dump2), "records": (first, second)}


PAIR_TASK = """from vpo.tasks import FunctionTask


def make(k=1.0):
    # test-only task (named as such): constant rewards; with k = 0 every answer scores what a rollout
    # without an answer scores (0), so every group of every step is flat
    return FunctionTask("pair", {"a": lambda ex, a: k, "b": lambda ex, a: 0.0},
                        examples=[{"id": i, "question": f"Say {i}."} for i in range(64)])
"""


@pytest.fixture(scope="module")
def flat_run(runs):
    """One step of the recipe on a user's task file whose rewards are constant (no learning signal)."""
    root = runs["root"]
    task_file = root / "user_tasks" / "pair_task.py"
    task_file.parent.mkdir(exist_ok=True)
    task_file.write_text(PAIR_TASK)
    policy = POLICY or str(root / "policy_maze")
    task = (
        "--task",
        f"{task_file}:make",
        "--task-options",
        '{"k": 0.0}',
        "--policy",
        policy,
        "--max-prompt-length",
        "320",
    )
    return _run(root / "flat", root, 1, root / "dump_flat", "flat", task=task)


def _metrics(path) -> dict[int, dict]:
    return {r["step"]: r["data"] for r in _read_jsonl([path])}


def test_runs_exit_cleanly_and_the_checkpoint_resumes_to_step_4(runs):
    first, second = runs["records"]
    for rec in (first, second):
        assert rec["returncode"] == 0 and rec["leftover_processes"] == 0, rec
    m1, m2 = _metrics(first["metrics"]), _metrics(second["metrics"])
    assert sorted(k for k in m1 if "timing_s/step" in m1[k]) == [1, 2]
    # the second run started from the step-2 checkpoint: it trained steps 3 and 4 only
    assert sorted(k for k in m2 if "timing_s/step" in m2[k]) == [3, 4]
    ckpt = runs["out"] / "checkpoints"
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text().strip() == "4"
    assert (ckpt / "global_step_2").is_dir() and (ckpt / "global_step_4").is_dir()
    # the resumed actor starts from the step-2 weights: its first sync sends what step 2 ended with
    (d1, d2) = runs["dumps"]
    sent1 = {(r["replica"], r["global_steps"]): r["hash"] for r in _read_jsonl(d1.glob("actor_weights.*.jsonl"))}
    sent2 = _read_jsonl(d2.glob("actor_weights.*.jsonl"))
    first_sync = min(sent2, key=lambda r: r["global_steps"])
    assert first_sync["global_steps"] == 2 and first_sync["hash"] == sent1[(first_sync["replica"], 2)]


def _core_advantages(scores_by_uid, uids):
    """vpo.core's VPO advantages on the reward matrices the score function saw, with the weightings
    the score function drew for each group (HashedGroupSampler, the run's settings)."""
    import torch

    from vpo.core import EstimatorConfig, compute_advantages
    from vpo.integrations.verl_reward import HashedGroupSampler

    rewards = np.array([r["rewards"] for r in scores_by_uid])
    valid = np.array([r["valid"] for r in scores_by_uid])
    keys = list(dict.fromkeys(uids))
    res = compute_advantages(
        "vpo",
        rewards,
        valid,
        group_ids=uids,
        config=EstimatorConfig(num_weightings=100, weight_alpha=1.0, weight_sampler="iid"),
        sampler=HashedGroupSampler(keys, 100, 1.0, "iid", 0),
    )
    return res.advantages.to(torch.float64).numpy(), res.scores.to(torch.float64).numpy()


def test_advantages_veRL_used_equal_vpo_core_at_every_step(runs):
    for dump in runs["dumps"]:
        est = _read_jsonl(dump.glob("estimator.*.jsonl"))
        scored = defaultdict(list)
        for r in _read_jsonl(dump.glob("scores.*.jsonl")):
            scored[r["uid"]].append(r)
        assert est, f"the estimator wrote nothing under {dump}"
        for call in est:
            assert call["method"] == "vpo" and call["constant_over_tokens"]
            uids = call["uid"]
            assert len(uids) == PROMPTS * ROLLOUTS and len(set(uids)) == PROMPTS
            # the score function scored exactly these rollouts: G per group
            assert {u: len(scored[u]) for u in set(uids)} == dict.fromkeys(set(uids), ROLLOUTS)
            rows, verl_adv, verl_score = [], [], []
            # rollouts of a group are matched by score (veRL's order within a group is not the
            # score function's; rollouts with equal scores have equal advantages)
            by_uid = defaultdict(list)
            for i, u in enumerate(uids):
                by_uid[u].append(i)
            order_uids = []
            for u, idx in by_uid.items():
                idx = sorted(idx, key=lambda i: call["score"][i])
                recs = sorted(scored[u], key=lambda r: r["score"])
                rows += recs
                order_uids += [u] * len(recs)
                verl_adv += [call["advantage"][i] for i in idx]
                verl_score += [call["score"][i] for i in idx]
            core_adv, core_score = _core_advantages(rows, order_uids)
            verl_adv, verl_score = np.array(verl_adv), np.array(verl_score)
            np.testing.assert_allclose(verl_score, core_score, atol=1e-6, rtol=0)
            err = np.abs(verl_adv - core_adv)
            assert err.max() <= ADV_TOL, (err.max(), verl_adv, core_adv)
            g = np.array(order_uids)
            flat = np.array([np.ptp(core_score[g == u]) == 0 for u in order_uids])
            assert np.all(verl_adv[flat] == 0.0)  # a group with one score: no signal


def test_learning_signal_is_not_empty(runs):
    """Some group has differing set scores at some step: the advantage check above is not vacuous."""
    nonzero = 0
    for dump in runs["dumps"]:
        for call in _read_jsonl(dump.glob("estimator.*.jsonl")):
            nonzero += int(np.count_nonzero(np.abs(call["advantage"]) > 1e-3))
    assert nonzero >= 4


def test_policy_changes_and_every_replica_holds_the_actors_weights(runs):
    from transformers import AutoModelForCausalLM

    from vpo.integrations.verl_cpu import state_hash

    for k, dump in enumerate(runs["dumps"]):
        sent = _read_jsonl(dump.glob("actor_weights.*.jsonl"))
        loaded = _read_jsonl(dump.glob("server_weights.*.jsonl"))
        steps = sorted({r["global_steps"] for r in sent})
        want = list(range(0, STEPS_FIRST + 1)) if k == 0 else list(range(STEPS_FIRST, STEPS_TOTAL + 1))
        assert steps == want
        by_step = defaultdict(dict)
        for r in sent:
            by_step[r["global_steps"]][r["replica"]] = r["hash"]
        for r in loaded:
            assert by_step[r["global_steps"]][r["replica"]] == r["hash"]  # replica == actor, every update
        assert all(len(set(v.values())) == 1 and len(v) == 2 for v in by_step.values())  # 2 replicas, one actor
        hashes = [next(iter(by_step[s].values())) for s in steps]
        assert len(set(hashes)) == len(hashes), "the actor's weights did not change after some step"
        if k == 0:  # step 0 sends the starting checkpoint's weights
            model = AutoModelForCausalLM.from_pretrained(POLICY or runs["root"] / "policy_maze")
            assert hashes[0] == state_hash(model.state_dict().items())  # veRL sends the tied lm_head too
        # each rollout was sampled with the weights synced for its step
        for r in _read_jsonl(dump.glob("rollout.*.jsonl")):
            assert r["weights_hash"] == by_step[r["global_steps"]][r["replica"]]


def test_rollout_log_probs_match_the_actor_and_sampling_follows_the_settings(runs):
    for rec in runs["records"]:
        for step, data in _metrics(rec["metrics"]).items():
            if "timing_s/step" not in data:
                continue
            assert data["training/rollout_probs_diff_valid"] == 1
            assert data["training/rollout_probs_diff_max"] <= PROB_TOL, (step, data["training/rollout_probs_diff_max"])
            assert data["training/rollout_actor_probs_pearson_corr"] >= 0.999
            assert data["response_length/max"] <= 48  # the server capped the length itself
    rollouts = [r for d in runs["dumps"] for r in _read_jsonl(d.glob("rollout.*.jsonl"))]
    train = [r for r in rollouts if r["temperature"] == 1.0]
    assert len(train) >= STEPS_TOTAL * PROMPTS * ROLLOUTS
    assert all(len(r["token_ids"]) == len(r["log_probs"]) <= 48 for r in rollouts)
    assert all(all(lp <= 0.0 for lp in r["log_probs"]) for r in rollouts)
    # it stops after the last answer tag (or EOS), not at the length cap, for most samples
    stopped = sum(r["stop"] in ("stop", "eos") for r in train) / len(train)
    assert stopped >= 0.5, stopped


def test_server_log_probs_are_the_policys_own(runs):
    """The step-1 samples came from the starting weights: one full forward of that checkpoint on
    prompt + response gives the server's log-probs (temperature 1, no top-p: the raw distribution)."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(POLICY or runs["root"] / "policy_maze", dtype=torch.float32)
    model.eval()
    recs = [r for r in _read_jsonl(runs["dumps"][0].glob("rollout.*.jsonl")) if r["global_steps"] == 0]
    assert len(recs) >= PROMPTS * ROLLOUTS
    worst = 0.0
    with torch.no_grad():
        for r in recs[:8]:
            assert r["temperature"] == 1.0 and r["top_p"] == 1.0
            ids = torch.tensor([r["prompt_ids"] + r["token_ids"]])
            logp = torch.log_softmax(model(input_ids=ids).logits[0].float(), -1)
            n = len(r["prompt_ids"])
            own = logp[n - 1 : -1].gather(1, torch.tensor(r["token_ids"])[:, None])[:, 0]
            worst = max(worst, float((own - torch.tensor(r["log_probs"])).abs().max()))
    assert worst <= LOGP_TOL, worst


def test_completions_parse_and_reward_diagnostics_reach_veRLs_metrics(runs):
    scored = [r for d in runs["dumps"] for r in _read_jsonl(d.glob("scores.*.jsonl"))]
    valid = np.array([r["valid"] for r in scored])
    assert valid.shape[1] == M
    assert valid.any(axis=1).mean() >= 0.5, "fewer than half of the completions had a parseable answer"
    metrics = {}
    for rec in runs["records"]:
        for data in _metrics(rec["metrics"]).values():
            metrics.update(data)
    from vpo.tasks.maze import MazeTask

    objectives = MazeTask().objectives
    names = " ".join(metrics)
    for key in [f"vpo_r{i}_{o}" for i in range(M) for o in objectives] + [
        "vpo_num_answers",
        "vpo_num_parsed",
        "vpo_best_target",
    ]:
        assert key in names, f"{key} is not in veRL's logged metrics"
    assert "critic/score/mean" in metrics and "critic/advantages/max" in metrics


def test_training_metrics_carry_vpo_diagnostics_at_every_step(runs):
    """veRL's training metrics (not only validation's) hold vpo's per-objective rewards, parse
    failures, flat-group share and mean set score at every step, and the last two equal what the
    estimator was given at that step."""
    from vpo.tasks.maze import MazeTask

    objectives = MazeTask().objectives
    metrics = {}
    for rec in runs["records"]:
        metrics.update(_metrics(rec["metrics"]))
    batches = []
    for dump in runs["dumps"]:
        batches += sorted(_read_jsonl(dump.glob("estimator.*.jsonl")), key=lambda r: r["time"])
    assert len(batches) == STEPS_TOTAL
    for step, batch in enumerate(batches, start=1):
        data = metrics[step]
        for key in [f"vpo/objective/{o}" for o in objectives] + ["vpo/parse_failure_rate", "vpo/flat_group_batches"]:
            assert key in data, (step, key)
        scores, uids = np.array(batch["score"]), np.array(batch["uid"])
        flat = np.mean([np.ptp(scores[uids == u]) <= 1e-6 for u in dict.fromkeys(batch["uid"])])
        assert data["vpo/flat_group_frac"] == pytest.approx(flat), step
        assert data["vpo/score"] == pytest.approx(scores.mean(), abs=1e-6), step
        assert 0 <= data["vpo/parse_failure_rate"] <= 1


def test_a_run_without_signal_warns_in_its_log_and_at_the_end(flat_run):
    """A user's task file (path:factory, with --task-options) trains through the recipe; its constant
    rewards leave every group flat, which the run's log, its stderr, run.jsonl and the metrics say."""
    rec = flat_run
    assert rec["task"].startswith("/") and rec["task"].endswith("pair_task.py:make")
    assert rec["task_options"] == {"k": 0.0}
    assert rec["flat_steps"] == rec["vpo_metric_steps"] == 1
    assert "no learning signal in 1 of 1 steps" in rec["stderr"]
    assert "every group is flat" in Path(rec["log"]).read_text(errors="replace")
    data = _metrics(rec["metrics"])[1]
    assert data["vpo/flat_group_frac"] == 1.0 and data["vpo/flat_group_batches"] == 1.0
    if data["vpo/parse_failure_rate"] < 1:  # the task's option (k = 0, not the default 1) reached the workers
        assert data["vpo/objective/a"] == 0.0 and data["vpo/objective/b"] == 0.0


def test_the_memory_figure_counts_every_process_of_the_run(runs):
    """run.jsonl's process count and memory come from the run's whole process tree (Ray's workers
    included) and report PSS beside summed RSS."""
    for rec in runs["records"]:
        assert rec["process_tree"] == "subreaper"
        assert rec["max_processes"] >= MIN_PROCESSES, rec
        assert 0 < rec["peak_pss_gib"] <= rec["peak_rss_sum_gib"]


def test_the_merged_model_evaluates_as_the_explicit_command(runs, tmp_path):
    """#51 item 2 end to end: after the resumed run, <out>/model is the latest checkpoint (step 4)
    merged by veRL's model_merger, with the run's task, options and m in its vpo_args.json, and
    `vpo eval --model <out>/model` (nothing else named) gives what the explicit command gives."""
    model = Path(runs["records"][1]["model"])
    assert model == runs["out"] / "model" and (model / "config.json").exists(), runs["records"][1]
    saved = json.loads((model / "vpo_args.json").read_text())
    assert saved["global_step"] == STEPS_TOTAL and saved["task"] == "maze" and saved["num_answers"] == M
    said = runs["records"][1].get("stderr")  # None where the fixture re-reads a finished run
    assert said is None or f"evaluate it: vpo eval --model {model}" in said
    fast = ["--rollouts", "2", "--num-prompts", "2", "--max-new-tokens", "48", "--ks", "1,2", "--bootstrap", "0"]
    fast += ["--no-plots", "--quiet", "--threads", "1"]
    explicit = ["--task", "maze", "--task-options", json.dumps(saved["task_options"]), "--num-answers", str(M)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    for name, extra in (("implicit", []), ("explicit", explicit)):
        cmd = [sys.executable, "-c", "import sys; from vpo.cli import main; sys.exit(main())", "eval"]
        res = subprocess.run(
            [*cmd, "--model", str(model), *extra, "--out", str(tmp_path / name), *fast],
            capture_output=True, text=True, env=env, timeout=300,
        )  # fmt: skip
        assert res.returncode == 0, res.stderr[-3000:]
    a, b = ((tmp_path / n / "pool" / "rollouts.jsonl").read_text() for n in ("implicit", "explicit"))
    assert a == b
    ra, rb = (json.loads((tmp_path / n / "report.json").read_text())["results"] for n in ("implicit", "explicit"))
    (ra,), (rb,) = ra.values(), rb.values()
    assert ra["metrics"] == rb["metrics"] and ra["shape"]["m"] == M
