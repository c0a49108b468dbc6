"""``readers.numpy``: arrays from ``.npy`` files, whole or a region of interest, as DALI's reader.

Files come from ``file_root`` (its files, then those of each sub-folder, filtered by
``file_filter`` on the name), ``file_list`` (one path a line, relative to ``file_root`` or else
to the list's folder) or ``files`` (relative to ``file_root`` when given). The region is given
per axis of ``roi_axes`` (all axes by default) by ``roi_start``/``rel_roi_start`` with
``roi_end``/``rel_roi_end`` or ``roi_shape``/``rel_roi_shape``, static or per sample (argument
inputs); coordinates are computed in float32 and rounded half away from zero, the end from start
plus extent, as DALI and ``slice`` do. A region reaching outside the array is an error
(``out_of_bounds_policy="error"``), cut to the array (``"trim_to_shape"``) or filled with
``fill_value`` (``"pad"``). Only the region's bytes (and at most whole rows around it) are read
(:mod:`raypipe.formats.npy`). Outputs have the file's dtype and shape order (Fortran-ordered files
too) and no layout, as in DALI.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ArgumentError, ReaderError
from ..formats.npy import read_header, read_region
from ..operator import Schema, Skip, register
from .axes import float_list, int_list, per_sample
from .file_listing import FilteredFilesReader
from .slice import round_half_away

ROI_ARGS = ("roi_start", "rel_roi_start", "roi_end", "rel_roi_end", "roi_shape", "rel_roi_shape")
POLICIES = ("error", "trim_to_shape", "pad")


def roi_window(
    shape: tuple[int, ...], axes: tuple[int, ...] | None, named: dict[str, tuple[float, ...] | None]
) -> tuple[list[int], list[int]] | None:
    """The region's ``(start, stop)`` on every axis of an array of ``shape`` (may reach outside
    it), or None when no region is given."""
    if all(v is None for v in named.values()):
        return None
    axes = tuple(range(len(shape))) if axes is None else axes
    for name, values in named.items():
        if values is not None and len(values) != len(axes):
            raise ValueError(f"readers.numpy: {name} gives {len(values)} coordinates for {len(axes)} axes")
    start, stop = [0] * len(shape), list(shape)
    for k, axis in enumerate(axes):
        if not 0 <= axis < len(shape):
            raise ValueError(f"readers.numpy: roi_axes {axis} is out of range for {len(shape)}-D arrays")
        size = np.float32(shape[axis])
        a = _coordinate(named, "start", k, size, np.float32(0))
        if named["roi_shape"] is not None or named["rel_roi_shape"] is not None:
            b = a + _coordinate(named, "shape", k, size, np.float32(0))
        else:
            b = _coordinate(named, "end", k, size, size)
        start[axis], stop[axis] = round_half_away(float(a)), round_half_away(float(b))
        if stop[axis] < start[axis]:
            raise ValueError(f"readers.numpy: the region's end {stop[axis]} on axis {axis} is before its start")
    return start, stop


def _coordinate(named: dict, name: str, k: int, size: np.float32, default: np.float32) -> np.float32:
    if named[f"roi_{name}"] is not None:
        return np.float32(named[f"roi_{name}"][k])
    if named[f"rel_roi_{name}"] is not None:
        return np.float32(named[f"rel_roi_{name}"][k]) * size
    return default


def _check_roi_args(given: set[str]) -> None:
    if {"roi_start", "rel_roi_start"} <= given:
        raise ArgumentError("readers.numpy: roi_start and rel_roi_start are mutually exclusive")
    ends = sorted(given & {"roi_end", "rel_roi_end", "roi_shape", "rel_roi_shape"})
    if len(ends) > 1:
        raise ArgumentError(f"readers.numpy: only one of roi_end, rel_roi_end, roi_shape, rel_roi_shape: {ends}")


@register
class NumpyReader(FilteredFilesReader):
    """Reads ``.npy`` arrays (a region of each with the ROI arguments); one output, no layout."""

    schema = Schema(
        "readers.numpy", devices=("cpu", "gpu"), min_inputs=0, max_inputs=0, arg_inputs=ROI_ARGS, is_reader=True
    )
    SHUFFLES_LISTING = True

    def configure(
        self,
        file_root: str | None = None,
        file_filter: str = "*.npy",
        file_list: str | None = None,
        files: str | Sequence[str] | None = None,
        roi_start=None,
        rel_roi_start=None,
        roi_end=None,
        rel_roi_end=None,
        roi_shape=None,
        rel_roi_shape=None,
        roi_axes=None,
        out_of_bounds_policy: str = "error",
        fill_value: float = 0.0,
        cache_header_information: bool = False,
        register_buffers: bool = True,
        **reader_args: Any,
    ) -> None:
        """``cache_header_information`` and ``register_buffers`` (GPU-direct buffers) are DALI hints
        accepted and unneeded: headers are read with each region, in the same call's page cache."""
        self.configure_files(file_root, file_filter, file_list, files)
        self.configure_reader(**reader_args)
        given = {"roi_start": roi_start, "rel_roi_start": rel_roi_start, "roi_end": roi_end}
        given |= {"rel_roi_end": rel_roi_end, "roi_shape": roi_shape, "rel_roi_shape": rel_roi_shape}
        self.roi = {
            name: None if value is None else float_list("readers.numpy", name, value) for name, value in given.items()
        }
        _check_roi_args({k for k, v in self.roi.items() if v is not None})
        self.roi_axes = None if roi_axes is None else int_list("readers.numpy", "roi_axes", roi_axes)
        if out_of_bounds_policy not in POLICIES:
            raise ArgumentError(
                f"readers.numpy: out_of_bounds_policy must be one of {POLICIES}, got {out_of_bounds_policy!r}"
            )
        self.policy = out_of_bounds_policy
        self.fill_value = float(fill_value)
        self._stats = {"files_read": 0, "bytes_read": 0, "bytes_in_files": 0}
        self._stats_lock = threading.Lock()

    def io_stats(self) -> dict[str, int]:
        """Files read, the bytes read from them, and the bytes their arrays hold (a region read
        reads less than that)."""
        with self._stats_lock:
            return dict(self._stats)

    def read(self, index: int, roi: dict[str, tuple[float, ...] | None] | None = None) -> tuple[np.ndarray]:
        """Random access: sample ``index``'s array, or its region for ``roi`` (the static ROI
        arguments by default)."""
        if not 0 <= index < len(self.paths):
            raise IndexError(f"readers.numpy: sample index {index} outside [0, {len(self.paths)})")
        path = self.paths[index]
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as exc:
            raise ReaderError(f"readers.numpy: cannot open {path!r}: {exc.strerror or exc}") from None
        try:
            header = read_header(fd, path)
            window = roi_window(header.shape, self.roi_axes, self.roi if roi is None else roi)
            start, stop = window if window is not None else ([0] * len(header.shape), list(header.shape))
            out, count = self._read_window(fd, header, start, stop, path)
        except OSError as exc:
            raise ReaderError(f"readers.numpy: cannot read {path!r}: {exc.strerror or exc}") from None
        except ValueError as exc:
            message = str(exc)
            raise ReaderError(f"readers.numpy: {message if path in message else f'{path!r}: {message}'}") from None
        finally:
            os.close(fd)
        with self._stats_lock:
            self._stats["files_read"] += 1
            self._stats["bytes_read"] += count
            self._stats["bytes_in_files"] += int(np.prod(header.shape)) * header.dtype.itemsize
        return (out,)

    def _read_window(self, fd: int, header, start: list[int], stop: list[int], path: str) -> tuple[np.ndarray, int]:
        shape = header.shape
        if all(a >= 0 and b <= n for a, b, n in zip(start, stop, shape)):
            return read_region(fd, header, tuple(start), tuple(stop), path)
        if self.policy == "error":
            raise ValueError(
                f"the region from {start} to {stop} is outside the array's shape {list(shape)} "
                "(out_of_bounds_policy='error'; 'pad' or 'trim_to_shape' allow it)"
            )
        lo = [max(0, min(a, n)) for a, n in zip(start, shape)]
        hi = [max(low, min(b, n)) for low, b, n in zip(lo, stop, shape)]
        region, count = read_region(fd, header, tuple(lo), tuple(hi), path)
        if self.policy == "trim_to_shape":
            return region, count
        out = np.full([b - a for a, b in zip(start, stop)], self.fill_value, dtype=header.dtype)
        out[tuple(slice(a - s, b - s) for a, b, s in zip(lo, hi, start))] = region
        return out, count

    def _sample_roi(self, args: dict[str, Any]) -> dict[str, tuple[float, ...] | None] | None:
        """The ROI of one sample: its argument inputs over the static arguments."""
        if not args:
            return None
        roi = {name: (per_sample(args[name]) if name in args else value) for name, value in self.roi.items()}
        _check_roi_args({k for k, v in roi.items() if v is not None})
        return roi

    def run_sample(self, inputs, args, ctx):
        try:
            return self.read(ctx.sample_index, self._sample_roi(args))[0]
        except ReaderError as exc:
            if self.on_error == "skip":
                return Skip(str(exc))
            raise

    def run_chunk(self, inputs, args, ctxs):
        """The chunk's arrays (a read that fails raises; the CPU stage then reads sample by sample)."""
        return [
            self.read(ctx.sample_index, self._sample_roi({k: v[i] for k, v in args.items()}))[0]
            for i, ctx in enumerate(ctxs)
        ]
