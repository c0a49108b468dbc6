"""``crop_mirror_normalize`` as one fused kernel over a batch of HWC samples.

Each output element is computed once: crop window and horizontal mirror (per-sample anchors and
flags), ``(x - mean[c]) * inv_std[c] + shift`` in float32 with the operator's own float32
``mean`` and ``scale / std`` (the host path's operations in the host path's order), the
conversion to the output type (integers rounded to nearest, ties to even, and saturated, as
``saturate_cast``) and the output layout (CHW or HWC, channels zero-padded for ``pad_output``),
written straight into the preallocated batch.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numba
import numpy as np
from numba import cuda

from .convert import round_even
from .launch import Packed, allocate, launch, store_rule, to_device

# Columns of the per-sample parameter rows.
_SRC_OFF, _SRC_W, _CHANNELS, _Y0, _X0, _OUT_H, _OUT_W, _OUT_C, _MIRROR, _DST_OFF = range(10)


@cuda.jit
def _crop_mirror_normalize(src, dst, params, norm, num_coeffs, channels_first, mode, lo, hi):
    """``norm`` holds ``mean[num_coeffs]``, ``inv_std[num_coeffs]`` and ``shift``."""
    sample = cuda.blockIdx.y
    src_off = params[sample, _SRC_OFF]
    src_w = params[sample, _SRC_W]
    channels = params[sample, _CHANNELS]
    y0 = params[sample, _Y0]
    x0 = params[sample, _X0]
    out_h = params[sample, _OUT_H]
    out_w = params[sample, _OUT_W]
    out_c = params[sample, _OUT_C]
    mirror = params[sample, _MIRROR]
    dst_off = params[sample, _DST_OFF]
    shift = norm[2 * num_coeffs]
    total = out_h * out_w * out_c
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    while i < total:
        if channels_first:
            x = i % out_w
            y = (i // out_w) % out_h
            c = i // (out_w * out_h)
        else:
            c = i % out_c
            x = (i // out_c) % out_w
            y = i // (out_c * out_w)
        if c < channels:
            if mirror:
                x = out_w - 1 - x
            value = numba.float32(src[src_off + ((y0 + y) * src_w + x0 + x) * channels + c])
            value = (value - norm[c]) * norm[num_coeffs + c] + shift
            dst[dst_off + i] = round_even(value, mode, lo, hi)
        else:
            dst[dst_off + i] = 0
        i += cuda.gridDim.x * cuda.blockDim.x


def crop_mirror_normalize_batch(
    xp: ModuleType,
    packed: Packed,
    windows: np.ndarray,
    mirrored: np.ndarray,
    mean: np.ndarray,
    inv_std: np.ndarray,
    shift: float,
    dtype: np.dtype,
    channels_first: bool,
    pad_to: np.ndarray,
) -> Any:
    """Normalize each HWC sample's window ``(y0, x0, h, w)`` (rows of ``windows``), mirrored where
    ``mirrored[i]``, into ``dtype`` with ``pad_to[i]`` output channels (the extra ones zero), laid
    out CHW when ``channels_first`` else HWC; one launch, its parameters built for the whole batch.

    ``mean`` and ``inv_std`` are float32 with one value or one per channel. Returns one
    ``(N, ...)`` array when every output shape agrees, else a :class:`Packed` batch; ``dtype``
    must have a :func:`store_rule`.
    """
    n = len(packed)
    rule = store_rule(dtype)
    if rule is None:
        raise ValueError(f"crop_mirror_normalize: kernels do not write {np.dtype(dtype)}")
    windows = np.asarray(windows, dtype=np.int64).reshape(n, 4)
    pad_to = np.asarray(pad_to, dtype=np.int64).reshape(n)
    channels = packed.shapes[:, 2]
    num_coeffs = int(channels.max())
    norm = np.concatenate(
        [
            np.broadcast_to(np.asarray(mean, np.float32).reshape(-1), (num_coeffs,)),
            np.broadcast_to(np.asarray(inv_std, np.float32).reshape(-1), (num_coeffs,)),
            np.array([shift], np.float32),
        ]
    )
    heights, widths = windows[:, 2], windows[:, 3]
    out_shapes = np.stack([pad_to, heights, widths] if channels_first else [heights, widths, pad_to], axis=1)
    out, out_offsets, batch = allocate(xp, out_shapes, dtype)
    params = np.stack(
        [
            packed.offsets,
            packed.shapes[:, 1],
            channels,
            windows[:, 0],
            windows[:, 1],
            heights,
            widths,
            pad_to,
            np.asarray(mirrored, dtype=np.int64).reshape(n),
            out_offsets,
        ],
        axis=1,
    )
    launch(
        xp,
        _crop_mirror_normalize,
        n,
        int(np.prod(out_shapes, axis=1).max()),
        packed.data,
        out,
        to_device(xp, params),
        to_device(xp, norm),
        num_coeffs,
        bool(channels_first),
        *rule,
    )
    return batch
