"""``warp_affine``: resample HWC images (and FHWC sequences, frame by frame) through a 2x3 affine
matrix, as DALI's operator.

With ``inverse_map=True`` (the default) the matrix maps output coordinates to input coordinates;
with ``False`` it maps input to output and is inverted. Coordinates are continuous, pixel centres at
``+0.5``: output pixel ``(x, y)`` samples the input at ``M @ (x + 0.5, y + 0.5, 1)``, bilinearly
(``INTERP_LINEAR``, the default) or at the pixel holding that point (``INTERP_NN``). Neighbours
outside the input take ``fill_value`` when it is given (so edges blend into it), else the nearest
border pixel. ``size`` (``[H, W]``) is the output size (the input's by default). The matrix is the
``matrix`` argument (six numbers, per sample as an argument input) or a second input of 2x3
samples. The result, computed in float32, is rounded (ties away from zero, DALI's host rounding)
and saturated to ``dtype`` (the input's type by default). The frames of a sequence, and in the GPU
stage a batch held in one array with the same matrix for every sample, are warped in one pass of
array operations.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, register
from ..torch_threads import optional_torch, single_threaded
from ..types import DALIInterpType
from .axes import float_list, per_sample
from .batch_args import stacked
from .cast import dtype_or_alias, parse_dtype, round_half_away, saturate_cast

_OP = "warp_affine"
_LAYOUTS = ("HWC", "FHWC")
_INTERPS = (DALIInterpType.INTERP_NN, DALIInterpType.INTERP_LINEAR)


def output_to_input(matrix: Sequence[float], inverse_map: bool) -> np.ndarray:
    """The 2x3 float64 matrix from output to input coordinates."""
    values = np.asarray(matrix, dtype=np.float64).reshape(-1)
    if values.size != 6:
        raise ValueError(f"{_OP}: matrix must hold 6 numbers (2x3), got {values.size}")
    affine = values.reshape(2, 3)
    if inverse_map:
        return affine
    full = np.vstack([affine, [0.0, 0.0, 1.0]])
    try:
        return np.linalg.inv(full)[:2]
    except np.linalg.LinAlgError:
        raise ValueError(f"{_OP}: matrix {values.tolist()} cannot be inverted (inverse_map=False)") from None


def warp(
    xp: ModuleType, image: Any, matrix: np.ndarray, height: int, width: int, fill: np.ndarray | None, linear: bool
) -> Any:
    """``image`` (HWC, or several of them as one NHWC array) sampled at ``matrix`` (output to input)
    of each output pixel centre: float32. ``matrix`` is one 2x3 matrix, or, for an NHWC batch, one
    per image (N x 2 x 3): the same arithmetic, each image at its own positions."""
    in_h, in_w = image.shape[-3:-1]
    m = matrix.astype(np.float32)
    each = m.ndim == 3
    if each:
        m = xp.asarray(m)[:, :, :, None, None]  # each coefficient broadcast over its image's pixels

    def coefficient(row: int, col: int) -> Any:
        return m[:, row, col] if each else m[row, col]

    xs = xp.arange(width, dtype=np.float32)[None, :] + np.float32(0.5)
    ys = xp.arange(height, dtype=np.float32)[:, None] + np.float32(0.5)
    sx = coefficient(0, 0) * xs + coefficient(0, 1) * ys + coefficient(0, 2)
    sy = coefficient(1, 0) * xs + coefficient(1, 1) * ys + coefficient(1, 2)
    pixels = image.astype(np.float32)
    which = xp.arange(image.shape[0])[:, None, None] if each else Ellipsis

    def fetch(xi: Any, yi: Any) -> Any:
        values = pixels[which, xp.clip(yi, 0, in_h - 1), xp.clip(xi, 0, in_w - 1), :]
        if fill is None:
            return values
        inside = (xi >= 0) & (xi < in_w) & (yi >= 0) & (yi < in_h)
        return xp.where(inside[..., None], values, xp.asarray(fill))

    if not linear:
        return fetch(xp.floor(sx).astype(np.int64), xp.floor(sy).astype(np.int64))
    sx, sy = sx - np.float32(0.5), sy - np.float32(0.5)
    x0, y0 = xp.floor(sx), xp.floor(sy)
    fx, fy = (sx - x0)[..., None], (sy - y0)[..., None]
    x0, y0 = x0.astype(np.int64), y0.astype(np.int64)
    top = fetch(x0, y0) * (1 - fx) + fetch(x0 + 1, y0) * fx
    bottom = fetch(x0, y0 + 1) * (1 - fx) + fetch(x0 + 1, y0 + 1) * fx
    return top * (1 - fy) + bottom * fy


@cache
def host_torch() -> Any | None:
    """torch for host warps where installed, unless ``RAYPIPE_HOST_WARP=numpy``."""
    torch = optional_torch("RAYPIPE_HOST_WARP", "numpy")
    if torch is not None:
        import torch.nn.functional  # noqa: F401
    return torch


def torch_warp(torch: Any, image: np.ndarray, matrix: np.ndarray, height: int, width: int, fill: Any) -> np.ndarray:
    """:func:`warp` (bilinear, float32) of one HWC image with torch's ``grid_sample``: the same sampling
    positions, given as normalised coordinates (``align_corners=False`` puts pixel centres at
    ``+0.5``, as here). Out-of-bounds neighbours weigh zero, so warping ``image - fill`` and adding
    ``fill`` back blends edges into the fill value; without one, ``border`` padding clamps the
    position, which reads the nearest border pixel as clamping each neighbour does."""
    single_threaded(torch)
    in_h, in_w = image.shape[:2]
    m = matrix.astype(np.float32)
    xs = np.arange(width, dtype=np.float32)[None, :] + np.float32(0.5)
    ys = np.arange(height, dtype=np.float32)[:, None] + np.float32(0.5)
    grid = np.empty((1, height, width, 2), np.float32)
    grid[0, :, :, 0] = (m[0, 0] * xs + m[0, 1] * ys + m[0, 2]) * np.float32(2 / in_w) - np.float32(1)
    grid[0, :, :, 1] = (m[1, 0] * xs + m[1, 1] * ys + m[1, 2]) * np.float32(2 / in_h) - np.float32(1)
    pixels = image.astype(np.float32)
    if fill is not None:
        pixels -= fill
    source = torch.from_numpy(pixels.transpose(2, 0, 1)[None])
    padding = "border" if fill is None else "zeros"
    out = torch.nn.functional.grid_sample(
        source, torch.from_numpy(grid), mode="bilinear", padding_mode=padding, align_corners=False
    )
    warped = out[0].permute(1, 2, 0).numpy()
    if fill is not None:
        warped += fill
    return warped


@register
class WarpAffine(Operator):
    """Warp HWC images (FHWC sequences frame by frame) through a 2x3 affine ``matrix`` (an argument,
    a per-sample argument input, or a second input)."""

    schema = Schema(_OP, devices=("cpu", "gpu"), min_inputs=1, max_inputs=2, arg_inputs=("matrix", "size"))
    per_frame_args = frozenset({"matrix"})
    per_frame_inputs = frozenset({1})

    def configure(
        self,
        matrix: Sequence[float] = (),
        size: Sequence[float] = (),
        inverse_map: bool = True,
        fill_value: float | Sequence[float] | None = None,
        interp_type: DALIInterpType = DALIInterpType.INTERP_LINEAR,
        dtype=None,
        output_dtype=None,
    ) -> None:
        """``output_dtype`` is DALI's deprecated alias of ``dtype``."""
        dtype = dtype_or_alias(_OP, dtype, output_dtype)
        self.matrix = float_list(_OP, "matrix", list(matrix)) if len(matrix) else None
        if self.matrix is not None and len(self.matrix) != 6:
            raise ArgumentError(f"{_OP}: matrix must hold 6 numbers (2x3), got {len(self.matrix)}")
        self.size = float_list(_OP, "size", list(size)) if len(size) else None
        if self.size is not None and len(self.size) != 2:
            raise ArgumentError(f"{_OP}: size is [H, W] for 2-D images, got {list(size)}")
        self.inverse_map = bool(inverse_map)
        self.fill = None if fill_value is None else np.asarray(float_list(_OP, "fill_value", fill_value), np.float32)
        if interp_type not in _INTERPS:
            raise ArgumentError(f"{_OP}: interp_type must be INTERP_NN or INTERP_LINEAR here, got {interp_type!r}")
        self.linear = interp_type is DALIInterpType.INTERP_LINEAR
        self.dtype = None if dtype is None else parse_dtype(_OP, "dtype", dtype)

    def preload(self) -> None:
        host_torch()

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        layout = input_layouts[0] if input_layouts else ""
        if layout and layout not in _LAYOUTS:
            raise ArgumentError(f"{_OP}: expects HWC images or FHWC sequences, got layout {layout!r}")
        return layout

    def compute(self, xp: ModuleType, inputs, args, ctx) -> Any:
        return self._warp(xp, inputs[0], *self._affine_and_size(inputs, args))

    def run_sample(self, inputs, args, ctx):
        """On the host, a bilinear warp of an HWC image goes through torch's ``grid_sample`` where
        torch is installed (about a tenth of the array path's time); the rest takes the array path."""
        image = inputs[0]
        torch = host_torch()
        if torch is None or not self.linear or image.ndim != 3 or image.dtype.kind not in "uif":
            return self.compute(np, inputs, args, ctx)
        affine, size = self._affine_and_size(inputs, args)
        height, width = (int(round(v)) for v in size) if size else image.shape[:2]
        warped = torch_warp(torch, image, affine, height, width, self.fill)
        dtype = image.dtype if self.dtype is None else self.dtype
        if dtype.kind in "iu":
            warped = round_half_away(np, warped)
        return saturate_cast(np, warped, dtype, overwrite=True)

    def _affine_and_size(self, inputs, args) -> tuple[np.ndarray, Sequence[float] | None]:
        """The output-to-input matrix and the output size of one sample."""
        image = inputs[0]
        if len(inputs) > 1:
            matrix = np.asarray(inputs[1].get() if hasattr(inputs[1], "get") else inputs[1])
        elif "matrix" in args:
            matrix = np.asarray(per_sample(args["matrix"]))
        elif self.matrix is not None:
            matrix = np.asarray(self.matrix)
        else:
            raise ArgumentError(f"{_OP}: give matrix (an argument or argument input) or a second input")
        affine = output_to_input(matrix, self.inverse_map)
        if image.ndim not in (3, 4):
            raise ValueError(f"{_OP}: expects HWC images or FHWC sequences, got shape {tuple(image.shape)}")
        return affine, per_sample(args["size"]) if "size" in args else self.size

    def _warp(self, xp: ModuleType, images: Any, affine: np.ndarray, size: Sequence[float] | None) -> Any:
        """``images`` (HWC, or a stack of them: FHWC frames or a batch) warped alike, or each image of
        a batch by its own matrix where ``affine`` holds one per image."""
        height, width = (int(round(s)) for s in size) if size else images.shape[-3:-1]
        warped = warp(xp, images, affine, height, width, self.fill, self.linear)
        dtype = images.dtype if self.dtype is None else self.dtype
        if dtype.kind in "iu":
            warped = round_half_away(xp, warped)
        return saturate_cast(xp, warped, dtype, overwrite=True)

    def run_batch(self, xp: ModuleType, inputs, args, ctxs) -> Any:
        """HWC images of one size, warped in one pass of array operations: by the ``matrix`` and
        ``size`` arguments, or by a ``matrix`` per sample (an argument input: the shears and
        translations of the automatic augmentations); otherwise sample by sample."""
        batch = inputs[0]
        if len(inputs) == 1 and not args and self.matrix is not None and hasattr(batch, "ndim") and batch.ndim == 4:
            return self._warp(xp, batch, output_to_input(self.matrix, self.inverse_map), self.size)
        images = stacked(xp, batch) if len(inputs) == 1 and set(args) == {"matrix"} else None
        if images is not None and images.ndim == 4:
            matrices = np.stack([output_to_input(per_sample(m), self.inverse_map) for m in args["matrix"]])
            return self._warp(xp, images, matrices, self.size)
        return super().run_batch(xp, inputs, args, ctxs)
