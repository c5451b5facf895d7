"""Per-rollout wiring of every estimator and trainer mode: the advantage that reaches TRL's loss for
each rollout equals the one computed from that rollout's recorded rewards, rollout by rollout (no
sorting), after TRL has shuffled the generation batch and split it into micro-batches.

How: a recording subclass tags each rollout of the generation batch with its index (a tensor key that
TRL shuffles and splits together with the completions and advantages), records the rewards the
trainer scored, and records every micro-batch that reaches ``_compute_loss``. The reference is
``compute_advantages(name, recorded rewards, ...)`` with the sampler state recorded before the
generation; the ``trl_*`` modes (TRL's own advantage code) are checked against the formula of TRL's
``multi_objective_aggregation`` written out here. Goal-conditioned GRPO: the weighting is parsed back
out of each micro-batch row's prompt text and must be the one used for that rollout's advantage, and
shared by the G rollouts of its prompt. ``test_a_permutation_within_a_group_is_caught`` shows the
check fails when the advantages of two rollouts of one group are swapped.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

pytest.importorskip("trl")

from vpo.core import SimplexSampler, compute_advantages, list_estimators  # noqa: E402
from vpo.train import VPOTrainer  # noqa: E402
from vpo.train.config import TRL_NATIVE_ESTIMATORS  # noqa: E402

from helpers.trainer_args import tiny_vpo_args  # noqa: E402

G = 4  # rollouts per prompt
PER_DEVICE = 8  # micro-batch (2 prompts)
STEPS_PER_GEN = 2  # generation batch = 16 rollouts = 4 groups, shuffled then split in 2 micro-batches
TAG = "_wiring_rollout"

MODES = list_estimators() + sorted(TRL_NATIVE_ESTIMATORS)


class WiringTrainer(VPOTrainer):
    """Records, per generation: the sampler state, the rewards scored, the generation output (with a
    rollout tag); per micro-batch: what reached the loss."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.gens, self.micro = [], []

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        trl_view = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        p = self._pending
        self.gens[-1].update(
            trl_view=trl_view.detach().cpu().clone(),
            rewards=p.rewards.detach().cpu().clone(),
            valid=p.valid.detach().cpu().clone(),
            weights=None if p.weights is None else p.weights.detach().cpu().clone(),
        )
        return trl_view

    def _generate_and_score_completions(self, inputs):
        self.gens.append({"sampler": self.vpo_sampler.state_dict()})
        out = super()._generate_and_score_completions(inputs)
        n = out["advantages"].shape[0]
        out[TAG] = torch.arange(n)
        self.gens[-1]["completion_ids"] = out["completion_ids"].detach().cpu().clone()
        self.gens[-1]["prompt_ids"] = out["prompt_ids"].detach().cpu().clone()
        return out

    def _compute_loss(self, model, inputs):
        self.micro.append(
            {
                k: inputs[k].detach().cpu().clone()
                for k in (TAG, "advantages", "prompt_ids", "prompt_mask", "completion_ids")
            }
        )
        return super()._compute_loss(model, inputs)


def _args(tmp_path, estimator):
    return tiny_vpo_args(
        tmp_path / "out",
        estimator=estimator,
        num_answers=3 if estimator in ("vpo", "multi_rlvr") else 1,
        num_generations=G,
        per_device_train_batch_size=PER_DEVICE,
        steps_per_generation=STEPS_PER_GEN,
        gradient_accumulation_steps=STEPS_PER_GEN,
        max_completion_length=10,
        max_steps=1,
    )


def _trl_reference(trl_view: torch.Tensor, weights: torch.Tensor, aggregation: str) -> torch.Tensor:
    """TRL 1.16's two aggregations, written out (rewards [n, d] as TRL received them)."""
    r = trl_view.double()
    w = weights.double()
    if aggregation == "sum_then_normalize":
        s = (r * w).sum(1).view(-1, G)
        return ((s - s.mean(1, keepdim=True)) / (s.std(1, keepdim=True) + 1e-4)).reshape(-1)
    grouped = r.view(-1, G, r.shape[1])
    z = (grouped - grouped.mean(1, keepdim=True)) / (grouped.std(1, keepdim=True) + 1e-4)
    s = (z.reshape(-1, r.shape[1]) * w).sum(1)
    return (s - s.mean()) / (s.std() + 1e-4)


def _reference(tr: WiringTrainer, gen: dict) -> torch.Tensor:
    name = tr.args.estimator
    if name in TRL_NATIVE_ESTIMATORS:
        return _trl_reference(gen["trl_view"], tr.reward_weights.cpu(), TRL_NATIVE_ESTIMATORS[name])
    sampler = SimplexSampler(tr.args.num_weightings, tr.args.weight_alpha, tr.args.weight_sampler, seed=0)
    sampler.load_state_dict(gen["sampler"])
    return compute_advantages(
        name,
        gen["rewards"],
        gen["valid"],
        group_size=G,
        target_weights=tr.vpo_target,
        rollout_weights=gen["weights"],
        config=tr.vpo_estimator_config,
        sampler=sampler,
    ).advantages.double()


def check_wiring(gen: dict, micro: list[dict], ref: torch.Tensor) -> None:
    """Every rollout reaches the loss exactly once, next to its own completion, with its own
    reference advantage."""
    n = gen["completion_ids"].shape[0]
    seen = torch.cat([mb[TAG] for mb in micro])
    assert sorted(seen.tolist()) == list(range(n)), "some rollout reached the loss twice or never"
    for mb in micro:
        for row, i in enumerate(mb[TAG].tolist()):
            assert torch.equal(mb["completion_ids"][row], gen["completion_ids"][i]), f"rollout {i}: completion moved"
            got = float(mb["advantages"][row])
            assert got == pytest.approx(float(ref[i]), abs=1e-4), (
                f"rollout {i}: loss advantage {got} != reference {float(ref[i])}"
            )


_WEIGHT_RE = re.compile(r"scored by this weighting of the objectives: (.*?)\.(?:\s|$)")


def _parse_weights(text: str, objectives: list[str]) -> list[float]:
    m = _WEIGHT_RE.search(text)
    assert m, f"no weighting in the prompt: {text!r}"
    items = dict(item.rsplit(" ", 1) for item in m.group(1).split(", "))
    return [float(items[o]) for o in objectives]


def check_goal_weights(tr: WiringTrainer, gen: dict, micro: list[dict]) -> None:
    """The weighting in each rollout's prompt is the one its advantage used; a group shares it."""
    tok = tr.processing_class
    parsed = {}
    for mb in micro:
        for row, i in enumerate(mb[TAG].tolist()):
            ids = mb["prompt_ids"][row][mb["prompt_mask"][row].bool()]
            parsed[i] = _parse_weights(tok.decode(ids, skip_special_tokens=True), tr.vpo_objectives)
    used = gen["weights"].double()
    for i, w in parsed.items():
        # the prompt prints two decimals; the advantage used the exact weighting
        assert np.allclose(w, used[i].numpy(), atol=0.0051), (
            f"rollout {i}: prompt says {w}, advantage used {used[i].tolist()}"
        )
    for g in range(len(parsed) // G):
        rows = range(g * G, (g + 1) * G)
        assert all(torch.equal(used[r], used[g * G]) for r in rows), f"group {g}: rollouts used different weightings"
        assert all(parsed[r] == parsed[g * G] for r in rows), f"group {g}: prompts carry different weightings"
    assert len({tuple(used[g * G].tolist()) for g in range(len(parsed) // G)}) > 1, "every group got the same weighting"


def _train(tmp_path, tiny_model_dir, char_task, estimator) -> WiringTrainer:
    tr = WiringTrainer(model=tiny_model_dir, args=_args(tmp_path, estimator), task=char_task)
    tr.train()
    assert len(tr.gens) == 1 and len(tr.micro) == STEPS_PER_GEN
    return tr


@pytest.mark.parametrize("estimator", MODES)
def test_loss_advantages_match_per_rollout(tmp_path, tiny_model_dir, char_task, estimator):
    tr = _train(tmp_path, tiny_model_dir, char_task, estimator)
    gen = tr.gens[0]
    ref = _reference(tr, gen)
    assert ref.abs().max() > 0, "all-zero advantages would make the check vacuous"
    check_wiring(gen, tr.micro, ref)
    if estimator == "goal_conditioned":
        check_goal_weights(tr, gen, tr.micro)


def test_a_permutation_within_a_group_is_caught(tmp_path, tiny_model_dir, char_task):
    """Mutation: swap the loss advantages of two rollouts of one group that differ; the check fails.
    TRL's shuffle really reordered the batch (else the test would not exercise it)."""
    tr = _train(tmp_path, tiny_model_dir, char_task, "vpo")
    gen = tr.gens[0]
    ref = _reference(tr, gen)
    assert torch.cat([mb[TAG] for mb in tr.micro]).tolist() != list(range(16)), "TRL did not shuffle"
    check_wiring(gen, tr.micro, ref)  # unmutated: passes
    g = next(g for g in range(4) if ref[g * G : (g + 1) * G].unique().numel() > 1)
    a = g * G
    b = next(i for i in range(a + 1, a + G) if abs(float(ref[i] - ref[a])) > 1e-3)
    where = {i: (k, row) for k, mb in enumerate(tr.micro) for row, i in enumerate(mb[TAG].tolist())}
    (ka, ra), (kb, rb) = where[a], where[b]
    va, vb = tr.micro[ka]["advantages"][ra].clone(), tr.micro[kb]["advantages"][rb].clone()
    tr.micro[ka]["advantages"][ra], tr.micro[kb]["advantages"][rb] = vb, va
    with pytest.raises(AssertionError, match=f"rollout ({a}|{b}): loss advantage"):
        check_wiring(gen, tr.micro, ref)


def test_a_group_with_mixed_goal_weights_is_caught(tmp_path, tiny_model_dir, char_task):
    """Mutation: give one rollout of a group another group's weighting; the goal check fails."""
    tr = _train(tmp_path, tiny_model_dir, char_task, "goal_conditioned")
    gen = tr.gens[0]
    check_goal_weights(tr, gen, tr.micro)
    gen["weights"][1] = gen["weights"][G]
    with pytest.raises(AssertionError, match="rollout 1: prompt says|group 0"):
        check_goal_weights(tr, gen, tr.micro)
