"""DALI's Numba plugin (``nvidia.dali.plugin.numba``): ``NumbaFunction``, the class of the operator
``fn.numba_function`` places (:mod:`.function`), which runs a Numba-compiled function on the host,
or a CUDA kernel on the GPU. Importing this package registers it (also as ``ops.NumbaFunction``);
Numba is needed when one is defined (``pip install 'raypipe[numba]'``)."""

from __future__ import annotations

from ... import ops
from . import fn  # noqa: F401  (DALI's plugin.numba.fn: numba_function)
from .function import NumbaFunction as _Operator

#: DALI's class style: ``NumbaFunction(run_fn=..., out_types=..., ...)`` made once, called on inputs
NumbaFunction = ops.factory(_Operator.schema.name)

__all__ = ["NumbaFunction"]
