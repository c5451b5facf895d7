"""vpo's lean CPU sampler (vpo/search/fast_decode.py) against transformers: the model's own forward
gives the reference logits, ``generate`` the reference greedy tokens, and transformers' logits warpers
the reference top-k/top-p masks."""

from __future__ import annotations

import math

import pytest
import torch

pytest.importorskip("transformers")

from transformers import (  # noqa: E402
    GenerationConfig,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
)

from vpo.search.fast_decode import (  # noqa: E402
    FastDecoder,
    Sampling,
    sample,
    unsupported_generation,
    unsupported_reason,
)

VOCAB = 97
EOS, PAD = 1, 0


def _model(kind: str, seed: int = 0):
    """A small random model of each family, with the feature that family adds: tied embeddings
    (Llama), q/k/v biases (Qwen2), per-head q/k norms and an explicit head_dim (Qwen3), 4 query heads
    over 2 key/value heads everywhere (grouped queries)."""
    torch.manual_seed(seed)
    common = dict(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
    )
    if kind == "llama":
        return LlamaForCausalLM(LlamaConfig(**common, tie_word_embeddings=True)).eval()
    if kind == "mistral":
        return MistralForCausalLM(MistralConfig(**common, sliding_window=None)).eval()
    if kind == "qwen2":
        return Qwen2ForCausalLM(Qwen2Config(**common)).eval()
    return Qwen3ForCausalLM(Qwen3Config(**common, head_dim=24)).eval()


def _prompts():
    """Left-padded prompts of three lengths; rows 1 and 4 share a prompt (the shared prefill)."""
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(3, VOCAB, (5, 9), generator=gen)
    mask = torch.ones_like(ids)
    ids[0, :3], mask[0, :3] = PAD, 0
    ids[3, :5], mask[3, :5] = PAD, 0
    ids[4], mask[4] = ids[1], mask[1]
    return ids, mask


def _forward_logits(model, ids, mask, continuation):
    """The model's own logits over prompt + continuation, positions from the mask (as generate)."""
    full = torch.cat([ids, continuation], 1)
    full_mask = torch.cat([mask, torch.ones_like(continuation)], 1)
    pos = (full_mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        logits = model(input_ids=full, attention_mask=full_mask, position_ids=pos).logits
    return logits[:, ids.size(1) - 1 : -1]


@pytest.mark.parametrize("kind", ["llama", "mistral", "qwen2", "qwen3"])
def test_float32_logits_equal_the_model_s_forward(kind):
    model = _model(kind)
    ids, mask = _prompts()
    cont = torch.randint(3, VOCAB, (5, 7), generator=torch.Generator().manual_seed(2))
    ref = _forward_logits(model, ids, mask, cont)
    got = FastDecoder(model, torch.float32).logits_along(ids, mask, cont)
    assert got.shape == ref.shape == (5, 7, VOCAB)
    assert float((got - ref).abs().max()) < 1e-4
    assert float(ref.std()) > 0.05  # logits that differ between tokens: agreement means something


@pytest.mark.parametrize("kind", ["llama", "qwen3"])
def test_greedy_tokens_equal_generate_s_with_eos_and_padding(kind):
    """Greedy decoding: the same tokens as ``generate``, including the pad tokens after a row's EOS
    and the early stop when every row has written one. EOS is the token that one row picks first,
    so at least one row finishes early."""
    model = _model(kind)
    ids, mask = _prompts()
    fd = FastDecoder(model, torch.float32)
    first = fd.generate(ids, mask, Sampling(max_new_tokens=1, do_sample=False), [EOS], PAD)[:, -1]
    eos = int(first[0])
    gc = GenerationConfig(max_new_tokens=12, do_sample=False, eos_token_id=eos, pad_token_id=PAD)
    with torch.no_grad():
        ref = model.generate(input_ids=ids, attention_mask=mask, generation_config=gc)
    got = fd.generate(ids, mask, Sampling(max_new_tokens=12, do_sample=False), [eos], PAD)
    assert torch.equal(got, ref)
    assert (got[0, 10:] == PAD).all()  # row 0 finished at its first token and was padded after it


def test_min_new_tokens_keeps_eos_out():
    model = _model("llama")
    ids, mask = _prompts()
    fd = FastDecoder(model, torch.float32)
    eos = int(fd.generate(ids, mask, Sampling(max_new_tokens=1, do_sample=False), [EOS], PAD)[0, -1])
    out = fd.generate(ids, mask, Sampling(max_new_tokens=6, min_new_tokens=4, do_sample=False), [eos], PAD)
    assert out.size(1) == 9 + 6 and not (out[:, 9:13] == eos).any()


def test_lora_adapters_are_merged_and_followed_after_refresh():
    peft = pytest.importorskip("peft")
    model = _model("qwen2")
    cfg = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "up_proj", "down_proj"])
    pm = peft.get_peft_model(model, cfg)
    for name, p in pm.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.2)  # B = 0 at init would make the adapter a no-op
    ids, mask = _prompts()
    cont = torch.randint(3, VOCAB, (5, 5), generator=torch.Generator().manual_seed(3))
    fd = FastDecoder(pm, torch.float32)
    assert float((fd.logits_along(ids, mask, cont) - _forward_logits(pm, ids, mask, cont)).abs().max()) < 1e-4
    with torch.no_grad():
        for name, p in pm.named_parameters():
            if "lora_A" in name:
                p.add_(0.3)  # the policy moves (an optimizer step)
    stale = fd.logits_along(ids, mask, cont)
    ref = _forward_logits(pm, ids, mask, cont)
    assert float((stale - ref).abs().max()) > 1e-2  # the snapshot is a copy: it needs the refresh
    fd.refresh()
    assert float((fd.logits_along(ids, mask, cont) - ref).abs().max()) < 1e-4


def test_bf16_logits_stay_close_to_float32():
    model = _model("qwen2")
    ids, mask = _prompts()
    cont = torch.randint(3, VOCAB, (5, 6), generator=torch.Generator().manual_seed(4))
    ref = _forward_logits(model, ids, mask, cont)
    got = FastDecoder(model, torch.bfloat16).logits_along(ids, mask, cont)
    err = float((got - ref).abs().max())
    assert 0 < err < 0.05 * float(ref.abs().max())  # bf16 products: close, not equal


@pytest.mark.parametrize("kind", ["llama", "qwen3"])
def test_the_bf16_key_layout_gives_the_same_bits_and_unwritten_cache_slots_are_never_read(kind):
    """bf16 stores keys [rows, heads, head_dim, length] (read in place by the scores' product) where
    float32 keeps [rows, heads, length, head_dim]: both layouts give bf16 the same logits bit for bit.
    And the caches are allocated uninitialised: filled with NaN instead, nothing changes (a slot is
    read only after its position was written)."""

    class FirstLayout(FastDecoder):
        keys_transposed = False

    class NaNCaches(FastDecoder):
        def _new_caches(self, rows, length):
            return [(k.fill_(math.nan), v.fill_(math.nan)) for k, v in super()._new_caches(rows, length)]

    model = _model(kind)
    ids, mask = _prompts()
    cont = torch.randint(3, VOCAB, (5, 6), generator=torch.Generator().manual_seed(4))
    fast = FastDecoder(model, torch.bfloat16)
    assert fast.keys_transposed and not FastDecoder(model, torch.float32).keys_transposed
    # both index keys as [rows, heads, head_dim, length]; float32 stores them [.., length, head_dim]
    hd = fast.head_dim
    k16, k32 = fast._new_caches(2, 5)[0][0], FastDecoder(model, torch.float32)._new_caches(2, 5)[0][0]
    assert k16.shape == k32.shape == (2, fast.n_kv, hd, 5)
    assert k16.is_contiguous() and k32.transpose(-1, -2).is_contiguous()
    got = fast.logits_along(ids, mask, cont)
    assert torch.equal(got, FirstLayout(model, torch.bfloat16).logits_along(ids, mask, cont))
    for dtype in (torch.bfloat16, torch.float32):
        want = FastDecoder(model, dtype).logits_along(ids, mask, cont)
        assert torch.equal(NaNCaches(model, dtype).logits_along(ids, mask, cont), want)


def test_what_it_returns_can_enter_autograd():
    """The sampler runs under inference mode; its tokens and logits come back as ordinary tensors, so a
    training step can feed them to the policy's forward (an inference tensor cannot be saved for
    backward)."""
    model = _model("llama")
    ids, mask = _prompts()
    fd = FastDecoder(model, torch.bfloat16)
    out = fd.generate(ids, mask, Sampling(max_new_tokens=4), [EOS], PAD, torch.Generator().manual_seed(0))
    logits = fd.logits_along(ids, mask, out[:, ids.size(1) :])
    assert not out.is_inference() and not logits.is_inference()
    emb = torch.nn.Embedding(VOCAB, 3)
    (emb(out).sum() + (logits * emb.weight.sum()).sum()).backward()  # raises for an inference tensor
    assert emb.weight.grad is not None


def test_sampling_draws_from_the_softmax():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0, -math.inf, 0.5]]).repeat(40000, 1)
    gen = torch.Generator().manual_seed(0)
    for s in (Sampling(1, temperature=1.0), Sampling(1, temperature=0.5)):
        tok = sample(logits, s, gen)
        freq = torch.bincount(tok, minlength=6).double() / tok.numel()
        want = torch.softmax(logits[0].double() / s.temperature, -1)
        assert freq[4] == 0  # a token of probability 0 is never drawn
        sd = (want * (1 - want) / tok.numel()).sqrt()
        assert ((freq - want).abs() <= 5 * sd + 1e-12).all(), (freq, want)


def test_two_level_inverse_cdf_draws_what_one_cumulative_sum_draws():
    """The block search picks, for the same uniform number, the entry a flat cumulative sum over the
    whole row picks: over vocabularies that are and are not multiples of the block, with removed
    (probability 0) entries, whole empty blocks, and peaked rows."""
    from vpo.search.fast_decode import inverse_cdf

    g = torch.Generator().manual_seed(3)
    for v in (49152, 3001, 7):
        logits = torch.randn(4000, v, generator=g) * torch.rand(4000, 1, generator=g) * 8
        logits[:, torch.randperm(v, generator=g)[: v // 3]] = -math.inf  # removed entries
        if v > 600:
            logits[::2, 256:512] = -math.inf  # an empty block on half the rows
            logits[1::7, -1] = 40.0  # rows whose mass sits on the last entry
        probs = torch.softmax(logits, -1)
        got = inverse_cdf(probs, torch.Generator().manual_seed(11))
        cdf = probs.double().cumsum(-1)
        u = torch.rand(4000, 1, generator=torch.Generator().manual_seed(11), dtype=torch.float64) * cdf[:, -1:]
        want = torch.searchsorted(cdf, u, right=True).clamp_(max=v - 1).squeeze(-1)
        assert (got == want).float().mean() >= 0.9995, v  # equal but where u meets a sum to the last bits
        assert bool((probs.gather(1, got[:, None]) > 0).all())  # never an entry of probability 0


@pytest.mark.parametrize("top_k, top_p", [(3, None), (None, 0.7), (4, 0.8), (1, None)])
def test_top_k_and_top_p_keep_what_transformers_keeps(top_k, top_p):
    """The tokens that can be drawn are exactly those transformers' warpers leave finite."""
    from transformers.generation.logits_process import TopKLogitsWarper, TopPLogitsWarper

    logits = torch.randn(64, 50, generator=torch.Generator().manual_seed(5)) * 2
    ref = logits.clone()
    if top_k:
        ref = TopKLogitsWarper(top_k)(None, ref)
    if top_p:
        ref = TopPLogitsWarper(top_p)(None, ref)
    allowed = torch.isfinite(ref)
    draws = torch.stack([sample(logits, Sampling(1, top_k=top_k, top_p=top_p)) for _ in range(400)], 1)
    drawn = torch.zeros_like(allowed).scatter_(1, draws, True)
    assert (drawn <= allowed).all()  # never a token transformers removes
    rare = allowed & ~drawn
    assert rare.sum() <= 0.05 * allowed.sum()  # and (almost) every token it keeps turns up


def test_greedy_and_seeded_sampling_are_reproducible():
    model = _model("llama")
    ids, mask = _prompts()
    fd = FastDecoder(model, torch.float32)
    s = Sampling(max_new_tokens=8)
    a = fd.generate(ids, mask, s, [EOS], PAD, torch.Generator().manual_seed(7))
    b = fd.generate(ids, mask, s, [EOS], PAD, torch.Generator().manual_seed(7))
    c = fd.generate(ids, mask, s, [EOS], PAD, torch.Generator().manual_seed(8))
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_what_it_refuses():
    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=50))
    assert "gpt2" in unsupported_reason(gpt2)
    with pytest.raises(ValueError, match="gpt2"):
        FastDecoder(gpt2)
    windowed = MistralForCausalLM(
        MistralConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, sliding_window=8)
    )  # fmt: skip
    assert "sliding" in unsupported_reason(windowed)
    assert unsupported_reason(_model("qwen3")) is None
    ok = GenerationConfig(max_new_tokens=4, do_sample=True, temperature=0.7, top_k=5, top_p=0.9)
    assert unsupported_generation(ok) is None
    for bad in (
        dict(repetition_penalty=1.2),
        dict(num_beams=2),
        dict(min_p=0.1),
        dict(no_repeat_ngram_size=3),
        dict(stop_strings=["x"]),
    ):
        assert unsupported_generation(GenerationConfig(max_new_tokens=4, **bad)), bad
    assert "max_new_tokens" in unsupported_generation(GenerationConfig())


def test_rows_beyond_the_cache_budget_are_decoded_in_chunks():
    """A cache budget of 2 rows: the rows come out as they do in one pass (greedy), padded to one
    width when a chunk stopped early, and no pass held more than 2 rows."""
    model = _model("qwen2")
    ids, mask = _prompts()
    fd = FastDecoder(model, torch.float32)
    first = fd.generate(ids, mask, Sampling(max_new_tokens=1, do_sample=False), [EOS], PAD)[:, -1]
    eos = int(first[0])  # row 0 stops at once, so the chunk holding it may be narrower
    whole = fd.generate(ids, mask, Sampling(max_new_tokens=10, do_sample=False), [eos], PAD)
    fd.cache_budget = 2 * 2 * len(fd.layers) * fd.n_kv * fd.head_dim * 19 * 4
    assert fd.rows_per_call(19) == 2
    seen = []
    real = fd._generate

    def spy(ids_, *a, **k):
        seen.append(ids_.size(0))
        return real(ids_, *a, **k)

    fd._generate = spy
    chunked = fd.generate(ids, mask, Sampling(max_new_tokens=10, do_sample=False), [eos], PAD)
    assert seen == [2, 2, 1] and torch.equal(chunked, whole)
