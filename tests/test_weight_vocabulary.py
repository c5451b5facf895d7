"""One vocabulary for the weighting settings and one fixed weight set, across the layers.

* the trainer's logged pool set score and ``vpo eval``'s E_w metrics score pools with the same
  fixed weightings (:func:`vpo.core.fixed_weights`);
* every deprecated name outside vpo.core (``EvalConfig``, ``vpo eval`` flags, ``vpo train`` YAML
  keys) maps to the new one with a warning naming it, and both names with different values is a
  ``UserError``; the shipped configs use the new names only.

(vpo.core's own aliases are tested in tests/core/test_weights.py, the veRL score function's in
tests/integrations/test_verl.py.)
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch

from vpo.core import EstimatorConfig, compute_advantages, fixed_weights
from vpo.errors import UserError
from vpo.search.metrics import EvalConfig, evaluate
from vpo.search.metrics import fixed_weights as eval_fixed_weights


def _pools(seed: int, prompts: int = 5, rollouts: int = 4, m: int = 3, d: int = 4):
    gen = torch.Generator().manual_seed(seed)
    r = torch.rand(prompts * rollouts, m, d, generator=gen, dtype=torch.float64)
    valid = torch.rand(prompts * rollouts, m, generator=gen) > 0.3
    valid[::rollouts, 0] = True  # every pool has a valid answer (eval scores empty slots 0, the trainer -inf)
    return r, valid, np.repeat(np.arange(prompts), rollouts)


@pytest.mark.parametrize("d", [1, 2, 4, 9])
def test_eval_and_training_diagnostics_use_the_same_weights(d):
    """One fixed set: the numpy view eval uses is the core tensor, element for element, and the two
    pool scores computed from it agree: the trainer's ``pool_set_score`` (groups = prompts) is eval's
    ``ew_best_pool`` (E_w[max over the whole pool]) for the same pools."""
    np.testing.assert_array_equal(eval_fixed_weights(d), fixed_weights(d).numpy())
    assert EvalConfig().num_weightings == fixed_weights(d).shape[0]
    r, valid, prompt = _pools(d, d=d)
    ev = evaluate(r.numpy(), valid.numpy(), prompt, bootstrap=0, ks=(1,))
    for dtype, tol in (("float64", 1e-12), ("float32", 1e-6)):
        res = compute_advantages(
            "vpo", r, valid, group_size=4, config=EstimatorConfig(num_weightings=8, compute_dtype=dtype)
        )
        assert res.diagnostics["pool_set_score"] == pytest.approx(ev["metrics"]["ew_best_pool"]["mean"], abs=tol)


# ---------------------------------------------------------------------------------------------
# EvalConfig and the vpo eval / vpo compare flags
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "old, new, value, clash", [("alpha", "weight_alpha", 0.5, (0.5, 2.0)), ("weights_seed", "weight_seed", 7, (7, 8))]
)
def test_eval_config_deprecated_names(old, new, value, clash):
    with pytest.warns(DeprecationWarning, match=f"'{old}' is deprecated; use '{new}'"):
        cfg = EvalConfig(**{old: value})
    assert getattr(cfg, new) == value
    with pytest.raises(UserError, match=f"{new}=.*{old}="):
        EvalConfig(**{old: clash[0], new: clash[1]})
    # the old keyword reaches the weights evaluate() uses
    r, valid, prompt = _pools(0)
    with pytest.warns(DeprecationWarning):
        old_way = evaluate(r.numpy(), valid.numpy(), prompt, bootstrap=0, ks=(1,), **{old: value})
    new_way = evaluate(r.numpy(), valid.numpy(), prompt, bootstrap=0, ks=(1,), **{new: value})
    assert old_way["metrics"]["ew_best_pool"] == new_way["metrics"]["ew_best_pool"]
    assert old_way["config"][new] == value and old not in old_way["config"]


def _run_cli(argv, capsys):
    from vpo.cli import main

    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_eval_flag_alpha_is_a_deprecated_name_of_weight_alpha(tmp_path, capsys):
    from vpo.search.pools import Pool
    from vpo.search.report import load_report

    rng = np.random.default_rng(0)
    Pool.from_arrays(rng.random((8, 2, 3)), group_size=4, objectives=["a", "b", "c"]).save(tmp_path / "pool")
    common = ["eval", "--pool", str(tmp_path / "pool"), "--ks", "1,2", "--bootstrap", "0", "--no-plots"]
    code, _, err = _run_cli([*common, "--weight-alpha", "0.5", "--out", str(tmp_path / "new")], capsys)
    assert code == 0, err
    with pytest.warns(FutureWarning, match="'--alpha' is deprecated; use '--weight-alpha'"):
        code, _, err = _run_cli([*common, "--alpha", "0.5", "--out", str(tmp_path / "old")], capsys)
    assert code == 0, err
    new, old = (next(iter(load_report(tmp_path / x).values())) for x in ("new", "old"))
    assert new["config"]["weight_alpha"] == old["config"]["weight_alpha"] == 0.5
    assert new["metrics"]["ew_best_at_k"] == old["metrics"]["ew_best_at_k"]
    assert "Dir(0.5)" in (tmp_path / "old" / "report.md").read_text()
    code, _, err = _run_cli([*common, "--alpha", "0.5", "--weight-alpha", "2", "--out", str(tmp_path / "both")], capsys)
    assert code == 2 and "--weight-alpha=2.0" in err and "--alpha=0.5" in err and "Traceback" not in err


def test_reports_written_before_the_rename_still_render(tmp_path):
    """A report.json from before the rename holds ``alpha``/``weights_seed`` in its config."""
    from vpo.search.report import markdown_report

    r, valid, prompt = _pools(1)
    res = evaluate(r.numpy(), valid.numpy(), prompt, bootstrap=0, ks=(1, 2))
    cfg = res["config"]
    cfg["alpha"], cfg["weights_seed"] = cfg.pop("weight_alpha"), cfg.pop("weight_seed")
    res = json.loads(json.dumps(res))
    assert "fixed Dir(1) weightings" in markdown_report({"old": res})


# ---------------------------------------------------------------------------------------------
# vpo train YAML
# ---------------------------------------------------------------------------------------------


def _deprecations(caught) -> list[str]:
    return [str(w.message) for w in caught if "is deprecated; use" in str(w.message)]


def test_shipped_configs_use_the_new_names():
    pytest.importorskip("trl")
    from vpo.train.cli import CONFIG_DIR, parse_train_args, shipped_configs

    for name in shipped_configs():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            parse_train_args(["--config", str(CONFIG_DIR / f"{name}.yaml"), "--bf16", "false", "--use_cpu", "true"])
        assert _deprecations(caught) == [], name


def test_yaml_invalid_answer_score_still_works_with_a_future_warning(tmp_path):
    pytest.importorskip("trl")
    from vpo.train.cli import parse_train_args

    cfg = tmp_path / "old.yaml"
    cfg.write_text("task: maze\ninvalid_answer_score: -1.0\nuse_cpu: true\nreport_to: none\n")
    argv = ["--config", str(cfg), "--output_dir", str(tmp_path / "o")]
    with pytest.warns(FutureWarning, match="'invalid_answer_score' is deprecated; use 'invalid_score'"):
        args = parse_train_args(argv)[0]
    assert args.invalid_score == -1.0 and args.estimator_config().invalid_score == -1.0
    with pytest.raises(UserError, match="invalid_score=-2.0 and its deprecated name invalid_answer_score=-1.0"):
        parse_train_args([*argv, "--invalid_score", "-2"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        args = parse_train_args(["--output_dir", str(tmp_path / "o"), "--use_cpu", "true", "--invalid_score", "-1"])
    assert args[0].invalid_score == -1.0 and _deprecations(caught) == []
