"""``debayer``: demosaicing of raw Bayer-pattern sensor images into RGB, as DALI 2.4's CPU operator
(which wraps OpenCV's ``cvtColor`` Bayer conversions), reproduced here in array code so that OpenCV
is not needed: DALI's values exactly for ``bilinear_ocv`` (the default), ``edgeaware_ocv`` and
``gray_ocv``.

The input is one channel (``HW``, ``HWC`` with one channel, or the sequences ``FHW``, ``FHWC``;
without a layout a 2-D sample is ``HW``, a 3-D one ``HWC``), uint8 or uint16, of even height and
width; the output is ``HWC`` (``FHWC``) RGB, one grey channel for ``gray_ocv``. ``blue_position``
(per sample) is the blue sensor's ``(row, column)`` in the 2x2 tile starting at the second row and
column (OpenCV's convention: ``(0, 0)`` is ``BG``, ``(0, 1)`` ``GB``, ``(1, 0)`` ``GR``, ``(1, 1)``
``RG``); one number is both (a per-sample value must be a pair, as DALI's).

Each pixel inside a one-pixel frame keeps its own colour and takes the others from its neighbours,
in integers rounded half up, as OpenCV: at a green sensor the mean of the two horizontal and of the
two vertical neighbours; at a red or blue sensor the mean of the four diagonal neighbours for the
opposite colour and, for green, the mean of the four direct neighbours (``bilinear_ocv``) or, with
``edgeaware_ocv``, of the pair (vertical or horizontal) along which the values differ less (the
vertical pair when the horizontal difference is larger). ``gray_ocv`` weighs those means with
OpenCV's fixed-point luma coefficients (4899, 9617, 1868 over 2^14). The frame copies the nearest
computed pixel: the first and last columns, then the first and last rows; an image two pixels high
or wide is all zeros. OpenCV's ``vng_ocv`` and DALI's GPU algorithm ``default_npp`` (NPP's) are not
here and are refused by name; the ``gpu`` device computes the CPU algorithms (``bilinear_ocv`` by
default) on the device.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, register
from .axes import per_sample

OP = "debayer"
ALGORITHMS = ("bilinear_ocv", "edgeaware_ocv", "gray_ocv")
NOT_HERE = {
    "vng_ocv": "OpenCV's variable number of gradients",
    "default_npp": "DALI's GPU algorithm, NPP's interpolation with chroma correlation",
}
#: OpenCV's fixed-point luma weights of red, green and blue (``SHIFT`` 14)
R2Y, G2Y, B2Y = 4899, 9617, 1868


@register
class Debayer(Operator):
    """RGB (or grey) images demosaiced from one-channel Bayer-pattern images."""

    schema = Schema(OP, devices=("cpu", "gpu"), arg_inputs=("blue_position",))
    per_frame_args = frozenset(schema.arg_inputs)

    def configure(self, blue_position: Any = None, algorithm: str | None = None) -> None:
        self.blue_position = None if blue_position is None else _position(blue_position, ArgumentError)
        algorithm = "bilinear_ocv" if algorithm is None else algorithm
        if algorithm in NOT_HERE:
            raise ArgumentError(
                f"{OP}: algorithm {algorithm!r} ({NOT_HERE[algorithm]}) is not here (accepted: {_listed()})"
            )
        if algorithm not in ALGORITHMS:
            raise ArgumentError(f"{OP}: unsupported algorithm {algorithm!r} (accepted: {_listed()})")
        self.algorithm = algorithm

    def bind_inputs(self, count: int, arg_inputs: Collection[str]) -> None:
        if self.blue_position is None and "blue_position" not in arg_inputs:
            raise ArgumentError(f"{OP}: blue_position is required (the blue sensor's position in the 2x2 tile)")

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        layout = input_layouts[0] if input_layouts else ""
        if layout not in ("", "HW", "HWC", "FHW", "FHWC"):
            raise ArgumentError(f"{OP}: the input's layout must be HW, HWC, FHW or FHWC, got {layout!r}")
        self.sequence = layout.startswith("F")
        self.channels = layout.endswith("C") if layout else None
        return "FHWC" if self.sequence else "HWC"

    def compute(self, xp, inputs, args, ctx):
        raw = inputs[0]
        channels = getattr(self, "channels", None)
        sequence = getattr(self, "sequence", False)
        if channels is None:  # no layout: a 2-D sample is HW, a 3-D one HWC
            if raw.ndim not in (2, 3):
                raise ValueError(f"{OP}: without a layout the input must be HW or HWC, got shape {tuple(raw.shape)}")
            channels = raw.ndim == 3
        if raw.ndim != 2 + sequence + channels:
            raise ValueError(f"{OP}: the input's shape {tuple(raw.shape)} does not match its layout")
        if channels:
            if raw.shape[-1] != 1:
                raise ValueError(f"{OP}: the input must have one channel, got {raw.shape[-1]}")
            raw = raw[..., 0]
        if raw.dtype not in (np.uint8, np.uint16):
            raise ValueError(f"{OP}: the input must be uint8 or uint16, got {raw.dtype}")
        if sequence and raw.shape[0] == 0:
            raise ValueError(f"{OP}: a sequence must have frames, got shape {tuple(inputs[0].shape)}")
        height, width = (int(n) for n in raw.shape[-2:])
        if height == 0 or width == 0 or height % 2 or width % 2:
            raise ValueError(f"{OP}: the height and width must be even and positive, got {height} x {width}")
        blue = self.blue_position
        if "blue_position" in args:  # per sample: two values, as DALI's
            values = per_sample(args["blue_position"])
            if len(values) != 2:
                raise ValueError(f"{OP}: blue_position must be two values, each 0 or 1, got {list(values)}")
            blue = _position(values, ValueError)
        return demosaic(xp, raw, blue, self.algorithm)


def _listed() -> str:
    return ", ".join(repr(a) for a in ALGORITHMS)


def _position(value: Any, error: type[Exception]) -> tuple[int, int]:
    """``blue_position`` as ``(row, column)``, each 0 or 1; one number is both."""
    values = [value] if np.ndim(value) == 0 else list(np.asarray(value).reshape(-1).tolist())
    if len(values) == 1:
        values = values * 2
    if len(values) != 2 or any(isinstance(v, bool) or v not in (0, 1) for v in values):
        raise error(f"{OP}: blue_position must be two values, each 0 or 1 (a position in the 2x2 tile), got {value!r}")
    return int(values[0]), int(values[1])


def demosaic(xp, raw, blue: tuple[int, int], algorithm: str):
    """OpenCV's Bayer conversion of ``raw`` (``[..., H, W]``, uint8 or uint16) to ``[..., H, W, 3]``
    RGB (``[..., H, W, 1]`` grey for ``gray_ocv``), the blue sensor at ``blue`` of the tile that
    starts at the second row and column."""
    height, width = raw.shape[-2:]
    out = xp.zeros((*raw.shape, 1 if algorithm == "gray_ocv" else 3), dtype=raw.dtype)
    if height <= 2 or width <= 2:  # OpenCV leaves these zeros
        return out
    s = raw.astype(np.int64)
    centre = s[..., 1:-1, 1:-1]
    horizontal = s[..., 1:-1, :-2] + s[..., 1:-1, 2:]
    vertical = s[..., :-2, 1:-1] + s[..., 2:, 1:-1]
    diagonal = s[..., :-2, :-2] + s[..., :-2, 2:] + s[..., 2:, :-2] + s[..., 2:, 2:]
    # the sensors of the inner pixels (absolute rows and columns from 1): red on the rows and
    # columns of blue's parity flipped
    red_row = (xp.arange(1, height - 1) % 2 == blue[0])[:, None]
    red_col = (xp.arange(1, width - 1) % 2 == blue[1])[None, :]
    red, blue_site = red_row & red_col, ~red_row & ~red_col
    green_red_row, green = red_row & ~red_col, red_row ^ red_col  # green between reds horizontally
    if algorithm == "gray_ocv":
        at_red = diagonal * B2Y + (horizontal + vertical) * G2Y + 4 * R2Y * centre
        at_blue = diagonal * R2Y + (horizontal + vertical) * G2Y + 4 * B2Y * centre
        at_green_r = horizontal * R2Y + vertical * B2Y + 2 * G2Y * centre
        at_green_b = horizontal * B2Y + vertical * R2Y + 2 * G2Y * centre
        inner = xp.where(
            green,
            (xp.where(green_red_row, at_green_r, at_green_b) + (1 << 14)) >> 15,
            (xp.where(red, at_red, at_blue) + (1 << 15)) >> 16,
        )[..., None]
    else:
        h_mean, v_mean = (horizontal + 1) >> 1, (vertical + 1) >> 1
        d_mean = (diagonal + 2) >> 2
        if algorithm == "edgeaware_ocv":
            h_diff = xp.abs(s[..., 1:-1, :-2] - s[..., 1:-1, 2:])
            v_diff = xp.abs(s[..., :-2, 1:-1] - s[..., 2:, 1:-1])
            g_est = xp.where(h_diff > v_diff, v_mean, h_mean)
        else:
            g_est = (horizontal + vertical + 2) >> 2
        r = xp.where(red, centre, xp.where(blue_site, d_mean, xp.where(green_red_row, h_mean, v_mean)))
        b = xp.where(blue_site, centre, xp.where(red, d_mean, xp.where(green_red_row, v_mean, h_mean)))
        g = xp.where(green, centre, g_est)
        inner = xp.stack([r, g, b], axis=-1)
    out[..., 1:-1, 1:-1, :] = inner.astype(raw.dtype)
    out[..., 1:-1, 0, :] = out[..., 1:-1, 1, :]
    out[..., 1:-1, -1, :] = out[..., 1:-1, -2, :]
    out[..., 0, :, :] = out[..., 1, :, :]
    out[..., -1, :, :] = out[..., -2, :, :]
    return out
