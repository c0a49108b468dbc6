"""``numba_function``: a user's function compiled by Numba as an operator, as DALI's Numba plugin
(``nvidia.dali.plugin.numba``) has it.

``run_fn(out0, ..., in0, ...)`` fills the outputs in place; it is compiled with ``numba.njit``
(``nogil``, so the CPU stage's threads run it side by side), as DALI compiles it, so it must compile
in Numba's ``nopython`` mode. Per sample (``batch_processing=False``, the default) it gets one
sample's arrays; with ``batch_processing=True`` it is called once per batch with, per output and
input, a Numba typed list of the batch's arrays. Inputs are read-only.

Output shapes: without ``setup_fn`` output ``i`` has input ``i``'s shape; ``setup_fn(out_shapes,
in_shapes)`` sets them, once per batch: ``out_shapes[o][s]`` is sample ``s``'s int64 shape of output
``o`` (filled in place), ``in_shapes[i][s]`` that of input ``i``. It runs as Python here (DALI
compiles it too; any function Numba compiles runs as Python alike). The inputs' types and
dimensions must be ``in_types`` and ``ins_ndim``, as in DALI. Numba is needed
(``pip install 'raypipe[numba]'``).

With ``device="gpu"``, as in DALI, ``run_fn`` is a CUDA kernel (``numba.cuda.jit``) launched per
sample on ``blocks`` x ``threads_per_block`` (three positive extents each) with the sample's device
arrays, on the pipeline's CUDA stream; ``batch_processing`` is not available there, as in DALI. It
needs a GPU (or, for tests, numba's CUDA simulator with ``RAYPIPE_DEVICE=simulator``): where none is
usable the first sample fails saying so, since a CUDA kernel does not run on the host.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...backend import gpu_unavailable_reason, simulated
from ...errors import ArgumentError
from ...kernels.launch import Packed
from ...operator import Operator, Schema, register
from ...operators.cast import parse_dtype

OP = "numba_function"


def _numba() -> Any:
    """The ``numba`` module; ArgumentError saying how to install it when it is missing."""
    try:
        import numba
    except ImportError as exc:
        raise ArgumentError(
            f"{OP}: needs Numba to compile run_fn ({exc}); install it with pip install 'raypipe[numba]'"
        ) from None
    return numba


def _as_list(value: Any) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _ndims(name: str, value: Any) -> list[int]:
    ndims = _as_list(value)
    if any(isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0 for n in ndims):
        raise ArgumentError(f"{OP}: {name} must be a non-negative int or a list of them, got {value!r}")
    return [int(n) for n in ndims]


def _extents(name: str, value: Any) -> tuple[int, int, int]:
    """``blocks`` / ``threads_per_block``: three positive ints, as DALI checks them."""
    values = _as_list(value) if value is not None else []
    if len(values) != 3 or any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1 for v in values):
        raise ArgumentError(f"{OP}: {name} must be three positive ints with device='gpu', got {value!r}")
    return int(values[0]), int(values[1]), int(values[2])


@functools.lru_cache(maxsize=32)
def _compile(run_fn: Callable[..., None], cuda_kernel: bool) -> Any:
    """``run_fn`` as Numba compiles it, once per process for every operator of the same function (a
    pipeline built again, one per rank): a CUDA kernel, or a host function that releases the GIL."""
    numba = _numba()
    if cuda_kernel:
        from numba import cuda

        return cuda.jit(run_fn)
    return numba.njit(nogil=True)(run_fn)


def _read_only(array: np.ndarray) -> np.ndarray:
    """A C-contiguous read-only view of ``array``: every input has one Numba type, whatever its source."""
    view = np.ascontiguousarray(array).view()
    view.flags.writeable = False
    return view


@register
class NumbaFunction(Operator):
    """Run a Numba-compiled ``run_fn`` that fills its outputs from its inputs (see the module)."""

    schema = Schema(OP, devices=("cpu", "gpu"), min_inputs=1, max_inputs=6)

    def configure(
        self,
        run_fn: Callable[..., None],
        out_types: Any,
        in_types: Any,
        outs_ndim: Any,
        ins_ndim: Any,
        setup_fn: Callable[..., None] | None = None,
        batch_processing: bool = False,
        blocks: Sequence[int] | None = None,
        threads_per_block: Sequence[int] | None = None,
    ) -> None:
        if self.device == "gpu":
            self.launch = (_extents("blocks", blocks), _extents("threads_per_block", threads_per_block))
            if batch_processing:
                raise ArgumentError(f"{OP}: batch_processing is not supported with device='gpu', as in DALI")
        elif blocks is not None or threads_per_block is not None:
            raise ArgumentError(f"{OP}: blocks and threads_per_block are for device='gpu' only, as in DALI")
        _numba()
        if not callable(run_fn):
            raise ArgumentError(f"{OP}: run_fn must be a function, got {run_fn!r}")
        if setup_fn is not None and not callable(setup_fn):
            raise ArgumentError(f"{OP}: setup_fn must be a function, got {setup_fn!r}")
        if not isinstance(batch_processing, (bool, np.bool_)):
            raise ArgumentError(f"{OP}: batch_processing must be a bool, got {batch_processing!r}")
        self.out_types = [parse_dtype(OP, "out_types", t) for t in _as_list(out_types)]
        self.in_types = [parse_dtype(OP, "in_types", t) for t in _as_list(in_types)]
        self.outs_ndim = _ndims("outs_ndim", outs_ndim)
        self.ins_ndim = _ndims("ins_ndim", ins_ndim)
        if len(self.out_types) != len(self.outs_ndim) or len(self.in_types) != len(self.ins_ndim):
            raise ArgumentError(
                f"{OP}: give one type and one number of dimensions per output and per input, got "
                f"{len(self.out_types)} out_types, {len(self.outs_ndim)} outs_ndim, {len(self.in_types)} in_types "
                f"and {len(self.ins_ndim)} ins_ndim"
            )
        if setup_fn is None and (
            len(self.outs_ndim) > len(self.ins_ndim) or self.outs_ndim != self.ins_ndim[: len(self.outs_ndim)]
        ):
            raise ArgumentError(
                f"{OP}: without setup_fn output i takes input i's shape, so outs_ndim {self.outs_ndim} must begin "
                f"ins_ndim {self.ins_ndim}; give a setup_fn to set other shapes"
            )
        self.run_fn = run_fn
        self.setup_fn = setup_fn
        self.batch_processing = bool(batch_processing)
        self.preserve = True  # as in DALI: it runs though no output is used
        self._jitted: Any = None

    def bind_inputs(self, count, arg_inputs) -> None:
        if count != len(self.in_types):
            raise ArgumentError(f"{OP}: in_types and ins_ndim describe {len(self.in_types)} inputs, got {count}")

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the compiled function (compiled again where it runs)."""
        return {**self.__dict__, "_jitted": None}

    @property
    def num_outputs(self) -> int:
        return len(self.out_types)

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        return ""  # as DALI's: the outputs have no layout

    def output_layouts(self) -> list[str]:
        return [""] * len(self.out_types)

    def host_batch_step(self, arg_inputs) -> bool:
        """``setup_fn`` sees the whole batch's shapes and ``batch_processing`` gives ``run_fn`` the batch."""
        return self.setup_fn is not None or self.batch_processing

    def _compiled(self) -> Any:
        if self._jitted is None:
            self._jitted = _compile(self.run_fn, self.device == "gpu")
        return self._jitted

    def _checked(self, k: int, sample: Any, index: int) -> Any:
        """Input ``k`` of sample ``index`` after DALI's checks of its type and dimensions: on the host
        read-only, on the device contiguous."""
        if sample.dtype != self.in_types[k]:
            raise ValueError(
                f"{OP}: input {k} of sample {index} is {sample.dtype}, but in_types[{k}] is {self.in_types[k]}"
            )
        if sample.ndim != self.ins_ndim[k]:
            raise ValueError(
                f"{OP}: input {k} of sample {index} has {sample.ndim} dimensions, but ins_ndim[{k}] is "
                f"{self.ins_ndim[k]}"
            )
        if self.device == "gpu":
            return sample if sample.flags.c_contiguous else sample.copy()
        return _read_only(sample)

    def run_sample(self, inputs, args, ctx):
        if self.device == "gpu":
            raise ValueError(
                f"{OP}: device='gpu' runs run_fn as a CUDA kernel, and no GPU is usable here "
                f"({gpu_unavailable_reason() or 'the pipeline runs on the host'}); use device='cpu' with a run_fn "
                "written for numba.njit"
            )
        ins = [self._checked(k, np.asarray(x), ctx.sample_index) for k, x in enumerate(inputs)]
        outs = [np.empty(ins[k].shape, dtype) for k, dtype in enumerate(self.out_types)]
        self._compiled()(*outs, *ins)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def run_batch(self, xp, inputs, args, ctxs):
        if self.device == "gpu" and xp is np and not simulated():
            return self.run_sample(inputs, args, ctxs[0] if ctxs else None)  # says why it cannot run
        inputs = [i.samples() if isinstance(i, Packed) else i for i in inputs]
        host = self.device != "gpu"
        ins = [
            [self._checked(k, np.asarray(s) if host else s, i) for i, s in enumerate(batch)]
            for k, batch in enumerate(inputs)
        ]
        count = len(ctxs)
        shapes = self._shapes(ins, count)
        outs = [
            [xp.empty(tuple(shape.tolist()), dtype) for shape in shapes[k]] for k, dtype in enumerate(self.out_types)
        ]
        run = self._compiled()
        if not host:
            kernel = run[(self.launch[0], self.launch[1], *self._stream(xp))]
            for s in range(count):
                kernel(*[o[s] for o in outs], *[i[s] for i in ins])
        elif self.batch_processing:
            typed = _numba().typed.List
            run(*[typed(o) for o in outs], *[typed(i) for i in ins])
        else:
            for s in range(count):
                run(*[o[s] for o in outs], *[i[s] for i in ins])
        return outs[0] if len(outs) == 1 else tuple(outs)

    @staticmethod
    def _stream(xp: Any) -> tuple:
        """The launch's stream: the pipeline's current CUDA stream on a GPU (none in the simulator)."""
        if xp is np:
            return ()
        from numba import cuda

        return (cuda.external_stream(xp.cuda.get_current_stream().ptr),)

    def _shapes(self, ins: list[list[np.ndarray]], count: int) -> list[list[np.ndarray]]:
        """Every output's shape per sample: input ``i``'s for output ``i``, or as ``setup_fn`` sets them."""
        if self.setup_fn is None:
            return [[np.asarray(s.shape, np.int64) for s in ins[k]] for k in range(len(self.out_types))]
        out_shapes = [[np.zeros(n, np.int64) for _ in range(count)] for n in self.outs_ndim]
        in_shapes = [[np.asarray(s.shape, np.int64) for s in batch] for batch in ins]
        self.setup_fn(out_shapes, in_shapes)
        for k, shapes in enumerate(out_shapes):
            for s, shape in enumerate(shapes):
                if shape.shape != (self.outs_ndim[k],) or (shape < 0).any():
                    raise ValueError(
                        f"{OP}: setup_fn gave output {k} of sample {s} the shape {shape.tolist()}; it must be "
                        f"{self.outs_ndim[k]} non-negative extents"
                    )
        return out_shapes
