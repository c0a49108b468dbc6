"""``random_resized_crop``: Pillow parity on the sample's window, determinism across devices,
threads and seeds, argument errors."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

import raypipe as rp
from raypipe import fn, types
from raypipe.keyed_random import SampleContext
from raypipe.operators.random_resized_crop import RandomResizedCrop

SIZE = (96, 128)  # (h, w)
# In the pipelines below the reader, decoder and random_resized_crop are nodes 0, 1, 2;
# the window depends on the operator id, so the reference rebuilds it with id 2.
OP_ID = 2
# GPU path vs Pillow: float32 matrix products vs 22-bit fixed point, see test_resize.py.
GPU_MAX_DIFF = 2
GPU_MEAN_DIFF = 0.1


def _samples(tl) -> list[np.ndarray]:
    tl = tl.as_cpu()
    return [np.asarray(tl.at(i)) for i in range(len(tl))]


def _pipe(files, device, seed=3, num_threads=2, **args):
    @rp.pipeline_def(batch_size=len(files), num_threads=num_threads, seed=seed)
    def pipe():
        jpegs, _ = fn.readers.file(files=files)
        images = fn.decoders.image(jpegs)
        return fn.random_resized_crop(images, device=device, size=SIZE, **args), images

    return pipe()


def _run(files, device, **kwargs):
    with _pipe(files, device, **kwargs) as p:
        out, src = p.run()
        info = p.last_batch_info
    return _samples(out), _samples(src), info


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_matches_pillow_on_the_samples_window(jpeg_files, device):
    outs, srcs, info = _run(jpeg_files[:4], device)
    op = RandomResizedCrop(device="cpu", op_id=OP_ID, size=SIZE)
    for got, src, index in zip(outs, srcs, info.sample_indices):
        x, y, w, h = op.window(src.shape[1], src.shape[0], SampleContext(3, info.epoch, index))
        assert (w, h) != (src.shape[1], src.shape[0])
        ref = np.asarray(Image.fromarray(src).resize(SIZE[::-1], Image.Resampling.BILINEAR, box=(x, y, x + w, y + h)))
        assert got.shape == (*SIZE, 3) and got.dtype == np.uint8
        diff = np.abs(got.astype(np.int32) - ref)
        if device == "cpu":
            assert diff.max() == 0
        else:
            assert diff.max() <= GPU_MAX_DIFF and diff.mean() < GPU_MEAN_DIFF


def test_cpu_and_gpu_choose_the_same_window(jpeg_files):
    cpu, _, _ = _run(jpeg_files[4:8], "cpu")
    gpu, _, _ = _run(jpeg_files[4:8], "gpu")
    for a, b in zip(cpu, gpu):
        # A different window would differ by far more than resampling rounding.
        diff = np.abs(a.astype(np.int32) - b)
        assert diff.max() <= GPU_MAX_DIFF and diff.mean() < GPU_MEAN_DIFF


def test_windows_do_not_depend_on_threads(jpeg_files):
    one, _, _ = _run(jpeg_files[:6], "cpu", num_threads=1)
    three, _, _ = _run(jpeg_files[:6], "cpu", num_threads=3)
    for a, b in zip(one, three):
        np.testing.assert_array_equal(a, b)


def test_seeds_and_epochs_change_the_windows(jpeg_files):
    first, _, _ = _run(jpeg_files[:4], "cpu", seed=3)
    other_seed, _, _ = _run(jpeg_files[:4], "cpu", seed=4)
    with _pipe(jpeg_files[:4], "cpu", seed=3) as p:
        epoch0 = _samples(p.run()[0])
        epoch1 = _samples(p.run()[0])
        assert p.last_batch_info.epoch == 1
    assert all(np.array_equal(a, b) for a, b in zip(first, epoch0))
    assert not any(np.array_equal(a, b) for a, b in zip(first, other_seed))
    assert not any(np.array_equal(a, b) for a, b in zip(epoch0, epoch1))


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("antialias", [True, False])
def test_whole_image_window_equals_resize(jpeg_files, device, antialias):
    @rp.pipeline_def(batch_size=3, num_threads=2, seed=3)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:3])
        images = fn.decoders.image(jpegs)
        # A full-area window only fits at the image's own aspect ratio: the one attempt
        # fails and the fallback window is the whole image.
        crops = fn.random_resized_crop(
            images,
            device=device,
            size=SIZE,
            random_area=(1.0, 1.0),
            random_aspect_ratio=(0.1, 10.0),
            num_attempts=1,
            antialias=antialias,
        )
        resized = fn.resize(images, device=device, resize_x=SIZE[1], resize_y=SIZE[0], antialias=antialias)
        return crops, resized

    with pipe() as p:
        crops, resized = (_samples(tl) for tl in p.run())
    for a, b in zip(crops, resized):
        np.testing.assert_array_equal(a, b)


def test_int_size_gives_a_square(jpeg_files):
    @rp.pipeline_def(batch_size=2, num_threads=1, seed=0)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:2])
        return fn.random_resized_crop(fn.decoders.image(jpegs), size=64)

    with pipe() as p:
        (out,) = p.run()
    assert np.asarray(out).shape == (2, 64, 64, 3)


def test_has_no_fixed_output_size_hint():
    assert not hasattr(RandomResizedCrop(device="cpu", op_id=0, size=8), "fixed_output_size")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "size is required"),
        ({"size": (0, 5)}, r"size must be a positive int or a pair \(h, w\)"),
        ({"size": (5, 5, 5)}, r"size must be a positive int or a pair \(h, w\)"),
        ({"size": 8, "random_area": (0.5, 0.1)}, "random_area must satisfy lo <= hi"),
        ({"size": 8, "random_area": (0.1, 1.5)}, r"random_area must lie in \(0, 1\]"),
        ({"size": 8, "random_aspect_ratio": (0, 1)}, "random_aspect_ratio must be positive"),
        ({"size": 8, "num_attempts": 0}, "num_attempts must be a positive int"),
        ({"size": 8, "interp_type": "nearest"}, "interp_type 'nearest' is not supported"),
    ],
)
def test_invalid_arguments_are_named(jpeg_files, args, message):
    @rp.pipeline_def(batch_size=1, num_threads=1, seed=0)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:1])
        return fn.random_resized_crop(fn.decoders.image(jpegs), **args)

    p = pipe()
    with pytest.raises(rp.ArgumentError, match=f"random_resized_crop: {message}"):
        p.build()
    p.close()


def test_float_output_is_the_uint8_result_before_rounding(jpeg_files):
    @rp.pipeline_def(batch_size=2, num_threads=1, seed=4)
    def pipe(dtype):
        jpegs, _ = fn.readers.file(files=jpeg_files[:2])
        return fn.random_resized_crop(fn.decoders.image(jpegs), size=(40, 50), dtype=dtype)

    with pipe(types.FLOAT) as p:
        (floats,) = p.run()
    with pipe(None) as p:
        (bytes_,) = p.run()
    assert floats.as_tensor().dtype == np.float32 and floats.as_tensor().shape == (2, 40, 50, 3)
    assert np.abs(floats.as_tensor() - bytes_.as_tensor()).max() <= 2.0
    with pytest.raises(rp.ArgumentError, match="dtype"):
        RandomResizedCrop("cpu", 0, size=8, dtype="no such type")
