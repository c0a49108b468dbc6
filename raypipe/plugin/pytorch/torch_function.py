"""``TorchPythonFunction`` (``torch_python_function``): a Python function over torch tensors as an
operator, as DALI's PyTorch plugin has it.

``python_function`` with each sample handed to the function as a torch tensor (a view of the
host array, or of the device array on the GPU) and the tensors it returns taken back as arrays.
As in DALI, ``batch_processing=False`` (the default, on both devices) calls it once per sample,
``True`` once per batch with a list of tensors per input. On the GPU the function runs on torch's
current stream after the pipeline's work on its inputs, and its work has finished when the
operator returns (DALI runs it on a stream of its own and waits for it likewise). Where no GPU is
usable, ``device="gpu"`` runs on the host and the function gets CPU tensors.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from ...backend import is_device_array
from ...operator import Schema, register
from ...operators.python_function import PythonFunction


@register
class TorchPythonFunction(PythonFunction):
    """``python_function`` whose function takes and returns torch tensors."""

    schema = Schema("torch_python_function", devices=("cpu", "gpu"), min_inputs=0, max_inputs=256)

    def configure(self, function: Callable, **kwargs: Any) -> None:
        kwargs.setdefault("batch_processing", False)  # DALI's default on both devices
        super().configure(function, **kwargs)

    def call(self, inputs: Sequence[Any]) -> Any:
        samples = [s for i in inputs for s in (i if self.per_batch else [i])]
        tensors = [[_tensor(s) for s in i] if self.per_batch else _tensor(i) for i in inputs]
        if any(is_device_array(s) for s in samples):
            import cupy

            cupy.cuda.get_current_stream().synchronize()  # the pipeline's work on the inputs, done
            out = self.function(*tensors)
            torch.cuda.current_stream().synchronize()
        else:
            out = self.function(*tensors)
        if self.outputs == 0:
            return ()
        if self.outputs == 1:
            return [_array(s, self.schema.name) for s in out] if self.per_batch else _array(out, self.schema.name)
        return tuple(
            [_array(s, self.schema.name) for s in o] if self.per_batch else _array(o, self.schema.name) for o in out
        )


def _tensor(sample: Any) -> torch.Tensor:
    """A sample as a torch tensor viewing it (a read-only host array is copied: torch needs writable memory)."""
    if is_device_array(sample):
        return torch.from_dlpack(sample)
    array = np.asarray(sample)
    return torch.from_numpy(array if array.flags.writeable else array.copy())


def _array(value: Any, op: str) -> Any:
    """A returned tensor as an array: numpy for a CPU tensor, cupy for a CUDA one; arrays pass through."""
    if not isinstance(value, torch.Tensor):
        if isinstance(value, np.ndarray) or is_device_array(value):
            return value
        raise TypeError(f"{op}: the function must return torch tensors, got {type(value).__name__}")
    value = value.detach()
    if value.is_cuda:
        import cupy

        return cupy.from_dlpack(value)
    if value.dtype == torch.bfloat16:
        raise TypeError(f"{op}: the function returned a bfloat16 tensor, which has no numpy type: cast it first")
    return value.numpy()
