"""``resize``: DALI's sizing rules, Pillow parity on both devices, argument errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

import raypipe as rp
from raypipe import fn, types
from raypipe.backend import gpu_available
from raypipe.operators import host_resize
from raypipe.operators.resize import Resize, output_size

# The GPU path is float32 matrix products; Pillow uses 22-bit fixed-point weights, so
# values that land on a rounding boundary may differ. One level per pass is possible,
# hence at most 2 overall, and such pixels are rare.
GPU_MAX_DIFF = 2
GPU_MEAN_DIFF = 0.1
# The host path is Pillow itself, or torch's SIMD kernel of the same filter where torch is
# installed: its rounding moves a few percent of pixels by one level, up to a quarter where
# Pillow runs the vertical pass first and torch the horizontal one.
HOST_MAX_DIFF = 1 if host_resize.backend() == "torch" else 0
HOST_MEAN_DIFF = 0.25


def _samples(tl) -> list[np.ndarray]:
    tl = tl.as_cpu()
    return [np.asarray(tl.at(i)) for i in range(len(tl))]


def _run(files, device, **resize_args):
    @rp.pipeline_def(batch_size=len(files), num_threads=2, seed=3)
    def pipe():
        jpegs, _ = fn.readers.file(files=files)
        images = fn.decoders.image(jpegs)
        return fn.resize(images, device=device, **resize_args), images

    with pipe() as p:
        out, src = p.run()
    assert out.device == ("gpu" if device == "gpu" else "cpu")
    assert out.layout() == "HWC"
    return _samples(out), _samples(src)


def _pillow(image: np.ndarray, width: int, height: int) -> np.ndarray:
    return np.asarray(Image.fromarray(image).resize((width, height), Image.Resampling.BILINEAR))


def _check_parity(device: str, got: np.ndarray, ref: np.ndarray) -> None:
    assert got.shape == ref.shape and got.dtype == ref.dtype
    diff = np.abs(got.astype(np.int32) - ref)
    if device == "cpu" or not gpu_available():  # without a GPU, device="gpu" resizes on the host
        assert diff.max() <= HOST_MAX_DIFF
        assert diff.mean() < HOST_MEAN_DIFF
    else:
        assert diff.max() <= GPU_MAX_DIFF
        assert diff.mean() < GPU_MEAN_DIFF


@pytest.mark.parametrize(
    ("size", "args", "expected"),
    [
        ((500, 375), {"resize_x": 224, "resize_y": 160}, (224, 160)),
        ((500, 375), {"resize_x": 250}, (250, 188)),
        ((500, 375), {"resize_y": 150}, (200, 150)),
        ((500, 375), {"resize_x": 250, "mode": "stretch"}, (250, 375)),
        ((500, 375), {"resize_x": 224, "resize_y": 224, "mode": "not_smaller"}, (299, 224)),
        ((500, 375), {"resize_x": 224, "resize_y": 224, "mode": "not_larger"}, (224, 168)),
        ((1280, 720), {"resize_x": 640, "resize_y": 480, "mode": "not_larger"}, (640, 360)),
        ((640, 480), {"resize_x": 1920, "resize_y": 1080, "mode": "not_smaller"}, (1920, 1440)),
        ((500, 375), {"resize_shorter": 256}, (341, 256)),
        ((375, 500), {"resize_shorter": 256}, (256, 341)),
        ((500, 375), {"resize_longer": 256}, (256, 192)),
        ((1000, 3), {"resize_x": 10}, (10, 1)),
    ],
)
def test_output_size_follows_dali_rules(size, args, expected):
    assert output_size(*size, **args) == expected


# sizes DALI 2.4's CPU resize gives a 420 x 300 (width x height) image
SIZE_AND_MAX_SIZE = [
    ({"size": 28, "mode": "not_smaller"}, (39, 28)),
    ({"size": 28}, (28, 28)),
    ({"size": [20, 50]}, (50, 20)),
    ({"size": [20, 0]}, (28, 20)),
    ({"size": [0, 50]}, (50, 36)),
    ({"size": (20.0, 50.0), "mode": "not_larger"}, (28, 20)),
    ({"size": [0, 0]}, (420, 300)),
    ({"resize_shorter": 100, "max_size": 120}, (120, 86)),
    ({"size": [100, 200], "max_size": [80, 300]}, (200, 80)),
    ({"resize_x": 500, "max_size": 200}, (200, 200)),
    ({"size": 100, "mode": "not_smaller", "max_size": [0, 120]}, (120, 86)),
]


@pytest.mark.parametrize(("args", "expected"), SIZE_AND_MAX_SIZE)
def test_size_and_max_size_follow_dali(args, expected):
    resize = Resize(device="cpu", op_id=0, **args)
    assert resize.target_size(420, 300) == expected
    image = np.zeros((300, 420, 3), np.uint8)
    assert resize.run_sample([image], {}, None).shape == (expected[1], expected[0], 3)


def test_size_and_max_size_against_dali():
    dali = pytest.importorskip("nvidia.dali")
    image = np.zeros((300, 420, 3), np.uint8)

    def dali_shape(args):
        @dali.pipeline_def(batch_size=1, num_threads=1, device_id=None)
        def graph():
            return dali.fn.resize(dali.fn.external_source(source=lambda: [image], batch=True, layout="HWC"), **args)

        pipe = graph()
        pipe.build()
        return np.asarray(pipe.run()[0][0]).shape

    for args, (width, height) in SIZE_AND_MAX_SIZE:
        assert dali_shape(args) == (height, width, 3), args


@settings(max_examples=200, deadline=None)
@given(
    in_w=st.integers(1, 4000),
    in_h=st.integers(1, 4000),
    req_w=st.integers(1, 2000),
    req_h=st.integers(1, 2000),
)
def test_not_smaller_and_not_larger_bound_the_requested_size(in_w, in_h, req_w, req_h):
    w, h = output_size(in_w, in_h, resize_x=req_w, resize_y=req_h, mode="not_smaller")
    assert w >= req_w and h >= req_h and (w == req_w or h == req_h)
    w, h = output_size(in_w, in_h, resize_x=req_w, resize_y=req_h, mode="not_larger")
    assert (w <= req_w or w == 1) and (h <= req_h or h == 1) and (w == req_w or h == req_h)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"resize_x": 224, "resize_y": 160}, (224, 160)),
        ({"resize_x": 224, "resize_y": 160, "mode": "stretch"}, (224, 160)),
        ({"resize_x": 224, "resize_y": 160, "mode": "not_smaller"}, None),
        ({"resize_x": 224}, None),
        ({"resize_shorter": 256}, None),
        ({"size": [160, 224]}, (224, 160)),
        ({"size": [160, 224], "max_size": 200}, (200, 160)),
    ],
)
def test_fixed_output_size_only_for_exact_sizes(args, expected):
    assert Resize(device="cpu", op_id=0, **args).fixed_output_size() == expected


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("size", [(224, 160), (640, 520), (500, 120)], ids=["down", "up", "mixed"])
def test_resize_matches_pillow(jpeg_files, device, size):
    outs, srcs = _run(jpeg_files[:3], device, resize_x=size[0], resize_y=size[1])
    for got, src in zip(outs, srcs):
        _check_parity(device, got, _pillow(src, *size))


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_resize_shorter_keeps_aspect_ratio(jpeg_files, device):
    outs, srcs = _run(jpeg_files[4:7], device, resize_shorter=200)
    for got, src in zip(outs, srcs):
        width, height = output_size(src.shape[1], src.shape[0], resize_shorter=200)
        assert min(got.shape[:2]) == 200
        _check_parity(device, got, _pillow(src, width, height))


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_float_output_is_unrounded_pillow_filter(jpeg_files, device):
    outs, srcs = _run(jpeg_files[:2], device, resize_x=150, resize_y=100, dtype=rp.types.FLOAT)
    for got, src in zip(outs, srcs):
        assert got.dtype == np.float32
        # Pillow rounds to uint8 after each pass; the float result does not.
        assert np.abs(got - _pillow(src, 150, 100)).max() <= 1.0
        assert not np.array_equal(got, np.round(got))


def _bilinear_reference(image: np.ndarray, width: int, height: int) -> np.ndarray:
    """Plain bilinear interpolation at output pixel centres, edges clamped."""
    in_h, in_w = image.shape[:2]
    xs = (np.arange(width) + 0.5) * in_w / width - 0.5
    ys = (np.arange(height) + 0.5) * in_h / height - 0.5
    img = image.astype(np.float64)
    rows = np.stack([[np.interp(xs, np.arange(in_w), img[y, :, c]) for c in range(3)] for y in range(in_h)])
    rows = rows.transpose(0, 2, 1)
    cols = np.stack([[np.interp(ys, np.arange(in_h), rows[:, x, c]) for c in range(3)] for x in range(width)])
    return cols.transpose(2, 0, 1)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_antialias_false_is_plain_bilinear(jpeg_files, device):
    outs, srcs = _run(jpeg_files[:2], device, resize_x=100, resize_y=80, antialias=False)
    for got, src in zip(outs, srcs):
        ref = _bilinear_reference(src, 100, 80)
        # The uint8 intermediate between the passes costs at most one level.
        assert np.abs(got - ref).max() <= 1.0
        assert np.abs(got.astype(np.int32) - _pillow(src, 100, 80)).mean() > 1.0


def test_random_crop_decoder_feeds_resize(jpeg_files):
    @rp.pipeline_def(batch_size=4, num_threads=2, seed=5)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:4])
        images = fn.decoders.image_random_crop(jpegs)
        return fn.resize(images, resize_x=64, resize_y=48)

    with pipe() as p:
        (out,) = p.run()
    assert np.asarray(out).shape == (4, 48, 64, 3)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "give resize_x and/or resize_y"),
        ({"resize_shorter": -3}, "resize_shorter must be a positive number"),
        ({"resize_y": "big"}, "resize_y must be a positive number"),
        ({"resize_x": 10, "mode": "fit"}, "mode must be one of"),
        ({"resize_shorter": 256, "resize_x": 224}, "resize_shorter cannot be combined"),
        ({"resize_longer": 256, "mode": "stretch"}, "resize_longer cannot be combined"),
        ({"resize_x": 10, "interp_type": "gaussian"}, "interp_type types.INTERP_GAUSSIAN is not supported"),
        ({"resize_x": 10, "dtype": "pixels"}, "unknown dtype 'pixels'"),
        ({"resize_x": 10, "size": 3}, "size cannot be combined with resize_x or resize_y"),
        ({"size": [1, 2, 3, 4]}, r"size must be a number or \[height, width\]"),
        ({"resize_x": 10, "max_size": "x"}, r"max_size must be a number or \[height, width\]"),
    ],
)
def test_invalid_arguments_are_named(jpeg_files, args, message):
    @rp.pipeline_def(batch_size=1, num_threads=1, seed=0)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:1])
        return fn.resize(fn.decoders.image(jpegs), **args)

    p = pipe()
    with pytest.raises(rp.ArgumentError, match=message):
        p.build()
    p.close()


def test_non_image_input_names_the_shape(jpeg_files):
    @rp.pipeline_def(batch_size=1, num_threads=1, seed=0)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:1])
        return fn.resize(jpegs, resize_x=10)

    with pipe() as p, pytest.raises(rp.SampleError, match=r"resize: expects a non-empty HWC image, got shape \(\d+,\)"):
        p.run()


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.tuples(st.integers(1, 900), st.integers(1, 900)), min_size=1, max_size=6),
    target=st.sampled_from(
        [
            {"resize_shorter": 256.0},
            {"resize_longer": 300.0, "max_size": [0, 280.0]},
            {"resize_x": 224.0},
            {"resize_y": 97.5},
            {"resize_x": 64.0, "resize_y": 48.0, "mode": "stretch"},
            {"resize_x": 64.0, "resize_y": 48.0, "mode": "not_smaller", "max_size": [70.0, 0]},
            {"resize_x": 64.0, "resize_y": 48.0, "mode": "not_larger"},
            {"resize_x": 120.0, "max_size": [90.0, 100.0]},
        ]
    ),
)
def test_batch_sizes_are_each_samples_size(sizes, target):
    """The GPU stage sizes a whole batch at once (``target_sizes``): the same integers as the
    per-sample rule the host path uses."""
    op = Resize("gpu", 0, **target)
    widths = np.array([w for w, _ in sizes])
    heights = np.array([h for _, h in sizes])
    expected = [list(op.target_size(w, h)) for w, h in sizes]
    assert op.target_sizes(widths, heights).tolist() == expected


def test_save_attrs_adds_dalis_second_output(ours, dali, images):
    """The input's ``[height, width]`` as int32 (DALI 2.4's second output), on the host and GPU stages."""

    def build(x, fn, types, device="cpu"):
        data = x.gpu() if device == "gpu" else x
        return tuple(fn.resize(data, resize_x=40, resize_y=30, save_attrs=True))

    theirs = dali(images, build, "HWC")
    for device in ("cpu", "gpu"):
        mine = ours(images, lambda x, device=device: build(x, fn, types, device), "HWC")
        assert [a.tolist() for a in mine[1][0]] == [list(i.shape[:2]) for i in images]
        for (their_samples, _), (my_samples, _) in zip(theirs, mine, strict=True):
            for their, my in zip(their_samples, my_samples, strict=True):
                assert my.dtype == their.dtype and my.shape == their.shape
        for their, my in zip(theirs[1][0], mine[1][0], strict=True):
            np.testing.assert_array_equal(my, their)


def test_save_attrs_keeps_the_resize_out_of_the_decoder():
    op = Resize("cpu", 0, resize_x=40, resize_y=30, save_attrs=True)
    assert op.num_outputs == 2 and op.fixed_output_size() is None
    assert Resize("cpu", 0, resize_x=40, resize_y=30).fixed_output_size() == (40, 30)
    assert Resize("cpu", 0, resize_x=40, resize_y=30, interp_type=types.INTERP_NN).fixed_output_size() is None


def test_hints_are_validated_and_change_no_pixel(images):
    plain = Resize("cpu", 0, resize_x=40, resize_y=30)
    hinted = Resize("cpu", 0, resize_x=40, resize_y=30, temp_buffer_hint=1 << 20, image_type=types.RGB)
    for image in images:
        np.testing.assert_array_equal(hinted.run_sample([image], {}, None), plain.run_sample([image], {}, None))
    with pytest.raises(rp.ArgumentError, match="resize: temp_buffer_hint must be a non-negative int, got -1"):
        Resize("cpu", 0, resize_x=4, temp_buffer_hint=-1)
    with pytest.raises(rp.ArgumentError, match="resize: image_type must be a types.DALIImageType"):
        Resize("cpu", 0, resize_x=4, image_type="RGB")
    with pytest.raises(rp.ArgumentError, match="resize: save_attrs must be a bool"):
        Resize("cpu", 0, resize_x=4, save_attrs="yes")


def test_dalis_cv_cuda_variant_is_this_operator(ours):
    """``fn.experimental.resize`` (DALI's CV-CUDA resize, GPU only there) takes resize's arguments
    and gives resize's values; ``minibatch_size`` is validated and changes nothing."""
    image = (np.arange(30 * 40 * 3).reshape(30, 40, 3) * 7 % 251).astype(np.uint8)

    def build(x):
        return (
            fn.experimental.resize(x, resize_x=17, resize_y=11, minibatch_size=4),
            fn.resize(x, resize_x=17, resize_y=11),
        )

    (variant, _), (plain, _) = ours([image], build, "HWC")
    np.testing.assert_array_equal(variant[0], plain[0])
    with pytest.raises(rp.ArgumentError, match="resize: minibatch_size must be a positive int, got 0"):
        ours([image], lambda x: fn.experimental.resize(x, resize_x=17, minibatch_size=0), "HWC")


ROI_IMAGE = np.asarray(
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (25, 20, 3), dtype=np.uint8)).resize((80, 100))
)
ROI_CASES = [
    {"resize_shorter": 25, "roi_start": [10, 20], "roi_end": [60, 70]},
    {"resize_shorter": 25, "roi_start": [60, 20], "roi_end": [10, 70]},  # flipped vertically
    {"size": [30, 30], "roi_start": [0.1, 0.2], "roi_end": [0.6, 0.7], "roi_relative": True},
    {"size": [70, 90], "roi_start": [10.5, 20.25], "roi_end": [60, 70]},
    {"size": [50, 50], "roi_start": [60, 70], "roi_end": [10, 20], "interp_type": "INTERP_NN"},
    {"size": [33, 41], "roi_start": [10.5, 20.25], "roi_end": [61, 73.5], "interp_type": "INTERP_NN"},
]


def _roi_kwargs(case: dict, t) -> dict:
    return {k: getattr(t, v) if k == "interp_type" else v for k, v in case.items()}


@pytest.mark.parametrize("case", ROI_CASES)
def test_a_region_of_interest_is_dalis(ours, dali, case):
    """Sizes from the region's extent, flips where its end comes first: nearest exactly DALI's,
    linear within one grey level."""

    def build(x, f, t):
        return f.resize(x, **_roi_kwargs(case, t))

    ((theirs, _),) = dali([ROI_IMAGE], build, "HWC")
    ((mine, _),) = ours([ROI_IMAGE], lambda x: build(x, fn, types), "HWC")
    assert mine[0].shape == theirs[0].shape
    limit = 0 if "interp_type" in case else 1
    assert np.abs(mine[0].astype(int) - theirs[0]).max() <= limit


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_a_region_per_sample_is_cut_resized_and_flipped(ours, device):
    """Nearest resizing of a region to its own size is the region itself, reversed along an axis
    whose end comes before its start."""
    starts = [np.array([10, 20], np.float32), np.array([60, 5], np.float32)]
    ends = [np.array([60, 70], np.float32), np.array([30, 45], np.float32)]

    def build_sized(x, start, end):
        x = x.gpu() if device == "gpu" else x
        return fn.resize(x, resize_x=40, roi_start=start, roi_end=end, interp_type=types.INTERP_NN)

    ((out, _),) = ours([ROI_IMAGE, ROI_IMAGE], build_sized, "HWC", per_sample=[starts, ends])
    assert [o.shape for o in out] == [(40, 40, 3), (30, 40, 3)]  # sizes from each region's extent
    ((same, _),) = ours(
        [ROI_IMAGE],
        lambda x, s, e: fn.resize(x, size=[50, 50], roi_start=s, roi_end=e, interp_type=types.INTERP_NN),
        "HWC",
        per_sample=[starts[:1], ends[:1]],
    )
    np.testing.assert_array_equal(same[0], ROI_IMAGE[10:60, 20:70])
    ((flipped, _),) = ours(
        [ROI_IMAGE],
        lambda x, s, e: fn.resize(x, size=[30, 40], roi_start=s, roi_end=e, interp_type=types.INTERP_NN),
        "HWC",
        per_sample=[starts[1:], ends[1:]],
    )
    np.testing.assert_array_equal(flipped[0], ROI_IMAGE[30:60, 5:45][::-1])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"resize_x": 10, "roi_start": [1, 2]}, "roi_start and roi_end go together, got only roi_start"),
        ({"resize_x": 10, "roi_start": [1, 2, 3], "roi_end": [4, 5, 6]}, r"roi_start is \[y, x\]"),
        ({"resize_x": 10, "roi_start": [1, 2], "roi_end": [4, 5], "roi_relative": 1}, "roi_relative must be a bool"),
        ({"resize_x": 10, "subpixel_scale": "yes"}, "subpixel_scale must be a bool"),
    ],
)
def test_bad_regions_fail_when_the_pipeline_is_built(ours, kwargs, message):
    with pytest.raises(rp.ArgumentError, match=f"resize: {message}"):
        ours([ROI_IMAGE], lambda x: fn.resize(x, **kwargs), "HWC")


def test_a_region_outside_the_image_fails_naming_it(ours):
    with pytest.raises(rp.SampleError, match=r"region of interest from \[10.0, 20.0\] to \[120.0, 70.0\]"):
        ours([ROI_IMAGE], lambda x: fn.resize(x, resize_x=10, roi_start=[10, 20], roi_end=[120, 70]), "HWC")


def test_resizing_a_rotated_image_is_resizing_its_pixels(ours):
    """rotate's host output may be planes viewed as HWC; resize takes any such layout of pixels."""

    def build(x):
        rotated = fn.rotate(x, angle=17.0, keep_size=True)
        return rotated, fn.resize(rotated, size=[61, 47])

    (rotated, _), (resized, _) = ours([ROI_IMAGE], build, "HWC")
    ((expected, _),) = ours([np.ascontiguousarray(rotated[0])], lambda x: fn.resize(x, size=[61, 47]), "HWC")
    np.testing.assert_array_equal(resized[0], expected[0])


NEGATIVE_SIZES = [  # (negative, the same positive): linear, as nearest's ties go to the mirrored neighbour in DALI
    ({"resize_x": -40}, {"resize_x": 40}),
    ({"resize_x": 40, "resize_y": -30}, {"resize_x": 40, "resize_y": 30}),
    ({"size": -25}, {"size": 25}),
    (
        {"size": [30, -40], "roi_start": [60, 20], "roi_end": [10, 70]},
        {"size": [30, 40], "roi_start": [60, 20], "roi_end": [10, 70]},
    ),
    (
        {"resize_y": -30, "roi_start": [60, 20], "roi_end": [10, 70]},
        {"resize_y": 30, "roi_start": [60, 20], "roi_end": [10, 70]},
    ),
]


@pytest.mark.parametrize(("negative", "positive"), NEGATIVE_SIZES)
def test_a_negative_size_flips_that_axis_as_in_dali(ours, dali, negative, positive):
    """DALI's flip, within a grey level more than the same positive size differs from DALI's (its
    antialiasing filters are not Pillow's)."""
    differences = []
    for case in (positive, negative):
        ((theirs, _),) = dali([ROI_IMAGE], lambda x, f, t, c=case: f.resize(x, **c), "HWC")
        ((mine, _),) = ours([ROI_IMAGE], lambda x, c=case: fn.resize(x, **c), "HWC")
        assert mine[0].shape == theirs[0].shape
        differences.append(int(np.abs(mine[0].astype(int) - theirs[0]).max()))
    assert differences[1] <= differences[0] + 1, differences


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_a_negative_size_is_the_positive_size_flipped(ours, device):
    """On both devices, without DALI: the flip is exact, the size the magnitude's."""
    data = (lambda x: x.gpu()) if device == "gpu" else (lambda x: x)
    ((plain, _),) = ours([ROI_IMAGE, ROI_IMAGE[:50]], lambda x: fn.resize(data(x), size=[30, 40]), "HWC")
    for size, flip in (([-30, 40], (0,)), ([30, -40], (1,)), ([-30, -40], (0, 1))):
        ((got, _),) = ours([ROI_IMAGE, ROI_IMAGE[:50]], lambda x, s=size: fn.resize(data(x), size=s), "HWC")
        for g, p in zip(got, plain, strict=True):
            np.testing.assert_array_equal(g, np.flip(p, axis=flip))


def test_a_volume_with_a_negative_size_is_refused(ours):
    volume = np.zeros((4, 6, 6, 1), np.uint8)
    with pytest.raises(rp.ArgumentError, match=r"a volume's size \[-2.0, 4.0, 4.0\] has a negative extent"):
        ours([volume], lambda x: fn.resize(x, size=[-2, 4, 4]), "DHWC")
    with pytest.raises(rp.SampleError, match="has a negative extent"):
        ours([volume], lambda x, s: fn.resize(x, size=s), "DHWC", per_sample=[[np.array([2, -4, 4], np.float32)]])


SIZE_IMAGES = [np.ascontiguousarray(ROI_IMAGE[: 60 + 10 * k, : 50 + 7 * k]) for k in range(3)]
PER_SAMPLE_SIZES = [
    ("size", [np.array([30, 40], np.float32), np.array([0, 25], np.float32), np.array([44, 0], np.float32)], {}),
    (
        "size",
        [np.array([30, 40], np.float32), np.array([20, 25], np.float32), np.array([44, 33], np.float32)],
        {"mode": "not_larger"},
    ),  # fmt: skip
    ("resize_x", [np.float32(20), np.float32(31), np.float32(0)], {"resize_y": 30}),
    ("resize_y", [np.float32(20), np.float32(31), np.float32(45)], {}),
    ("resize_shorter", [np.float32(20), np.float32(31), np.float32(45)], {"max_size": 40}),
    # negative sizes flip, per sample as given statically
    ("resize_x", [np.float32(-20), np.float32(31), np.float32(0)], {"resize_y": -30}),
    ("size", [np.array([-30, 40], np.float32), np.array([0, -25], np.float32), np.array([-44, -9], np.float32)], {}),
]


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("name, values, static", PER_SAMPLE_SIZES, ids=lambda v: v if isinstance(v, str) else "")
def test_per_sample_sizes_are_dalis(ours, dali, name, values, static, device):
    """``size``, ``resize_x``, ``resize_y``, ``resize_shorter`` and ``resize_longer`` per sample (a
    DataNode; 0 leaves an extent unset), as EfficientDet's DALI pipeline gives them: DALI's sizes,
    and each sample resized as the same size given as a constant resizes it."""

    def build(x, f, t, sizes):
        return f.resize(x, **{name: sizes}, **static)

    ((theirs, _),) = dali(SIZE_IMAGES, build, "HWC", per_sample=[values])
    data = (lambda x: x.gpu()) if device == "gpu" else (lambda x: x)
    ((mine, _),) = ours(SIZE_IMAGES, lambda x, sizes: build(data(x), fn, types, sizes), "HWC", per_sample=[values])
    for image, value, their, my in zip(SIZE_IMAGES, values, theirs, mine, strict=True):
        assert my.shape == their.shape
        constant = value.tolist() if value.ndim else float(value)
        ((alone, _),) = ours([image], lambda x, c=constant: fn.resize(data(x), **{name: c}, **static), "HWC")
        np.testing.assert_array_equal(my, alone[0])


def test_per_sample_sizes_without_dali(ours):
    sizes = [np.array([30, 40], np.float32), np.array([0, 25], np.float32), np.array([44, 0], np.float32)]
    ((out, _),) = ours(SIZE_IMAGES, lambda x, s: fn.resize(x, size=s), "HWC", per_sample=[sizes])
    assert [o.shape[:2] for o in out] == [(30, 40), (round(70 * 25 / 57), 25), (44, round(64 * 44 / 80))]
    with pytest.raises(rp.SampleError, match="an image's size is one number or"):
        ours(SIZE_IMAGES, lambda x, s: fn.resize(x, size=s), "HWC", per_sample=[[np.ones(3, np.float32)] * 3])


ZERO_SIZES = [
    {"resize_x": 0, "resize_y": 0},
    {"resize_x": 0},
    {"size": [0, 0]},
    {"size": 0},
    {"resize_shorter": 0},
    {"resize_longer": 0},
    {"size": [0, 0], "mode": "not_larger"},
    {"resize_x": 0, "resize_y": 0, "max_size": [4, 5], "mode": "not_smaller"},
    {"resize_shorter": 0, "max_size": 4},
    {"resize_x": 0, "resize_y": 0, "dtype": "FLOAT"},
    {"resize_x": 0, "resize_y": 0, "interp_type": "INTERP_NN"},
]


def _zero_size_build(args):
    def build(x, f, t):
        return f.resize(x, **{k: getattr(t, v) if k in ("dtype", "interp_type") else v for k, v in args.items()})

    return build


ZERO_IMAGE = np.random.default_rng(8).integers(0, 256, (7, 9, 3), dtype=np.uint8)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("args", ZERO_SIZES, ids=str)
def test_every_size_zero_keeps_the_input(ours, device, args):
    """A size argument given as 0 is unset; with every one unset the input comes out unchanged (its type
    changed by ``dtype``), whatever ``max_size`` and the mode, as in DALI (next test)."""
    build = _zero_size_build(args)
    ((mine, _),) = ours([ZERO_IMAGE], lambda x: build(x.gpu() if device == "gpu" else x, fn, types), "HWC")
    expected = ZERO_IMAGE.astype(np.float32) if "dtype" in args else ZERO_IMAGE
    assert mine[0].dtype == expected.dtype
    np.testing.assert_array_equal(mine[0], expected)


@pytest.mark.parametrize("args", ZERO_SIZES, ids=str)
def test_every_size_zero_keeps_the_input_in_dali(dali, args):
    ((theirs, _),) = dali([ZERO_IMAGE], _zero_size_build(args), "HWC")
    expected = ZERO_IMAGE.astype(np.float32) if "dtype" in args else ZERO_IMAGE
    assert theirs[0].dtype == expected.dtype
    np.testing.assert_array_equal(theirs[0], expected)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_every_size_zero_with_a_region_cuts_the_region_out(ours, device):
    """As DALI (measured in its CPU build): the region ``[1:5, 2:8]`` comes out as it is."""
    ((mine, _),) = ours(
        [ZERO_IMAGE],
        lambda x: fn.resize(
            x.gpu() if device == "gpu" else x, resize_x=0, resize_y=0, roi_start=[1, 2], roi_end=[5, 8]
        ),
        "HWC",
    )
    np.testing.assert_array_equal(mine[0], ZERO_IMAGE[1:5, 2:8])


def test_per_sample_zero_sizes_keep_those_inputs(ours):
    sizes = [np.array([0, 0], np.float32), np.array([30, 40], np.float32), np.array([0, 0], np.float32)]
    ((out, _),) = ours(SIZE_IMAGES, lambda x, s: fn.resize(x, size=s), "HWC", per_sample=[sizes])
    np.testing.assert_array_equal(out[0], SIZE_IMAGES[0])
    assert out[1].shape[:2] == (30, 40)
    np.testing.assert_array_equal(out[2], SIZE_IMAGES[2])


def test_no_size_argument_at_all_is_still_an_error(ours):
    with pytest.raises(rp.ArgumentError, match="give resize_x and/or resize_y"):
        ours([np.zeros((4, 4, 3), np.uint8)], lambda x: fn.resize(x, max_size=4), "HWC")
