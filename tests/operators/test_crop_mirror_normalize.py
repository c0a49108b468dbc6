"""crop_mirror_normalize on decoded JPEGs, against a straightforward float64 numpy reference.

Tolerances: float32 outputs within rtol 1e-5 / atol 1e-4 of the float64 reference
(values are O(1), float32 rounding is ~1e-7 relative); float16 within rtol 1e-3 /
atol 1e-3 (11-bit mantissa); integer outputs exact (the test picks parameters whose
results are whole numbers, so no rounding tie is involved).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, types

MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]


def reference(
    image: np.ndarray,
    crop=None,
    pos=(0.5, 0.5),
    mirror=False,
    mean=0.0,
    std=1.0,
    scale=1.0,
    shift=0.0,
    layout="CHW",
) -> np.ndarray:
    """Crop at ``round(pos * (size - crop))`` (ties away from zero), flip, normalize in float64."""
    if crop is not None:
        (h, w), (H, W) = crop, image.shape[:2]
        y0 = math.floor(pos[1] * (H - h) + 0.5)
        x0 = math.floor(pos[0] * (W - w) + 0.5)
        image = image[y0 : y0 + h, x0 : x0 + w]
    if mirror:
        image = image[:, ::-1]
    out = (image.astype(np.float64) - np.asarray(mean, np.float64)) / np.asarray(std, np.float64) * scale + shift
    return out.transpose(2, 0, 1) if layout == "CHW" else out


@rp.pipeline_def(batch_size=8, num_threads=2, seed=3)
def imagenet_pipe(files, device, **cmn_args):
    jpegs, _ = fn.readers.file(files=files)
    images = fn.decoders.image(jpegs)
    mirror = fn.random.coin_flip()
    out = fn.crop_mirror_normalize(images, device=device, mirror=mirror, **cmn_args)
    return out, images, mirror


def run_imagenet(files, device, **cmn_args):
    with imagenet_pipe(files, device, **cmn_args) as pipe:
        out, images, mirror = pipe.run()
    host = out.as_cpu()
    return host, [images.at(i) for i in range(len(images))], np.asarray(mirror), out.layout()


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_crop_mirror_normalize_matches_reference(jpeg_files, device):
    out, images, mirror, layout = run_imagenet(
        jpeg_files[:8], device, crop=(200, 180), dtype=types.FLOAT, mean=MEAN, std=STD
    )
    assert set(mirror.tolist()) == {0, 1}, "the seed must give both mirrored and plain samples"
    assert layout == "CHW"
    dense = np.asarray(out)
    assert dense.shape == (8, 3, 200, 180) and dense.dtype == np.float32
    for i, image in enumerate(images):
        expected = reference(image, crop=(200, 180), mirror=bool(mirror[i]), mean=MEAN, std=STD)
        np.testing.assert_allclose(dense[i], expected, rtol=1e-5, atol=1e-4)


def test_gpu_batched_path_equals_host_path(jpeg_files):
    """The GPU stage stacks the windows and normalizes the whole batch; same float32 ops, same bits."""
    host, _, _, _ = run_imagenet(jpeg_files[:8], "cpu", crop=(224, 224), mean=MEAN, std=STD)
    batched, _, _, _ = run_imagenet(jpeg_files[:8], "gpu", crop=(224, 224), mean=MEAN, std=STD)
    np.testing.assert_array_equal(np.asarray(host), np.asarray(batched))


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_per_sample_crop_position(jpeg_files, device):
    @rp.pipeline_def(batch_size=4, num_threads=2, seed=5)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:4])
        images = fn.decoders.image(jpegs)
        pos_x = fn.random.uniform(range=(0.0, 1.0))
        out = fn.crop_mirror_normalize(
            images, device=device, crop=(100, 120), crop_pos_x=pos_x, crop_pos_y=1.0, output_layout="HWC"
        )
        return out, images, pos_x

    with pipe() as p:
        out, images, pos_x = p.run()
    assert out.layout() == "HWC"
    dense = np.asarray(out.as_cpu())
    assert len(set(np.asarray(pos_x).tolist())) == 4
    for i in range(4):
        expected = reference(images.at(i), crop=(100, 120), pos=(float(pos_x.at(i)), 1.0), layout="HWC")
        np.testing.assert_array_equal(dense[i], expected.astype(np.float32))


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_hwc_float16_without_crop(jpeg_files, device):
    """No crop: decoded sizes differ, so the GPU stage takes its per-sample path."""
    out, images, mirror, layout = run_imagenet(
        jpeg_files[:8], device, dtype=types.FLOAT16, output_layout="HWC", mean=MEAN, std=STD, scale=0.5, shift=2.0
    )
    assert layout == "HWC"
    assert len({image.shape for image in images}) > 1
    for i, image in enumerate(images):
        got = out.at(i)
        assert got.dtype == np.float16 and got.shape == image.shape
        expected = reference(image, mirror=bool(mirror[i]), mean=MEAN, std=STD, scale=0.5, shift=2.0, layout="HWC")
        np.testing.assert_allclose(got.astype(np.float64), expected, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_uint8_output_saturates(jpeg_files, device):
    out, images, mirror, _ = run_imagenet(
        jpeg_files[:8], device, crop=(150, 150), dtype=types.UINT8, scale=2.0, shift=-200.0
    )
    dense = np.asarray(out)
    assert dense.dtype == np.uint8
    assert dense.min() == 0 and dense.max() == 255
    for i, image in enumerate(images):
        expected = np.clip(reference(image, crop=(150, 150), mirror=bool(mirror[i]), scale=2.0, shift=-200.0), 0, 255)
        np.testing.assert_array_equal(dense[i], expected.astype(np.uint8))


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_pad_output_adds_zero_channel(jpeg_files, device):
    plain, _, _, _ = run_imagenet(jpeg_files[:8], device, crop=(64, 64), mean=MEAN, std=STD)
    padded, _, _, _ = run_imagenet(jpeg_files[:8], device, crop=(64, 64), mean=MEAN, std=STD, pad_output=True)
    plain, padded = np.asarray(plain), np.asarray(padded)
    assert padded.shape == (8, 4, 64, 64)
    np.testing.assert_array_equal(padded[:, :3], plain)
    assert not padded[:, 3].any()


def test_crop_h_and_crop_w_are_crop(jpeg_files):
    by_pair = np.asarray(run_imagenet(jpeg_files[:8], "cpu", crop=(20, 30))[0])
    by_name = np.asarray(run_imagenet(jpeg_files[:8], "cpu", crop_h=20, crop_w=30)[0])
    assert by_name.shape == (8, 3, 20, 30)
    np.testing.assert_array_equal(by_name, by_pair)


def test_crop_larger_than_image_fails_naming_the_sample(jpeg_files):
    with imagenet_pipe(jpeg_files[:8], "cpu", crop=(2000, 100)) as pipe:
        with pytest.raises(rp.SampleError, match=r"crop 2000x100 exceeds the \d+x\d+ image"):
            pipe.run()


def test_mean_length_must_match_channels(jpeg_files):
    @rp.pipeline_def(batch_size=2, num_threads=1, seed=0)
    def gray():
        jpegs, _ = fn.readers.file(files=jpeg_files[:2])
        return fn.crop_mirror_normalize(fn.decoders.image(jpegs, output_type=types.GRAY), mean=MEAN, std=STD)

    with gray() as pipe:
        with pytest.raises(rp.SampleError, match="mean/std have 3/3 values but the image has 1 channels"):
            pipe.run()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"crop": (224,)}, r"crop must be two positive ints \(height, width\) or three"),
        ({"crop": (0, 10)}, "crop must be two positive ints"),
        ({"crop_d": 3}, "crop_d needs crop_h and crop_w"),
        ({"crop_pos_z": -0.5}, r"crop_pos_z must be in \[0, 1\]"),
        ({"crop_pos_x": 1.5}, r"crop_pos_x must be in \[0, 1\]"),
        ({"crop_pos_y": "top"}, "crop_pos_y must be a number"),
        ({"mirror": 2}, "mirror must be 0 or 1"),
        ({"std": [1.0, 0.0, 1.0]}, "std must not contain zeros"),
        ({"mean": [1.0, 2.0], "std": [1.0, 2.0, 3.0]}, "mean has 2 values but std has 3"),
        ({"mean": []}, "mean must hold one or more finite numbers"),
        ({"scale": float("nan")}, "scale must be finite"),
        ({"dtype": "not-a-type"}, "dtype must be a types"),
        ({"output_layout": "NCHW"}, "output_layout must be one of"),
        ({"fill": 0}, "unexpected keyword argument 'fill'"),
        ({"crop_h": 10}, r"give crop=\(h, w\) or both crop_h and crop_w, not a mix"),
        ({"crop": (10, 10), "crop_w": 10}, "not a mix"),
    ],
)
def test_argument_errors(jpeg_files, kwargs, match):
    @rp.pipeline_def(batch_size=1, num_threads=1)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:1])
        return fn.crop_mirror_normalize(fn.decoders.image(jpegs), **kwargs)

    with pipe() as p:
        with pytest.raises(rp.ArgumentError, match=f"crop_mirror_normalize: .*{match}"):
            p.build()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"dtype": types.FLOAT, "mean": [10.0, 20.0, 30.0], "std": [2.0, 3.0, 4.0], "shift": 1.5},
        {"dtype": types.FLOAT16, "output_layout": "HWC", "mean": 100.0, "std": 50.0, "crop": (20, 30)},
        {"dtype": types.UINT8, "scale": 2.0, "mean": 64.0},
        {"dtype": types.UINT8},  # only the layout changes: no float pass
        {"dtype": types.FLOAT, "pad_output": True, "output_layout": "HWC"},
        {"dtype": types.INT16, "mean": 128.0, "std": 0.5, "crop": (31, 17), "crop_pos_x": 0.1},
    ],
)
@pytest.mark.parametrize("mirror", [0, 1])
def test_one_pass_into_a_batch_row_equals_compute(kwargs, mirror):
    from raypipe.keyed_random import SampleContext
    from raypipe.operators.crop_mirror_normalize import CropMirrorNormalize

    op = CropMirrorNormalize("cpu", 0, mirror=mirror, **kwargs)
    image = np.random.default_rng(mirror).integers(0, 256, (40, 50, 3), np.uint8)
    ctx = SampleContext(0, 0, 0)
    expected = op.compute(np, [image], {}, ctx)
    batch = np.full((2, *expected.shape), 7, expected.dtype)
    written = op.run_sample_into([image], {}, ctx, lambda shape, dtype: batch[1] if shape == expected.shape else None)
    assert written.base is batch and written.dtype == expected.dtype
    np.testing.assert_array_equal(batch[1], expected)
    assert np.all(batch[0] == 7)
    np.testing.assert_array_equal(op.run_sample([image], {}, ctx), expected)


def test_batch_windows_and_mirrors_are_each_samples():
    """The GPU stage computes every sample's window and mirror flag as arrays: the same as the
    per-sample rule, including DALI's rounding of the anchor and per-sample positions."""
    from raypipe.operators.crop_mirror_normalize import CropMirrorNormalize

    op = CropMirrorNormalize("gpu", 0, crop=(5, 4))
    rng = np.random.default_rng(3)
    shapes = np.array([[9, 7, 3], [5, 4, 3], [12, 30, 3], [8, 8, 1]])
    args = {
        "crop_pos_x": [np.array([v], np.float32) for v in rng.random(4)],
        "crop_pos_y": [np.array([v], np.float32) for v in [0.5, 0.0, 1.0, 0.25]],
        "mirror": [np.array([v], np.int32) for v in (1, 0, 1, 0)],
    }
    windows = op._windows(shapes, args)
    for i, shape in enumerate(shapes.tolist()):
        sample = {k: v[i] for k, v in args.items()}
        assert tuple(windows[i].tolist()) == op._window(np.zeros(shape), sample)
    assert op._mirrored_batch(args, 4).tolist() == [True, False, True, False]
    with pytest.raises(rp.errors.ArgumentError, match=r"crop_pos_x must be in \[0, 1\]"):
        op._windows(shapes[:1], {"crop_pos_x": [np.array([1.5])]})


def test_batch_crop_anchors_are_crop_window_for_each_sample():
    """Anchors for a whole batch: the scalar rule's integers, ties (halves) and windows larger than
    the image (negative anchors) included."""
    from raypipe.operators.crop import crop_anchors, crop_window

    rng = np.random.default_rng(4)
    heights, widths = rng.integers(1, 60, 300), rng.integers(1, 60, 300)
    pos_x = rng.choice([0.0, 0.5, 1.0, 0.25], 300)
    pos_y = np.where(rng.random(300) < 0.5, 0.5, rng.random(300).astype(np.float32))
    y0, x0 = crop_anchors(heights, widths, 17, 24, pos_x, pos_y)
    expected = [crop_window(h, w, 17, 24, px, py) for h, w, px, py in zip(heights, widths, pos_x, pos_y, strict=True)]
    assert list(zip(y0.tolist(), x0.tolist(), strict=True)) == expected


@pytest.mark.parametrize(
    "args, same",
    [
        (
            {"output_dtype": "FLOAT16", "mean": [10.0, 20.0, 30.0], "std": [2.0, 3.0, 4.0]},
            {"dtype": "FLOAT16", "mean": [10.0, 20.0, 30.0], "std": [2.0, 3.0, 4.0]},
        ),
        ({"output_dtype": "UINT8", "crop": (40, 50), "image_type": "RGB"}, {"dtype": "UINT8", "crop": (40, 50)}),
        ({"image_type": "BGR", "output_layout": "HWC"}, {"output_layout": "HWC"}),
    ],
)
def test_deprecated_output_dtype_and_image_type_keep_dalis_meaning(ours, dali, images, args, same):
    """As DALI 2.4: ``output_dtype`` is ``dtype``, ``image_type`` changes nothing (values within
    DALI's float16 rounding and one level of uint8 rounding)."""

    def build(x, fn, types, args=args):
        named = {"output_dtype", "dtype", "image_type"}
        return fn.crop_mirror_normalize(x, **{k: getattr(types, v) if k in named else v for k, v in args.items()})

    theirs = dali(images, build, "HWC")
    mine = ours(images, lambda x: build(x, fn, types), "HWC")
    plain = ours(images, lambda x: build(x, fn, types, same), "HWC")
    for their, my, expected in zip(theirs[0][0], mine[0][0], plain[0][0], strict=True):
        assert my.dtype == their.dtype and my.shape == their.shape
        np.testing.assert_array_equal(my, expected)
        np.testing.assert_allclose(my.astype(np.float32), their.astype(np.float32), rtol=1e-3, atol=1)


def test_output_dtype_with_dtype_is_an_error():
    from raypipe.operators.crop_mirror_normalize import CropMirrorNormalize

    with pytest.raises(rp.ArgumentError, match="dtype and its deprecated alias output_dtype cannot be used together"):
        CropMirrorNormalize("cpu", 0, dtype=types.FLOAT, output_dtype=types.FLOAT16)
    with pytest.raises(rp.ArgumentError, match="image_type must be a types.DALIImageType"):
        CropMirrorNormalize("cpu", 0, image_type=3)


#: out-of-bounds windows: a crop larger than the image along one or both axes, at the corners, mirrored
OUT_OF_BOUNDS = [
    ({"crop": (6, 7), "fill_values": [1.0, 2.0, 3.0], "mean": [10.0, 20.0, 30.0], "std": [2.0, 2.0, 2.0]}, 0),
    ({"crop": (6, 7), "fill_values": [1.0, 2.0, 3.0], "output_layout": "HWC"}, 1),
    ({"crop": (6, 3), "crop_pos_y": 1.0, "crop_pos_x": 0.0, "fill_values": 9.0, "dtype": "UINT8"}, 0),
    ({"crop": (3, 9), "crop_pos_x": 0.2, "fill_values": -1.0, "pad_output": True, "output_layout": "HWC"}, 1),
    ({"crop": (2, 2), "crop_pos_x": 1.0, "crop_pos_y": 1.0}, 1),  # inside: the usual path
    ({"crop": (2, 2), "fill_values": 7.0, "pad_output": True, "output_layout": "HWC"}, 0),  # added channels: 7
    ({"fill_values": [1.0, 2.0, 3.0, 4.0], "pad_output": True}, 1),  # no crop: the whole image
]


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("policy", ["pad", "trim_to_shape"])
@pytest.mark.parametrize(("args", "mirror"), OUT_OF_BOUNDS)
def test_windows_outside_the_image_are_dalis(ours, dali, device, policy, args, mirror):
    """``pad`` fills the window's outside with ``fill_values`` (output values; a mirrored window's
    padding flips with it), ``trim_to_shape`` cuts the window to the image: DALI 2.4's values."""
    samples = [(np.arange(4 * 5 * 3).reshape(4, 5, 3) * 4).astype(np.uint8), np.full((3, 8, 3), 200, np.uint8)]

    def build(x, f, t, device="cpu"):
        named = {k: getattr(t, v) if k == "dtype" else v for k, v in args.items()}
        return f.crop_mirror_normalize(x, out_of_bounds_policy=policy, mirror=mirror, **named)

    theirs = dali(samples, build, "HWC")
    mine = ours(samples, lambda x: build(x.gpu() if device == "gpu" else x, fn, types, device), "HWC")
    assert mine[0][1] == theirs[0][1]
    for their, my in zip(theirs[0][0], mine[0][0], strict=True):
        assert my.dtype == their.dtype and my.shape == their.shape
        np.testing.assert_allclose(my, their, rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_a_sequence_pads_every_frame_alike(ours, dali, device):
    frames = np.stack([(np.arange(4 * 5 * 3).reshape(4, 5, 3) * k).astype(np.uint8) for k in (1, 2, 3)])

    def build(x, f, t):
        return f.crop_mirror_normalize(
            x, crop=(6, 4), out_of_bounds_policy="pad", fill_values=5.0, output_layout="FCHW"
        )

    theirs = dali([frames], build, "FHWC")
    mine = ours([frames], lambda x: build(x.gpu() if device == "gpu" else x, fn, types), "FHWC")
    assert mine[0][1] == theirs[0][1] == "FCHW"
    np.testing.assert_allclose(mine[0][0][0], theirs[0][0][0], rtol=1e-6)


def test_pad_needs_a_fill_value_per_channel_or_one():
    from raypipe.operators.crop_mirror_normalize import CropMirrorNormalize

    op = CropMirrorNormalize("cpu", 0, crop=(6, 6), out_of_bounds_policy="pad", fill_values=[1.0, 2.0])
    with pytest.raises(ValueError, match="fill_values has 2 values for an output of 3 channels"):
        op.run_sample([np.zeros((4, 4, 3), np.uint8)], {}, None)
    with pytest.raises(rp.ArgumentError, match="out_of_bounds_policy must be one of"):
        CropMirrorNormalize("cpu", 0, out_of_bounds_policy="clamp")


def test_fractional_crop_sizes_are_truncated_as_dali(ours, dali):
    image = (np.arange(40 * 50 * 3).reshape(40, 50, 3) % 251).astype(np.uint8)

    def build(x, f, t):
        return f.crop_mirror_normalize(x, crop=(20.6, 30.5), output_layout="HWC")

    theirs = dali([image], build, "HWC")
    mine = ours([image], lambda x: build(x, fn, types), "HWC")
    assert mine[0][0][0].shape == theirs[0][0][0].shape == (20, 30, 3)
    np.testing.assert_array_equal(mine[0][0][0], theirs[0][0][0])


_RNG = np.random.default_rng(4)
VOLUMES = [_RNG.integers(0, 256, (6, 5, 4, 3), dtype=np.uint8), _RNG.integers(0, 256, (7, 6, 5, 3), dtype=np.uint8)]


def volume_reference(volume, crop=None, pos=(0.5, 0.5, 0.5), mirror=False, mean=0.0, std=1.0, layout="CDHW"):
    """A (d, h, w) window at ``round(pos * (size - crop))`` per axis (pos as (z, y, x)), flipped
    along the width, normalized in float64 and laid out as ``layout``."""
    if crop is not None:
        starts = [math.floor(p * (n - c) + 0.5) for p, n, c in zip(pos, volume.shape[:3], crop)]
        volume = volume[tuple(slice(s, s + c) for s, c in zip(starts, crop))]
    if mirror:
        volume = volume[:, :, ::-1]
    out = (volume.astype(np.float64) - np.asarray(mean, np.float64)) / np.asarray(std, np.float64)
    return out.transpose(["DHWC".index(axis) for axis in layout])


VOLUME_CASES = [
    ({"crop_d": 3, "crop_h": 2, "crop_w": 2, "output_layout": "CDHW"}, {"crop": (3, 2, 2)}),
    (
        {"crop": (3, 2, 2), "crop_pos_z": 0.0, "crop_pos_x": 1.0, "output_layout": "DHWC"},
        {"crop": (3, 2, 2), "pos": (0.0, 0.5, 1.0), "layout": "DHWC"},
    ),
    (
        {"crop_d": 4, "crop_h": 3, "crop_w": 2, "mirror": 1, "output_layout": "DCHW", "mean": [1, 2, 3], "std": 2},
        {"crop": (4, 3, 2), "mirror": True, "mean": [1, 2, 3], "std": 2, "layout": "DCHW"},
    ),
    ({"crop_h": 2, "crop_w": 3, "crop_pos_z": 0.9, "output_layout": "CDHW"}, {"crop": None}),  # no depth window
    ({"output_layout": "CDHW", "mirror": 1}, {"mirror": True}),
]


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize(("args", "expected"), VOLUME_CASES)
def test_volumes_are_cut_in_depth_too_as_dalis(ours, device, args, expected):
    """DHWC volumes: a (d, h, w) window (``crop_d``, ``crop_pos_z``), mirrored along the width,
    normalized and written as CDHW, DHWC or DCHW, on both devices (DALI 2.4 gives these values)."""
    mine = ours(VOLUMES, lambda x: fn.crop_mirror_normalize(x.gpu() if device == "gpu" else x, **args), "DHWC")
    assert mine[0][1] == args["output_layout"]
    for volume, out in zip(VOLUMES, mine[0][0], strict=True):
        if expected.get("crop", 0) is None:  # 2-D window: the whole depth
            reference = volume_reference(volume[:, :, :, :], crop=(volume.shape[0], 2, 3), pos=(0.5, 0.5, 0.5))
        else:
            reference = volume_reference(volume, **expected)
        assert out.dtype == np.float32
        np.testing.assert_allclose(out, reference, rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize(("args", "expected"), VOLUME_CASES)
def test_volumes_against_dali(ours, dali, args, expected):
    theirs = dali(VOLUMES, lambda x, f, t: f.crop_mirror_normalize(x, **args), "DHWC")
    mine = ours(VOLUMES, lambda x: fn.crop_mirror_normalize(x, **args), "DHWC")
    assert mine[0][1] == theirs[0][1]
    for their, my in zip(theirs[0][0], mine[0][0], strict=True):
        np.testing.assert_array_equal(my, their)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_a_window_deeper_than_the_volume_pads_trims_or_fails(ours, device):
    def run(**args):
        return ours(
            VOLUMES,
            lambda x: fn.crop_mirror_normalize(
                x.gpu() if device == "gpu" else x, crop_d=9, crop_h=2, crop_w=2, output_layout="CDHW", **args
            ),
            "DHWC",
        )[0][0]

    padded = run(out_of_bounds_policy="pad", fill_values=[7, 8, 9])
    trimmed = run(out_of_bounds_policy="trim_to_shape")
    for volume, pad, trim in zip(VOLUMES, padded, trimmed, strict=True):
        depth = volume.shape[0]
        inside = volume_reference(volume, crop=(depth, 2, 2))
        np.testing.assert_allclose(trim, inside, rtol=1e-6)
        before = math.floor(0.5 * (9 - depth) + 0.5)  # the window's start is -before: round(0.5 * (depth - 9))
        assert pad.shape == (3, 9, 2, 2)
        np.testing.assert_allclose(pad[:, before : before + depth], inside, rtol=1e-6)
        fill = np.array([7, 8, 9], np.float32).reshape(3, 1, 1, 1)
        np.testing.assert_array_equal(pad[:, :before], np.broadcast_to(fill, (3, before, 2, 2)))
        np.testing.assert_array_equal(pad[:, before + depth :], np.broadcast_to(fill, (3, 9 - before - depth, 2, 2)))
    with pytest.raises(rp.SampleError, match="crop depth 9 exceeds the volume's 6"):
        run()


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_a_channel_first_volume_is_read_as_its_dhwc_view(ours, device):
    """CDHW input, as DALI reads it: the same result as its DHWC transpose."""
    args = {"crop_d": 3, "crop_h": 2, "crop_w": 2, "mirror": 1, "output_layout": "CDHW", "crop_pos_z": 0.2}
    first = [np.ascontiguousarray(v.transpose(3, 0, 1, 2)) for v in VOLUMES]
    mine = ours(first, lambda x: fn.crop_mirror_normalize(x.gpu() if device == "gpu" else x, **args), "CDHW")
    last = ours(VOLUMES, lambda x: fn.crop_mirror_normalize(x, **args), "DHWC")
    for a, b in zip(mine[0][0], last[0][0], strict=True):
        np.testing.assert_array_equal(a, b)


def test_images_ignore_the_depth_window_as_dalis(ours):
    images = [volume[0] for volume in VOLUMES]
    plain = ours(images, lambda x: fn.crop_mirror_normalize(x, crop=(2, 2)), "HWC")
    for args in ({"crop_d": 3, "crop_h": 2, "crop_w": 2, "crop_pos_z": 0.1}, {"crop_h": 2, "crop_w": 2, "crop_d": 0}):
        same = ours(images, lambda x, args=args: fn.crop_mirror_normalize(x, **args), "HWC")
        for mine, theirs in zip(same[0][0], plain[0][0], strict=True):
            np.testing.assert_array_equal(mine, theirs)


@pytest.mark.parametrize(
    ("layout", "args", "match"),
    [
        ("DHWC", {}, r"the input is a volume \(DHWC\): output_layout must be one of \('DCHW', 'DHWC', 'CDHW'\)"),
        ("HWC", {"output_layout": "CDHW"}, "output_layout 'CDHW' needs DHWC volumes, got layout 'HWC'"),
        ("DHWC", {"crop_d": 3, "output_layout": "CDHW"}, "crop_d needs crop_h and crop_w"),
    ],
)
def test_volume_layouts_are_checked_when_the_graph_is_built(ours, layout, args, match):
    samples = VOLUMES if layout == "DHWC" else [volume[0] for volume in VOLUMES]
    with pytest.raises(rp.ArgumentError, match=match):
        ours(samples, lambda x: fn.crop_mirror_normalize(x, **args), layout)
