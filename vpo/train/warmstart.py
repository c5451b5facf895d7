"""Supervised warm start: teach a (tiny) model a task's answer format before RL.

RL from a random model never sees a reward on a structured task, so the CPU demo first fine-tunes on
(prompt, completion) pairs, e.g. diverse mediocre maze routes in both the single- and the m-answer
format, so one checkpoint serves GRPO (m = 1) and VPO (m = 3) alike.

Simplifications: a plain AdamW loop (no TRL SFTTrainer) with the loss on completion tokens only,
prompts rendered with the tokenizer's chat template, length-bucketed batches; meant for small
models and small data on CPU or one GPU.
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Sequence

from vpo._util import positive_int


def format_answers(answers: Sequence[str], m: int) -> str:
    """The completion text that states ``answers`` in the m-answer tag format of vpo.core.answers."""
    if m == 1:
        return f"<answer>{answers[0]}</answer>"
    return "".join(f"<answer_{i}>{a}</answer_{i}>" for i, a in enumerate(answers[:m], start=1))


def supervised_warm_start(
    model_dir: str | Path,
    out_dir: str | Path,
    pairs: Sequence[tuple[str, str]],
    *,
    steps: int = 1000,
    batch_size: int = 32,
    learning_rate: float = 3e-3,
    warmup_steps: int = 50,
    seed: int = 0,
    progress: bool = True,
    log_every: int = 100,
    device: str | None = None,
    dtype: str | None = None,
) -> dict:
    """Fine-tune ``model_dir`` on ``(prompt, completion)`` pairs; save to ``out_dir``.

    The prompt is wrapped as one user turn with the tokenizer's chat template; the loss covers the
    completion tokens and the end-of-sequence token. Cosine decay after a linear warm-up.
    ``device``: where to train (default CPU); ``dtype``: the weights' dtype on load (e.g.
    ``"bfloat16"`` on a GPU; default float32). Returns ``{"loss_first": ..., "loss_last": ...,
    "losses": [...]}`` (mean loss per log window).
    """
    import torch
    from tqdm.auto import tqdm
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not pairs:
        raise ValueError("no (prompt, completion) pairs to train on")
    positive_int(steps, "steps", "warm start")
    positive_int(batch_size, "batch_size", "warm start")
    torch.manual_seed(seed)
    rng = random.Random(seed)
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, **({"dtype": getattr(torch, dtype)} if dtype else {}))
    dev = torch.device(device or "cpu")
    model.to(dev)
    model.train()
    encoded = _encode_pairs(tok, pairs)
    max_pos = getattr(model.config, "max_position_embeddings", 10**9)
    too_long = sum(len(ids) > max_pos for ids, _ in encoded)
    if too_long:
        raise ValueError(f"{too_long} examples exceed the model's {max_pos} positions")
    opt = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.0)
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    batches: list[list[int]] = []
    losses, window = [], []
    for step in tqdm(range(steps), desc="warm start", disable=not progress):
        if not batches:
            batches = _bucketed_batches(encoded, batch_size, rng)
        batch = [encoded[j] for j in batches.pop()]
        for g in opt.param_groups:
            g["lr"] = _lr_at(step, learning_rate, warmup_steps, steps)
        window.append(_train_step(model, opt, *_collate(batch, pad), dev))
        if len(window) == log_every or step == steps - 1:
            losses.append(sum(window) / len(window))
            window = []
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    return {"loss_first": losses[0], "loss_last": losses[-1], "losses": losses}


def _encode_pairs(tok, pairs: Sequence[tuple[str, str]]) -> list[tuple[list[int], int]]:
    """Each pair as ``(token ids of prompt + completion + EOS, number of prompt tokens)``; the prompt is
    one user turn under the tokenizer's chat template when it has one, else the plain text."""
    chat = tok.chat_template is not None
    eos = tok.eos_token or ""

    def encode(prompt: str, completion: str) -> tuple[list[int], int]:
        if chat:
            p = tok.apply_chat_template(
                [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
            )
        else:
            p = prompt
        p_ids = tok(p, add_special_tokens=False).input_ids
        c_ids = tok(completion + eos, add_special_tokens=False).input_ids
        return p_ids + c_ids, len(p_ids)

    return [encode(p, c) for p, c in pairs]


def _lr_at(step: int, learning_rate: float, warmup_steps: int, steps: int) -> float:
    """Linear warm-up over ``warmup_steps``, then cosine decay to 0 at ``steps``."""
    if step < warmup_steps:
        return learning_rate * (step + 1) / warmup_steps
    frac = (step - warmup_steps) / max(1, steps - warmup_steps)
    return learning_rate * 0.5 * (1 + math.cos(math.pi * frac))


def _bucketed_batches(encoded: list[tuple[list[int], int]], batch_size: int, rng: random.Random) -> list[list[int]]:
    """One epoch of batches (example indices), length-bucketed: shuffle, sort chunks of 16 batches by
    length, cut, shuffle the batches; similar lengths share a batch, so little compute goes to padding."""
    idx = list(range(len(encoded)))
    rng.shuffle(idx)
    chunk = 16 * batch_size
    new = []
    for i in range(0, len(idx), chunk):
        part = sorted(idx[i : i + chunk], key=lambda j: len(encoded[j][0]))
        new += [part[k : k + batch_size] for k in range(0, len(part), batch_size)]
    rng.shuffle(new)
    return new


def _collate(batch: list[tuple[list[int], int]], pad: int):
    """Right-padded ``input_ids``, ``labels`` (-100 except on the completion tokens) and
    ``attention_mask``, each ``[B, L]``."""
    import torch

    L = max(len(ids) for ids, _ in batch)
    B = len(batch)
    input_ids = torch.full((B, L), pad, dtype=torch.long)
    labels = torch.full((B, L), -100, dtype=torch.long)
    attn = torch.zeros((B, L), dtype=torch.long)
    for i, (ids, n_prompt) in enumerate(batch):
        input_ids[i, : len(ids)] = torch.tensor(ids)
        labels[i, n_prompt : len(ids)] = torch.tensor(ids[n_prompt:])
        attn[i, : len(ids)] = 1
    return input_ids, labels, attn


def _train_step(model, opt, input_ids, labels, attn, dev) -> float:
    """One AdamW step on the batch (gradient norm clipped to 1); returns its loss."""
    import torch

    out = model(input_ids=input_ids.to(dev), attention_mask=attn.to(dev), labels=labels.to(dev))
    out.loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return float(out.loss.detach())
