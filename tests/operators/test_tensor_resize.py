"""``tensor_resize`` against DALI 2.4's CPU operator: output shapes (``sizes``, ``scales`` with each
``size_rounding``, ``axes``, ``axis_names``, every ``mode``, negative sizes flipping), dtypes and
layouts exactly; nearest exactly; linear and cubic on real JPEGs within the bounds ``resize`` keeps
to DALI's (:mod:`tests.operators.test_resample`), and on smooth float tensors within the bounds of
the volume resize (:mod:`tests.operators.test_volume_ops`). The ``gpu`` device gives the host's
result; bad arguments raise errors naming the operator."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, types
from tests.operators.test_resample import DALI_MAX_DIFF, DALI_MEAN_DIFF

RNG = np.random.default_rng(11)
GRID = np.meshgrid(*(np.linspace(0, 1, n) for n in (5, 6, 7)), indexing="ij")
SMOOTH = (100 * GRID[0] * GRID[1] + 50 * np.sin(3 * GRID[2])).astype(np.float32)
TENSORS = {
    "4d": [np.stack([SMOOTH, SMOOTH[::-1], SMOOTH * 0.5], axis=-1), np.stack([SMOOTH.T[:4].copy()] * 3, axis=-1)],
    "3d": [SMOOTH, SMOOTH[::-1, ::-1].copy()],
    "1d": [SMOOTH[2, 3], SMOOTH[:, 1, 1].copy()],
    "u16": [RNG.integers(0, 60000, (9, 8, 2)).astype(np.uint16)],
    "i16": [RNG.integers(-3000, 3000, (12, 10)).astype(np.int16)],
}

# (tensors, layout, arguments): interp_type and dtype by name, resolved against each library's types
CASES = [
    ("4d", "", {"sizes": [10, 3], "axes": [0, 2], "interp_type": "INTERP_NN"}),
    ("4d", "", {"sizes": [10, 0], "axes": [1, 2], "interp_type": "INTERP_NN"}),
    ("4d", "", {"sizes": [10, 0], "axes": [1, 2], "mode": "stretch"}),
    ("4d", "", {"scales": [2.0, 1.5], "axes": [1, 2]}),
    ("4d", "", {"scales": 1.3, "axes": [-3, -2], "interp_type": "INTERP_CUBIC"}),
    ("4d", "DHWC", {"sizes": [10, 20], "axis_names": "HW", "interp_type": "INTERP_NN"}),
    ("4d", "DHWC", {"sizes": [3, 12], "axis_names": "DW", "antialias": False}),
    ("3d", "", {"sizes": [4, 20], "axes": [0, 1], "mode": "not_larger", "interp_type": "INTERP_NN"}),
    ("3d", "", {"sizes": [8, 9, 10]}),
    ("3d", "", {"sizes": [-8, 9], "axes": [1, 2], "interp_type": "INTERP_NN"}),
    ("1d", "", {"scales": [2.5]}),
    ("1d", "", {"scales": [2.5], "size_rounding": "truncate", "interp_type": "INTERP_NN"}),
    ("1d", "", {"scales": 1.5, "size_rounding": "ceil"}),
    ("u16", "HWC", {"sizes": [20, 3], "axis_names": "HW", "interp_type": "INTERP_NN"}),
    ("u16", "HWC", {"sizes": [4, 3], "axis_names": "HW", "interp_type": "INTERP_NN", "dtype": "FLOAT"}),
    ("i16", "", {"sizes": 24, "interp_type": "INTERP_NN"}),
    # regions of interest, max_size, alignment, subpixel_scale, minibatch_size
    ("3d", "", {"sizes": [4, 5], "axes": [1, 2], "roi_start": [1, 2], "roi_end": [5, 6.5]}),
    ("3d", "", {"sizes": [4, 5], "axes": [1, 2], "roi_start": [0.8, 0.1], "roi_end": [0.1, 0.9], "roi_relative": True}),
    ("3d", "", {"scales": [0.5, 2.0], "axes": [0, 2], "roi_start": [1, 6], "roi_end": [4, 0]}),
    ("i16", "", {"sizes": [30, 0], "max_size": 20, "interp_type": "INTERP_NN"}),
    ("i16", "", {"scales": [2.0, 2.0], "max_size": [15, 30], "interp_type": "INTERP_NN"}),
    ("i16", "", {"sizes": [20, 30], "mode": "not_larger", "max_size": [15, 25]}),  # linear: NN has a tie here
    ("i16", "", {"scales": [0.37, 0.5], "alignment": [1.0, 0.25], "interp_type": "INTERP_NN"}),
    ("i16", "", {"scales": [0.37, 0.5], "alignment": 0.0, "subpixel_scale": False, "interp_type": "INTERP_NN"}),
    ("1d", "", {"sizes": [3.4], "minibatch_size": 4, "interp_type": "INTERP_NN"}),
]


def _resolved(args: dict, lib_types) -> dict:
    names = ("interp_type", "dtype")
    return {k: getattr(lib_types, v) if k in names else v for k, v in args.items()}


def _check_close(mine, theirs, max_diff: float, mean_diff: float) -> None:
    for (my_samples, my_layout), (their_samples, their_layout) in zip(mine, theirs, strict=True):
        assert my_layout == their_layout
        for my, their in zip(my_samples, their_samples, strict=True):
            assert my.shape == their.shape and my.dtype == their.dtype
            diff = np.abs(my.astype(np.float64) - their.astype(np.float64))
            assert diff.max() <= max_diff and diff.mean() <= mean_diff, (diff.max(), diff.mean())


@pytest.mark.parametrize(("tensors", "layout", "args"), CASES)
def test_matches_dali(ours, dali, tensors, layout, args):
    samples = TENSORS[tensors]
    theirs = dali(samples, lambda x, f, t: f.tensor_resize(x, **_resolved(args, t)), layout)
    mine = ours(samples, lambda x: fn.tensor_resize(x, **_resolved(args, types)), layout)
    exact = args.get("interp_type") == "INTERP_NN"
    _check_close(mine, theirs, 0.0 if exact else 3.0, 0.0 if exact else 0.5)


@pytest.mark.parametrize("args", [{"sizes": [150, 200]}, {"scales": [0.4, 0.3]}, {"sizes": [600, 0]}])
def test_images_match_dali(ours, dali, images, args):
    """Real JPEGs (HWC uint8) resized along H and W: as ``resize`` against DALI's."""
    args = {**args, "axes": [0, 1]}
    theirs = dali(images, lambda x, f, t: f.tensor_resize(x, **args), "HWC")
    mine = ours(images, lambda x: fn.tensor_resize(x, **args), "HWC")
    _check_close(mine, theirs, DALI_MAX_DIFF, DALI_MEAN_DIFF)


@pytest.mark.parametrize(("tensors", "layout", "args"), CASES[:6] + CASES[13:])  # the regions' cases too
def test_gpu_gives_the_cpu_result(ours, tensors, layout, args):
    """The same float32 arithmetic on either device: within float32 rounding (nearest exactly)."""
    samples = TENSORS[tensors]
    cpu = ours(samples, lambda x: fn.tensor_resize(x, **_resolved(args, types)), layout)
    gpu = ours(samples, lambda x: fn.tensor_resize(x.gpu(), **_resolved(args, types)), layout)
    exact = args.get("interp_type") == "INTERP_NN"
    _check_close(gpu, cpu, 0.0 if exact else 1e-3, 0.0 if exact else 1e-4)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "give one of sizes or scales"),
        ({"sizes": [2], "scales": [2.0]}, "give one of sizes or scales"),
        ({"scales": [0.0]}, "scales must be positive"),
        ({"sizes": "big"}, "sizes must be a number or a list of numbers"),
        ({"sizes": 3, "axes": [0], "axis_names": "H"}, "axes and axis_names are mutually exclusive"),
        ({"sizes": 3, "axes": [0.5]}, "axes must be integers"),
        ({"sizes": 3, "mode": "fit"}, "mode must be one of"),
        ({"sizes": 3, "size_rounding": "floor"}, "size_rounding must be one of"),
        ({"sizes": 3, "interp_type": "gaussian"}, "interp_type types.INTERP_GAUSSIAN is not supported"),
        ({"sizes": 3, "max_size": 0}, "max_size must be positive"),
        ({"sizes": 3, "roi_start": [1]}, "give both roi_start and roi_end"),
        ({"sizes": 3, "roi_start": [1], "roi_end": [2], "roi_relative": "yes"}, "roi_relative must be a bool"),
        ({"sizes": 3, "minibatch_size": 0}, "minibatch_size must be a positive int"),
        ({"sizes": 3, "temp_buffer_hint": -1}, "temp_buffer_hint must be a non-negative int"),
    ],
)
def test_bad_arguments_name_the_operator(ours, args, message):
    with pytest.raises(rp.ArgumentError, match=f"tensor_resize: .*{message}"):
        ours([np.zeros((4, 4), np.float32)], lambda x: fn.tensor_resize(x, **args))


@pytest.mark.parametrize(
    ("sample", "layout", "args", "message"),
    [
        (np.zeros((4, 5, 6, 3), np.float32), "", {"sizes": [2, 3, 4, 2]}, "at most 3 consecutive axes"),
        (np.zeros((4, 5), np.float32), "", {"sizes": [2, 3, 4]}, "sizes needs one value or 2"),
        (np.zeros((4, 5), np.float32), "", {"sizes": 2, "axes": [0, 5]}, "axis 5 is out of range"),
        (np.zeros((4, 5), np.float32), "", {"sizes": 2, "axes": [0, -2]}, "repeat an axis"),
        (np.zeros((4, 5), np.float32), "HW", {"sizes": 2, "axis_names": "HQ"}, "axis 'Q' is not in the input's"),
        (np.zeros((4, 5), np.float64), "", {"sizes": 2}, "the input must be uint8, int16, uint16 or float32"),
        (np.zeros((4, 5), np.uint8), "", {"sizes": 2, "dtype": types.FLOAT16}, "dtype must be the input's"),
    ],
)
def test_bad_samples_name_the_operator(ours, sample, layout, args, message):
    with pytest.raises(rp.SampleError, match=f"tensor_resize: .*{message}"):
        ours([sample], lambda x: fn.tensor_resize(x, **args), layout)


#: a 1-D ramp: a nearest-neighbour output's values are the source positions it took
RAMP = np.arange(10, dtype=np.float32)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        # the region [2, 8) in 3 steps of 2: centres 3, 5, 7; flipped when given end first
        ({"sizes": [3], "roi_start": [2], "roi_end": [8]}, [3, 5, 7]),
        ({"sizes": [3], "roi_start": [8], "roi_end": [2]}, [7, 5, 3]),
        ({"sizes": [3], "roi_start": [0.2], "roi_end": [0.8], "roi_relative": True}, [3, 5, 7]),
        ({"sizes": [-3], "roi_start": [8], "roi_end": [2]}, [3, 5, 7]),  # two flips undo each other
        # scales size the output from the whole extent (0.5 * 10 = 5) over the region: steps of 1.2
        ({"scales": [0.5], "roi_start": [2], "roi_end": [8]}, [2, 3, 5, 6, 7]),
        # 10 * 0.37 = 3.7, rounded to 4: a window of 4 / 0.37 = 10.81 placed by the alignment
        ({"scales": [0.37], "alignment": 0.0}, [1, 4, 6, 9]),
        ({"scales": [0.37], "alignment": 0.5}, [0, 3, 6, 9]),
        ({"scales": [0.37], "alignment": 1.0}, [0, 3, 5, 8]),
        ({"scales": [0.37], "subpixel_scale": False}, [1, 3, 6, 8]),  # the whole axis over 4: steps of 2.5
        ({"sizes": [30], "max_size": 6}, [0, 2, 4, 5, 7, 9]),
    ],
)
def test_regions_alignment_and_limits_pick_dalis_source_positions(ours, args, expected):
    ((mine, _),) = ours([RAMP], lambda x: fn.tensor_resize(x, interp_type=types.INTERP_NN, **args))
    assert mine[0].tolist() == expected
