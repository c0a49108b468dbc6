"""The EXIF orientation tag of a JPEG, read from its header without decoding anything.

DALI's decoders apply a JPEG's EXIF orientation by default (``adjust_orientation=True``);
raypipe decodes pixels as stored, and uses this to say so when an image is affected.
"""

from __future__ import annotations

import struct

import numpy as np


class ExifOrientationWarning(UserWarning):
    """A decoder met a JPEG whose EXIF orientation DALI would apply and raypipe does not."""


_ORIENTATION_TAG = 0x0112
_SOI, _APP1, _COM = 0xD8, 0xE1, 0xFE


def orientation(data: np.ndarray | bytes) -> int:
    """The EXIF orientation (1-8) of the JPEG in ``data``; 1 (as stored) when it has none, is
    not a JPEG, or its EXIF block is malformed. Reads only the APPn and comment segments at the start."""
    view = memoryview(data).cast("B") if not isinstance(data, bytes) else memoryview(data)
    if len(view) < 4 or view[0] != 0xFF or view[1] != _SOI:
        return 1
    at = 2
    while at + 4 <= len(view) and view[at] == 0xFF:
        marker = view[at + 1]
        if not (0xE0 <= marker <= 0xEF or marker == _COM):  # EXIF comes with the APPn segments, first
            return 1
        length = (view[at + 2] << 8) | view[at + 3]
        if length < 2:
            return 1
        if marker == _APP1 and bytes(view[at + 4 : at + 10]) == b"Exif\0\0":
            return _tiff_orientation(bytes(view[at + 10 : at + 2 + length]))
        at += 2 + length
    return 1


def _tiff_orientation(tiff: bytes) -> int:
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
