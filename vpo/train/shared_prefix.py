"""Per-token log-probabilities with each distinct prompt run through the model once (``shared_prompt_forward``).

TRL scores a batch of G rollouts per prompt by running every ``prompt + completion`` row through the
model: the prompt's tokens are processed G times (3G for a compute-matched baseline), for the policy
with gradients and again for the reference model. When prompts are long next to completions that
is most of the step. Here the distinct prompts of the batch run once (with gradients when the
caller has them enabled), their key/value cache is repeated to the rows that share them, and only
the completion tokens run per row. The gradient of a shared prompt is the sum over its rows, as it
is when each row recomputes it, so the numbers agree with TRL's to float rounding (tested).

Used only where that equivalence is checked: a causal LM whose own forward returns logits (the
model's logit scaling and soft-capping apply there), full attention (no sliding window), no
multimodal inputs, no MoE auxiliary loss, and no activation checkpointing on the model being
trained (checkpointed layers refuse a cache). Otherwise the trainer uses TRL's path.
"""

from __future__ import annotations

import torch

from vpo.search.prefill import _cache_keyword, _distinct_prompts, full_attention_model, shared_prefix_generate  # noqa: F401 (re-exported)


def shared_prefix_supported(model, multimodal_inputs: dict, compute_aux_loss: bool) -> bool:
    """Whether :func:`shared_prefix_logps` computes what TRL's path would for this call."""
    if compute_aux_loss or any(v is not None for v in multimodal_inputs.values()):
        return False
    inner = getattr(model, "module", model)
    if getattr(inner, "is_gradient_checkpointing", False) and inner.training:
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
    prompt_ids, prompt_mask, inverse = _distinct_prompts(input_ids[:, :p], attention_mask[:, :p])
    kw = _cache_keyword(model)
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
