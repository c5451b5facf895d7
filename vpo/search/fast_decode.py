"""A lean sampler for Llama-family causal LMs on a CPU: the rollout engine of a CPU training step and
of ``vpo eval``'s transformers backend.

Why. On a CPU, ``generate`` of a small model spends most of a decode step outside its matrix
products (docs/performance.md): a sampling draw of one exponential per vocabulary entry and row
(11 ms of a 57 ms step for SmolLM2-135M at 16 rows), an attention call per layer sized for the whole
cache, logits processors, mask building and cache bookkeeping per layer and token. This module does
the same arithmetic with less around it:

- one **weight snapshot** in the decode precision (bfloat16 where the CPU has bf16 units, else
  float32): LoRA adapters merged into it, q/k/v and gate/up fused into one product each. It is
  refreshed when the policy changes (once per optimizer step), as an inference engine's weights are;
- a **preallocated key/value cache** (no growth or copies per token; bf16 keys stored transposed, so
  the scores' product reads them in place), the prompt prefill run once per distinct prompt and its
  cache repeated to the rows that share it;
- **inference mode** around the whole call (the same kernels as ``no_grad``, without autograd's
  per-operator bookkeeping: about 1 ms of a 25 ms SmolLM2 step at 16 rows); what is returned is an
  ordinary tensor;
- attention by two batched products per layer over the filled part of the cache, grouped query heads
  without copying the keys;
- **sampling by the inverse CDF**: one uniform number per row and token (temperature, top-k and top-p
  applied first, as ``generate`` orders them; the softmax in float32 as ``generate``'s), the same
  distribution as ``generate``'s draw, searched in two levels (blocks, then one block's entries:
  :func:`inverse_cdf`).

The numbers. In float32 the logits of every step equal the model's own forward to float rounding
(tests/search/test_fast_decode.py: max |difference| below 1e-4, greedy tokens identical). In bfloat16
they are the model's logits with bf16 products (what ``torch.autocast`` computes); the residual
stream, the norms and the softmaxes stay in float32.

Where it applies: ``unsupported_reason(model)`` is None for the Llama, Mistral, Qwen2 and Qwen3
families (SmolLM2 is Llama) with full attention, SiLU, a static RoPE table and plain LoRA adapters (no
DoRA); a generation config that asks for anything but temperature, top-k, top-p, min/max new tokens,
EOS and padding (a repetition penalty, beams, stop strings, ...) is refused by
``unsupported_generation``. Callers fall back to ``generate`` then.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from vpo.search.shared_prefix import _unwrapped, distinct_prompts, full_attention_model

FAMILIES = ("llama", "mistral", "qwen2", "qwen3")
_STATIC_ROPE = (None, "default", "linear", "llama3", "yarn")
_PREFILL_ROWS = 8  # distinct prompts prefilled together (bounds the [rows, heads, P, P] scores)


def bf16_cpu() -> bool:
    """Whether this CPU multiplies bfloat16 in hardware (AVX512-BF16 or AMX): then bf16 products are
    about 3x faster than float32 here; without those units torch emulates them and they are slower."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # pragma: no cover - torch built without oneDNN
        return False


def decode_dtype() -> torch.dtype:
    """The default decode precision on this CPU: bfloat16 with bf16 units, else float32."""
    return torch.bfloat16 if bf16_cpu() else torch.float32


def _lora_layers(model):
    return [m for m in model.modules() if hasattr(m, "base_layer") and hasattr(m, "lora_A")]


def unsupported_reason(model) -> str | None:
    """Why :class:`FastDecoder` cannot run ``model`` exactly (a sentence), or None when it can."""
    inner = _unwrapped(model)
    cfg = getattr(inner, "config", None)
    if cfg is None:
        return "the model has no config"
    text = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    if getattr(text, "model_type", None) not in FAMILIES:
        return f"model type {getattr(text, 'model_type', None)!r} is not one of {', '.join(FAMILIES)}"
    if getattr(text, "hidden_act", "silu") != "silu":
        return f"activation {text.hidden_act!r} (only silu)"
    if not full_attention_model(model):
        return "the model uses sliding-window or non-full attention"
    rope = (getattr(text, "rope_parameters", None) or getattr(text, "rope_scaling", None) or {}).get("rope_type")
    if rope not in _STATIC_ROPE:
        return f"RoPE type {rope!r} changes with the sequence length"
    body = getattr(inner, "model", None)
    if body is None or not hasattr(body, "layers") or not hasattr(body, "rotary_emb"):
        return "the model does not have the Llama layout (model.layers, model.rotary_emb)"
    for layer in _lora_layers(model):
        if any(bool(v) for v in getattr(layer, "use_dora", {}).values()):
            return "a DoRA adapter (only plain LoRA is merged)"
    return None


_NEUTRAL = {
    "repetition_penalty": 1.0,
    "num_beams": 1,
    "num_return_sequences": 1,
    "no_repeat_ngram_size": 0,
    "encoder_no_repeat_ngram_size": 0,
    "min_p": None,
    "typical_p": 1.0,
    "epsilon_cutoff": 0.0,
    "eta_cutoff": 0.0,
    "bad_words_ids": None,
    "suppress_tokens": None,
    "begin_suppress_tokens": None,
    "forced_bos_token_id": None,
    "forced_eos_token_id": None,
    "sequence_bias": None,
    "stop_strings": None,
    "guidance_scale": None,
    "renormalize_logits": False,
    "output_scores": False,
    "output_logits": False,
    "return_dict_in_generate": False,
    "diversity_penalty": 0.0,
    "length_penalty": 1.0,
    "exponential_decay_length_penalty": None,
    "watermarking_config": None,
    "assistant_model": None,
    "prompt_lookup_num_tokens": None,
}


def unsupported_generation(cfg) -> str | None:
    """Why a ``GenerationConfig`` asks for more than :meth:`FastDecoder.generate` does, or None."""
    for key, neutral in _NEUTRAL.items():
        value = getattr(cfg, key, neutral)
        if value is not None and value != neutral and not (neutral is None and value in (0, 0.0, 1.0, [], {})):
            return f"generation setting {key}={value!r}"
    if getattr(cfg, "max_new_tokens", None) is None:
        return "no max_new_tokens"
    return None


@dataclass
class Sampling:
    """What a rollout's tokens are drawn from: ``generate``'s sampling settings."""

    max_new_tokens: int
    min_new_tokens: int = 0
    do_sample: bool = True
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None

    @classmethod
    def from_generation_config(cls, cfg) -> Sampling:
        return cls(
            max_new_tokens=int(cfg.max_new_tokens),
            min_new_tokens=int(getattr(cfg, "min_new_tokens", None) or 0),
            do_sample=bool(getattr(cfg, "do_sample", True)),
            temperature=float(getattr(cfg, "temperature", None) or 1.0),
            top_k=getattr(cfg, "top_k", None) or None,
            top_p=getattr(cfg, "top_p", None),
        )


def _effective(module, dtype):
    """(weight, bias) of a linear layer in ``dtype``, with its active LoRA adapters merged in."""
    if hasattr(module, "base_layer") and hasattr(module, "lora_A"):
        base = module.base_layer
        w = base.weight.detach()
        if not getattr(module, "merged", False) and not getattr(module, "disable_adapters", False):
            for name in module.active_adapters:
                if name in module.lora_A:
                    w = w + module.get_delta_weight(name).detach().to(w.dtype)
        bias = base.bias
    else:
        w, bias = module.weight.detach(), getattr(module, "bias", None)
    return w.to(dtype), (None if bias is None else bias.detach().to(dtype))


def _cat_linear(modules, dtype):
    ws, bs = zip(*(_effective(m, dtype) for m in modules))
    bias = (
        None
        if all(b is None for b in bs)
        else torch.cat([b if b is not None else ws[i].new_zeros(ws[i].shape[0]) for i, b in enumerate(bs)])
    )
    return torch.cat(ws, 0).contiguous(), bias


class _Layer:
    __slots__ = ("ln1", "ln2", "qkv", "qkv_b", "o", "o_b", "gu", "gu_b", "down", "down_b", "q_norm", "k_norm")


class FastDecoder:
    """Sampling from a Llama-family model with a weight snapshot (see the module docstring).

    ``FastDecoder(model)`` takes the snapshot; ``refresh()`` takes it again after the policy changed;
    ``generate(input_ids, attention_mask, sampling, eos_ids, pad_id)`` returns ``[N, P + T]`` token ids
    as ``generate`` does (the prompt, then T new tokens; a row that wrote EOS continues with ``pad_id``,
    and T stops early once every row has)."""

    def __init__(self, model, dtype: torch.dtype | None = None):
        reason = unsupported_reason(model)
        if reason is not None:
            raise ValueError(f"FastDecoder cannot run this model: {reason}")
        self.model = model
        self.dtype = dtype or decode_dtype()
        inner = _unwrapped(model)
        text = inner.config.get_text_config() if hasattr(inner.config, "get_text_config") else inner.config
        self.n_heads = text.num_attention_heads
        self.n_kv = getattr(text, "num_key_value_heads", None) or self.n_heads
        self.head_dim = getattr(text, "head_dim", None) or text.hidden_size // self.n_heads
        self.eps = text.rms_norm_eps
        self.refresh()

    @torch.no_grad()
    def refresh(self) -> None:
        """Take the weight snapshot again (merged LoRA, fused projections, the decode precision)."""
        inner = _unwrapped(self.model)
        body, dt = inner.model, self.dtype
        self.embed = body.embed_tokens.weight.detach().to(dt)
        self.head, self.head_b = _effective(inner.lm_head, dt)
        if self.head.data_ptr() != self.embed.data_ptr() and torch.equal(self.head, self.embed):
            self.head = self.embed  # tied: one copy
        self.norm = body.norm.weight.detach().float()
        rot = body.rotary_emb
        self.inv_freq = rot.inv_freq.detach().float().cpu()
        self.rope_scale = float(getattr(rot, "attention_scaling", 1.0))
        self.layers = []
        for src in body.layers:
            a, m, lay = src.self_attn, src.mlp, _Layer()
            lay.ln1 = src.input_layernorm.weight.detach().float()
            lay.ln2 = src.post_attention_layernorm.weight.detach().float()
            lay.qkv, lay.qkv_b = _cat_linear([a.q_proj, a.k_proj, a.v_proj], dt)
            lay.o, lay.o_b = _effective(a.o_proj, dt)
            lay.gu, lay.gu_b = _cat_linear([m.gate_proj, m.up_proj], dt)
            lay.down, lay.down_b = _effective(m.down_proj, dt)
            lay.q_norm = a.q_norm.weight.detach().float() if hasattr(a, "q_norm") else None
            lay.k_norm = a.k_norm.weight.detach().float() if hasattr(a, "k_norm") else None
            self.layers.append(lay)

    # -- the forward ---------------------------------------------------------------------------
    def _rms(self, x, w):
        """RMS norm in float32 (one fused kernel: a decode step runs 61 of them)."""
        return F.rms_norm(x.float(), (x.shape[-1],), w, self.eps)

    def _rope(self, positions):
        """cos and the signed sin [B, S, head_dim] for integer positions [B, S] (:meth:`_rotate`), in the
        decode precision (as transformers casts them to the hidden states' dtype)."""
        freqs = positions[..., None].float() * self.inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = (emb.cos() * self.rope_scale).to(self.dtype), (emb.sin() * self.rope_scale).to(self.dtype)
        # rotate_half(x) * sin == roll(x, half) * (sin with its first half negated): the sign moves onto
        # sin, once a step instead of a negation and a concatenation per layer (negation is exact)
        half = sin.shape[-1] // 2
        return cos, torch.cat((-sin[..., :half], sin[..., half:]), dim=-1)

    @staticmethod
    def _rotate(x, cos, signed_sin):
        return x * cos + x.roll(x.shape[-1] // 2, dims=-1) * signed_sin

    def _attention(self, lay, h, cos, sin, cache, start, mask):
        """One layer's attention for S new positions of B rows, writing their keys and values into
        ``cache`` at ``start``; ``cos`` and ``sin`` [B, S, 1, head_dim] are :meth:`_rope`'s, broadcast
        over the heads; ``mask`` [B * nkv, g * S, L] is additive over the L = start + S filled slots,
        repeated for the g query heads and the nkv key/value heads. Products in the decode precision,
        the softmax in float32 (as under autocast)."""
        b, s, _ = h.shape
        nh, nkv, hd = self.n_heads, self.n_kv, self.head_dim
        qkv = F.linear(h, lay.qkv, lay.qkv_b)
        v = qkv[..., (nh + nkv) * hd :]
        if lay.q_norm is None:  # q and k side by side in the fused product: one rotation for both
            qk = self._rotate(qkv[..., : (nh + nkv) * hd].view(b, s, nh + nkv, hd), cos, sin)
            q, k = qk[:, :, :nh], qk[:, :, nh:]
        else:
            q, k = qkv[..., : nh * hd].view(b, s, nh, hd), qkv[..., nh * hd : (nh + nkv) * hd].view(b, s, nkv, hd)
            q, k = self._rms(q, lay.q_norm).to(self.dtype), self._rms(k, lay.k_norm).to(self.dtype)
            q, k = self._rotate(q, cos, sin), self._rotate(k, cos, sin)
        keys, values = cache
        end = start + s
        keys[..., start:end] = k.permute(0, 2, 3, 1)
        values[:, :, start:end] = v.view(b, s, nkv, hd).transpose(1, 2)
        g = nh // nkv
        # head j of the queries uses key/value head j // g: [B * nkv, g * S, hd] against the keys as
        # [B * nkv, hd, L] (views of the cache, stored as :attr:`keys_transposed` says); the mask is
        # added in the product's own kernel, and the scale too where it is a power of two (head size
        # 64: 1/8), which no rounding can tell from scaling afterwards
        qg = q.transpose(1, 2).reshape(b * nkv, g * s, hd)
        kt = keys[..., :end].reshape(b * nkv, hd, end)
        scale = hd**-0.5
        if math.frexp(scale)[0] == 0.5:
            scores = torch.baddbmm(mask, qg, kt, alpha=scale)
        else:  # (q k + mask) * scale: the mask is 0 or -inf, so the same as q k * scale + mask, bit for bit
            scores = torch.baddbmm(mask, qg, kt).mul_(scale)
        probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(self.dtype)
        out = torch.bmm(probs, values[:, :, :end].reshape(b * nkv, end, hd)).view(b, nkv, g, s, hd)
        out = out.permute(0, 3, 1, 2, 4).reshape(b, s, nh * hd)
        return F.linear(out, lay.o, lay.o_b)  # the decode precision: the caller adds it into float32

    def _forward(self, ids, positions, caches, start, mask):
        """Hidden states [B, S, H] (float32, after the final norm) of S new tokens per row; ``mask``
        [B, 1, S, L] additive (float32)."""
        x = F.embedding(ids, self.embed).float()
        cos, sin = (c[:, :, None] for c in self._rope(positions))  # [B, S, 1, head_dim]: every head
        g, nkv = self.n_heads // self.n_kv, self.n_kv
        b, _, s, length = mask.shape
        # once for every layer: [B, 1, S, L] -> [B * nkv, g * S, L], the layout of the attention's products
        mask = mask.to(self.dtype).repeat(1, nkv, g, 1).view(b * nkv, g * s, length)
        dt = self.dtype
        # the residual stream stays float32; each block's output is added into it in place (one kernel
        # that widens and adds, exactly x + y.float(), without a float32 copy of y per layer)
        for lay, cache in zip(self.layers, caches):
            x.add_(self._attention(lay, self._rms(x, lay.ln1).to(dt), cos, sin, cache, start, mask))
            gate, up = F.linear(self._rms(x, lay.ln2).to(dt), lay.gu, lay.gu_b).chunk(2, dim=-1)
            x.add_(F.linear(F.silu(gate) * up, lay.down, lay.down_b))
        return self._rms(x, self.norm)

    def logits(self, hidden):
        return F.linear(hidden.to(self.dtype), self.head, self.head_b).float()

    # -- sampling --------------------------------------------------------------------------------
    @property
    def keys_transposed(self) -> bool:
        """Whether the key cache is stored [rows, nkv, head_dim, length] rather than [rows, nkv, length,
        head_dim]: in bfloat16, where the scores' product copied the transposed view of the filled
        keys at every call (0.1 ms a layer and step for SmolLM2 at 16 rows) and reads this layout in
        place, to the same bits. Float32's product reads either layout in place and rounds the two
        differently, so float32 keeps the first one (its samples stay those of earlier releases)."""
        return self.dtype != torch.float32

    def _new_caches(self, rows: int, length: int):
        """(keys, values) per layer: keys [rows, nkv, head_dim, length] (stored so, or a transposed view
        of [.., length, head_dim] storage: :attr:`keys_transposed`), values [rows, nkv, length,
        head_dim]. Uninitialised: a slot is read only after its position was written."""
        values = (rows, self.n_kv, length, self.head_dim)

        def keys():
            if self.keys_transposed:
                return torch.empty(rows, self.n_kv, self.head_dim, length, dtype=self.dtype)
            return torch.empty(values, dtype=self.dtype).transpose(-1, -2)

        return [(keys(), torch.empty(values, dtype=self.dtype)) for _ in self.layers]

    @torch.no_grad()
    def _prefill(self, input_ids, attention_mask, total: int):
        """Caches for every row (each distinct prompt run once) and the first token's logits [N, V]."""
        n, p = input_ids.shape
        ids, mask, inverse = distinct_prompts(input_ids, attention_mask)
        u = ids.size(0)
        caches = self._new_caches(n, total)
        first = torch.empty(u, self.head.shape[0])
        shared = self._new_caches(u, p)
        causal = torch.ones(p, p, dtype=torch.bool).tril()
        for lo in range(0, u, _PREFILL_ROWS):
            sl = slice(lo, lo + _PREFILL_ROWS)
            m = mask[sl].bool()
            positions = (m.long().cumsum(-1) - 1).clamp(min=0)
            allowed = (causal & m[:, None, :]) | torch.eye(p, dtype=torch.bool)  # pad rows see themselves
            add = torch.zeros(allowed.shape).masked_fill(~allowed, -math.inf)[:, None]
            part = [(k[sl], v[sl]) for k, v in shared]
            hidden = self._forward(ids[sl], positions, part, 0, add)
            first[sl] = self.logits(hidden[:, -1])
        for (dk, dv), (sk, sv) in zip(caches, shared):
            dk[..., :p] = sk.index_select(0, inverse)
            dv[:, :, :p] = sv.index_select(0, inverse)
        return caches, first.index_select(0, inverse)

    def _state(self, input_ids, attention_mask, new_tokens: int):
        """Decoding state after the prefill: caches, key validity, positions, first logits [N, V]."""
        n, p = input_ids.shape
        caches, logits = self._prefill(input_ids, attention_mask, p + new_tokens)
        valid = torch.zeros(n, p + new_tokens, dtype=torch.bool)
        valid[:, :p] = attention_mask.bool()
        return {"caches": caches, "valid": valid, "pos": attention_mask.long().sum(-1), "p": p}, logits

    def _step(self, st: dict, tok: torch.Tensor, t: int) -> torch.Tensor:
        """Feed token t of every row (``tok [N]``); the next token's float32 logits [N, V]."""
        slot = st["p"] + t
        st["valid"][:, slot] = True
        keys = st["valid"][:, None, None, : slot + 1]
        add = torch.zeros(keys.shape).masked_fill(~keys, -math.inf)
        hidden = self._forward(tok[:, None], (st["pos"] + t)[:, None], st["caches"], slot, add)
        return self.logits(hidden[:, -1])

    def rows_per_call(self, length: int) -> int:
        """Rows whose key/value cache of ``length`` positions fits in ``cache_budget`` bytes."""
        per_row = 2 * len(self.layers) * self.n_kv * self.head_dim * length * self.embed.element_size()
        return max(1, int(self.cache_budget // per_row))

    cache_budget = 2 * 1024**3
    """Bytes of key/value cache one decoding pass may hold: more rows are decoded in chunks (512
    rollouts of 314 tokens of SmolLM2-135M would need 7.4 GB in float32)."""

    def generate(self, input_ids, attention_mask, sampling: Sampling, eos_ids, pad_id: int, generator=None):
        """``[N, P + T]``: left-padded prompts followed by T sampled tokens per row (module docstring);
        rows beyond :meth:`rows_per_call` are decoded in consecutive chunks, padded to one width."""
        step = self.rows_per_call(input_ids.size(1) + sampling.max_new_tokens)
        with torch.inference_mode():  # module docstring: the same kernels as no_grad, less per-call work
            if input_ids.size(0) <= step:
                out = self._generate(input_ids, attention_mask, sampling, eos_ids, pad_id, generator)
            else:
                parts = [
                    self._generate(
                        input_ids[i : i + step], attention_mask[i : i + step], sampling, eos_ids, pad_id, generator
                    )
                    for i in range(0, input_ids.size(0), step)
                ]
                width = max(x.size(1) for x in parts)
                out = torch.cat([F.pad(x, (0, width - x.size(1)), value=pad_id) for x in parts], dim=0)
        return out.clone()  # an ordinary tensor: an inference-mode one cannot enter autograd later

    def _generate(self, input_ids, attention_mask, sampling: Sampling, eos_ids, pad_id: int, generator=None):
        st, logits = self._state(input_ids, attention_mask, sampling.max_new_tokens)
        eos = torch.as_tensor(list(eos_ids), dtype=torch.long)
        done = torch.zeros(input_ids.size(0), dtype=torch.bool)
        out = [input_ids]
        for t in range(sampling.max_new_tokens):
            if t < sampling.min_new_tokens:
                logits[:, eos] = -math.inf
            tok = sample(logits, sampling, generator)
            tok = torch.where(done, torch.full_like(tok, pad_id), tok)
            out.append(tok[:, None])
            done |= torch.isin(tok, eos)
            if bool(done.all()) or t + 1 == sampling.max_new_tokens:
                break
            logits = self._step(st, tok, t)
        return torch.cat(out, dim=1)

    def logits_along(self, input_ids, attention_mask, continuation: torch.Tensor) -> torch.Tensor:
        """Float32 logits [N, T, V] of each next token while the rows continue with ``continuation
        [N, T]`` (teacher forcing): entry t predicts ``continuation[:, t]``, as the model's forward
        over the whole sequence does."""
        with torch.inference_mode():
            st, logits = self._state(input_ids, attention_mask, continuation.size(1))
            out = [logits]
            for t in range(continuation.size(1) - 1):
                out.append(self._step(st, continuation[:, t], t))
            out = torch.stack(out, dim=1)
        return out.clone()


def sample(logits: torch.Tensor, s: Sampling, generator=None) -> torch.Tensor:
    """One token per row from float32 logits [N, V]: argmax without sampling, else temperature, then
    top-k, then top-p (``generate``'s order and rules, at least one token kept), then one draw by the
    inverse CDF of the remaining probabilities."""
    if not s.do_sample:
        return logits.argmax(-1)
    if s.temperature != 1.0:
        logits = logits / s.temperature
    if s.top_k and s.top_k < logits.size(-1):
        kth = torch.topk(logits, s.top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, -math.inf)
    if s.top_p is not None and s.top_p < 1.0:
        srt, idx = torch.sort(logits, dim=-1, descending=False)
        cum = srt.softmax(-1).cumsum(-1)
        drop = cum <= 1 - s.top_p
        drop[:, -1] = False
        logits = logits.masked_fill(drop.scatter(1, idx, drop), -math.inf)
    return inverse_cdf(torch.softmax(logits, dim=-1), generator)


_BLOCK = 256
"""Vocabulary entries per block of :func:`inverse_cdf`'s two-level search."""


def inverse_cdf(probs: torch.Tensor, generator=None) -> torch.Tensor:
    """One index per row of float32 probabilities [N, V] (``generate``'s softmax precision), drawn by
    the inverse CDF of one uniform number per row, sums in float64.

    Two levels, the same draw as one cumulative sum over the whole row: the row's blocks of
    :data:`_BLOCK` entries are summed (a reduction), the uniform number picks a block by the
    cumulative sum of those sums, then an entry by the cumulative sum inside that block only. A
    cumulative sum over 49,152 entries in float64 is a sequential scan that cost 2.5 ms a step at 16
    rows (a tenth of a decode step of SmolLM2 on one core); block sums and one block's scan cost a
    fraction of it. An entry of probability 0 is never drawn."""
    n, v = probs.shape
    nb = -(-v // _BLOCK)
    # (a vocabulary of whole blocks, as SmolLM2's 49,152, is viewed in place: padding copied 3 MB a step)
    padded = (probs if v == nb * _BLOCK else F.pad(probs, (0, nb * _BLOCK - v))).view(n, nb, _BLOCK)
    mass = padded.sum(-1, dtype=torch.float64)  # [N, nb]
    cum = mass.cumsum(-1)
    u = torch.rand(n, 1, generator=generator, dtype=torch.float64) * cum[:, -1:]
    block = torch.searchsorted(cum, u, right=True).clamp_(max=nb - 1)  # [N, 1]
    # a block of mass 0 is never picked, except when u meets the total to the last bit: step back
    while True:
        empty = mass.gather(1, block) <= 0
        if not bool(empty.any()):
            break
        block = torch.where(empty, block - 1, block)
    start = cum.gather(1, block) - mass.gather(1, block)
    inner = padded.gather(1, block[:, :, None].expand(n, 1, _BLOCK)).squeeze(1)  # [N, _BLOCK]
    within = torch.searchsorted(inner.double().cumsum(-1) + start, u, right=True)
    last = _BLOCK - 1 - (inner > 0).flip(-1).int().argmax(-1, keepdim=True)  # the block's last possible entry
    return (block * _BLOCK + torch.minimum(within, last)).squeeze(-1)
