"""One vocabulary for the weighting settings and one fixed weight set, across the layers.

* the trainer's logged pool set score and ``vpo eval``'s E_w metrics score pools with the same
  fixed weightings (:func:`vpo.core.fixed_weights`);
* one name per setting outside vpo.core too (``EvalConfig``, ``vpo eval`` flags, ``vpo train`` YAML
  keys): the pre-0.1 names are refused, and the shipped configs use the names in docs/estimators.md.

(vpo.core's names are tested in tests/core/test_weights.py.)
"""

from __future__ import annotations

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


@pytest.mark.parametrize("old", ["alpha", "weights_seed"])
def test_eval_config_has_one_name_per_setting(old):
    with pytest.raises(TypeError, match=old):
        EvalConfig(**{old: 1})


def _run_cli(argv, capsys):
    from vpo.cli import main

    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_eval_flag_weight_alpha_reaches_the_report_and_alpha_is_refused(tmp_path, capsys):
    from vpo.search.pools import Pool
    from vpo.search.report import load_report

    rng = np.random.default_rng(0)
    Pool.from_arrays(rng.random((8, 2, 3)), group_size=4, objectives=["a", "b", "c"]).save(tmp_path / "pool")
    common = ["eval", "--pool", str(tmp_path / "pool"), "--ks", "1,2", "--bootstrap", "0", "--no-plots"]
    code, _, err = _run_cli([*common, "--weight-alpha", "0.5", "--out", str(tmp_path / "new")], capsys)
    assert code == 0, err
    new = next(iter(load_report(tmp_path / "new").values()))
    assert new["config"]["weight_alpha"] == 0.5
    assert "Dir(0.5)" in (tmp_path / "new" / "report.md").read_text()
    code, _, err = _run_cli([*common, "--alpha", "0.5", "--out", str(tmp_path / "old")], capsys)
    assert code == 2 and "unrecognized arguments: --alpha" in err and "Traceback" not in err


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


def test_yaml_invalid_answer_score_is_refused_and_invalid_score_works(tmp_path):
    pytest.importorskip("trl")
    from vpo.train.cli import parse_train_args

    cfg = tmp_path / "old.yaml"
    cfg.write_text("task: maze\ninvalid_answer_score: -1.0\nuse_cpu: true\nreport_to: none\n")
    with pytest.raises((UserError, ValueError, SystemExit), match="invalid_answer_score") as e:
        parse_train_args(["--config", str(cfg), "--output_dir", str(tmp_path / "o")])
    assert not isinstance(e.value, SystemExit) or e.value.code == 2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        args = parse_train_args(["--output_dir", str(tmp_path / "o"), "--use_cpu", "true", "--invalid_score", "-1"])
    assert args[0].invalid_score == -1.0 and args[0].estimator_config().invalid_score == -1.0
    assert _deprecations(caught) == []
