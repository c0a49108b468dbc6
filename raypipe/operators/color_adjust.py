"""DALI's colour adjustments besides ``color_twist``: ``hsv``, ``hue``, ``saturation``,
``brightness_contrast``, ``brightness`` and ``contrast``.

``hsv``, ``hue`` and ``saturation`` are DALI's ``color_twist`` with some arguments fixed (DALI's
``hsv`` is exactly ``color_twist`` with ``value`` as the brightness; checked against DALI): the
same YIQ matrix, applied to HWC RGB images, on the host and in one batched kernel in the GPU stage.
``hsv`` gives uint8 by default, as in DALI; the others the input's type.

``brightness_contrast`` computes, per element in float32::

    out = brightness_shift * max_out + brightness * (contrast_center + contrast * (in - contrast_center))

where ``max_out`` is the output type's largest value (1 for floats) and ``contrast_center`` is by
default half the input type's range (128 for uint8, 0.5 for floats), then rounds (ties away from
zero, as DALI's host operator) and saturates to ``dtype`` (the input's type by default). It takes
any number of channels (HWC or FHWC, as DALI); in the GPU stage a batch held in one array is
adjusted in one pass of array operations.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, check_number, register
from ..types import DALIDataType, DALIImageType
from .batch_args import batch_numbers
from .cast import parse_dtype, round_half_away, saturate_cast
from .color_twist import ColorTwist, check_image_type

_CHANNEL_LAST = ("HWC", "FHWC")


def _check_layout(op: str, input_layouts: Sequence[str], allowed: Sequence[str] = _CHANNEL_LAST) -> str:
    layout = input_layouts[0] if input_layouts else ""
    if layout and layout not in allowed:
        raise ArgumentError(f"{op}: expects {' or '.join(allowed)} input, got layout {layout!r}")
    return layout


@register
class Hsv(ColorTwist):
    """Rotate the hue (degrees), scale the saturation and the value of HWC RGB images; each may be
    a per-sample argument input. uint8 output by default, as in DALI."""

    schema = Schema("hsv", devices=("cpu", "gpu"), arg_inputs=("hue", "saturation", "value"))
    per_frame_args = frozenset(schema.arg_inputs)
    arg_names = {"brightness": "value"}

    def configure(
        self,
        hue: float = 0.0,
        saturation: float = 1.0,
        value: float = 1.0,
        dtype: DALIDataType | np.dtype | str | None = DALIDataType.UINT8,
    ) -> None:
        super().configure(brightness=value, saturation=saturation, hue=hue, dtype=dtype)

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        return _check_layout(self.schema.name, input_layouts)


@register
class Hue(ColorTwist):
    """Rotate the hue of HWC RGB images by ``hue`` degrees (per sample when an argument input)."""

    schema = Schema("hue", devices=("cpu", "gpu"), arg_inputs=("hue",))
    per_frame_args = frozenset(schema.arg_inputs)

    def configure(self, hue: float = 0.0, image_type: DALIImageType | None = None, dtype=None) -> None:
        check_image_type(self.schema.name, image_type)
        super().configure(hue=hue, dtype=dtype)


@register
class Saturation(ColorTwist):
    """Scale the saturation of HWC RGB images by ``saturation`` (per sample when an argument input)."""

    schema = Schema("saturation", devices=("cpu", "gpu"), arg_inputs=("saturation",))
    per_frame_args = frozenset(schema.arg_inputs)

    def configure(self, saturation: float = 1.0, image_type: DALIImageType | None = None, dtype=None) -> None:
        check_image_type(self.schema.name, image_type)
        super().configure(saturation=saturation, dtype=dtype)


def half_range(dtype: np.dtype) -> float:
    """DALI's default contrast centre of a type: half its range (0.5 for floats, 128 for uint8)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return 0.5
    return float(1 << (8 * dtype.itemsize - (dtype.kind == "i") - 1))


def max_value(dtype: np.dtype) -> float:
    """The largest value of a type, as DALI scales ``brightness_shift``: 1 for floats."""
    dtype = np.dtype(dtype)
    return 1.0 if dtype.kind == "f" else float(np.iinfo(dtype).max)


_BC_ARGS = ("brightness", "brightness_shift", "contrast", "contrast_center")


@register
class BrightnessContrast(Operator):
    """``brightness_shift * max + brightness * (contrast_center + contrast * (in - contrast_center))``
    per element (see the module docstring); every argument may be a per-sample argument input."""

    schema = Schema("brightness_contrast", devices=("cpu", "gpu"), arg_inputs=_BC_ARGS)
    per_frame_args = frozenset(schema.arg_inputs)

    def configure(
        self,
        brightness: float = 1.0,
        brightness_shift: float = 0.0,
        contrast: float = 1.0,
        contrast_center: float | None = None,
        dtype: DALIDataType | np.dtype | str | None = None,
    ) -> None:
        values = {"brightness": brightness, "brightness_shift": brightness_shift, "contrast": contrast}
        self.adjust = {name: check_number(self.schema.name, name, v) for name, v in values.items()}
        center = contrast_center
        self.center = None if center is None else check_number(self.schema.name, "contrast_center", center)
        self.dtype = None if dtype is None else parse_dtype(self.schema.name, "dtype", dtype)

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        return _check_layout(self.schema.name, input_layouts)

    def _scale_offset(
        self, args: dict[str, Any], n: int, in_dtype: np.dtype, out_dtype: np.dtype
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per sample (``(n,)`` float32 each) the factor and the offset: ``out = factor * in + offset``."""
        op = self.schema.name
        values = [batch_numbers(op, args, name, self.adjust[name], n).astype(np.float32) for name in self.adjust]
        center_default = half_range(in_dtype) if self.center is None else self.center
        brightness, shift, contrast = values
        center = batch_numbers(op, args, "contrast_center", center_default, n).astype(np.float32)
        # float32 throughout, in DALI's order: its ties (x.5 results) are ties here too
        return brightness * contrast, brightness * (center - contrast * center) + shift * np.float32(
            max_value(out_dtype)
        )

    def _adjust(self, xp: ModuleType, data: Any, factor: Any, offset: Any, dtype: np.dtype) -> Any:
        adjusted = data.astype(np.float32) * factor
        adjusted += offset
        if dtype.kind in "iu":
            adjusted = round_half_away(xp, adjusted)
        return saturate_cast(xp, adjusted, dtype, overwrite=True)

    def compute(self, xp: ModuleType, inputs, args, ctx) -> Any:
        image = inputs[0]
        dtype = image.dtype if self.dtype is None else self.dtype
        sample = {key: [value] for key, value in args.items()}
        factor, offset = self._scale_offset(sample, 1, image.dtype, dtype)
        return self._adjust(xp, image, factor[0], offset[0], dtype)

    def run_batch(self, xp: ModuleType, inputs, args, ctxs) -> Any:
        """A batch held in one array in one pass (the per-sample factors broadcast over it); a list
        of samples sample by sample (a few element-wise launches each)."""
        batch = inputs[0]
        if not hasattr(batch, "ndim"):
            return [
                self.compute(xp, [x], {k: v[i] for k, v in args.items()}, ctx)
                for i, (x, ctx) in enumerate(zip(batch, ctxs))
            ]
        dtype = batch.dtype if self.dtype is None else self.dtype
        factor, offset = self._scale_offset(args, len(batch), batch.dtype, dtype)
        shape = (len(batch),) + (1,) * (batch.ndim - 1)
        return self._adjust(xp, batch, xp.asarray(factor).reshape(shape), xp.asarray(offset).reshape(shape), dtype)


@register
class Brightness(BrightnessContrast):
    """``brightness_contrast`` with the contrast left alone: ``brightness_shift * max + brightness * in``."""

    schema = Schema("brightness", devices=("cpu", "gpu"), arg_inputs=("brightness", "brightness_shift"))
    per_frame_args = frozenset(schema.arg_inputs)

    def configure(self, brightness: float = 1.0, brightness_shift: float = 0.0, dtype=None) -> None:
        super().configure(brightness=brightness, brightness_shift=brightness_shift, dtype=dtype)


@register
class Contrast(BrightnessContrast):
    """``brightness_contrast`` with the brightness left alone: ``center + contrast * (in - center)``."""

    schema = Schema("contrast", devices=("cpu", "gpu"), arg_inputs=("contrast", "contrast_center"))
    per_frame_args = frozenset(schema.arg_inputs)

    def configure(self, contrast: float = 1.0, contrast_center: float | None = None, dtype=None) -> None:
        super().configure(contrast=contrast, contrast_center=contrast_center, dtype=dtype)
