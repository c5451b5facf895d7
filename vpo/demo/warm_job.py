"""One warm start of a demo run as a job: ``python -m vpo.demo.warm_job OUT SEED``.

``OUT`` is the demo directory (its ``demo_config.json`` holds the settings), ``SEED`` a replicate's
seed or ``shared``. :func:`vpo.demo.runner.run_demo` runs the warm starts this way, in the job
slots beside the training and evaluation jobs, when they use one torch thread (``warm_threads=1``);
the result is what :func:`vpo.demo.stages.warm_start` trains in process.
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m vpo.demo.warm_job OUT SEED|shared", file=sys.stderr)
        return 2
    from vpo.demo.config import DemoConfig
    from vpo.demo.stages import warm_start

    out = Path(args[0])
    cfg = DemoConfig.load(out)
    warm_seed = None if args[1] == "shared" else int(args[1])
    if warm_seed not in cfg.warm_seeds():
        print(f"{out}: this run has no warm start {args[1]!r} (its warm starts: {cfg.warm_seeds()})", file=sys.stderr)
        return 2
    warm_start(cfg, out, warm_seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
