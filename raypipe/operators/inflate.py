"""``decoders.inflate``: samples stored LZ4-compressed, decompressed into tensors of a given shape
and type, as DALI's operator (DALI's deprecated name: ``experimental.inflate``).

Each input sample is a 1-D uint8 array holding one compressed chunk, or several (``chunk_offsets``
and/or ``chunk_sizes``: only offsets, each chunk ends where the next begins and the last at the
sample's end; only sizes, the chunks are packed from the sample's start). Every chunk inflates to
``shape`` of ``dtype``; several chunks are stacked along a new outer axis, named
``sequence_axis_name`` (``F``) in front of ``layout`` (a video's frames compressed one by one).
The chunks are LZ4 blocks (``lz4.block.compress(data, store_size=False)``, what DALI's nvCOMP
decoder reads), decompressed with the ``lz4`` package (``pip install 'raypipe[inflate]'``).
DALI decompresses on the GPU only; here ``cpu`` decompresses on the host and ``gpu`` does too,
then copies the result to the device. A chunk that is not a valid LZ4 block, or inflates to
another size than ``shape`` and ``dtype`` need, fails naming the chunk.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, register
from ..types import DALIDataType
from .axes import int_list, per_sample
from .cast import parse_dtype

_OP = "decoders.inflate"
_CHUNKS = ("chunk_offsets", "chunk_sizes")


def _lz4_block() -> ModuleType:
    """The ``lz4.block`` module, or an error saying how to install it."""
    try:
        import lz4.block
    except ImportError as error:
        raise ArgumentError(f"{_OP} needs the lz4 package: pip install 'raypipe[inflate]' ({error})") from None
    return lz4.block


@register
class Inflate(Operator):
    """Decompress LZ4 chunks into tensors of ``shape`` and ``dtype`` (several chunks of a sample
    stacked along a new outer axis)."""

    schema = Schema(_OP, devices=("cpu", "gpu"), arg_inputs=("shape", *_CHUNKS))

    def configure(
        self,
        shape: int | Sequence[int] | None = None,
        dtype: DALIDataType | np.dtype | str = DALIDataType.UINT8,
        chunk_offsets: Sequence[int] | None = None,
        chunk_sizes: Sequence[int] | None = None,
        algorithm: str = "LZ4",
        layout: str = "",
        sequence_axis_name: str = "F",
        check_output_size: bool = False,
    ) -> None:
        """``check_output_size`` (DALI's optional check that the outputs are large enough, which
        synchronises its stream) is validated and changes nothing: every chunk's size is checked."""
        if not isinstance(check_output_size, (bool, np.bool_)):
            raise ArgumentError(f"{_OP}: check_output_size must be a bool, got {check_output_size!r}")
        self.shape = _shape(shape) if shape is not None else None
        self.dtype = parse_dtype(_OP, "dtype", dtype)
        self.offsets = _non_negative("chunk_offsets", chunk_offsets) if chunk_offsets is not None else None
        self.sizes = _non_negative("chunk_sizes", chunk_sizes) if chunk_sizes is not None else None
        if not isinstance(algorithm, str) or algorithm.upper() != "LZ4":
            raise ArgumentError(f"{_OP}: algorithm must be 'LZ4' (the only one DALI has), got {algorithm!r}")
        if not isinstance(layout, str) or not isinstance(sequence_axis_name, str) or len(sequence_axis_name) != 1:
            raise ArgumentError(
                f"{_OP}: layout is a string and sequence_axis_name one letter, got {layout!r}, {sequence_axis_name!r}"
            )
        self.layout = layout
        self.sequence_axis = sequence_axis_name
        self.chunked = chunk_offsets is not None or chunk_sizes is not None
        _lz4_block()

    def bind_inputs(self, count: int, arg_inputs) -> None:
        if self.shape is None and "shape" not in arg_inputs:
            raise ArgumentError(f"{_OP}: shape is required (the shape of an inflated sample or chunk)")
        self.chunked = self.chunked or any(name in arg_inputs for name in _CHUNKS)

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        if self.layout and self.chunked and self.sequence_axis in self.layout:
            raise ArgumentError(
                f"{_OP}: sequence_axis_name {self.sequence_axis!r} is already in layout {self.layout!r}"
            )
        return self.sequence_axis + self.layout if self.layout and self.chunked else self.layout

    def compute(self, xp: ModuleType, inputs, args, ctx) -> Any:
        data = inputs[0]
        host = data.get() if hasattr(data, "get") else np.asarray(data)
        if host.dtype != np.uint8 or host.ndim != 1:
            raise ValueError(
                f"{_OP}: input samples must be 1-D uint8 (compressed bytes), got {host.dtype} {host.shape}"
            )
        shape = _shape(per_sample(args["shape"])) if "shape" in args else self.shape
        if self.layout and len(self.layout) != len(shape):
            raise ValueError(f"{_OP}: layout {self.layout!r} does not fit the shape {list(shape)}")
        offsets = _sample_list("chunk_offsets", args, self.offsets)
        sizes = _sample_list("chunk_sizes", args, self.sizes)
        nbytes = int(np.prod(shape, dtype=np.int64)) * self.dtype.itemsize
        chunks = [
            self._inflate(host[start:end], nbytes, k)
            for k, (start, end) in enumerate(_chunks(host.size, offsets, sizes))
        ]
        if not self.chunked:
            out = chunks[0].view(self.dtype).reshape(shape)
        else:
            out = (
                np.concatenate(chunks).view(self.dtype).reshape(len(chunks), *shape)
                if chunks
                else np.empty((0, *shape), self.dtype)
            )
        return xp.asarray(out)

    def _inflate(self, chunk: np.ndarray, nbytes: int, index: int) -> np.ndarray:
        """One chunk's bytes, which must inflate to exactly ``nbytes``."""
        try:
            raw = _lz4_block().decompress(chunk.tobytes(), uncompressed_size=nbytes)
        except Exception as error:  # lz4 raises LZ4BlockError, or ValueError for a bad size
            raise ValueError(f"{_OP}: chunk {index} is not an LZ4 block inflating to {nbytes} bytes: {error}") from None
        if len(raw) != nbytes:
            raise ValueError(f"{_OP}: chunk {index} inflates to {len(raw)} bytes, the shape and dtype need {nbytes}")
        return np.frombuffer(raw, np.uint8)


def _shape(value: Any) -> tuple[int, ...]:
    values = int_list(_OP, "shape", value)
    if any(v < 0 for v in values):
        raise ArgumentError(f"{_OP}: shape must not be negative, got {list(values)}")
    return values


def _non_negative(name: str, value: Any) -> tuple[int, ...]:
    values = int_list(_OP, name, value)
    if any(v < 0 for v in values):
        raise ArgumentError(f"{_OP}: {name} must not be negative, got {list(values)}")
    return values


def _sample_list(name: str, args: dict[str, Any], given: tuple[int, ...] | None) -> tuple[int, ...] | None:
    if name not in args:
        return given
    values = per_sample(args[name])
    return _non_negative(name, tuple(int(v) for v in values))


def _chunks(total: int, offsets: tuple[int, ...] | None, sizes: tuple[int, ...] | None) -> list[tuple[int, int]]:
    """Each chunk's ``(start, end)`` in a sample of ``total`` bytes, by DALI's rules."""
    if offsets is None and sizes is None:
        return [(0, total)]
    if offsets is not None and sizes is not None and len(offsets) != len(sizes):
        raise ValueError(
            f"{_OP}: {len(offsets)} chunk_offsets and {len(sizes)} chunk_sizes; give one of each per chunk"
        )
    if sizes is None:
        ends = [*offsets[1:], total]
    else:
        offsets = offsets if offsets is not None else tuple(np.cumsum((0, *sizes[:-1])).tolist())
        ends = [start + size for start, size in zip(offsets, sizes)]
    spans = list(zip(offsets, ends))
    for k, (start, end) in enumerate(spans):
        if not start <= end <= total:
            raise ValueError(f"{_OP}: chunk {k} spans bytes {start} to {end} of a sample of {total} bytes")
    return spans
