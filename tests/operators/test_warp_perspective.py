"""``experimental.warp_perspective`` against DALI 2.4's CPU operator (OpenCV 5's
``warpPerspective``): uint8 images equal for every border mode, interpolation, matrix direction and
pixel origin but for values next to a rounding tie (one level, at most 0.5%); uint16 and int16
within one level and float32 within 3e-3 on 0..255 data (the interpolation's float32 steps round
differently); sizes, sequences, per-sample and per-frame matrices, the matrix as a second input;
the ``gpu`` device gives the cpu result; bad arguments fail naming the operator."""

from __future__ import annotations

import numpy as np
import pytest

from raypipe import fn, types
from raypipe.errors import ArgumentError, SampleError
from raypipe.operators.warp_perspective import invert3
from tests.operators.outputs import on_both

RNG = np.random.default_rng(0)
IMAGES = {
    "uint8": [RNG.integers(0, 256, (37, 53, 3), dtype=np.uint8), RNG.integers(0, 256, (20, 16, 3), dtype=np.uint8)],
    "uint16": [RNG.integers(0, 65536, (37, 53, 3), dtype=np.uint16)],
    "int16": [RNG.integers(-32768, 32768, (37, 53, 3), dtype=np.int16)],
    "float32": [RNG.random((37, 53, 3), dtype=np.float32) * 255],
}
MATRIX = np.array([[0.9, 0.13, 2.3], [-0.07, 1.1, -1.7], [0.0011, -0.0008, 1.02]], np.float32)
BORDERS = ["constant", "replicate", "reflect", "reflect_101", "wrap"]


def _compare(theirs, mine, dtype: str) -> None:
    for a, b in zip(theirs, mine, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype
        diff = np.abs(a.astype(np.float64) - b)
        limit = {"uint8": 1, "uint16": 1, "int16": 1, "float32": 3e-3}[dtype]
        assert diff.max() <= limit, f"{dtype}: {diff.max()} apart, {(diff > 0).sum()} of {diff.size}"
        if dtype == "uint8":  # equal but next to a rounding tie
            assert (diff > 0).mean() <= 0.005


@pytest.mark.parametrize("origin", ["corner", "center"])
@pytest.mark.parametrize("inverse", [True, False])
@pytest.mark.parametrize("interp", ["INTERP_NN", "INTERP_LINEAR"])
@pytest.mark.parametrize("border", BORDERS)
def test_uint8_images_are_dalis(ours, dali, border, interp, inverse, origin):
    def build(x, f, t, device):
        return f.experimental.warp_perspective(
            x,
            matrix=MATRIX,
            border_mode=border,
            interp_type=getattr(t, interp),
            inverse_map=inverse,
            pixel_origin=origin,
            fill_value=[7, 100.6, 200],
        )

    theirs, mine = on_both(ours, dali, IMAGES["uint8"], build, "cpu", "HWC")
    _compare(theirs, mine, "uint8")


@pytest.mark.parametrize("dtype", ["uint16", "int16", "float32"])
@pytest.mark.parametrize("interp", ["INTERP_NN", "INTERP_LINEAR"])
@pytest.mark.parametrize("border", ["constant", "reflect_101"])
def test_other_types_are_dalis_within_their_rounding(ours, dali, dtype, interp, border):
    def build(x, f, t, device):
        return f.experimental.warp_perspective(
            x, matrix=MATRIX, border_mode=border, interp_type=getattr(t, interp), fill_value=3
        )

    theirs, mine = on_both(ours, dali, IMAGES[dtype], build, "cpu", "HWC")
    _compare(theirs, mine, "uint8" if interp == "INTERP_NN" else dtype)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_sizes_and_per_sample_matrices_are_dalis(ours, dali, device):
    matrices = [MATRIX, np.array([[1.2, 0, -3], [0.1, 0.8, 2], [0, 0.002, 1]], np.float32)]
    sizes = [np.array([30.4, 41], np.float32), np.array([12, 9.6], np.float32)]

    def build(x, f, t, device, matrix, size):
        return f.experimental.warp_perspective(x, matrix=matrix, size=size)

    theirs, mine = on_both(ours, dali, IMAGES["uint8"], build, device, "HWC", per_sample=[matrices, sizes])
    assert [m.shape for m in mine] == [(30, 41, 3), (12, 10, 3)]
    _compare(theirs, mine, "uint8")


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_the_matrix_as_a_second_input_and_gray_images_are_dalis(ours, dali, device):
    gray = [image[:, :, 0].copy() for image in IMAGES["uint8"]]
    matrices = [MATRIX, invert3(MATRIX).astype(np.float32)]

    def build(x, f, t, device, matrix):
        return f.experimental.warp_perspective(x, matrix.gpu() if device == "gpu" else matrix, inverse_map=False)

    theirs, mine = on_both(ours, dali, gray, build, device, "HW", per_sample=[matrices])
    _compare(theirs, mine, "uint8")


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_sequences_take_the_samples_matrix_or_one_per_frame(ours, dali, device):
    frames = np.stack([np.roll(IMAGES["uint8"][0], k, axis=1) for k in range(3)])
    shears = np.stack([np.array([[1, k / 10, 0], [0, 1, 0], [0, 0, 1]], np.float32) for k in range(3)])

    def build(x, f, t, device, per_frame):
        sample = f.experimental.warp_perspective(x, matrix=MATRIX)
        each = f.experimental.warp_perspective(x, matrix=f.per_frame(per_frame))
        return sample, each

    per_sample = [[shears]]
    (theirs_s, _), (theirs_f, _) = dali(
        [frames], lambda x, f, t, m: build(x, f, t, "cpu", m), "FHWC", per_sample=per_sample
    )
    (mine_s, layout), (mine_f, _) = ours(
        [frames],
        lambda x, m: build(x.gpu() if device == "gpu" else x, fn, types, device, m),
        "FHWC",
        per_sample=per_sample,
    )
    assert layout == "FHWC"
    _compare(theirs_s, mine_s, "uint8")
    _compare(theirs_f, mine_f, "uint8")
    one = ours([frames[1]], lambda x: fn.experimental.warp_perspective(x, matrix=shears[1]), "HWC")[0][0][0]
    np.testing.assert_array_equal(mine_f[0][1], one)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "give matrix"),
        ({"matrix": [1, 0, 0, 0, 1, 0]}, "matrix must hold 9 numbers"),
        ({"matrix": MATRIX, "border_mode": "mirror"}, "border_mode must be one of"),
        ({"matrix": MATRIX, "interp_type": types.INTERP_CUBIC}, ".*INTERP_CUBIC is not here"),
        ({"matrix": MATRIX, "pixel_origin": "middle"}, "pixel_origin must be 'corner' or 'center'"),
        ({"matrix": MATRIX, "size": [3]}, r"size is \[height, width\]"),
    ],
)
def test_bad_arguments_fail_when_the_pipeline_is_built(ours, kwargs, message):
    with pytest.raises(ArgumentError, match=f"experimental.warp_perspective: {message}"):
        ours(IMAGES["uint8"], lambda x: fn.experimental.warp_perspective(x, **kwargs), "HWC")


def test_a_layout_with_channels_first_is_refused(ours):
    chw = [image.transpose(2, 0, 1).copy() for image in IMAGES["uint8"]]
    with pytest.raises(ArgumentError, match="channels last"):
        ours(chw, lambda x: fn.experimental.warp_perspective(x, matrix=MATRIX), "CHW")


@pytest.mark.parametrize(
    ("samples", "kwargs", "message"),
    [
        ([np.zeros((4, 4, 3), np.int32)], {"matrix": MATRIX}, "takes uint8, int16, uint16 or float32 data"),
        ([np.zeros((4, 4, 5), np.uint8)], {"matrix": MATRIX}, "more than 4 channels"),
        ([np.zeros((4, 4, 3), np.uint8)], {"matrix": MATRIX, "fill_value": [1, 2]}, "fill_value has 2 values"),
        ([np.zeros((4, 4, 3), np.uint8)], {"matrix": np.zeros((3, 3)), "inverse_map": False}, "is singular"),
    ],
)
def test_bad_samples_fail_naming_the_operator(ours, samples, kwargs, message):
    with pytest.raises(SampleError, match=message):
        ours(samples, lambda x: fn.experimental.warp_perspective(x, **kwargs), "HWC")
