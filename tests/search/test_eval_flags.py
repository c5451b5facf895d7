"""``vpo eval``'s generation flags are PoolConfig's fields: one name in the code, one default and one
help text per setting (vpo._util.add_dataclass_flags), not a second copy in argparse."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from vpo._util import add_dataclass_flags, field_docs
from vpo.search.backends import PoolConfig
from vpo.search.cli import EVAL_FLAGS, _metric_kwargs, add_parser
from vpo.search.evalsetup import POOL_FLAGS, pool_config
from vpo.search.step.cli import SEARCH_FLAGS
from vpo.search.metrics import EvalConfig


def _eval_parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser()
    add_parser(root.add_subparsers(dest="cmd"))
    return root


def _actions(parser) -> dict[str, argparse.Action]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["eval"]
    return {s: a for a in sub._actions for s in a.option_strings}


def test_every_generation_flag_has_its_fields_default_and_help():
    actions = _actions(_eval_parser())
    defaults = {f.name: f.default for f in dataclasses.fields(PoolConfig)}
    docs = field_docs(PoolConfig)
    for flag, field in {**POOL_FLAGS, "--endpoint": "endpoint"}.items():
        a = actions[flag]
        assert a.default == defaults[field], flag
        assert a.help.startswith(docs[field].replace("%", "%%")), flag
    assert actions["--backend"].choices == ["auto", "transformers", "vllm", "openai"]
    assert actions["--stop-at-last-answer"].const is True  # a switch


def test_every_metric_flag_has_its_eval_config_fields_default_and_help():
    root = argparse.ArgumentParser()
    add_parser(root.add_subparsers(dest="cmd"))
    defaults = {f.name: f.default for f in dataclasses.fields(EvalConfig)}
    docs = field_docs(EvalConfig)
    for cmd in ("eval", "compare"):
        sub = next(a for a in root._actions if isinstance(a, argparse._SubParsersAction)).choices[cmd]
        actions = {s: a for a in sub._actions for s in a.option_strings}
        for flag, field in EVAL_FLAGS.items():
            assert actions[flag].default == defaults[field], (cmd, flag)
            assert actions[flag].help.startswith(docs[field].replace("%", "%%")), (cmd, flag)
        assert actions["--eval-seeds"].default == len(EvalConfig().seeds)
    args = _eval_parser().parse_args(["eval"])
    kw = _metric_kwargs(args)
    built = EvalConfig(**{k: v for k, v in kw.items() if k != "embed_diversity"})
    assert built == EvalConfig(ks=None)  # the flags' defaults are the dataclass's
    assert ":func:" not in "".join(docs[f] for f in EVAL_FLAGS.values())  # help text, not reST


def test_every_search_flag_has_its_search_config_fields_default_and_help():
    from vpo.errors import UserError
    from vpo.search.step.cli import _search_config, searching
    from vpo.search.step.search import SearchConfig

    actions = _actions(_eval_parser())
    defaults = {f.name: f.default for f in dataclasses.fields(SearchConfig)}
    docs = field_docs(SearchConfig)
    for flag, field in SEARCH_FLAGS.items():
        assert actions[flag].default == defaults[field], flag
        assert actions[flag].help.startswith(docs[field].replace("%", "%%")), flag
    assert actions["--search"].choices == ["bon", "beam", "tree"]
    plain = _eval_parser().parse_args(["eval"])
    assert not searching(plain)  # the dataclass's defaults: today's best-of-n pool
    beam = _eval_parser().parse_args(["eval", "--search", "beam", "--budget-tokens", "64", "--beam-expand", "3"])
    cfg = _search_config(beam, m=2)
    assert searching(beam) and (cfg.search, cfg.budget_tokens, cfg.expand, cfg.num_answers) == ("beam", 64, 3, 2)
    with pytest.raises(UserError, match="--search tree needs --budget-tokens B"):
        _search_config(_eval_parser().parse_args(["eval", "--search", "tree"]), m=1)


def test_the_flags_build_the_pool_config_they_name():
    args = _eval_parser().parse_args(
        ["eval", "--rollouts", "5", "--top-p", "0.9", "--threads", "3", "--batch-rows", "7", "--stop-at-last-answer"]
    )
    cfg = pool_config(args, m=3)
    assert (cfg.num_answers, cfg.n_rollouts, cfg.top_p, cfg.num_threads, cfg.max_batch_rows) == (3, 5, 0.9, 3, 7)
    assert cfg.stop_at_last_answer is True
    untouched = (
        {f.name for f in dataclasses.fields(PoolConfig)} - set(POOL_FLAGS.values()) - {"num_answers", "endpoint"}
    )
    for name in untouched:
        assert getattr(cfg, name) == getattr(PoolConfig(), name), name


def test_a_field_the_helper_cannot_express_is_refused():
    @dataclasses.dataclass
    class Odd:
        on: bool = True
        """A switch that is on by default."""
        pair: tuple = (1, 2)
        """Not a scalar."""

    group = argparse.ArgumentParser().add_argument_group("x")
    with pytest.raises(ValueError, match="a switch must default to False"):
        add_dataclass_flags(group, Odd, {"--on": "on"})
    with pytest.raises(ValueError, match="no flag for a field of type"):
        add_dataclass_flags(group, Odd, {"--pair": "pair"})
    assert field_docs(Odd) == {"on": "A switch that is on by default.", "pair": "Not a scalar."}
