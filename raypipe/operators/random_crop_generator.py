"""``random_crop_generator``: a random crop window of a shape, as DALI's: the input is a shape
(``HW`` or ``HWC``, 1-D integers), the outputs the window's anchor and shape, ``(y, x)`` and
``(h, w)`` as int32, for ``slice`` or ``decoders.image_slice``.

The window is the one ``decoders.image_random_crop`` would take (:mod:`.crop_window`: an area
fraction from ``random_area`` and an aspect ratio (width over height) from ``random_aspect_ratio``,
up to ``num_attempts`` times, then the largest centred window), from draws keyed by the sample.
"""

from __future__ import annotations

import numpy as np

from ..operator import Operator, Schema, register
from .crop_window import DRAWS, random_crop_windows, window_arguments

OP = "random_crop_generator"


@register
class RandomCropGenerator(Operator):
    """A random crop window's anchor and shape per sample."""

    schema = Schema(OP, devices=("cpu",), num_outputs=2)

    def configure(self, random_area=(0.08, 1.0), random_aspect_ratio=(0.75, 1.333333), num_attempts: int = 10) -> None:
        self.random_area, self.random_aspect_ratio, self.num_attempts = window_arguments(
            OP, random_area, random_aspect_ratio, num_attempts
        )

    def output_layout(self, input_layouts) -> str:
        return ""

    def run_sample(self, inputs, args, ctx):
        return self.run_chunk([[inputs[0]]], {}, [ctx])[0]

    def run_chunk(self, inputs, args, ctxs):
        """The windows of a chunk of samples from one draw."""
        sizes = []
        for shape in inputs[0]:
            shape = np.asarray(shape)
            if shape.ndim != 1 or len(shape) not in (2, 3) or shape.dtype.kind not in "iu" or (shape[:2] < 1).any():
                raise ValueError(f"{OP}: the input must be a shape (HW or HWC) of positive ints, got {shape.tolist()}")
            sizes.append((int(shape[1]), int(shape[0])))
        draws = self.draws(ctxs, DRAWS * self.num_attempts).reshape(DRAWS, self.num_attempts, len(ctxs))
        windows = random_crop_windows(np.array(sizes, np.int64).T, self.random_area, self.random_aspect_ratio, draws)
        return [(np.array([y, x], np.int32), np.array([h, w], np.int32)) for x, y, w, h in windows.tolist()]
