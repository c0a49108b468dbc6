"""``peek_image_shape``: an encoded image's ``[height, width, channels]`` from its header alone.

JPEGs are read by a marker walk (:mod:`raypipe.jpeg_header`), other formats by Pillow's header
parsing; no pixel is decoded. The channels are those of ``image_type`` (3 for RGB and BGR, 1 for
GRAY), as DALI reports them. Like raypipe's decoders, which decode images as stored, the shape is
the stored one unless ``adjust_orientation=True`` asks for DALI's reading of the EXIF orientation
(orientations 5 to 8 swap height and width); left out, the first EXIF-rotated image warns.
"""

from __future__ import annotations

import threading
import warnings

import numpy as np

from ..errors import ArgumentError, DecodeError
from ..exif import ExifOrientationWarning, tiff_orientation
from ..jpeg_header import JpegHeaderError, read_frame
from ..operator import Operator, Schema, register
from ..types import INT64, DALIDataType, DALIImageType
from .cast import parse_dtype
from .host_decode import open_source

#: EXIF orientations that turn the image a quarter (height and width swap).
_TRANSPOSED = frozenset({5, 6, 7, 8})


def header_shape(data: np.ndarray, image_type: DALIImageType) -> tuple[int, int, int, int]:
    """``(height, width, channels, orientation)`` of the encoded image ``data``, from its header."""
    try:
        frame = read_frame(data)
    except JpegHeaderError as exc:
        raise DecodeError(str(exc)) from None
    if frame is None:
        source = open_source(data, DALIImageType.GRAY)  # Pillow reads the header only
        width, height, exif = source.width, source.height, None
    else:
        width, height, exif = frame
    channels = 1 if image_type is DALIImageType.GRAY else 3
    return height, width, channels, 1 if exif is None else tiff_orientation(exif)


@register
class PeekImageShape(Operator):
    """The shape ``[H, W, C]`` of each encoded image, as ``dtype`` (default INT64)."""

    schema = Schema("peek_image_shape", devices=("cpu",))

    def configure(
        self,
        dtype: DALIDataType | np.dtype | str = INT64,
        adjust_orientation: bool | None = None,
        image_type: DALIImageType = DALIImageType.RGB,
    ) -> None:
        self.dtype = parse_dtype(self.schema.name, "dtype", dtype)
        if adjust_orientation is not None and not isinstance(adjust_orientation, (bool, np.bool_)):
            raise ArgumentError(f"peek_image_shape: adjust_orientation must be a bool, got {adjust_orientation!r}")
        self.adjust_orientation = adjust_orientation
        if not isinstance(image_type, DALIImageType):
            raise ArgumentError(f"peek_image_shape: image_type must be types.RGB, BGR or GRAY, got {image_type!r}")
        self.image_type = image_type
        self._warn_lock = threading.Lock()
        self._watch = adjust_orientation is None

    def output_layout(self, input_layouts):
        return ""

    def run_sample(self, inputs, args, ctx) -> np.ndarray:
        height, width, channels, orientation = header_shape(inputs[0], self.image_type)
        if orientation in _TRANSPOSED:
            if self.adjust_orientation:
                height, width = width, height
            elif self._watch:
                self._warn(orientation, ctx)
        return np.array([height, width, channels], dtype=self.dtype)

    def _warn(self, orientation: int, ctx) -> None:
        with self._warn_lock:
            if not self._watch:
                return
            self._watch = False
        warnings.warn(
            f"peek_image_shape: sample {ctx.sample_index} is a JPEG with EXIF orientation {orientation}; its shape "
            "is reported as stored (as raypipe's decoders decode it), where DALI's default (adjust_orientation=True) "
            "would swap height and width. Pass adjust_orientation=False or True to choose without this warning",
            ExifOrientationWarning,
            stacklevel=3,
        )
