"""Are two demo runs' models the same, bit for bit? (a rerun's reproduction check, docs/demo.md)

    python scripts/compare_runs.py runs/maze10 runs/maze10_val          # table
    python scripts/compare_runs.py runs/maze10 runs/maze10_val --json   # + one JSON object on the last line

For every warm start and every trained model the two runs share (``warmstart_s*`` and ``runs/*``),
the SHA-256 of its weight files (``*.safetensors``) in each run; and every logged training loss of
each shared run (``trainer_state.json``), compared exactly. Exit status 0 when every shared model is
identical, 1 when one differs, 2 when the runs share none.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _model_dirs(run: Path) -> dict[str, Path]:
    dirs = {p.name: p for p in run.glob("warmstart*") if p.is_dir()}
    dirs.update({f"runs/{p.name}": p for p in (run / "runs").glob("*") if p.is_dir()})
    return {k: v for k, v in dirs.items() if any(v.glob("*.safetensors"))}


def _losses(model_dir: Path) -> list[float] | None:
    f = model_dir / "trainer_state.json"
    if not f.exists():
        return None
    return [h["loss"] for h in json.loads(f.read_text())["log_history"] if "loss" in h]


def compare(a: Path, b: Path) -> dict:
    from vpo.demo.stages import weights_sha256

    da, db = _model_dirs(a), _model_dirs(b)
    shared = sorted(set(da) & set(db))
    rows = []
    for name in shared:
        ha, hb = weights_sha256(da[name]), weights_sha256(db[name])
        la, lb = _losses(da[name]), _losses(db[name])
        rows.append(
            {"model": name, "same_weights": ha == hb, "same_losses": la == lb, "sha256_a": ha[:16], "sha256_b": hb[:16]}
        )
    return {
        "a": str(a),
        "b": str(b),
        "shared": len(shared),
        "identical": sum(r["same_weights"] for r in rows),
        "same_losses": sum(r["same_losses"] for r in rows),
        "only_in_a": sorted(set(da) - set(db)),
        "only_in_b": sorted(set(db) - set(da)),
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a", type=Path)
    ap.add_argument("b", type=Path)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    res = compare(args.a, args.b)
    if not res["shared"]:
        print(f"compare_runs: {args.a} and {args.b} share no model directory", file=sys.stderr)
        return 2
    print("| model | same weights | same losses | SHA-256 (a) | SHA-256 (b) |\n|---|---|---|---|---|")
    for r in res["rows"]:
        print(f"| {r['model']} | {r['same_weights']} | {r['same_losses']} | {r['sha256_a']} | {r['sha256_b']} |")
    print(f"\n{res['identical']} of {res['shared']} shared models identical; {res['same_losses']} with the same losses")
    if args.json:
        print(json.dumps({k: v for k, v in res.items() if k != "rows"}))
    return 0 if res["identical"] == res["shared"] else 1


if __name__ == "__main__":
    sys.exit(main())
