"""Every demo number in the README is the shipped report's: the README's demo table is what
``vpo.demo.report.readme_table`` makes of docs/demo/demo.json, and docs/demo/report.md is what
``markdown`` makes of it. Rerunning the demo and forgetting to update one of them fails here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vpo.demo.report import README_BEGIN, README_END, markdown, readme_table

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def shipped():
    return json.loads((ROOT / "docs" / "demo" / "demo.json").read_text())


def _block(text: str, begin: str, end: str) -> str:
    assert begin in text and end in text, f"markers {begin!r} / {end!r} missing"
    return text[text.index(begin): text.index(end) + len(end)]


def test_readme_demo_table_is_the_shipped_report(shipped):
    readme = (ROOT / "README.md").read_text()
    assert _block(readme, README_BEGIN, README_END) == readme_table(shipped)


def test_shipped_report_md_is_rendered_from_demo_json(shipped):
    assert (ROOT / "docs" / "demo" / "report.md").read_text() == markdown(shipped)


def test_shipped_report_is_the_default_on_the_test_split(shipped):
    """The README reports the default configuration, evaluated once on the test mazes."""
    from vpo.demo.config import DemoConfig

    default = DemoConfig().as_dict()
    cfg = dict(shipped["config"])
    for key in ("out",):
        cfg.pop(key, None), default.pop(key, None)
    assert cfg == default
    assert cfg["split"] == "test" and len(cfg["seeds"]) >= 3


def test_every_number_in_the_readme_demo_section_is_in_the_report(shipped):
    """Prose too: each decimal number the README's demo section quotes (0.123, +0.045, 11.3 min) is
    one the shipped report prints, so a sentence cannot drift from the data."""
    import re

    readme = (ROOT / "README.md").read_text()
    start = readme.index("## The demo")
    end = readme.index("\n## ", start + 5)
    section = readme[start:end].replace("−", "-")
    report = (markdown(shipped) + readme_table(shipped)).replace("−", "-")
    numbers = re.findall(r"(?<![\w.])[+-]?\d+\.\d+(?![\w.])", section)
    assert numbers, "the demo section quotes no numbers?"
    missing = [n for n in numbers if n not in report and n.lstrip("+") not in report]
    assert not missing, f"numbers in the README demo section that the report does not print: {missing}"
