"""The import layers of docs/design.md ("Layers"), checked on every module under vpo/.

Each module is parsed with ``ast``; every ``import``/``from ... import`` counts, wherever it is (module
level, inside a function, under ``TYPE_CHECKING``). In a module that calls ``importlib.import_module``,
so does every string constant naming a vpo module (its targets, and registries such as
``"vpo.tasks.maze:MazeTask"``); elsewhere such strings are not imports (``python -m vpo.cli`` run as
a subprocess, logger names). The rules, lowest layer first:

    0  vpo.errors, vpo._util            stdlib only
    1  vpo.core
    2  vpo.tasks, vpo.sandbox           vpo.sandbox: only layer 0 and the stdlib (it runs untrusted
                                        code and must import nothing heavy; the one exception is its
                                        opt-in tqdm progress bar, imported inside the function that
                                        draws it); tasks may use sandbox
    3  vpo.search, vpo.train, vpo.integrations
                                        siblings: train and integrations may import search (the
                                        eval metrics are shared); search imports neither, and train
                                        and integrations do not import each other
    4  vpo.demo
    5  vpo.cli
    vpo/__init__.py: only layer 0, since every ``import vpo.x`` runs it first (importing the stdlib-only
    sandbox must not pull torch in through the package root).

A module may import its own layer and any lower one, except where the table says otherwise. A new
top-level module under vpo/ fails the test until it is given a layer in ``LAYERS``.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "vpo"

LAYERS = {
    "errors": 0,
    "_util": 0,
    "core": 1,
    "tasks": 2,
    "sandbox": 2,
    "search": 3,
    "train": 3,
    "integrations": 3,
    "demo": 4,
    "cli": 5,
}
# (importer, imported) pairs of layer-3 siblings that may import each other
SIBLINGS_ALLOWED = {("train", "search"), ("integrations", "search")}
STDLIB_ONLY = {"errors", "_util", "sandbox"}
OPTIONAL_LAZY = {"tqdm"}  # third-party packages a stdlib-only module may import inside a function
ROOT_MAX_LAYER = 0  # what vpo/__init__.py may import
SANDBOX_MODULES = ("vpo.sandbox",)

_MODULE_STRING = re.compile(r"^vpo(\.[A-Za-z_]\w*)+(:\w+)?$")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module a ``from`` import reads from (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _is_module(name: str) -> bool:
    rel = Path(*name.split("."))
    return (ROOT / rel).with_suffix(".py").is_file() or (ROOT / rel / "__init__.py").is_file()


def _calls_import_module(tree: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Call) and getattr(n.func, "attr", getattr(n.func, "id", None)) == "import_module"
        for n in ast.walk(tree)
    )


def imports_of(source: str, module: str, is_package: bool = False) -> list[tuple[int, str, bool]]:
    """``(line, imported module, inside a function)`` for every import in ``source`` (vpo and
    third-party alike)."""
    tree = ast.parse(source)
    lazy = {
        id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in ast.walk(f)
    }
    dynamic = _calls_import_module(tree)
    out = []
    for node in ast.walk(tree):
        inner = id(node) in lazy
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, inner) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(node, module, is_package)
            if target == "vpo":  # `from vpo import tasks` imports vpo.tasks; `from vpo import __version__` the root
                for a in node.names:
                    sub = f"vpo.{a.name}"
                    out.append((node.lineno, sub if _is_module(sub) else "vpo", inner))
            else:
                out.append((node.lineno, target, inner))
        elif (
            dynamic
            and isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and _MODULE_STRING.match(node.value)
        ):
            name = node.value.split(":")[0]
            if _is_module(name):
                out.append((node.lineno, name, inner))
    return out


def _group(module: str) -> str | None:
    """The layer key of a vpo module (``vpo.tasks.maze`` -> ``tasks``); None for the package root."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def violations(source: str, module: str, where: str, is_package: bool = False) -> list[str]:
    """Every import of ``source`` (the module ``module``, shown as ``where``) that breaks a rule."""
    group = _group(module)
    if group is not None and group not in LAYERS:
        return [f"{where}: vpo.{group} has no layer; give it one in LAYERS (tests/test_layers.py)"]
    bad = []
    for line, target, inner in imports_of(source, module, is_package):
        top = target.split(".")[0]
        if top != "vpo":
            stdlib_only = group in STDLIB_ONLY or module.startswith(SANDBOX_MODULES)
            allowed = top in sys.stdlib_module_names or top == "__future__" or (inner and top in OPTIONAL_LAZY)
            if stdlib_only and top and not allowed:
                bad.append(f"{where}:{line}: imports {target}, but {module} may import only the stdlib and vpo.errors")
            continue
        tgroup = _group(target)
        tlayer = 0 if tgroup is None else LAYERS.get(tgroup)
        if tlayer is None:
            bad.append(f"{where}:{line}: imports {target}, which has no layer in LAYERS")
            continue
        if group is None:  # vpo/__init__.py
            if tlayer > ROOT_MAX_LAYER:
                bad.append(
                    f"{where}:{line}: the package root imports {target} (layer {tlayer}); it may import only layer {ROOT_MAX_LAYER}"
                )
            continue
        layer = LAYERS[group]
        if module.startswith(SANDBOX_MODULES) and not target.startswith(SANDBOX_MODULES) and tlayer > 0:
            bad.append(
                f"{where}:{line}: the sandbox imports {target}; it may import only vpo.errors, vpo._util and the stdlib"
            )
        elif tlayer > layer:
            bad.append(
                f"{where}:{line}: imports {target} (layer {tlayer}) from layer {layer} ({module}); imports point downward only"
            )
        elif tlayer == layer == 3 and tgroup != group and (group, tgroup) not in SIBLINGS_ALLOWED:
            bad.append(
                f"{where}:{line}: vpo.{group} imports its sibling {target}; allowed between siblings: {sorted(SIBLINGS_ALLOWED)}"
            )
    return bad


def _package_files() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_module_imports_downward_only():
    files = _package_files()
    assert len(files) > 30, f"found only {len(files)} modules under {PACKAGE}"
    bad = []
    for path in files:
        rel = str(path.relative_to(ROOT))
        bad += violations(path.read_text(encoding="utf-8"), module_name(path), rel, path.name == "__init__.py")
    assert not bad, "layer violations (docs/design.md, Layers):\n" + "\n".join(bad)


def test_the_walk_sees_lazy_and_dynamic_imports():
    """The real tree has the import kinds the checker must see, so it cannot pass by seeing none."""
    found = {}
    for path in _package_files():
        found[module_name(path)] = {
            t for _, t, _ in imports_of(path.read_text(encoding="utf-8"), module_name(path), path.name == "__init__.py")
        }
    assert "vpo.search.metrics" in found["vpo.train.trainer"]  # inside a function
    assert "vpo.tasks.maze" in found["vpo.tasks.registry"]  # a registry string
    assert "vpo.train.cli" in found["vpo.cli"]  # an importlib target


@pytest.mark.parametrize(
    "module,source,rule",
    [
        ("vpo.core.fake", "from vpo.train import VPOTrainer\n", "downward only"),
        ("vpo.tasks.fake", "def f():\n    import vpo.cli\n", "downward only"),  # lazy
        ("vpo.tasks.fake", "import importlib\nM = 'vpo.search.metrics'\nimportlib.import_module(M)\n", "downward only"),
        ("vpo.core.fake", "from ..demo import run\n", "downward only"),  # relative
        ("vpo.errors", "from vpo.core import dedup\n", "downward only"),
        ("vpo.errors", "import numpy\n", "only the stdlib"),
        ("vpo.sandbox.fake", "from vpo.core.answers import dedup\n", "the sandbox imports"),
        ("vpo.sandbox.fake", "import torch\n", "only the stdlib"),
        ("vpo.sandbox.fake", "import tqdm\n", "only the stdlib"),  # optional only inside a function
        ("vpo.search.fake", "from vpo.train.trainer import VPOTrainer\n", "sibling"),
        ("vpo.train.fake", "from vpo.integrations import verl_reward\n", "sibling"),
        ("vpo", "from vpo.core import dedup\n", "package root"),
        ("vpo.newthing", "import os\n", "has no layer"),
        ("vpo.demo", "from vpo.cli import main\n", "downward only"),
    ],
)
def test_the_checker_flags_an_upward_import(module, source, rule):
    """Mutation check: a synthetic module that breaks a rule is flagged, naming file:line and the rule."""
    bad = violations(source, module, "fake.py", is_package=module == "vpo")
    assert bad and rule in bad[0], bad
    assert bad[0].startswith("fake.py")


@pytest.mark.parametrize(
    "module,source",
    [
        ("vpo.train.fake", "from vpo.search.metrics import reward_space_diversity\n"),
        ("vpo.tasks.fake", "from vpo.sandbox import Sandbox\nimport numpy\n"),
        (
            "vpo.sandbox.fake",
            "import os, subprocess\nfrom vpo.errors import UserError\nfrom vpo.sandbox.host import x\n",
        ),
        ("vpo.sandbox.fake", "def bar():\n    from tqdm.auto import tqdm\n"),
        ("vpo.demo", "import sys\nARGV = [sys.executable, '-m', 'vpo.cli', 'train']\n"),  # a subprocess, not an import
        ("vpo.cli", "def f():\n    from vpo.demo import main\n"),
        ("vpo", "from vpo.errors import VPOError\n"),
        ("vpo.integrations.fake", "from vpo import tasks\n"),
    ],
)
def test_the_checker_allows_downward_imports(module, source):
    assert violations(source, module, "fake.py", is_package=module == "vpo") == []


def _runtime_imports(source: str, module: str) -> set[str]:
    """The vpo modules ``module`` imports when it runs (at the top or inside a function), without the
    ``if TYPE_CHECKING:`` blocks, which annotations read and nothing executes."""
    tree = ast.parse(source)
    skip = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for child in node.body
        for n in ast.walk(child)
    }
    out = set()
    package = module.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("vpo")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            if base.startswith("vpo"):
                out.add(base)
                out |= {f"{base}.{a.name}" for a in node.names}
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import circle of ``graph`` (as the list of modules along it), found by depth-first search."""
    found, state, stack = [], {}, []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for t in sorted(graph.get(m, ())):
            if state.get(t) == 1:
                found.append(stack[stack.index(t) :] + [t])
            elif t in graph and not state.get(t):
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if not state.get(m):
            visit(m)
    return found


def _package_graph(package: str) -> dict[str, set[str]]:
    # the package's __init__ only re-exports, and Python runs it before any submodule anyway: left out
    files = sorted(p for p in (PACKAGE / package).glob("*.py") if p.name != "__init__.py")
    names = {module_name(p) for p in files}
    return {
        module_name(p): {t for t in _runtime_imports(p.read_text(encoding="utf-8"), module_name(p)) if t in names}
        for p in files
    }


def test_the_demo_package_has_no_import_circle():
    """vpo.demo's modules import one way (docs/design.md): the domains sit below the report, and the
    formatting helpers (vpo.demo.fmt) below both, so no module needs a lazy import to break a circle."""
    graph = _package_graph("demo")
    assert "vpo.demo.domains" in graph["vpo.demo.config"]  # the walk sees the edges it must
    assert _cycles(graph) == []


def test_the_train_package_has_no_import_circle():
    """vpo.train imports one way: the trainer builds its callbacks (lazily), and the callbacks take the
    setup error from the config and the split loader from vpo.tasks, not from the trainer."""
    graph = _package_graph("train")
    assert "vpo.train.callbacks" in graph["vpo.train.trainer"]  # a lazy import is an edge too
    assert "vpo.train.config" in graph["vpo.train.callbacks"]
    assert _cycles(graph) == []


def test_the_circle_finder_finds_a_circle_through_a_lazy_import():
    src = {"vpo.demo.a": "import vpo.demo.b\n", "vpo.demo.b": "def f():\n    from vpo.demo import a\n"}
    graph = {m: {t for t in _runtime_imports(s, m) if t in src} for m, s in src.items()}
    assert _cycles(graph) == [["vpo.demo.a", "vpo.demo.b", "vpo.demo.a"]]
    typed = {
        "vpo.demo.a": "import vpo.demo.b\n",
        "vpo.demo.b": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import vpo.demo.a\n",
    }
    graph = {m: {t for t in _runtime_imports(s, m) if t in typed} for m, s in typed.items()}
    assert _cycles(graph) == []


def test_the_search_package_map_names_every_module():
    """vpo.search's docstring says where each metric lives and where a new one goes: every module of
    the package is named in it."""
    import vpo.search

    doc = vpo.search.__doc__
    for p in (PACKAGE / "search").glob("*.py"):
        if p.name != "__init__.py":
            assert f":mod:`{p.stem}`" in doc, p.stem
