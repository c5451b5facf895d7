"""The sandbox soak (benchmarks/sandbox_soak.py): its leak detectors see a planted leak of each kind
(so a zero in its report means something), and, in the slow suite, a 40-second soak of mixed
well-behaved, failing and hostile programs leaves no process, cgroup, scratch directory or fd
behind, with bounded RSS growth and no sandbox errors.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOAK = ROOT / "benchmarks" / "sandbox_soak.py"


def _load():
    spec = importlib.util.spec_from_file_location("sandbox_soak_bench", SOAK)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_soak_detectors_see_planted_leaks(tmp_path):
    soak = _load()
    base = soak.snapshot(str(tmp_path), set())
    child = subprocess.Popen(["/bin/sleep", "30"])  # a descendant of this process
    # an orphan (not our descendant): found only by the marker in its command line
    spawn = (
        f"import os\npid = os.fork()\nif pid == 0:\n    os.setsid()\n"
        f"    os.dup2(os.open('/dev/null', os.O_RDWR), 1)\n    os.dup2(1, 2)\n    os.execv('/bin/sleep', [{soak.MARKER!r}, '30'])\nprint(pid)"
    )
    marked = int(subprocess.run([sys.executable, "-c", spawn], capture_output=True, text=True).stdout)
    (tmp_path / f"vpo-sbx-{os.getpid()}-planted").mkdir()
    fd = os.open(os.devnull, os.O_RDONLY)
    cgroup = None
    bases = list(soak.cgroup_dirs().values())
    if bases:  # root with writable cgroups: a planted per-sandbox cgroup is counted too
        cgroup = os.path.join(bases[0], f"vpo-sbx-{os.getpid()}-planted")
        os.mkdir(cgroup)
    try:
        time.sleep(0.1)
        now = soak.snapshot(str(tmp_path), set())
        procs = "\n".join(now["processes"])
        assert f"{child.pid} " in procs and f"{marked} uid" in procs, procs
        assert soak._proc_table()[marked][0] != os.getpid()  # really not our child
        assert len(now["scratch"]) == len(base["scratch"]) + 1
        assert now["fds"] >= base["fds"] + 1
        if cgroup is not None:
            assert len(now["cgroups"]) == len(base["cgroups"]) + 1
    finally:
        os.close(fd)
        child.kill()
        child.wait()
        os.kill(marked, 9)
        if cgroup is not None:
            os.rmdir(cgroup)


@pytest.mark.slow
def test_a_40_second_soak_leaves_nothing_behind():
    """Run in a fresh interpreter, so the host's fds and RSS are the soak's alone. RSS may grow by a
    few MB (the per-program records, allocator high-water marks; 2.8 MB here); 25 MB would be a
    leak of over 100 KB per program across the ~190 programs this run gets on the development
    machine."""
    r = subprocess.run(
        [sys.executable, str(SOAK), "--seconds", "40", "--slices", "4", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    print("\n" + "\n".join(r.stdout.strip().splitlines()[:-1]))
    assert out["programs"] >= 40 and min(out["programs_by_category"].values()) > 0, out
    assert out["leaked_processes"] == 0, out["leaked_process_examples"]
    assert out["leaked_cgroups"] == 0 and out["leaked_scratch_dirs"] == 0
    assert out["fd_delta"] == 0
    assert out["rss_delta_mb"] < 25, out["rss_fd_per_slice"]
    assert out["sandbox_errors"] == 0, out["unexpected_examples"]
    # under a loaded shared machine a well-behaved program may time out now and then; no more than 2%
    assert out["unexpected_outcomes"] <= max(1, 0.02 * out["programs"]), out["unexpected_examples"]


def test_paired_mode_refuses_a_tree_without_the_sandbox(tmp_path):
    soak = _load()
    with pytest.raises(SystemExit, match="no vpo/sandbox package there"):
        soak.main(["--paired-with", str(tmp_path), "--pairs", "1"])


@pytest.mark.slow
def test_a_quick_paired_soak_compares_two_trees():
    """One quick pair against this very tree: both runs clean, a ratio per pair and their median."""
    r = subprocess.run(
        [sys.executable, str(SOAK), "--paired-with", str(ROOT), "--pairs", "1", "--quick", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(out["ratios"]) == 1 and out["ratio_median"] == out["ratios"][0] > 0, out
    assert out["leaked_processes_this"] == out["leaked_processes_other"] == [0], out
    assert len(out["load_1min_this"][0]) == 2
