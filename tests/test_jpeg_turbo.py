"""The libturbojpeg 3 binding: headers, region and DCT-scaled decoding against Pillow, errors,
one handle per thread released with the thread."""

from __future__ import annotations

import io
import subprocess
import sys
import threading

import numpy as np
import pytest
from PIL import Image

from raypipe import jpeg_turbo
from raypipe.datasets import synthetic_image

pytestmark = pytest.mark.skipif(not jpeg_turbo.available(), reason="no libturbojpeg 3 (the turbojpeg wheel)")


def _jpeg(width: int, height: int, subsampling: int = 2, seed: int = 0, gray: bool = False) -> bytes:
    image = synthetic_image(np.random.default_rng(seed), width, height)
    image = image.convert("L") if gray else image
    stream = io.BytesIO()
    image.save(stream, "JPEG", quality=90, **({} if gray else {"subsampling": subsampling}))
    return stream.getvalue()


@pytest.mark.parametrize("subsampling, expected", [(0, 0), (1, 1), (2, 2)])
def test_header_reads_size_and_subsampling(subsampling, expected):
    header = jpeg_turbo.decoder().header(np.frombuffer(_jpeg(123, 77, subsampling), np.uint8))
    assert (header.width, header.height, header.subsampling, header.supported) == (123, 77, expected, True)


def test_whole_decode_equals_pillow():
    data = _jpeg(203, 151)
    got = jpeg_turbo.decoder().decode(np.frombuffer(data, np.uint8))
    assert np.array_equal(got, np.asarray(Image.open(io.BytesIO(data)).convert("RGB")))


@pytest.mark.parametrize("denom", [1, 2, 4, 8])
def test_rows_of_a_region_are_exact_at_every_scale(denom):
    data = _jpeg(320, 240)
    image = Image.open(io.BytesIO(data))
    image.draft("RGB", (320 // denom, 240 // denom))
    reference = np.asarray(image.convert("RGB"))
    height = jpeg_turbo.scaled(240, denom)
    y, h = height // 4, height // 2
    width = jpeg_turbo.scaled(320, denom)
    got = jpeg_turbo.decoder().decode(np.frombuffer(data, np.uint8), (0, y, width, h), denom)
    assert got.shape == (h, width, 3) and np.array_equal(got, reference[y : y + h])


def test_bad_data_raises_naming_the_problem():
    data = np.frombuffer(_jpeg(64, 48), np.uint8)
    decoder = jpeg_turbo.decoder()
    with pytest.raises(jpeg_turbo.TurboJpegError, match="header"):
        decoder.header(np.frombuffer(b"not a jpeg at all", np.uint8))
    with pytest.raises(jpeg_turbo.TurboJpegError, match="Premature end"):
        decoder.decode(data[: len(data) // 2].copy())
    with pytest.raises(jpeg_turbo.TurboJpegError, match="cropping region"):
        decoder.decode(data, (3, 0, 8, 8))  # x not on an iMCU boundary


def test_a_handle_per_thread_goes_with_its_thread():
    data = np.frombuffer(_jpeg(64, 48), np.uint8)
    decoder = jpeg_turbo.decoder()
    decoder.header(data)
    before = jpeg_turbo._Decompressor.live
    results = []

    def work():
        results.append(decoder.decode(data).shape)
        results.append(jpeg_turbo._Decompressor.live)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count((48, 64, 3)) == 3 and max(r for r in results if isinstance(r, int)) > before
    assert jpeg_turbo._Decompressor.live == before


def test_turned_off_by_the_environment():
    code = "from raypipe import jpeg_turbo; print(jpeg_turbo.available())"
    out = subprocess.run(
        [sys.executable, "-c", code], env={"RAYPIPE_TURBOJPEG": "0", "PATH": ""}, capture_output=True, text=True
    )
    assert out.stdout.strip() == "False", out.stderr


def test_a_stream_without_a_frame_never_reaches_the_handle():
    decoder = jpeg_turbo.decoder()
    good = np.frombuffer(_jpeg(64, 48), np.uint8)
    decoder.header(good)  # the handle now holds a 64x48 header
    for bad in (b"\xff\xd8 truncated", b"\xff\xd8\xff\xdb\x00\x04\x00\x00", b"\xff\xd8\xff\xda\x00\x02"):
        data = np.frombuffer(bad, np.uint8)
        with pytest.raises(jpeg_turbo.TurboJpegError, match="frame header"):
            decoder.header(data)
        with pytest.raises(jpeg_turbo.TurboJpegError, match="frame header"):
            decoder.decode(data)
    assert (decoder.header(good).width, decoder.header(good).height) == (64, 48)


def test_a_failed_header_never_leaves_its_state_to_the_next_image():
    decoder = jpeg_turbo.decoder()
    first, second = np.frombuffer(_jpeg(96, 80, seed=1), np.uint8), np.frombuffer(_jpeg(64, 48, seed=2), np.uint8)
    truncated = first[:600].copy()  # its frame header survives, its scans do not
    for _ in range(3):
        decoder.decode(first, (0, 0, 16, 16))
        with pytest.raises(jpeg_turbo.TurboJpegError):
            decoder.header(truncated)
        header = decoder.header(second)
        assert (header.width, header.height) == (64, 48)
        assert decoder.decode(second).shape == (48, 64, 3)


def test_a_decode_reuses_the_header_just_read_only_for_the_same_array():
    decoder = jpeg_turbo.decoder()
    big, small = np.frombuffer(_jpeg(96, 80, seed=3), np.uint8), np.frombuffer(_jpeg(64, 48, seed=4), np.uint8)
    want_big, want_small = decoder.decode(big), decoder.decode(small)
    reads = []
    original = decoder._lib.tj3DecompressHeader
    decoder._lib.tj3DecompressHeader = lambda *args: reads.append(args[2]) or original(*args)
    try:
        decoder.header(big)
        assert np.array_equal(decoder.decode(big), want_big)  # the header just read, not read again
        assert reads == [big.nbytes]
        decoder.header(big)
        assert np.array_equal(decoder.decode(small), want_small)  # another image: its own header
        assert np.array_equal(decoder.decode(small), want_small)  # a decode consumed it: read again
        assert reads == [big.nbytes, big.nbytes, small.nbytes, small.nbytes]
        copy = big.copy()
        decoder.header(big)
        assert np.array_equal(decoder.decode(copy), want_big)  # equal bytes, another array: read again
        assert reads[-1] == copy.nbytes and len(reads) == 6
    finally:
        decoder._lib.tj3DecompressHeader = original
