"""``decoders.image_crop`` and ``decoders.image_slice`` on real JPEGs: DALI 2.4's pixels and shapes
(the same libjpeg-turbo decode, so exactly), equal to a whole decode followed by ``crop`` or ``slice``
without DALI, per-sample arguments, positional anchor and shape, DALI's deprecated names, the
window decoded alone, deferred staging, and errors that name the sample."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, ops, types
from raypipe.decode_plan import DecodePlan
from raypipe.operators.crop import crop_window
from raypipe.operators.decoders import EncodedImage, ImageDecoder
from raypipe.operators.window_decoders import ImageCropDecoder, ImageSliceDecoder


@pytest.fixture(scope="module")
def encoded(jpeg_files) -> list[np.ndarray]:
    """Four real JPEG files' bytes (images of different sizes)."""
    return [np.fromfile(path, np.uint8) for path in jpeg_files[:4]]


# (id, build(data, fn, types), the equivalent on a decoded image)
CASES = [
    (
        "crop",
        lambda x, fn, types: fn.decoders.image_crop(x, crop=(100, 150), crop_pos_x=0.3, crop_pos_y=0.7),
        lambda x, fn, types: fn.crop(x, crop=(100, 150), crop_pos_x=0.3, crop_pos_y=0.7),
    ),
    (
        "crop-hw-gray",
        lambda x, fn, types: fn.decoders.image_crop(x, crop_h=57, crop_w=31, output_type=types.GRAY),
        lambda x, fn, types: fn.crop(x, crop_h=57, crop_w=31),
    ),
    (
        "crop-bgr-corner",
        lambda x, fn, types: fn.decoders.image_crop(
            x, crop=(64, 64), crop_pos_x=1.0, crop_pos_y=0.0, output_type=types.BGR
        ),
        lambda x, fn, types: fn.crop(x, crop=(64, 64), crop_pos_x=1.0, crop_pos_y=0.0),
    ),
    (
        "slice-rel",
        lambda x, fn, types: fn.decoders.image_slice(x, rel_start=[0.1, 0.2], rel_shape=[0.5, 0.4]),
        lambda x, fn, types: fn.slice(x, rel_start=[0.1, 0.2], rel_shape=[0.5, 0.4]),
    ),
    (
        "slice-start-end",
        lambda x, fn, types: fn.decoders.image_slice(x, start=[17, 3], end=[200, 150]),
        lambda x, fn, types: fn.slice(x, start=[17, 3], end=[200, 150]),
    ),
    (
        "slice-rel-end",
        lambda x, fn, types: fn.decoders.image_slice(x, rel_start=[0.25, 0.1], rel_end=[0.75, 0.3]),
        lambda x, fn, types: fn.slice(x, rel_start=[0.25, 0.1], rel_end=[0.75, 0.3]),
    ),
    (
        "slice-axes-0",
        lambda x, fn, types: fn.decoders.image_slice(x, start=[10], end=[60], axes=[0]),
        lambda x, fn, types: fn.slice(x, start=[10], end=[60], axes=[0]),
    ),
    (
        "slice-axis-names-HW",
        lambda x, fn, types: fn.decoders.image_slice(x, start=[5, 7], shape=[40, 90], axis_names="HW"),
        lambda x, fn, types: fn.slice(x, start=[5, 7], shape=[40, 90], axis_names="HW"),
    ),
    (
        "slice-positional-normalized",
        lambda x, fn, types: fn.decoders.image_slice(x, fn.constant(fdata=[0.1, 0.2]), fn.constant(fdata=[0.5, 0.5])),
        lambda x, fn, types: fn.slice(x, fn.constant(fdata=[0.1, 0.2]), fn.constant(fdata=[0.5, 0.5])),
    ),
    (
        "slice-positional-absolute",
        lambda x, fn, types: fn.decoders.image_slice(
            x,
            fn.constant(fdata=[12.5, 30.0]),
            fn.constant(fdata=[100.0, 55.5]),
            normalized_anchor=False,
            normalized_shape=False,
        ),
        lambda x, fn, types: fn.slice(
            x,
            fn.constant(fdata=[12.5, 30.0]),
            fn.constant(fdata=[100.0, 55.5]),
            normalized_anchor=False,
            normalized_shape=False,
        ),
    ),
    (
        "slice-positional-ints",
        lambda x, fn, types: fn.decoders.image_slice(
            x, fn.constant(idata=[3, 4], dtype=types.INT32), fn.constant(idata=[50, 60], dtype=types.INT32)
        ),
        lambda x, fn, types: fn.slice(
            x, fn.constant(idata=[3, 4], dtype=types.INT32), fn.constant(idata=[50, 60], dtype=types.INT32)
        ),
    ),
    (
        "old-names",
        lambda x, fn, types: fn.image_decoder_slice(x, rel_start=[0.5, 0.5], rel_shape=[0.5, 0.5]),
        lambda x, fn, types: fn.slice(x, rel_start=[0.5, 0.5], rel_shape=[0.5, 0.5]),
    ),
]


def _output_type(case: str):
    return types.GRAY if "gray" in case else types.BGR if "bgr" in case else types.RGB


@pytest.mark.parametrize("case, build, after", CASES, ids=[c[0] for c in CASES])
def test_against_dali(ours, dali, encoded, case, build, after):
    theirs = dali(encoded, build)
    mine = ours(encoded, lambda x: build(x, fn, types))
    for their, my in zip(theirs[0][0], mine[0][0], strict=True):
        assert my.dtype == their.dtype == np.uint8 and my.shape == their.shape
        if _output_type(case) is not types.GRAY:  # grey: decoders.image's luma, not DALI's RGB conversion
            np.testing.assert_array_equal(my, their)
    assert mine[0][1] == "HWC"


@pytest.mark.parametrize("case, build, after", CASES, ids=[c[0] for c in CASES])
def test_equal_to_a_whole_decode_then_crop_or_slice(ours, encoded, case, build, after):
    mine = ours(encoded, lambda x: build(x, fn, types))
    whole = ours(encoded, lambda x: after(fn.decoders.image(x, output_type=_output_type(case)), fn, types))
    for my, expected in zip(mine[0][0], whole[0][0], strict=True):
        np.testing.assert_array_equal(my, expected)


def test_per_sample_positions_and_starts(ours, dali, encoded):
    """``crop_pos_x`` from data and ``start`` from each image's own shape, against DALI."""

    def build(x, fn, types):
        shape = fn.peek_image_shape(x, dtype=types.INT32)
        quarter = fn.cast(fn.slice(shape, start=[0], shape=[2], axes=[0]) // 4, dtype=types.INT32)
        pos = fn.cast(fn.slice(shape, start=[0], shape=[1], axes=[0]), dtype=types.FLOAT) / 1000.0
        return fn.decoders.image_crop(x, crop=(40, 60), crop_pos_x=pos), fn.decoders.image_slice(
            x, start=quarter, shape=[50, 40]
        )

    theirs = dali(encoded, build)
    mine = ours(encoded, lambda x: build(x, fn, types))
    for (their_samples, _), (my_samples, _) in zip(theirs, mine, strict=True):
        for their, my in zip(their_samples, my_samples, strict=True):
            np.testing.assert_array_equal(my, their)


def test_reference_windows_without_dali(ours, encoded, images):
    (crops,) = ours(encoded, lambda x: fn.decoders.image_crop(x, crop=(10, 20), crop_pos_x=0.0, crop_pos_y=1.0))
    (slices,) = ours(encoded, lambda x: fn.decoders.image_slice(x, start=[3, 5], shape=[7, 9]))
    for crop, piece, image in zip(crops[0], slices[0], images, strict=True):
        np.testing.assert_array_equal(crop, image[image.shape[0] - 10 :, :20])
        np.testing.assert_array_equal(piece, image[5:14, 3:10])


def test_ops_names_build_the_same_operators(jpeg_files):
    assert ops.ImageDecoderCrop is ops.decoders.ImageCrop and ops.ImageDecoderSlice is ops.decoders.ImageSlice

    @rp.pipeline_def(batch_size=2, num_threads=1, seed=0)
    def pipe(old):
        jpegs, _ = fn.readers.file(files=jpeg_files[:2])
        crop = (fn.image_decoder_crop if old else fn.decoders.image_crop)(jpegs, crop=(30, 40))
        piece = (ops.ImageDecoderSlice if old else ops.decoders.ImageSlice)(start=[1, 2], shape=[5, 6])(jpegs)
        return crop, piece

    runs = []
    for old in (True, False):
        with pipe(old) as p:
            runs.append([np.asarray(tl.as_cpu()) for tl in p.run()])
    for a, b in zip(*runs, strict=True):
        np.testing.assert_array_equal(a, b)


def test_deferred_staging_reads_only_the_header(encoded, images):
    """Deferred to the Mixed stage, the CPU stage hands over the encoded bytes and the window."""
    op = ImageSliceDecoder("mixed", 0, start=[3, 5], shape=[7, 9], adjust_orientation=False)
    got = op.run_chunk([encoded], {}, [None] * len(encoded), DecodePlan(deferred=True))
    for item, image in zip(got, images, strict=True):
        assert isinstance(item, EncodedImage) and item.window == (3, 5, 7, 9)
        assert (item.height, item.width) == image.shape[:2]
    crop = ImageCropDecoder("mixed", 0, crop=(10, 20), adjust_orientation=False)
    item = crop.run_sample([encoded[0]], {"crop_pos_x": np.float32(0.0)}, None, DecodePlan(deferred=True))
    y0, x0 = crop_window(*images[0].shape[:2], 10, 20, 0.0, 0.5)
    assert x0 == 0 and item.window == (x0, y0, 20, 10)


def test_windows_outside_the_image_name_the_sample(jpeg_files):
    @rp.pipeline_def(batch_size=2, num_threads=1, seed=0)
    def pipe(which):
        jpegs, _ = fn.readers.file(files=jpeg_files[:2])
        if which == "crop":
            return fn.decoders.image_crop(jpegs, crop=(1000, 20))
        if which == "slice":
            return fn.decoders.image_slice(jpegs, start=[-10, 0], shape=[100, 100])
        return fn.decoders.image_slice(jpegs, start=[1], end=[2], axis_names="C")

    for which, message in (
        ("crop", r"decoders.image_crop: the window of 20x1000 \(w x h\) at \(\d+, -\d+\) does not lie inside"),
        ("slice", r"decoders.image_slice: the window of 100x100 \(w x h\) at \(-10, 0\) does not lie inside"),
        ("channels", "only the height and width can be sliced"),
    ):
        with pipe(which) as p, pytest.raises(rp.SampleError, match=rf"sample 0 .*{message}"):
            p.run()


@pytest.mark.parametrize(
    "op, args, message",
    [
        ("image_crop", {}, r"give crop=\(h, w\), or both crop_h and crop_w"),
        ("image_crop", {"crop": (10, 10), "crop_w": 3}, "not both"),
        ("image_crop", {"crop": (0, 10)}, r"crop must be a pair of positive sizes \(h, w\)"),
        ("image_crop", {"crop": 10}, r"crop must be a pair of positive sizes \(h, w\)"),
        ("image_crop", {"crop": (10, 10), "crop_pos_y": 2}, r"crop_pos_y must be in \[0, 1\]"),
        ("image_crop", {"crop": (10, 10), "cache_size": 5}, "unexpected argument.*cache_size"),
        ("image_slice", {"start": [1, 2], "rel_start": [0.1, 0.2]}, "start and rel_start are mutually exclusive"),
        ("image_slice", {"axis_names": 3}, "axis_names"),
        ("image_slice", {"memory_stats": "no"}, "memory_stats must be a bool"),
    ],
)
def test_invalid_arguments_are_named(jpeg_files, op, args, message):
    @rp.pipeline_def(batch_size=1, num_threads=1, seed=0)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:1])
        return getattr(fn.decoders, op)(jpegs, **args)

    with pytest.raises(rp.ArgumentError, match=rf"decoders.{op}: .*{message}"):
        pipe().build()


def test_only_the_window_is_decoded(encoded, images):
    """A JPEG cut off after 60% of its bytes: the whole image fails to decode, a window in its top
    rows decodes (libjpeg-turbo never reads the missing rows) and equals that window of the whole."""
    cut = encoded[0][: int(len(encoded[0]) * 0.6)]
    with pytest.raises(rp.DecodeError, match="truncated"):
        ImageDecoder("cpu", 0, adjust_orientation=False).run_sample([cut], {}, None)
    crop = ImageCropDecoder("cpu", 0, crop=(40, 60), crop_pos_y=0.0, adjust_orientation=False)
    piece = ImageSliceDecoder("cpu", 0, start=[100, 10], shape=[50, 30], adjust_orientation=False)
    y0, x0 = crop_window(*images[0].shape[:2], 40, 60, 0.5, 0.0)
    np.testing.assert_array_equal(crop.run_sample([cut], {}, None), images[0][y0 : y0 + 40, x0 : x0 + 60])
    np.testing.assert_array_equal(piece.run_sample([cut], {}, None), images[0][10:40, 100:150])
