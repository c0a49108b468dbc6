"""hsv, hue and saturation take the batched color_twist kernel: against the operators' host path
(``run_sample``), within color_twist's stated tolerance (integers within 1, floats 1e-5 relative
and 1e-4 absolute)."""

from __future__ import annotations

import numpy as np

from raypipe.operators.color_adjust import Hsv, Hue, Saturation
from tests.kernels.helpers import contexts, host_samples, on_device, per_sample
from tests.kernels.test_color_twist import assert_within_tolerance

ARGS = {
    "hue": [np.float32(-150.0), np.float32(33.0), np.float32(90.0)],
    "saturation": [np.float32(0.0), np.float32(1.8), np.float32(0.5)],
    "value": [np.float32(1.3), np.float32(0.7), np.float32(1.0)],
}


def test_per_sample_arguments_on_a_ragged_batch(xp, ragged):
    images = ragged(seed=12)
    ctxs = contexts(len(images))
    for op, args in (
        (Hsv("gpu", 0, dtype=np.float32), ARGS),
        (Hsv("gpu", 0), ARGS),
        (Hue("gpu", 0), {"hue": ARGS["hue"]}),
        (Saturation("gpu", 0, dtype=np.int16), {"saturation": ARGS["saturation"]}),
    ):
        got = host_samples(op.run_batch(xp, [on_device(xp, images)], args, ctxs))
        for i, (sample, image) in enumerate(zip(got, images, strict=True)):
            assert_within_tolerance(sample, op.run_sample([image], per_sample(args, i), ctxs[i]))
