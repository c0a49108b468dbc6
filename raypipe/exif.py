"""The EXIF orientation tag of a JPEG, read from its header without decoding anything.

DALI's decoders apply a JPEG's EXIF orientation by default (``adjust_orientation=True``);
raypipe decodes pixels as stored, and uses this to say so when an image is affected.
"""

from __future__ import annotations

import struct

import numpy as np

from .jpeg_header import JpegHeaderError, read_frame


class ExifOrientationWarning(UserWarning):
    """A decoder met a JPEG whose EXIF orientation DALI would apply and raypipe does not."""


_ORIENTATION_TAG = 0x0112


def orientation(data: np.ndarray | bytes) -> int:
    """The EXIF orientation (1-8) of the JPEG in ``data``; 1 (as stored) when it has none, is
    not a JPEG, or its header or EXIF block is malformed. Reads only the segments before the frame
    header (:func:`~raypipe.jpeg_header.read_frame`)."""
    try:
        frame = read_frame(data)
    except JpegHeaderError:
        return 1
    return 1 if frame is None or frame.exif is None else tiff_orientation(frame.exif)


def tiff_orientation(tiff: bytes | memoryview) -> int:
    """The orientation tag (1-8) of the EXIF (TIFF) block ``tiff``; 1 when it has none or is malformed."""
    if len(tiff) < 8 or tiff[:2] not in (b"II", b"MM"):
        return 1
    order = "<" if tiff[:2] == b"II" else ">"
    (ifd,) = struct.unpack_from(order + "I", tiff, 4)
    if ifd + 2 > len(tiff):
        return 1
    (count,) = struct.unpack_from(order + "H", tiff, ifd)
    for entry in range(count):
        at = ifd + 2 + 12 * entry
        if at + 12 > len(tiff):
            return 1
        tag, kind = struct.unpack_from(order + "HH", tiff, at)
        if tag == _ORIENTATION_TAG and kind == 3:  # SHORT
            (value,) = struct.unpack_from(order + "H", tiff, at + 8)
            return value if 1 <= value <= 8 else 1
    return 1
