"""CITATION.cff: valid Citation File Format 1.2.0 with the keys the format requires,
citing the paper (preferred) and the library, and agreeing with pyproject.toml."""

from __future__ import annotations

import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
REQUIRED = ("cff-version", "message", "title", "authors")  # the format's required top-level keys
REFERENCE_REQUIRED = ("type", "title", "authors")  # required in a reference / preferred-citation


def _cff() -> dict:
    return yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))


def _check_authors(authors) -> None:
    assert isinstance(authors, list) and authors
    for a in authors:
        assert isinstance(a, dict) and (a.get("family-names") or a.get("name")), a


def test_citation_has_the_required_keys_and_cites_the_paper():
    cff = _cff()
    for key in REQUIRED:
        assert cff.get(key), f"CITATION.cff lacks required key {key!r}"
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software"
    _check_authors(cff["authors"])
    paper = cff["preferred-citation"]
    for key in REFERENCE_REQUIRED:
        assert paper.get(key), f"preferred-citation lacks {key!r}"
    _check_authors(paper["authors"])
    assert paper["type"] == "article" and paper["year"] == 2026
    assert "Vector Policy Optimization" in paper["title"]
    assert paper["authors"][0] == {"family-names": "Bahlous-Boldi", "given-names": "Ryan"}
    assert {"type": "other", "value": "arXiv:2605.22817"} in paper["identifiers"]
    assert paper["url"] == "https://arxiv.org/abs/2605.22817"
    assert cff["references"][0] == paper


def test_citation_agrees_with_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    cff = _cff()
    assert cff["version"] == project["version"]
    lic = project["license"]
    assert cff["license"] == (lic if isinstance(lic, str) else lic.get("text"))
