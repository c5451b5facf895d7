"""The VPO reference's conventions as options, against slow references written here.

* GDPO: ``gdpo_weighting`` ('target' w* | 'ones'), ``gdpo_whitening`` ('rollouts' | 'tokens': veRL's
  masked whitening over response tokens) and ``gdpo_preset='reference'``; the token whitening is
  checked against a plain Python loop that expands every rollout into its response tokens, and
  against a float32 ``[N, T]`` masked tensor computation (the layout veRL whitens).
* ``weight_schedule='per_row'``: each row's w is a pure function of (seed, row index), the same at
  every step, in every trainer instance and after a resume; written out here as numpy's
  ``default_rng([seed, row]).dirichlet`` draws (the reference's per-row generator).
* Flat groups: every group-normalised estimator gives exactly 0 to a group of identical scores,
  for float32 and float64 rewards and both compute dtypes.
Fixed seeds; tolerances are stated at each assertion.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from vpo.core import EstimatorConfig, SimplexSampler, compute_advantages
from vpo.core.estimators import row_weights

LOOP = dict(rtol=0, atol=1e-9)  # float64 vectorised vs python loops: rounding only


# ---------------------------------------------------------------------------------------------
# slow references
# ---------------------------------------------------------------------------------------------


def loop_gdpo(rewards, group_size, coef, lengths=None, eps=1e-6):
    """Per objective, the group z-score (Bessel std + eps; 0 for a group of equal values); the sum
    weighted by ``coef``; then whitened over rollouts (``lengths`` None) or over response tokens:
    every rollout's value is repeated once per token and the token list is whitened as veRL's
    ``masked_whiten`` (mean over tokens, Bessel variance over the token count, rsqrt(var + 1e-8))."""
    n, d = len(rewards), len(rewards[0])
    z = [[0.0] * d for _ in range(n)]
    for start in range(0, n, group_size):
        rows = list(range(start, start + group_size))
        for j in range(d):
            vals = [float(rewards[i][j]) for i in rows]
            mean = sum(vals) / len(vals)
            std = math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1))
            for i in rows:
                z[i][j] = 0.0 if max(vals) == min(vals) else (float(rewards[i][j]) - mean) / (std + eps)
    s = [sum(c * zj for c, zj in zip(coef, z[i])) for i in range(n)]
    if lengths is None:
        mean = sum(s) / n
        std = math.sqrt(sum((x - mean) ** 2 for x in s) / (n - 1))
        return [(x - mean) / (std + eps) for x in s]
    tokens = [s[i] for i in range(n) for _ in range(int(lengths[i]))]
    mean = sum(tokens) / len(tokens)
    var = sum((t - mean) ** 2 for t in tokens) / (len(tokens) - 1)
    return [(x - mean) / math.sqrt(var + 1e-8) for x in s]


def masked_whiten_f32(per_rollout: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The token-level layout: advantages broadcast over a right-padded ``[N, T]`` float32 tensor,
    whitened over the response mask; returns each rollout's first token."""
    T = int(lengths.max())
    mask = (torch.arange(T)[None, :] < torch.as_tensor(lengths)[:, None]).float()
    vals = torch.as_tensor(per_rollout, dtype=torch.float32)[:, None] * mask
    mean = (vals * mask).sum() / mask.sum()
    var = (((vals - mean) ** 2) * mask).sum() / mask.sum() * (mask.sum() / (mask.sum() - 1))
    return ((vals - mean) * torch.rsqrt(var + 1e-8))[:, 0].numpy()


def numpy_row_draw(seed: int, row: int, d: int, alpha: float = 1.0) -> np.ndarray:
    return np.random.default_rng([seed, row]).dirichlet(np.full(d, alpha))


# ---------------------------------------------------------------------------------------------
# GDPO options
# ---------------------------------------------------------------------------------------------


def _gdpo_batch(seed, groups=5, G=4, d=3):
    rng = np.random.default_rng(seed)
    r = rng.integers(0, 3, size=(groups * G, 1, d)) / 2.0  # ties and flat objectives happen
    r[:G, 0, 1] = 0.5  # one objective flat in the first group
    lengths = rng.integers(1, 40, size=groups * G)  # unequal response lengths
    return r, lengths


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("weighting", ["target", "ones"])
@pytest.mark.parametrize("whitening", ["rollouts", "tokens"])
def test_gdpo_options_match_the_loop(seed, weighting, whitening):
    r, lengths = _gdpo_batch(seed)
    target = np.array([0.5, 0.3, 0.2])
    cfg = EstimatorConfig(gdpo_weighting=weighting, gdpo_whitening=whitening)
    got = compute_advantages("gdpo", r, group_size=4, target_weights=target, config=cfg, response_lengths=lengths)
    coef = target if weighting == "target" else np.ones(3)
    want = loop_gdpo(r[:, 0, :], 4, coef, lengths if whitening == "tokens" else None)
    np.testing.assert_allclose(got.advantages.numpy(), want, **LOOP)


def test_token_whitening_matches_the_masked_tensor_layout_in_float32():
    r, lengths = _gdpo_batch(7, groups=8)
    cfg = EstimatorConfig(gdpo_preset="reference")
    got = compute_advantages("gdpo", r, group_size=4, config=cfg, response_lengths=lengths)
    # the same sum of z-scores, whitened the token-level way in float32: agreement to float32 rounding
    want = masked_whiten_f32(got.scores.numpy(), lengths)
    np.testing.assert_allclose(got.advantages.numpy(), want, rtol=0, atol=1e-5)


def test_token_whitening_weighs_rollouts_by_length():
    """Equal lengths: tokens whitening = rollouts whitening up to the eps conventions; a long
    rollout pulls the token mean towards its own value."""
    r, _ = _gdpo_batch(3)
    n = r.shape[0]
    rollouts = compute_advantages("gdpo", r, group_size=4).advantages
    tokens = compute_advantages(
        "gdpo", r, group_size=4, config=EstimatorConfig(gdpo_whitening="tokens"), response_lengths=np.full(n, 7)
    ).advantages
    # rollouts: Bessel over N and + 1e-6; tokens: Bessel over 7N and rsqrt(var + 1e-8): a fixed ratio
    ratio = math.sqrt(7 * (n - 1) / (7 * n - 1))  # sqrt(var_tokens / var_rollouts)
    np.testing.assert_allclose(tokens.numpy() * ratio, rollouts.numpy(), rtol=1e-5, atol=1e-9)
    long = np.full(n, 7)
    long[0] = 10_000
    skew = compute_advantages(
        "gdpo", r, group_size=4, config=EstimatorConfig(gdpo_whitening="tokens"), response_lengths=long
    )
    assert abs(float(skew.advantages[0])) < 0.05  # rollout 0 is almost the whole token mean


def test_ones_weighting_equals_target_weighting_with_uniform_w_star_up_to_eps():
    """With uniform w* the weighted sum is (1/d) x the plain sum, which the batch whitening removes
    (up to how eps scales): the reference's 'ones' differs from 'target' only for a non-uniform w*."""
    r, _ = _gdpo_batch(4)
    a = compute_advantages("gdpo", r, group_size=4).advantages
    b = compute_advantages("gdpo", r, group_size=4, config=EstimatorConfig(gdpo_weighting="ones")).advantages
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=0, atol=1e-5)
    w = np.array([0.6, 0.3, 0.1])
    c = compute_advantages("gdpo", r, group_size=4, target_weights=w).advantages
    e = compute_advantages(
        "gdpo", r, group_size=4, target_weights=w, config=EstimatorConfig(gdpo_weighting="ones")
    ).advantages
    assert float((c - e).abs().max()) > 0.1


def test_gdpo_preset_sets_both_and_conflicts_are_errors():
    cfg = EstimatorConfig(gdpo_preset="reference")
    assert (cfg.gdpo_weighting, cfg.gdpo_whitening) == ("ones", "tokens")
    assert EstimatorConfig(gdpo_preset="reference", gdpo_weighting="ones").gdpo_whitening == "tokens"
    with pytest.raises(ValueError, match="gdpo_preset='reference' sets gdpo_whitening='tokens'"):
        EstimatorConfig(gdpo_preset="reference", gdpo_whitening="batch")
    with pytest.raises(ValueError, match="gdpo_preset must be one of reference"):
        EstimatorConfig(gdpo_preset="paper")
    with pytest.raises(ValueError, match="gdpo_weighting must be one of target, ones"):
        EstimatorConfig(gdpo_weighting="uniform")
    with pytest.raises(ValueError, match="weight_schedule must be one of per_step, per_row"):
        EstimatorConfig(weight_schedule="per_epoch")


def test_token_whitening_input_errors():
    r, lengths = _gdpo_batch(0)
    cfg = EstimatorConfig(gdpo_whitening="tokens")
    with pytest.raises(ValueError, match="pass response_lengths"):
        compute_advantages("gdpo", r, group_size=4, config=cfg)
    with pytest.raises(ValueError, match="response_lengths has 3 entries but there are N=20"):
        compute_advantages("gdpo", r, group_size=4, config=cfg, response_lengths=[1, 2, 3])
    with pytest.raises(ValueError, match="finite and >= 0"):
        compute_advantages("gdpo", r, group_size=4, config=cfg, response_lengths=-lengths)
    with pytest.raises(ValueError, match="at least 2 tokens"):
        compute_advantages("gdpo", r, group_size=4, config=cfg, response_lengths=np.eye(1, 20)[0])
    # other estimators and the rollouts whitening ignore the lengths
    a = compute_advantages("gdpo", r, group_size=4, response_lengths=[1, 2, 3]).advantages
    assert torch.equal(a, compute_advantages("gdpo", r, group_size=4).advantages)


def test_vpoconfig_passes_the_options_to_the_estimator():
    from vpo.train import VPOConfig

    args = VPOConfig(
        output_dir="/tmp/unused",
        estimator="gdpo",
        gdpo_preset="reference",
        weight_schedule="per_row",
        report_to="none",
        use_cpu=True,
    )
    cfg = args.estimator_config()
    assert (cfg.gdpo_weighting, cfg.gdpo_whitening, cfg.weight_schedule) == ("ones", "tokens", "per_row")
    with pytest.raises(ValueError, match="weight_schedule must be one of"):
        VPOConfig(
            output_dir="/tmp/unused",
            estimator="random_weight",
            weight_schedule="per_epoch",
            report_to="none",
            use_cpu=True,
        )


# ---------------------------------------------------------------------------------------------
# per-row weights
# ---------------------------------------------------------------------------------------------


def test_row_weights_are_the_per_row_numpy_draws():
    rows = [0, 5, 5, 17, 3]
    got = row_weights(11, rows, 4)
    want = np.stack([numpy_row_draw(11, i, 4) for i in rows])
    np.testing.assert_array_equal(got.numpy(), want)  # bit for bit
    np.testing.assert_array_equal(got[1].numpy(), got[2].numpy())  # the same row, the same w
    assert not np.allclose(got[0].numpy(), got[1].numpy())
    assert not np.allclose(row_weights(12, rows, 4).numpy(), want)  # the seed matters
    half = row_weights(11, rows, 4, weight_alpha=0.5)
    np.testing.assert_array_equal(half[0].numpy(), numpy_row_draw(11, 0, 4, 0.5))
    assert torch.equal(row_weights(3, [2], 1), torch.ones(1, 1, dtype=torch.float64))
    with pytest.raises(ValueError, match="non-negative integers"):
        row_weights(0, [1.5], 3)
    with pytest.raises(ValueError, match="non-negative integer"):
        row_weights(-1, [1], 3)


def test_per_row_random_weight_is_stable_across_steps_and_samplers():
    rng = np.random.default_rng(0)
    rows = np.repeat([4, 9, 2], 4)  # three prompts, G = 4
    cfg = EstimatorConfig(weight_schedule="per_row")
    sampler = SimplexSampler(1, seed=0)
    for _step in range(3):  # new rewards every step; the sampler stream moves on but is not used
        r = rng.random((12, 1, 3))
        res = compute_advantages("random_weight", r, group_size=4, config=cfg, row_index=rows, seed=5, sampler=sampler)
        w = np.stack([numpy_row_draw(5, i, 3) for i in rows])
        s = (r[:, 0, :] * w).sum(1)
        np.testing.assert_allclose(res.scores.numpy(), s, **LOOP)
        sampler.sample(4, 3)
    # per_step draws per group from the sampler instead: a different w
    step = compute_advantages("random_weight", r, group_size=4, row_index=rows, seed=5)
    assert not torch.allclose(step.scores, res.scores)
    with pytest.raises(ValueError, match="needs row_index"):
        compute_advantages("random_weight", r, group_size=4, config=cfg)


@pytest.fixture()
def per_row_trainer(tmp_path, tiny_model_dir, char_task):
    from vpo.train import VPOConfig, VPOTrainer
    from vpo.train.trainer import INDEX_COLUMN

    class Recording(VPOTrainer):
        """Records each rollout's dataset row and the weights the estimator used."""

        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            self.seen = []

        def _generate_and_score_completions(self, inputs):
            rows = [int(x[INDEX_COLUMN]) for x in inputs]
            out = super()._generate_and_score_completions(inputs)
            self.seen.append((int(self.state.global_step), rows, self.vpo_last["weights"].double().numpy()))
            return out

    def make(estimator, schedule, out):
        args = VPOConfig(
            output_dir=str(tmp_path / out),
            estimator=estimator,
            num_answers=1,
            num_generations=4,
            per_device_train_batch_size=8,
            max_completion_length=8,
            max_steps=3,
            learning_rate=1e-2,
            beta=0.0,
            report_to="none",
            save_strategy="no",
            use_cpu=True,
            seed=3,
            train_size=3,
            disable_tqdm=True,
            weight_schedule=schedule,
        )
        return Recording(model=tiny_model_dir, args=args, task=char_task)

    return make


def test_trainer_per_row_weights_are_fixed_per_row_across_steps_and_instances(per_row_trainer):
    """random_weight with weight_schedule per_row: 3 steps over a 3-row dataset (rows recur across
    steps); every rollout's w is its row's numpy draw from (seed 3, row), so a row keeps its w at
    every step, and a second trainer (a resumed run builds a new one) gives the same w."""
    tr = per_row_trainer("random_weight", "per_row", "a")
    tr.train()
    assert [step for step, _, _ in tr.seen] == [0, 1, 2]
    by_row: dict[int, set] = {}
    for _, rows, w in tr.seen:
        np.testing.assert_array_equal(w, np.stack([numpy_row_draw(3, i, 3) for i in rows]).astype(np.float32))
        for i, wi in zip(rows, w):
            by_row.setdefault(i, set()).add(tuple(wi.tolist()))
    assert all(len(ws) == 1 for ws in by_row.values())  # one w per row for the whole run
    assert sum(len(rows) for _, rows, _ in tr.seen) > len(by_row) * 4  # rows did recur
    other = per_row_trainer("random_weight", "per_row", "b")
    other.state.global_step = 57  # another instance, later in the run
    inputs = [{"vpo_index": i} for i in sorted(by_row)]
    assert [tuple(np.float32(x) for x in w) for w in other._goal_weights(inputs)] == [
        next(iter(by_row[i])) for i in sorted(by_row)
    ]


def test_trainer_goal_conditioned_schedule(per_row_trainer):
    """goal_conditioned: per_row gives the same w at any step; per_step changes it with the step."""
    rows = [{"vpo_index": i} for i in range(3)]
    fixed = per_row_trainer("goal_conditioned", "per_row", "c")
    first = fixed._goal_weights(rows)
    fixed.state.global_step = 9
    assert fixed._goal_weights(rows) == first
    np.testing.assert_allclose(first, [numpy_row_draw(3, i, 3) for i in range(3)], rtol=0, atol=0)
    moving = per_row_trainer("goal_conditioned", "per_step", "d")
    a = moving._goal_weights(rows)
    moving.state.global_step = 9
    assert moving._goal_weights(rows) != a


def test_trainer_gdpo_token_whitening_uses_the_completion_lengths(tmp_path, tiny_model_dir, char_task, monkeypatch):
    from trl import GRPOTrainer

    from vpo.train import VPOConfig, VPOTrainer

    original = GRPOTrainer._generate_and_score_completions

    def shorter(self, inputs):  # the tiny model never stops early: end rollout i after 3 + i tokens
        out = original(self, inputs)
        mask = out["completion_mask"]
        cut = torch.arange(mask.shape[1])[None, :] < (3 + torch.arange(mask.shape[0]))[:, None]
        out["completion_mask"] = mask * cut.to(mask.dtype)
        return out

    monkeypatch.setattr(GRPOTrainer, "_generate_and_score_completions", shorter)

    class Recording(VPOTrainer):
        def _generate_and_score_completions(self, inputs):
            out = super()._generate_and_score_completions(inputs)
            self.lengths = out["completion_mask"].sum(1).cpu()
            return out

    args = VPOConfig(
        output_dir=str(tmp_path / "g"),
        estimator="gdpo",
        gdpo_preset="reference",
        num_generations=4,
        per_device_train_batch_size=8,
        max_completion_length=12,
        max_steps=1,
        learning_rate=1e-2,
        beta=0.0,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        seed=0,
        disable_tqdm=True,
    )
    tr = Recording(model=tiny_model_dir, args=args, task=char_task)
    tr.train()
    b = tr.vpo_last
    ref = compute_advantages(
        "gdpo",
        b["rewards"].double(),
        b["valid"],
        group_size=4,
        target_weights=tr.vpo_target,
        config=tr.vpo_estimator_config,
        response_lengths=tr.lengths,
    ).advantages
    np.testing.assert_allclose(b["advantages"].double().numpy(), ref.numpy(), rtol=0, atol=1e-5)
    assert len(set(tr.lengths.tolist())) > 1  # unequal lengths, so the token weighting mattered
    rollouts = compute_advantages("gdpo", b["rewards"].double(), b["valid"], group_size=4, target_weights=tr.vpo_target)
    assert float((rollouts.advantages - ref).abs().max()) > 1e-3


# ---------------------------------------------------------------------------------------------
# flat groups
# ---------------------------------------------------------------------------------------------

FLAT_VALUES = [0.1, 0.806, 1 / 3, 0.6, 0.7, 2.5]  # values whose float mean of copies can round


@pytest.mark.parametrize(
    "name", ["vpo", "grpo", "multi_rlvr", "random_weight", "goal_conditioned", "max_at_k", "maxrl", "union_coverage"]
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("compute_dtype", ["float32", "float64"])
@pytest.mark.parametrize("G", [3, 8])
def test_flat_groups_get_exactly_zero(name, dtype, compute_dtype, G):
    """A group of identical answers gets advantage exactly 0 (not a rounding residue), next to a
    non-flat group that gets a non-zero one; contiguous and id layouts alike."""
    m = 3 if name in ("vpo", "multi_rlvr", "union_coverage") else 1
    d = 3
    rng = np.random.default_rng(G)
    rows = []
    for v in FLAT_VALUES:
        rows.append(np.full((G, m, d), v))
    rows.append(rng.random((G, m, d)))  # one varied group
    r = np.concatenate(rows).astype(dtype)
    n = r.shape[0]
    same_w = np.tile(np.array([0.2, 0.3, 0.5]), (n, 1))
    kw = dict(rollout_weights=same_w) if name == "goal_conditioned" else {}
    cfg = EstimatorConfig(compute_dtype=compute_dtype, num_weightings=8)
    flat = slice(0, len(FLAT_VALUES) * G)
    for layout in (dict(group_size=G), dict(group_ids=[f"g{i // G}" for i in range(n)][::-1])):
        a = compute_advantages(name, r, config=cfg, **layout, **kw).advantages
        assert torch.equal(a[flat], torch.zeros_like(a[flat])), f"{name}: {a[flat].abs().max().item()}"
        assert float(a[flat.stop :].abs().max()) > 0.1


def test_gdpo_flat_batch_is_exactly_zero_and_flat_objectives_add_nothing():
    r = np.full((8, 1, 3), 0.806, dtype=np.float32)
    for cfg in (EstimatorConfig(), EstimatorConfig(gdpo_preset="reference")):
        a = compute_advantages("gdpo", r, group_size=4, config=cfg, response_lengths=np.arange(1, 9)).advantages
        assert torch.equal(a, torch.zeros_like(a))
    # one objective flat in every group: the result equals dropping that objective
    rng = np.random.default_rng(1)
    r = rng.random((12, 1, 3))
    r[:, 0, 2] = 1 / 3
    full = compute_advantages("gdpo", r, group_size=4, config=EstimatorConfig(gdpo_weighting="ones")).advantages
    two = compute_advantages(
        "gdpo", r[:, :, :2], group_size=4, config=EstimatorConfig(gdpo_weighting="ones")
    ).advantages
    assert torch.equal(full, two)


# ---------------------------------------------------------------------------------------------
# veRL pass-through (the score function; no veRL needed)
# ---------------------------------------------------------------------------------------------


def _digits_task():
    """Test-only task (named as such): objective j is the j-th digit of the answer / 9."""
    from vpo.tasks import FunctionTask

    def digit(j):
        return lambda ex, a: (
            int([c for c in a if c.isdigit()][j]) / 9.0 if len([c for c in a if c.isdigit()]) > j else 0.0
        )

    return FunctionTask(
        "conventions_test_digits",
        objectives={o: digit(j) for j, o in enumerate("xyz")},
        examples=[{"id": 0, "question": "Give three digits."}],
    )


def test_verl_score_function_per_row_weights_and_set_objectives():
    import json

    from vpo.integrations.verl_reward import compute_score
    from vpo.tasks import list_tasks, register_task

    if "conventions_test_digits" not in list_tasks():
        register_task("conventions_test_digits", _digits_task)
    gt = json.dumps({"id": 0, "question": "Give three digits."})
    src = "vpo/conventions_test_digits"

    def score(index, group, **kw):
        info = {"vpo_group": group} if index is None else {"index": index, "vpo_group": group}
        return compute_score(
            src, "<answer_1>9 0 4</answer_1>", gt, info, method="vpo_random_weight", num_answers=1, **kw
        )["score"]

    r = np.array([1.0, 0.0, 4 / 9])
    per_row = dict(weight_schedule="per_row", weight_seed=2)
    assert score(5, "uid-a", **per_row) == pytest.approx(float(numpy_row_draw(2, 5, 3) @ r), abs=1e-12)
    assert score(5, "uid-b", **per_row) == score(5, "uid-a", **per_row)  # a new step's uid: the same w
    assert score(6, "uid-a", **per_row) != score(5, "uid-a", **per_row)
    assert score(5, "uid-b") != score(5, "uid-a")  # per_step: keyed by the group uid
    with pytest.raises(ValueError, match="extra_info has no 'index'"):
        score(None, "uid-a", **per_row)
    union = compute_score(
        src,
        "<answer_1>9 0 4</answer_1> <answer_2>0 9 0</answer_2>",
        gt,
        {"vpo_group": "g"},
        method="vpo_union_coverage",
        num_answers=2,
    )
    assert union["score"] == pytest.approx(1 + 1 + 4 / 9, abs=1e-12)  # best x, best y, best z
