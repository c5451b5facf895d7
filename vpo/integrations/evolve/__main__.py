"""``python -m vpo.integrations.evolve --eval-worker SPEC.json``: the evaluation worker process.

Internal: :class:`vpo.integrations.evolve.worker._EvalWorker` starts it; users run ``vpo evolve``.
"""

from __future__ import annotations

import sys

from vpo.integrations.evolve.worker import _worker_main


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--eval-worker":
        return _worker_main(argv[1])
    print(
        "usage: python -m vpo.integrations.evolve --eval-worker SPEC.json (internal; use `vpo evolve`)", file=sys.stderr
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
