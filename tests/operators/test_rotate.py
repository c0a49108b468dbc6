"""``rotate``: Pillow's geometry and output size, parity on both devices, per-sample angles."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

import raypipe as rp
from raypipe import fn, types
from raypipe.operators.rotate import Rotate, rotation

# The GPU path maps pixels with the same float64 matrix and bilinear rule as Pillow and
# truncates like it, so on the host it is exact. On a device, float rounding may flip a
# truncation (one level) or decide differently whether a source point on the image's
# edge is inside (that pixel becomes fill). Hence: at least 99% of pixels within one
# level and a mean absolute difference under 0.5.
GPU_WITHIN_ONE = 0.99
GPU_MEAN_DIFF = 0.5


def _samples(tl) -> list[np.ndarray]:
    tl = tl.as_cpu()
    return [np.asarray(tl.at(i)) for i in range(len(tl))]


def _pillow(image: np.ndarray, angle: float, keep_size: bool, fill: int) -> np.ndarray:
    return np.asarray(
        Image.fromarray(image).rotate(
            angle, resample=Image.Resampling.BILINEAR, expand=not keep_size, fillcolor=(fill,) * 3
        )
    )


def _check_parity(device: str, got: np.ndarray, ref: np.ndarray) -> None:
    assert got.shape == ref.shape and got.dtype == np.uint8
    diff = np.abs(got.astype(np.int32) - ref)
    if device == "cpu":
        assert diff.max() == 0
    else:
        assert (diff <= 1).mean() >= GPU_WITHIN_ONE and diff.mean() < GPU_MEAN_DIFF


@settings(max_examples=150, deadline=None)
@given(
    width=st.integers(1, 64),
    height=st.integers(1, 64),
    angle=st.floats(-720, 720, allow_nan=False),
    expand=st.booleans(),
)
def test_output_size_matches_pillow(width, height, angle, expand):
    expected = Image.new("L", (width, height)).rotate(angle, expand=expand).size
    assert rotation(width, height, angle, expand)[:2] == expected


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize(("angle", "keep_size"), [(17.5, False), (-30.0, True), (90.0, False), (200.0, False)])
def test_fixed_angle_matches_pillow(jpeg_files, device, angle, keep_size):
    @rp.pipeline_def(batch_size=2, num_threads=2, seed=1)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:2])
        images = fn.decoders.image(jpegs)
        return fn.rotate(images, device=device, angle=angle, keep_size=keep_size, fill_value=40), images

    with pipe() as p:
        out, src = p.run()
    assert out.layout() == "HWC"
    for got, image in zip(_samples(out), _samples(src)):
        if keep_size:
            assert got.shape == image.shape
        _check_parity(device, got, _pillow(image, angle, keep_size, 40))


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_per_sample_angle(jpeg_files, device):
    @rp.pipeline_def(batch_size=4, num_threads=2, seed=4)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:4])
        images = fn.decoders.image(jpegs)
        angle = fn.random.uniform(range=(-10, 10))
        return fn.rotate(images, device=device, angle=angle, fill_value=0), images, angle

    with pipe() as p:
        out, src, angles = (_samples(tl) for tl in p.run())
    assert len({float(a) for a in angles}) == 4
    for got, image, angle in zip(out, src, angles):
        assert got.shape[:2] == rotation(image.shape[1], image.shape[0], float(angle), True)[1::-1]
        _check_parity(device, got, _pillow(image, float(angle), False, 0))


def test_gray_images_rotate_per_channel(jpeg_files):
    @rp.pipeline_def(batch_size=2, num_threads=1, seed=1)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:2])
        images = fn.decoders.image(jpegs, output_type=rp.types.GRAY)
        return fn.rotate(images, angle=12.0, fill_value=255), images

    with pipe() as p:
        out, src = p.run()
    for got, image in zip(_samples(out), _samples(src)):
        ref = np.asarray(Image.fromarray(image[:, :, 0]).rotate(12.0, Image.Resampling.BILINEAR, True, fillcolor=255))
        np.testing.assert_array_equal(got, ref[:, :, None])


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_missing_angle_is_an_error(jpeg_files, device):
    @rp.pipeline_def(batch_size=1, num_threads=1, seed=0)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:1])
        return fn.rotate(fn.decoders.image(jpegs), device=device)

    with pipe() as p, pytest.raises(rp.SampleError, match="rotate: angle is required"):
        p.run()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"angle": "left"}, "angle must be a number of degrees, got 'left'"),
        ({"angle": float("inf")}, "angle must be finite"),
        ({"angle": 5, "fill_value": "red"}, "fill_value must be a number, got 'red'"),
        ({"angle": 5, "interp_type": "cubic"}, "interp_type types.INTERP_CUBIC is not supported"),
        ({"angle": 5, "size": (10,)}, r"rotate: size must be \(height, width\)"),
        ({"angle": 5, "size": (10, 0)}, "rotate: size must be positive"),
        ({"angle": 5, "size": (10, 12), "keep_size": True}, "rotate: give size or keep_size=True, not both"),
    ],
)
def test_invalid_arguments_are_named(jpeg_files, args, message):
    @rp.pipeline_def(batch_size=1, num_threads=1, seed=0)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:1])
        return fn.rotate(fn.decoders.image(jpegs), **args)

    p = pipe()
    with pytest.raises(rp.ArgumentError, match=message):
        p.build()
    p.close()


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize(("angle", "size"), [(30.0, (40.4, 70)), (-17.0, (20, 24)), (90.0, (53, 37))])
def test_a_given_size_centres_the_rotation_in_it_as_dali(ours, dali, device, angle, size):
    """``size`` (rounded) is the output's height and width, the rotated image centred in it: DALI's
    pixels within a level (its linear values rounded, these truncated), border repeated."""
    image = np.random.default_rng(4).integers(0, 256, (37, 53, 3), dtype=np.uint8)

    def build(x, f, t):
        return f.rotate(x, angle=angle, size=size)

    ((mine, _),) = ours([image], lambda x: build(x.gpu() if device == "gpu" else x, fn, types), layout="HWC")
    ((theirs, _),) = dali([image], build, layout="HWC")
    assert mine[0].shape == theirs[0].shape == (round(size[0]), round(size[1]), 3)
    diff = np.abs(mine[0].astype(np.int32) - theirs[0])
    assert (diff <= 1).mean() >= 0.99 and diff.mean() < 0.6


@pytest.mark.parametrize("angle", [17.5, -40.0, 90.0, 200.0])
@pytest.mark.parametrize("keep_size", [False, True])
def test_nearest_host_and_array_paths_agree(images, angle, keep_size):
    """Pillow's ``NEAREST`` rotate on the host, the array path elsewhere, with Pillow's 16.16 fixed-point
    mapping: the same pixels."""
    op = Rotate("cpu", 0, angle=angle, keep_size=keep_size, fill_value=9, interp_type=types.INTERP_NN)
    for image in images:
        host = op.run_sample([image], {}, None)
        array = op.compute(np, [image], {}, None)
        assert host.shape == array.shape and host.dtype == array.dtype == np.uint8
        np.testing.assert_array_equal(host, array)
        np.testing.assert_array_equal(
            host,
            np.asarray(
                Image.fromarray(image).rotate(angle, Image.Resampling.NEAREST, not keep_size, fillcolor=(9,) * 3)
            ),
        )


@pytest.mark.parametrize("angle", [90.0, 180.0, 270.0, -90.0])
@pytest.mark.parametrize("interp", ["INTERP_NN", "INTERP_LINEAR"])
def test_quarter_turns_are_dalis_exactly(ours, dali, images, angle, interp):
    def build(x, fn, types):
        return fn.rotate(x, angle=angle, interp_type=getattr(types, interp))

    theirs = dali(images, build, "HWC")
    mine = ours(images, lambda x: build(x, fn, types), "HWC")
    for their, my in zip(theirs[0][0], mine[0][0], strict=True):
        np.testing.assert_array_equal(my, their)


def test_nearest_float_images_take_the_fill_value():
    image = np.arange(5 * 4 * 2, dtype=np.float32).reshape(5, 4, 2)
    got = Rotate("cpu", 0, angle=45.0, fill_value=-1.5, interp_type="INTERP_NN").run_sample([image], {}, None)
    assert got.dtype == np.float32 and got[0, 0].tolist() == [-1.5, -1.5]
    assert set(np.unique(got[got != -1.5])) <= set(image.reshape(-1).tolist())


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("interp", ["INTERP_NN", "INTERP_LINEAR"])
@pytest.mark.parametrize(("angle", "keep_size"), [(30.0, False), (17.3, True), (-45.0, False)])
def test_without_a_fill_value_the_border_repeats_as_in_dali(ours, dali, device, interp, angle, keep_size):
    """DALI clamps the source coordinates when ``fill_value`` is left out: corners that the image
    does not cover repeat its border pixels (not 0). Linear values are truncated here (Pillow's
    rule) where DALI rounds: at most one level apart; nearest picks differ only where a source point
    lies on a pixel edge."""
    image = np.random.default_rng(3).integers(0, 256, (37, 53, 3), dtype=np.uint8)

    def build(x, f, t):
        return f.rotate(x, angle=angle, keep_size=keep_size, interp_type=getattr(t, interp))

    ((mine, _),) = ours([image], lambda x: build(x.gpu() if device == "gpu" else x, fn, types), layout="HWC")
    ((theirs, _),) = dali([image], build, layout="HWC")
    diff = np.abs(mine[0].astype(np.int32) - theirs[0])
    assert mine[0].shape == theirs[0].shape
    assert (diff <= 1).mean() >= 0.99 and diff.mean() < 0.6
    corner = mine[0][0, 0]
    assert corner.any(), "a corner outside the rotated image repeats a border pixel instead of 0"


@pytest.mark.parametrize(("angle", "keep_size"), [(17.5, True), (-41.0, False), (90.0, True)])
def test_the_border_repeated_on_the_host_with_torch_is_the_array_paths_within_a_level(monkeypatch, angle, keep_size):
    """Without a fill value the host rotates with torch's ``grid_sample`` where torch is installed:
    the array path's values (float64) within one level, from computing in float32."""
    from raypipe.operators import rotate as module

    if module.host_torch() is None:
        pytest.skip("torch is not installed")
    image = np.random.default_rng(4).integers(0, 256, (37, 52, 3), dtype=np.uint8)
    op = Rotate("cpu", 0, angle=angle, keep_size=keep_size)
    with_torch = op.run_sample([image], {}, None)
    monkeypatch.setattr(module, "host_torch", lambda: None)
    array_path = op.run_sample([image], {}, None)
    assert with_torch.shape == array_path.shape and with_torch.dtype == np.uint8
    assert np.abs(with_torch.astype(int) - array_path).max() <= 1


@pytest.mark.parametrize("kwargs", [{"angle": 30.0}, {"angle": -17.0, "keep_size": True}, {"angle": 90.0}])
def test_dtype_float_rotates_the_values_as_floats_as_dali(ours, dali, kwargs):
    """``dtype=types.FLOAT`` rotates a uint8 image's values unrounded: in DALI, what its rotate of the image
    cast to float gives; here the same within a twentieth of a level (DALI maps coordinates in float32)."""
    image = np.random.default_rng(5).integers(0, 256, (37, 53, 3), dtype=np.uint8)

    def build(x, f, t):
        return f.rotate(x, dtype=t.FLOAT, **kwargs), f.rotate(f.cast(x, dtype=t.FLOAT), **kwargs)

    (theirs, theirs_cast) = dali([image], build, layout="HWC")
    np.testing.assert_array_equal(theirs[0][0], theirs_cast[0][0])
    ((mine, _), _) = ours([image], lambda x: build(x, fn, types), layout="HWC")
    assert mine[0].dtype == np.float32 and mine[0].shape == theirs[0][0].shape
    np.testing.assert_allclose(mine[0], theirs[0][0], atol=0.05)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize(("fill", "stored"), [(6.5, 7.0), (2.4, 2.0), (-3.0, 0.0), (300.0, 255.0)])
def test_dtype_float_takes_the_fill_value_in_the_inputs_type_as_dali(ours, device, fill, stored):
    """With ``dtype=types.FLOAT``, DALI rounds ``fill_value`` (ties away from zero) and saturates it to the
    input's type first: 6.5 fills a uint8 image's corners with 7.0, -3 with 0.0 (measured in DALI 2.4)."""
    image = np.random.default_rng(7).integers(0, 256, (11, 13, 3), dtype=np.uint8)

    def build(x, f, t):
        return f.rotate(x, angle=30.0, dtype=t.FLOAT, fill_value=fill)

    ((mine, _),) = ours([image], lambda x: build(x.gpu() if device == "gpu" else x, fn, types), layout="HWC")
    assert mine[0].dtype == np.float32 and mine[0][0, 0].tolist() == [stored] * 3


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize(("angle", "interp"), [(30.0, "INTERP_LINEAR"), (-45.0, "INTERP_NN"), (180.0, "INTERP_LINEAR")])
def test_dtype_float_is_the_rotation_of_the_image_cast_to_float(ours, device, angle, interp):
    """Without DALI: ``dtype=types.FLOAT`` (and a dtype equal to the input's) gives exactly what rotating the
    cast image (and the image) gives, on either device."""
    image = np.random.default_rng(6).integers(0, 256, (21, 30, 3), dtype=np.uint8)

    def build(x):
        x = x.gpu() if device == "gpu" else x
        kw = {"angle": angle, "interp_type": getattr(types, interp), "fill_value": 3}
        return (
            fn.rotate(x, dtype=types.FLOAT, **kw),
            fn.rotate(fn.cast(x, dtype=types.FLOAT), **kw),
            fn.rotate(x, dtype=types.UINT8, **kw),
            fn.rotate(x, **kw),
        )

    ((typed, _), (cast, _), (same, _), (plain, _)) = ours([image], build, layout="HWC")
    assert typed[0].dtype == np.float32 and same[0].dtype == np.uint8
    np.testing.assert_array_equal(typed[0], cast[0])
    np.testing.assert_array_equal(same[0], plain[0])


def test_dtype_other_than_the_inputs_or_float_is_refused_naming_the_sample():
    @rp.pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        x = fn.external_source(source=lambda: [np.zeros((4, 5, 3), np.uint8)], batch=True, layout="HWC")
        return fn.rotate(x, angle=10.0, dtype=types.INT16)

    with pipe() as p, pytest.raises(rp.SampleError, match=r"sample 0 .*cannot give int16 from uint8 input"):
        p.run()


def test_output_dtype_is_dalis_deprecated_alias_of_dtype(ours):
    image = np.random.default_rng(10).integers(0, 256, (9, 11, 3), dtype=np.uint8)
    ((alias, _), (dtype, _)) = ours(
        [image],
        lambda x: (
            fn.rotate(x, angle=20.0, output_dtype=types.FLOAT),
            fn.rotate(x, angle=20.0, dtype=types.FLOAT),
        ),
        "HWC",
    )
    assert alias[0].dtype == np.float32
    np.testing.assert_array_equal(alias[0], dtype[0])
    with pytest.raises(rp.ArgumentError, match="rotate: dtype and its deprecated alias output_dtype cannot be used"):
        Rotate("cpu", 0, angle=1.0, dtype=types.FLOAT, output_dtype=types.FLOAT)
