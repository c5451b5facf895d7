"""The wheel holds what `vpo train` and the docs point at: every paper config and every
accelerate/DeepSpeed config under vpo/configs/, and every other non-Python file of the package.
Built offline from a copy of the package (``pip wheel --no-deps --no-build-isolation --no-index``,
with the installed setuptools), so the source tree gets no build/ or egg-info folders."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _package_data_files() -> set[str]:
    """Non-Python files of the package as the wheel should name them (``vpo/...``)."""
    out = set()
    for p in (ROOT / "vpo").rglob("*"):
        if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts:
            out.add(p.relative_to(ROOT).as_posix())
    return out


def test_wheel_contains_the_configs(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for lic in ROOT.glob("LICEN[CS]E*"):
        shutil.copy(lic, src / lic.name)
    shutil.copytree(ROOT / "vpo", src / "vpo", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    dist = tmp_path / "dist"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "-w",
            str(dist),
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    wheels = list(dist.glob("vpo-*.whl"))
    assert len(wheels) == 1, list(dist.iterdir())
    names = set(zipfile.ZipFile(wheels[0]).namelist())

    configs = {f"vpo/configs/{p.name}" for p in (ROOT / "vpo" / "configs").glob("*.yaml")}
    accel = {f"vpo/configs/accelerate/{p.name}" for p in (ROOT / "vpo" / "configs" / "accelerate").glob("*.yaml")}
    assert (
        len(configs) >= 6
        and {"vpo/configs/accelerate/multi_gpu.yaml", "vpo/configs/accelerate/deepspeed_zero3.yaml"} <= accel
    )
    assert configs <= names, sorted(configs - names)
    assert accel <= names, sorted(accel - names)
    assert _package_data_files() <= names, sorted(_package_data_files() - names)
    assert "vpo/sandbox/worker.py" in names and "vpo/train/cli.py" in names  # run by path / the CLI
    assert not any(n.startswith("vpo/data/") for n in names)
