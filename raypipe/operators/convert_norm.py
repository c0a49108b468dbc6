"""``_convert_norm``: uint8 images to another type over its dynamic range, as DALI's decoders give
them with ``dtype`` (placed after a decoder given one: :meth:`raypipe.operator.Operator.then`).

A value ``v`` becomes ``v * (1/255)`` in float32 (``FLOAT``), or that times the type's maximum,
rounded half away from zero and saturated (``UINT16``: ``v * 257``; ``INT8``: ``v * 127 / 255``):
DALI's values exactly (``tests/operators/test_decoders.py``)."""

from __future__ import annotations

import numpy as np

from ..kernels.launch import Packed
from ..operator import Operator, Schema, register
from .cast import round_half_away

#: the types DALI's image decoders give with ``dtype``
DECODER_DTYPES = tuple(np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16, np.int32, np.float32))


@register
class ConvertNorm(Operator):
    """A uint8 image to ``dtype`` over the type's range (see the module)."""

    schema = Schema("_convert_norm", devices=("cpu", "gpu"))

    def configure(self, dtype: np.dtype) -> None:
        self.dtype = np.dtype(dtype)

    def run_batch(self, xp, inputs, args, ctxs):
        """The whole batch in one pass: elementwise, so a dense batch array or a packed buffer (the
        GPU stage's batches) converts at once, whatever the batch size; a list sample by sample."""
        batch = inputs[0]
        if isinstance(batch, Packed):
            return Packed(self.compute(xp, [batch.data], args, None), batch.shapes, batch.offsets)
        if isinstance(batch, (list, tuple)):
            return [self.compute(xp, [sample], args, None) for sample in batch]
        return self.compute(xp, [batch], args, None)

    def compute(self, xp, inputs, args, ctx):
        image = inputs[0]
        if image.dtype != np.uint8:
            raise ValueError(f"a decoder's dtype converts its uint8 image, got {image.dtype}")
        unit = image.astype(np.float32) * np.float32(1 / 255)
        if self.dtype == np.float32:
            return unit
        info = np.iinfo(self.dtype)
        scaled = round_half_away(xp, unit * np.float32(info.max)).astype(np.float64)
        return xp.clip(scaled, info.min, info.max).astype(self.dtype)
