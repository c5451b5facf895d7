"""``shared_prompt_forward``: each distinct prompt run once must give TRL's per-token log-probabilities,
entropies and gradients (TRL's own ``_get_per_token_logps_and_entropies`` on the same batch is the
reference), and the trainer must take that path only when asked."""

from __future__ import annotations

import contextlib
import types

import pytest
import torch

pytest.importorskip("trl")

from trl import GRPOTrainer  # noqa: E402
from trl.trainer.utils import add_fused_lm_head  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

from vpo.search.shared_prefix import shared_prefix_generate, shared_prefix_logps, shared_prefix_supported  # noqa: E402

TEMPERATURE = 0.9


def _model(tiny_model_dir):
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    add_fused_lm_head(model, temperature=TEMPERATURE, outputs=("log_probs", "entropy"))
    return model


def _batch(vocab: int, groups=(5, 3, 7), g=4, completion=6, seed=0):
    """Left-padded prompts of different lengths, each repeated g times, shuffled; right-padded
    completions of different lengths (as TRL builds them)."""
    gen = torch.Generator().manual_seed(seed)
    p = max(groups)
    rows, masks = [], []
    for length in groups:
        ids = torch.randint(3, vocab, (length,), generator=gen)
        for _ in range(g):
            comp_len = int(torch.randint(1, completion + 1, (1,), generator=gen))
            comp = torch.randint(3, vocab, (completion,), generator=gen)
            row = torch.cat([torch.zeros(p - length, dtype=torch.long), ids, comp])
            mask = torch.cat(
                [torch.zeros(p - length), torch.ones(length), torch.ones(comp_len), torch.zeros(completion - comp_len)]
            )
            rows.append(row)
            masks.append(mask.long())
    order = torch.randperm(len(rows), generator=gen)
    return torch.stack(rows)[order], torch.stack(masks)[order], completion


def _trl(model, ids, mask, c):
    fake = types.SimpleNamespace(
        accelerator=types.SimpleNamespace(autocast=contextlib.nullcontext, is_main_process=True)
    )
    logps, ent, _ = GRPOTrainer._get_per_token_logps_and_entropies(fake, model, ids, mask, c, compute_entropy=True)
    return logps, ent


def _grads(model, logps, weights):
    model.zero_grad()
    (logps * weights).sum().backward()
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("batch_size", [None, 5])
def test_shared_prefix_equals_trls_logps_entropies_and_gradients(tiny_model_dir, batch_size):
    model = _model(tiny_model_dir)
    ids, mask, c = _batch(model.config.vocab_size)
    ref_logps, ref_ent = _trl(model, ids, mask, c)
    logps, ent = shared_prefix_logps(model, ids, mask, c, TEMPERATURE, compute_entropy=True, batch_size=batch_size)
    cmask = mask[:, -c:].bool()
    assert logps.shape == ref_logps.shape == (ids.size(0), c)
    torch.testing.assert_close(logps, ref_logps, atol=2e-5, rtol=1e-5)
    torch.testing.assert_close(ent, ref_ent, atol=2e-5, rtol=1e-5)
    assert (logps[~cmask] == 0).all() and (logps[cmask] < 0).all()
    w = torch.randn(logps.shape, generator=torch.Generator().manual_seed(1))
    ref_g = _grads(model, _trl(model, ids, mask, c)[0], w)
    g = _grads(model, shared_prefix_logps(model, ids, mask, c, TEMPERATURE, batch_size=batch_size)[0], w)
    assert ref_g.keys() == g.keys() and len(g) > 5
    for name in g:
        torch.testing.assert_close(g[name], ref_g[name], atol=1e-5, rtol=1e-4, msg=name)


def test_a_prompt_mix_up_is_caught(tiny_model_dir, monkeypatch):
    """The comparison has teeth: rows given another row's prompt cache change the numbers."""
    import vpo.search.shared_prefix as sp

    model = _model(tiny_model_dir)
    ids, mask, c = _batch(model.config.vocab_size)
    ref_logps, _ = _trl(model, ids, mask, c)
    real = sp.distinct_prompts

    def mixed_up(prompt_ids, prompt_mask):
        u_ids, u_mask, inverse = real(prompt_ids, prompt_mask)
        return u_ids, u_mask, (inverse + 1) % u_ids.size(0)

    monkeypatch.setattr(sp, "distinct_prompts", mixed_up)
    wrong, _ = shared_prefix_logps(model, ids, mask, c, TEMPERATURE)
    assert not torch.allclose(wrong, ref_logps, atol=1e-3)


@pytest.mark.parametrize("cache", ["static", None])
@pytest.mark.parametrize("sample", [False, True])
def test_shared_prefill_generates_the_same_tokens(tiny_model_dir, cache, sample):
    """Prefill once per distinct prompt, then ``generate`` from the repeated cache: the same tokens as
    the plain call, greedy and sampled from the same seed (the same random draws in the same order)."""
    from transformers import GenerationConfig

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    ids, mask, c = _batch(model.config.vocab_size)
    p = ids.size(1) - c
    ids, mask = ids[:, :p], mask[:, :p]  # the prompts: left-padded, each 4 times, shuffled
    gc = GenerationConfig(
        max_new_tokens=9,
        do_sample=sample,
        temperature=1.0,
        top_k=0,
        top_p=1.0,
        cache_implementation=cache,
        pad_token_id=0,
        eos_token_id=2,
    )
    calls = []

    def counting_generate(**kw):
        calls.append(kw)
        return model.generate(**kw)

    with torch.no_grad():
        torch.manual_seed(3)
        plain = model.generate(input_ids=ids, attention_mask=mask, generation_config=gc)
        torch.manual_seed(3)
        shared = shared_prefix_generate(
            counting_generate, model, input_ids=ids, attention_mask=mask, generation_config=gc
        )
    assert len(calls) == 1 and calls[0]["generation_config"].cache_implementation is None  # took the shared path
    assert gc.cache_implementation == cache  # the caller's config is untouched
    assert shared.shape == plain.shape and torch.equal(shared, plain)


def test_support_check():
    cfg = types.SimpleNamespace(use_sliding_window=False, layer_types=["full_attention"] * 2)
    model = types.SimpleNamespace(config=cfg)
    assert shared_prefix_supported(model, {}, False)
    assert not shared_prefix_supported(model, {"pixel_values": torch.zeros(1)}, False)
    assert not shared_prefix_supported(model, {}, True)
    cfg.layer_types = ["sliding_attention", "full_attention"]
    assert not shared_prefix_supported(model, {}, False)
    cfg.layer_types = ["full_attention"] * 2
    model.is_gradient_checkpointing, model.training = True, True
    assert not shared_prefix_supported(model, {}, False)
    model.training = False  # the reference model, or the policy scored without gradients
    assert shared_prefix_supported(model, {}, False)


def test_trainer_takes_the_shared_path_only_when_asked(tmp_path, tiny_model_dir, char_task, monkeypatch):
    """One step of real training both ways from the same seed: the same completions and advantages,
    the same float32 gradients (to float rounding), and the shared path was the one used when the
    switch is on.

    The gradients, not the loss: at step 1 the loss is ~1e-8 whatever the log-probabilities are (the
    ratio is 1 and the advantages sum to zero per group), but its gradient is ``-sum A * grad log p``,
    so rows scored against the wrong prompt give other gradients. Checked against two mutants of
    ``shared_prefix_logps`` that repeat the prompt cache to the wrong rows (``inverse`` rolled by one
    distinct prompt; every row given prompt 0's cache): this test fails under each, at the first
    tensor compared."""
    import vpo.search.shared_prefix as sp
    from transformers import TrainerCallback
    from vpo.train import VPOConfig, VPOTrainer

    class GradCapture(TrainerCallback):
        """The gradients the optimizer is about to apply (after clipping, which is off here)."""

        def __init__(self):
            self.grads: dict[str, torch.Tensor] = {}

        def on_pre_optimizer_step(self, args, state, control, model=None, **kw):
            assert {p.dtype for p in model.parameters()} == {torch.float32}
            self.grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}

    real, real_gen = sp.shared_prefix_logps, sp.shared_prefix_generate
    grads, outputs, calls, gens = {}, {}, {}, {}
    for shared in (False, True):
        args = VPOConfig(
            output_dir=str(tmp_path / f"out{shared}"),
            num_generations=4,
            per_device_train_batch_size=8,
            max_completion_length=12,
            max_steps=1,
            learning_rate=1e-2,
            max_grad_norm=0.0,  # the raw gradients, not rescaled by their (path-dependent) norm
            bf16=False,  # float32 (the CPU default; stated so the comparison stays fp32 anywhere)
            beta=0.01,
            logging_steps=1,
            report_to="none",
            save_strategy="no",
            use_cpu=True,
            seed=0,
            num_weightings=16,
            disable_tqdm=True,
            estimator="vpo",
            shared_prompt_forward=shared,
            fast_generation=False,  # transformers' generate, whose shared prefill is under test here
            gradient_checkpointing=False,
        )
        trainer = VPOTrainer(model=tiny_model_dir, args=args, task=char_task)
        capture = GradCapture()
        trainer.add_callback(capture)
        n: list[int] = []

        def counting(*a, _n=n, **k):
            _n.append(1)
            return real(*a, **k)

        g: list[int] = []

        def counting_gen(*a, _g=g, **k):
            _g.append(1)
            return real_gen(*a, **k)

        seen: list[dict] = []
        score = trainer._generate_and_score_completions

        def recording(inputs, _seen=seen, _score=score):
            out = _score(inputs)
            _seen.append({k: out[k].detach().clone() for k in ("prompt_ids", "completion_ids", "advantages")})
            return out

        trainer._generate_and_score_completions = recording
        monkeypatch.setattr(sp, "shared_prefix_logps", counting)
        monkeypatch.setattr(sp, "shared_prefix_generate", counting_gen)
        trainer.train()
        monkeypatch.setattr(sp, "shared_prefix_logps", real)
        monkeypatch.setattr(sp, "shared_prefix_generate", real_gen)
        gens[shared] = len(g)
        calls[shared] = len(n)
        assert len(seen) == 1
        outputs[shared] = seen[0]
        grads[shared] = capture.grads
    assert calls[False] == 0 and calls[True] >= 2  # policy and reference model
    assert gens[False] == 0 and gens[True] == 1  # the rollouts' prefill too
    # the same rollouts scored both ways, else the gradients need not agree
    for k in ("prompt_ids", "completion_ids", "advantages"):
        assert torch.equal(outputs[True][k], outputs[False][k]), k
    assert outputs[False]["prompt_ids"].unique(dim=0).size(0) >= 2  # a prompt mix-up is possible
    assert outputs[False]["advantages"].abs().max() > 1e-3  # a learning signal: the gradient is not 0
    ref, got = grads[False], grads[True]
    assert ref.keys() == got.keys() and len(ref) > 5
    assert all(float(t.abs().max()) > 0 for t in ref.values())  # every tensor gets a gradient to compare
    assert max(float(t.abs().max()) for t in ref.values()) > 1e-2  # not (near) zero: agreeing means something
    for name in ref:
        # Float rounding only: the two paths sum the same float32 products in another order (the prompt's
        # gradient over its rows vs per row), which moved each tensor by <= ~5e-7 of its largest entry
        # here; 1e-5 of it leaves 20x room. Rows given another prompt's cache move every tensor by
        # 8e-3 to 1e-1 of its largest entry, 800x past the bound or more.
        bound = 1e-5 * float(ref[name].abs().max())
        torch.testing.assert_close(got[name], ref[name], rtol=1e-5, atol=bound, msg=lambda m, _n=name: f"{_n}: {m}")
