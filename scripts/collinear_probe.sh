#!/usr/bin/env bash
# The rho-bar = 1 maze control (docs/demo.md, "When VPO should not help"): GRPO and VPO, seed 0, trained
# from the default demo's warm start (run `vpo demo --out runs/demo` first) on the maze with
# collinear: true and the default RL settings, then evaluated on the 100 validation mazes.
# Results: python scripts/collinear_probe_table.py runs/probe_collinear
set -e
cd "$(dirname "$0")/.."
OUT=runs/probe_collinear
rm -rf $OUT && mkdir -p $OUT
python - <<'PY'
import json, yaml
from pathlib import Path
from vpo.demo.config import DemoConfig
from vpo.demo.stages import train_config, eval_argv
cfg = DemoConfig(split="validation")
out = Path("runs/probe_collinear")
# replicate 0's warm start (the default demo, one warm start per seed), or a shared one (demos run
# with --set warm_start=shared, and every demo before that setting)
ws = next(p for p in (Path("runs/demo/warmstart_s0"), Path("runs/demo/warmstart")) if p.exists())
opts = {**cfg.task_options(), "collinear": True}
cmds = []
for method, m in (("grpo", 1), ("vpo", 3)):
    tc = train_config(cfg, method, 0, ws, out / "runs" / f"{method}_s0")
    tc["task_options"] = json.dumps(opts)
    (out / f"{method}.yaml").write_text(yaml.safe_dump(tc, sort_keys=False))
for name, model, m in (("warmstart_m1", ws, 1), ("warmstart_m3", ws, 3), ("grpo_s0", out / "runs" / "grpo_s0", 1), ("vpo_s0", out / "runs" / "vpo_s0", 3)):
    argv = eval_argv(cfg, model, m, out / "eval" / name, name, 0)
    i = argv.index("--task-options"); argv[i + 1] = json.dumps(opts)
    cmds.append(" ".join(json.dumps(a) if " " in a or "{" in a else a for a in argv[1:]))
Path("runs/probe_collinear/evals.txt").write_text("\n".join(cmds) + "\n")
PY
export OMP_NUM_THREADS=1
python -m vpo.cli train $OUT/grpo.yaml > $OUT/train_grpo.log 2>&1 &
python -m vpo.cli train $OUT/vpo.yaml > $OUT/train_vpo.log 2>&1
wait
while read -r line; do eval python $line > /dev/null 2>&1 & done < $OUT/evals.txt
wait
echo PROBE DONE
