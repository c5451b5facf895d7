"""Write ``constraints.txt``: the exact version of every package ``pip install -e ".[trl,dev,evolve]"``
pulls in, as installed in this environment (the one the shipped demo reports were produced in).

    python scripts/write_constraints.py > constraints.txt

The README's install passes it (``pip install -c constraints.txt ...``), so a rerun on another machine
gets the same libraries and differs only by the machine (float rounding; docs/demo.md says how far
that moves the demo's figures). Walks the ``Requires-Dist`` metadata of vpo and its extras
recursively (environment markers evaluated here); vpo itself and pip's own tools are left out.
"""

from __future__ import annotations

import importlib.metadata as md
import re
import sys

from packaging.requirements import Requirement

EXTRAS = ("trl", "dev", "evolve")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(root: str = "vpo", extras: tuple[str, ...] = EXTRAS) -> dict[str, str]:
    seen: dict[str, str] = {}
    todo = [(root, set(extras))]
    while todo:
        name, ex = todo.pop()
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        for text in dist.requires or []:
            req = Requirement(text)
            envs = [{"extra": e} for e in (ex or {""})]
            if req.marker is not None and not any(req.marker.evaluate(env) for env in envs):
                continue
            key = _norm(req.name)
            if key in seen:
                continue
            try:
                seen[key] = md.version(req.name)
            except md.PackageNotFoundError:
                continue
            todo.append((req.name, set(req.extras)))
    return seen


def main() -> int:
    pins = closure()
    pins.pop("vpo", None)
    for tool in ("pip", "setuptools", "wheel"):
        pins.pop(tool, None)
    print("# pip install -c constraints.txt ...: the versions the shipped reports were produced with")
    print(f"# written by scripts/write_constraints.py on Python {sys.version.split()[0]}")
    for name in sorted(pins):
        release = pins[name].split("+")[0]  # a local label (+cpu) names the build, not the release
        print(f"{name}=={release}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
