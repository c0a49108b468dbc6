"""``decoders.numpy``: arrays from ``.npy`` files held as bytes (an ``.npy`` inside a tar, a
record or a bucket, read by another reader), as DALI's.

Each sample is a 1-D uint8 array of a whole ``.npy`` file; the output is its array, C-ordered, in
its own type or, with ``dtype``, converted as DALI converts (rounded half away from zero and
saturated). The header is read by :func:`raypipe.formats.npy.header_of`, the reader's own parser.
Beyond DALI 2.4: Fortran-ordered arrays decode (DALI's CPU operator fails on them), format versions
2 and 3 are read, and big-endian arrays come out in the machine's byte order (DALI refuses both);
samples of different types or ranks in one batch are not refused here, where DALI refuses them.
"""

from __future__ import annotations

import math

import numpy as np

from ..formats.npy import header_of
from ..operator import Operator, Schema, register
from .cast import parse_dtype
from .fill import converted

OP = "decoders.numpy"


@register
class NumpyDecoder(Operator):
    """Each sample's ``.npy`` bytes decoded to its array."""

    schema = Schema(OP, devices=("cpu",))

    def configure(self, dtype=None) -> None:
        self.dtype = None if dtype is None else parse_dtype(OP, "dtype", dtype)

    def output_layout(self, input_layouts) -> str:
        return ""

    def compute(self, xp, inputs, args, ctx):
        data = np.asarray(inputs[0])
        if data.ndim != 1 or data.dtype != np.uint8:
            raise ValueError(
                f"{OP}: needs the bytes of an .npy file (1-D uint8), got {data.dtype} of shape {data.shape}"
            )
        header = header_of(data, OP)
        count = math.prod(header.shape)
        end = header.data_offset + count * header.dtype.itemsize
        if len(data) < end:
            raise ValueError(f"{OP}: the array is cut short: {len(data)} bytes where its header needs {end}")
        flat = np.frombuffer(data, header.dtype, count=count, offset=header.data_offset)
        array = flat.reshape(header.shape[::-1]).T if header.fortran_order else flat.reshape(header.shape)
        array = np.array(array, dtype=header.dtype.newbyteorder("="), order="C")  # its own memory
        return array if self.dtype is None else converted(np, array, self.dtype)
