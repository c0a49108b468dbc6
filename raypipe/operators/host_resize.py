"""The host's antialiased bilinear resize of uint8 HWC images: torch's SIMD kernel or Pillow.

Resampling costs about as much as decoding, and Pillow's resize is scalar C. torch
(2.1 and later) has an AVX2/AVX-512 kernel for antialiased bilinear resizing of uint8
channels-last images that reproduces Pillow's filter (within one grey level, on a few
percent of pixels, from rounding) at 2 to 3 times its speed; it releases the GIL. It is
used where torch is installed (the ``torch`` extra, as on every training node), Pillow
otherwise; ``RAYPIPE_HOST_RESIZE=pillow`` or ``torch`` chooses.

The CPU stage's threads call it concurrently, so it must not start a thread team of
its own in each: it runs with one intra-op thread per calling thread
(:func:`raypipe.torch_threads.single_threaded`), leaving torch's setting for the rest of the
process alone.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np
from PIL import Image

from ..torch_threads import optional_torch, single_threaded

Box = tuple[float, float, float, float]


@cache
def _torch() -> Any | None:
    torch = optional_torch("RAYPIPE_HOST_RESIZE", "pillow")
    if torch is not None:
        import torch.nn.functional  # noqa: F401
    return torch


def backend() -> str:
    """``"torch"`` or ``"pillow"``: which library resizes on the host in this process."""
    return "torch" if _torch() is not None else "pillow"


def resize(
    image: np.ndarray,
    width: int,
    height: int,
    box: Box | None = None,
    method: Image.Resampling = Image.Resampling.BILINEAR,
) -> np.ndarray:
    """``image`` (uint8 HWC) resized to ``width`` x ``height`` with an antialiased bilinear filter
    (another of Pillow's, ``BICUBIC`` or ``LANCZOS``, through Pillow).

    With a ``box`` the filter reads ``image`` around the box as well (Pillow's ``box``), which
    only Pillow does. Whole images of 3 or 4 channels go through torch where it is the backend.
    torch runs the horizontal pass first; where Pillow would run the vertical one first (crops much
    taller than wide), more pixels differ by one grey level (up to a fifth, against a few percent),
    never by more: Pillow there costs 2 to 3 times torch's time."""
    torch = _torch()
    if box is not None and tuple(box) == (0, 0, image.shape[1], image.shape[0]):
        box = None
    if torch is None or box is not None or method != Image.Resampling.BILINEAR or image.shape[2] not in (3, 4):
        return pil_resize(image, width, height, box, method)
    single_threaded(torch)
    if not image.flags.writeable:  # torch warns about read-only arrays (Pillow's): copy
        image = image.copy()
    if not image.flags.c_contiguous:  # torch's uint8 kernel needs packed pixels (not planes, not reversed)
        image = np.ascontiguousarray(image)
    # the views are numpy's: torch's own view calls each release and retake the GIL
    source = torch.from_numpy(image.transpose(2, 0, 1)[None])
    out = np.empty((height, width, image.shape[2]), np.uint8)
    # F.interpolate's own op, told to write HWC: torch then packs its 4-byte working pixels into
    # rows, 100-150 us per 224x224 image faster than into the planes interpolate would return,
    # more than a CHW consumer (crop_mirror_normalize) pays to read HWC
    _antialiased_bilinear(torch)(
        source, [height, width], False, None, None, out=torch.from_numpy(out).permute(2, 0, 1)[None]
    )
    return out


def resize_linear(image: np.ndarray, width: int, height: int) -> np.ndarray | None:
    """``image`` (uint8 HWC, 3 or 4 channels) resized bilinearly without antialiasing (two taps per
    output pixel, centres at ``+0.5``) by torch's uint8 kernel, where torch is the backend: within
    one grey level of the matrix products of :func:`raypipe.operators.resample.resample` (from
    torch's fixed-point weights: on 0-3 % of pixels where both axes shrink, up to a fifth where one
    grows), at a twentieth of their time or less for a crop shrunk to 224x224. None where torch is
    not the backend or the image is another kind."""
    torch = _torch()
    if torch is None or image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] not in (3, 4):
        return None
    single_threaded(torch)
    if not image.flags.writeable:
        image = image.copy()
    if not image.flags.c_contiguous:
        image = np.ascontiguousarray(image)
    source = torch.from_numpy(image.transpose(2, 0, 1)[None])
    out = np.empty((height, width, image.shape[2]), np.uint8)
    torch.ops.aten.upsample_bilinear2d.out(
        source, [height, width], False, None, None, out=torch.from_numpy(out).permute(2, 0, 1)[None]
    )
    return out


@cache
def _antialiased_bilinear(torch: Any) -> Any:
    """The ATen op behind ``F.interpolate(..., mode="bilinear", antialias=True)``, writing into ``out``."""
    return torch.ops.aten._upsample_bilinear2d_aa.out


def pil_resize(
    image: np.ndarray,
    width: int,
    height: int,
    box: Box | None = None,
    method: Image.Resampling = Image.Resampling.BILINEAR,
) -> np.ndarray:
    """Pillow's antialiased resize of a uint8 HWC ``image`` with ``method`` (the GIL is released).

    Three channels go through one RGB image; any other count is resized channel by
    channel as greyscale, which is the same filter.
    """
    if image.shape[2] == 3:
        return np.asarray(Image.fromarray(image).resize((width, height), method, box=box))
    planes = [
        np.asarray(Image.fromarray(image[:, :, c]).resize((width, height), method, box=box))
        for c in range(image.shape[2])
    ]
    return np.stack(planes, axis=2)
