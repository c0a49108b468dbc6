"""Normalize a uint8 batch on the training rank's own device.

A pipeline without a GPU stage can end in ``types.UINT8`` HWC images: shipping uint8 moves a
quarter of the bytes of float32 through the object store and the host-to-device copy, and
the rank then normalizes on its GPU with a few torch ops. :class:`Normalize` computes what
``fn.crop_mirror_normalize(dtype=FLOAT, output_layout=..., mean=..., std=...)`` computes
without crop or mirror, in the same float32 steps (``(x - mean) * float32(1 / std)``), so the
results agree within 1e-5 absolute (bit for bit on the CPU); ``float16`` rounds that float32
result once, as the operator does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from raypipe.errors import ArgumentError
from raypipe.operators.cast import parse_dtype
from raypipe.operators.crop_mirror_normalize import channel_values

if TYPE_CHECKING:
    import torch

_NAME = "Normalize"
LAYOUTS = ("CHW", "HWC")
DTYPES = (np.dtype(np.float32), np.dtype(np.float16))


class Normalize:
    """``(images - mean) / std`` for output ``output`` of a batch: a uint8 N x H x W x C torch
    tensor on the rank's device becomes ``dtype`` (``"float32"`` or ``"float16"``) in
    ``output_layout`` (``"CHW"``, giving N x C x H x W, or ``"HWC"``) on that same device.

    ``mean`` and ``std`` are a number or one number per channel (pixel units, e.g.
    ``[0.485 * 255, ...]``). ``input_layout="CHW"`` takes N x C x H x W batches (the uint8 output of
    ``presets.resnet50_train``). Agrees with ``crop_mirror_normalize`` within 1e-5 absolute.
    """

    def __init__(
        self,
        mean: float | Sequence[float],
        std: float | Sequence[float],
        output_layout: str = "CHW",
        dtype: Any = "float32",
        output: int = 0,
        input_layout: str = "HWC",
    ):
        mean32 = channel_values("mean", mean, _NAME)
        std32 = channel_values("std", std, _NAME)
        if np.any(std32 == 0):
            raise ArgumentError(f"{_NAME}: std must not contain zeros, got {std32.tolist()}")
        if mean32.size != std32.size and 1 not in (mean32.size, std32.size):
            raise ArgumentError(f"{_NAME}: mean has {mean32.size} values but std has {std32.size}")
        for name, layout in (("output_layout", output_layout), ("input_layout", input_layout)):
            if layout not in LAYOUTS:
                raise ArgumentError(f"{_NAME}: {name} must be one of {LAYOUTS}, got {layout!r}")
        parsed = parse_dtype(_NAME, "dtype", dtype)
        if parsed not in DTYPES:
            raise ArgumentError(f"{_NAME}: dtype must be float32 or float16, got {parsed}")
        if isinstance(output, bool) or not isinstance(output, int) or output < 0:
            raise ArgumentError(f"{_NAME}: output must be a non-negative int (an output index), got {output!r}")
        self.output_layout = output_layout
        self.input_layout = input_layout
        self.dtype = parsed
        self.output = output
        self.channels = max(mean32.size, std32.size)
        self._mean = mean32
        self._inv_std = (np.float64(1.0) / std32).astype(np.float32)  # as crop_mirror_normalize rounds it
        self._constants: dict[Any, tuple[torch.Tensor, torch.Tensor]] = {}

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        """Normalize one uint8 batch (N x H x W x C, or N x C x H x W with ``input_layout="CHW"``)
        into a new tensor on the same device."""
        import torch

        if not isinstance(images, torch.Tensor):
            raise ArgumentError(f"{_NAME}: expects a torch tensor, got {type(images).__name__}")
        if images.dtype != torch.uint8 or images.dim() != 4:
            dims = "N x H x W x C" if self.input_layout == "HWC" else "N x C x H x W"
            raise ArgumentError(
                f"{_NAME}: expects a uint8 {dims} batch, got {images.dtype} of shape {tuple(images.shape)}"
            )
        if self.input_layout == "CHW":
            images = images.permute(0, 2, 3, 1)  # a view: the arithmetic below reads it once
        if self.channels != 1 and images.shape[3] != self.channels:
            raise ArgumentError(
                f"{_NAME}: mean/std have {self.channels} values but the images have {images.shape[3]} channels"
            )
        mean, inv_std = self._on(images.device)
        source = images.permute(0, 3, 1, 2) if self.output_layout == "CHW" else images
        # convert, then subtract and scale in place: the same float32 steps as ``torch.sub`` of the
        # uint8 tensor, whose mixed-dtype loop took 3x as long on the CPU
        out = _empty_float32(tuple(source.shape), images.device).copy_(source)
        out.sub_(mean).mul_(inv_std)
        return out if self.dtype == np.float32 else out.to(torch.float16)

    def apply(self, outputs: Sequence[Any]) -> tuple[Any, ...]:
        """``outputs`` (one batch's outputs) with output ``output`` normalized."""
        if self.output >= len(outputs):
            raise ArgumentError(f"{_NAME}: output {self.output} asked for, the batch has {len(outputs)} outputs")
        return tuple(self(o) if i == self.output else o for i, o in enumerate(outputs))

    def _on(self, device: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """``mean`` and ``1 / std`` as float32 tensors on ``device``, shaped to broadcast over the
        output layout; made once per device."""
        import torch

        if device not in self._constants:
            shape = (-1, 1, 1) if self.output_layout == "CHW" else (-1,)
            self._constants[device] = (
                torch.from_numpy(self._mean).reshape(shape).to(device),
                torch.from_numpy(self._inv_std).reshape(shape).to(device),
            )
        return self._constants[device]


def _empty_float32(shape: tuple[int, ...], device: Any) -> torch.Tensor:
    """A new float32 tensor on ``device``. On the CPU through numpy, which asks the kernel for
    huge pages for large arrays: a fresh 38 MB batch then costs about 700 page faults instead of
    9,400, which took longer than the arithmetic."""
    import torch

    if torch.device(device).type == "cpu":
        return torch.from_numpy(np.empty(shape, np.float32))
    return torch.empty(shape, dtype=torch.float32, device=device)
