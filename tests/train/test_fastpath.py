"""The CPU step's fast path (vpo/train/fastpath.py): what a run takes by default, that its rollouts
follow the policy step by step, that an impossible request is refused, and how far its numbers are
from the float32 plain path (bf16 products, each prompt once, checkpointing off for that pass)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("trl")

from helpers.trainer_args import tiny_vpo_args  # noqa: E402

from vpo.core import compute_advantages  # noqa: E402
from vpo.train import VPOTrainer  # noqa: E402


def _args(tmp_path, name, **kw):
    return tiny_vpo_args(tmp_path / name, max_completion_length=10, estimator="vpo", **kw)


def test_a_cpu_run_takes_the_fast_step_and_its_rollouts_follow_the_policy(tmp_path, tiny_model_dir, char_task):
    """Unset settings on a CPU: vpo's sampler and each prompt once. The sampler's snapshot is taken
    again at every optimizer step: after training, its weights are the policy's, not the start's."""
    from vpo.train import fastpath

    trainer = VPOTrainer(model=tiny_model_dir, args=_args(tmp_path, "a", bf16=False), task=char_task)
    assert trainer.vpo_fast["fast_generation"] and trainer.vpo_fast["shared_prompt_forward"]
    assert "rollouts by vpo's fast sampler" in trainer.run_summary()
    calls = []
    real = fastpath.Rollouts.__call__

    mlp = trainer.model.model.layers[0].mlp
    current = []  # at each step's rollouts: did they sample from the policy as it is then? (gate/up
    # are fused into a copy; a float32 down_proj would be the live tensor itself)

    def counting(self, prompt_ids):
        out = real(self, prompt_ids)
        calls.append(self.refreshes)
        live = torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]).detach()
        current.append(torch.equal(self.decoder.layers[0].gu, live))
        return out

    fastpath.Rollouts.__call__ = counting
    try:
        start = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
        trainer.train()
    finally:
        fastpath.Rollouts.__call__ = real
    assert calls == [1, 2]  # snapshots taken by each step's rollouts: one per step
    assert current == [True, True]  # step 2 sampled from the policy after step 1's update, not the start
    dec = trainer._fast_rollouts.decoder
    moved = trainer.model.model.layers[0].mlp.down_proj.weight
    assert not torch.equal(moved, start["model.layers.0.mlp.down_proj.weight"])
    # the snapshot was taken before step 2's update, so refresh once more to compare with the end
    dec.refresh()
    assert torch.equal(dec.layers[0].down, moved.detach())


def test_explicit_settings_win_and_an_impossible_one_is_refused(tmp_path, tiny_model_dir, char_task):
    off = VPOTrainer(
        model=tiny_model_dir,
        args=_args(tmp_path, "off", fast_generation=False, shared_prompt_forward=False),
        task=char_task,
    )
    assert off.vpo_fast["fast_generation"] is False and off.vpo_fast["shared_prompt_forward"] is False
    auto = VPOTrainer(
        model=tiny_model_dir, args=_args(tmp_path, "rp", repetition_penalty=1.1), task=char_task
    )  # a setting the sampler does not do: generate takes over, and the summary says why
    assert auto.vpo_fast["fast_generation"] is False
    assert "repetition_penalty" in auto.run_summary()
    with pytest.raises(ValueError, match="repetition_penalty"):
        VPOTrainer(
            model=tiny_model_dir,
            args=_args(tmp_path, "rp2", repetition_penalty=1.1, fast_generation=True),
            task=char_task,
        )


def _batch(vocab: int, g=4, prompts=(7, 5), completion=6, seed=0):
    gen = torch.Generator().manual_seed(seed)
    p = max(prompts)
    rows, masks = [], []
    for length in prompts:
        ids = torch.randint(3, vocab, (length,), generator=gen)
        for _ in range(g):
            comp = torch.randint(3, vocab, (completion,), generator=gen)
            rows.append(torch.cat([torch.zeros(p - length, dtype=torch.long), ids, comp]))
            masks.append(torch.cat([torch.zeros(p - length), torch.ones(length + completion)]).long())
    return torch.stack(rows), torch.stack(masks), completion


def test_the_fast_pass_against_float32(tmp_path, tiny_model_dir, char_task):
    """The policy's log-probability pass of the fast step (bf16 autocast, each prompt once, float32
    LM head, checkpointing on in the config and off for the pass) against TRL's float32 pass: the
    per-token log-probabilities within 0.02 (largest seen here 1.1e-3), the gradient of
    sum(A log p) within 3 % of its size (seen 0.45 %), and the advantages, computed in float32 from
    the rewards, identical under autocast."""
    fast = VPOTrainer(
        model=tiny_model_dir, args=_args(tmp_path, "fast", bf16=True, gradient_checkpointing=True), task=char_task
    )
    ref = VPOTrainer(
        model=tiny_model_dir,
        args=_args(tmp_path, "ref", bf16=False, shared_prompt_forward=False, fast_generation=False),
        task=char_task,
    )
    for t in (fast, ref):
        t.model.train()
    ids, mask, c = _batch(fast.model.config.vocab_size)
    weights = torch.randn(ids.size(0), c, generator=torch.Generator().manual_seed(1))

    def pass_of(trainer):
        trainer.model.zero_grad()
        logps, _, _ = trainer._get_per_token_logps_and_entropies(trainer.model, ids, mask, c)
        (logps * weights).sum().backward()
        grads = torch.cat([p.grad.flatten() for p in trainer.model.parameters() if p.grad is not None])
        return logps.detach(), grads

    lp_fast, g_fast = pass_of(fast)
    lp_ref, g_ref = pass_of(ref)
    assert lp_fast.dtype == torch.float32
    err = float((lp_fast - lp_ref).abs().max())
    assert 0 < err < 0.02
    rel = float((g_fast - g_ref).norm() / g_ref.norm())
    assert rel < 0.03
    rewards = torch.rand(8, 3, 3, generator=torch.Generator().manual_seed(2))
    plain = compute_advantages("vpo", rewards, group_size=4, seed=0).advantages
    with torch.autocast("cpu", dtype=torch.bfloat16):
        under = compute_advantages("vpo", rewards, group_size=4, seed=0).advantages
    assert torch.equal(torch.as_tensor(plain), torch.as_tensor(under))


def test_float32_head_and_checkpointing_switch_are_undone(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    from vpo.train.fastpath import float32_head, no_checkpointing

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    model.gradient_checkpointing_enable()
    flagged = [m for m in model.modules() if getattr(m, "gradient_checkpointing", False) is True]
    assert flagged
    head = model.get_output_embeddings()
    h = torch.randn(2, 3, model.config.hidden_size)
    with no_checkpointing(model), torch.autocast("cpu", dtype=torch.bfloat16), float32_head(model):
        assert not any(getattr(m, "gradient_checkpointing", False) for m in model.modules())
        assert head(h).dtype == torch.float32
    assert all(m.gradient_checkpointing is True for m in flagged)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert head(h).dtype == torch.bfloat16  # the patch is gone
