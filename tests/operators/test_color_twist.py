"""color_twist on decoded JPEGs, against an independent per-pixel float64 reference.

The reference converts every pixel to YIQ with the explicit formulas, rotates (I, Q) by
the hue and scales them by the saturation, converts back by solving the 3x3 system,
then applies ``brightness * (contrast * (x - 128) + 128)``. The operator works in
float32, so a uint8 result may differ from the rounded float64 one by 1 where the
exact value is within ~1e-4 of a rounding tie: the tests allow a difference of 1 on
at most 0.1% of the values. Float outputs are compared within atol 1e-3 (values up
to a few hundred, float32 relative error ~1e-7 per operation).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, types

RGB_TO_YIQ = np.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.321], [0.211, -0.523, 0.311]])


def reference(image, brightness=1.0, contrast=1.0, saturation=1.0, hue=0.0, half_range=128.0) -> np.ndarray:
    """The colour twist of every pixel in float64, unrounded."""
    r, g, b = (image[..., k].astype(np.float64) for k in range(3))
    y = 0.299 * r + 0.587 * g + 0.114 * b
    i = 0.596 * r - 0.274 * g - 0.321 * b
    q = 0.211 * r - 0.523 * g + 0.311 * b
    h = math.radians(hue)
    i2 = saturation * (math.cos(h) * i + math.sin(h) * q)
    q2 = saturation * (-math.sin(h) * i + math.cos(h) * q)
    yiq = np.stack([y, i2, q2], axis=-1)
    rgb = np.linalg.solve(RGB_TO_YIQ, yiq.reshape(-1, 3).T).T.reshape(image.shape)
    return brightness * (contrast * (rgb - half_range) + half_range)


def to_uint8(values: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(values), 0, 255).astype(np.uint8)


def assert_close_uint8(got: np.ndarray, expected: np.ndarray) -> None:
    diff = np.abs(got.astype(np.int16) - expected.astype(np.int16))
    assert diff.max() <= 1
    assert np.count_nonzero(diff) <= 1e-3 * diff.size


def run(files, device, batch_size=4, **twist_args):
    @rp.pipeline_def(batch_size=batch_size, num_threads=2, seed=11)
    def pipe():
        jpegs, _ = fn.readers.file(files=files[:batch_size])
        images = fn.decoders.image(jpegs)
        return fn.color_twist(images, device=device, **twist_args), images

    with pipe() as p:
        out, images = p.run()
    out = out.as_cpu()
    return [out.at(i) for i in range(len(out))], [images.at(i) for i in range(len(images))]


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_random_per_sample_arguments_match_reference(jpeg_files, device):
    @rp.pipeline_def(batch_size=4, num_threads=2, seed=7)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:4])
        images = fn.decoders.image(jpegs)
        params = {
            "brightness": fn.random.uniform(range=(0.6, 1.4)),
            "contrast": fn.random.uniform(range=(0.6, 1.4)),
            "saturation": fn.random.uniform(range=(0.0, 2.0)),
            "hue": fn.random.uniform(range=(-180.0, 180.0)),
        }
        return fn.color_twist(images, device=device, **params), images, *params.values()

    with pipe() as p:
        out, images, *params = p.run()
    out = out.as_cpu()
    values = [np.asarray(v) for v in params]
    assert all(len(set(v.tolist())) == 4 for v in values)
    for i in range(4):
        b, c, s, h = (float(v[i]) for v in values)
        got = out.at(i)
        assert got.dtype == np.uint8 and got.shape == images.at(i).shape
        assert_close_uint8(got, to_uint8(reference(images.at(i), b, c, s, h)))


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_static_arguments_and_float_output(jpeg_files, device):
    args = {"brightness": 1.1, "contrast": 0.7, "saturation": 1.6, "hue": 25.0}
    outs, images = run(jpeg_files, device, dtype=types.FLOAT, **args)
    for got, image in zip(outs, images, strict=True):
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, reference(image, **args), rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_neutral_arguments_return_the_input(jpeg_files, device):
    outs, images = run(jpeg_files, device)
    for got, image in zip(outs, images, strict=True):
        np.testing.assert_array_equal(got, image)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_zero_saturation_gives_gray(jpeg_files, device):
    outs, images = run(jpeg_files, device, saturation=0.0)
    for got, image in zip(outs, images, strict=True):
        channels = got.astype(np.int16)
        assert np.abs(channels - channels[..., :1]).max() <= 1
        luma = image.astype(np.float64) @ RGB_TO_YIQ[0]
        assert np.abs(channels - luma[..., None]).max() <= 1.5  # (1, 1, 1) * luma within 0.3%, then rounded
        assert np.abs(image.astype(np.int16) - image[..., :1]).max() > 50


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_full_hue_turn_is_identity(jpeg_files, device):
    outs, images = run(jpeg_files, device, hue=360.0)
    for got, image in zip(outs, images, strict=True):
        assert np.abs(got.astype(np.int16) - image).max() <= 1


def test_contrast_and_brightness_on_float_input(jpeg_files):
    """Float images use half_range 0.5 and keep their float type (no rounding, no clamping)."""

    @rp.pipeline_def(batch_size=2, num_threads=1, seed=0)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:2])
        images = fn.decoders.image(jpegs)
        unit = fn.crop_mirror_normalize(images, std=255.0, output_layout="HWC")
        return fn.color_twist(unit, brightness=1.5, contrast=0.5), images

    with pipe() as p:
        out, images = p.run()
    for i in range(2):
        unit = images.at(i).astype(np.float64) / 255.0
        got = out.at(i)
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, 1.5 * (0.5 * (unit - 0.5) + 0.5), rtol=1e-5, atol=1e-5)


def test_gray_input_is_rejected(jpeg_files):
    @rp.pipeline_def(batch_size=1, num_threads=1, seed=0)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:1])
        return fn.color_twist(fn.decoders.image(jpegs, output_type=types.GRAY), hue=10.0)

    with pipe() as p:
        with pytest.raises(rp.SampleError, match=r"color_twist: expects HWC RGB images or FHWC sequences, got a"):
            p.run()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"brightness": "bright"}, "brightness must be a number"),
        ({"hue": float("inf")}, "hue must be finite"),
        ({"dtype": str}, "dtype must be a numeric or bool type"),
        ({"value": 1.0}, "unexpected keyword argument 'value'"),
    ],
)
def test_argument_errors(jpeg_files, kwargs, match):
    @rp.pipeline_def(batch_size=1, num_threads=1)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:1])
        return fn.color_twist(fn.decoders.image(jpegs), **kwargs)

    with pipe() as p:
        with pytest.raises(rp.ArgumentError, match=f"color_twist: .*{match}"):
            p.build()


def test_image_type_rgb_is_taken_and_another_refused(ours):
    image = np.random.default_rng(12).integers(0, 256, (5, 6, 3), dtype=np.uint8)
    ((given, _), (default, _)) = ours(
        [image],
        lambda x: (fn.color_twist(x, hue=30.0, image_type=types.RGB), fn.color_twist(x, hue=30.0)),
        "HWC",
    )
    np.testing.assert_array_equal(given[0], default[0])
    with pytest.raises(rp.ArgumentError, match="color_twist: image_type must be types.RGB"):
        ours([image], lambda x: fn.color_twist(x, hue=30.0, image_type=types.BGR), "HWC")
