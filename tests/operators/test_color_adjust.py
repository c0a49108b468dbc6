"""hsv, hue, saturation, brightness_contrast, brightness and contrast: against DALI 2.4's CPU
operators on real decoded JPEGs (fixed and per-sample arguments, cpu and gpu devices), and
against float64 references written from DALI's documented formulas without DALI.

Tolerance: both compute in float32 but sum in different orders, so a uint8 result next to a
rounding tie may round the other way: a difference of 1 on at most 0.5% of the values; float
results within 1e-5 relative and 1e-4 absolute (0..255 data)."""

from __future__ import annotations

import numpy as np
import pytest

from raypipe import fn, types
from raypipe.errors import ArgumentError
from raypipe.operators.color_adjust import BrightnessContrast
from raypipe.sample_contexts import SampleContexts
from tests.operators.test_color_twist import reference

HUES = [np.float32(v) for v in (-120.0, 15.0, 60.0, 170.0)]
SCALES = [np.float32(v) for v in (0.2, 0.9, 1.4, 1.9)]
SHIFTS = [np.float32(v) for v in (-0.1, 0.0, 0.05, 0.2)]
CENTERS = [np.float32(v) for v in (64.0, 100.0, 128.0, 200.0)]


def assert_close(got: np.ndarray, expected: np.ndarray) -> None:
    assert got.dtype == expected.dtype and got.shape == expected.shape
    if got.dtype.kind in "iu":
        diff = np.abs(got.astype(np.int32) - expected.astype(np.int32))
        assert diff.max() <= 1
        assert np.count_nonzero(diff) <= 5e-3 * diff.size
    else:
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-4)


# (id, input: "u8" | "float" | "2ch", per-sample value batches, build(x, fn, types, device, *per_sample))
CASES = [
    ("hsv", "u8", [], lambda x, fn, types, d: fn.hsv(x, hue=30.0, saturation=0.5, value=1.3, device=d)),
    (
        "hsv-per-sample-float",
        "u8",
        [HUES, SCALES, SCALES[::-1]],
        lambda x, fn, types, d, h, s, v: fn.hsv(x, hue=h, saturation=s, value=v, dtype=types.FLOAT, device=d),
    ),
    ("hsv-float-input", "float", [], lambda x, fn, types, d: fn.hsv(x, hue=45.0, dtype=types.FLOAT, device=d)),
    ("hue-per-sample", "u8", [HUES], lambda x, fn, types, d, h: fn.hue(x, hue=h, device=d)),
    ("saturation", "u8", [], lambda x, fn, types, d: fn.saturation(x, saturation=1.7, device=d)),
    (
        "saturation-per-sample-int16",
        "u8",
        [SCALES],
        lambda x, fn, types, d, s: fn.saturation(x, saturation=s, dtype=types.INT16, device=d),
    ),
    (
        "brightness-contrast",
        "u8",
        [],
        lambda x, fn, types, d: fn.brightness_contrast(x, brightness=1.2, brightness_shift=0.1, contrast=1.5, device=d),
    ),
    (
        "brightness-contrast-per-sample",
        "u8",
        [SCALES, SHIFTS, SCALES[::-1], CENTERS],
        lambda x, fn, types, d, b, bs, c, cc: fn.brightness_contrast(
            x, brightness=b, brightness_shift=bs, contrast=c, contrast_center=cc, dtype=types.FLOAT, device=d
        ),
    ),
    (
        "brightness-contrast-float-to-u8",
        "float",
        [],
        lambda x, fn, types, d: fn.brightness_contrast(
            x, brightness=1.1, brightness_shift=0.3, contrast=0.7, dtype=types.UINT8, device=d
        ),
    ),
    (
        "brightness-contrast-two-channels",
        "2ch",
        [],
        lambda x, fn, types, d: fn.brightness_contrast(x, brightness=0.8, contrast=1.3, device=d),
    ),
    (
        "brightness",
        "u8",
        [SHIFTS],
        lambda x, fn, types, d, s: fn.brightness(x, brightness=1.1, brightness_shift=s, device=d),
    ),
    ("contrast", "u8", [CENTERS], lambda x, fn, types, d, c: fn.contrast(x, contrast=1.6, contrast_center=c, device=d)),
]


def _inputs(images, kind):
    if kind == "float":
        return [(i / np.float32(255)).astype(np.float32) for i in images]
    if kind == "2ch":
        return [np.ascontiguousarray(i[:, :, :2]) for i in images]
    return images


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("case, kind, values, build", CASES, ids=[c[0] for c in CASES])
def test_against_dali(ours, dali, images, case, kind, values, build, device):
    samples = _inputs(images, kind)
    ((theirs, their_layout),) = dali(
        samples, lambda x, fn, types, *a: build(x, fn, types, "cpu", *a), "HWC", per_sample=values
    )
    ((mine, my_layout),) = ours(
        samples,
        lambda x, *a: build(x.gpu() if device == "gpu" else x, fn, types, device, *a),
        "HWC",
        per_sample=values,
    )
    assert my_layout == their_layout == "HWC"
    for their, my in zip(theirs, mine, strict=True):
        assert_close(my, their)


def _rounded(values: np.ndarray, dtype=np.uint8) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.clip(np.rint(values), info.min, info.max).astype(dtype)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_hsv_hue_and_saturation_are_the_yiq_twist(ours, images, device):
    outs = ours(
        images,
        lambda x, h, s: (
            fn.hsv(x, hue=h, saturation=s, value=1.2, device=device),
            fn.hue(x, hue=h, dtype=types.FLOAT, device=device),
            fn.saturation(x, saturation=s, device=device),
        ),
        "HWC",
        per_sample=[HUES, SCALES],
    )
    (hsv, _), (hue, _), (saturation, _) = outs
    for i, image in enumerate(images):
        assert_close(hsv[i], _rounded(reference(image, brightness=1.2, saturation=SCALES[i], hue=HUES[i])))
        assert_close(hue[i], reference(image, hue=HUES[i]).astype(np.float32))
        assert_close(saturation[i], _rounded(reference(image, saturation=SCALES[i])))


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_brightness_contrast_formula(ours, images, device):
    two_channel = [np.ascontiguousarray(i[:, :, 1:]) for i in images]
    (out, layout), (floats, _) = ours(
        two_channel,
        lambda x, b, c: (
            fn.brightness_contrast(x, brightness=b, contrast=c, brightness_shift=0.05, device=device),
            fn.brightness_contrast(x, brightness=b, contrast_center=10.0, dtype=types.FLOAT, device=device),
        ),
        "HWC",
        per_sample=[SCALES, SCALES[::-1]],
    )
    assert layout == "HWC"
    for i, image in enumerate(two_channel):
        pixels = image.astype(np.float64)
        expected = 0.05 * 255 + SCALES[i] * (128 + SCALES[::-1][i] * (pixels - 128))
        assert_close(out[i], _rounded(expected))
        assert_close(floats[i], (SCALES[i] * pixels).astype(np.float32))


def test_refusals(ours, images):
    with pytest.raises(ArgumentError, match="hue: image_type must be types.RGB"):
        ours(images, lambda x: fn.hue(x, image_type=types.BGR), "HWC")
    with pytest.raises(ArgumentError, match="hsv: expects HWC or FHWC input"):
        ours([np.ascontiguousarray(i.transpose(2, 0, 1)) for i in images], lambda x: fn.hsv(x), "CHW")


def test_a_batch_array_is_adjusted_at_once_as_each_sample_alone():
    batch = np.random.default_rng(4).integers(0, 256, (4, 7, 9, 3), dtype=np.uint8)
    ctxs = SampleContexts(0, 0, np.arange(4))
    args = {"brightness": SCALES, "contrast_center": CENTERS}
    op = BrightnessContrast("gpu", 0, brightness_shift=0.1, contrast=1.3)
    together = op.run_batch(np, [batch], args, ctxs)
    assert isinstance(together, np.ndarray) and together.shape == batch.shape
    for i in range(4):
        alone = op.run_sample([batch[i]], {k: v[i] for k, v in args.items()}, ctxs[i])
        np.testing.assert_array_equal(together[i], alone)
