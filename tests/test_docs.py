"""The repository's own account of the method and design stays true to the code and navigable.

* docs/method.md shows the reference VPO loop verbatim: the code block under "The loop" must be the
  source of ``vpo.core.reference.vpo_advantages_reference`` without its docstring;
* docs/method.md and docs/design.md keep the section names the code and docs cite
  ("docs/method.md §3", "docs/design.md \"One data shape\"");
* every relative markdown link in README.md and docs/*.md names a file that exists and, when it
  has one, an anchor that one of that file's headings produces (GitHub's slug rule).
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from vpo.core import reference

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

METHOD_SECTIONS = [
    "1. The idea",
    "2. Notation",
    "3. The VPO estimator",
    "4. Baselines",
    "5. Tasks and their reward vectors",
    "6. Metrics",
    "7. Paper numbers",
    "8. Known limits",
]
DESIGN_SECTIONS = ["Who uses it", "One data shape", "Layers", "Integration points", "This machine and CI"]


def headings(path: Path, level: int) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.DOTALL)
    return re.findall(rf"^{'#' * level} (.+?)\s*$", text, flags=re.MULTILINE)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", lambda m: "_" if m.group() == "_" else "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.DOTALL)
    seen: dict[str, int] = {}
    out = set()
    for h in re.findall(r"^#{1,6} (.+?)\s*$", text, flags=re.MULTILINE):
        s = slug(h)
        out.add(s if s not in seen else f"{s}-{seen[s]}")
        seen[s] = seen.get(s, 0) + 1
    return out


def test_method_sections_are_numbered_as_cited():
    assert headings(DOCS / "method.md", 2) == METHOD_SECTIONS


def test_design_sections_are_named_as_cited():
    assert headings(DOCS / "design.md", 2) == DESIGN_SECTIONS


def test_method_shows_the_reference_loop_verbatim():
    text = (DOCS / "method.md").read_text(encoding="utf-8")
    section = text.split("### The loop", 1)[1]
    shown = re.search(r"```python\n(.*?)```", section, flags=re.DOTALL).group(1)
    source = inspect.getsource(reference.vpo_advantages_reference)
    code = re.sub(r'\n    """.*?"""\n', "\n", source, count=1, flags=re.DOTALL)
    assert shown == code


def test_method_maps_the_loop_to_functions_that_exist():
    """The functions the "vectorised estimator" table names are still there in vpo.core.estimators
    (or estimator_base.py, which the table names beside it)."""
    from vpo.core import estimator_base, estimators

    text = (DOCS / "method.md").read_text(encoding="utf-8")
    section = text.split("### The vectorised estimator", 1)[1].split("\n## ", 1)[0]
    cited = set(re.findall(r"`(_[a-z_]+)[`(]", section)) | {"group_index_from", "vpo_estimator"}
    assert {"_prepare", "_fill_invalid", "_best_per_weighting", "_zscore"} <= cited
    missing = sorted(
        n for n in cited if not any(callable(getattr(mod, n, None)) for mod in (estimators, estimator_base))
    )
    assert not missing, f"docs/method.md §3 names functions vpo/core/estimators.py no longer has: {missing}"


def test_slug_rule():
    assert slug("3. The VPO estimator") == "3-the-vpo-estimator"
    assert slug("Weight samplers (`vpo.core.SimplexSampler`)") == "weight-samplers-vpocoresimplexsampler"
    assert slug("Maze (`vpo.tasks.maze`)") == "maze-vpotasksmaze"


PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):  # http(s), mailto: not checked here
            continue
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading with that anchor in {dest.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)
