"""The size of a JPEG from its frame header, found by walking the marker segments, and the
EXIF block met on the way.

The walk reads four bytes per segment (marker and length) and jumps over the segment,
so it never mistakes bytes inside a segment (an EXIF thumbnail's own frame header, table
data) for a marker, and it stops at the frame header (SOF0-SOF15: baseline, progressive,
lossless, arithmetic), which comes before the first scan: restart markers and entropy-coded
data are never reached. About 1 us per image in Python; libturbojpeg's header call
through ctypes (which also reads the tables) costs several times that.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import numpy as np

_SOI, _EOI, _SOS, _APP1 = 0xD8, 0xD9, 0xDA, 0xE1
_EXIF = b"Exif\x00\x00"
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}  # not DHT, JPG, DAC
_STANDALONE = frozenset(range(0xD0, 0xD8)) | {0x01}  # RSTn and TEM carry no length
_JUMP = frozenset(range(0x02, 0xFF)) - _SOF - _STANDALONE - {_SOI, _EOI, _SOS}  # segments the walk jumps over
_SEGMENT = struct.Struct(">BBH")  # 0xFF, marker, length (which counts itself, not the marker)
_FRAME = struct.Struct(">HBHH")  # length, precision, height, width


class JpegHeaderError(ValueError):
    """The data starts as a JPEG whose header is cut short or malformed (the message says where)."""


class Frame(NamedTuple):
    """What the walk found: the frame header's size and the first EXIF block before it (the TIFF
    data of an APP1 ``Exif`` segment, a view of the JPEG's bytes), or None."""

    width: int
    height: int
    exif: memoryview | None


def frame_size(data: np.ndarray | bytes) -> tuple[int, int] | None:
    """``(width, height)`` from the frame header of the JPEG ``data`` (see :func:`read_frame`)."""
    frame = read_frame(data)
    return None if frame is None else (frame.width, frame.height)


def read_frame(data: np.ndarray | bytes) -> Frame | None:
    """The frame header's size and the EXIF block of the JPEG ``data``; None when ``data`` is not a
    JPEG (it does not start with the SOI marker). Raises :class:`JpegHeaderError` naming the
    problem when the header ends early, a marker is missing, a scan or the end of the image
    comes before the frame header, or the frame header gives no size."""
    raw = memoryview(data)
    if raw.format != "B" or raw.ndim != 1:
        raw = raw.cast("B")
    size = len(raw)
    if size < 2 or raw[0] != 0xFF or raw[1] != _SOI:
        return None
    unpack, pos, exif = _SEGMENT.unpack_from, 2, None
    while pos + 4 <= size:
        lead, marker, length = unpack(raw, pos)
        if lead == 0xFF and marker in _JUMP and length >= 2:  # most segments: tables, APPn, comments
            if marker == _APP1 and exif is None and raw[pos + 4 : pos + 10] == _EXIF:
                exif = raw[pos + 10 : pos + 2 + length]
            pos += 2 + length
            continue
        if lead != 0xFF:
            raise JpegHeaderError(f"corrupt JPEG header: no marker at byte {pos} (found 0x{lead:02X})")
        if marker in _SOF:
            return Frame(*_frame_size(raw, pos, marker), exif)
        if marker == 0xFF:  # a fill byte before the marker
            pos += 1
        elif marker in _STANDALONE:
            pos += 2
        elif marker in (_SOS, _EOI, _SOI):
            name = {_SOS: "a scan", _EOI: "the end of the image", _SOI: "a second start of image"}[marker]
            raise JpegHeaderError(
                f"corrupt JPEG header: {name} (marker 0x{marker:02X}) at byte {pos}, before a frame header"
            )
        elif marker in _JUMP:
            raise JpegHeaderError(f"corrupt JPEG header: segment 0x{marker:02X} at byte {pos} has length {length}")
        else:
            raise JpegHeaderError(f"corrupt JPEG header: no such marker as 0x{marker:02X} (at byte {pos})")
    raise JpegHeaderError(f"truncated JPEG header: the data ends at byte {size}, before a frame header")


def _frame_size(raw: memoryview, pos: int, marker: int) -> tuple[int, int]:
    """``(width, height)`` of the frame header (marker ``marker``) at byte ``pos``."""
    if pos + 2 + _FRAME.size > len(raw):
        raise JpegHeaderError(
            f"truncated JPEG header: the data ends inside the frame header (0x{marker:02X}) at byte {pos}"
        )
    length, _, height, width = _FRAME.unpack_from(raw, pos + 2)
    if length < 8:
        raise JpegHeaderError(f"corrupt JPEG header: frame header 0x{marker:02X} at byte {pos} has length {length}")
    if width == 0 or height == 0:
        raise JpegHeaderError(f"corrupt JPEG header: the frame header gives a size of {width}x{height}")
    return width, height
