"""#51 item 6, the small ones on the evaluation side: a LoRA adapter evaluates without transformers'
``is_gradient_checkpointing`` FutureWarning (peft reads the deprecated property while vpo loads the
adapter), and ``vpo check`` words the notes of the ``vpo eval`` it runs as "vpo check:"."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest


def _save_adapter(base_dir: str, out: Path) -> Path:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(base_dir)
    cfg = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
    with warnings.catch_warnings():  # peft's own read of the deprecated property, in this helper only
        warnings.simplefilter("ignore", FutureWarning)
        get_peft_model(model, cfg).save_pretrained(out)
    AutoTokenizer.from_pretrained(base_dir).save_pretrained(out)
    return out


def test_loading_a_lora_adapter_prints_no_gradient_checkpointing_future_warning(tiny_model_dir, tmp_path):
    pytest.importorskip("peft")
    from vpo.search.backends import load_causal_lm

    adapter = _save_adapter(tiny_model_dir, tmp_path / "lora")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        model, tok = load_causal_lm(str(adapter), dtype=None)
    assert model is not None and tok is not None
    said = [str(w.message) for w in seen if "is_gradient_checkpointing" in str(w.message)]
    assert said == []


def test_vpo_check_words_its_notes_as_vpo_check(tiny_model_dir, tmp_path, capsys):
    """The checkpoint's task and num_answers, taken by the vpo eval that vpo check runs, are said as
    `vpo check: ...` (the command the user ran); vpo eval itself still says `vpo eval:`."""
    from vpo.cli import main

    ckpt = tmp_path / "ckpt"
    shutil.copytree(tiny_model_dir, ckpt)
    trained = {"task": "maze", "task_options": {"size": 5, "instruction": "short"}, "num_answers": 3}
    (ckpt / "vpo_args.json").write_text(json.dumps(trained))
    fast = ["--rollouts", "2", "--num-prompts", "2", "--max-new-tokens", "8", "--ks", "1,2", "--bootstrap", "0"]
    assert main(["check", str(ckpt), *fast, "--no-plots", "--quiet", "--out", str(tmp_path / "chk")]) == 0
    err = capsys.readouterr().err
    assert "vpo check: task maze" in err and "vpo check: num_answers = 3" in err, err
    assert "vpo eval:" not in err, err
    assert main(["eval", "--model", str(ckpt), *fast, "--no-plots", "--quiet", "--out", str(tmp_path / "ev")]) == 0
    assert "vpo eval: task maze" in capsys.readouterr().err
