"""nvImageCodec's C API through ctypes against its Python binding, on the library's CPU backend
(the same calls decode on the GPU under ``pytest -m gpu``, see tests/test_gpu_decode.py)."""

from __future__ import annotations

import ctypes
import io
import os
import re
import shutil
import subprocess
import sys
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from PIL import Image

from raypipe import device_check, nvimgcodec_c
from raypipe.errors import ArgumentError
from raypipe.gpu_decode import (
    GpuImageDecoder,
    c_api_backend_problem,
    code_stream,
    code_stream_maker,
    nvimgcodec_installed,
    packed_layout,
)

needs_nvimgcodec = pytest.mark.skipif(not nvimgcodec_installed(), reason="needs the nvImageCodec package")
WINDOWS = [None, (10, 20, 100, 80), (0, 0, 64, 64), (33, 7, 64, 100), (5, 5, 31, 17), None]


def test_the_structures_have_the_sizes_of_nvimgcodec_0_9s_header():
    sizes = {
        "ImageInfo": nvimgcodec_c._ImageInfo,
        "CodeStreamView": nvimgcodec_c._View,
        "ExecutionParams": nvimgcodec_c._ExecutionParams,
        "ImagePlaneInfo": nvimgcodec_c._Plane,
        "Region": nvimgcodec_c._Region,
    }
    assert {name: ctypes.sizeof(struct) for name, struct in sizes.items()} == nvimgcodec_c.HEADER_SIZES
    assert nvimgcodec_c._INFO.itemsize == nvimgcodec_c.HEADER_SIZES["ImageInfo"]


@needs_nvimgcodec
def test_the_structures_match_the_installed_header_compiled(tmp_path):
    from nvidia import nvimgcodec

    include = os.path.join(os.path.dirname(nvimgcodec.__file__), "include")
    if shutil.which("cc") is None or not os.path.exists(os.path.join(include, "nvimgcodec.h")):
        pytest.skip("needs a C compiler and nvImageCodec's header")
    (tmp_path / "cuda_runtime_api.h").write_text("typedef void* cudaStream_t;\n")  # all the header takes from CUDA
    fields = [
        ("nvimgcodecImageInfo_t", "ImageInfo"),
        ("nvimgcodecCodeStreamView_t", "CodeStreamView"),
        ("nvimgcodecExecutionParams_t", "ExecutionParams"),
        ("nvimgcodecImagePlaneInfo_t", "ImagePlaneInfo"),
        ("nvimgcodecRegion_t", "Region"),
    ]
    offsets = [("nvimgcodecImageInfo_t", name) for name in ("plane_info", "buffer", "buffer_kind", "cuda_stream")]
    source = tmp_path / "sizes.c"
    source.write_text(
        "#include <stdio.h>\n#include <stddef.h>\n#include <nvimgcodec.h>\nint main(void) {\n"
        + "".join(f'  printf("%zu\\n", sizeof({c}));\n' for c, _ in fields)
        + "".join(f'  printf("%zu\\n", offsetof({c}, {f}));\n' for c, f in offsets)
        + "  return 0;\n}\n"
    )
    binary = tmp_path / "sizes"
    subprocess.run(["cc", f"-I{tmp_path}", f"-I{include}", str(source), "-o", str(binary)], check=True)
    printed = [int(line) for line in subprocess.run([str(binary)], capture_output=True, text=True).stdout.split()]
    assert printed[: len(fields)] == [nvimgcodec_c.HEADER_SIZES[name] for _, name in fields]
    assert printed[len(fields) :] == [getattr(nvimgcodec_c._ImageInfo, f).offset for _, f in offsets]


def test_the_api_comes_from_the_environment_and_a_bad_value_is_refused(monkeypatch):
    monkeypatch.setenv(nvimgcodec_c.API_ENV, "python")
    assert nvimgcodec_c.problem() == f"{nvimgcodec_c.API_ENV}=python" and not nvimgcodec_c.enabled()
    monkeypatch.setenv(nvimgcodec_c.API_ENV, "cuda")
    with pytest.raises(ArgumentError, match=f"{nvimgcodec_c.API_ENV} must be c or python, got 'cuda'"):
        nvimgcodec_c.problem()
    for chosen in (None, "C", " c "):  # unset: the C API where its library loads
        if chosen is None:
            monkeypatch.delenv(nvimgcodec_c.API_ENV)
        else:
            monkeypatch.setenv(nvimgcodec_c.API_ENV, chosen)
        assert (nvimgcodec_c.problem() is None) == (nvimgcodec_c.library() is not None)


def _decode_c(decoder, data, windows, sizes, gray):
    channels = 1 if gray else 3
    offsets, total = packed_layout(sizes, channels)
    buffer = np.zeros(total, np.uint8)
    streams = [nvimgcodec_c.code_stream(d, w) for d, w in zip(data, windows)]
    ok = decoder.decode(streams, buffer.ctypes.data, offsets, np.asarray(sizes), gray, 0)
    images = [buffer[o : o + w * h * channels].reshape(h, w, channels) for o, (w, h) in zip(offsets.tolist(), sizes)]
    return ok, images


@needs_nvimgcodec
def test_code_streams_made_on_several_threads_and_from_read_only_bytes_keep_their_own_windows(jpeg_files):
    """Each thread refills one region description per code stream it cuts (nvImageCodec copies
    it): streams made at once on two threads, writable or read-only, decode to their own windows."""
    files = jpeg_files[: len(WINDOWS)]
    data = [np.fromfile(f, np.uint8) for f in files]
    sources = [*data, *(np.frombuffer(d.tobytes(), np.uint8) for d in data)]  # then read-only copies
    windows = [*WINDOWS, *reversed(WINDOWS)]
    sizes = [Image.open(files[k % len(files)]).size if w is None else w[2:] for k, w in enumerate(windows)]
    decoder = nvimgcodec_c.Decoder(nvimgcodec_c.DEVICE_CPU_ONLY, 1, [("cpu", 1.0)], ":fancy_upsampling=1")
    try:
        one_by_one = [_decode_c(decoder, [d], [w], [z], False)[1][0] for d, w, z in zip(sources, windows, sizes)]
        with ThreadPoolExecutor(2) as pool:
            made = list(pool.map(nvimgcodec_c.code_stream, sources, windows))
        offsets, total = packed_layout(sizes, 3)
        buffer = np.zeros(total, np.uint8)
        assert decoder.decode(made, buffer.ctypes.data, offsets, np.asarray(sizes), False, 0).all()
        got = [buffer[o : o + w * h * 3].reshape(h, w, 3) for o, (w, h) in zip(offsets.tolist(), sizes)]
        assert all(np.array_equal(a, b) for a, b in zip(one_by_one, got))
    finally:
        decoder.close()

    decoder = nvimgcodec_c.Decoder(nvimgcodec_c.DEVICE_CPU_ONLY, 1, [("cpu", 1.0)], ":fancy_upsampling=1")
    try:  # empty bytes, writable or not: a code stream that fails to decode, as nvImageCodec has it
        for empty in (np.zeros(0, np.uint8), np.frombuffer(b"", np.uint8)):
            ok, _ = _decode_c(decoder, [empty, empty], [None, (0, 0, 8, 8)], [(8, 8), (8, 8)], False)
            assert not ok.any()
    finally:
        decoder.close()


def _decode_python(data, window, gray):
    from nvidia import nvimgcodec as nv

    decoder = nv.Decoder(
        device_id=nv.NVIMGCODEC_DEVICE_CPU_ONLY,
        backends=[nv.Backend(nv.BackendKind.CPU_ONLY)],
        options=":fancy_upsampling=1",
    )
    color = nv.ColorSpec.GRAY if gray else nv.ColorSpec.SRGB
    params = nv.DecodeParams(apply_exif_orientation=False, color_spec=color, allow_any_depth=False)
    image = decoder.decode(code_stream(data, window, nv), params=params)
    array = np.asarray(image.cpu())
    return array[:, :, None] if array.ndim == 2 else array


@needs_nvimgcodec
@pytest.mark.parametrize("gray", [False, True])
def test_a_batch_decodes_into_its_buffer_exactly_as_the_python_binding_decodes(jpeg_files, gray):
    files = jpeg_files[: len(WINDOWS)]
    data = [np.fromfile(f, np.uint8) for f in files]
    sizes = [Image.open(f).size if w is None else w[2:] for f, w in zip(files, WINDOWS)]
    decoder = nvimgcodec_c.Decoder(nvimgcodec_c.DEVICE_CPU_ONLY, 1, [("cpu", 1.0)], ":fancy_upsampling=1")
    try:
        ok, images = _decode_c(decoder, data, WINDOWS, sizes, gray)
        assert ok.all()
        for d, window, image in zip(data, WINDOWS, images):
            assert np.array_equal(image, _decode_python(d, window, gray))
        # a smaller batch, then a larger one, through the same decoder and its reused image handles
        ok, images = _decode_c(decoder, data[:2], WINDOWS[:2], sizes[:2], gray)
        assert ok.all() and np.array_equal(images[1], _decode_python(data[1], WINDOWS[1], gray))
        more = data + data[:3]
        ok, images = _decode_c(decoder, more, WINDOWS + WINDOWS[:3], sizes + sizes[:3], gray)
        assert ok.all() and np.array_equal(images[-1], _decode_python(data[2], WINDOWS[2], gray))
    finally:
        decoder.close()


@needs_nvimgcodec
def test_a_truncated_sample_fails_alone_bytes_it_cannot_parse_fail_the_batch_and_a_closed_decoder_refuses(jpeg_files):
    good = np.fromfile(jpeg_files[0], np.uint8)
    truncated, garbage = good[:300].copy(), np.frombuffer(b"not an image at all", np.uint8)
    size = Image.open(jpeg_files[0]).size
    decoder = nvimgcodec_c.Decoder(nvimgcodec_c.DEVICE_CPU_ONLY, 1, [("cpu", 1.0)], "")
    ok, images = _decode_c(decoder, [truncated, good], [None] * 2, [size, size], False)
    assert ok.tolist() == [False, True]
    assert np.array_equal(images[1], _decode_python(good, None, False))
    # nvImageCodec parses lazily: bytes that are no image fail the whole call (GpuImageDecoder then
    # decodes the batch's failures again through the Python binding, one by one)
    ok, _ = _decode_c(decoder, [good, garbage], [None] * 2, [size, (4, 4)], False)
    assert ok.tolist() == [False, False]
    decoder.close()
    decoder.close()
    with pytest.raises(RuntimeError, match="closed"):
        _decode_c(decoder, [good], [None], [size], False)


def test_verbosity_follows_the_bindings_variable(monkeypatch):
    monkeypatch.delenv(nvimgcodec_c.VERBOSITY_ENV, raising=False)
    assert nvimgcodec_c.verbosity() == 2
    for value, level in (("0", 0), ("4", 4), ("9", 5), ("-1", 0), ("loud", 2)):
        monkeypatch.setenv(nvimgcodec_c.VERBOSITY_ENV, value)
        assert nvimgcodec_c.verbosity() == level
    assert nvimgcodec_c.message_severity(0) == 0
    errors, warnings_too = nvimgcodec_c.message_severity(1), nvimgcodec_c.message_severity(2)
    assert errors & warnings_too == errors and warnings_too != errors
    assert nvimgcodec_c.message_severity(5) == 0x00111111


TRUNCATED_DECODE = """
import sys
import numpy as np
from raypipe import nvimgcodec_c
good = np.fromfile(sys.argv[1], np.uint8)
decoder = nvimgcodec_c.Decoder(nvimgcodec_c.DEVICE_CPU_ONLY, 1, [("cpu", 1.0)], "")
buffer = np.zeros(1 << 20, np.uint8)
streams = [nvimgcodec_c.code_stream(good[:300].copy(), None)]
print(decoder.decode(streams, buffer.ctypes.data, np.zeros(1), np.array([[16, 16]]), False, 0).tolist())
"""


@needs_nvimgcodec
def test_the_c_api_instance_reports_its_errors_on_stderr_as_the_binding_does(jpeg_files):
    """nvImageCodec's own messages from raypipe's instance, at the binding's verbosity: a truncated
    sample's parse error shows by default and not at verbosity 0."""
    runs = {}
    for level in (None, "0"):
        env = {k: v for k, v in os.environ.items() if k != nvimgcodec_c.VERBOSITY_ENV}
        if level is not None:
            env[nvimgcodec_c.VERBOSITY_ENV] = level
        runs[level] = subprocess.run(
            [sys.executable, "-c", TRUNCATED_DECODE, str(jpeg_files[0])],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
    for run in runs.values():
        assert run.returncode == 0 and run.stdout.strip() == "[False]", run.stderr
    colourless = {level: re.sub(r"\x1b\[[0-9;]*m", "", run.stderr) for level, run in runs.items()}
    assert "[ERROR] [jpeg_parser] Invalid marker" in colourless[None]
    assert "[ERROR]" not in colourless["0"]


@needs_nvimgcodec
def test_a_failing_c_api_is_warned_of_once_and_the_python_binding_decodes_the_same(jpeg_files, monkeypatch):
    files = jpeg_files[: len(WINDOWS)]
    data = [np.fromfile(f, np.uint8) for f in files]
    sizes = [Image.open(f).size if w is None else w[2:] for f, w in zip(files, WINDOWS)]
    monkeypatch.setenv(nvimgcodec_c.API_ENV, "c")
    decoder = GpuImageDecoder(0, num_threads=1, on_host=True)
    try:
        assert decoder.api == "c"
        expected = decoder.decode(data, WINDOWS, False, None, sizes)

        def fails(self, *args):
            raise nvimgcodec_c.CApiError("nvimgcodecDecoderDecode failed with nvimgcodecStatus_t 6")

        monkeypatch.setattr(nvimgcodec_c.Decoder, "decode", fails)
        device_check._warned.discard("nvimgcodec_c")
        with pytest.warns(device_check.GpuComponentWarning, match=r"C API is not used \(.*Status_t 6\)"):
            made = [code_stream_maker()(d, w) for d, w in zip(data, WINDOWS)]  # through the C API
            got = decoder.decode(data, WINDOWS, False, None, sizes, made)
        assert decoder.api == "python" and "Status_t 6" in decoder.api_detail
        assert all(np.array_equal(a, b) for a, b in zip(expected.samples(), got.samples()))
    finally:
        decoder.close()


@needs_nvimgcodec
def test_a_c_api_that_fails_its_check_is_not_used(monkeypatch):
    monkeypatch.setenv(nvimgcodec_c.API_ENV, "c")
    decode = nvimgcodec_c.Decoder.decode

    def batches_fail(self, streams, *args):  # the one-image backend check passes, the batch check fails
        return decode(self, streams, *args) if len(streams) == 1 else np.zeros(len(streams), bool)

    monkeypatch.setattr(nvimgcodec_c.Decoder, "decode", batches_fail)
    device_check._warned.discard("nvimgcodec_c")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        decoder = GpuImageDecoder(0, num_threads=1, on_host=True)
    try:
        assert decoder.api == "python" and "decoded 0 of 3 JPEGs" in decoder.api_detail
        assert [str(w.message) for w in caught if "C API" in str(w.message)]
    finally:
        decoder.close()


@needs_nvimgcodec
def test_a_c_api_whose_pixels_differ_from_the_bindings_is_not_used(monkeypatch):
    """Another backend behind the C API (as its slowness on an H200 suggests) shows as other pixels."""
    decode = nvimgcodec_c.Decoder.decode

    def off_by_one(self, streams, base, offsets, sizes, gray, stream):
        ok = decode(self, streams, base, offsets, sizes, gray, stream)
        ctypes.memset(
            base + int(offsets[-1]), 0 if ctypes.c_uint8.from_address(base + int(offsets[-1])).value else 1, 1
        )
        return ok

    monkeypatch.setenv(nvimgcodec_c.API_ENV, "c")
    monkeypatch.setattr(nvimgcodec_c.Decoder, "decode", off_by_one)
    device_check._warned.discard("nvimgcodec_c")
    with pytest.warns(device_check.GpuComponentWarning, match="differs from the Python binding's"):
        decoder = GpuImageDecoder(0, num_threads=1, on_host=True)
    try:
        assert decoder.api == "python"
    finally:
        decoder.close()


@needs_nvimgcodec
def test_each_backend_is_checked_in_the_c_apis_own_instance(monkeypatch):
    """The C API's nvImageCodec instance registers its decoders apart from the binding's: a backend
    missing there (here: no GPU, so no hardware or CUDA decoder) fails the C API's check, named
    (a failed check hands the decoding to the binding: the tests above)."""
    assert c_api_backend_problem(nvimgcodec_c.DEVICE_CPU_ONLY, "cpu") is None
    assert "no decoder has it" in c_api_backend_problem(nvimgcodec_c.DEVICE_CPU_ONLY, "hw_gpu")
    assert "decoded nothing" in c_api_backend_problem(nvimgcodec_c.DEVICE_CPU_ONLY, "gpu")
    monkeypatch.setenv(nvimgcodec_c.API_ENV, "c")
    decoder = GpuImageDecoder(0, num_threads=1, on_host=True)
    try:
        assert decoder.api == "c"
        decoder.backends = ("cpu", "hw_gpu")  # as if the binding's instance had the hardware decoder
        unreached = lambda: pytest.fail("the backends are checked first")  # noqa: E731
        assert "does not decode with the hw_gpu backend" in decoder._check_c_api(unreached, unreached)
    finally:
        decoder.close()


@needs_nvimgcodec
def test_the_c_apis_check_decodes_with_decoders_of_its_own(jpeg_files, monkeypatch):
    """nvImageCodec 0.9's hardware decoder sizes itself at a decoder's first batch and hands what
    exceeds that later to the next backend: decoders that had decoded the check's 3 images decoded
    only 7 of each 256 on an H200's hardware decoder. The decoders that decode batches start with
    the first batch they are given."""
    files = jpeg_files[: len(WINDOWS)]
    data = [np.fromfile(f, np.uint8) for f in files]
    sizes = [Image.open(f).size if w is None else w[2:] for f, w in zip(files, WINDOWS)]
    monkeypatch.setenv(nvimgcodec_c.API_ENV, "c")
    decoder = GpuImageDecoder(0, num_threads=1, on_host=True, decoders=2)
    try:
        assert decoder.api == "c" and [c.batches for c in decoder._c_decoders] == [0, 0]
        decoder.decode(data, WINDOWS, False, None, sizes)
        assert [c.batches for c in decoder._c_decoders] == [1, 1]
    finally:
        decoder.close()


@needs_nvimgcodec
def test_a_first_batch_smaller_than_the_hint_is_preceded_by_a_full_sized_one(jpeg_files, monkeypatch):
    """A first part smaller than the batch size hinted would size the hardware decoder for good:
    each decoder first decodes a scratch batch of its full part, once, then the batch itself."""
    files = jpeg_files[: len(WINDOWS)]
    data = [np.fromfile(f, np.uint8) for f in files]
    sizes = [Image.open(f).size if w is None else w[2:] for f, w in zip(files, WINDOWS)]
    monkeypatch.setenv(nvimgcodec_c.API_ENV, "c")
    full = GpuImageDecoder(0, num_threads=1, on_host=True, decoders=2, batch_hint=len(WINDOWS))
    short = GpuImageDecoder(0, num_threads=1, on_host=True, decoders=2, batch_hint=4 * len(WINDOWS))
    try:
        expected = full.decode(data, WINDOWS, False, None, sizes)
        assert [c.batches for c in full._c_decoders] == [1, 1]  # a full first batch needs no scratch one
        got = short.decode(data, WINDOWS, False, None, sizes)
        assert [c.batches for c in short._c_decoders] == [2, 2]
        short.decode(data, WINDOWS, False, None, sizes)
        assert [c.batches for c in short._c_decoders] == [3, 3]  # once
        assert all(np.array_equal(a, b) for a, b in zip(expected.samples(), got.samples()))
        monkeypatch.setenv(nvimgcodec_c.API_ENV, "python")  # the binding's decoders are primed alike
        binding = GpuImageDecoder(0, num_threads=1, on_host=True, decoders=2, batch_hint=4 * len(WINDOWS))
        got = binding.decode(data, WINDOWS, False, None, sizes)
        assert binding.api == "python" and binding._started["python"] == [True, True]
        assert all(np.array_equal(a, b) for a, b in zip(expected.samples(), got.samples()))
        binding.close()
    finally:
        full.close()
        short.close()
    for bad in (0, -1, True, 2.0):
        with pytest.raises(ValueError, match="batch_hint must be a positive int"):
            GpuImageDecoder(0, num_threads=1, on_host=True, batch_hint=bad)


def test_the_check_batch_is_textured_and_cut_as_the_recipe_cuts():
    from raypipe.gpu_decode import check_batch

    sources, windows, sizes = check_batch()
    assert len(sources) == len(windows) == len(sizes) == 3
    whole = np.asarray(Image.open(io.BytesIO(sources[0].tobytes())).convert("L"), np.float32)
    assert whole.shape == (240, 320) and np.abs(np.diff(whole, axis=1)).mean() > 8  # texture, not a gradient
    assert sizes[1] == windows[1][2:] and windows[0] is None


@needs_nvimgcodec
def test_closing_the_gpu_image_decoder_releases_its_c_decoders(monkeypatch):
    monkeypatch.setenv(nvimgcodec_c.API_ENV, "c")
    decoder = GpuImageDecoder(0, num_threads=1, on_host=True, decoders=2)
    inner = list(decoder._c_decoders)
    assert decoder.api == "c" and len(inner) == 2
    decoder.close()
    for c_decoder in inner:
        with pytest.raises(RuntimeError, match="closed"):
            c_decoder.decode([], 0, np.zeros(0, np.int64), np.zeros((0, 2), np.int64), False, 0)
