"""laplacian: against DALI 2.4's CPU operator, bit for bit, on real decoded JPEGs, int16 and float32
images, volumes and channel-first data (per-axis and per-sample window sizes, smoothing sizes,
scales, normalized kernels, dtype; cpu and gpu); its windows and a batch at once without DALI;
arguments DALI refuses fail naming the operator (and the sample)."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, types
from raypipe.errors import ArgumentError
from raypipe.operators.laplacian import Laplacian, derivative_window, smoothing_window
from raypipe.sample_contexts import SampleContexts
from tests.operators.outputs import case_samples, on_both

_RNG = np.random.default_rng(11)
INT16 = [(_RNG.random(s) * 600 - 300).astype(np.int16) for s in ((23, 31, 3), (17, 12, 3))]
FLOAT = [(_RNG.random(s) * 255).astype(np.float32) for s in ((19, 27), (8, 40))]
VOLUMES = [_RNG.integers(0, 256, s, dtype=np.uint8) for s in ((5, 8, 9, 2), (3, 6, 11, 2))]
WINDOWS = [np.array(w, np.int32) for w in ([3, 5], [7, 3], [5, 5], [9, 11])]
SCALES = [np.float32(s) for s in (0.5, 0.3, 2.0, 1.25)]

# (id, samples: None for the JPEGs, layout, per-sample batches, build(x, fn, types, device, *per_sample))
CASES = [
    ("default", None, "HWC", [], lambda x, fn, types, d: fn.laplacian(x, device=d)),
    ("float", None, "HWC", [], lambda x, fn, types, d: fn.laplacian(x, window_size=5, dtype=types.FLOAT, device=d)),
    (
        "normalized",
        None,
        "HWC",
        [],
        lambda x, fn, types, d: fn.laplacian(x, window_size=[5, 3], smoothing_size=3, normalized_kernel=True, device=d),
    ),
    ("per-sample", None, "HWC", [WINDOWS], lambda x, fn, types, d, w: fn.laplacian(x, window_size=w, device=d)),
    (
        "int16",
        INT16,
        "HWC",
        [],
        lambda x, fn, types, d: fn.laplacian(x, window_size=[3, 7], smoothing_size=[1, 5], device=d),
    ),
    ("scale", INT16, "HWC", [], lambda x, fn, types, d: fn.laplacian(x, scale=[0.3, 0.7], device=d)),
    ("scale per-sample", FLOAT, "HW", [SCALES], lambda x, fn, types, d, s: fn.laplacian(x, scale=s, device=d)),
    (
        "wide",
        FLOAT,
        "HW",
        [],
        lambda x, fn, types, d: fn.laplacian(x, window_size=31, smoothing_size=[23, 9], device=d),
    ),
    ("chw", "chw", "CHW", [], lambda x, fn, types, d: fn.laplacian(x, window_size=5, device=d)),
    ("volume", VOLUMES, "DHWC", [], lambda x, fn, types, d: fn.laplacian(x, window_size=[3, 5, 3], device=d)),
    (
        "volume float",
        VOLUMES,
        "DHWC",
        [],
        lambda x, fn, types, d: fn.laplacian(x, window_size=[3, 5, 7], smoothing_size=[5, 1, 3], dtype=types.FLOAT),
    ),
    ("sequence", VOLUMES, "FHWC", [], lambda x, fn, types, d: fn.laplacian(x, normalized_kernel=True, device=d)),
]


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("case, samples, layout, values, build", CASES, ids=[c[0] for c in CASES])
def test_against_dali(ours, dali, images, case, samples, layout, values, build, device):
    samples = case_samples(samples, images)
    theirs, mine = on_both(ours, dali, samples, build, device, layout, per_sample=values)
    for their, my in zip(theirs, mine, strict=True):
        assert my.dtype == their.dtype and my.shape == their.shape
        np.testing.assert_array_equal(my, their)


def test_windows():
    assert smoothing_window(1).tolist() == [1.0]
    assert smoothing_window(5).tolist() == [1.0, 4.0, 6.0, 4.0, 1.0]
    assert derivative_window(3).tolist() == [1.0, -2.0, 1.0]
    assert derivative_window(7).tolist() == [1.0, 2.0, -1.0, -4.0, -1.0, 2.0, 1.0]
    assert smoothing_window(9).dtype == derivative_window(9).dtype == np.float32


def test_impulse_gives_the_kernel(ours):
    """An impulse in float32: the 3x3 Laplacian ``d(y) s(x) + s(y) d(x)`` scaled by 1/4 when
    normalized; uint8 saturates the negative centre to 0."""
    impulse = np.zeros((7, 7), np.float32)
    impulse[3, 3] = 1.0
    (((out,), _),) = ours([impulse], lambda x: fn.laplacian(x, normalized_kernel=True), "HW")
    d, s = np.array([1.0, -2.0, 1.0]), np.array([1.0, 2.0, 1.0])
    np.testing.assert_array_equal(out[2:5, 2:5], (np.outer(d, s) + np.outer(s, d)) / 4)
    (((saturated,), _),) = ours([(impulse * 10).astype(np.uint8)], lambda x: fn.laplacian(x), "HW")
    assert saturated[3, 3] == 0 and saturated[2, 2] == 20


def test_a_batch_array_is_filtered_at_once_as_each_sample_alone():
    batch = _RNG.integers(0, 256, (3, 9, 10, 3), dtype=np.uint8)
    op = Laplacian("gpu", 0, window_size=[3, 5], scale=0.3)
    op.output_layout(["HWC"])
    ctxs = SampleContexts(0, 0, np.arange(3))
    together = op.run_batch(np, [batch], {}, ctxs)
    assert isinstance(together, np.ndarray) and together.shape == batch.shape
    for i in range(3):
        np.testing.assert_array_equal(together[i], op.run_sample([batch[i]], {}, ctxs[i]))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"window_size": 4}, "laplacian: window_size must be odd integers from 3 to 31"),
        ({"window_size": 1}, "laplacian: window_size must be odd integers from 3 to 31"),
        ({"smoothing_size": 33}, "laplacian: smoothing_size must be odd integers from 1 to 31"),
        ({"scale": 2.0, "normalized_kernel": True}, "laplacian: scale cannot be given with normalized_kernel"),
        ({"dtype": "text"}, "laplacian: dtype must be"),
    ],
)
def test_argument_refusals(ours, kwargs, message):
    with pytest.raises(ArgumentError, match=message):
        ours([np.zeros((4, 4), np.uint8)], lambda x: fn.laplacian(x, **kwargs), "HW")


def test_scale_input_with_normalized_kernel_is_refused(ours):
    with pytest.raises(ArgumentError, match="laplacian: scale cannot be given"):
        ours(
            [np.zeros((4, 4), np.uint8)],
            lambda x, s: fn.laplacian(x, scale=s, normalized_kernel=True),
            "HW",
            per_sample=[[np.float32(1)]],
        )


@pytest.mark.parametrize(
    "sample, layout, kwargs, message",
    [
        (np.zeros((4, 4), np.float64), "HW", {}, "the input must be an integer, float16 or float32 type"),
        (np.zeros((4, 4), np.uint8), "HW", {"dtype": types.INT16}, r"dtype must be the input's type \(uint8\)"),
        (np.zeros((4, 4), np.uint8), "HW", {"window_size": [3, 3, 3]}, r"window_size takes one value or one per"),
        (np.zeros((4, 3, 4), np.uint8), "HCW", {}, "layout 'HCW' is not supported"),
        (np.zeros((2, 4, 4, 3), np.uint8), "", {}, "input without a layout has at most 3 dimensions"),
    ],
)
def test_sample_refusals(ours, sample, layout, kwargs, message):
    with pytest.raises(rp.SampleError, match=f"laplacian: {message}") as failed:
        ours([sample], lambda x: fn.laplacian(x, **kwargs), layout)
    assert "sample 0" in str(failed.value)
