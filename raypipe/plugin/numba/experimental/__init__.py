"""DALI's older home of the Numba operator's class (``nvidia.dali.plugin.numba.experimental``)."""

from __future__ import annotations

from .. import NumbaFunction

__all__ = ["NumbaFunction"]
