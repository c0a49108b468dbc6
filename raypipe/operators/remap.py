"""``experimental.remap``: each output pixel read from the input at the point two maps give,
``output(x, y) = input(mapx(x, y), mapy(x, y))``, as DALI's operator (NPP's ``remap``, checked in
DALI's own tests against OpenCV's ``remap`` with a constant border of 0).

The maps are float32, one value per output pixel (``HW``, or ``HWC`` with one channel), of the
image's height and width: the output has the input's shape. A sequence (``FHWC``) takes one pair
of maps for all its frames or one per frame (``FHW``). With ``pixel_origin="corner"`` (DALI's
default) a map value names a point measured from a pixel's corner, so the maps are moved by half a
pixel (in float32, as DALI moves them) to OpenCV's pixel-centre convention (``"center"``).
Nearest neighbour takes the pixel at the rounded point (ties to even); linear interpolates along x
then y in float32 and rounds to nearest for integer types; taps outside the image read 0. DALI runs
it on the GPU only; here ``cpu`` and ``gpu`` give the same values.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..kernels import launch
from ..operator import Operator, Schema, register
from ..types import DALIInterpType
from .pixel_sampling import Pixels, centre_origin, interpolation, sample

_OP = "experimental.remap"
_IMAGE_LAYOUTS = ("HW", "HWC", "FHWC")
_MAP_LAYOUTS = ("HW", "HWC", "FHW", "FHWC", "F**", "F***")
_TYPES = (np.uint8, np.int16, np.uint16, np.float32)
_HALF = np.float32(0.5)


@register
class Remap(Operator):
    """Remap HWC images (FHWC sequences frame by frame) through the float32 maps ``mapx`` and
    ``mapy`` (inputs 1 and 2)."""

    schema = Schema(_OP, devices=("cpu", "gpu"), min_inputs=3, max_inputs=3)

    def configure(self, interp: DALIInterpType = DALIInterpType.INTERP_LINEAR, pixel_origin: str = "corner") -> None:
        self.interp = interpolation(_OP, "interp", interp)
        self.corner = not centre_origin(_OP, pixel_origin)

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        layout, *maps = list(input_layouts) + ["", "", ""]
        if layout and layout not in _IMAGE_LAYOUTS:
            raise ArgumentError(f"{_OP}: expects HWC images or FHWC sequences (channels last), got layout {layout!r}")
        for i, given in enumerate(maps[:2], start=1):
            if given and given not in _MAP_LAYOUTS:
                raise ArgumentError(f"{_OP}: input {i} (a map) must be laid out as HW or FHW, got {given!r}")
        return layout

    def compute(self, xp: ModuleType, inputs, args, ctx) -> Any:
        image, *maps = inputs
        if image.dtype not in _TYPES:
            raise ValueError(f"{_OP}: takes uint8, int16, uint16 or float32 images, got {image.dtype}")
        if image.ndim not in (2, 3, 4):
            raise ValueError(f"{_OP}: expects HWC images or FHWC sequences, got shape {tuple(image.shape)}")
        frames = image.shape[0] if image.ndim == 4 else None
        size = image.shape[1:3] if frames is not None else image.shape[:2]
        mapx, mapy = (_map(xp, given, name, size, frames) for given, name in zip(maps, ("mapx", "mapy")))
        if mapx.shape != mapy.shape:
            raise ValueError(f"{_OP}: mapx is {tuple(mapx.shape)} and mapy {tuple(mapy.shape)}; they must match")
        if self.corner:
            mapx, mapy = mapx - _HALF, mapy - _HALF
        if frames is None:
            return _remap(xp, image, mapx, mapy, self.interp)
        if mapx.ndim == 2:  # one pair of maps for every frame: the frames remapped as one image's channels
            rows, cols, channels = image.shape[1:]
            stacked = xp.ascontiguousarray(image.transpose(1, 2, 0, 3)).reshape(rows, cols, frames * channels)
            out = _remap(xp, stacked, mapx, mapy, self.interp)
            return xp.ascontiguousarray(out.reshape(rows, cols, frames, channels).transpose(2, 0, 1, 3))
        return xp.stack([_remap(xp, frame, mx, my, self.interp) for frame, mx, my in zip(image, mapx, mapy)])

    def run_batch(self, xp: ModuleType, inputs, args, ctxs) -> Any:
        """Images of one shape (not sequences) with maps of their size, all read in one gather
        (a few array operations whatever the batch size); otherwise sample by sample."""
        images, mapx, mapy = (launch.stacked(xp, batch) for batch in inputs)
        if images is None or mapx is None or mapy is None or images.ndim not in (3, 4):
            return super().run_batch(xp, inputs, args, ctxs)
        mapx, mapy = (m[..., 0] if m.ndim == 4 and m.shape[-1] == 1 else m for m in (mapx, mapy))
        size = images.shape[:3]
        if (
            images.dtype not in _TYPES
            or mapx.shape != size
            or mapy.shape != size
            or {mapx.dtype, mapy.dtype} != {np.dtype(np.float32)}
        ):
            return super().run_batch(xp, inputs, args, ctxs)
        if self.corner:
            mapx, mapy = mapx - _HALF, mapy - _HALF
        return _remap(xp, images, mapx, mapy, self.interp, batched=True)


def _map(xp: ModuleType, given: Any, name: str, size: tuple[int, int], frames: int | None) -> Any:
    """A map as float32 ``(H, W)``, or ``(F, H, W)`` per frame of a sequence; an error naming the
    map where its type or shape does not fit the image."""
    if given.dtype != np.float32:
        raise ValueError(f"{_OP}: {name} must be float32, got {given.dtype}")
    shape = tuple(given.shape)
    if len(shape) in (3, 4) and shape[-1] == 1 and shape[:-1] in ((*size,), (frames, *size)):
        given, shape = given[..., 0], shape[:-1]
    if shape == tuple(size) or (frames is not None and shape == (frames, *size)):
        return xp.asarray(given)
    per_frame = f" or ({frames}, {size[0]}, {size[1]}) for each frame" if frames is not None else ""
    raise ValueError(
        f"{_OP}: {name} has shape {shape}; it must be the image's height and width ({size[0]}, {size[1]}){per_frame}"
    )


def _remap(xp: ModuleType, image: Any, mapx: Any, mapy: Any, interp: str, batched: bool = False) -> Any:
    """One HW or HWC image (``batched``: a batch of them in one array) read at the points of
    ``mapx``, ``mapy`` (pixel-centre origin, float32)."""
    planar = image.ndim == 2 + batched
    src = image[..., None] if planar else image
    pixels = Pixels(xp, src, "constant", np.zeros(src.shape[-1]))
    out = sample(xp, pixels, mapx, mapy, interp, src.dtype)
    return out[..., 0] if planar else out
