"""``dump_image``: each image of a batch written to a PPM file in the working directory, and passed
on unchanged, as DALI's (a look at what a pipeline makes, while debugging).

As in DALI: the file of entry ``i`` of a batch is ``{i}-{suffix}-0.ppm`` (each batch overwrites the
last one's), ASCII ``P3`` for 3 channels and ``P2`` for 1, uint8 ``HWC`` images only. On ``gpu`` the
image is copied to the host to be written.
"""

from __future__ import annotations

import numpy as np

from ..backend import to_host
from ..errors import ArgumentError
from ..operator import Operator, Schema, register

OP = "dump_image"


@register
class DumpImage(Operator):
    """Write each image as a PPM file; the output is the input."""

    schema = Schema(OP, devices=("cpu", "gpu"))

    def configure(self, suffix: str = "", input_layout: str = "HWC") -> None:
        if not isinstance(suffix, str):
            raise ArgumentError(f"{OP}: suffix must be a str, got {suffix!r}")
        if input_layout != "HWC":
            raise ArgumentError(f"{OP}: input_layout must be 'HWC' (as in DALI), got {input_layout!r}")
        self.suffix = suffix

    def compute(self, xp, inputs, args, ctx):
        image = inputs[0]
        if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] not in (1, 3):
            raise ValueError(
                f"{OP}: needs uint8 HWC images of 1 or 3 channels, got {image.dtype} of shape {tuple(image.shape)}"
            )
        write_ppm(f"{max(ctx.slot, 0)}-{self.suffix}-0.ppm", to_host(image))
        return image


def write_ppm(path: str, image: np.ndarray) -> None:
    """``image`` (uint8 HWC, 1 or 3 channels) as an ASCII PGM/PPM file: DALI's layout, every row's
    values followed by a space and the row by a newline."""
    height, width, channels = image.shape
    rows = image.reshape(height, width * channels)
    body = "".join(" ".join(map(str, row.tolist())) + " \n" for row in rows)
    with open(path, "w", encoding="ascii") as f:
        f.write(f"P{3 if channels == 3 else 2}\n{width} {height}\n255\n{body}")
