"""EXIF orientation read from real JPEG headers, against Pillow's reading of the same files."""

from __future__ import annotations

import io
import struct

import numpy as np
import pytest
from PIL import Image

from raypipe.exif import orientation


def _jpeg(exif_orientation: int | None = None, size=(24, 16)) -> bytes:
    image = Image.fromarray(np.arange(size[0] * size[1] * 3, dtype=np.uint8).reshape(size[1], size[0], 3))
    out = io.BytesIO()
    if exif_orientation is None:
        image.save(out, "JPEG")
    else:
        exif = Image.Exif()
        exif[0x0112] = exif_orientation
        image.save(out, "JPEG", exif=exif)
    return out.getvalue()


def _with_app1(payload: bytes) -> bytes:
    """A JFIF JPEG with an extra APP1 segment holding ``payload`` right after its APP0."""
    data = _jpeg()
    app0_end = 4 + struct.unpack(">H", data[4:6])[0]
    return data[:app0_end] + b"\xff\xe1" + struct.pack(">H", len(payload) + 2) + payload + data[app0_end:]


@pytest.mark.parametrize("value", range(1, 9))
def test_orientation_matches_pillow(value):
    data = _jpeg(value)
    assert Image.open(io.BytesIO(data)).getexif()[0x0112] == value
    assert orientation(np.frombuffer(data, np.uint8)) == value == orientation(data)


def test_big_endian_exif_after_an_app0_segment():
    tiff = b"MM\x00\x2a" + struct.pack(">I", 8) + struct.pack(">H", 1) + struct.pack(">HHIHH", 0x0112, 3, 1, 6, 0)
    data = _with_app1(b"Exif\0\0" + tiff + struct.pack(">I", 0))
    assert Image.open(io.BytesIO(data)).getexif()[0x0112] == 6
    assert orientation(data) == 6


@pytest.mark.parametrize(
    "data",
    [
        _jpeg(),  # no EXIF
        b"\x89PNG\r\n\x1a\n" + bytes(32),  # not a JPEG
        b"",
        _with_app1(b"Exif\0\0II"),  # a cut TIFF header
        _with_app1(b"Exif\0\0II\x2a\x00" + struct.pack("<I", 4000)),  # an IFD offset past the block
        _with_app1(b"Exif\0\0II\x2a\x00" + struct.pack("<IH", 8, 5)),  # entries missing
        _with_app1(b"Exif\0\0II\x2a\x00" + struct.pack("<IHHHIHH", 8, 1, 0x0112, 3, 1, 9, 0)),  # out of range
        _jpeg(6)[:20],  # truncated inside the EXIF block
    ],
    ids=["no-exif", "png", "empty", "cut-tiff", "ifd-past-end", "entries-missing", "value-9", "truncated"],
)
def test_anything_else_reads_as_stored(data):
    assert orientation(data) == 1
