"""Offline tiny models: a character-level tokenizer with a chat template and a small Qwen2, saved with
``save_pretrained`` so that TRL, ``vpo eval`` and vLLM load them like any hub checkpoint.

Used by the tests and the CPU demo; no model hub is needed. Simplifications: one token per byte
(a byte-level BPE without merges, so ASCII text is one token per character) except the answer tags
of the multi-answer format, which are one token each; the chat template is a plain
``<|user|>``/``<|assistant|>`` layout.
"""

from __future__ import annotations

from pathlib import Path

ANSWER_TAG_TOKENS = (
    ["<answer>", "</answer>"] + [f"<answer_{i}>" for i in range(1, 9)] + [f"</answer_{i}>" for i in range(1, 9)]
)
"""The multi-answer tags of :mod:`vpo.core.answers` (m <= 8): one token each, as a real LLM's BPE
merges frequent strings, so a tiny model neither spends its capacity nor its generation steps on
spelling them."""
SPECIAL_TOKENS = ["<pad>", "<unk>", "<bos>", "<eos>", "<|user|>", "<|assistant|>", "<|system|>"]

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}<|system|>{{ message['content'] }}\n"
    "{% elif message['role'] == 'user' %}<|user|>{{ message['content'] }}\n"
    "{% elif message['role'] == 'assistant' %}<|assistant|>{{ message['content'] }}<eos>"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def build_char_tokenizer(extra_tokens: list[str] | tuple[str, ...] = tuple(ANSWER_TAG_TOKENS)):
    """A ``PreTrainedTokenizerFast`` with one token per byte (ASCII characters are one token each)
    plus ``extra_tokens`` as single (non-special: decoded like text) tokens.

    It is a byte-level BPE with no merges, so it survives being reloaded as the ``Qwen2Tokenizer``
    that transformers forces on qwen2 checkpoints, and vLLM serves it unchanged.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for ch in sorted(ByteLevel.alphabet()):
        vocab.setdefault(ch, len(vocab))
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        unk_token="<unk>",
        bos_token="<bos>",
        eos_token="<eos>",
        additional_special_tokens=["<|user|>", "<|assistant|>", "<|system|>"],
    )
    if extra_tokens:
        fast.add_tokens([AddedToken(t, special=False, normalized=False) for t in extra_tokens])
    fast.chat_template = CHAT_TEMPLATE
    fast.padding_side = "left"
    return fast


def build_tiny_model(
    out_dir: str | Path,
    *,
    hidden_size: int = 128,
    num_layers: int = 2,
    num_heads: int = 4,
    intermediate_size: int | None = None,
    max_position_embeddings: int = 1024,
    seed: int = 0,
) -> Path:
    """Build a randomly initialised Qwen2 + char tokenizer and save both to ``out_dir``.

    Returns the directory, loadable with ``AutoModelForCausalLM.from_pretrained(out_dir)``.
    ~0.3 M parameters at the defaults.
    """
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    if hidden_size % num_heads:
        raise ValueError(f"hidden_size={hidden_size} must be divisible by num_heads={num_heads}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok = build_char_tokenizer()
    cfg = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size or 2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=True,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(cfg)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out
