"""Image decoders: ``decoders.image`` and the fused ``decoders.image_random_crop``.

On the host they decode with libjpeg-turbo (:mod:`.host_decode`: only the crop window
of a JPEG, DCT-scaled when it is at least twice the resize target; Pillow for other
formats; the GIL is released while decoding, so the CPU stage's threads run in parallel). On ``device="mixed"`` with a
GPU the decoded image goes to the GPU stage: where nvImageCodec is installed staging
defers the decode (a :class:`~raypipe.decode_plan.DecodePlan` with ``deferred``, passed
with each call), the CPU stage only reads the header and picks the crop window, and the
Mixed stage decodes the batch on the GPU (:meth:`_Decoder.decode_on_device`,
region-of-interest decode for the crop).
Deferred, the CPU stage takes a chunk of samples at once (:meth:`_Decoder.run_chunk`):
a marker walk per header (:mod:`raypipe.jpeg_header`) and one vectorised draw of the
chunk's windows, each the window :meth:`_Decoder.decode` would draw for its sample.
``on_error="skip"`` drops an undecodable sample and counts it instead of raising.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..decode_plan import HOST_DECODE, DecodePlan
from ..errors import ArgumentError, DecodeError
from ..exif import ExifOrientationWarning, orientation, tiff_orientation
from ..gpu_decode import DEFAULT_HW_LOAD
from ..jpeg_header import Frame, JpegHeaderError, read_frame
from ..kernels.launch import Packed
from ..operator import Operator, Schema, Skip, register
from ..types import DALIImageType
from .cast import parse_dtype
from .convert_norm import DECODER_DTYPES
from .crop_window import DRAWS, random_crop_window, random_crop_windows, window_arguments
from .host_decode import Source, decode, open_source, scaled_box

if TYPE_CHECKING:
    from ..gpu_decode import GpuImageDecoder

_DCT_SCALES = (8, 4, 2)

#: DALI decoder arguments that size buffers or split work between decoders: they change no pixel and
#: are validated (int: a byte or pixel count; float: a fraction); only ``hw_decoder_load`` has an effect
#: here, as the hardware decoder's share of each batch when decoding on the GPU. With them
#: ``jpeg_fancy_upsampling``: raypipe always upsamples JPEG chroma the "fancy" way (libjpeg-turbo's on
#: the host, nvImageCodec's ``fancy_upsampling=1`` on the GPU), which is what DALI's CPU decoders give
#: either way and its mixed decoders give with ``True``.
MEMORY_HINTS: dict[str, type] = {
    "jpeg_fancy_upsampling": bool,
    "device_memory_padding": int,
    "host_memory_padding": int,
    "device_memory_padding_jpeg2k": int,
    "host_memory_padding_jpeg2k": int,
    "preallocate_width_hint": int,
    "preallocate_height_hint": int,
    "hybrid_huffman_threshold": int,
    "hw_decoder_load": float,
    "affine": bool,
    "memory_stats": bool,
    "split_stages": bool,  # deprecated in DALI, no effect there either
    "use_chunk_allocator": bool,  # deprecated in DALI, no effect there either
}

#: ``decoders.image``'s cache of decoded images (DALI's mixed decoder keeps decoded samples by key
#: in GPU memory): hints that change no pixel, validated; ``cache_type`` is one of :data:`CACHE_TYPES`.
CACHE_HINTS: dict[str, type] = {
    "cache_size": int,
    "cache_threshold": int,
    "cache_type": str,
    "cache_debug": bool,
    "cache_batch_copy": bool,
}
CACHE_TYPES = ("", "threshold", "largest")


@dataclass(frozen=True)
class EncodedImage:
    """What the CPU stage hands the Mixed stage when decoding is deferred to the GPU: the encoded
    bytes, the image's size from its header, the window to decode (None: all of it) and, where the
    CPU stage made it, nvImageCodec's code stream for that window
    (:func:`raypipe.gpu_decode.code_stream_maker`; it stays in the process: a copy sent elsewhere,
    from a CPU helper say, goes without it)."""

    data: np.ndarray
    width: int
    height: int
    window: tuple[int, int, int, int] | None = None
    code_stream: Any = field(default=None, compare=False, repr=False)

    def __reduce__(self) -> tuple:
        return (EncodedImage, (self.data, self.width, self.height, self.window))

    def with_code_stream(self, make: Callable[[np.ndarray, tuple[int, int, int, int] | None], Any]) -> EncodedImage:
        """This image with the code stream ``make(data, window)`` gives."""
        return EncodedImage(self.data, self.width, self.height, self.window, make(self.data, self.window))

    @property
    def out_size(self) -> tuple[int, int]:
        """``(width, height)`` of the decoded result."""
        return (self.window[2], self.window[3]) if self.window is not None else (self.width, self.height)


class _Decoder(Operator):
    def _configure_common(
        self,
        output_type: DALIImageType,
        on_error: str,
        use_fast_idct: bool,
        adjust_orientation: bool | None,
        hints: dict[str, Any],
        allowed: dict[str, type] = MEMORY_HINTS,
    ) -> None:
        self.dtype = _decoder_dtype(self.schema.name, hints.pop("dtype", None))
        _check_hints(self.schema.name, hints, allowed)
        # the share of each batch for the GPU's hardware JPEG decoder, as DALI's (the other hints size buffers)
        self.hw_decoder_load = float(hints.get("hw_decoder_load", DEFAULT_HW_LOAD))
        _check_orientation(self.schema.name, adjust_orientation)
        # left at DALI's default (which applies EXIF orientation), say so on the first image it affects
        self._watch_orientation = adjust_orientation is None
        self._warned = threading.Lock()
        if output_type not in (DALIImageType.RGB, DALIImageType.BGR, DALIImageType.GRAY):
            hint = (
                " (decode to types.RGB, then fn.color_space_conversion(image_type=types.RGB, output_type=types.YCbCr))"
                if output_type is DALIImageType.YCbCr
                else ""
            )
            raise ArgumentError(f"{self.schema.name}: output_type must be types.RGB, BGR or GRAY{hint}")
        if on_error not in ("raise", "skip"):
            raise ArgumentError(f"{self.schema.name}: on_error must be 'raise' or 'skip', got {on_error!r}")
        self.output_type = output_type
        self.on_error = on_error
        self.use_fast_idct = bool(use_fast_idct)

    def output_layout(self, input_layouts):
        return "HWC"

    def then(self) -> tuple[str, dict[str, Any]] | None:
        """A ``dtype`` other than uint8: the image converted over the type's range after decoding."""
        return None if self.dtype == np.uint8 else ("_convert_norm", {"dtype": self.dtype})

    def run_sample(self, inputs, args, ctx, plan: DecodePlan = HOST_DECODE):
        """One sample as staging ``plan`` places this decoder: decoded on the host, or, deferred
        to the Mixed stage, only its header read (an :class:`EncodedImage`)."""
        if self._watch_orientation:
            self._check_exif(inputs[0], ctx)
        try:
            return self.encoded(inputs[0], ctx) if plan.deferred else self.decode(inputs[0], ctx, plan)
        except DecodeError as exc:
            if self.on_error == "skip":
                return Skip(str(exc))
            raise

    def run_chunk(self, inputs, args, ctxs, plan: DecodePlan = HOST_DECODE):
        """:meth:`run_sample` of a chunk of samples: deferred, each sample's header, then the chunk's
        windows at once (:meth:`windows`). A sample that fails raises; the CPU stage then runs the
        chunk sample by sample, which names or skips it."""
        datas = inputs[0]
        if not plan.deferred:
            return [self.run_sample([data], {}, ctx, plan) for data, ctx in zip(datas, ctxs)]
        frames = [self._frame(data) for data in datas]
        if self._watch_orientation:
            for frame, ctx in zip(frames, ctxs):
                if frame.exif is not None:
                    self._warn_orientation(tiff_orientation(frame.exif), ctx)
        windows = self.windows([(frame.width, frame.height) for frame in frames], ctxs)
        return [
            EncodedImage(data, frame.width, frame.height, window) for data, frame, window in zip(datas, frames, windows)
        ]

    def _check_exif(self, data: np.ndarray, ctx) -> None:
        """Warn once when a JPEG carries an EXIF orientation that DALI's default would apply."""
        self._warn_orientation(orientation(data), ctx)

    def _warn_orientation(self, value: int, ctx) -> None:
        """Warn once for a sample whose EXIF orientation is ``value``, unless it is 1 (as stored)."""
        if value == 1:
            return
        with self._warned:
            if not self._watch_orientation:
                return
            self._watch_orientation = False
        warnings.warn(
            f"{self.schema.name}: sample {ctx.sample_index} is a JPEG with EXIF orientation {value}; raypipe decodes "
            "images as stored, where DALI's default (adjust_orientation=True) would rotate or flip it. "
            "Pass adjust_orientation=False to decode as stored without this warning",
            ExifOrientationWarning,
            stacklevel=3,
        )

    def encoded(self, data: np.ndarray, ctx) -> EncodedImage:
        """The header's size and this sample's window, drawn exactly as :meth:`decode` draws it."""
        width, height, _ = self._frame(data)
        return EncodedImage(data, width, height, self.window(width, height, ctx))

    def _frame(self, data: np.ndarray) -> Frame:
        """The size (and EXIF block) from the header: a JPEG's frame header, found by a marker walk
        without libjpeg (the GPU decoder reads the rest), else Pillow's reading (other formats)."""
        try:
            frame = read_frame(data)
        except JpegHeaderError as exc:
            raise DecodeError(str(exc)) from None
        if frame is None:
            source = open_source(data, self.output_type)
            return Frame(source.width, source.height, None)
        return frame

    def window(self, width: int, height: int, ctx) -> tuple[int, int, int, int] | None:
        """The window ``(x, y, w, h)`` to decode of this sample's ``width`` x ``height`` image; None:
        all of it."""
        return None

    def windows(self, sizes: list[tuple[int, int]], ctxs) -> list[tuple[int, int, int, int] | None]:
        """:meth:`window` of many samples, ``sizes`` their ``(width, height)``."""
        return [None] * len(ctxs)

    def decode_on_device(
        self, decoder: GpuImageDecoder, encoded: list[EncodedImage], stream: Any
    ) -> Packed | list[Any]:
        """Decode a batch of :meth:`encoded` samples with ``decoder`` (a
        :class:`~raypipe.gpu_decode.GpuImageDecoder`) on the cupy ``stream``, into one buffer for the
        batch: the whole batch as one :class:`~raypipe.kernels.launch.Packed` batch of HWC images
        when every sample decoded into it (no call per sample), else per sample an HWC device array
        in ``output_type`` or a :class:`DecodeError` for the executor to raise or skip."""
        gray = self.output_type is DALIImageType.GRAY
        decoded = decoder.decode(
            [e.data for e in encoded],
            [e.window for e in encoded],
            gray,
            stream,
            [e.out_size for e in encoded],
            [e.code_stream for e in encoded],
        )
        if isinstance(decoded, Packed):
            if self.output_type is not DALIImageType.BGR:
                return decoded
            decoded = decoded.samples()
        with nullcontext() if stream is None else stream:
            return [self._device_result(image, e) for image, e in zip(decoded, encoded)]

    def _device_result(self, image: Any, encoded: EncodedImage) -> Any:
        if image is None:
            return DecodeError("corrupt or unsupported image data (the GPU decoder could not decode it)")
        width, height = encoded.out_size
        whole = image.shape[:2] == (encoded.height, encoded.width)
        if encoded.window is not None and whole and (width, height) != (encoded.width, encoded.height):
            x, y = encoded.window[:2]
            image = image[y : y + height, x : x + width]  # a backend that ignored the region
        if image.shape[:2] != (height, width):
            return DecodeError(f"the GPU decoder produced {image.shape[1]}x{image.shape[0]}, expected {width}x{height}")
        if self.output_type is DALIImageType.BGR:
            image = image[:, :, ::-1].copy()
        return image


@register
class ImageDecoder(_Decoder):
    """Decode a whole image to HWC uint8. Besides the memory hints it takes DALI's cache arguments
    (:data:`CACHE_HINTS`), validated: every sample is decoded."""

    schema = Schema("decoders.image", devices=("cpu", "mixed"))

    def configure(
        self,
        output_type: DALIImageType = DALIImageType.RGB,
        on_error: str = "raise",
        use_fast_idct: bool = False,
        adjust_orientation: bool | None = None,
        **hints: Any,
    ) -> None:
        self._configure_common(
            output_type, on_error, use_fast_idct, adjust_orientation, hints, MEMORY_HINTS | CACHE_HINTS
        )

    def decode(self, data: np.ndarray, ctx, plan: DecodePlan = HOST_DECODE) -> np.ndarray:
        """The whole image (no decoder plan changes it)."""
        return decode(open_source(data, self.output_type), self.output_type, fast_idct=self.use_fast_idct)


@register
class ImageRandomCropDecoder(_Decoder):
    """Decode a random window of an image (area and aspect ratio sampled per sample).

    The window is chosen from the JPEG header alone. When the graph resizes the
    result to a fixed size (the staged graph's :class:`~raypipe.decode_plan.DecodePlan`
    ``target_size``, passed with each call), the decoder asks libjpeg for DCT-domain
    downscaling by 1/2, 1/4 or 1/8 as long as the window stays at least that size,
    which skips most of the decode work on large images. When that resize runs on the
    host too (``resize_on_host``), the decoder does it inside Pillow (the same filter,
    the same pixels) and the resize operator passes the result through, saving two
    copies of every crop.
    """

    schema = Schema("decoders.image_random_crop", devices=("cpu", "mixed"))
    takes_size_hint = True  # staging plans a target size for it (see raypipe.decode_plan)

    def configure(
        self,
        output_type: DALIImageType = DALIImageType.RGB,
        random_area=(0.08, 1.0),
        random_aspect_ratio=(3 / 4, 4 / 3),
        num_attempts: int = 10,
        on_error: str = "raise",
        use_fast_idct: bool = False,
        adjust_orientation: bool | None = None,
        **hints: Any,
    ) -> None:
        self._configure_common(output_type, on_error, use_fast_idct, adjust_orientation, hints)
        self.random_area, self.random_aspect_ratio, self.num_attempts = window_arguments(
            self.schema.name, random_area, random_aspect_ratio, num_attempts
        )

    def window(self, width: int, height: int, ctx) -> tuple[int, int, int, int]:
        """The crop window ``(x, y, w, h)`` for this sample of a ``width`` x ``height`` image."""
        draws = self.draws([ctx], DRAWS * self.num_attempts).reshape(DRAWS, self.num_attempts)
        return random_crop_window(width, height, self.random_area, self.random_aspect_ratio, draws)

    def windows(self, sizes: list[tuple[int, int]], ctxs) -> list[tuple[int, int, int, int]]:
        """:meth:`window` of many samples at once: one draw, one vectorised window computation."""
        draws = self.draws(ctxs, DRAWS * self.num_attempts).reshape(DRAWS, self.num_attempts, len(ctxs))
        rows = random_crop_windows(
            np.array(sizes, np.int64).reshape(-1, 2).T, self.random_area, self.random_aspect_ratio, draws
        )
        return list(map(tuple, rows.tolist()))

    def decode(self, data: np.ndarray, ctx, plan: DecodePlan = HOST_DECODE) -> np.ndarray:
        """This sample's window, DCT-scaled towards ``plan.target_size`` and resized to it when
        ``plan.resize_on_host``."""
        source = open_source(data, self.output_type)
        window = self.window(source.width, source.height, ctx)
        denom = self._dct_scale(source, window[2], window[3], plan.target_size)
        resize_to = plan.target_size if plan.resize_on_host else None
        box = scaled_box(source, window, denom)
        return decode(source, self.output_type, box, denom, resize_to, self.use_fast_idct)

    def _dct_scale(self, source: Source, w: int, h: int, target_size: tuple[int, int] | None) -> int:
        """The largest DCT scale denominator (8, 4 or 2) that keeps the ``w`` x ``h`` window at least
        ``target_size``, or 1."""
        if target_size is None or not source.is_jpeg:
            return 1
        tw, th = target_size
        for scale in _DCT_SCALES:
            if w // scale >= tw and h // scale >= th:
                return scale
        return 1


def _decoder_dtype(op: str, dtype: Any) -> np.dtype:
    """A decoder's ``dtype``: uint8 (None: the default) or another type DALI's decoders give."""
    if dtype is None:
        return np.dtype(np.uint8)
    parsed = parse_dtype(op, "dtype", dtype)
    if parsed not in DECODER_DTYPES:
        names = ", ".join(t.name for t in DECODER_DTYPES)
        raise ArgumentError(f"{op}: dtype must be one of {names} (float32: types.FLOAT), as DALI's, got {parsed}")
    return parsed


def _check_hints(op: str, hints: dict[str, Any], allowed: dict[str, type]) -> None:
    unknown = sorted(set(hints) - set(allowed))
    if unknown:
        raise ArgumentError(f"{op}: unexpected argument(s) {', '.join(unknown)}")
    for name, value in hints.items():
        kind = allowed[name]
        if kind is str:
            if value not in CACHE_TYPES:
                raise ArgumentError(f"{op}: {name} must be one of {CACHE_TYPES}, got {value!r}")
            continue
        if kind is bool:
            ok = isinstance(value, (bool, np.bool_))
        elif kind is int:
            ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 0
        else:
            ok = isinstance(value, (int, float, np.number)) and not isinstance(value, bool) and 0 <= value <= 1
        if not ok:
            expected = {bool: "a bool", int: "a non-negative int", float: "a number in [0, 1]"}[kind]
            raise ArgumentError(f"{op}: {name} must be {expected}, got {value!r}")


def _check_orientation(op: str, adjust_orientation: Any) -> None:
    """DALI applies a JPEG's EXIF orientation by default; raypipe decodes the pixels as stored, so
    only ``adjust_orientation=False`` can be honoured (None, the default, warns on the first image
    it changes anything for)."""
    if adjust_orientation is not None and not isinstance(adjust_orientation, (bool, np.bool_)):
        raise ArgumentError(f"{op}: adjust_orientation must be a bool, got {adjust_orientation!r}")
    if adjust_orientation:
        raise ArgumentError(
            f"{op}: adjust_orientation=True is not supported: images are decoded as stored, "
            "without their EXIF orientation (pass adjust_orientation=False or leave it out)"
        )
