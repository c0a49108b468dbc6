"""The batched resampling kernels (``resize``, ``random_resized_crop``) against the host paths.

Tolerances are the operators' stated ones: uint8 within 2 grey levels of Pillow (``run_sample``)
with a mean difference below 0.1; float32 within 1e-5 relative and 1e-4 absolute of ``compute``;
float16 within one float16 step. Nearest neighbour copies pixels: exactly the host's.
"""

from __future__ import annotations

import numpy as np
import pytest

from raypipe.backend import to_host
from raypipe.kernels import launch
from raypipe.kernels.filters import CUBIC, LANCZOS, LINEAR, NEAREST
from raypipe.kernels.resample import resample_batch
from raypipe.operators import resample as resample_module
from raypipe.operators.random_resized_crop import RandomResizedCrop
from raypipe.operators.resample import pillow_orders_passes, resample, resample_weights, vertical_first
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


def _weights_in_kernels(
    xp, cases: list[tuple[int, int, float, float, bool]], antialias: bool, kind: int = LINEAR
) -> list[np.ndarray]:
    """The weight matrices the kernels compute for ``cases`` of ``(in_size, out_size, start, stop,
    along_x)``, all in one batch: each sample is an ``in_size`` x ``in_size`` identity image resized
    along one axis (the other keeps its size, whose weights are exactly 1 and 0), so output position
    ``o`` at source column (or row) ``t`` holds the weight of tap ``t`` for ``o``."""
    images, sizes, boxes = [], [], []
    for in_size, out_size, start, stop, along_x in cases:
        images.append(np.eye(in_size, dtype=np.float32)[:, :, None])
        sizes.append((out_size, in_size) if along_x else (in_size, out_size))
        boxes.append((start, 0.0, stop, in_size) if along_x else (0.0, start, in_size, stop))
    packed = launch.pack(xp, on_device(xp, images), "test")
    out = resample_batch(xp, packed, np.array(sizes), np.array(boxes), antialias, np.float32, (kind, kind))
    return [got[:, :, 0].T if along_x else got[:, :, 0] for got, (*_, along_x) in zip(host_samples(out), cases)]


def _host_weights(
    in_size: int, out_size: int, start: float, stop: float, antialias: bool, kind: int = LINEAR
) -> np.ndarray:
    """:func:`resample_weights` as a dense ``(out_size, in_size)`` matrix."""
    first, matrix = resample_weights(in_size, out_size, start, stop, antialias, kind)
    dense = np.zeros((out_size, in_size), np.float32)
    dense[:, first : first + matrix.shape[1]] = matrix
    return dense


@pytest.mark.parametrize("kind", [LINEAR, CUBIC, LANCZOS, NEAREST])
@pytest.mark.parametrize("antialias", [True, False])
def test_kernel_weights_are_exactly_the_host_weights(xp, antialias, kind):
    """Whole axes, boxes inside and at the edges, fractional boxes, up- and downscaling, along
    either axis (so both passes and both pass orders compute weights)."""
    cases = [
        (24, 10, 0.0, 24.0),
        (9, 20, 0.0, 9.0),
        (30, 7, 4.0, 29.0),
        (17, 5, 2.5, 13.25),
        (8, 8, 0.0, 8.0),
        (1, 6, 0.0, 1.0),
        (31, 1, 0.0, 31.0),
        (12, 30, 11.0, 12.0),
    ]
    rng = np.random.default_rng(17)
    for _ in range(48):
        in_size = int(rng.integers(1, 33))
        start = float(rng.choice([0.0, rng.integers(0, in_size), rng.uniform(0, in_size)]))
        stop = float(rng.choice([in_size, rng.uniform(start, in_size)]))
        stop = stop if stop > start else float(in_size)
        cases.append((in_size, int(rng.integers(1, 33)), start, stop))
    if kind == LANCZOS:  # the widest filter: the fixed cases and a few drawn ones keep the simulator's time down
        cases = cases[:16]
    along = [bool(i % 2) for i in range(len(cases))]
    got = _weights_in_kernels(xp, [(*case, x) for case, x in zip(cases, along, strict=True)], antialias, kind)
    for weights, case in zip(got, cases, strict=True):
        if kind == LANCZOS:  # the device's sines, and the other axis's sinc at whole offsets (about 1e-17)
            np.testing.assert_allclose(weights, _host_weights(*case, antialias, kind), 1e-6, 1e-12, err_msg=str(case))
        else:
            np.testing.assert_array_equal(weights, _host_weights(*case, antialias, kind), err_msg=str(case))


def test_resize_ragged_uint8_batch_matches_pillow_in_both_pass_orders(xp, ragged):
    sizes = [(24, 10), (12, 20), (5, 9)]  # (h, w): rows first, columns first, upscaled
    images = ragged(sizes=sizes)
    assert [vertical_first(w, h, 10, 6) for h, w in sizes] == [pillow_orders_passes(), False, False]
    op = Resize("gpu", 0, resize_x=10, resize_y=6)
    assert launch.available(xp, 2 * sum(i.size for i in images))
    out = op.run_batch(xp, [on_device(xp, images)], {}, contexts(3))
    assert isinstance(out, xp.ndarray) and out.shape == (3, 6, 10, 3) and out.dtype == np.uint8
    for got, image, ctx in zip(host_samples(out), images, contexts(3), strict=True):
        assert_within_tolerance(got, op.run_sample([image], {}, ctx))
        assert np.abs(got.astype(np.int16) - op.compute(np, [image], {}, ctx)).max() <= 1


@pytest.mark.parametrize("orders", [True, False])
def test_kernels_run_the_passes_in_the_order_the_installed_pillow_does(xp, ragged, monkeypatch, orders):
    """Pillow before 13 always resamples columns first: with ``pillow_orders_passes`` saying so,
    the kernels and the host array path both do, where the other order differs by several levels."""
    monkeypatch.setattr(resample_module, "pillow_orders_passes", lambda: orders)
    images = ragged(sizes=[(20, 24), (13, 9)])[1:] + ragged(sizes=[(24, 10)])
    packed = launch.pack(xp, on_device(xp, images), "test")
    out = host_samples(resample_batch(xp, packed, np.array([(10, 6)] * 2), filters=(CUBIC, CUBIC)))
    gaps = []
    for got, image in zip(out, images, strict=True):
        assert vertical_first(image.shape[1], image.shape[0], 10, 6) == orders
        host = resample(np, image, 10, 6, filters=(CUBIC, CUBIC))
        assert np.abs(got.astype(np.int16) - host).max() <= 1
        monkeypatch.setattr(resample_module, "pillow_orders_passes", lambda: not orders)
        gaps.append(np.abs(resample(np, image, 10, 6, filters=(CUBIC, CUBIC)).astype(np.int16) - host).max())
        monkeypatch.setattr(resample_module, "pillow_orders_passes", lambda: orders)
    assert max(gaps) >= 3


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


@pytest.mark.parametrize("interp", ["INTERP_NN", "INTERP_CUBIC", "INTERP_LANCZOS3"])
def test_resize_and_random_resized_crop_filters_match_the_host(xp, ragged, interp):
    """Nearest exactly (a copy of the pixels the host gathers); cubic within the stated tolerance of
    Pillow's bicubic and within 1 of the host array path; also min and mag filters mixed."""
    images = ragged()
    ops = [
        Resize("gpu", 0, resize_x=10, resize_y=6, interp_type=interp),
        Resize("gpu", 0, resize_x=30, resize_y=4, min_filter=interp, mag_filter="INTERP_LINEAR"),
        RandomResizedCrop("gpu", 7, size=(6, 8), interp_type=interp),
    ]
    for op in ops:
        out = op.run_batch(xp, [on_device(xp, images)], {}, contexts(3))
        for got, image, ctx in zip(host_samples(out), images, contexts(3), strict=True):
            host = op.run_sample([image], {}, ctx)
            if interp == "INTERP_NN" and op.filters == (NEAREST, NEAREST):
                np.testing.assert_array_equal(got, host)
            else:
                assert_within_tolerance(got, host)
                assert np.abs(got.astype(np.int16) - op.compute(np, [image], {}, ctx)).max() <= 1


def test_nearest_float_batches_are_exact(xp, ragged):
    images = ragged(dtype=np.float32)
    op = Resize("gpu", 0, resize_x=13, resize_y=5, interp_type="INTERP_NN", dtype=np.float32)
    out = op.run_batch(xp, [on_device(xp, images)], {}, contexts(3))
    for got, image, ctx in zip(host_samples(out), images, contexts(3), strict=True):
        np.testing.assert_array_equal(got, op.run_sample([image], {}, ctx))


def test_save_attrs_adds_the_input_sizes_to_a_batch(xp, ragged):
    images = ragged()
    out, attrs = Resize("gpu", 0, resize_x=7, resize_y=5, save_attrs=True).run_batch(
        xp, [on_device(xp, images)], {}, contexts(3)
    )
    assert [to_host(a).tolist() for a in attrs] == [list(i.shape[:2]) for i in images]
    assert all(to_host(a).dtype == np.int32 for a in attrs) and to_host(out).shape == (3, 5, 7, 3)


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
