"""How the demo's reports write numbers: one formatter, one interval cell, one curve lookup, used by
the report (:mod:`vpo.demo.report`) and every domain's tables (:mod:`vpo.demo.domains`,
:mod:`vpo.demo.shop`). It imports nothing of the demo, so any of them can import it at the top.
"""

from __future__ import annotations

from vpo._util import fmt_number as fmt

__all__ = ["fmt", "ci", "at_k"]


def ci(s: dict, digits: int = 3, signed: bool = False) -> str:
    """A summary's mean and interval: "0.412 [0.398, 0.431]"."""
    return f"{fmt(s['mean'], digits, signed)} [{fmt(s['ci_low'], digits, signed)}, {fmt(s['ci_high'], digits, signed)}]"


def at_k(entry: dict, k) -> dict:
    """A curve's summary at ``k`` (JSON keys are strings; a fresh aggregate's are integers)."""
    return entry[str(k)] if str(k) in entry else entry[k]
