"""Host image decoding for the decoders: libjpeg-turbo region decoding, Pillow otherwise.

JPEGs go through :mod:`raypipe.jpeg_turbo` when it is available: only the rows and
iMCU columns of the wanted window are decoded, optionally DCT-scaled, and a fused
resize reads the window in place (a Pillow image mapped on the decoded rows, no
copy). Every other format, grey output, and machines without libturbojpeg 3 use
Pillow. Both paths give the same pixels: the same libjpeg-turbo decode (the region
is widened by one iMCU on each side so that chroma upsampling sees the same
neighbours as a whole-image decode) and the same resize (:mod:`.host_resize`).
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
from PIL import Image, UnidentifiedImageError

from .. import jpeg_turbo
from ..errors import DecodeError
from ..types import DALIImageType
from . import host_resize

Box = tuple[int, int, int, int]


@dataclass
class Source:
    """An encoded image with its size from the header; ``turbo`` when libjpeg-turbo decodes it."""

    data: np.ndarray
    width: int
    height: int
    turbo: jpeg_turbo.Header | None = None
    pil: Image.Image | None = None

    @property
    def is_jpeg(self) -> bool:
        """True for JPEG data (the DCT can scale it)."""
        return self.turbo is not None or (self.pil is not None and self.pil.format == "JPEG")


def _pil_open(data: np.ndarray) -> Image.Image:
    try:
        return Image.open(io.BytesIO(data.tobytes() if isinstance(data, np.ndarray) else data))
    except UnidentifiedImageError:
        raise DecodeError("not a recognised image format") from None
    except (OSError, SyntaxError, ValueError) as exc:
        raise DecodeError(f"corrupt or truncated image header ({exc})") from None


def open_source(data: np.ndarray, output_type: DALIImageType) -> Source:
    """Read ``data``'s header: through libjpeg-turbo for colour output of JPEGs it handles,
    else through Pillow (which names what is wrong with a bad header)."""
    turbo = jpeg_turbo.decoder() if output_type is not DALIImageType.GRAY else None
    if turbo is not None and isinstance(data, np.ndarray) and data.dtype == np.uint8 and data.ndim == 1:
        try:
            header = turbo.header(data)
        except jpeg_turbo.TurboJpegError:
            header = None
        if header is not None and header.supported:
            return Source(data, header.width, header.height, turbo=header)
    image = _pil_open(data)
    return Source(data, image.size[0], image.size[1], pil=image)


def scaled_box(source: Source, window: Box, denom: int) -> Box:
    """The window ``(x, y, w, h)`` as an integer box ``(x0, y0, x1, y1)`` of the image DCT-scaled
    by ``1/denom`` (at least one pixel each way)."""
    x, y, w, h = window
    if denom == 1:
        return x, y, x + w, y + h
    sx = source.width / jpeg_turbo.scaled(source.width, denom)
    sy = source.height / jpeg_turbo.scaled(source.height, denom)
    x0, y0 = int(x / sx), int(y / sy)
    return x0, y0, max(x0 + 1, int((x + w) / sx)), max(y0 + 1, int((y + h) / sy))


def decode(
    source: Source,
    output_type: DALIImageType,
    box: Box | None = None,
    denom: int = 1,
    resize_to: tuple[int, int] | None = None,
    fast_idct: bool = False,
) -> np.ndarray:
    """Decode ``source`` (its ``box`` of the image scaled by ``1/denom``; all of it by default) to
    HWC uint8 in ``output_type``, resized to ``resize_to`` ``(width, height)`` with the antialiased
    bilinear filter when given. ``fast_idct`` applies to libjpeg-turbo only (Pillow has no such option)."""
    if source.turbo is not None:
        return _turbo_decode(source, output_type, box, denom, resize_to, fast_idct)
    return _pil_decode(source, output_type, box, denom, resize_to)


def _turbo_decode(
    source: Source,
    output_type: DALIImageType,
    box: Box | None,
    denom: int,
    resize_to: tuple[int, int] | None,
    fast_idct: bool,
) -> np.ndarray:
    turbo = jpeg_turbo.decoder()
    width, height = jpeg_turbo.scaled(source.width, denom), jpeg_turbo.scaled(source.height, denom)
    x0, y0, x1, y1 = box if box is not None else (0, 0, width, height)
    mcu = source.turbo.mcu_width(denom)
    left = max(0, (x0 // mcu - 1) * mcu) if x0 else 0
    right = min(width, x1 + mcu)
    bgr = output_type is DALIImageType.BGR
    region = (left, y0, right - left, y1 - y0)
    if resize_to is not None and host_resize.backend() == "pillow":
        window = (x0 - left, x1 - x0, y1 - y0)
        return _mapped_resize(turbo, source, region, window, denom, bgr, resize_to, fast_idct)
    image = _turbo_call(turbo, source, region, denom, "BGR" if bgr else "RGB", fast_idct=fast_idct)[
        :, x0 - left : x1 - left
    ]
    if resize_to is not None:
        return host_resize.resize(image, *resize_to)
    return np.ascontiguousarray(image)


def _mapped_resize(
    turbo: jpeg_turbo.TurboDecoder,
    source: Source,
    region: Box,
    window: tuple[int, int, int],
    denom: int,
    bgr: bool,
    resize_to: tuple[int, int],
    fast_idct: bool,
) -> np.ndarray:
    """Decode ``region`` as 4-byte pixels and resize its ``window`` ``(column, width, height)`` with
    Pillow, reading the decoded rows in place (Pillow maps 4-byte pixels without a copy)."""
    offset, width, height = window
    stride = region[2] * 4
    buffer = np.empty((region[3] + 1) * stride, np.uint8)  # a spare row: the mapped window may end past the region
    _turbo_call(turbo, source, region, denom, "BGRX" if bgr else "RGBX", buffer, fast_idct)
    mapped = Image.frombuffer("RGBX", (width, height), buffer[offset * 4 :], "raw", "RGBX", stride, 1)
    resized = mapped.resize(resize_to, Image.Resampling.BILINEAR) if mapped.size != resize_to else mapped
    return np.frombuffer(resized.tobytes("raw", "RGB"), np.uint8).reshape(resize_to[1], resize_to[0], 3)


def _turbo_call(
    turbo: jpeg_turbo.TurboDecoder,
    source: Source,
    region: Box,
    denom: int,
    pixel_format: str,
    out: np.ndarray | None = None,
    fast_idct: bool = False,
) -> np.ndarray:
    try:
        return turbo.decode(source.data, region, denom, pixel_format, out, fast_idct)
    except jpeg_turbo.TurboJpegError as exc:
        raise DecodeError(f"corrupt or truncated image data ({exc})") from None


def _pil_decode(
    source: Source, output_type: DALIImageType, box: Box | None, denom: int, resize_to: tuple[int, int] | None
) -> np.ndarray:
    image = source.pil
    mode = "L" if output_type is DALIImageType.GRAY else "RGB"
    if denom > 1 or mode == "L":  # these sizes make Pillow pick exactly 1/denom
        # a JPEG drafted to "L" decodes its luma (Y) channel, as DALI's gray output does; decoding to
        # RGB and converting would weigh R, G and B again and differ by up to ~20 levels
        image.draft(mode, (max(1, source.width // denom), max(1, source.height // denom)))
    try:
        image.load()
        if box is not None:
            image = image.crop(box)
    except (OSError, SyntaxError, ValueError) as exc:
        raise DecodeError(f"corrupt or truncated image data ({exc})") from None
    if image.mode != mode:
        image = image.convert(mode)
    array = np.asarray(image)
    if resize_to is not None and image.size != resize_to:
        array = host_resize.resize(array if array.ndim == 3 else array[:, :, None], *resize_to)
    if output_type is DALIImageType.GRAY:
        return array if array.ndim == 3 else array[:, :, None]
    if output_type is DALIImageType.BGR:
        return np.ascontiguousarray(array[:, :, ::-1])
    return array
