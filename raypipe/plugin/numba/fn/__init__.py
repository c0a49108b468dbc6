"""DALI's ``nvidia.dali.plugin.numba.fn``: ``numba_function`` (:mod:`raypipe.plugin.numba.function`)."""

from __future__ import annotations

from typing import Any

from .... import fn as _fn
from .. import function  # noqa: F401  (registers the operator)

__all__ = ["numba_function"]


def numba_function(*inputs: Any, **kwargs: Any) -> Any:
    """``run_fn`` compiled by Numba over each sample's (or with ``batch_processing=True`` each batch's)
    inputs, filling outputs shaped by ``setup_fn`` (or as the inputs); DALI's arguments (``run_fn``,
    ``out_types``, ``in_types``, ``outs_ndim``, ``ins_ndim``, ``setup_fn``, ``batch_processing``)."""
    return _fn.numba_function(*inputs, **kwargs)
