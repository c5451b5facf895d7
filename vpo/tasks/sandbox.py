"""Deprecated alias: the sandbox moved to :mod:`vpo.sandbox`. ``from vpo.tasks.sandbox import Sandbox``
(and the other public names) keeps working, with a ``DeprecationWarning``; import from
``vpo.sandbox`` instead."""

import warnings

from vpo.sandbox import *  # noqa: F403 - the alias re-exports the whole public API
from vpo.sandbox import __all__  # noqa: F401

warnings.warn("vpo.tasks.sandbox is deprecated: import from vpo.sandbox instead", DeprecationWarning, stacklevel=2)
