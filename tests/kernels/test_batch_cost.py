"""The batched GPU-stage operators do the same host work for batch 4 and batch 32.

Each operator's ``run_batch`` runs on tiny images, as a packed (ragged) batch and as one batch
array, for batch 4 and batch 32 (within the simulator's size cap): the kernel launches and the
Python calls made outside them (:mod:`tests.kernels.counting`) must be equal, and the output is one
batch array when the output shapes agree, else a packed batch (never a list of samples).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from raypipe import types
from raypipe.kernels import launch
from raypipe.operator import Operator
from raypipe.operators.color_twist import ColorTwist
from raypipe.operators.crop_mirror_normalize import CropMirrorNormalize
from raypipe.operators.flip import Flip
from raypipe.operators.random_resized_crop import RandomResizedCrop
from raypipe.operators.resize import Resize
from raypipe.sample_contexts import SampleContexts
from tests.kernels.counting import counting

BATCHES = (4, 32)
SIZES = (6, 11)  # ragged heights and widths are drawn from this range; dense samples are 8x8


def _batch(xp, n: int, ragged: bool, seed: int = 0):
    """``n`` random RGB uint8 images: a packed batch of several sizes, or one ``(n, 8, 8, 3)`` array."""
    rng = np.random.default_rng(seed)
    if not ragged:
        return xp.asarray(rng.integers(0, 256, (n, 8, 8, 3), dtype=np.uint8))
    images = [rng.integers(0, 256, (*rng.integers(*SIZES, 2), 3), dtype=np.uint8) for _ in range(n)]
    return launch.pack(xp, [xp.asarray(image) for image in images], "test")


def _flags(n: int) -> list[np.ndarray]:
    return [np.array(i % 2, np.int32) for i in range(n)]


def _hues(n: int) -> list[np.ndarray]:
    return [np.array(15.0 * i - 90.0, np.float32) for i in range(n)]


# name: (operator, per-sample argument inputs of a batch of n, launches per batch, output ragged for a ragged input)
CASES: dict[str, tuple[Callable[[], Operator], dict[str, Callable[[int], list]], int, bool]] = {
    "resize to 8x8": (lambda: Resize("gpu", 0, resize_x=8, resize_y=8), {}, 2, False),
    "resize_shorter": (lambda: Resize("gpu", 0, resize_shorter=5), {}, 2, True),
    "random_resized_crop": (lambda: RandomResizedCrop("gpu", 1, size=(6, 7)), {}, 2, False),
    "crop_mirror_normalize CHW float32": (
        lambda: CropMirrorNormalize("gpu", 2, crop=(5, 5), mean=[120.0, 110.0, 100.0], std=[60.0, 50.0, 40.0]),
        {"mirror": _flags},
        1,
        False,
    ),
    "crop_mirror_normalize HWC uint8": (
        lambda: CropMirrorNormalize("gpu", 3, crop=(5, 6), dtype=types.UINT8, output_layout="HWC", mean=8.0),
        {"mirror": _flags},
        1,
        False,
    ),
    "flip": (lambda: Flip("gpu", 4), {"horizontal": _flags, "vertical": _flags}, 1, True),
    "color_twist": (lambda: ColorTwist("gpu", 5, saturation=0.5), {"hue": _hues}, 1, True),
}


def _cost(xp, op: Operator, arg_inputs: dict[str, Callable[[int], list]], n: int, ragged: bool):
    """``((launches, calls), output)`` of one ``run_batch`` of ``n`` samples."""
    batch = _batch(xp, n, ragged, seed=n)
    args = {name: make(n) for name, make in arg_inputs.items()}
    ctxs = SampleContexts(7, 0, np.arange(n))
    with counting() as cost:
        out = op.run_batch(xp, [batch], args, ctxs)
    return cost.pair(), out


@pytest.mark.parametrize("ragged", [True, False], ids=["packed", "dense"])
@pytest.mark.parametrize("case", list(CASES))
def test_launches_and_calls_per_batch_do_not_grow_with_the_batch(xp, case, ragged):
    make, arg_inputs, launches, ragged_out = CASES[case]
    op = make()
    assert launch.available(xp, 3 * launch.elements(_batch(xp, max(BATCHES), ragged)))
    _cost(xp, op, arg_inputs, 1, ragged)  # the first call imports modules and fills caches
    costs = {}
    for n in BATCHES:
        costs[n], out = _cost(xp, op, arg_inputs, n, ragged)
        assert len(out) == n
        if ragged and ragged_out:
            assert isinstance(out, launch.Packed)
        else:
            assert isinstance(out, xp.ndarray) and out.ndim == 4
    assert costs[4] == costs[32], f"(launches, calls) per batch: {costs}"
    assert costs[4][0] == launches
