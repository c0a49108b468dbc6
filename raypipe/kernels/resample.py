"""Batched antialiased bilinear resampling (``resize``, ``random_resized_crop``) as two launches.

The host path (:func:`raypipe.operators.resample.resample`) applies Pillow's triangle filter as
two separable passes; so do these kernels, each pass one launch over the whole batch, in the
order Pillow picks for each sample (:func:`vertical_first`) and with the same float32 weights
(taken from :func:`resample_weights`), the same uint8 rounding of the intermediate for uint8
images and the same final rounding (``floor(x + 0.5)``, saturated). They differ from the host
path only in the order of float32 accumulation.

Filter tables: per axis and sample, each output position reads ``taps`` consecutive source
values from ``starts[j]`` with ``weights[j * taps : (j + 1) * taps]``. A table is built once per
(input size, output size, window, antialias) and its device copy is kept in a bounded
least-recently-used cache (:data:`TABLES`), one copy per device and stream (so a copy is used,
and freed, in the order of the stream that uploaded it); each batch concatenates the tables it
uses on the device.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numba
import numpy as np
from numba import cuda

from ..operators.resample import Box, resample_weights, vertical_first
from .convert import round_half_up
from .launch import Packed, allocate, launch, store_rule, to_device

# Columns of a pass's per-sample parameter rows.
_SRC_OFF, _SRC_W, _DST_OFF, _DST_H, _DST_W, _CHANNELS, _AXIS, _CROSS, _TAP_BASE, _STARTS, _WEIGHTS, _TAPS = range(12)
_ROWS, _COLS = 0, 1  # the axis a pass resamples
TableKey = tuple[int, int, float, float, bool]


@dataclass(frozen=True)
class AxisTable:
    """The filter along one axis: output ``j`` is ``sum(weights[j * taps + k] * src[starts[j] + k])``.

    ``first`` and ``span`` bound the source indices any output reads (the host path slices
    ``[first, first + span)``), and every ``starts[j] + taps`` stays inside that range.
    """

    first: int
    span: int
    taps: int
    starts: np.ndarray
    weights: np.ndarray


@functools.lru_cache(maxsize=1024)
def axis_table(in_size: int, out_size: int, start: float, stop: float, antialias: bool) -> AxisTable:
    """The compact table of :func:`resample_weights` (same float32 weights) for one axis."""
    first, matrix = resample_weights(in_size, out_size, start, stop, antialias)
    span = matrix.shape[1]
    nonzero = matrix != 0
    rows_with_taps = nonzero.any(axis=1)
    low = np.where(rows_with_taps, nonzero.argmax(axis=1), 0)
    high = np.where(rows_with_taps, span - nonzero[:, ::-1].argmax(axis=1), 1)
    taps = int((high - low).max())
    begin = np.minimum(low, span - taps)
    starts = (first + begin).astype(np.int64)
    weights = np.ascontiguousarray(np.take_along_axis(matrix, begin[:, None] + np.arange(taps), axis=1)).reshape(-1)
    starts.flags.writeable = weights.flags.writeable = False  # shared through the cache
    return AxisTable(first=first, span=span, taps=taps, starts=starts, weights=weights)


class TableCache:
    """Device copies of axis tables keyed by (device, stream, table key), least recently used
    dropped first beyond ``capacity``; dropping a copy releases its device memory. Thread-safe."""

    def __init__(self, capacity: int = 512):
        self.capacity = capacity
        self._entries: OrderedDict[tuple, tuple[Any, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, xp: ModuleType, key: TableKey) -> tuple[AxisTable, Any, Any]:
        """``(table, device starts, device weights)`` for ``key`` (see :func:`axis_table`)."""
        table = axis_table(*key)
        device_key = (_placement(xp), key)
        with self._lock:
            entry = self._entries.get(device_key)
            if entry is not None:
                self._entries.move_to_end(device_key)
                return table, *entry
        entry = (to_device(xp, table.starts), to_device(xp, table.weights))
        with self._lock:
            self._entries[device_key] = entry
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)
        return table, *entry

    def holds(self, xp: ModuleType, key: TableKey) -> bool:
        """Whether the copy of ``key`` for ``xp``'s current device and stream is cached."""
        with self._lock:
            return (_placement(xp), key) in self._entries

    def clear(self) -> None:
        """Drop every device copy."""
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


TABLES = TableCache()


def _placement(xp: ModuleType) -> tuple[int, int] | None:
    """(device id, stream handle) on cupy; None on numpy."""
    return None if xp is np else (xp.cuda.get_device_id(), xp.cuda.get_current_stream().ptr)


@cuda.jit
def _resample_pass(src, dst, params, starts, weights, mode, lo, hi):
    """One separable pass over a batch of HWC samples: along rows (``_ROWS``, each output row a
    weighted sum of source rows) or columns. ``_CROSS`` shifts the other axis into the source and
    ``_TAP_BASE`` is where the source begins in the tables' index space."""
    sample = cuda.blockIdx.y
    src_off = params[sample, _SRC_OFF]
    row_pitch = params[sample, _SRC_W] * params[sample, _CHANNELS]
    dst_off = params[sample, _DST_OFF]
    dst_w = params[sample, _DST_W]
    channels = params[sample, _CHANNELS]
    axis = params[sample, _AXIS]
    cross = params[sample, _CROSS]
    tap_base = params[sample, _TAP_BASE]
    starts_off = params[sample, _STARTS]
    weights_off = params[sample, _WEIGHTS]
    taps = params[sample, _TAPS]
    total = params[sample, _DST_H] * dst_w * channels
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    while i < total:
        c = i % channels
        x = (i // channels) % dst_w
        y = i // (channels * dst_w)
        if axis == _COLS:
            pos = x
            base = src_off + (y + cross) * row_pitch + c
            step = channels
        else:
            pos = y
            base = src_off + (x + cross) * channels + c
            step = row_pitch
        tap = starts[starts_off + pos] - tap_base
        w = weights_off + pos * taps
        acc = numba.float32(0)
        for k in range(taps):
            acc += weights[w + k] * numba.float32(src[base + (tap + k) * step])
        dst[dst_off + i] = round_half_up(acc, mode, lo, hi)
        i += cuda.gridDim.x * cuda.blockDim.x


def resample_batch(
    xp: ModuleType,
    packed: Packed,
    sizes: Sequence[tuple[int, int]],
    boxes: Sequence[Box] | None = None,
    antialias: bool = True,
    dtype: np.dtype | None = None,
) -> Any:
    """Resize each HWC sample of ``packed`` (its ``boxes[i]`` = (x0, y0, x1, y1) region, default
    all of it) to ``sizes[i]`` = (width, height), as the host ``resample`` does, in two launches.

    Returns ``dtype`` (default: the input's) samples, one ``(N, H, W, C)`` array when every output
    shape agrees, else a list. ``dtype`` must have a :func:`store_rule`.
    """
    n = len(packed)
    out_dtype = np.dtype(dtype) if dtype is not None else packed.dtype
    rule = store_rule(out_dtype)
    if rule is None:
        raise ValueError(f"resample: kernels do not write {out_dtype}")
    pillow_rounding = packed.dtype == np.uint8 and out_dtype == np.uint8
    mid_dtype = np.dtype(np.uint8) if pillow_rounding else np.dtype(np.float32)
    plans, mid_shapes, out_shapes = [], [], []
    for i in range(n):
        in_h, in_w, channels = (int(v) for v in packed.shapes[i])
        width, height = (int(v) for v in sizes[i])
        x0, y0, x1, y1 = boxes[i] if boxes is not None else (0, 0, in_w, in_h)
        key_x = (in_w, width, float(x0), float(x1), bool(antialias))
        key_y = (in_h, height, float(y0), float(y1), bool(antialias))
        rows_first = vertical_first(in_w, in_h, width, height)
        span_x, span_y = axis_table(*key_x).span, axis_table(*key_y).span
        plans.append((key_x, key_y, rows_first, in_w, channels))
        mid_shapes.append((height, span_x, channels) if rows_first else (span_y, width, channels))
        out_shapes.append((height, width, channels))
    tables, starts, weights = _pack_tables(xp, [key for plan in plans for key in plan[:2]])
    mid, mid_offsets, _ = allocate(xp, mid_shapes, mid_dtype)
    out, out_offsets, batch = allocate(xp, out_shapes, out_dtype)
    params = np.zeros((2, n, 12), dtype=np.int64)
    for i, (key_x, key_y, rows_first, in_w, channels) in enumerate(plans):
        (tx, sx, wx), (ty, sy, wy) = tables[key_x], tables[key_y]
        (mid_h, mid_w, _), (height, width, _) = mid_shapes[i], out_shapes[i]
        src, mid_off, dst = packed.offsets[i], mid_offsets[i], out_offsets[i]
        if rows_first:
            params[0, i] = (src, in_w, mid_off, mid_h, mid_w, channels, _ROWS, tx.first, 0, sy, wy, ty.taps)
            params[1, i] = (mid_off, mid_w, dst, height, width, channels, _COLS, 0, tx.first, sx, wx, tx.taps)
        else:
            params[0, i] = (src, in_w, mid_off, mid_h, mid_w, channels, _COLS, ty.first, 0, sx, wx, tx.taps)
            params[1, i] = (mid_off, mid_w, dst, height, width, channels, _ROWS, 0, ty.first, sy, wy, ty.taps)
    device_params = to_device(xp, params)
    mid_max = max(int(np.prod(shape)) for shape in mid_shapes)
    out_max = max(int(np.prod(shape)) for shape in out_shapes)
    launch(xp, _resample_pass, n, mid_max, packed.data, mid, device_params[0], starts, weights, *store_rule(mid_dtype))
    launch(xp, _resample_pass, n, out_max, mid, out, device_params[1], starts, weights, *rule)
    return batch


def _pack_tables(xp: ModuleType, keys: list[TableKey]) -> tuple[dict, Any, Any]:
    """The batch's distinct tables concatenated on the device: ``({key: (table, starts offset,
    weights offset)}, starts, weights)``."""
    unique = list(dict.fromkeys(keys))
    entries = [TABLES.get(xp, key) for key in unique]
    tables, starts_off, weights_off = {}, 0, 0
    for key, (table, _, _) in zip(unique, entries, strict=True):
        tables[key] = (table, starts_off, weights_off)
        starts_off += table.starts.size
        weights_off += table.weights.size
    starts = xp.concatenate([entry[1] for entry in entries]) if len(entries) > 1 else entries[0][1]
    weights = xp.concatenate([entry[2] for entry in entries]) if len(entries) > 1 else entries[0][2]
    return tables, starts, weights
