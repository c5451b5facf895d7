"""The estimator settings VPOConfig repeats (same names as vpo.core.EstimatorConfig) are declared once:
their defaults and help texts are EstimatorConfig's."""

from __future__ import annotations

import dataclasses

from vpo._util import field_docs
from vpo.core.estimators import EstimatorConfig
from vpo.train.config import SHARED_WITH_ESTIMATOR, VPOConfig


def test_the_shared_fields_are_estimatorconfigs():
    est = {f.name: f for f in dataclasses.fields(EstimatorConfig)}
    vpo = {f.name: f for f in dataclasses.fields(VPOConfig)}
    docs = field_docs(EstimatorConfig)
    assert len(SHARED_WITH_ESTIMATOR) == 11
    for name in SHARED_WITH_ESTIMATOR:
        assert vpo[name].default == est[name].default, name
        assert vpo[name].metadata["help"] == docs[name], name
    # every field both declare is in the list: none is written twice by hand
    assert set(est) & set(vpo) == set(SHARED_WITH_ESTIMATOR)
