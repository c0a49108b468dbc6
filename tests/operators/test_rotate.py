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


_VOLUME = np.random.default_rng(1).integers(0, 256, (5, 6, 7, 2), dtype=np.uint8)

#: (arguments, output shape): DALI 2.4's shapes for the (5, 6, 7, 2) volume
VOLUME_CASES = [
    ({"angle": 30, "axis": [1, 1, 0]}, (9, 8, 9, 2)),
    ({"angle": 45, "axis": [0, 1, 0], "interp_type": types.INTERP_NN}, (9, 6, 9, 2)),
    ({"angle": 20, "axis": [1, 0, 1], "keep_size": True, "fill_value": 9}, (5, 6, 7, 2)),
    ({"angle": 20, "axis": [1, 0, 1], "size": [4, 9, 8]}, (4, 9, 8, 2)),
    ({"angle": 33, "axis": [0.3, -1, 2], "dtype": types.FLOAT}, (7, 10, 11, 2)),
    ({"angle": 90, "axis": [1, 0, 0]}, (6, 5, 7, 2)),
]


def _turned(volume, angle, axis, shape, fill=None, nearest=False):
    """The rotation voxel by voxel: each output centre turned back about the centres, then the 8
    voxels around it weighed (nearest: the voxel under it); outside, ``fill`` or the border voxel."""
    x, y, z = np.asarray(axis, float) / np.linalg.norm(axis)
    k = np.array([[0, -z, y], [z, 0, -x], [-y, x, 0]])
    theta = np.radians(angle)
    turn = np.eye(3) + np.sin(theta) * k + (1 - np.cos(theta)) * k @ k
    depth, height, width, channels = volume.shape
    out = np.empty((*shape, channels))
    for d, h, w in np.ndindex(*shape):
        point = np.array([w + 0.5 - shape[2] / 2, h + 0.5 - shape[1] / 2, d + 0.5 - shape[0] / 2])
        sx, sy, sz = turn.T @ point + np.array([width, height, depth]) / 2
        if nearest:
            corners = [((int(np.floor(sz)), int(np.floor(sy)), int(np.floor(sx))), 1.0)]
        else:
            z0, y0, x0 = np.floor(sz - 0.5), np.floor(sy - 0.5), np.floor(sx - 0.5)
            fz, fy, fx = sz - 0.5 - z0, sy - 0.5 - y0, sx - 0.5 - x0
            corners = [
                (
                    (int(z0) + a, int(y0) + b, int(x0) + c),
                    (fz if a else 1 - fz) * (fy if b else 1 - fy) * (fx if c else 1 - fx),
                )
                for a in (0, 1)
                for b in (0, 1)
                for c in (0, 1)
            ]
        total = np.zeros(channels)
        for (i, j, m), weight in corners:
            inside = 0 <= i < depth and 0 <= j < height and 0 <= m < width
            if fill is not None and not inside:
                total += fill * weight
            else:
                total += (
                    volume[min(max(i, 0), depth - 1), min(max(j, 0), height - 1), min(max(m, 0), width - 1)] * weight
                )
        out[d, h, w] = total
    return out


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize(("args", "shape"), VOLUME_CASES)
def test_volumes_turn_about_an_axis_as_dalis(ours, device, args, shape):
    """DALI 2.4's output shapes (the rotated extent, its parity kept), and a voxel-by-voxel
    reference: integers within one level (a float rounding tie), floats within float32 rounding."""
    ((mine, layout),) = ours([_VOLUME], lambda x: fn.rotate(x.gpu() if device == "gpu" else x, **args), "DHWC")
    assert layout == "DHWC" and mine[0].shape == shape
    expected = _turned(
        _VOLUME,
        args["angle"],
        args["axis"],
        shape[:3],
        fill=args.get("fill_value"),
        nearest=args.get("interp_type") == types.INTERP_NN,
    )
    if "dtype" in args:
        assert mine[0].dtype == np.float32
        np.testing.assert_allclose(mine[0], expected, rtol=1e-5, atol=1e-3)
    else:
        assert mine[0].dtype == np.uint8
        assert np.abs(mine[0].astype(float) - np.clip(np.rint(expected), 0, 255)).max() <= 1


@pytest.mark.parametrize(("args", "shape"), VOLUME_CASES)
def test_volumes_against_dali(ours, dali, args, shape):
    def theirs_args(t):  # the same arguments with DALI's own enums
        named = {"interp_type": "DALIInterpType", "dtype": "DALIDataType"}
        return {k: getattr(getattr(t, named[k]), v.name) if k in named else v for k, v in args.items()}

    theirs = dali([_VOLUME], lambda x, f, t: f.rotate(x, **theirs_args(t)), "DHWC")
    mine = ours([_VOLUME], lambda x: fn.rotate(x, **args), "DHWC")
    assert mine[0][1] == theirs[0][1]
    np.testing.assert_allclose(mine[0][0][0], theirs[0][0][0], rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize(
    ("axis", "axes", "turns"), [([0, 0, 1], (1, 2), -1), ([1, 0, 0], (0, 1), -1), ([0, 1, 0], (0, 2), 1)]
)
def test_a_quarter_turn_of_a_volume_moves_its_voxels_exactly(ours, axis, axes, turns):
    """90 degrees about z turns each depth slice (height and width swap), about x the depth and
    height, about y the depth and width; ``DHW`` volumes (no channels) too."""
    for volume, layout in ((_VOLUME, "DHWC"), (_VOLUME[..., 0], "DHW")):
        ((mine, _),) = ours([volume], lambda x: fn.rotate(x, angle=90, axis=axis), layout)
        np.testing.assert_array_equal(mine[0], np.rot90(volume, turns, axes=axes))


def test_per_sample_angles_and_axes_and_what_a_volume_needs(ours):
    angles, axes = [np.float32(90), np.float32(90)], [np.array([0, 0, 1], np.float32), np.array([1, 0, 0], np.float32)]
    ((mine, _),) = ours(
        [_VOLUME, _VOLUME],
        lambda x, angle, axis: fn.rotate(x, angle=angle, axis=axis),
        "DHWC",
        per_sample=[angles, axes],
    )
    np.testing.assert_array_equal(mine[0], np.rot90(_VOLUME, -1, axes=(1, 2)))
    np.testing.assert_array_equal(mine[1], np.rot90(_VOLUME, -1, axes=(0, 1)))
    with pytest.raises(rp.SampleError, match=r"a volume \(DHWC\) needs axis=\(x, y, z\)"):
        ours([_VOLUME], lambda x: fn.rotate(x, angle=30), "DHWC")
    with pytest.raises(rp.ArgumentError, match="axis must be three numbers"):
        ours([_VOLUME], lambda x: fn.rotate(x, angle=30, axis=[0, 0, 0]), "DHWC")
    with pytest.raises(rp.SampleError, match=r"size \(depth, height, width\) is a volume's"):
        ours([_VOLUME[0]], lambda x: fn.rotate(x, angle=30, size=[4, 5, 6]), "HWC")
    image = _VOLUME[0, :, :, :1].repeat(3, axis=2)
    ((turned, _),) = ours([image], lambda x: fn.rotate(x, angle=30, axis=[1, 0, 0]), "HWC")
    ((plain, _),) = ours([image], lambda x: fn.rotate(x, angle=30), "HWC")
    np.testing.assert_array_equal(turned[0], plain[0])  # an image ignores the axis, as DALI's
