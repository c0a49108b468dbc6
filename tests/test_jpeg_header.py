"""The marker walk to a JPEG's frame header: Pillow's size on every kind of JPEG, the EXIF block on
the way, None for other formats, errors that name what is wrong with a cut or damaged header."""

from __future__ import annotations

import io
import struct

import numpy as np
import pytest
from PIL import Image

from raypipe.exif import tiff_orientation
from raypipe.jpeg_header import JpegHeaderError, frame_size, read_frame


def _jpeg(width: int, height: int, mode: str = "RGB", **save) -> bytes:
    pixels = np.random.default_rng(width * 7 + height).integers(0, 256, (height, width, 3), np.uint8)
    image = Image.fromarray(pixels).convert(mode)
    stream = io.BytesIO()
    image.save(stream, "JPEG", quality=90, **save)
    return stream.getvalue()


def _with_segment(data: bytes, marker: int, payload: bytes) -> bytes:
    """``data`` with a segment ``marker`` inserted right after the start of image."""
    return data[:2] + struct.pack(">BBH", 0xFF, marker, len(payload) + 2) + payload + data[2:]


def _exif_with_thumbnail() -> bytes:
    """An APP1 EXIF payload (orientation 6) that carries a whole 8x8 JPEG, frame header included:
    the walk must jump over it."""
    thumbnail = _jpeg(8, 8)
    ifd = struct.pack("<HHHIHH", 1, 0x0112, 3, 1, 6, 0) + struct.pack("<I", 0)
    tiff = b"II*\x00" + struct.pack("<I", 8) + ifd
    return b"Exif\x00\x00" + tiff + thumbnail


KINDS = {
    "baseline 4:2:0": lambda: _jpeg(500, 375),
    "baseline 4:4:4": lambda: _jpeg(123, 77, subsampling=0),
    "progressive": lambda: _jpeg(321, 211, progressive=True),
    "grayscale": lambda: _jpeg(97, 45, mode="L"),
    "CMYK": lambda: _jpeg(33, 21, mode="CMYK"),
    "restart markers": lambda: _jpeg(160, 120, restart_marker_blocks=2),
    "1x1": lambda: _jpeg(1, 1),
    "odd 17x3": lambda: _jpeg(17, 3),
    "tall 3x4001": lambda: _jpeg(3, 4001),
    "EXIF with a thumbnail": lambda: _with_segment(_jpeg(64, 48), 0xE1, _exif_with_thumbnail()),
    "comment": lambda: _with_segment(_jpeg(40, 30), 0xFE, b"made \xff\xc0 by hand"),
    "fill bytes": lambda: _jpeg(40, 30)[:2] + b"\xff\xff\xff" + _jpeg(40, 30)[3:],
}


@pytest.mark.parametrize("kind", KINDS)
def test_size_is_pillows(kind):
    data = KINDS[kind]()
    expected = Image.open(io.BytesIO(data)).size
    assert frame_size(np.frombuffer(data, np.uint8)) == expected
    assert frame_size(data) == expected


def test_other_formats_are_not_jpegs():
    png = io.BytesIO()
    Image.new("RGB", (5, 4)).save(png, "PNG")
    for data in (png.getvalue(), b"", b"\xff", b"GIF89a", b"this is not an image"):
        assert frame_size(data) is None


@pytest.mark.parametrize(
    "cut, message",
    [
        (2, "truncated JPEG header: the data ends at byte 2, before a frame header"),
        (25, "truncated JPEG header: the data ends at byte 25, before a frame header"),
    ],
)
def test_a_cut_header_says_where_it_ends(cut, message):
    with pytest.raises(JpegHeaderError, match=message):
        frame_size(_jpeg(64, 48)[:cut])


def test_a_cut_frame_header_names_it():
    data = _jpeg(64, 48)
    at = data.index(b"\xff\xc0")
    with pytest.raises(JpegHeaderError, match=rf"ends inside the frame header \(0xC0\) at byte {at}"):
        frame_size(data[: at + 6])


def test_damaged_headers_name_the_problem():
    data = _jpeg(64, 48)
    sof = data.index(b"\xff\xc0")
    second = 4 + int.from_bytes(data[4:6], "big")  # where the segment after the first begins
    cases = [
        (data[:2] + b"\x12\x34" + data[2:], r"no marker at byte 2 \(found 0x12\)"),
        (data[:second] + b"\x00" + data[second + 1 :], rf"no marker at byte {second} \(found 0x00\)"),
        (_with_segment(data, 0xDA, b"\x00"), r"a scan \(marker 0xDA\) at byte 2, before a frame header"),
        (data[:2] + b"\xff\xd9" + data[2:], r"the end of the image \(marker 0xD9\) at byte 2"),
        (data[:2] + b"\xff\xdb\x00\x01" + data[2:], "segment 0xDB at byte 2 has length 1"),
        (data[:2] + b"\xff\x00" + data[2:], r"no such marker as 0x00 \(at byte 2\)"),
        (data[: sof + 5] + b"\x00\x00" + data[sof + 7 :], "the frame header gives a size of 64x0"),
    ]
    for damaged, message in cases:
        with pytest.raises(JpegHeaderError, match=f"corrupt JPEG header: {message}"):
            frame_size(damaged)


def test_restart_markers_before_the_frame_are_stepped_over():
    data = _jpeg(40, 30)
    assert frame_size(data[:2] + b"\xff\xd0" + data[2:]) == (40, 30)


def test_the_exif_block_before_the_frame_comes_with_it():
    data = KINDS["EXIF with a thumbnail"]()
    frame = read_frame(data)
    assert (frame.width, frame.height) == (64, 48) and bytes(frame.exif[:4]) == b"II*\x00"
    assert tiff_orientation(frame.exif) == 6
    assert read_frame(_jpeg(8, 8)).exif is None
