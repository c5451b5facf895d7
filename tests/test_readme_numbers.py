"""Every demo number in the README is the shipped report's: the README's demo table is what
``vpo.demo.report.readme_table`` makes of docs/demo/demo.json, and docs/demo/report.md is what
``markdown`` makes of it; the same for the prog domain (docs/demo/prog/).
Rerunning a demo and forgetting to update one of them fails here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from vpo.demo.domains import DOMAINS
from vpo.demo.report import markdown, readme_table

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def shipped():
    return json.loads((ROOT / "docs" / "demo" / "demo.json").read_text())


@pytest.fixture(scope="module")
def shipped_prog():
    return json.loads((ROOT / "docs" / "demo" / "prog" / "demo.json").read_text())


def _comparable(shipped_cfg: dict, default: dict) -> tuple[dict, dict]:
    """Both configs without ``out`` and without the other domains' settings, which a run of one
    domain never reads (and which the config refuses to change), so adding a setting to one domain
    does not make the other's shipped report stale. The shipped config is read under today's
    setting names (it was recorded before some were renamed)."""
    from vpo.demo.config import current_names

    own = DOMAINS[default["domain"]]
    drop = {"out"} | {k for d in DOMAINS.values() if d is not own for k in d.settings}
    return (
        {k: v for k, v in current_names(shipped_cfg).items() if k not in drop},
        {k: v for k, v in default.items() if k not in drop},
    )


def _block(text: str, begin: str, end: str) -> str:
    assert begin in text and end in text, f"markers {begin!r} / {end!r} missing"
    return text[text.index(begin) : text.index(end) + len(end)]


def test_readme_demo_table_is_the_shipped_report(shipped):
    readme = (ROOT / "README.md").read_text()
    maze = DOMAINS["maze"]
    assert _block(readme, maze.readme_begin, maze.readme_end) == readme_table(shipped)


def test_shipped_report_md_is_rendered_from_demo_json(shipped):
    assert (ROOT / "docs" / "demo" / "report.md").read_text() == markdown(shipped)


def test_shipped_report_is_the_former_default_on_the_test_split(shipped):
    """The README reports the default configuration as it was before per-replicate warm starts and
    replicate t intervals (one shared warm start, the two-level bootstrap), on the test mazes, and
    says how to reproduce it."""
    from vpo.demo.config import RECORDED_BEFORE, DemoConfig

    cfg, default = _comparable(shipped["config"], DemoConfig(**RECORDED_BEFORE).as_dict())
    assert {k: v for k, v in cfg.items() if k in default} == {k: default[k] for k in cfg}
    assert set(default) - set(cfg) <= {"warm_start", "interval", "test_seed"}
    assert cfg["split"] == "test" and len(cfg["seeds"]) >= 3
    readme = (ROOT / "README.md").read_text()
    assert "vpo demo --out runs/demo --set warm_start=shared\n  --set interval=two_level_bootstrap" in readme


def test_readme_prog_table_and_report_are_the_shipped_prog_run(shipped_prog):
    from vpo.demo.config import DemoConfig

    readme = (ROOT / "README.md").read_text()
    prog = DOMAINS["prog"]
    assert _block(readme, prog.readme_begin, prog.readme_end) == readme_table(shipped_prog)
    assert (ROOT / "docs" / "demo" / "prog" / "report.md").read_text() == markdown(shipped_prog)
    from vpo.demo.config import RECORDED_BEFORE

    cfg, default = _comparable(shipped_prog["config"], DemoConfig(domain="prog", **RECORDED_BEFORE).as_dict())
    assert {k: v for k, v in cfg.items() if k in default} == {k: default[k] for k in cfg}, (
        "the shipped prog report is not the prog default (as it was before per-replicate warm starts)"
    )
    assert cfg["split"] == "test" and len(cfg["seeds"]) >= 3


ANNOTATION = re.compile(r"<!-- (maze|prog):([^:]+):(\w+) -->")
FORMATS = {
    "ci": lambda x: f"{x['mean']:+.3f} [{x['ci_low']:+.3f}, {x['ci_high']:+.3f}]",
    "mean": lambda x: f"{x['mean']:.3f}",
    "f2": lambda x: f"{x['mean']:.2f}",
    "value": lambda x: f"{x:.3f}",
    "minutes": lambda x: f"{x / 60:.1f}",
}
NUMBER = re.compile(r"(?<![\w.@=])[+-]?\d+\.\d+(?![\w.])")


def _lookup(report: dict, path: str):
    node = report
    for key in path.split("/"):
        node = node[key]
    return node


def readme_prose_problems(readme: str, reports: dict) -> list[str]:
    """What is wrong with the numbers of the README's demo prose: each statistic is followed by a
    comment naming it (``<!-- maze:paired_vs_vpo/max_at_k/best_at_k/30:ci -->``); the text before
    the comment must be exactly that statistic of the shipped report, formatted as the comment says,
    and every decimal number of the prose (outside the generated tables) must be such a statistic."""
    start = readme.index("## The demo")
    section = readme[start : readme.index("\n## ", start + 5)]
    for dom in DOMAINS.values():  # the generated tables have their own test
        if dom.readme_begin in section:
            section = section[: section.index(dom.readme_begin)] + section[section.index(dom.readme_end) :]
    section = re.sub(r"\s*\n\s*", " ", section)  # a statistic may break over a line
    problems, covered = [], []
    for m in ANNOTATION.finditer(section):
        ns, path, fmt = m.groups()
        try:
            want = FORMATS[fmt](_lookup(reports[ns], path))
        except (KeyError, TypeError) as e:
            problems.append(f"{m.group(0)}: no such statistic ({e!r})")
            continue
        before = section[: m.start()]
        if not before.endswith(want):
            problems.append(f"{m.group(0)}: the README says {before[-len(want) - 8 :]!r}, the report {want!r}")
        covered.append((m.start() - len(want), m.start()))
    prose = ANNOTATION.sub(lambda m: " " * len(m.group(0)), section)
    for n in NUMBER.finditer(prose):
        if not any(a <= n.start() and n.end() <= b for a, b in covered):
            problems.append(f"{n.group(0)!r} (…{prose[max(0, n.start() - 40) : n.end()]!r}) names no statistic")
    return problems


def test_every_number_of_the_readme_demo_prose_is_its_statistic(shipped, shipped_prog):
    readme = (ROOT / "README.md").read_text()
    assert len(ANNOTATION.findall(readme)) >= 40
    assert readme_prose_problems(readme, {"maze": shipped, "prog": shipped_prog}) == []


def test_a_mutated_readme_number_fails(shipped, shipped_prog):
    """A flipped sign, two numbers swapped, a changed last digit, an unannotated number: each fails."""
    readme = (ROOT / "README.md").read_text()
    reports = {"maze": shipped, "prog": shipped_prog}
    ci = "-0.042 [-0.084, -0.005]<!-- maze:paired_vs_vpo/max_at_k/best_at_k/30:ci -->"
    assert ci in readme
    mutants = [
        readme.replace(ci, ci.replace("-0.042 [-0.084, -0.005]", "+0.042 [+0.084, +0.005]")),
        readme.replace(ci, ci.replace("-0.005]", "-0.006]")),
        readme.replace("completion 0.730<!--", "completion 0.420<!--", 1).replace(
            "VPO's 0.420<!--", "VPO's 0.730<!--", 1
        ),
        readme.replace("against the warm start's 0.900<!--", "against the warm start's 0.901<!--", 1),
        readme.replace("(the 15-minute target)", "(the 15-minute target, 2.5 s a step)", 1),
    ]
    for i, text in enumerate(mutants):
        assert text != readme, i
        assert readme_prose_problems(text, reports), f"mutant {i} passed"


def test_readme_evolve_figures_are_the_shipped_study():
    """The README's evolve sentence quotes docs/demo/prog/evolve/study.json (scripts/prog_evolve_study.py),
    and docs/demo.md's evolve table its per-seed counts."""
    import re

    study = json.loads((ROOT / "docs" / "demo" / "prog" / "evolve" / "study.json").read_text())
    readme = (ROOT / "README.md").read_text()
    m = re.search(r"VPO solves\s+(\d+) of the (\d+) on average, GRPO (\d+), Max@k (\d+) and Multi-RLVR (\d+)", readme)
    assert m, "the README's evolve sentence changed shape; update this test with it"
    vpo, n, grpo, maxk, multi = map(int, m.groups())
    assert n == study["problems"]
    assert (vpo, grpo, maxk, multi) == tuple(
        round(study[f"solved_at_calls_{k}"]) for k in ("vpo", "grpo", "max_at_k", "multi_rlvr")
    )
    demo_md = (ROOT / "docs" / "demo.md").read_text()
    for key, label in (
        ("grpo", "GRPO"),
        ("grpo_3x", "GRPO 3x rollouts"),
        ("max_at_k", "Max@k"),
        ("multi_rlvr", "Multi-RLVR (m=3)"),
        ("vpo", "**VPO (m=3)**"),
    ):
        assert f"| {label} | " in demo_md and f"| {study[f'solved_at_calls_{key}']:.2f} |" in demo_md, key
    for key in ("grpo", "grpo_3x", "max_at_k", "multi_rlvr"):
        assert f"{study[f'vpo_minus_{key}_solved_share_calls']:+.3f} [" in demo_md.replace("−", "-"), key
