"""``color_twist``: brightness, contrast, saturation and hue of RGB images as one 3x3 affine map.

As DALI's ``color_twist``, per sample::

    out = brightness * (contrast * (M @ rgb - half_range) + half_range)
    M   = YIQ_TO_RGB @ R(hue) @ diag(1, saturation, saturation) @ RGB_TO_YIQ

``R(hue)`` rotates the (I, Q) chroma plane by ``hue`` degrees (``I' = cos h * I + sin h * Q``,
``Q' = -sin h * I + cos h * Q``) and ``half_range`` is 128 for integer inputs and 0.5 for
floating-point ones. The result is rounded and saturated to ``dtype`` (the input type by
default). ``YIQ_TO_RGB`` is the exact inverse of ``RGB_TO_YIQ``, so neutral arguments
return the input unchanged (DALI's rounded 3-digit inverse moves white by up to one level).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..kernels import launch
from ..operator import Operator, Schema, check_number, register
from ..types import DALIDataType, DALIImageType
from .batch_args import batch_numbers
from .cast import parse_dtype, saturate_cast
from .frames import as_frames, as_sequences, per_frame

_OP = "color_twist"
_ARGS = ("brightness", "contrast", "saturation", "hue")
RGB_TO_YIQ = np.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.321], [0.211, -0.523, 0.311]])
YIQ_TO_RGB = np.linalg.inv(RGB_TO_YIQ)


def twist_matrices(brightness: np.ndarray, contrast: np.ndarray, saturation: np.ndarray, hue: np.ndarray) -> np.ndarray:
    """The linear part ``brightness * contrast * M`` of the colour twist of each sample: ``(n, 3, 3)``
    float64 from ``(n,)`` float64 arrays (one computation for the whole batch)."""
    h = np.radians(hue)
    cos, sin = np.cos(h) * saturation, np.sin(h) * saturation
    chroma = np.zeros((len(h), 3, 3))
    chroma[:, 0, 0] = 1.0
    chroma[:, 1, 1], chroma[:, 1, 2], chroma[:, 2, 1], chroma[:, 2, 2] = cos, sin, -sin, cos
    return (brightness * contrast)[:, None, None] * (YIQ_TO_RGB @ chroma @ RGB_TO_YIQ)


def check_image_type(op: str, image_type: Any) -> None:
    """DALI's ``image_type`` of the colour operators: RGB, the only colour space they take here."""
    if image_type not in (None, DALIImageType.RGB):
        raise ArgumentError(f"{op}: image_type must be types.RGB (the only one here), got {image_type!r}")


@register
class ColorTwist(Operator):
    """Adjust ``brightness``, ``contrast``, ``saturation`` (scales) and ``hue`` (degrees) of
    HWC RGB images; each may be a per-sample argument input."""

    schema = Schema(_OP, devices=("cpu", "gpu"), arg_inputs=_ARGS)
    per_frame_args = frozenset(_ARGS)

    def configure(
        self,
        brightness: float = 1.0,
        contrast: float = 1.0,
        saturation: float = 1.0,
        hue: float = 0.0,
        dtype: DALIDataType | np.dtype | str | None = None,
        image_type: DALIImageType | None = None,
    ) -> None:
        """``image_type``: the images' colour space, ``types.RGB`` (DALI's default; the only one here)."""
        check_image_type(_OP, image_type)
        self.defaults = {
            name: check_number(_OP, name, value)
            for name, value in zip(_ARGS, (brightness, contrast, saturation, hue), strict=True)
        }
        self.dtype = None if dtype is None else parse_dtype(_OP, "dtype", dtype)

    def compute(self, xp: ModuleType, inputs, args, ctx) -> Any:
        image = inputs[0]
        _check_rgb(image, self.schema.name)
        dtype = image.dtype if self.dtype is None else self.dtype
        matrix, offset = self._coefficients(args, image.dtype, dtype)
        pixels = image.reshape(-1, 3).astype(np.float32)
        twisted = pixels @ xp.asarray(matrix.T.astype(np.float32))
        twisted += np.float32(offset)
        return saturate_cast(xp, twisted.reshape(image.shape), dtype, overwrite=True)

    def run_batch(self, xp: ModuleType, inputs, args, ctxs) -> Any:
        """The whole batch in one kernel launch (:mod:`raypipe.kernels.color_twist`) when the
        kernels can take it, else sample by sample.

        Tolerance against :meth:`run_sample`: integer outputs within 1 (a float32 result next to a
        rounding tie may round the other way, the host's matrix product summing in another order);
        float32 outputs within 1e-5 relative and 1e-4 absolute (for 0..255 data), float16 within one
        float16 step.
        """
        batch = inputs[0]
        _check_rgb_batch(batch, self.schema.name)
        in_dtype = launch.uniform_dtype(batch)
        out_dtype = self.dtype if self.dtype is not None else in_dtype
        if (
            in_dtype is None
            or in_dtype.kind not in "iuf"
            or launch.store_rule(out_dtype) is None
            or not launch.available(xp, 2 * launch.elements(batch))
        ):
            return super().run_batch(xp, inputs, args, ctxs)
        from ..kernels.color_twist import color_twist_batch

        matrices, offsets = self._batch_coefficients(args, len(batch), in_dtype, out_dtype)
        coeffs = np.concatenate([matrices.reshape(-1, 9), offsets[:, None]], axis=1).astype(np.float32)
        if launch.shapes_of(batch).shape[1] == 3:
            return color_twist_batch(xp, launch.pack(xp, batch, _OP), coeffs, out_dtype)
        frames, counts = as_frames(xp, batch, _OP)  # FHWC sequences: a sample's frames twist alike
        return as_sequences(color_twist_batch(xp, frames, per_frame(coeffs, counts), out_dtype), counts)

    #: The operator's argument giving each of the twist's (``hsv``'s ``value`` is the brightness).
    arg_names: dict[str, str] = {}

    def _batch_coefficients(
        self, args: dict[str, Any], n: int, in_dtype: np.dtype, out_dtype: np.dtype
    ) -> tuple[np.ndarray, np.ndarray]:
        """Matrices ``(n, 3, 3)`` and offsets ``(n,)`` (float64) of ``n`` samples of ``in_dtype``."""
        values = {
            name: batch_numbers(self.schema.name, args, self.arg_names.get(name, name), default, n)
            for name, default in self.defaults.items()
        }
        return _twist_coefficients(values, in_dtype)

    def _coefficients(self, args: dict[str, Any], dtype: np.dtype, out_dtype: np.dtype) -> tuple[np.ndarray, float]:
        """This sample's matrix (float64, 3x3) and offset for an image of ``dtype``."""
        sample = {key: [value] for key, value in args.items()}
        matrices, offsets = self._batch_coefficients(sample, 1, dtype, out_dtype)
        return matrices[0], float(offsets[0])


def _twist_coefficients(values: dict[str, np.ndarray], dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """Matrices ``(n, 3, 3)`` and offsets ``(n,)`` (float64) for ``(n,)`` arrays of each argument
    (``values`` by name) and images of ``dtype``."""
    half_range = 0.5 if np.dtype(dtype).kind == "f" else 128.0
    brightness, contrast = values["brightness"], values["contrast"]
    return twist_matrices(**values), brightness * (1.0 - contrast) * half_range


def _check_rgb_batch(batch: Any, op: str = _OP) -> None:
    """:func:`_check_rgb` of every sample (one check for a packed batch or a batch array)."""
    if isinstance(batch, launch.Packed) or hasattr(batch, "ndim"):
        shapes = launch.shapes_of(batch)
        bad = [0] if shapes.shape[1] not in (3, 4) else np.flatnonzero(shapes[:, -1] != 3)
        if len(bad):
            _check_rgb(batch[int(bad[0])], op)
        return
    for image in batch:
        _check_rgb(image, op)


def _check_rgb(image: Any, op: str = _OP) -> None:
    """An HWC RGB image, or a sequence of them (FHWC): every pixel is twisted alike."""
    if image.ndim not in (3, 4) or image.shape[-1] != 3:
        raise ValueError(f"{op}: expects HWC RGB images or FHWC sequences, got a sample of shape {tuple(image.shape)}")
