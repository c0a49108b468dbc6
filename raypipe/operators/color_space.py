"""``color_space_conversion``: uint8 images between RGB, BGR, GRAY and YCbCr, as DALI converts them.

Every conversion is one affine map per pixel (``out = M @ in + offset``, in float32, rounded to
nearest and saturated to uint8): GRAY is BT.601 luma ``0.299 R + 0.587 G + 0.114 B``; YCbCr is
BT.601 in studio range (Y in 16..235, Cb and Cr in 16..240 around 128, as JPEG's ``YCbCr`` in
DALI); GRAY becomes RGB or BGR by repeating the value and YCbCr as luma only (``Cb = Cr = 128``).
Input and output are channel-last (HWC, FHWC, DALI's layouts); the channel count follows the
colour space (1 for GRAY, else 3).
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, register
from ..types import DALIImageType
from .cast import saturate_cast

_OP = "color_space_conversion"
_RGB = DALIImageType.RGB
_BGR = DALIImageType.BGR
_GRAY = DALIImageType.GRAY
_YCBCR = DALIImageType.YCbCr

LUMA = np.array([[0.299, 0.587, 0.114]])
#: BT.601 studio-range YCbCr from RGB (0..255): rows Y, Cb, Cr, then the offsets.
RGB_TO_YCBCR = np.array([[65.481, 128.553, 24.966], [-37.797, -74.203, 112.0], [112.0, -93.786, -18.214]]) / 255.0
YCBCR_OFFSET = np.array([16.0, 128.0, 128.0])
_FLIP = np.eye(3)[::-1]


def _affine(source: DALIImageType, target: DALIImageType) -> tuple[np.ndarray, np.ndarray]:
    """The matrix (``(out_channels, in_channels)``) and offset of a conversion, in float64."""
    to_rgb = {_RGB: np.eye(3), _BGR: _FLIP}
    if source in to_rgb and target in to_rgb:
        return to_rgb[target] @ to_rgb[source], np.zeros(3)
    if source in to_rgb:
        rgb = to_rgb[source]
        if target is _GRAY:
            return LUMA @ rgb, np.zeros(1)
        return RGB_TO_YCBCR @ rgb, YCBCR_OFFSET
    if source is _GRAY:
        if target in to_rgb:
            return np.ones((3, 1)), np.zeros(3)
        return np.array([[219.0 / 255.0], [0.0], [0.0]]), YCBCR_OFFSET
    ycbcr_to_rgb = np.linalg.inv(RGB_TO_YCBCR)
    if target is _GRAY:  # the luma alone
        return np.array([[255.0 / 219.0, 0.0, 0.0]]), np.array([-16.0 * 255.0 / 219.0])
    matrix = to_rgb[target] @ ycbcr_to_rgb
    return matrix, -(matrix @ YCBCR_OFFSET)


def channels(image_type: DALIImageType) -> int:
    """The channel count of a colour space."""
    return 1 if image_type is _GRAY else 3


@register
class ColorSpaceConversion(Operator):
    """Convert uint8 channel-last images from ``image_type`` to ``output_type`` (``types.RGB``,
    ``types.BGR``, ``types.GRAY``, ``types.YCbCr``)."""

    schema = Schema(_OP, devices=("cpu", "gpu"))

    def configure(self, image_type: DALIImageType, output_type: DALIImageType) -> None:
        for name, value in (("image_type", image_type), ("output_type", output_type)):
            if not isinstance(value, DALIImageType):
                raise ArgumentError(f"{_OP}: {name} must be types.RGB, BGR, GRAY or YCbCr, got {value!r}")
        if image_type is output_type:
            raise ArgumentError(f"{_OP}: image_type and output_type are both {image_type.name}: nothing to convert")
        self.image_type, self.output_type = image_type, output_type
        matrix, offset = _affine(image_type, output_type)
        self.matrix, self.offset = matrix.astype(np.float32), offset.astype(np.float32)

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        layout = input_layouts[0] if input_layouts else ""
        if layout and not layout.endswith("C"):
            raise ArgumentError(f"{_OP}: expects channel-last images (HWC), got layout {layout!r}")
        return layout

    def _check(self, image: Any) -> None:
        if image.dtype != np.uint8:
            raise ValueError(f"{_OP}: takes uint8 images, got {image.dtype}")
        if image.ndim < 1 or image.shape[-1] != channels(self.image_type):
            raise ValueError(
                f"{_OP}: a {self.image_type.name} image has {channels(self.image_type)} channel(s), "
                f"got a sample of shape {tuple(image.shape)}"
            )

    def _convert(self, xp: ModuleType, data: Any) -> Any:
        pixels = data.reshape(-1, data.shape[-1]).astype(np.float32)
        converted = pixels @ xp.asarray(self.matrix.T)
        converted += xp.asarray(self.offset)
        return saturate_cast(xp, converted.reshape(*data.shape[:-1], len(self.offset)), np.dtype(np.uint8))

    def compute(self, xp: ModuleType, inputs, args, ctx) -> Any:
        self._check(inputs[0])
        return self._convert(xp, inputs[0])

    def run_batch(self, xp: ModuleType, inputs, args, ctxs) -> Any:
        """A batch held in one array in one matrix product; a list of samples one product each."""
        batch = inputs[0]
        if hasattr(batch, "ndim"):
            self._check(batch)
            return self._convert(xp, batch)
        return [self.compute(xp, [image], {}, ctx) for image, ctx in zip(batch, ctxs, strict=True)]
