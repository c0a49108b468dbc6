"""``python_function``: run a user's Python function as an operator."""

from __future__ import annotations

from collections.abc import Callable

from ..errors import ArgumentError
from ..kernels.launch import Packed
from ..operator import Operator, Schema, register


@register
class PythonFunction(Operator):
    """Apply ``function`` to each sample (cpu) or to each batch's list of samples (gpu).

    On the CPU the function receives one sample's arrays; on the GPU, per input, the
    batch's samples as a sequence (a list, or one array holding the batch; numpy or
    cupy). It must be thread-safe and deterministic.
    """

    schema = Schema("python_function", devices=("cpu", "gpu"), min_inputs=0, max_inputs=8)
    batch_semantics = True  # on the GPU the function gets the batch: never run it per sample there

    def configure(self, function: Callable, num_outputs: int = 1) -> None:
        if not callable(function):
            raise ArgumentError(f"python_function: function must be callable, got {function!r}")
        if num_outputs != 1:
            raise ArgumentError("python_function: only num_outputs=1 is supported")
        self.function = function

    def run_sample(self, inputs, args, ctx):
        return self.function(*inputs)

    def run_batch(self, xp, inputs, args, ctxs):
        inputs = [i.samples() if isinstance(i, Packed) else i for i in inputs]  # the function gets samples
        out = self.function(*inputs)
        if len(out) != len(ctxs):
            raise ValueError(f"python_function returned {len(out)} samples for a batch of {len(ctxs)}")
        return list(out)
