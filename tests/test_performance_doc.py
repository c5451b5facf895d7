"""docs/performance.md and the README quote the shipped benchmark JSON (docs/performance/*.json)
exactly: every table and figure below is rendered here from those files and must appear verbatim."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PERF = ROOT / "docs" / "performance"
PHASES = ("generation", "scoring", "advantages", "logprob", "forward", "backward", "optimizer", "other")
NAMES = {
    "trl_grpo": "TRL `GRPOTrainer`",
    "vpo_grpo": "`VPOTrainer`, grpo",
    "vpo_m3": "`VPOTrainer`, vpo m = 3",
    "vpo_m3_plain": "vpo m = 3, plain (before)",
}


def _load(name: str) -> dict:
    return json.loads((PERF / f"{name}.json").read_text())


def _r(x: float, d: int = 2) -> str:
    return f"{x:.{d}f}"


def profile_table(d: dict) -> str:
    kinds = list(d["profile_s"])
    lines = ["| phase | " + " | ".join(NAMES[k] for k in kinds) + " |", "|---" * (len(kinds) + 1) + "|"]
    for ph in PHASES:
        lines.append(f"| {ph} | " + " | ".join(_r(d["profile_s"][k][ph]) for k in kinds) + " |")
    steps = {k: d[f"s_per_step_{k}"] for k in kinds}
    lines.append("| **step** | " + " | ".join(f"**{_r(steps[k])}**" for k in kinds) + " |")
    return "\n".join(lines)


def _ratio_cell(sp: dict) -> str:
    return f"{_r(sp['median'], 3)} [{_r(sp['iqr'][0], 3)}, {_r(sp['iqr'][1], 3)}]"


def step_table(d: dict) -> str:
    rounds = d["per_round_s"]
    lines = [
        "| trainer | precision | median s/step | per-round ratio to TRL's step: median [IQR] |",
        "|---|---|---|---|",
    ]
    for k in rounds:
        prec = "bf16" if d["bf16"][k] else "float32"
        if k == "trl_grpo":
            cell = "(baseline)"
        else:
            rs = sorted(x / y for x, y in zip(rounds[k], rounds["trl_grpo"]))
            cell = _ratio_cell(_spread(rs))
        lines.append(f"| {NAMES[k]} | {prec} | {_r(d[f's_per_step_{k}'])} | {cell} |")
    return "\n".join(lines)


def _spread(xs: list[float]) -> dict:
    """The benchmark's own median and IQR of per-round ratios."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from train_step import _spread as spread

    return spread(xs)


def gen_sentence(d: dict) -> str:
    n = len(d["generation_rounds"]["gemm_s"])
    wq, lq = d["generation_fraction_iqr"], d["generation_decode_loop_fraction_iqr"]
    return (
        f"Measured in {n} paired rounds: one decode step's products took {d['generation_gemm_step_s'] * 1e3:.1f} ms "
        f"(median), a limit of {_r(d['generation_gemm_gflops'], 1)} GFLOP/s at "
        f"{d['generation_flops_per_token'] / 1e6:.0f} MFLOP a token. vpo's sampler generated "
        f"{_r(d['generation_decode_tokens_per_s'], 1)} tokens/s over 16 rows (24 new tokens after a "
        f"{d['generation_prompt_tokens']}-token prompt, prefill and sampling included): "
        f"**{_r(d['generation_fraction_of_gemm_limit'])} of the limit** (the median of the rounds' fractions, "
        f"IQR {_r(wq[0])}-{_r(wq[1])}); its decode loop alone, the prefill's {_r(d['generation_prefill_s'], 3)} s "
        f"taken out, {_r(d['generation_decode_loop_fraction_of_gemm_limit'])} (IQR {_r(lq[0])}-{_r(lq[1])}). "
        f"transformers' `generate` as TRL runs it (the float32 model under bf16 autocast): "
        f"{_r(d['generation_generate_tokens_per_s'], 1)} tokens/s, {_r(d['generation_generate_fraction_of_gemm_limit'])} "
        "of the limit."
    )


def sampler_ab_sentence() -> str:
    r = _load("sampler_ab_smollm2")
    t, b, a = r["time_ratio_today_vs_baseline"], r["fraction_of_limit_baseline"], r["fraction_of_limit_today"]
    return (
        f"In {r['rounds']} paired rounds on the same batch, the sampler took {_r(t['median'])} of the time it took "
        f"at {r['baseline']} (IQR {_r(t['iqr'][0])}-{_r(t['iqr'][1])}): {_r(b['median'])} of the limit before, "
        f"{_r(a['median'])} after, "
        + ("with the same tokens from the same seed in every round." if r["same_tokens"] else "WITH OTHER TOKENS.")
    )


def train_sentence(d: dict) -> str:
    tb, ta = d["training_gemm_gflops_readings"]
    return (
        f"{d['training_pass_flops'] / 1e9:.1f} GFLOP in {_r(d['training_pass_s'])} s, "
        f"{_r(d['training_achieved_gflops'], 1)} GFLOP/s, against a product of its shape at {_r(tb, 1)} and "
        f"{_r(ta, 1)} GFLOP/s: **{_r(d['training_fraction_of_gemm_limit'])} of the limit**."
    )


def pass_table(p: dict) -> str:
    total = sum(p["groups_s"].values())
    lines = ["| operator group | seconds | share |", "|---|---|---|"]
    for name, sec in p["groups_s"].items():
        lines.append(f"| {name} | {_r(sec)} | {100 * sec / total:.0f} % |")
    lines.append(f"| the pass, wall | {_r(p['wall_s'])} | |")
    return "\n".join(lines)


def memory_table() -> str:
    step, ev = _load("step_memory_smollm2"), _load("eval_memory_smollm2")
    gib = 1024.0

    def cell(mb):
        return f"{mb / gib:.1f} GiB"

    return "\n".join(
        [
            "| what | vpo's fast path | as before (plain) |",
            "|---|---|---|",
            f"| a SmolLM2 LoRA VPO training process, peak (16 rollouts x 24 tokens, 2 steps) | "
            f"{cell(step['peak_mb_vpo'])} | {cell(step['peak_mb_vpo_plain'])} |",
            f"| of which the step (peak - resident before training) | {cell(step['step_mb_vpo'])} | "
            f"{cell(step['step_mb_vpo_plain'])} |",
            f"| `vpo eval`, 50 requests x 30 answers of SmolLM2 (500 rows x 64 tokens), peak | "
            f"{cell(ev['fast']['max_rss_kb'] / 1024)} in {ev['fast']['wall_s']:.0f} s | "
            f"{cell(ev['plain_generate']['max_rss_kb'] / 1024)} in {ev['plain_generate']['wall_s']:.0f} s |",
        ]
    )


def demo_sentence() -> str:
    r = _load("demo_shop_run")
    w = r["per_process_peak_gib"]
    return (
        f"it took {r['wall_min']} min and peaked at **{r['peak_total_gib']:.1f} GiB** in all (the two workers "
        f"{w['worker 1']:.1f} and {w['worker 2']:.1f} GiB, the demo's process {w['the demo' + chr(39) + 's process']:.1f} GiB), "
        "inside a 16 GiB machine; the workers' peaks came from the evaluations and the warm starts (5.8 GiB)."
    )


def fills() -> dict[str, str]:
    d, p = _load("train_step_smollm2"), _load("pass_profile")
    tiny, demo = _load("train_step_tiny"), _load("train_step_tiny_demo_shape")
    return {
        "PROFILE_TABLE": profile_table(d),
        "STEP_TABLE": step_table(d),
        "RATIO_M3": _r(d["ratio_vpo_m3_vs_trl_grpo_median"]),
        "IQR_M3": f"{_r(d['ratio_vpo_m3_vs_trl_grpo_iqr'][0])}-{_r(d['ratio_vpo_m3_vs_trl_grpo_iqr'][1])}",
        "RATIO_GRPO": _r(d["ratio_vpo_grpo_vs_trl_grpo_median"]),
        "RATIO_PLAIN": _r(d["ratio_vpo_m3_plain_vs_trl_grpo_median"]),
        "RATIO_FAST_PLAIN": _r(d["ratio_vpo_m3_vs_plain"]["median"]),
        "TINY_FAST": _r(tiny["ratio_vpo_m3_vs_trl_grpo_median"]),
        "TINY_PLAIN": _r(tiny["ratio_vpo_m3_plain_vs_trl_grpo_median"]),
        "DEMO_FAST": _r(demo["ratio_vpo_m3_vs_trl_grpo_median"]),
        "DEMO_PLAIN": _r(demo["ratio_vpo_m3_plain_vs_trl_grpo_median"]),
        "GEN_SENTENCE": gen_sentence(d),
        "SAMPLER_AB": sampler_ab_sentence(),
        "TRAIN_SENTENCE": train_sentence(d),
        "PASS_TABLE": pass_table(p),
        "MEMORY_TABLE": memory_table(),
        "DEMO_SENTENCE": demo_sentence(),
    }


def readme_row() -> str:
    d = _load("train_step_smollm2")
    return (
        f"| a SmolLM2-135M LoRA RL step on a CPU, VPOTrainer (vpo, m = 3) / TRL GRPOTrainer, each at its "
        f"default precision, interleaved (5 rounds, idle machine) | {_r(d['ratio_vpo_m3_vs_trl_grpo_median'])} "
        f"(IQR {_r(d['ratio_vpo_m3_vs_trl_grpo_iqr'][0])}-{_r(d['ratio_vpo_m3_vs_trl_grpo_iqr'][1])}; "
        f"{_r(d['s_per_step_vpo_m3'])} s vs {_r(d['s_per_step_trl_grpo'])} s); generation at "
        f"{_r(d['generation_fraction_of_gemm_limit'])} of the decode limit (docs/performance.md) | "
        "`python benchmarks/train_step.py --model runs/smollm2 --lora 16 --prompts shop --batch 16 --length 24 "
        "--rounds 5 --plain --json` |"
    )


def readme_tiny_row() -> str:
    t, dm = _load("train_step_tiny"), _load("train_step_tiny_demo_shape")
    return (
        "| seconds per training step on the demo's tiny model, VPOTrainer (vpo, m = 3) / TRL GRPOTrainer, both "
        "float32, interleaved step by step (idle machine) | same prompts and tokens: "
        f"{_r(t['ratio_vpo_m3_vs_trl_grpo_median'])} (plain, as before the fast CPU step: "
        f"{_r(t['ratio_vpo_m3_plain_vs_trl_grpo_median'])}); the demo's shape (VPO ~3x the tokens): "
        f"{_r(dm['ratio_vpo_m3_vs_trl_grpo_median'])} (plain: {_r(dm['ratio_vpo_m3_plain_vs_trl_grpo_median'])}) "
        "(docs/performance.md) | `python benchmarks/train_step.py --plain --json`; `... --demo --rounds 6 --plain --json` |"
    )


def test_the_shipped_runs_are_the_documented_ones():
    d = _load("train_step_smollm2")
    assert d["model"].endswith("smollm2") and d["lora"] == 16 and d["prompts"] == "shop"
    assert d["rounds"] == 5 and d["rollouts_per_step"] == 16 and d["tokens_vpo_m3"] == 24
    assert d["precision"] == "defaults" and d["fast_generation"] and d["shared_prompt"]
    assert d["bf16"] == {"trl_grpo": True, "vpo_grpo": True, "vpo_m3": True, "vpo_m3_plain": False}
    assert not d["quick"] and d["threads"] == 2
    for name in ("train_step_tiny", "train_step_tiny_demo_shape"):
        t = _load(name)
        assert t["precision"] == "float32" and not any(t["bf16"].values()) and not t["quick"]


@pytest.mark.parametrize("key", sorted(fills()))
def test_performance_md_quotes_the_shipped_json(key):
    doc = (ROOT / "docs" / "performance.md").read_text()
    assert key not in doc, f"placeholder {key} left in docs/performance.md"
    assert fills()[key] in doc, f"docs/performance.md lacks the {key} rendered from docs/performance/*.json"


def test_readme_quotes_the_shipped_step_figures():
    readme = (ROOT / "README.md").read_text()
    assert readme_row() in readme
    assert readme_tiny_row() in readme


def test_the_shop_demo_s_estimates_match_its_measured_run():
    """`vpo demo --model smollm2 --domain shop` prints a time and a memory estimate; both must land
    within 10 % of the measured default run (docs/performance/demo_shop_run.json)."""
    from vpo.demo.cli import estimate_memory_gib, estimate_minutes
    from vpo.demo.config import DemoConfig

    r = _load("demo_shop_run")
    cfg = DemoConfig.for_domain("shop", quick=False)
    assert cfg.jobs == r["jobs"]
    assert abs(estimate_minutes(cfg) - r["wall_min"]) / r["wall_min"] < 0.10
    assert abs(estimate_memory_gib(cfg) - r["peak_total_gib"]) / r["peak_total_gib"] < 0.10
    assert r["peak_total_gib"] < 16
