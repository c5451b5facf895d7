"""A demo worker runs jobs in one process: runpy's "found in sys.modules" warning (expected from the
second job on) is silenced, and every other warning a job raises reaches its log."""

from __future__ import annotations

import subprocess
import sys


def test_a_jobs_runtime_warnings_reach_its_log_and_runpys_does_not(tmp_path):
    (tmp_path / "warny_job.py").write_text(
        "import warnings\n"
        "warnings.warn('vpo: step 3: no learning signal in this batch', RuntimeWarning)\n"
        "warnings.warn('scorer raised ValueError on 2 answers', UserWarning)\n"
    )
    logs = [tmp_path / f"job{i}.log" for i in range(2)]
    # a worker process as the demo starts one (warnings shown on stderr, not recorded by pytest);
    # the second run of the same module is when runpy warns
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from vpo.demo.worker import run_job\n"
        "sys.exit(sum(run_job(['-m', 'warny_job'], log) for log in sys.argv[2:]))\n"
    )
    subprocess.run([sys.executable, "-c", code, str(tmp_path), *map(str, logs)], check=True, timeout=120)
    for log in logs:
        text = log.read_text()
        assert "no learning signal in this batch" in text
        assert "scorer raised ValueError" in text
        assert "found in sys.modules" not in text
