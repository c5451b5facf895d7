"""vpo's sampler (vpo/search/fast_decode.py) at a git revision against the working tree, in paired
rounds on one model: how much a change to the sampler moved generation, apart from the machine.

    python benchmarks/sampler_ab.py --model runs/smollm2 --baseline a791a69   # the docs' figure
    python benchmarks/sampler_ab.py --quick         # seconds, the working tree against itself: does it run
    python benchmarks/sampler_ab.py ... --json                                 # + one JSON object last

Both samplers take their weight snapshot from the same model and generate ``--rows`` rows of one shop
prompt (the training benchmark's, benchmarks/train_step.py), exactly ``--tokens`` new tokens each.
A round reads the decode step's products alone (the limit, benchmarks/step_phases.py), then times
each sampler twice and keeps the faster call; the two samplers alternate which goes first. Figures:
the median and IQR over rounds of the time ratio (working tree / baseline) and of each sampler's
fraction of that round's limit (new tokens x limit step / time, prefill and sampling included).
With ``--check-tokens`` the two samplers also draw from one seed each round and must return the same
tokens (a change meant to keep the arithmetic exact).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))


def baseline_module(rev: str):
    """vpo.search.fast_decode as it was at git revision ``rev`` (``git show``), or the file at path
    ``rev``, loaded as a module of its own beside today's."""
    if Path(rev).is_file():
        src = Path(rev).read_text()
    else:
        try:
            src = subprocess.run(
                ["git", "show", f"{rev}:vpo/search/fast_decode.py"],
                cwd=ROOT,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        except (OSError, subprocess.CalledProcessError) as e:
            why = e.stderr.strip() if isinstance(e, subprocess.CalledProcessError) else str(e)
            print(f"sampler_ab: cannot read vpo/search/fast_decode.py at {rev!r}: {why}", file=sys.stderr)
            raise SystemExit(2) from e
    path = Path(tempfile.mkdtemp()) / "fast_decode_baseline.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("fast_decode_baseline", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def run(model_dir: str, baseline: str, rows: int, tokens: int, rounds: int, threads: int, check_tokens: bool) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import vpo.search.fast_decode as today
    from step_phases import decode_gemm_seconds
    from train_step import _spread, _timed, shop_question

    torch.set_num_threads(threads)
    old = baseline_module(baseline)
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    text = tok.apply_chat_template([{"role": "user", "content": shop_question(0)}], tokenize=False)
    enc = tok([text] * rows, return_tensors="pt")
    dtype = today.decode_dtype()
    mods = {"baseline": old, "today": today}
    decs = {k: m.FastDecoder(model, dtype) for k, m in mods.items()}
    eos, pad = [tok.eos_token_id], tok.pad_token_id
    if pad is None:
        pad = eos[0]

    def gen(k, seed=None):
        s = mods[k].Sampling(max_new_tokens=tokens, min_new_tokens=tokens)
        g = None if seed is None else torch.Generator().manual_seed(seed)
        return decs[k].generate(enc.input_ids, enc.attention_mask, s, eos, pad, g)

    for k in decs:  # untimed: first-call costs
        gen(k)
    out = {"gemm_s": [], "baseline_s": [], "today_s": [], "same_tokens": []}
    for r in range(rounds):
        out["gemm_s"].append(decode_gemm_seconds(decs["today"], rows))
        for k in ("baseline", "today") if r % 2 == 0 else ("today", "baseline"):
            out[f"{k}_s"].append(min(_timed(lambda k=k: gen(k)) for _ in range(2)))
        if check_tokens:
            out["same_tokens"].append(bool(torch.equal(gen("baseline", r), gen("today", r))))
        print(
            f"round {r + 1}/{rounds}: limit step {out['gemm_s'][-1] * 1e3:.2f} ms, baseline {out['baseline_s'][-1]:.3f} s,"
            f" today {out['today_s'][-1]:.3f} s",
            file=sys.stderr,
            flush=True,
        )
    g, b, t = out["gemm_s"], out["baseline_s"], out["today_s"]
    return {
        "model": model_dir,
        "baseline": baseline,
        "rows": rows,
        "tokens": tokens,
        "prompt_tokens": enc.input_ids.size(1),
        "rounds": rounds,
        "threads": threads,
        "dtype": str(dtype).removeprefix("torch."),
        "per_round": out,
        "time_ratio_today_vs_baseline": _spread([x / y for x, y in zip(t, b)]),
        "fraction_of_limit_baseline": _spread([tokens * gi / bi for gi, bi in zip(g, b)]),
        "fraction_of_limit_today": _spread([tokens * gi / ti for gi, ti in zip(g, t)]),
        "same_tokens": all(out["same_tokens"]) if check_tokens else None,
    }


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="checkpoint, e.g. runs/smollm2 (vpo models fetch smollm2)")
    ap.add_argument(
        "--baseline",
        default="HEAD",
        help="the baseline sampler: a git revision (default HEAD) or a fast_decode.py path",
    )
    ap.add_argument("--rows", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=24, help="new tokens per row")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--check-tokens", action="store_true", help="both samplers must draw the same tokens")
    ap.add_argument("--quick", action="store_true", help="a tiny model, 2 rounds (seconds): checks the script runs")
    ap.add_argument("--json", action="store_true", help="print one JSON object on the last line")
    a = ap.parse_args(argv)
    if a.quick:
        from vpo.train.tiny import build_tiny_model

        a.model = str(build_tiny_model(tempfile.mkdtemp() + "/m", hidden_size=32, num_layers=1, num_heads=4))
        a.rows, a.tokens, a.rounds = 4, 4, 2
        if a.baseline == "HEAD":  # no git needed: the working tree against itself
            a.baseline = str(ROOT / "vpo" / "search" / "fast_decode.py")
    elif not a.model:
        ap.error("--model is required (or --quick)")
    r = run(a.model, a.baseline, a.rows, a.tokens, a.rounds, a.threads, a.check_tokens)
    tr, fb, ft = r["time_ratio_today_vs_baseline"], r["fraction_of_limit_baseline"], r["fraction_of_limit_today"]
    print(f"sampler at {a.baseline} vs the working tree: {a.rows} rows x {a.tokens} tokens, {a.rounds} paired rounds")
    print(f"{'':34s}{'median':>8s}{'IQR':>16s}")
    for name, v in (
        ("time, today / baseline", tr),
        ("baseline: fraction of the limit", fb),
        ("today: fraction of the limit", ft),
    ):
        print(f"{name:34s}{v['median']:8.3f}   [{v['iqr'][0]:.3f}, {v['iqr'][1]:.3f}]")
    if r["same_tokens"] is not None:
        print(f"same tokens from the same seed: {r['same_tokens']}")
    if a.json:
        print(json.dumps(r))
    return r


if __name__ == "__main__":
    main()
