"""The fused crop_mirror_normalize kernel against the operator's host path (``run_sample``).

Tolerances are the operator's stated ones: float32 within 1e-5 relative and 1e-5 absolute,
float16 within one float16 step, integers within 1; windows, mirroring, layout and padding
exactly (the padding channels are zero).
"""

from __future__ import annotations

import numpy as np
import pytest

from raypipe.backend import to_host
from raypipe.kernels import launch
from raypipe.kernels.crop_mirror_normalize import crop_mirror_normalize_batch
from raypipe.operators.crop_mirror_normalize import CropMirrorNormalize
from tests.kernels.helpers import contexts, host_samples, on_device, per_sample

MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]
ARGS = {
    "mirror": [np.array(1, np.int32), np.array(0, np.int32), np.array(1, np.int32)],
    "crop_pos_x": [np.array(0.0, np.float32), np.array(0.5, np.float32), np.array(1.0, np.float32)],
    "crop_pos_y": [np.array(1.0, np.float32), np.array(0.3, np.float32), np.array(0.0, np.float32)],
}


def assert_within_tolerance(got: np.ndarray, ref: np.ndarray) -> None:
    assert got.shape == ref.shape and got.dtype == ref.dtype
    if ref.dtype.kind in "iu":
        assert np.abs(got.astype(np.int32) - ref).max() <= 1
    elif ref.dtype == np.float16:
        np.testing.assert_allclose(got.astype(np.float32), ref.astype(np.float32), rtol=1e-3, atol=1e-3)
    else:
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def _check(xp, op, images, args) -> list[np.ndarray]:
    ctxs = contexts(len(images))
    out = op.run_batch(xp, [on_device(xp, images)], args, ctxs)
    got = host_samples(out)
    for sample, image, i in zip(got, images, range(len(images)), strict=True):
        assert_within_tolerance(sample, op.run_sample([image], per_sample(args, i), ctxs[i]))
    return got


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.uint8, np.int8])
@pytest.mark.parametrize("layout", ["CHW", "HWC"])
@pytest.mark.parametrize("pad_output", [False, True])
def test_ragged_batch_with_per_sample_windows_and_mirror(xp, ragged, dtype, layout, pad_output):
    images = ragged(seed=3)
    shift = 0.0 if dtype == np.float32 else 10.0
    op = CropMirrorNormalize(
        "gpu", 0, crop=(6, 8), mean=MEAN, std=STD, scale=40.0, shift=shift, dtype=dtype,
        output_layout=layout, pad_output=pad_output,
    )  # fmt: skip
    assert launch.available(xp, 3 * sum(i.size for i in images))
    got = _check(xp, op, images, ARGS)
    channels = 4 if pad_output else 3
    assert {g.shape for g in got} == {(channels, 6, 8) if layout == "CHW" else (6, 8, channels)}
    if pad_output:
        assert all(not (g[3] if layout == "CHW" else g[..., 3]).any() for g in got)


def test_float32_with_shift_and_a_batch_array(xp, ragged):
    images = ragged(sizes=[(9, 11)] * 3, seed=4)
    op = CropMirrorNormalize("gpu", 0, crop=(5, 7), mean=100.0, std=[30.0, 40.0, 50.0], shift=-0.25)
    out = op.run_batch(xp, [xp.asarray(np.stack(images))], ARGS, contexts(3))
    assert isinstance(out, xp.ndarray) and out.shape == (3, 3, 5, 7)
    for i, image in enumerate(images):
        assert_within_tolerance(to_host(out[i]), op.run_sample([image], per_sample(ARGS, i), contexts(3)[i]))


def test_whole_ragged_images_give_a_list(xp, ragged):
    images = ragged(seed=5)
    op = CropMirrorNormalize("gpu", 0, mean=MEAN, std=STD, output_layout="HWC", mirror=1)
    got = _check(xp, op, images, {})
    assert [g.shape for g in got] == [i.shape for i in images]


def test_integer_outputs_saturate(xp, ragged):
    images = ragged(seed=6)
    op = CropMirrorNormalize("gpu", 0, crop=(5, 5), mean=128.0, std=0.5, dtype=np.int8)
    got = _check(xp, op, images, {})
    assert min(g.min() for g in got) == -128 and max(g.max() for g in got) == 127


def test_float_images_in(xp, ragged):
    images = ragged(dtype=np.float32, seed=7)
    op = CropMirrorNormalize("gpu", 0, crop=(4, 6), mean=0.5, std=0.25, output_layout="HWC")
    _check(xp, op, images, ARGS)


def test_the_kernel_writes_the_windows_it_is_given(xp):
    image = np.arange(5 * 6 * 2, dtype=np.uint8).reshape(5, 6, 2)
    packed = launch.pack(xp, on_device(xp, [image, image]), "test")
    out = crop_mirror_normalize_batch(
        xp, packed, [(1, 2, 3, 4), (0, 0, 3, 4)], [False, True], np.float32([1.0]), np.float32([1.0]),
        0.0, np.dtype(np.float32), channels_first=False, pad_to=[2, 2],
    )  # fmt: skip
    host = to_host(out)
    np.testing.assert_array_equal(host[0], image[1:4, 2:6].astype(np.float32) - 1)
    np.testing.assert_array_equal(host[1], image[0:3, 3::-1].astype(np.float32) - 1)


def test_errors_name_the_problem(xp, ragged):
    images = on_device(xp, ragged())
    with pytest.raises(ValueError, match="crop 10x10 exceeds the 13x9 image"):
        CropMirrorNormalize("gpu", 0, crop=(10, 10)).run_batch(xp, [images], {}, contexts(3))
    with pytest.raises(ValueError, match="mean/std have 2/1 values but the image has 3 channels"):
        CropMirrorNormalize("gpu", 0, mean=[1.0, 2.0]).run_batch(xp, [images], {}, contexts(3))


@pytest.mark.gpu
def test_jpegs_on_the_gpu_match_the_host(cp, jpeg_images):
    ctxs = contexts(len(jpeg_images))
    args = {"mirror": [np.array(i % 2) for i in range(len(jpeg_images))]}
    for dtype, layout in ((np.float32, "CHW"), (np.float16, "HWC"), (np.uint8, "CHW")):
        op = CropMirrorNormalize(
            "gpu", 0, crop=(224, 224), mean=MEAN, std=STD, dtype=dtype, output_layout=layout, pad_output=True
        )
        with cp.cuda.Stream(non_blocking=True) as stream:
            out = op.run_batch(cp, [on_device(cp, jpeg_images)], args, ctxs)
        stream.synchronize()
        assert isinstance(out, cp.ndarray) and out.dtype == dtype
        for i, image in enumerate(jpeg_images):
            assert_within_tolerance(to_host(out[i]), op.run_sample([image], per_sample(args, i), ctxs[i]))


@pytest.mark.parametrize("layout", ["CDHW", "DHWC", "DCHW"])
def test_volumes_go_through_the_fused_kernel_with_each_samples_depth_window(xp, monkeypatch, layout):
    """DHWC volumes of different depths: each one's depth window (``crop_pos_z`` per sample), then
    every slice of the batch in one launch (the run on the host checks the values)."""
    from raypipe.kernels import crop_mirror_normalize as kernels

    rng = np.random.default_rng(5)
    volumes = [rng.integers(0, 256, (d, 7 + d, 9, 3), dtype=np.uint8) for d in (4, 6, 5)]
    launches = []
    fused = kernels.crop_mirror_normalize_batch
    monkeypatch.setattr(kernels, "crop_mirror_normalize_batch", lambda *a, **k: launches.append(a[1]) or fused(*a, **k))
    op = CropMirrorNormalize("gpu", 0, crop=(3, 5, 4), mean=MEAN, std=STD, output_layout=layout, dtype=np.float16)
    args = {**ARGS, "crop_pos_z": [np.array(p, np.float32) for p in (0.0, 1.0, 0.4)]}
    got = _check(xp, op, volumes, args)
    assert [g.shape for g in got] == [tuple({"C": 3, "D": 3, "H": 5, "W": 4}[a] for a in layout)] * 3
    # one launch for the 9 slices of the batch (the channel-first CDHW goes sample by sample, as CFHW does)
    assert [len(frames) for frames in launches] == ([] if layout == "CDHW" else [9])
