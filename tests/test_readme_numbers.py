"""Every demo number in the README is the shipped report's: the README's demo table is what
``vpo.demo.report.readme_table`` makes of docs/demo/demo.json, and docs/demo/report.md is what
``markdown`` makes of it; the same for the prog domain (docs/demo/prog/).
Rerunning a demo and forgetting to update one of them fails here."""

from __future__ import annotations

import json
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


def test_shipped_report_is_the_default_on_the_test_split(shipped):
    """The README reports the default configuration, evaluated once on the test mazes."""
    from vpo.demo.config import DemoConfig

    cfg, default = _comparable(shipped["config"], DemoConfig().as_dict())
    assert cfg == default
    assert cfg["split"] == "test" and len(cfg["seeds"]) >= 3


def test_readme_prog_table_and_report_are_the_shipped_prog_run(shipped_prog):
    from vpo.demo.config import DemoConfig

    readme = (ROOT / "README.md").read_text()
    prog = DOMAINS["prog"]
    assert _block(readme, prog.readme_begin, prog.readme_end) == readme_table(shipped_prog)
    assert (ROOT / "docs" / "demo" / "prog" / "report.md").read_text() == markdown(shipped_prog)
    cfg, default = _comparable(shipped_prog["config"], DemoConfig(domain="prog").as_dict())
    assert cfg == default, "the shipped prog report is not the prog default"
    assert cfg["split"] == "test" and len(cfg["seeds"]) >= 3


def test_every_number_in_the_readme_demo_section_is_in_the_report(shipped, shipped_prog):
    """Prose too: each decimal number the README's demo section quotes (0.123, +0.045, 11.3 min) is
    one the shipped report prints, so a sentence cannot drift from the data."""
    import re

    readme = (ROOT / "README.md").read_text()
    start = readme.index("## The demo")
    end = readme.index("\n## ", start + 5)
    section = readme[start:end].replace("−", "-")
    report = (markdown(shipped) + readme_table(shipped) + markdown(shipped_prog) + readme_table(shipped_prog)).replace(
        "−", "-"
    )
    numbers = re.findall(r"(?<![\w.])[+-]?\d+\.\d+(?![\w.])", section)
    assert numbers, "the demo section quotes no numbers?"
    missing = [n for n in numbers if n not in report and n.lstrip("+") not in report]
    assert not missing, f"numbers in the README demo section that the report does not print: {missing}"


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
