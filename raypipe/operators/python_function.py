"""``python_function`` and ``dl_tensor_python_function``: a user's Python function as an operator.

As in DALI, ``batch_processing=True`` calls the function once per batch with, per input, the list
of the batch's samples (it returns, per output, one sample per input sample); ``False`` calls it
once per sample. Left out, it is DALI's ``False`` on ``cpu``; on ``gpu`` raypipe gives the function
the batch (a list, or one array holding the batch; cupy where there is a GPU), a difference from
DALI kept for the pipelines written against it. ``num_outputs`` outputs come back as a tuple;
``output_layouts`` names their layouts (DALI's outputs have none by default). With
``num_outputs=0`` the function is called for its side effects: what it returns is dropped, and, as
in DALI, it runs for every sample though nothing uses it.

``dl_tensor_python_function`` is the same with every sample exchanged as a DLPack capsule, as
DALI's: the function takes capsules and returns capsules (or arrays), and by default, as in DALI,
takes the batch (``batch_processing=True``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..kernels.launch import Packed
from ..operator import Operator, Schema, register


@register
class PythonFunction(Operator):
    """Apply ``function`` to each sample, or to each batch's lists of samples (see the module)."""

    schema = Schema("python_function", devices=("cpu", "gpu"), min_inputs=0, max_inputs=256)
    batch_semantics = True  # on the GPU the function gets the batch unless batch_processing=False

    def configure(
        self,
        function: Callable,
        num_outputs: int = 1,
        batch_processing: bool | None = None,
        output_layouts: str | Sequence[str] | None = None,
    ) -> None:
        name = self.schema.name
        if not callable(function):
            raise ArgumentError(f"{name}: function must be callable, got {function!r}")
        if isinstance(num_outputs, bool) or not isinstance(num_outputs, (int, np.integer)) or num_outputs < 0:
            raise ArgumentError(f"{name}: num_outputs must be a non-negative int, got {num_outputs!r}")
        if batch_processing is not None and not isinstance(batch_processing, (bool, np.bool_)):
            raise ArgumentError(f"{name}: batch_processing must be a bool, got {batch_processing!r}")
        layouts = [output_layouts] if isinstance(output_layouts, str) else list(output_layouts or [""])
        if len(layouts) == 1 or (num_outputs == 0 and output_layouts is None):
            layouts = layouts * int(num_outputs)
        if len(layouts) != num_outputs or not all(isinstance(layout, str) for layout in layouts):
            raise ArgumentError(
                f"{name}: output_layouts must be one layout or one per output ({num_outputs}), got {output_layouts!r}"
            )
        self.function = function
        self.outputs = int(num_outputs)
        if not self.outputs:  # called for its side effects: it runs for every sample, as in DALI
            self.preserve = True
        self.layouts = layouts
        self.per_batch = (self.device == "gpu") if batch_processing is None else bool(batch_processing)
        self.batch_semantics = self.per_batch

    @property
    def num_outputs(self) -> int:
        return self.outputs

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        return self.layouts[0] if self.layouts else ""

    def output_layouts(self) -> list[str]:
        """Each output's layout, as ``output_layouts`` names them."""
        return list(self.layouts)

    def host_batch_step(self, arg_inputs) -> bool:
        """On the CPU, ``batch_processing=True`` is a batch step: the CPU stage runs each sample alone."""
        return self.per_batch

    def call(self, inputs: Sequence[Any]) -> Any:
        """The function on one sample's inputs, or on one list of samples per input."""
        return self.function(*inputs)

    def run_sample(self, inputs, args, ctx):
        return self._checked(self.call(inputs))

    def run_batch(self, xp, inputs, args, ctxs):
        inputs = [i.samples() if isinstance(i, Packed) else i for i in inputs]  # the function gets samples
        if not self.per_batch:
            outs = [self.run_sample([inp[i] for inp in inputs], {}, ctx) for i, ctx in enumerate(ctxs)]
            return outs if self.outputs == 1 else tuple([o[k] for o in outs] for k in range(self.outputs))
        out = self._outputs(self.call(inputs))
        batches = [out] if self.outputs == 1 else list(out)
        for batch in batches:
            if len(batch) != len(ctxs):
                raise ValueError(f"{self.schema.name} returned {len(batch)} samples for a batch of {len(ctxs)}")
        batches = [list(b) for b in batches]
        for k, batch in enumerate(batches):
            for sample in batch:
                self._check_sample(sample, k)
        return batches[0] if self.outputs == 1 else tuple(batches)

    def _checked(self, out: Any) -> Any:
        """One sample's outputs: a tuple of ``num_outputs`` arrays for several (a clear error otherwise)."""
        out = self._outputs(out)
        for k, sample in enumerate([out] if self.outputs == 1 else out):
            self._check_sample(sample, k)
        return out

    def _outputs(self, out: Any) -> Any:
        """``out`` as the outputs: a tuple of ``num_outputs`` for several (a clear error otherwise)."""
        if self.outputs == 1:
            return out
        if self.outputs == 0:  # what the function returns is dropped
            return ()
        if not isinstance(out, (tuple, list)) or len(out) != self.outputs:
            got = f"{len(out)} values" if isinstance(out, (tuple, list)) else type(out).__name__
            raise ValueError(f"{self.schema.name}: num_outputs={self.outputs}, but the function returned {got}")
        return tuple(out)

    def _check_sample(self, sample: Any, output: int) -> None:
        """A sample must be an array of numbers or booleans, as in DALI (which also refuses numpy
        scalars; they are taken here): a Python value or an array of objects or strings is refused
        by name, not met later as a missing attribute."""
        dtype = getattr(sample, "dtype", None)
        if isinstance(dtype, np.dtype) and dtype.kind in "biuf" and hasattr(sample, "shape"):
            return
        if isinstance(dtype, np.dtype):
            what = f"an array of {dtype}"
        else:
            what = "None" if sample is None else f"of type {type(sample).__name__}"
        raise TypeError(
            f"{self.schema.name}: output {output} of the function is {what}; it must be a numpy array "
            "(a cupy array on the GPU) of numbers or booleans, as in DALI"
        )


@register
class DLTensorPythonFunction(PythonFunction):
    """``python_function`` whose function takes and returns DLPack capsules."""

    schema = Schema("dl_tensor_python_function", devices=("cpu", "gpu"), min_inputs=0, max_inputs=256)

    def configure(self, function: Callable, synchronize_stream: bool = True, **kwargs: Any) -> None:
        if not isinstance(synchronize_stream, (bool, np.bool_)):
            raise ArgumentError(
                f"dl_tensor_python_function: synchronize_stream must be a bool, got {synchronize_stream!r}"
            )
        kwargs.setdefault("batch_processing", True)  # DALI's default for this operator, unlike python_function's
        super().configure(function, **kwargs)

    def call(self, inputs: Sequence[Any]) -> Any:
        packed = [[_capsule(s) for s in i] if self.per_batch else _capsule(i) for i in inputs]
        out = self.function(*packed)
        if self.outputs == 0:
            return ()
        if self.outputs == 1:
            return [_array(s) for s in out] if self.per_batch else _array(out)
        return tuple([_array(s) for s in o] if self.per_batch else _array(o) for o in out)


def _capsule(sample: Any) -> Any:
    """A sample (numpy or cupy) as a DLPack capsule."""
    return sample.__dlpack__() if hasattr(sample, "__dlpack__") else np.asarray(sample).__dlpack__()


class _Capsule:
    """A capsule offered to ``from_dlpack`` (which wants an object with ``__dlpack__``)."""

    def __init__(self, capsule: Any, device: tuple[int, int]):
        self.capsule, self.device = capsule, device

    def __dlpack__(self, **_: Any) -> Any:
        return self.capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.device


def _array(value: Any) -> Any:
    """A returned capsule as an array (cupy for a device capsule); arrays pass through."""
    if type(value).__name__ != "PyCapsule":
        return value
    try:
        return np.from_dlpack(_Capsule(value, (1, 0)))
    except (BufferError, RuntimeError, TypeError):
        import cupy

        return cupy.from_dlpack(_Capsule(value, (2, cupy.cuda.Device().id)))
