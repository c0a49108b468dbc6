"""Batched nvImageCodec decoding on the GPU against Pillow on real JPEG files (full images and crop windows)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from PIL import Image

from raypipe import device_check, nvimgcodec_c
from raypipe.backend import gpu_available
from raypipe.device_check import DECODE_MEAN_TOLERANCE as MEAN_TOLERANCE
from raypipe.device_check import DECODE_P99_TOLERANCE as P99_TOLERANCE
from raypipe.errors import ArgumentError
from raypipe.gpu_decode import (
    BUFFER_GRANULE,
    BUFFER_HEADROOM,
    CODE_STREAMS_ENV,
    DECODE_ENV,
    DECODERS_ENV,
    IMAGE_ALIGNMENT,
    INTO_ENV,
    GpuImageDecoder,
    ImageOwner,
    buffer_bytes,
    code_stream,
    code_stream_maker,
    code_streams_in,
    decode_into_buffer,
    decoder_count,
    nvimgcodec_available,
    nvimgcodec_installed,
    packed_layout,
)
from raypipe.kernels.launch import Packed

needs_nvimgcodec = pytest.mark.skipif(not nvimgcodec_available(), reason="needs a CUDA GPU and nvImageCodec")


@pytest.fixture(params=["c", "python"])
def api(request, monkeypatch) -> str:
    """Each decoding test through nvImageCodec's C API (the default) and through its Python binding."""
    monkeypatch.setenv(nvimgcodec_c.API_ENV, request.param)
    return request.param


def _png(tmp_path) -> tuple[str, np.ndarray]:
    """A lossless PNG among the JPEGs (a format nvImageCodec's GPU backends do not read) and its pixels."""
    pixels = np.random.default_rng(5).integers(0, 256, (37, 53, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(tmp_path / "lossless.png")
    return str(tmp_path / "lossless.png"), pixels


def _assert_close(got: np.ndarray, ref: np.ndarray) -> None:
    assert got.shape == ref.shape and got.dtype == np.uint8
    diff = np.abs(got.astype(np.int16) - ref.astype(np.int16))
    assert diff.mean() <= MEAN_TOLERANCE, diff.mean()
    assert np.percentile(diff, 99) <= P99_TOLERANCE, np.percentile(diff, 99)


def test_disabled_by_environment_at_every_call_whatever_was_checked_before(monkeypatch):
    device_check.decoder(0)
    monkeypatch.setenv(DECODE_ENV, "0")
    assert not nvimgcodec_available()
    assert device_check.decoder(0).detail == f"{DECODE_ENV}=0"


@pytest.mark.skipif(gpu_available(), reason="checks the machine without a GPU")
def test_decoder_without_gpu_says_what_is_missing():
    assert not nvimgcodec_available()
    with pytest.raises(RuntimeError, match=r"GPU decoding is not usable here: no usable GPU .*raypipe\[gpu-cu13\]"):
        GpuImageDecoder(0)


def test_a_batch_buffer_holds_each_image_aligned_and_apart():
    sizes = [(5, 3), (224, 224), (1, 1), (17, 9)]
    offsets, total = packed_layout(sizes, 3)
    spans = [w * h * 3 for w, h in sizes]
    assert offsets[0] == 0 and all(int(o) % IMAGE_ALIGNMENT == 0 for o in offsets)
    assert all(offsets[k] + spans[k] <= offsets[k + 1] for k in range(len(sizes) - 1))
    assert offsets[-1] + spans[-1] <= total < offsets[-1] + spans[-1] + IMAGE_ALIGNMENT
    assert packed_layout([], 1)[1] == 0


def test_decoding_into_one_buffer_per_batch_is_on_unless_the_environment_says_0(monkeypatch):
    monkeypatch.delenv(INTO_ENV, raising=False)
    assert decode_into_buffer()
    monkeypatch.setenv(INTO_ENV, "0")
    assert not decode_into_buffer()
    monkeypatch.setenv(INTO_ENV, "1")
    assert decode_into_buffer()
    for bad in ("no", "2", "true"):
        monkeypatch.setenv(INTO_ENV, bad)
        with pytest.raises(ArgumentError, match=f"{INTO_ENV} must be 0 or 1, got '{bad}'"):
            decode_into_buffer()


def test_a_batch_buffer_keeps_its_size_while_batches_fit_and_grows_with_headroom():
    assert buffer_bytes(0, 0) == 0
    assert buffer_bytes(1, 0) == BUFFER_GRANULE
    first = buffer_bytes(70_000_000, 0)
    assert first % BUFFER_GRANULE == 0 and first >= 70_000_000 * BUFFER_HEADROOM
    assert [buffer_bytes(needed, first) for needed in (60_000_000, 77_000_000, first)] == [first] * 3
    grown = buffer_bytes(first + 1, first)
    assert grown % BUFFER_GRANULE == 0 and grown >= (first + 1) * BUFFER_HEADROOM


def test_an_image_is_released_before_the_stream_it_was_decoded_on():
    import weakref

    class Held:
        pass

    released = []
    image, stream = Held(), Held()
    weakref.finalize(image, released.append, "image")
    weakref.finalize(stream, released.append, "stream")
    owner = ImageOwner(image, stream)
    del image, stream
    assert released == []
    del owner
    assert released == ["image", "stream"]


def test_decoders_per_batch_come_from_the_environment(monkeypatch):
    monkeypatch.delenv(DECODERS_ENV, raising=False)
    assert decoder_count() == 1
    monkeypatch.setenv(DECODERS_ENV, "3")
    assert decoder_count() == 3
    for bad in ("0", "two", "-1", "1.5"):
        monkeypatch.setenv(DECODERS_ENV, bad)
        with pytest.raises(ArgumentError, match=f"{DECODERS_ENV} must be a positive integer, got '{bad}'"):
            decoder_count()


def _samples(batch) -> list:
    """A decoded batch as one array (or None) per source."""
    return batch.samples() if isinstance(batch, Packed) else batch


def _decode(files, windows, gray=False, into_given=False, decoders=1):
    import cupy

    decoder = GpuImageDecoder(0, num_threads=2, decoders=decoders)
    stream = cupy.cuda.Stream(non_blocking=True)
    try:
        data = [np.fromfile(f, np.uint8) for f in files]
        sizes = None
        if into_given:
            whole = [Image.open(f).size for f in files]
            sizes = [size if window is None else window[2:] for size, window in zip(whole, windows)]
        images = _samples(decoder.decode(data, windows, gray, stream, sizes))
        stream.synchronize()
        return [None if image is None else image.get() for image in images]
    finally:
        decoder.close()


@pytest.mark.gpu
@needs_nvimgcodec
@pytest.mark.usefixtures("api")
def test_batch_decode_matches_pillow(jpeg_files):
    files = jpeg_files[:8]
    images = _decode(files, [None] * len(files))
    for path, image in zip(files, images):
        _assert_close(image, np.asarray(Image.open(path).convert("RGB")))


@pytest.mark.gpu
@needs_nvimgcodec
@pytest.mark.usefixtures("api")
def test_region_decode_matches_pillow_crop(jpeg_files):
    files = jpeg_files[:8]
    rng = np.random.default_rng(0)
    windows = []
    for path in files:
        width, height = Image.open(path).size
        w, h = int(rng.integers(32, width // 2)), int(rng.integers(32, height // 2))
        windows.append((int(rng.integers(0, width - w)), int(rng.integers(0, height - h)), w, h))
    images = _decode(files, windows)
    for path, (x, y, w, h), image in zip(files, windows, images):
        ref = np.asarray(Image.open(path).convert("RGB"))[y : y + h, x : x + w]
        _assert_close(image, ref)


@pytest.mark.gpu
@needs_nvimgcodec
@pytest.mark.usefixtures("api")
def test_gray_and_undecodable_samples(jpeg_files, tmp_path):
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(open(jpeg_files[0], "rb").read()[:300])
    images = _decode([jpeg_files[0], str(bad), jpeg_files[1]], [None, None, None], gray=True)
    assert images[1] is None
    for path, image in zip([jpeg_files[0], jpeg_files[1]], [images[0], images[2]]):
        ref = np.asarray(Image.open(path).convert("L"))[:, :, None]
        _assert_close(image, ref)


@pytest.mark.gpu
@needs_nvimgcodec
@pytest.mark.usefixtures("api")
def test_decoding_into_one_batch_buffer_gives_the_same_pixels(jpeg_files, recwarn):
    import cupy

    files = jpeg_files[:8]
    windows = [None, (10, 20, 100, 80), None, (0, 0, 224, 224), (33, 7, 64, 200), None, (5, 5, 31, 17), None]
    own = _decode(files, windows)
    given = _decode(files, windows, into_given=True)
    for a, b in zip(own, given):
        assert np.array_equal(a, b)
    decoder = GpuImageDecoder(0, num_threads=2)
    stream = cupy.cuda.Stream(non_blocking=True)
    sizes = [Image.open(f).size if w is None else w[2:] for f, w in zip(files, windows)]
    batch = decoder.decode([np.fromfile(f, np.uint8) for f in files], windows, False, stream, sizes)
    assert isinstance(batch, Packed)
    images = batch.samples()
    stream.synchronize()
    assert decoder.into_given, [str(w.message) for w in recwarn]
    bases = {image.data.mem.ptr for image in images}
    assert len(bases) == 1  # views of one allocation
    decoder.close()


@pytest.mark.gpu
@needs_nvimgcodec
@pytest.mark.usefixtures("api")
@pytest.mark.parametrize("into_given", [False, True])
def test_a_batch_split_between_decoders_gives_the_same_pixels_in_order(jpeg_files, into_given):
    files = jpeg_files[:7]
    windows = [None, (10, 20, 100, 80), None, (0, 0, 224, 224), (33, 7, 64, 200), None, (5, 5, 31, 17)]
    one = _decode(files, windows, into_given=into_given)
    three = _decode(files, windows, into_given=into_given, decoders=3)
    for a, b in zip(one, three):
        assert np.array_equal(a, b)


@pytest.mark.gpu
@needs_nvimgcodec
@pytest.mark.usefixtures("api")
def test_a_png_among_jpegs_decodes_when_the_batch_decodes_into_one_buffer(jpeg_files, tmp_path):
    png, pixels = _png(tmp_path)
    files = [jpeg_files[0], png, jpeg_files[1]]
    images = _decode(files, [None, None, None], into_given=True)
    assert np.array_equal(images[1], pixels)
    for path, image in zip([jpeg_files[0], jpeg_files[1]], [images[0], images[2]]):
        _assert_close(image, np.asarray(Image.open(path).convert("RGB")))


# nvImageCodec's CPU backend runs the decoder's batch logic (buffers, targets, code streams, splits,
# fallbacks) on a machine without a GPU; the cupy path runs the same code under `pytest -m gpu`.
needs_nvimgcodec_package = pytest.mark.skipif(not nvimgcodec_installed(), reason="needs the nvImageCodec package")
WINDOWS = [None, (10, 20, 100, 80), None, (0, 0, 64, 64), (33, 7, 64, 100), (5, 5, 31, 17)]


def _host_decode(files, windows, *, decoders=1, gray=False, made=False, into=True):
    decoder = GpuImageDecoder(0, num_threads=1, decoders=decoders, on_host=True)
    assert decoder.api == os.environ[nvimgcodec_c.API_ENV] or not into
    decoder.into_given = into
    try:
        data = [np.fromfile(f, np.uint8) for f in files]
        sizes = [Image.open(f).size if w is None else w[2:] for f, w in zip(files, windows)]
        make = code_stream_maker()  # as the CPU stage makes them
        streams = [make(d, w) for d, w in zip(data, windows)] if made else None
        return decoder.decode(data, windows, gray, None, sizes, streams)
    finally:
        decoder.close()


def _pixels(batch) -> list:
    return [None if image is None else np.asarray(image) for image in _samples(batch)]


@needs_nvimgcodec_package
@pytest.mark.usefixtures("api")
def test_a_batch_that_decodes_into_its_buffer_is_one_packed_batch_of_the_same_pixels(jpeg_files):
    files = jpeg_files[: len(WINDOWS)]
    packed = _host_decode(files, WINDOWS)
    assert isinstance(packed, Packed) and len(packed) == len(files)
    assert all(int(offset) % IMAGE_ALIGNMENT == 0 for offset in packed.offsets)
    own = _host_decode(files, WINDOWS, into=False)
    assert isinstance(own, list) and len(own) == len(files)
    for path, window, a, b in zip(files, WINDOWS, packed.samples(), own):
        assert np.array_equal(a, b)
        ref = np.asarray(Image.open(path).convert("RGB"))
        if window is not None:
            x, y, w, h = window
            ref = ref[y : y + h, x : x + w]
        _assert_close(a, ref)


@needs_nvimgcodec_package
@pytest.mark.usefixtures("api")
def test_code_streams_made_beforehand_decode_as_those_the_decoder_makes(jpeg_files):
    files = jpeg_files[: len(WINDOWS)]
    for gray in (False, True):
        inside = _host_decode(files, WINDOWS, gray=gray)
        before = _host_decode(files, WINDOWS, gray=gray, made=True)
        assert np.array_equal(inside.shapes, before.shapes) and inside.shapes[0, 2] == (1 if gray else 3)
        for a, b in zip(inside.samples(), before.samples()):
            assert np.array_equal(a, b)


@needs_nvimgcodec_package
@pytest.mark.usefixtures("api")
@pytest.mark.parametrize("decoders", [2, 3])
def test_a_batch_split_between_host_decoders_is_the_same_packed_batch(jpeg_files, decoders):
    files = jpeg_files[: len(WINDOWS)]
    one, split = _host_decode(files, WINDOWS), _host_decode(files, WINDOWS, decoders=decoders, made=True)
    assert isinstance(split, Packed)
    assert np.array_equal(one.shapes, split.shapes) and np.array_equal(one.offsets, split.offsets)
    for a, b in zip(one.samples(), split.samples()):
        assert np.array_equal(a, b)


@needs_nvimgcodec_package
@pytest.mark.usefixtures("api")
def test_an_undecodable_sample_leaves_a_list_with_none_in_its_place(jpeg_files, tmp_path):
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(open(jpeg_files[0], "rb").read()[:300])
    files = [jpeg_files[0], str(bad), jpeg_files[1]]
    good = _host_decode([jpeg_files[0], jpeg_files[1]], [None, None])
    data = [np.fromfile(f, np.uint8) for f in files]
    decoder = GpuImageDecoder(0, num_threads=1, on_host=True)
    try:
        sizes = [Image.open(jpeg_files[0]).size, (8, 8), Image.open(jpeg_files[1]).size]
        out = decoder.decode(data, [None] * 3, False, None, sizes)
    finally:
        decoder.close()
    assert isinstance(out, list) and out[1] is None
    assert np.array_equal(out[0], good[0]) and np.array_equal(out[2], good[1])


@needs_nvimgcodec_package
@pytest.mark.usefixtures("api")
def test_a_png_among_jpegs_decodes_into_the_batch_buffer_or_beside_it(jpeg_files, tmp_path):
    png, pixels = _png(tmp_path)
    batch = _pixels(_host_decode([jpeg_files[0], png], [None, None]))
    assert np.array_equal(batch[1], pixels)
    _assert_close(batch[0], np.asarray(Image.open(jpeg_files[0]).convert("RGB")))


@needs_nvimgcodec_package
@pytest.mark.usefixtures("api")
def test_bytes_nvimgcodec_cannot_parse_decode_to_none_wherever_their_stream_was_made(jpeg_files):
    garbage = np.frombuffer(b"not an image at all", np.uint8)  # nvImageCodec 0.9 parses it when decoding
    good = np.fromfile(jpeg_files[0], np.uint8)
    size = Image.open(jpeg_files[0]).size
    decoder = GpuImageDecoder(0, num_threads=1, on_host=True)
    try:
        make = code_stream_maker()
        for streams in (None, [make(garbage, None), make(good, None)]):
            out = decoder.decode([garbage, good], [None, None], False, None, [(4, 4), size], streams)
            assert isinstance(out, list) and out[0] is None and out[1].shape == (size[1], size[0], 3)
    finally:
        decoder.close()


@needs_nvimgcodec_package
def test_the_cpu_stages_code_streams_are_those_of_code_stream_for_any_layout_of_the_bytes(jpeg_files, monkeypatch):
    monkeypatch.setenv(nvimgcodec_c.API_ENV, "python")
    make = code_stream_maker()  # bound once to the binding's API, positional calls
    data = np.fromfile(jpeg_files[0], np.uint8)
    spread = np.zeros(2 * data.size, np.uint8)
    spread[::2] = data
    for given in (data, data.view(np.int8), spread[::2]):  # as read, as DALI's int8 bytes, strided
        for window in WINDOWS[:2]:
            made, ref = make(given, window), code_stream(data, window)
            assert (made.width, made.height, repr(made.view)) == (ref.width, ref.height, repr(ref.view))
    for window in WINDOWS[:2]:  # empty bytes: what nvImageCodec makes of them, the same both ways
        assert (make(data[:0], window) is None) == (code_stream(data[:0], window) is None)


def test_code_streams_are_made_by_the_cpu_stage_unless_the_environment_says_mixed(monkeypatch):
    monkeypatch.delenv(CODE_STREAMS_ENV, raising=False)
    assert code_streams_in() == "cpu"
    monkeypatch.setenv(CODE_STREAMS_ENV, "Mixed")
    assert code_streams_in() == "mixed"
    monkeypatch.setenv(CODE_STREAMS_ENV, "gpu")
    with pytest.raises(ArgumentError, match=f"{CODE_STREAMS_ENV} must be cpu or mixed, got 'gpu'"):
        code_streams_in()
