"""vpo: Vector Policy Optimization — train LLMs for diverse, complementary candidates and measure
what test-time search gains from them.

Layers (imports point downward only): ``vpo.core`` (numpy/torch: samplers, estimators, answer
format) <- ``vpo.tasks`` (vector-reward tasks) <- ``vpo.search`` (test-time search metrics, pools,
reports) <- ``vpo.train`` / ``vpo.integrations`` (TRL, veRL, OpenEvolve adapters) <- ``vpo.cli``.
"""

__version__ = "0.1.0"
