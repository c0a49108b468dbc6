"""DALI's ``nvidia.dali.plugin.pytorch.fn``: ``torch_python_function``, a Python function over torch
tensors in a pipeline (:mod:`.torch_function`)."""

from __future__ import annotations

from typing import Any

from ... import fn as _fn
from . import torch_function  # noqa: F401  (registers the operator)

__all__ = ["torch_python_function"]


def torch_python_function(*inputs: Any, **kwargs: Any) -> Any:
    """``function`` applied to torch tensors of each sample (``batch_processing=True``: of each
    batch); DALI's arguments (``function``, ``num_outputs``, ``device``, ``batch_processing``,
    ``output_layouts``)."""
    return _fn.torch_python_function(*inputs, **kwargs)
