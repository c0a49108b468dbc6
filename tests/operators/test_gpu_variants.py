"""Each operator's ``gpu`` variant against its ``cpu`` result on the same batch, without DALI.

On a CUDA device the ``gpu`` variants run on cupy; elsewhere on the host path. The comparisons
against DALI elsewhere in this package skip where DALI is absent (as on the GPU machine), so
these are what checks the cupy variants there: integers exactly, floats within 1e-5 relative
(cupy's reductions sum in another order). Random operators get their own seeds: otherwise a
node's place in the graph keys its draws, and ``.gpu()`` adds a node.
"""

from __future__ import annotations

import numpy as np
import pytest

from raypipe import fn, types

RNG = np.random.default_rng(7)
IMAGES = [RNG.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in ((6, 9), (11, 4), (8, 8), (5, 13))]
FLOATS = [RNG.standard_normal((h, w, 3)).astype(np.float32) for h, w in ((6, 9), (11, 4), (8, 8), (5, 13))]
INTS = [RNG.integers(-5, 9, (h, w), dtype=np.int32) for h, w in ((6, 9), (11, 4), (8, 8), (5, 13))]
BAYER = [RNG.integers(0, 256, (h, w), dtype=np.uint8) for h, w in ((6, 8), (4, 10), (8, 8), (2, 4))]
KERNEL = np.array([[0.0, 1.0, 0.5], [2.0, -1.0, 0.25]], np.float32)


def _ids(*ids: list[int]) -> list[np.ndarray]:
    return [np.array(i, np.int32) for i in ids]


# (id, samples, build(data, *per_sample), per_sample)
CASES = [
    ("copy", IMAGES, lambda x: fn.copy(x), ()),
    (
        "lookup_table",
        INTS,
        lambda x: fn.lookup_table(
            x, keys=[0, 2, 5, 8], values=[1.5, -2.0, 7.0, 3.25], default_value=9, dtype=types.FLOAT
        ),
        (),
    ),
    (
        "lookup_table-uint8",
        IMAGES,
        lambda x: fn.lookup_table(x, keys=[0, 1, 255], values=[9, 8, 7], dtype=types.UINT8),
        (),
    ),
    ("permute_batch", IMAGES, lambda x: fn.permute_batch(x, indices=[3, 0, 0, 2]), ()),
    (
        "multi_paste",
        IMAGES,
        lambda x, ids: fn.multi_paste(x, in_ids=ids, output_size=[12, 14]),
        (_ids([1, 2], [0], [3, 1, 0], []),),
    ),
    ("grid_mask", IMAGES, lambda x: fn.grid_mask(x, tile=4, ratio=0.4, angle=0.3, shift_x=1.5, shift_y=-2), ()),
    ("equalize", IMAGES, lambda x: fn.equalize(x), ()),
    ("jpeg_compression_distortion", IMAGES, lambda x: fn.jpeg_compression_distortion(x, quality=40), ()),
    ("reductions.sum", IMAGES, lambda x: fn.reductions.sum(x, axes=[0, 1]), ()),
    ("reductions.mean", FLOATS, lambda x: fn.reductions.mean(x, axes=[0]), ()),
    ("reductions.mean_square", FLOATS, lambda x: fn.reductions.mean_square(x), ()),
    ("reductions.rms", IMAGES, lambda x: fn.reductions.rms(x, axes=[1]), ()),
    ("reductions.std_dev", FLOATS, lambda x: fn.reductions.std_dev(x, fn.reductions.mean(x)), ()),
    (
        "reductions.variance",
        FLOATS,
        lambda x: fn.reductions.variance(x, fn.reductions.mean(x, axes=[2], keep_dims=True), axes=[2]),
        (),
    ),
    ("noise.gaussian", FLOATS, lambda x: fn.noise.gaussian(x, stddev=0.5, seed=11), ()),
    ("noise.salt_and_pepper", IMAGES, lambda x: fn.noise.salt_and_pepper(x, prob=0.3, per_channel=True, seed=12), ()),
    ("noise.shot", IMAGES, lambda x: fn.noise.shot(x, factor=2.0, seed=14), ()),
    ("water", IMAGES, lambda x: fn.water(x, ampl_x=2.5, freq_y=0.3, interp_type=types.INTERP_LINEAR), ()),
    ("sphere", IMAGES, lambda x: fn.sphere(x, fill_value=7), ()),
    ("laplacian", IMAGES, lambda x: fn.laplacian(x, window_size=5, dtype=types.FLOAT), ()),
    ("filter", IMAGES, lambda x: fn.filter(x, KERNEL, border="wrap"), ()),
    ("debayer", BAYER, lambda x: fn.debayer(x, blue_position=[0, 1]), ()),
    ("tensor_resize", IMAGES, lambda x: fn.tensor_resize(x, sizes=[5, 7], axes=[0, 1]), ()),
    ("resize_crop_mirror", IMAGES, lambda x: fn.resize_crop_mirror(x, size=[12, 10], crop=(6, 5), mirror=1), ()),
]


def _on(device: str, build):
    return lambda x, *extra: build(x.gpu() if device == "gpu" else x, *extra)


@pytest.mark.parametrize(("name", "samples", "build", "per_sample"), CASES, ids=[c[0] for c in CASES])
def test_the_gpu_variant_gives_the_cpu_result(ours, name, samples, build, per_sample):
    (cpu,) = ours(samples, _on("cpu", build), layout="HWC" if samples[0].ndim == 3 else "HW", per_sample=per_sample)
    (gpu,) = ours(samples, _on("gpu", build), layout="HWC" if samples[0].ndim == 3 else "HW", per_sample=per_sample)
    assert gpu[1] == cpu[1], name
    for i, (a, b) in enumerate(zip(cpu[0], gpu[0], strict=True)):
        assert b.dtype == a.dtype and b.shape == a.shape, (name, i)
        if np.issubdtype(a.dtype, np.floating):
            np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6, err_msg=f"{name} sample {i}")
        else:
            np.testing.assert_array_equal(b, a, err_msg=f"{name} sample {i}")
