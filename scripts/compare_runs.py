"""Are two demo runs' models the same, bit for bit? (a rerun's reproduction check, docs/demo.md)

    python scripts/compare_runs.py runs/maze10 runs/maze10_val          # table
    python scripts/compare_runs.py runs/maze10 runs/maze10_val --json   # + one JSON object on the last line
    python scripts/compare_runs.py docs/demo/prog10 runs/prog10_val     # a shipped report: its records

For every warm start and every trained model the two runs share (``warmstart_s*`` and ``runs/*``),
the SHA-256 of its weight files (``*.safetensors``) in each run; and every logged training loss of
each shared run (``trainer_state.json``), compared exactly. Exit status 0 when every shared model is
identical, 1 when one differs, 2 when the runs share none.

When either side has no model files (a shipped report folder holds only ``demo.json``), the two
``demo.json`` records are compared instead, exactly: each seed's warm-start weights SHA-256 and, for
each method and seed both ran, its logged training curves (every step's reward, diversity and
completion length). Equal curves are not equal weights, but 180 logged values per model that agree
to the last bit leave little room.
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


def compare_records(a: Path, b: Path) -> dict:
    """The records of two ``demo.json`` (in run or report folders ``a`` and ``b``) compared exactly: the
    warm start of each seed both list (weights SHA-256) and each shared method's training curves per
    seed. Rows as :func:`compare`'s, with ``same_losses`` meaning the same curves."""
    ra, rb = (json.loads((d / "demo.json").read_text()) for d in (a, b))

    def warm(r: dict) -> dict[int, str]:
        reps = r.get("warm_start", {}).get("replicates") or [r.get("warm_start", {})]
        return {s: w.get("weights_sha256") for s, w in zip(r["config"]["seeds"], reps) if w.get("weights_sha256")}

    def curves(r: dict) -> dict[str, dict]:
        out = {}
        for method, metrics in r.get("training_curves", {}).items():
            for i, seed in enumerate(r["config"]["seeds"]):
                out[f"runs/{method}_s{seed}"] = {k: v[i] for k, v in metrics.items() if i < len(v)}
        return out

    wa, wb = warm(ra), warm(rb)
    rows = [
        {"model": f"warmstart_s{s}", "same_weights": wa[s] == wb[s], "same_losses": None}
        | {"sha256_a": wa[s][:16], "sha256_b": wb[s][:16]}
        for s in sorted(set(wa) & set(wb))
    ]
    ca, cb = curves(ra), curves(rb)
    for name in sorted(set(ca) & set(cb)):
        rows.append(
            {"model": name, "same_weights": None, "same_losses": ca[name] == cb[name], "sha256_a": "", "sha256_b": ""}
        )
    names_a = {f"warmstart_s{s}" for s in wa} | set(ca)
    names_b = {f"warmstart_s{s}" for s in wb} | set(cb)
    return {
        "a": str(a),
        "b": str(b),
        "records": True,
        "shared": len(rows),
        "identical": sum(bool(r["same_weights"]) or bool(r["same_losses"]) for r in rows),
        "same_losses": sum(bool(r["same_losses"]) for r in rows),
        "only_in_a": sorted(names_a - names_b),
        "only_in_b": sorted(names_b - names_a),
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a", type=Path)
    ap.add_argument("b", type=Path)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    records = not (_model_dirs(args.a) and _model_dirs(args.b))
    if records and all((d / "demo.json").exists() for d in (args.a, args.b)):
        res = compare_records(args.a, args.b)
    else:
        res = compare(args.a, args.b)
    if not res["shared"]:
        print(f"compare_runs: {args.a} and {args.b} share no model directory or record", file=sys.stderr)
        return 2
    if res.get("records"):
        print("From the two demo.json records (no model files on one side): warm starts by weights SHA-256, trained")
        print("models by their logged training curves.\n")
        heads, noun = ("same weights SHA-256", "same training curves"), "records"
    else:
        heads, noun = ("same weights", "same losses"), "models"
    print(f"| model | {heads[0]} | {heads[1]} | SHA-256 (a) | SHA-256 (b) |\n|---|---|---|---|---|")
    for r in res["rows"]:
        w, c = ("—" if v is None else v for v in (r["same_weights"], r["same_losses"]))
        print(f"| {r['model']} | {w} | {c} | {r['sha256_a']} | {r['sha256_b']} |")
    summary = f"\n{res['identical']} of {res['shared']} shared {noun} identical"
    print(summary if res.get("records") else f"{summary}; {res['same_losses']} with the same losses")
    if args.json:
        print(json.dumps({k: v for k, v in res.items() if k != "rows"}))
    return 0 if res["identical"] == res["shared"] else 1


if __name__ == "__main__":
    sys.exit(main())
