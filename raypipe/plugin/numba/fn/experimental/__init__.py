"""DALI's older home of ``numba_function`` (``nvidia.dali.plugin.numba.fn.experimental``)."""

from __future__ import annotations

from .. import numba_function

__all__ = ["numba_function"]
