"""Every benchmark in benchmarks/ runs: each is run with ``--quick --json`` (tiny sizes, seconds) and
the JSON object on its last line must hold the keys the docs quote. The figures themselves stay out
of CI (a shared machine makes them noise); this only catches a broken benchmark, and a doc quoting a
key the script no longer prints. The fast ones are in the default suite, the slower ones (trainers,
model generation, a demo warm start) in the slow suite, which CI also runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# The keys each benchmark's docs quote. Keep each list next to the doc it serves: when a doc starts
# quoting another key, add it here.
QUOTED_KEYS = {
    # docs/estimators.md "Figures" and "Reproduce" (JSON keys), README "Measured figures"
    "estimators": [
        *(
            f"{k}_d{d}"
            for d in (4, 16)
            for k in (
                "vec_f32_ms",
                "vec_f64_ms",
                "numpy_loop_f32_ms",
                "numpy_loop_f64_ms",
                "torch_loop_f32_ms",
                "torch_loop_f64_ms",
                "speedup_numpy_loop_f32",
                "speedup_numpy_loop_f64",
                "speedup_torch_loop_f32",
                "speedup_torch_loop_f64",
                "reference_loop_ms",
                "speedup_reference_loop_f64",
                "speedup_reference_loop_f32",
                "per_repeat_speedup_reference_f64_median",
                "per_repeat_speedup_reference_f64_iqr",
                "draw_numpy_per_group_ms",
                "draw_batch_f32_ms",
                "max_abs_diff_reference_loop",
                "iid_noise",
                "sobol_noise",
                "sobol_noise_ratio",
                "sobol_spacings_noise_ratio",
                "sobol_lms_noise_ratio",
            )
        ),
        "threads",
        # docs/estimators.md "VPO@k's per-weighting shares"
        "vpo_at_k_shares_vec_ms",
        "vpo_at_k_shares_loop_ms",
        "speedup_vpo_at_k_shares",
        "vpo_at_k_shares_identical",
    ],
    # docs/training.md "Speed", README "Measured figures"
    "train_step": [
        "s_per_step_trl_grpo",
        "s_per_step_vpo_grpo",
        "s_per_step_vpo_m3",
        "ratio_vpo_m3_vs_trl_grpo_median",
        "ratio_vpo_m3_vs_trl_grpo_iqr",
        "ratio_vpo_m3_vs_trl_grpo_range",
        "ratio_vpo_grpo_vs_trl_grpo_median",
        "rounds",
        "tokens_single",
        "tokens_vpo_m3",
        "rollouts_per_step",
    ],
    # docs/sandbox.md (benchmark section), README "Measured figures"
    "sandbox": ["tests_per_s_worker", "tests_per_s_subprocess", "speedup_vs_subprocess_per_test", "code_answers_per_s"],
    # docs/sandbox.md "Seccomp filter" and "Soak"
    "sandbox_seccomp": [
        "per_test_ms_seccomp_on",
        "per_test_ms_seccomp_off",
        "seccomp_cost_ms_median",
        "seccomp_overhead_ratio",
        "syscall_heavy_overhead_ratio",
        "seccomp_cost_us_per_syscall",
    ],
    "sandbox_soak": [
        "programs",
        "programs_per_s",
        "leaked_processes",
        "leaked_cgroups",
        "leaked_scratch_dirs",
        "fd_delta",
        "rss_delta_mb",
        "throughput_first_slice",
        "throughput_last_slice",
        "throughput_drift_ratio",
        "unexpected_outcomes",
        "sandbox_errors",
    ],
    # docs/tasks.md (scorer throughput), README "Measured figures"
    "scorers": [f"answers_per_s_{t}" for t in ("maze", "musique", "eureqa", "toolrl", "code")],
    # docs/eval.md (benchmark section), README "Measured figures" (all search metrics, seconds)
    "metrics": ["metrics_median_s_m1", "metrics_median_s_m3", "metrics_speedup_m1", "metrics_speedup_m3"],
    # docs/demo.md (static KV cache), README "Measured figures"
    "generation": ["dynamic_cache_s", "static_cache_s", "speedup_static_vs_dynamic"],
    # docs/training.md "Search evaluation during training" (overhead per evaluation, vpo/pool/... logs)
    "search_eval": [
        "step_s",
        "eval_s",
        "eval_generation_s",
        "eval_over_step",
        "amortised_overhead",
        "pool_logs_ms",
        "answers_per_eval",
    ],
    # docs/demo.md "Where the time goes", docs/training.md (shared_prompt_forward)
    "shared_prefix": [
        "trl_s_grpo",
        "shared_s_grpo",
        "speedup_grpo",
        "speedup_grpo_range",
        "tokens_grpo",
        "gen_plain_s_grpo",
        "gen_shared_s_grpo",
        "gen_speedup_grpo",
    ],
    # docs/evolve.md "Old vs new selection on the examples"
    "evolve_islands": [
        f"{p}_{s}_{k}"
        for p in ("poly_fit", "tradeoff")
        for s in ("default", "vpo")
        for k in (
            "solved",
            "solved_at_mean",
            "best_score_mean",
            "coverage_third",
            "coverage_two_thirds",
            "coverage_final",
            "archive_size_mean",
        )
    ],
    # docs/training.md "Speed", README "Measured figures" (VPO step memory against GRPO)
    "step_memory": [
        "step_mb_grpo",
        "step_mb_vpo",
        "peak_mb_grpo",
        "peak_mb_vpo",
        "step_mem_ratio_vpo_vs_grpo",
        "step_mem_ratio_pairs_median",
        "s_per_step_ratio_vpo_vs_grpo",
        "tokens_per_rollout_grpo",
        "tokens_per_rollout_vpo",
    ],
    # docs/demo.md "Where the time goes" (the warm start's operator shares)
    "warm_start_profile": ["shares", "batch", "steps"],
    # docs/demo.md "Where the time goes" (what the remaining CPU switches buy)
    "cpu_speed_options": ["warm_start_step", "sampling", "repeats"],
    # docs/performance.md (the policy pass by operator group)
    "step_phases": ["wall_s", "groups_s", "rows", "prompt", "completion"],
    # docs/performance.md "How close to the machine" (the sampler before and after this round's cuts)
    "sampler_ab": [
        "time_ratio_today_vs_baseline",
        "fraction_of_limit_baseline",
        "fraction_of_limit_today",
        "same_tokens",
    ],
    # benchmarks/demo_profile.py's own table (no doc quotes it yet); --quick profiles grpo only
    "demo_profile": ["grpo_step_s", "grpo_generation_share", "grpo_estimator_share", "grpo_job_start_s"],
}

FAST = [
    "estimators",
    "sandbox",
    "scorers",
    "generation",
    "sandbox_seccomp",
    "sandbox_soak",
    "shared_prefix",
    "warm_start_profile",
    "cpu_speed_options",
    "step_phases",
    "sampler_ab",
]  # ~5 s each here
SLOW = [
    "train_step",
    "step_memory",
    "metrics",
    "search_eval",
    "evolve_islands",
]  # trainers / generation / 4 evolve runs: 15-60 s each here


def _run(name: str, *extra: str, timeout: int = 300) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1")
    r = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / f"{name}.py"), "--quick", "--json", *extra],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert r.returncode == 0, f"{name} --quick failed:\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    last = r.stdout.strip().splitlines()[-1]
    return json.loads(last)


def _check(name: str, out: dict) -> None:
    missing = [k for k in QUOTED_KEYS[name] if k not in out]
    assert not missing, f"benchmarks/{name}.py --json lacks keys its docs quote: {missing}"


OWN_STAGE = {"vllm_vs_transformers": ".venv-vllm/bin/python benchmarks/vllm_vs_transformers.py --quick --json"}
"""Benchmarks that need an environment of their own: their --quick run is a line of .ci/run's stage for
that environment (vLLM is not in the main environment), checked here to be there."""


def test_every_benchmark_has_a_quick_check():
    scripts = {p.stem for p in (ROOT / "benchmarks").glob("*.py")}
    assert scripts == set(QUOTED_KEYS) | set(OWN_STAGE), "a benchmark without a --quick check (or a stale entry)"
    assert set(FAST) | set(SLOW) | {"demo_profile"} | set(OWN_STAGE) == scripts
    ci = (ROOT / ".ci" / "run").read_text()
    for name, line in OWN_STAGE.items():
        assert line in ci, f"benchmarks/{name}.py: its --quick run is not in .ci/run"
    for name in scripts:
        assert "--quick" in (ROOT / "benchmarks" / f"{name}.py").read_text(), f"{name}: no --quick"


@pytest.mark.parametrize("name", FAST)
def test_quick_benchmark_runs_and_has_the_quoted_keys(name):
    _check(name, _run(name))


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW)
def test_quick_slow_benchmark_runs_and_has_the_quoted_keys(name):
    _check(name, _run(name))


@pytest.mark.slow
def test_quick_demo_profile_runs_and_has_the_quoted_keys(tmp_path):
    """demo_profile needs a demo directory with a warm start: a tiny one (30 steps of a 1-layer model
    on 60 mazes) is enough to check that the profile runs and prints its keys."""
    out = tmp_path / "demo"
    tiny = [
        "--set",
        "warm_steps=30",
        "--set",
        "train_problems=60",
        "--set",
        "hidden_size=32",
        "--set",
        "num_layers=1",
        "--set",
        "eval_problems=4",
        "--set",
        "eval_budget=3",
        "--set",
        "ks=1,3",
        "--set",
        "eval_seeds=1",
    ]
    r = subprocess.run(
        [sys.executable, "-m", "vpo.cli", "demo", "--quick", "--warm-only", "--out", str(out), *tiny],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, HF_HUB_OFFLINE="1"),
    )
    assert r.returncode == 0, r.stderr[-3000:]
    _check("demo_profile", _run("demo_profile", "--demo-dir", str(out), timeout=600))
