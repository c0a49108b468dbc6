"""``crop``: DALI's anchor rule, per-sample positions, out-of-bounds policies, argument errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import raypipe as rp
from raypipe import fn, types
from raypipe.operators.crop import Crop, crop_window


def _samples(tl) -> list[np.ndarray]:
    tl = tl.as_cpu()
    return [np.asarray(tl.at(i)) for i in range(len(tl))]


def _run(files, device, pos_x=None, **crop_args):
    """Crop outputs, source images and (when ``pos_x`` is a range) the drawn crop_pos_x values."""

    @rp.pipeline_def(batch_size=len(files), num_threads=2, seed=11)
    def pipe():
        jpegs, _ = fn.readers.file(files=files)
        images = fn.decoders.image(jpegs)
        if pos_x is None:
            return fn.crop(images, device=device, **crop_args), images
        x = fn.random.uniform(range=pos_x)
        return fn.crop(images, device=device, crop_pos_x=x, **crop_args), images, x

    with pipe() as p:
        outs = p.run()
    assert outs[0].device == ("gpu" if device == "gpu" else "cpu")
    return [_samples(tl) for tl in outs]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((375, 500, 224, 224, 0.5, 0.5), (76, 138)),  # 75.5 rounds away from zero
        ((375, 500, 224, 224, 0.0, 0.0), (0, 0)),
        ((375, 500, 224, 224, 1.0, 1.0), (151, 276)),
        ((100, 100, 120, 120, 0.5, 0.5), (-10, -10)),
        ((100, 100, 121, 121, 0.5, 0.5), (-11, -11)),  # -10.5 rounds away from zero
        ((10, 10, 10, 10, 0.3, 0.7), (0, 0)),
        ((375, 500, 224, 224, 0.5, 0.5, "truncate"), (75, 138)),  # 75.5 truncated
        ((100, 100, 121, 121, 0.5, 0.5, "truncate"), (-10, -10)),  # -10.5 truncated toward zero
    ],
)
def test_crop_window_follows_dali_rounding(args, expected):
    assert crop_window(*args) == expected


@given(
    in_h=st.integers(1, 2000),
    in_w=st.integers(1, 2000),
    frac_h=st.floats(0, 1),
    frac_w=st.floats(0, 1),
    pos_x=st.floats(0, 1),
    pos_y=st.floats(0, 1),
)
def test_crop_window_stays_inside_when_the_crop_fits(in_h, in_w, frac_h, frac_w, pos_x, pos_y):
    crop_h, crop_w = max(1, int(in_h * frac_h)), max(1, int(in_w * frac_w))
    y0, x0 = crop_window(in_h, in_w, crop_h, crop_w, pos_x, pos_y)
    assert 0 <= y0 <= in_h - crop_h and 0 <= x0 <= in_w - crop_w


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_crop_matches_numpy_slice(jpeg_files, device):
    outs, srcs = _run(jpeg_files[:4], device, crop=(200, 300), crop_pos_x=0.25, crop_pos_y=0.75)
    for got, src in zip(outs, srcs):
        y0, x0 = crop_window(src.shape[0], src.shape[1], 200, 300, 0.25, 0.75)
        np.testing.assert_array_equal(got, src[y0 : y0 + 200, x0 : x0 + 300])


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_per_sample_position(jpeg_files, device):
    outs, srcs, xs = _run(jpeg_files[:4], device, pos_x=(0.0, 1.0), crop_h=100, crop_w=150)
    assert len({float(x) for x in xs}) == 4
    for got, src, x in zip(outs, srcs, xs):
        y0, x0 = crop_window(src.shape[0], src.shape[1], 100, 150, float(x), 0.5)
        np.testing.assert_array_equal(got, src[y0 : y0 + 100, x0 : x0 + 150])


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_crop_larger_than_image_is_an_error_naming_both_sizes(jpeg_files, device):
    @rp.pipeline_def(batch_size=2, num_threads=1, seed=0)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:2])
        return fn.crop(fn.decoders.image(jpegs), device=device, crop=(1000, 100))

    with (
        pipe() as p,
        pytest.raises(rp.SampleError, match=r"1000x100 \(h x w\) window does not fit in the \d+x\d+ image"),
    ):
        p.run()


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_pad_policy_fills_outside_the_image(jpeg_files, device):
    crop_h, crop_w = 500, 700
    outs, srcs = _run(
        jpeg_files[:3],
        device,
        crop=(crop_h, crop_w),
        crop_pos_x=0.0,
        out_of_bounds_policy="pad",
        fill_values=(1, 2, 3),
    )
    for got, src in zip(outs, srcs):
        in_h, in_w = src.shape[:2]
        y0, x0 = crop_window(in_h, in_w, crop_h, crop_w, 0.0, 0.5)
        expected = np.empty((crop_h, crop_w, 3), np.uint8)
        expected[...] = (1, 2, 3)
        expected[-y0 : -y0 + in_h, -x0 : -x0 + in_w] = src
        assert x0 == 0 and y0 < 0
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_per_sample_position_out_of_range_is_an_error(jpeg_files, device):
    @rp.pipeline_def(batch_size=1, num_threads=1, seed=0)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:1])
        x = fn.random.uniform(range=(1.5, 2.0))
        return fn.crop(fn.decoders.image(jpegs), device=device, crop=(10, 10), crop_pos_x=x)

    with pipe() as p, pytest.raises(rp.SampleError, match=r"crop_pos_x must be in \[0, 1\]"):
        p.run()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, r"give crop=\(h, w\), or both crop_h and crop_w"),
        ({"crop_h": 10}, r"give crop=\(h, w\), or both crop_h and crop_w"),
        ({"crop": (10, 10), "crop_w": 5}, "not both"),
        ({"crop": (10, 0)}, "at least 1"),
        ({"crop": (1, 2, 3, 4)}, r"crop must be a size, a pair \(h, w\) or a triple \(d, h, w\)"),
        ({"crop": 10, "crop_pos_y": -0.1}, r"crop_pos_y must be in \[0, 1\]"),
        ({"crop": 10, "crop_pos_x": "left"}, "crop_pos_x must be a number"),
        ({"crop": 10, "out_of_bounds_policy": "trim"}, "out_of_bounds_policy must be one of"),
        ({"crop": 10, "fill_values": "grey"}, "fill_values must be numbers"),
    ],
)
def test_invalid_arguments_are_named(jpeg_files, args, message):
    @rp.pipeline_def(batch_size=1, num_threads=1, seed=0)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:1])
        return fn.crop(fn.decoders.image(jpegs), **args)

    p = pipe()
    with pytest.raises(rp.ArgumentError, match=f"crop: .*{message}"):
        p.build()
    p.close()


@pytest.mark.parametrize(
    "dtype, expected", [(types.FLOAT, np.float32), (types.FLOAT16, np.float16), (types.UINT8, np.uint8)]
)
def test_dtype_casts_the_window(jpeg_files, dtype, expected):
    @rp.pipeline_def(batch_size=2, num_threads=1, seed=0)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:2])
        images = fn.decoders.image(jpegs)
        return fn.crop(images, crop=(16, 24), dtype=dtype), fn.crop(images, crop=(16, 24))

    with pipe() as p:
        cast, plain = p.run()
    assert cast.as_tensor().dtype == expected
    np.testing.assert_array_equal(cast.as_tensor().astype(np.float32), plain.as_tensor().astype(np.float32))
    with pytest.raises(rp.ArgumentError, match="FLOAT, FLOAT16 or UINT8"):
        Crop("cpu", 0, crop=(2, 2), dtype=types.INT32)


VOLUME_DHWC = np.arange(6 * 9 * 11 * 2, dtype=np.uint8).reshape(6, 9, 11, 2)
VOLUME_CDHW = np.ascontiguousarray(VOLUME_DHWC.transpose(3, 0, 1, 2))

# (id, samples, layout, build(data, fn, types)): 3-D crops, both volume layouts, deprecated arguments
CASES_3D = [
    ("dhwc", [VOLUME_DHWC], "DHWC", lambda x, fn, types: fn.crop(x, crop=(3, 4, 5), crop_pos_z=0.3)),
    ("cdhw", [VOLUME_CDHW], "CDHW", lambda x, fn, types: fn.crop(x, crop=(3, 4, 5), crop_pos_z=1.0, crop_pos_x=0.1)),
    ("crop_d", [VOLUME_DHWC], "DHWC", lambda x, fn, types: fn.crop(x, crop_d=2, crop_h=9, crop_w=3, crop_pos_y=0.0)),
    (
        "pad",
        [VOLUME_DHWC],
        "DHWC",
        lambda x, fn, types: fn.crop(x, crop=(8, 4, 13), out_of_bounds_policy="pad", fill_values=[5, 6]),
    ),
    (
        "trim_to_shape",
        [VOLUME_DHWC],
        "DHWC",
        lambda x, fn, types: fn.crop(x, crop=(8, 4, 13), crop_pos_z=0.2, out_of_bounds_policy="trim_to_shape"),
    ),
    (
        "trim_to_shape_hwc",
        None,
        "HWC",
        lambda x, fn, types: fn.crop(x, crop=(900, 30), crop_pos_x=0.7, out_of_bounds_policy="trim_to_shape"),
    ),
    (
        "chw",
        [np.ascontiguousarray(VOLUME_CDHW[:, 0])],
        "CHW",
        lambda x, fn, types: fn.crop(x, crop=(4, 5), crop_pos_x=0.8),
    ),
    ("output_dtype", None, "HWC", lambda x, fn, types: fn.crop(x, crop=(20, 30), output_dtype=types.FLOAT16)),
    ("image_type", None, "HWC", lambda x, fn, types: fn.crop(x, crop=(20, 30), image_type=types.RGB)),
]


@pytest.mark.parametrize("case, samples, layout, build", CASES_3D, ids=[c[0] for c in CASES_3D])
def test_volumes_and_deprecated_arguments_against_dali(ours, dali, images, case, samples, layout, build):
    samples = images if samples is None else samples
    theirs = dali(samples, build, layout)
    mine = ours(samples, lambda x: build(x, fn, types), layout)
    for (their_samples, their_layout), (my_samples, my_layout) in zip(theirs, mine, strict=True):
        assert my_layout == their_layout
        for their, my in zip(their_samples, my_samples, strict=True):
            assert my.dtype == their.dtype and my.shape == their.shape
            np.testing.assert_array_equal(my, their)


def test_volume_reference_values_without_dali(ours):
    (out,) = ours([VOLUME_DHWC], lambda x: fn.crop(x, crop=(3, 4, 5), crop_pos_z=0.3), "DHWC")
    # anchors: round(0.3 * 3) = 1 (depth), round(0.5 * 5) = 3 (height, 2.5 away from zero), round(0.5 * 6) = 3
    np.testing.assert_array_equal(out[0][0], VOLUME_DHWC[1:4, 3:7, 3:8])
    (out,) = ours([VOLUME_CDHW], lambda x: fn.crop(x, crop=(3, 4, 5), crop_pos_z=1.0), "CDHW")
    np.testing.assert_array_equal(out[0][0], VOLUME_CDHW[:, 3:6, 3:7, 3:8])


def test_per_sample_depth_position(ours):
    volumes = [VOLUME_DHWC, VOLUME_DHWC[:, ::-1].copy()]

    def build(x):
        z = fn.random.uniform(range=(0.0, 1.0), seed=3)
        return fn.crop(x, crop=(2, 9, 11), crop_pos_z=z), z

    outs, positions = ours(volumes, build, "DHWC")
    for got, volume, z in zip(outs[0], volumes, positions[0], strict=True):
        z0 = crop_window(6, 1, 2, 1, 0.5, float(z))[0]
        np.testing.assert_array_equal(got, volume[z0 : z0 + 2])


def test_a_3d_crop_of_an_image_is_named(ours, images):
    with pytest.raises(rp.SampleError, match=r"a 3-D \(d, h, w\) crop does not fit a sample of shape"):
        ours(images[:1], lambda x: fn.crop(x, crop=(3, 4, 5)), "HWC")
    with pytest.raises(rp.ArgumentError, match="crop: dtype and its deprecated alias output_dtype cannot be used"):
        Crop("cpu", 0, crop=(2, 2), dtype=types.FLOAT, output_dtype=types.FLOAT)
    with pytest.raises(rp.ArgumentError, match="crop: image_type must be a types.DALIImageType"):
        Crop("cpu", 0, crop=(2, 2), image_type="RGB")


@pytest.mark.parametrize("pos", [0.3, 0.5, 0.71])
@pytest.mark.parametrize("crop", [(20, 20), (45, 60)])
def test_truncated_anchors_are_dalis_for_crop_crop_mirror_normalize_and_image_crop(ours, dali, pos, crop):
    """``rounding="truncate"``, windows inside the image and larger than it (padded)."""
    image = (np.arange(37 * 53 * 3) % 251).astype(np.uint8).reshape(37, 53, 3)

    def build(x, f, t):
        window = {"crop": crop, "crop_pos_x": pos, "crop_pos_y": pos, "rounding": "truncate"}
        return (
            f.crop(x, out_of_bounds_policy="pad", **window),
            f.crop_mirror_normalize(x, out_of_bounds_policy="pad", dtype=t.UINT8, **window),
        )

    theirs = dali([image], build, "HWC")
    mine = ours([image], lambda x: build(x, fn, types), "HWC")
    for (a, _), (b, _) in zip(theirs, mine, strict=True):
        np.testing.assert_array_equal(a[0], b[0])


def test_truncated_anchors_of_the_window_decoder_are_dalis(jpeg_files):
    dali_module = pytest.importorskip("nvidia.dali")

    def build(f):
        jpegs, _ = f.readers.file(files=jpeg_files[:2])
        return f.decoders.image_crop(jpegs, crop=(101, 77), crop_pos_x=0.71, crop_pos_y=0.3, rounding="truncate")

    @rp.pipeline_def(batch_size=2, num_threads=1, seed=0)
    def pipe():
        return build(fn)

    with pipe() as p:
        (mine,) = p.run()

    @dali_module.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def reference():
        return build(dali_module.fn)

    theirs = reference()
    theirs.build()
    (expected,) = theirs.run()
    for i in range(2):
        np.testing.assert_array_equal(np.asarray(mine.at(i)), np.asarray(expected.at(i)))


@pytest.mark.parametrize("op", ["crop", "crop_mirror_normalize", "resize_crop_mirror"])
def test_an_unknown_rounding_is_named(ours, op):
    extra = {"resize_x": 8} if op == "resize_crop_mirror" else {}
    image = np.zeros((6, 6, 3), np.uint8)
    with pytest.raises(rp.ArgumentError, match=f"{op}: rounding must be one of"):
        ours([image], lambda x: getattr(fn, op)(x, crop=(2, 2), rounding="floor", **extra), "HWC")


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        # crop_d=0 is not set, as in DALI; anchors round(0.5 * 5) = 3 (2.5 away from zero), round(0.5 * 6) = 3
        (lambda x, fn, types: fn.crop(x, crop_h=4, crop_w=5, crop_d=0), VOLUME_DHWC[:, 3:7, 3:8]),
        (lambda x, fn, types: fn.crop(x, crop_h=4, crop_w=5, crop_pos_x=0.2), VOLUME_DHWC[:, 3:7, 1:6]),
    ],
)
def test_a_2d_window_of_a_volume_keeps_its_depth(ours, dali, build, expected):
    mine = ours([VOLUME_DHWC], lambda x: build(x, fn, types), "DHWC")
    np.testing.assert_array_equal(mine[0][0][0], expected)
    theirs = dali([VOLUME_DHWC], build, "DHWC")
    np.testing.assert_array_equal(mine[0][0][0], theirs[0][0][0])
