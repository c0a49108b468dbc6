"""``jpeg_compression_distortion``: an RGB image encoded as a JPEG of ``quality`` (1 to 100, per
sample) and decoded again, as DALI's CPU operator (JPEG artefacts as an augmentation).

DALI's CPU operator encodes with libjpeg-turbo at 4:2:0 chroma subsampling and decodes with its
default DCT; Pillow's encoder and decoder (libjpeg-turbo) with the same settings give DALI's pixels
exactly. On ``gpu`` the image makes the round trip on the host, with the host's result (DALI's GPU
operator encodes with nvJPEG, whose pixels differ).
"""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from ..backend import to_host
from ..errors import ArgumentError
from ..operator import Operator, Schema, as_scalar, register

OP = "jpeg_compression_distortion"


def _quality(value) -> int:
    if isinstance(value, bool) or not float(value).is_integer() or not 1 <= int(value) <= 100:
        raise ArgumentError(f"{OP}: quality must be an int from 1 to 100, got {value!r}")
    return int(value)


@register
class JpegCompressionDistortion(Operator):
    """An RGB image through a JPEG of ``quality``."""

    schema = Schema(OP, devices=("cpu", "gpu"), arg_inputs=("quality",))

    def configure(self, quality=50) -> None:
        self.quality = _quality(quality)

    def compute(self, xp, inputs, args, ctx):
        image = to_host(inputs[0])
        if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
            raise ValueError(f"{OP}: the input must be a uint8 HWC RGB image, got {image.dtype} of shape {image.shape}")
        quality = _quality(as_scalar(args["quality"])) if "quality" in args else self.quality
        encoded = io.BytesIO()
        Image.fromarray(np.ascontiguousarray(image), "RGB").save(encoded, format="JPEG", quality=quality, subsampling=2)
        with Image.open(io.BytesIO(encoded.getvalue())) as decoded:
            return xp.asarray(np.asarray(decoded.convert("RGB")))
