"""Decoders of a window that the arguments place: ``decoders.image_crop`` (DALI's crop window) and
``decoders.image_slice`` (DALI's slice window).

As ``decoders.image_random_crop``, they read the header, place the window from the image's size
and decode only the window (libjpeg-turbo decodes the rows and iMCU columns it covers; deferred to
the GPU, a region-of-interest decode). The pixels equal a whole decode followed by ``crop`` or
``slice``. As in DALI 2.4, a window must lie inside the image (the error names the sample) and
slices cut only the height and width.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..decode_plan import HOST_DECODE, DecodePlan
from ..errors import ArgumentError, DecodeError
from ..operator import Schema, Skip, as_scalar, register
from ..types import DALIImageType
from .crop import check_position, check_rounding, crop_window
from .decoders import EncodedImage, _Decoder
from .host_decode import decode, open_source
from .slice import NAMED, Slice

Window = tuple[int, int, int, int]


class _WindowDecoder(_Decoder):
    """A decoder of the window :meth:`place` gives for each sample's size and arguments."""

    def place(self, width: int, height: int, inputs: Sequence[Any], args: dict[str, Any]) -> Window:
        """The window ``(x, y, w, h)`` of a ``width`` x ``height`` image (may reach outside it)."""
        raise NotImplementedError

    def run_sample(self, inputs, args, ctx, plan: DecodePlan = HOST_DECODE):
        """The sample's window decoded on the host, or, deferred to the Mixed stage, its header
        read and the window placed (an :class:`EncodedImage`)."""
        data = inputs[0]
        if self._watch_orientation:
            self._check_exif(data, ctx)
        try:
            width, height, _ = self._frame(data)
            x, y, w, h = self.place(width, height, inputs, args)
            if x < 0 or y < 0 or x + w > width or y + h > height or w < 1 or h < 1:
                raise ValueError(
                    f"{self.schema.name}: the window of {w}x{h} (w x h) at ({x}, {y}) does not lie inside "
                    f"the {width}x{height} image"
                )
            if plan.deferred:
                return EncodedImage(data, width, height, (x, y, w, h))
            return decode(
                open_source(data, self.output_type), self.output_type, (x, y, x + w, y + h), 1, None, self.use_fast_idct
            )
        except DecodeError as exc:
            if self.on_error == "skip":
                return Skip(str(exc))
            raise

    def run_chunk(self, inputs, args, ctxs, plan: DecodePlan = HOST_DECODE):
        """:meth:`run_sample` of each sample of a chunk, with its own inputs and arguments."""
        return [
            self.run_sample([column[k] for column in inputs], {n: v[k] for n, v in args.items()}, ctx, plan)
            for k, ctx in enumerate(ctxs)
        ]


def crop_size(op: str, crop: Any, crop_h: Any, crop_w: Any, crop_d: Any = None, depth: bool = False) -> tuple[int, int]:
    """``(h, w)`` from ``crop`` (a pair; with ``depth``, also DALI's (d, h, w), whose depth an image
    does not have) or ``crop_h`` and ``crop_w``; ``crop_d`` goes with those (0 is not set)."""
    if crop is not None and (crop_h is not None or crop_w is not None or crop_d):
        raise ArgumentError(f"{op}: give either crop=(h, w) or crop_h and crop_w (and crop_d), not both")
    if crop is None:
        if crop_h is None or crop_w is None:
            raise ArgumentError(f"{op}: give crop=(h, w), or both crop_h and crop_w")
        crop = (crop_h, crop_w)
    sizes = tuple(crop) if isinstance(crop, (list, tuple, np.ndarray)) else ()
    if len(sizes) not in ((2, 3) if depth else (2,)) or any(
        isinstance(s, bool) or not isinstance(s, (int, float, np.integer, np.floating)) or int(s) < 1 for s in sizes
    ):
        triple = " or a triple (d, h, w)" if depth else ""
        raise ArgumentError(f"{op}: crop must be a pair of positive sizes (h, w){triple}, got {crop!r}")
    return int(sizes[-2]), int(sizes[-1])


@register
class ImageCropDecoder(_WindowDecoder):
    """Decode a ``crop`` = (h, w) window at ``crop_pos_x`` / ``crop_pos_y`` (per sample where they are
    argument inputs), placed by DALI's crop rule (:func:`~raypipe.operators.crop.crop_window`)."""

    schema = Schema("decoders.image_crop", devices=("cpu", "mixed"), arg_inputs=("crop_pos_x", "crop_pos_y"))

    def configure(
        self,
        crop: Any = None,
        crop_h: float | None = None,
        crop_w: float | None = None,
        crop_pos_x: float = 0.5,
        crop_pos_y: float = 0.5,
        output_type: DALIImageType = DALIImageType.RGB,
        on_error: str = "raise",
        use_fast_idct: bool = False,
        adjust_orientation: bool | None = None,
        rounding: str = "round",
        crop_d: float | None = None,
        crop_pos_z: float = 0.5,
        **hints: Any,
    ) -> None:
        """``crop_d`` and ``crop_pos_z`` (a volume's depth window in DALI's schema) are validated;
        an image has no depth, so they change nothing, as in DALI."""
        self._configure_common(output_type, on_error, use_fast_idct, adjust_orientation, hints)
        self.rounding = check_rounding(self.schema.name, rounding)
        self.crop_h, self.crop_w = crop_size(self.schema.name, crop, crop_h, crop_w, crop_d, depth=True)
        self.crop_pos_x = check_position(self.schema.name, "crop_pos_x", crop_pos_x)
        self.crop_pos_y = check_position(self.schema.name, "crop_pos_y", crop_pos_y)
        check_position(self.schema.name, "crop_pos_z", crop_pos_z)

    def place(self, width: int, height: int, inputs: Sequence[Any], args: dict[str, Any]) -> Window:
        pos = {
            name: check_position(self.schema.name, name, as_scalar(args.get(name, getattr(self, name))))
            for name in ("crop_pos_x", "crop_pos_y")
        }
        y, x = crop_window(height, width, self.crop_h, self.crop_w, pos["crop_pos_x"], pos["crop_pos_y"], self.rounding)
        return x, y, self.crop_w, self.crop_h


@register
class ImageSliceDecoder(_WindowDecoder):
    """Decode the window DALI's ``slice`` would cut from the decoded HWC image: an anchor and a shape
    as two positional inputs, or ``start`` / ``rel_start`` with ``shape`` / ``rel_shape`` / ``end`` /
    ``rel_end`` (per sample where they are argument inputs), along ``axes`` or ``axis_names`` (default
    ``"WH"``), with ``normalized_anchor`` / ``normalized_shape`` (see :class:`~.slice.Slice`)."""

    schema = Schema("decoders.image_slice", devices=("cpu", "mixed"), max_inputs=3, arg_inputs=NAMED)

    def configure(
        self,
        start=None,
        end=None,
        shape=None,
        rel_start=None,
        rel_end=None,
        rel_shape=None,
        axes=None,
        axis_names: str | None = None,
        normalized_anchor: bool = True,
        normalized_shape: bool = True,
        output_type: DALIImageType = DALIImageType.RGB,
        on_error: str = "raise",
        use_fast_idct: bool = False,
        adjust_orientation: bool | None = None,
        **hints: Any,
    ) -> None:
        self._configure_common(output_type, on_error, use_fast_idct, adjust_orientation, hints)
        window = {"start": start, "end": end, "shape": shape, "rel_start": rel_start, "rel_end": rel_end}
        window |= {"rel_shape": rel_shape, "axes": axes, "axis_names": axis_names}
        window |= {"normalized_anchor": normalized_anchor, "normalized_shape": normalized_shape}
        try:
            self._slice = Slice("cpu", self.op_id, **{k: v for k, v in window.items() if v is not None})
        except ArgumentError as exc:
            raise ArgumentError(str(exc).replace("slice:", f"{self.schema.name}:", 1)) from None
        self._slice.output_layout(["HWC"])

    def place(self, width: int, height: int, inputs: Sequence[Any], args: dict[str, Any]) -> Window:
        channels = 1 if self.output_type is DALIImageType.GRAY else 3
        try:
            start, end = self._slice.window((height, width, channels), inputs, args)
        except ValueError as exc:
            raise type(exc)(str(exc).replace("slice:", f"{self.schema.name}:", 1)) from None
        if (start[2], end[2]) != (0, channels):
            raise ValueError(f"{self.schema.name}: only the height and width can be sliced (axis 'C' is not)")
        return start[1], start[0], end[1] - start[1], end[0] - start[0]
