"""vpo: Vector Policy Optimization — train LLMs for diverse, complementary candidates and measure
what test-time search gains from them.

Layers, lowest first; a module imports only its own layer and lower ones (docs/design.md, "Layers"):
``vpo.errors`` / ``vpo._util`` (stdlib only) -> ``vpo.core`` (numpy/torch: samplers, estimators,
answer format) -> ``vpo.tasks`` (vector-reward tasks) and ``vpo.sandbox`` (untrusted code; stdlib
only) -> ``vpo.search`` (pools, metrics, reports), ``vpo.train`` (TRL) and ``vpo.integrations``
(veRL, OpenEvolve) -> ``vpo.demo`` -> ``vpo.cli``. The package root imports at most layer 0, so
importing the sandbox never pulls torch in.
"""

__version__ = "0.1.0"
