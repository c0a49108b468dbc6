"""The batched resampling kernels (``resize``, ``random_resized_crop``) against the host paths.

Tolerances are the operators' stated ones: uint8 within 2 grey levels of Pillow (``run_sample``)
with a mean difference below 0.1; float32 within 1e-5 relative and 1e-4 absolute of ``compute``;
float16 within one float16 step.
"""

from __future__ import annotations

import numpy as np
import pytest

from raypipe.backend import to_host
from raypipe.kernels import launch
from raypipe.kernels.resample import resample_batch
from raypipe.operators.random_resized_crop import RandomResizedCrop
from raypipe.operators.resample import resample, resample_weights, vertical_first
from raypipe.operators.resize import Resize
from tests.kernels.helpers import contexts, host_samples, on_device

UINT8_MAX_DIFF = 2
UINT8_MEAN_DIFF = 0.1


def assert_within_tolerance(got: np.ndarray, ref: np.ndarray) -> None:
    assert got.shape == ref.shape and got.dtype == ref.dtype
    if ref.dtype == np.uint8:
        diff = np.abs(got.astype(np.int16) - ref)
        assert diff.max() <= UINT8_MAX_DIFF and diff.mean() < UINT8_MEAN_DIFF
    elif ref.dtype == np.float16:
        np.testing.assert_allclose(got.astype(np.float32), ref.astype(np.float32), rtol=1e-3, atol=1e-3)
    else:
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize(
    ("in_size", "out_size", "start", "stop", "antialias"),
    [
        (24, 10, 0.0, 24.0, True),
        (9, 20, 0.0, 9.0, True),
        (30, 7, 4.0, 29.0, True),
        (30, 7, 4.0, 29.0, False),
        (17, 5, 2.5, 13.25, True),
        (8, 8, 0.0, 8.0, True),
    ],
)
def test_kernel_weights_are_the_host_weights(xp, in_size, out_size, start, stop, antialias):
    """Each sample of a batch is a float32 row that is 1 at one source column and 0 elsewhere: the
    resized row holds that column's weight for every output position, computed in the kernel.
    Together they are the host's weight matrix, within one float32 step (the normalising sum may
    add in another order)."""
    first, matrix = resample_weights(in_size, out_size, start, stop, antialias)
    rows = np.zeros((in_size, 1, in_size, 1), np.float32)
    rows[np.arange(in_size), 0, np.arange(in_size), 0] = 1.0
    packed = launch.pack(xp, xp.asarray(rows), "test")
    sizes = np.tile([out_size, 1], (in_size, 1))
    boxes = np.tile([start, 0.0, stop, 1.0], (in_size, 1))
    out = to_host(resample_batch(xp, packed, sizes, boxes, antialias, np.float32))
    dense = np.zeros((out_size, in_size), np.float32)
    dense[:, first : first + matrix.shape[1]] = matrix
    np.testing.assert_allclose(out[:, 0, :, 0].T, dense, rtol=2**-23, atol=1e-12)


def test_resize_ragged_uint8_batch_matches_pillow_in_both_pass_orders(xp, ragged):
    sizes = [(24, 10), (12, 20), (5, 9)]  # (h, w): rows first, columns first, upscaled
    images = ragged(sizes=sizes)
    assert [vertical_first(w, h, 10, 6) for h, w in sizes] == [True, False, False]
    op = Resize("gpu", 0, resize_x=10, resize_y=6)
    assert launch.available(xp, 2 * sum(i.size for i in images))
    out = op.run_batch(xp, [on_device(xp, images)], {}, contexts(3))
    assert isinstance(out, xp.ndarray) and out.shape == (3, 6, 10, 3) and out.dtype == np.uint8
    for got, image, ctx in zip(host_samples(out), images, contexts(3), strict=True):
        assert_within_tolerance(got, op.run_sample([image], {}, ctx))
        assert np.abs(got.astype(np.int16) - op.compute(np, [image], {}, ctx)).max() <= 1


@pytest.mark.parametrize(
    ("in_dtype", "out_dtype"),
    [(np.uint8, np.float32), (np.float32, None), (np.float16, None), (np.int16, None), (np.uint8, np.float16)],
)
def test_resize_other_types_match_the_host_array_path(xp, ragged, in_dtype, out_dtype):
    images = ragged(dtype=in_dtype)
    op = Resize("gpu", 0, resize_x=11, resize_y=8, dtype=out_dtype)
    out = op.run_batch(xp, [on_device(xp, images)], {}, contexts(3))
    assert isinstance(out, xp.ndarray) and out.dtype == (out_dtype or in_dtype)
    for got, image, ctx in zip(host_samples(out), images, contexts(3), strict=True):
        ref = op.run_sample([image], {}, ctx)
        if ref.dtype == np.int16:
            assert np.abs(got.astype(np.int32) - ref).max() <= 1
        else:
            assert_within_tolerance(got, ref)


def test_resize_with_ragged_outputs_returns_a_packed_batch(xp, ragged):
    images = ragged()
    op = Resize("gpu", 0, resize_shorter=6)
    out = op.run_batch(xp, [on_device(xp, images)], {}, contexts(3))
    assert isinstance(out, launch.Packed) and out.shapes.tolist() == [[6, 7, 3], [9, 6, 3], [6, 16, 3]]
    for got, image, ctx in zip(host_samples(out), images, contexts(3), strict=True):
        assert_within_tolerance(got, op.run_sample([image], {}, ctx))


def test_resize_takes_a_batch_array_and_keeps_same_size_samples(xp, ragged):
    images = ragged(sizes=[(9, 7)] * 2)
    batch = xp.asarray(np.stack(images))
    out = Resize("gpu", 0, resize_x=7, resize_y=9).run_batch(xp, [batch], {}, contexts(2))
    np.testing.assert_array_equal(to_host(out), np.stack(images))


def test_resize_rejects_non_hwc_samples(xp):
    with pytest.raises(ValueError, match=r"resize: expects a non-empty HWC image, got shape \(4, 5\)"):
        Resize("gpu", 0, resize_x=3).run_batch(xp, [[xp.zeros((4, 5), np.uint8)]], {}, contexts(1))


def test_resample_batch_with_boxes_touching_the_edges(xp, ragged):
    images = ragged()
    boxes = [(0, 0, 24, 20), (3, 5, 9, 13), (10, 2, 19, 7)]
    sizes = [(8, 5), (4, 9), (12, 3)]
    packed = launch.pack(xp, on_device(xp, images), "test")
    out = resample_batch(xp, packed, np.array(sizes), np.array(boxes))
    for got, image, (w, h), box in zip(host_samples(out), images, sizes, boxes, strict=True):
        assert got.shape == (h, w, 3)
        assert np.abs(got.astype(np.int16) - resample(np, image, w, h, box=box)).max() <= 1


def test_random_resized_crop_uses_the_same_windows_as_the_host(xp, ragged):
    images = ragged()
    op = RandomResizedCrop("gpu", 7, size=(6, 8))
    out = op.run_batch(xp, [on_device(xp, images)], {}, contexts(3))
    assert isinstance(out, xp.ndarray) and out.shape == (3, 6, 8, 3)
    for got, image, ctx in zip(host_samples(out), images, contexts(3), strict=True):
        assert_within_tolerance(got, op.run_sample([image], {}, ctx))
        assert np.abs(got.astype(np.int16) - op.compute(np, [image], {}, ctx)).max() <= 1


def test_random_resized_crop_float_images(xp, ragged):
    images = ragged(dtype=np.float32)
    op = RandomResizedCrop("gpu", 7, size=5)
    out = op.run_batch(xp, [on_device(xp, images)], {}, contexts(3))
    for got, image, ctx in zip(host_samples(out), images, contexts(3), strict=True):
        assert_within_tolerance(got, op.run_sample([image], {}, ctx))


def test_numpy_batches_over_the_simulator_cap_keep_the_host_path():
    image = np.zeros((120, 100, 3), np.uint8)
    assert not launch.available(np, image.size)
    out = Resize("gpu", 0, resize_x=10, resize_y=10).run_batch(np, [[image]], {}, contexts(1))
    assert isinstance(out, list) and out[0].shape == (10, 10, 3)


@pytest.mark.gpu
def test_jpegs_on_the_gpu_match_the_host(cp, jpeg_images):
    ctxs = contexts(len(jpeg_images))
    resize = Resize("gpu", 0, resize_shorter=160)
    crop = RandomResizedCrop("gpu", 1, size=(224, 224))
    with cp.cuda.Stream(non_blocking=True) as stream:
        resized = resize.run_batch(cp, [on_device(cp, jpeg_images)], {}, ctxs)
        cropped = crop.run_batch(cp, [on_device(cp, jpeg_images)], {}, ctxs)
    stream.synchronize()
    assert isinstance(cropped, cp.ndarray) and cropped.shape == (len(jpeg_images), 224, 224, 3)
    for image, ctx, got_resized, got_cropped in zip(jpeg_images, ctxs, resized, cropped, strict=True):
        assert_within_tolerance(to_host(got_resized), resize.run_sample([image], {}, ctx))
        assert_within_tolerance(to_host(got_cropped), crop.run_sample([image], {}, ctx))


def test_random_resized_crop_rejects_non_hwc_samples(xp):
    with pytest.raises(ValueError, match=r"random_resized_crop: expects a non-empty HWC image, got shape \(0, 5, 3\)"):
        RandomResizedCrop("gpu", 0, size=4).run_batch(xp, [[xp.zeros((0, 5, 3), np.uint8)]], {}, contexts(1))
