"""Write a vpo task's examples as veRL parquet files (train.parquet, validation.parquet).

Each row holds the m-answer prompt as a chat message, ``data_source='vpo/<task>'`` and the task
example as JSON in ``reward_model.ground_truth`` (what ``vpo.integrations.verl_reward.compute_score``
reads back). Needs pandas + pyarrow (present in the veRL environment).

    python examples/verl/prepare_data.py --task musique --num-answers 3 --out ~/data/vpo_musique_m3 \
        --train-n 20000 --val-n 300

Evaluation-only tasks (humaneval, bfcl: no training split) write validation.parquet alone with
``--train-split none``, for ``data.val_files`` beside another task's training data:

    python examples/verl/prepare_data.py --task humaneval --train-split none --val-split validation \
        --val-n 32 --num-answers 3 --out ~/data/vpo_humaneval_m3
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


SPLIT_HINT = "--train-split / --val-split choose the splits; --train-split none writes validation.parquet alone"
"""What the error line of a split that cannot load suggests (a caller such as run_cpu.py gives its own)."""


def main(argv=None, *, split_hint: str = SPLIT_HINT) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", required=True, help="vpo task name (vpo tasks)")
    p.add_argument("--task-options", default="{}", help='JSON dict of task options, e.g. \'{"path": "musique/"}\'')
    p.add_argument(
        "--num-answers", type=int, default=3, help="answers per rollout written into the prompt (1 for GRPO)"
    )
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument(
        "--train-split", default="train", help="the split written as train.parquet; 'none': no training file"
    )
    p.add_argument("--val-split", default="validation")
    p.add_argument("--train-n", type=int, default=None, help="train examples (default: all)")
    p.add_argument("--val-n", type=int, default=300, help="validation examples (paper: 300)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    import pandas as pd

    from vpo import tasks
    from vpo.errors import UserError
    from vpo.integrations.verl_reward import make_verl_rows
    from vpo.tasks.registry import load_split

    try:  # the task's own mistakes (a factory, a split it lacks, a missing data file): one line, exit 2
        task = tasks.get(args.task, **json.loads(args.task_options))
        loaded = [
            (load_split(task, split, n=n, seed=args.seed, spec=args.task, required=True, purpose="write"), split, fname)
            for split, n, fname in (
                (args.train_split, args.train_n, "train"),
                (args.val_split, args.val_n, "validation"),
            )
            if split.lower() != "none"
        ]
    except UserError as e:
        print(f"prepare_data.py: error: {' '.join(str(e).split())} ({split_hint})", file=sys.stderr)
        return 2
    out = Path(args.out).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    for examples, split, fname in loaded:
        rows = make_verl_rows(task, examples, args.num_answers, split=split)
        pd.DataFrame(rows).to_parquet(out / f"{fname}.parquet")
        print(f"{fname}: {len(rows)} rows -> {out / f'{fname}.parquet'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
