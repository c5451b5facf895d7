"""The demo's domains are objects (vpo/demo/domains.py): nothing in vpo/demo tests a domain's name,
each domain's own settings are DemoConfig fields with the defaults the domain declares, configs
recorded under the settings' old names still load, the resume records keep those names, and a new
domain is one object: registering it is enough for the config, the jobs, the report and the CLI.
"""

from __future__ import annotations

import json
import re
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest

from vpo.demo.config import RECORD_NAMES, DemoConfig
from vpo.demo.domains import DOMAINS, Domain, MazeDomain, domain_named
from vpo.errors import UserError

ROOT = Path(__file__).resolve().parents[2]

NAME_TEST = re.compile(r"""\bdomain\w*\s*[!=]=|[!=]=\s*\w*domain\b|[!=]=\s*["'](?:%s)["']|["'](?:%s)["']\s*[!=]=""")


def name_tests(text: str) -> list[str]:
    """Lines of ``text`` that compare a domain (or a domain's name) with ``==``/``!=``."""
    names = "|".join(map(re.escape, DOMAINS))
    pattern = re.compile(NAME_TEST.pattern % (names, names))
    return [line.strip() for line in text.splitlines() if pattern.search(line)]


def test_no_code_in_vpo_demo_tests_a_domains_name():
    """Code asks the domain object; a `domain == "prog"` branch anywhere in vpo/demo fails here."""
    hits = {
        str(p.relative_to(ROOT)): found
        for p in sorted((ROOT / "vpo" / "demo").rglob("*.py"))
        if (found := name_tests(p.read_text()))
    }
    assert not hits, f"name tests of a domain in vpo/demo (ask the Domain object instead): {hits}"


@pytest.mark.parametrize(
    "line",
    [
        'if cfg.domain == "prog":',
        "if self.domain != 'maze':",
        'head = {} if domain=="maze" else {}',
        'if "prog" == cfg.domain:',
        "if other_domain != spec_domain:",
        'if name == "prog":',
    ],
)
def test_the_name_test_detector_catches_the_usual_spellings(line):
    assert name_tests(line) == [line]


def test_the_name_test_detector_leaves_other_comparisons_alone():
    assert name_tests("if other is spec:\n    x = cfg.domain_spec.task\nif name == 'items_per_zone':") == []


def test_each_domains_settings_are_config_fields_with_its_defaults():
    by_name = {f.name: f for f in fields(DemoConfig)}
    seen: set[str] = set()
    for spec in DOMAINS.values():
        assert spec.name and spec.task and spec.summary
        for name, setting in spec.settings.items():
            assert name in by_name and by_name[name].default == setting.default, name
            assert name not in seen, f"two domains declare {name}"
            seen.add(name)
    assert DemoConfig().domain_spec is DOMAINS["maze"] and DemoConfig(domain="prog").domain_spec is DOMAINS["prog"]
    with pytest.raises(UserError, match="domain must be one of maze, prog"):
        domain_named("code")


def test_shipped_records_load_under_the_current_names():
    """docs/demo/**/demo.json record eval_mazes, train_mazes and warm_routes_per_maze; they load as
    eval_problems, train_problems and warm_answers_per_problem, while --set takes only the new names."""
    for rel, domain in (("", "maze"), ("prog", "prog"), ("validation/prog_probes/slope01_warm1800_4x", "prog")):
        rec = json.loads((ROOT / "docs" / "demo" / rel / "demo.json").read_text())["config"]
        cfg = DemoConfig.from_dict(rec)
        assert cfg.domain == domain
        assert (cfg.eval_problems, cfg.train_problems, cfg.warm_answers_per_problem) == (
            rec["eval_mazes"],
            rec["train_mazes"],
            rec["warm_routes_per_maze"],
        )
        assert "eval_mazes" not in cfg.as_dict() and cfg.as_dict()["eval_problems"] == rec["eval_mazes"]
    with pytest.raises(TypeError):
        DemoConfig(eval_mazes=10)
    from vpo.demo.cli import add_parser, config_from_args

    import argparse

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    assert config_from_args(parser.parse_args(["demo", "--set", "eval_problems=7"])).eval_problems == 7
    with pytest.raises(UserError, match="unknown demo setting 'eval_mazes'"):
        config_from_args(parser.parse_args(["demo", "--set", "eval_mazes=7"]))


def test_resume_records_keep_the_names_they_were_first_written_with():
    """A run directory made before the rename resumes: its records' keys (and so their hashes) are
    unchanged, for both domains."""
    for cfg in (DemoConfig(), DemoConfig(domain="prog")):
        warm, ev = cfg.warm_settings(), cfg.eval_settings()
        assert warm["train_mazes"] == cfg.train_problems and warm["warm_routes_per_maze"] == 1
        assert ev["eval_mazes"] == cfg.eval_problems
        assert not set(RECORD_NAMES) & (set(warm) | set(ev))
    assert "domain" not in DemoConfig().warm_settings()  # the maze's records predate the domain setting


class ToyDomain(MazeDomain):
    """A third domain written as one object: the maze task under another name, its own report."""

    name = "toy"
    summary = "toy: a test domain"
    settings = {}  # a domain registered after DemoConfig was built cannot add fields

    report_plots = ("best_at_k",)

    def markdown(self, agg: dict) -> str:
        return f"toy report of {agg['config']['domain']}"

    def readme_table(self, agg: dict) -> str:
        return "toy table"

    def record(self) -> dict:
        return Domain.record(self)


def test_a_third_domain_is_one_registered_object(monkeypatch, tmp_path):
    import argparse

    import yaml

    from vpo.demo.cli import add_parser, config_from_args
    from vpo.demo.report import markdown, readme_table
    from vpo.demo.stages import build_jobs, make_task

    monkeypatch.setitem(DOMAINS, "toy", ToyDomain())
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    cfg = config_from_args(parser.parse_args(["demo", "--domain", "toy", "--quick", "--out", str(tmp_path)]))
    assert cfg.domain_spec is DOMAINS["toy"] and make_task(cfg).d == 4
    assert cfg.warm_settings()["domain"] == "toy" and cfg.eval_settings()["domain"] == "toy"
    build_jobs(cfg, tmp_path)
    assert {yaml.safe_load(p.read_text())["task"] for p in (tmp_path / "configs").glob("*.yaml")} == {"maze"}
    agg = {"config": cfg.as_dict()}
    # the domain writes its tables; the report adds the tail every report shares (its plots, the command)
    text = markdown(agg)
    assert text.startswith("toy report of toy\n") and readme_table(agg) == "toy table"
    assert "![best@k](best_at_k.png)" in text and "pareto_coverage.png" not in text
    assert text.splitlines()[-1].startswith(f"Reproduce: `vpo demo --out {tmp_path} --domain toy ")
    # the other domains' settings are refused for it, as for any domain
    with pytest.raises(UserError, match="prog_tests apply to --domain prog only"):
        DemoConfig(domain="toy", prog_tests=12)
    assert np.all(DOMAINS["toy"].fronts(make_task(cfg).load("validation", 2))[0] >= 0)
