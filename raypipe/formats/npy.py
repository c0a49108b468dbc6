"""NumPy ``.npy`` files: the header (shape, dtype, order, where the data begins) and reads of a
region of the array that touch only the bytes it needs.

A region is read with one ``preadv`` per slab: for the first ``k`` axes of the (C-ordered) data the
reader loops over the region's indices, and reads the region's extent of axis ``k`` with the whole
of every later axis in one call. ``k`` is chosen per read to balance calls against bytes read beyond
the region (:func:`read_plan`). A Fortran-ordered array is its transpose in C order: the region is
read on the reversed axes and transposed back.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

#: what one extra read call costs, in bytes read beyond the region (a few microseconds of I/O)
CALL_COST_BYTES = 32 * 1024


@dataclass(frozen=True)
class NpyHeader:
    """Where and how an ``.npy`` file holds its array."""

    shape: tuple[int, ...]
    dtype: np.dtype
    fortran_order: bool
    data_offset: int


def read_header(fd: int, path: str) -> NpyHeader:
    """The header of the open ``.npy`` file ``fd`` (ValueError naming ``path`` when it is not one)."""
    return _header(lambda size, at: os.pread(fd, size, at), repr(path))


def header_of(data: np.ndarray, where: str) -> NpyHeader:
    """The header of an ``.npy`` file held in memory as uint8 ``data`` (ValueError naming ``where``)."""
    view = memoryview(np.ascontiguousarray(data)).cast("B")
    return _header(lambda size, at: bytes(view[at : at + size]), where)


def _header(read, where: str) -> NpyHeader:
    """The header through ``read(size, offset)`` (bytes, fewer at the end)."""
    prefix = read(12, 0)
    if len(prefix) < 10 or prefix[:6] != b"\x93NUMPY":
        raise ValueError(f"{where} is not a .npy file (no NUMPY magic)")
    major = prefix[6]
    if major == 1:
        length, start = int.from_bytes(prefix[8:10], "little"), 10
    elif major in (2, 3) and len(prefix) == 12:
        length, start = int.from_bytes(prefix[8:12], "little"), 12
    else:
        raise ValueError(f"{where}: unsupported .npy format version {major}")
    text = read(length, start)
    if len(text) < length:
        raise ValueError(f"{where}: the .npy header is cut short")
    try:
        meta = _safe_eval(text.decode("utf-8" if major == 3 else "latin1"))
        dtype = np.lib.format.descr_to_dtype(meta["descr"])
        shape = tuple(int(s) for s in meta["shape"])
        fortran = bool(meta["fortran_order"])
    except (KeyError, TypeError, ValueError, SyntaxError) as exc:
        raise ValueError(f"{where}: cannot parse the .npy header: {exc}") from None
    if dtype.hasobject:
        raise ValueError(f"{where}: arrays of Python objects cannot be read")
    return NpyHeader(shape, dtype, fortran, start + length)


def _safe_eval(text: str) -> dict:
    import ast

    value = ast.literal_eval(text.strip())
    if not isinstance(value, dict):
        raise ValueError("the header is not a dict")
    return value


def read_plan(shape: tuple[int, ...], start: tuple[int, ...], stop: tuple[int, ...], itemsize: int) -> int:
    """How many leading axes to loop over when reading region ``[start, stop)`` of a C-ordered
    array: the ``k`` with the fewest calls times :data:`CALL_COST_BYTES` plus bytes read."""
    extents = [b - a for a, b in zip(start, stop)]
    best, best_cost = 0, math.inf
    for k in range(max(len(shape), 1)):
        calls = math.prod(extents[:k])
        read = calls * (extents[k] if shape else 1) * math.prod(shape[k + 1 :]) * itemsize
        cost = calls * CALL_COST_BYTES + read
        if cost < best_cost:
            best, best_cost = k, cost
    return best


def read_region(
    fd: int, header: NpyHeader, start: tuple[int, ...], stop: tuple[int, ...], path: str
) -> tuple[np.ndarray, int]:
    """Region ``[start, stop)`` (inside the array) of the open file as a new C-contiguous array in
    the file's logical axis order, and the bytes read for it."""
    if header.fortran_order:
        region, count = _read_c_region(fd, header, header.shape[::-1], start[::-1], stop[::-1], path)
        return np.ascontiguousarray(region.transpose()), count
    return _read_c_region(fd, header, header.shape, start, stop, path)


def _read_c_region(
    fd: int, header: NpyHeader, shape: tuple[int, ...], start: tuple[int, ...], stop: tuple[int, ...], path: str
) -> tuple[np.ndarray, int]:
    dtype = header.dtype
    extents = tuple(b - a for a, b in zip(start, stop))
    if math.prod(extents) == 0:
        return np.empty(extents, dtype), 0
    if not shape:  # a 0-d array: one element
        out = np.empty((), dtype)
        _pread_into(fd, out.reshape(-1).view(np.uint8), header.data_offset, path)
        return out, dtype.itemsize
    k = read_plan(shape, start, stop, dtype.itemsize)
    strides = [dtype.itemsize * math.prod(shape[i + 1 :]) for i in range(len(shape))]
    slab_shape = (extents[k], *shape[k + 1 :])
    slabs = np.empty((math.prod(extents[:k]), *slab_shape), dtype)
    as_bytes = slabs.reshape(len(slabs), -1).view(np.uint8)
    for n, outer in enumerate(np.ndindex(*extents[:k])):
        offset = header.data_offset + start[k] * strides[k]
        offset += sum((start[i] + j) * strides[i] for i, j in enumerate(outer))
        _pread_into(fd, as_bytes[n], offset, path)
    inner = tuple(slice(a, b) for a, b in zip(start[k + 1 :], stop[k + 1 :]))
    region = slabs[(slice(None), slice(None), *inner)].reshape(extents)
    return np.ascontiguousarray(region), as_bytes.size


def _pread_into(fd: int, buffer: np.ndarray, offset: int, path: str) -> None:
    """Fill ``buffer`` (uint8) from the file at ``offset``: ``preadv`` until full (short reads
    happen on network filesystems); ValueError naming ``path`` when the file ends first."""
    got = os.preadv(fd, [buffer], offset)
    while got < buffer.size:
        more = os.preadv(fd, [buffer[got:]], offset + got)
        if more == 0:
            raise ValueError(f"{path!r} ends {buffer.size - got} bytes before the array's data does")
        got += more
