"""Supervised warm start: the loss falls on a learnable mapping, and the model then writes it."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from vpo.train.warmstart import format_answers, supervised_warm_start  # noqa: E402


def test_format_answers():
    assert format_answers(["RRU"], 1) == "<answer>RRU</answer>"
    assert (
        format_answers(["A", "B", "C", "D"], 3) == "<answer_1>A</answer_1><answer_2>B</answer_2><answer_3>C</answer_3>"
    )


def test_warm_start_learns_a_mapping(tmp_path, tiny_model_dir):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from vpo.core import parse_answers

    # a copy task the tiny model can learn in a few hundred steps: repeat the letter twice
    letters = "abcdefgh"
    pairs = [(f"Say {c}", format_answers([c * 2], 1)) for c in letters]
    info = supervised_warm_start(
        tiny_model_dir,
        tmp_path / "ws",
        pairs,
        steps=150,
        batch_size=8,
        learning_rate=1e-2,
        warmup_steps=10,
        progress=False,
        log_every=25,
    )
    assert info["loss_last"] < 0.5 * info["loss_first"]
    tok = AutoTokenizer.from_pretrained(tmp_path / "ws")
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "ws")
    hits = 0
    for c in letters:
        text = tok.apply_chat_template(
            [{"role": "user", "content": f"Say {c}"}], tokenize=False, add_generation_prompt=True
        )
        ids = tok(text, return_tensors="pt", add_special_tokens=False)
        with torch.no_grad():
            out = model.generate(**ids, max_new_tokens=24, do_sample=False)
        answer = parse_answers(tok.decode(out[0, ids.input_ids.shape[1] :], skip_special_tokens=True), 1)
        hits += answer == [c * 2]
    assert hits >= 6, hits


def test_warm_start_rejects_empty_data(tmp_path, tiny_model_dir):
    with pytest.raises(ValueError, match="no \\(prompt, completion\\) pairs"):
        supervised_warm_start(tiny_model_dir, tmp_path / "x", [], steps=1)


def test_tiny_tokenizer_round_trips_text_and_keeps_tags_whole(tmp_path):
    from transformers import AutoTokenizer

    from vpo.train.tiny import build_tiny_model

    path = build_tiny_model(tmp_path / "m", hidden_size=32, num_layers=1, num_heads=2)
    tok = AutoTokenizer.from_pretrained(path)  # reloads as the Qwen2Tokenizer transformers picks
    text = "Go R, then U.\n\t<answer_1>RRUU</answer_1><answer_2>L L</answer_2> <answer>x</answer> é"
    ids = tok(text, add_special_tokens=False).input_ids
    assert tok.decode(ids, skip_special_tokens=True) == text
    toks = tok.convert_ids_to_tokens(ids)
    assert "<answer_1>" in toks and "</answer_2>" in toks and "<answer>" in toks
    assert len(tok("abc", add_special_tokens=False).input_ids) == 3  # one token per character
