"""``vpo eval``'s transformers backend prefills each prompt once for its n rows
(``vpo.search.shared_prefix.shared_prefix_generate``): the pools must be the ones the plain ``generate``
call gives, token for token, and the shared path must be the one taken."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

import vpo.search.shared_prefix as prefill  # noqa: E402
from vpo.search.backends import PoolConfig, TransformersGenerator  # noqa: E402

PROMPTS = ["abc", "a longer prompt here", "xy"]


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_eval_pools_equal_the_plain_generate_call(tiny_model_dir, monkeypatch, temperature):
    gen = TransformersGenerator(
        tiny_model_dir,
        cfg=PoolConfig(max_new_tokens=8, temperature=temperature, num_threads=1, plain_generate=True),
    )
    taken = []
    real = prefill.shared_prefix_generate

    def spy(generate, model, **kw):
        out = real(generate, model, **kw)
        taken.append(kw["input_ids"].shape[0])
        return out

    monkeypatch.setattr(prefill, "shared_prefix_generate", spy)
    shared = gen.generate(PROMPTS, 5, seed=11)
    assert taken == [15]  # 3 prompts x 5 rows went through the shared path
    monkeypatch.setattr(prefill, "shared_prefix_generate", lambda generate, model, **kw: generate(**kw))
    plain = gen.generate(PROMPTS, 5, seed=11)
    assert [[(g.text, g.num_tokens) for g in row] for row in shared] == [
        [(g.text, g.num_tokens) for g in row] for row in plain
    ]
    if temperature:  # sampled: the rows of one prompt differ, so equality above is not vacuous
        assert len({g.text for g in shared[1]}) > 1


def test_vpo_s_cpu_sampler_is_the_default_and_greedy_pools_equal_generate_s(tiny_model_dir):
    """On a CPU the pools come from vpo's sampler (vpo/search/fast_decode.py) unless plain_generate
    is set: greedy rollouts equal generate's token for token, sampled ones are reproducible per seed,
    and stop strings (which it does not do) go to generate."""
    fast = TransformersGenerator(tiny_model_dir, cfg=PoolConfig(max_new_tokens=8, temperature=0.0, num_threads=1))
    plain = TransformersGenerator(
        tiny_model_dir, cfg=PoolConfig(max_new_tokens=8, temperature=0.0, num_threads=1, plain_generate=True)
    )

    def rows(g, **kw):
        return [[(x.text, x.num_tokens) for x in row] for row in g.generate(PROMPTS, 3, seed=5, **kw)]

    assert rows(fast) == rows(plain)
    assert getattr(fast, "_fast", None) is not None and getattr(plain, "_fast", None) is None
    assert fast._fast_decoder(stop=["b"]) is None
    fast.cfg.temperature = 1.0
    a, b = rows(fast), rows(fast)
    assert a == b and len({t for t, _ in a[1]}) > 1
