"""Host decoding: libjpeg-turbo's region decode gives Pillow's pixels for every window, scale,
subsampling and output type; other formats and grey output go through Pillow."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from raypipe import jpeg_turbo
from raypipe.datasets import synthetic_image
from raypipe.errors import DecodeError
from raypipe.operators import host_decode, host_resize
from raypipe.types import DALIImageType

needs_turbo = pytest.mark.skipif(not jpeg_turbo.available(), reason="no libturbojpeg 3 (the turbojpeg wheel)")


def _encoded(width: int, height: int, fmt: str = "JPEG", subsampling: int = 2, seed: int = 0) -> np.ndarray:
    stream = io.BytesIO()
    extra = {"quality": 90, "subsampling": subsampling} if fmt == "JPEG" else {}
    synthetic_image(np.random.default_rng(seed), width, height).save(stream, fmt, **extra)
    return np.frombuffer(stream.getvalue(), np.uint8)


def _pillow_source(data: np.ndarray, output_type: DALIImageType, monkeypatch) -> host_decode.Source:
    with monkeypatch.context() as m:
        m.setattr(jpeg_turbo, "decoder", lambda: None)
        return host_decode.open_source(data, output_type)


@needs_turbo
@pytest.mark.parametrize("subsampling", [0, 1, 2])
@pytest.mark.parametrize("output_type", [DALIImageType.RGB, DALIImageType.BGR])
def test_region_decode_equals_pillow_for_random_windows_and_scales(subsampling, output_type, monkeypatch):
    rng = np.random.default_rng(subsampling)
    for trial in range(12):
        width, height = (int(v) for v in rng.integers(40, 400, 2))
        data = _encoded(width, height, subsampling=subsampling, seed=trial)
        denom = int(rng.choice([1, 2, 4]))
        turbo = host_decode.open_source(data, output_type)
        pillow = _pillow_source(data, output_type, monkeypatch)
        assert turbo.turbo is not None and pillow.turbo is None
        x, y = int(rng.integers(0, width - 8)), int(rng.integers(0, height - 8))
        window = (x, y, int(rng.integers(8, width - x + 1)), int(rng.integers(8, height - y + 1)))
        box = host_decode.scaled_box(turbo, window, denom)
        got = host_decode.decode(turbo, output_type, box, denom)
        ref = host_decode.decode(pillow, output_type, box, denom)
        assert got.shape == ref.shape and np.array_equal(got, ref), (width, height, window, denom)
        resized = host_decode.decode(turbo, output_type, box, denom, (56, 48))
        assert np.array_equal(resized, host_decode.decode(pillow, output_type, box, denom, (56, 48)))


@needs_turbo
def test_pillow_resize_reads_the_decoded_rows_in_place(monkeypatch):
    monkeypatch.setattr(host_resize, "backend", lambda: "pillow")
    data = _encoded(300, 200)
    source = host_decode.open_source(data, DALIImageType.RGB)
    got = host_decode.decode(source, DALIImageType.RGB, (37, 21, 251, 180), 1, (64, 64))
    ref = Image.open(io.BytesIO(data.tobytes())).convert("RGB").crop((37, 21, 251, 180))
    assert np.array_equal(got, np.asarray(ref.resize((64, 64), Image.Resampling.BILINEAR)))


def test_grey_output_and_other_formats_use_pillow():
    jpeg, png = _encoded(64, 48), _encoded(64, 48, "PNG")
    grey = host_decode.open_source(jpeg, DALIImageType.GRAY)
    assert grey.turbo is None and grey.pil is not None
    image = host_decode.decode(grey, DALIImageType.GRAY)
    assert image.shape == (48, 64, 1)
    source = host_decode.open_source(png, DALIImageType.RGB)
    assert source.turbo is None and not source.is_jpeg
    assert np.array_equal(host_decode.decode(source, DALIImageType.RGB), np.asarray(Image.open(io.BytesIO(png))))


@pytest.mark.parametrize("turbo", [True, False])
def test_truncated_and_unknown_data_raise_decode_errors(turbo, monkeypatch):
    if not turbo:
        monkeypatch.setattr(jpeg_turbo, "decoder", lambda: None)
    elif not jpeg_turbo.available():
        pytest.skip("no libturbojpeg 3")
    data = _encoded(200, 150)
    source = host_decode.open_source(data[: len(data) // 2].copy(), DALIImageType.RGB)
    with pytest.raises(DecodeError, match="truncated"):
        host_decode.decode(source, DALIImageType.RGB)
    with pytest.raises(DecodeError, match="not a recognised image format"):
        host_decode.open_source(np.frombuffer(b"plain text, not an image", np.uint8), DALIImageType.RGB)


@needs_turbo
def test_fast_idct_is_close_and_only_on_request(jpeg_files):
    import raypipe as rp
    from raypipe import fn

    @rp.pipeline_def(batch_size=2, num_threads=1, seed=0)
    def pipe(fast):
        jpegs, _ = fn.readers.file(files=jpeg_files[:2])
        return fn.decoders.image(jpegs, use_fast_idct=fast)

    outputs = {}
    for fast in (False, True):
        with pipe(fast) as p:
            (outputs[fast],) = p.run()
    for i, path in enumerate(jpeg_files[:2]):
        reference = np.asarray(Image.open(path).convert("RGB"))
        assert np.array_equal(outputs[False].at(i), reference)
        diff = np.abs(outputs[True].at(i).astype(np.int16) - reference)
        assert 0 < diff.mean() < 1.0
