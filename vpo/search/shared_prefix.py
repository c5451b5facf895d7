"""Each distinct prompt run through the model once: in sampling (``shared_prefix_generate``) and in
scoring a batch for a training step (``shared_prefix_logps``).

Sampling. ``vpo eval`` repeats every prompt n times in a batch (n rollouts), and a GRPO step samples G
rollouts per prompt: ``generate`` would run the same prompt tokens through the model n (or G)
times before decoding. Here all prompt tokens but the last run once per distinct prompt, the
key/value cache is repeated to the rows that share the prompt (a static cache when the generation
config asks for one), and ``generate`` continues from it. Positions come from the attention mask,
as ``generate`` computes them, and sampling draws the same random numbers in the same order, so the
tokens equal the plain call's up to float rounding of the probabilities (tests/train/test_shared_prefix.py).
Used by ``vpo eval``'s transformers backend and by ``VPOTrainer`` with ``shared_prompt_forward``.

Scoring (``shared_prompt_forward``). TRL scores a batch of G rollouts per prompt by running every
``prompt + completion`` row through the model: the prompt's tokens are processed G times (3G for a
compute-matched baseline), for the policy with gradients and again for the reference model. When
prompts are long next to completions that is most of the step. Here the distinct prompts of the batch
run once (with gradients when the caller has them enabled), their key/value cache is repeated to the
rows that share them, and only the completion tokens run per row. The gradient of a shared prompt is
the sum over its rows, as it is when each row recomputes it, so the numbers agree with TRL's to float
rounding (tested). Used only where that equivalence is checked: a causal LM whose own forward returns
logits (the model's logit scaling and soft-capping apply there), full attention (no sliding window),
no multimodal inputs, no MoE auxiliary loss, and no activation checkpointing during the call
(checkpointed layers refuse a cache: ``VPOTrainer`` switches it off around the call,
vpo/train/fastpath.py). Otherwise the trainer uses TRL's path.
"""

from __future__ import annotations

import torch


def _unwrapped(model):
    """The transformers model under a DDP (``.module``) and a PEFT (``get_base_model``) wrapper."""
    inner = getattr(model, "module", model)
    return inner.get_base_model() if hasattr(inner, "get_base_model") else inner


def cache_keyword(model) -> str:
    """``cache`` (transformers >= 5.2x) or ``past_key_values`` (older), from the model class's forward."""
    import inspect

    inner = _unwrapped(model)
    return "cache" if "cache" in inspect.signature(type(inner).forward).parameters else "past_key_values"


def full_attention_model(model) -> bool:
    """A causal LM whose every layer attends to the full prefix with a plain key/value cache (no
    sliding window, no recurrent state): the case where a repeated prompt cache is exact."""
    inner = _unwrapped(model)
    config = getattr(inner, "config", None)
    if config is None:
        return False
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    if (
        getattr(text, "use_sliding_window", False)
        or getattr(text, "sliding_window", None)
        and getattr(text, "use_sliding_window", None) is None
    ):
        return False
    if any(t != "full_attention" for t in (getattr(text, "layer_types", None) or [])):
        return False
    supports = getattr(inner, "_supports_default_dynamic_cache", None)
    return bool(supports()) if callable(supports) else True


def distinct_prompts(prompt_ids: torch.Tensor, prompt_mask: torch.Tensor):
    """``(unique rows, inverse)``: row i of the batch is unique row ``inverse[i]`` (ids and mask both equal)."""
    key = torch.cat([prompt_ids, prompt_mask.to(prompt_ids.dtype)], dim=1)
    uniq, inverse = torch.unique(key, dim=0, return_inverse=True)
    p = prompt_ids.size(1)
    return uniq[:, :p], uniq[:, p:].to(prompt_mask.dtype), inverse


def shared_prefix_generate(generate, model, input_ids=None, attention_mask=None, generation_config=None, **kwargs):
    """``generate(...)`` with the prompt prefill done once per distinct prompt: all prompt tokens but the
    last run through ``model`` once per distinct prompt (positions from the attention mask, as
    ``generate`` computes them), the key/value cache is repeated to the rows that share the prompt,
    and ``generate`` continues from that cache (a static cache when the generation config asks for
    one). Sampling draws the same random numbers in the same order as the plain call, so the tokens
    agree up to float rounding of the probabilities. Falls back to the plain call when no two rows
    share a prompt, a cache or other model inputs are passed, or the cache kind is not dynamic/static."""
    import copy

    from transformers import DynamicCache, StaticCache

    def plain():
        return generate(
            input_ids=input_ids, attention_mask=attention_mask, generation_config=generation_config, **kwargs
        )

    kw = cache_keyword(model)
    if (
        input_ids is None
        or attention_mask is None
        or input_ids.size(1) < 2
        or kwargs.get(kw) is not None
        or any(isinstance(v, torch.Tensor) for v in kwargs.values())
    ):
        return plain()
    if not full_attention_model(model):
        return plain()
    cfg = copy.deepcopy(generation_config if generation_config is not None else model.generation_config)
    passthrough = cfg.update(**kwargs)  # generation settings given as keywords go into the copy
    impl = cfg.cache_implementation
    if impl not in (None, "dynamic", "static") or cfg.max_new_tokens is None:
        return plain()
    ids, mask, inverse = distinct_prompts(input_ids, attention_mask)
    if ids.size(0) == input_ids.size(0):
        return plain()
    p = input_ids.size(1)
    positions = (mask.long().cumsum(-1) - 1).masked_fill(mask == 0, 0)
    with torch.no_grad():
        out = model(
            input_ids=ids[:, :-1],
            attention_mask=mask[:, :-1],
            position_ids=positions[:, :-1],
            use_cache=True,
            **{kw: DynamicCache()},
        )
    cache = (
        StaticCache(config=model.config, max_cache_len=p + cfg.max_new_tokens) if impl == "static" else DynamicCache()
    )
    for layer, src in enumerate(out[kw].layers):
        cache.update(src.keys.index_select(0, inverse), src.values.index_select(0, inverse), layer)
    cfg.cache_implementation = None
    return generate(
        input_ids=input_ids, attention_mask=attention_mask, generation_config=cfg, **{kw: cache}, **passthrough
    )


def shared_prefix_supported(
    model, multimodal_inputs: dict, compute_aux_loss: bool, checkpointing_off: bool = False
) -> bool:
    """Whether :func:`shared_prefix_logps` computes what TRL's path would for this call
    (``checkpointing_off``: the caller switches activation checkpointing off around the call)."""
    if compute_aux_loss or any(v is not None for v in multimodal_inputs.values()):
        return False
    inner = getattr(model, "module", model)
    if getattr(inner, "is_gradient_checkpointing", False) and inner.training and not checkpointing_off:
        return False  # checkpointed layers refuse a key/value cache while training
    return full_attention_model(inner)


def shared_prefix_logps(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
    temperature: float,
    compute_entropy: bool = False,
    batch_size: int | None = None,
):
    """``(logps [N, C], entropies [N, C] | None)`` of the last ``C = logits_to_keep`` tokens of each row,
    0 where the attention mask is 0, as TRL's ``_get_per_token_logps_and_entropies`` returns them.
    ``batch_size`` chunks the per-row completion forward (the prompts run once, whole)."""
    from transformers import DynamicCache

    n, length = input_ids.shape
    c = int(logits_to_keep)
    p = length - c
    prompt_ids, prompt_mask, inverse = distinct_prompts(input_ids[:, :p], attention_mask[:, :p])
    kw = cache_keyword(model)
    out = model(
        input_ids=prompt_ids, attention_mask=prompt_mask, use_cache=True, logits_to_keep=1, **{kw: DynamicCache()}
    )
    prompt_cache = out[kw]
    first = out.logits[:, -1:, :]  # [U, 1, V]: predicts each row's first completion token
    step = batch_size or n
    logps, ents = [], []
    for start in range(0, n, step):
        rows = inverse[start : start + step]
        rows_cache = DynamicCache()
        for layer, src in enumerate(prompt_cache.layers):
            rows_cache.update(src.keys.index_select(0, rows), src.values.index_select(0, rows), layer)
        cont = model(
            input_ids=input_ids[start : start + step, p:],
            attention_mask=attention_mask[start : start + step],
            use_cache=True,
            **{kw: rows_cache},
            logits_to_keep=0,
        )
        logits = torch.cat([first.index_select(0, rows), cont.logits[:, :-1, :]], dim=1).float() / temperature
        logp_all = torch.log_softmax(logits, dim=-1)
        labels = input_ids[start : start + step, p:]
        mask = attention_mask[start : start + step, p:].bool()
        logps.append(logp_all.gather(-1, labels.unsqueeze(-1)).squeeze(-1).masked_fill(~mask, 0.0))
        if compute_entropy:
            ents.append((-(logp_all.exp() * logp_all).sum(-1)).masked_fill(~mask, 0.0))
    return torch.cat(logps, 0), (torch.cat(ents, 0) if compute_entropy else None)
