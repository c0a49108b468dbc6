"""warp_affine: against DALI 2.4's CPU operator on real decoded JPEGs (fixed, per-sample and input
matrices, inverse_map, size, fill_value, INTERP_NN and INTERP_LINEAR, dtype, FHWC sequences; cpu and
gpu devices), and against hand-computed samples without DALI.

Tolerance: both compute coordinates and weights in float32 but in other orders, and DALI's
coordinates of images a few hundred pixels wide differ from the exact ones by up to ~2e-3 pixel:
bilinear uint8 results may differ by up to 3 at sharp edges (and differ at all on at most 3% of the
values), float ones by 0.5 (0..255 data, where a one-pixel step can change a value by 255);
nearest-neighbour results may pick the neighbouring pixel where a coordinate is within float32
error of an integer (at most 1% of the pixels)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from raypipe import fn, types
from raypipe.errors import ArgumentError
from raypipe.operators.warp_affine import WarpAffine
from raypipe.sample_contexts import SampleContexts


def rotation(degrees: float, tx: float, ty: float, scale: float = 1.0) -> list[float]:
    c, s = math.cos(math.radians(degrees)) * scale, math.sin(math.radians(degrees)) * scale
    return [c, -s, tx, s, c, ty]


MATRIX = rotation(17.0, 40.3, -30.7, 1.13)
MATRICES = [np.array(rotation(a, 11.1 * a, 7.3, 0.8 + 0.1 * i), np.float32) for i, a in enumerate((-20, 5, 33, 71))]
MATRIX_INPUTS = [m.reshape(2, 3) for m in MATRICES]
SIZES = [np.array(s, np.float32) for s in ((100, 120), (64, 64), (200, 90), (31, 47))]
_RNG = np.random.default_rng(9)
SEQUENCES = [
    _RNG.integers(0, 256, (3, 20, 26, 3), dtype=np.uint8),
    _RNG.integers(0, 256, (2, 15, 9, 3), dtype=np.uint8),
]


def assert_close(got: np.ndarray, expected: np.ndarray, nearest: bool = False) -> None:
    assert got.dtype == expected.dtype and got.shape == expected.shape
    if nearest:
        assert np.mean((got != expected).any(axis=-1)) <= 0.01
    elif got.dtype.kind in "iu":
        diff = np.abs(got.astype(np.int32) - expected.astype(np.int32))
        assert np.count_nonzero(diff > 3) == 0
        assert np.count_nonzero(diff) <= 0.03 * diff.size
    else:
        np.testing.assert_allclose(got, expected, atol=0.5)


# (id, samples (None: the JPEGs), layout, per-sample batches, build(x, fn, types, device, *per_sample))
CASES = [
    ("matrix", None, "HWC", [], lambda x, fn, types, d: fn.warp_affine(x, matrix=MATRIX, device=d)),
    ("fill", None, "HWC", [], lambda x, fn, types, d: fn.warp_affine(x, matrix=MATRIX, fill_value=200, device=d)),
    (
        "forward-size",
        None,
        "HWC",
        [],
        lambda x, fn, types, d: fn.warp_affine(
            x, matrix=MATRIX, inverse_map=False, size=[150, 170], fill_value=0, device=d
        ),
    ),
    (
        "nearest",
        None,
        "HWC",
        [],
        lambda x, fn, types, d: fn.warp_affine(x, matrix=MATRIX, interp_type=types.INTERP_NN, fill_value=9, device=d),
    ),
    (
        "float",
        None,
        "HWC",
        [],
        lambda x, fn, types, d: fn.warp_affine(x, matrix=MATRIX, dtype=types.FLOAT, fill_value=1, device=d),
    ),
    (
        "per-sample",
        None,
        "HWC",
        [MATRIX_INPUTS, SIZES],
        lambda x, fn, types, d, m, s: fn.warp_affine(x, matrix=m, size=s, fill_value=5, device=d),
    ),
    (
        "input-matrix",
        None,
        "HWC",
        [MATRIX_INPUTS],
        lambda x, fn, types, d, m: fn.warp_affine(x, m, fill_value=5, device=d),
    ),
    ("sequence", SEQUENCES, "FHWC", [], lambda x, fn, types, d: fn.warp_affine(x, matrix=MATRIX, device=d)),
]


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("case, samples, layout, values, build", CASES, ids=[c[0] for c in CASES])
def test_against_dali(ours, dali, images, case, samples, layout, values, build, device):
    samples = images if samples is None else samples

    def mine_build(x, *a):
        if device == "gpu":
            x, a = x.gpu(), [v.gpu() if case == "input-matrix" else v for v in a]
        return build(x, fn, types, device, *a)

    ((theirs, their_layout),) = dali(
        samples, lambda x, fn, types, *a: build(x, fn, types, "cpu", *a), layout, per_sample=values
    )
    ((mine, my_layout),) = ours(samples, mine_build, layout, per_sample=values)
    assert my_layout == their_layout == layout
    for their, my in zip(theirs, mine, strict=True):
        assert_close(my, their, nearest=case == "nearest")


def test_samples_without_dali(ours):
    image = (np.arange(6 * 7).reshape(6, 7, 1) * 3).astype(np.uint8)
    (((shifted,), _),) = ours([image], lambda x: fn.warp_affine(x, matrix=[1, 0, 0.5, 0, 1, 0]), "HWC")
    np.testing.assert_array_equal(shifted[:, :6, 0], image[:, :6, 0] + 2)  # x.5 rounds away from zero
    np.testing.assert_array_equal(shifted[:, 6], image[:, 6])  # no fill_value: the border pixel
    (((filled,), _),) = ours([image], lambda x: fn.warp_affine(x, matrix=[1, 0, 0.5, 0, 1, 0], fill_value=9), "HWC")
    np.testing.assert_array_equal(filled[:, 6, 0], np.floor((image[:, 6, 0] + 9) / 2 + 0.5).astype(np.uint8))
    (((halved,), _),) = ours([image], lambda x: fn.warp_affine(x, matrix=[2, 0, 0, 0, 2, 0], size=[3, 3]), "HWC")
    np.testing.assert_array_equal(halved[..., 0], [[12, 18, 24], [54, 60, 66], [96, 102, 108]])
    (((nearest,), _),) = ours(
        [image],
        lambda x: fn.warp_affine(x, matrix=[2, 0, 0, 0, 2, 0], size=[3, 3], interp_type=types.INTERP_NN),
        "HWC",
    )
    np.testing.assert_array_equal(nearest[..., 0], image[1::2, 1:7:2, 0])


def test_a_batch_array_is_warped_at_once_as_each_sample_alone():
    batch = _RNG.integers(0, 256, (3, 20, 26, 3), dtype=np.uint8)
    ctxs = SampleContexts(0, 0, np.arange(3))
    op = WarpAffine("gpu", 0, matrix=MATRIX, size=[15, 30], fill_value=4)
    together = op.run_batch(np, [batch], {}, ctxs)
    assert isinstance(together, np.ndarray) and together.shape == (3, 15, 30, 3)
    for i in range(3):
        np.testing.assert_array_equal(together[i], op.run_sample([batch[i]], {}, ctxs[i]))


def test_refusals(ours, images):
    with pytest.raises(ArgumentError, match="matrix must hold 6 numbers"):
        ours(images, lambda x: fn.warp_affine(x, matrix=[1, 0, 0]), "HWC")
    with pytest.raises(ArgumentError, match="expects HWC images or FHWC sequences"):
        ours(
            [np.ascontiguousarray(i.transpose(2, 0, 1)) for i in images],
            lambda x: fn.warp_affine(x, matrix=MATRIX),
            "CHW",
        )
    with pytest.raises(ArgumentError, match="INTERP_NN or INTERP_LINEAR"):
        ours(images, lambda x: fn.warp_affine(x, matrix=MATRIX, interp_type=types.INTERP_CUBIC), "HWC")


@pytest.mark.parametrize("interp", [types.INTERP_LINEAR, types.INTERP_NN])
@pytest.mark.parametrize("fill_value", [None, 7])
def test_samples_of_one_size_with_a_matrix_each_are_warped_at_once_as_each_alone(interp, fill_value):
    """A per-sample ``matrix`` (an argument input) over HWC samples of one size: one pass of array
    operations over the stack, each image at its own positions, the values of each sample alone."""
    samples = list(_RNG.integers(0, 256, (4, 18, 22, 3), dtype=np.uint8))
    matrices = [np.array([1, s, -3 * s, 0, 1, s], np.float32) for s in (0.0, 0.2, -0.35, 0.5)]
    ctxs = SampleContexts(0, 0, np.arange(4))
    op = WarpAffine("gpu", 0, fill_value=fill_value, interp_type=interp, inverse_map=False)
    together = op.run_batch(np, [samples], {"matrix": matrices}, ctxs)
    assert isinstance(together, np.ndarray) and together.shape == (4, 18, 22, 3)
    for i in range(4):
        alone = op.compute(np, [samples[i]], {"matrix": matrices[i]}, ctxs[i])
        np.testing.assert_array_equal(together[i], alone)
    ragged = [samples[0], samples[1][:10]]
    mixed = op.run_batch(np, [ragged], {"matrix": matrices[:2]}, ctxs[:2])
    assert isinstance(mixed, list) and mixed[1].shape == (10, 22, 3), "samples of other sizes: one by one"


def test_output_dtype_is_dalis_deprecated_alias_of_dtype(ours):
    image = np.random.default_rng(11).integers(0, 256, (9, 11, 3), dtype=np.uint8)
    matrix = [0.9, 0.1, 1.0, -0.1, 1.1, 0.5]
    ((alias, _), (dtype, _)) = ours(
        [image],
        lambda x: (
            fn.warp_affine(x, matrix=matrix, output_dtype=types.FLOAT),
            fn.warp_affine(x, matrix=matrix, dtype=types.FLOAT),
        ),
        "HWC",
    )
    assert alias[0].dtype == np.float32
    np.testing.assert_array_equal(alias[0], dtype[0])
    with pytest.raises(ArgumentError, match="dtype and its deprecated alias output_dtype cannot be used together"):
        WarpAffine("cpu", 0, matrix=matrix, dtype=types.FLOAT, output_dtype=types.FLOAT)
