"""``flip``: mirror images horizontally and/or vertically, and volumes also depthwise, per sample
when the flags are argument inputs (``horizontal=fn.random.coin_flip()``). A sequence (``FHWC``,
``FCHW``, ``FHW``) flips every frame of a sample alike, as DALI's."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..kernels import launch
from ..operator import Operator, Schema, as_scalar, register
from .batch_args import batch_values
from .frames import as_frames, as_sequences, per_frame

# (vertical axis, horizontal axis) of each supported layout: images, volumes and sequences of frames.
AXES = {
    "HWC": (0, 1),
    "CHW": (1, 2),
    "HW": (0, 1),
    "DHWC": (1, 2),
    "CDHW": (2, 3),
    "DHW": (1, 2),
    "FHWC": (1, 2),
    "FCHW": (2, 3),
    "FHW": (1, 2),
}
#: The depth axis of each volume layout (``depthwise``).
DEPTH = {"DHWC": 0, "CDHW": 1, "DHW": 0}


def _flag(name: str, value: Any) -> int:
    if value not in (0, 1):
        raise ArgumentError(f"flip: {name} must be 0 or 1, got {value!r}")
    return int(value)


@register
class Flip(Operator):
    """Mirror images; a flag of 1 flips that direction (``depthwise``: the depth of a volume).

    ``layout`` (one of :data:`AXES`) says which axes are depth, height and width; by default
    it is the input's layout as the graph reports it at build time, or HWC when unknown.
    """

    schema = Schema("flip", devices=("cpu", "gpu"), arg_inputs=("horizontal", "vertical", "depthwise"))

    def configure(self, horizontal: int = 1, vertical: int = 0, depthwise: int = 0, layout: str | None = None) -> None:
        self.horizontal = _flag("horizontal", horizontal)
        self.vertical = _flag("vertical", vertical)
        self.depthwise = _flag("depthwise", depthwise)
        if layout is not None and layout not in AXES:
            raise ArgumentError(f"flip: layout must be one of {tuple(AXES)}, got {layout!r}")
        self.layout = layout
        self.resolved_layout = layout or "HWC"

    def output_layout(self, input_layouts):
        given = input_layouts[0] if input_layouts else ""
        if self.layout is None and given:
            if given not in AXES:
                raise ArgumentError(f"flip: cannot tell the image axes of layout {given!r}; pass layout=")
            self.resolved_layout = given
        return self.resolved_layout

    def compute(self, xp, inputs, args, ctx):
        image = inputs[0]
        self._check_rank(image)
        vertical_axis, horizontal_axis = AXES[self.resolved_layout]
        flags = [(vertical_axis, "vertical"), (horizontal_axis, "horizontal")]
        if self.resolved_layout in DEPTH:
            flags.append((DEPTH[self.resolved_layout], "depthwise"))
        axes = [axis for axis, flag in flags if self._flag(args, flag)]
        if not axes:
            return image
        return xp.ascontiguousarray(xp.flip(image, axis=tuple(axes)))

    def run_batch(self, xp, inputs, args, ctxs):
        """The whole batch in one kernel launch (:mod:`raypipe.kernels.flip`) when the kernels can
        take it, else sample by sample (also where a volume flips depthwise). The kernel copies
        elements, so it equals :meth:`run_sample` exactly; the flags of the whole batch are two arrays."""
        batch = inputs[0]
        self._check_ranks(batch)
        dtype = launch.uniform_dtype(batch)
        depthwise = self.resolved_layout in DEPTH and ("depthwise" in args or self.depthwise)
        if (
            depthwise
            or dtype is None
            or dtype.kind not in "biuf"
            or not launch.available(xp, 2 * launch.elements(batch))
        ):
            return super().run_batch(xp, inputs, args, ctxs)
        from ..kernels.flip import flip_batch

        n = len(batch)
        horizontal = batch_values(args, "horizontal", self.horizontal, n, np.dtype(bool))
        vertical = batch_values(args, "vertical", self.vertical, n, np.dtype(bool))
        if not self.resolved_layout.startswith("F"):
            return flip_batch(xp, launch.pack(xp, batch, "flip"), AXES[self.resolved_layout], horizontal, vertical)
        frames, counts = as_frames(xp, batch, "flip")  # a sequence's frames flip alike
        axes = AXES[self.resolved_layout[1:]]
        out = flip_batch(xp, frames, axes, per_frame(horizontal, counts), per_frame(vertical, counts))
        return as_sequences(out, counts)

    def _check_ranks(self, batch) -> None:
        """:meth:`_check_rank` of every sample (one check for a packed batch or a batch array)."""
        if isinstance(batch, launch.Packed) or hasattr(batch, "ndim"):
            shapes = launch.shapes_of(batch)
            if len(shapes) and shapes.shape[1] != len(self.resolved_layout):
                self._check_rank(batch[0])
            return
        for image in batch:
            self._check_rank(image)

    def _check_rank(self, image) -> None:
        layout = self.resolved_layout
        if image.ndim != len(layout):
            raise ValueError(f"flip: expects {layout} data, got shape {tuple(image.shape)}")

    def _flag(self, args, name: str) -> bool:
        """This sample's ``horizontal``/``vertical`` flag (its argument input, else the static one)."""
        return bool(as_scalar(args.get(name, getattr(self, name))))
