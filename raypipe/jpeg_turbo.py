"""Region-of-interest JPEG decoding through libjpeg-turbo's TurboJPEG 3 API (ctypes).

Pillow and simplejpeg decode whole images; DALI's CPU ``image_random_crop`` wins by
decoding only the crop (``jpeg_crop_scanline`` / ``jpeg_skip_scanlines``). TurboJPEG 3
exposes the same as ``tj3SetCroppingRegion``, plus DCT-domain scaling
(``tj3SetScalingFactor``), behind a small C API of opaque handles that ctypes calls
safely: errors come back as return codes, never as a ``longjmp`` through Python. The
decode call releases the GIL, so the CPU stage's threads decode in parallel.

The library comes from the ``turbojpeg`` wheel (it bundles libturbojpeg 3 and needs
no system package), from ``RAYPIPE_LIBTURBOJPEG``, or from the system when that is
version 3. :func:`available` is False when none loads or the library fails a
self-check at load; the decoders then use Pillow. ``RAYPIPE_TURBOJPEG=0`` turns it off.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import importlib.util
import io
import os
import threading
from dataclasses import dataclass
from functools import cache

import numpy as np

from .jpeg_header import JpegHeaderError, frame_size

_TJINIT_DECOMPRESS = 1
_TJPARAM_SUBSAMP, _TJPARAM_JPEGWIDTH, _TJPARAM_JPEGHEIGHT = 4, 5, 6
_TJPARAM_PRECISION, _TJPARAM_COLORSPACE, _TJPARAM_FASTDCT, _TJPARAM_LOSSLESS = 7, 8, 10, 15
_TJPF = {"RGB": 0, "BGR": 1, "RGBX": 2, "BGRX": 3}
_CHANNELS = {"RGB": 3, "BGR": 3, "RGBX": 4, "BGRX": 4}
_TJCS_RGB, _TJCS_YCBCR, _TJCS_GRAY = 0, 1, 2
# iMCU width and height per subsampling (TJSAMP_444, 422, 420, GRAY, 440, 411, 441)
_MCU_W = (8, 16, 16, 8, 8, 32, 8)
_MCU_H = (8, 8, 16, 8, 16, 8, 32)


class TurboJpegError(ValueError):
    """libjpeg-turbo could not decode the data (its message says why)."""


class _ScalingFactor(ctypes.Structure):
    _fields_ = [("num", ctypes.c_int), ("denom", ctypes.c_int)]


class _Region(ctypes.Structure):
    _fields_ = [("x", ctypes.c_int), ("y", ctypes.c_int), ("w", ctypes.c_int), ("h", ctypes.c_int)]


@dataclass(frozen=True)
class Header:
    """What a JPEG's header says: size, subsampling index, colour space, and whether the
    region decoder handles it (8-bit, lossy, RGB/YCbCr/grey)."""

    width: int
    height: int
    subsampling: int
    colorspace: int
    supported: bool

    def mcu_width(self, denom: int = 1) -> int:
        """The iMCU width at scale ``1/denom``: a region's ``x`` must be a multiple of it."""
        return -(-_MCU_W[self.subsampling] // denom) if 0 <= self.subsampling < len(_MCU_W) else 8


def scaled(size: int, denom: int) -> int:
    """``size`` after DCT scaling by ``1/denom`` (TurboJPEG's ``TJSCALED``: rounded up)."""
    return -(-size // denom)


def _candidates() -> list[str]:
    found = [os.environ["RAYPIPE_LIBTURBOJPEG"]] if os.environ.get("RAYPIPE_LIBTURBOJPEG") else []
    spec = importlib.util.find_spec("turbojpeg")
    if spec is not None and spec.origin:
        base = os.path.dirname(spec.origin)
        for folder in ("turbojpeg.libs", ".dylibs", os.path.join("turbojpeg", ".dylibs")):
            found += sorted(glob.glob(os.path.join(base, folder, "*turbojpeg*")))
    system = ctypes.util.find_library("turbojpeg")
    if system:
        found.append(system)
    return found


def _bind(path: str) -> ctypes.PyDLL | None:
    """The library at ``path`` with argument types set, or None when it lacks the TurboJPEG 3 API."""
    try:
        # The quick calls keep the GIL (PyDLL): under contention, retaking it after each of the
        # dozen calls per image costs more than the calls. Only the decode itself releases it.
        lib = ctypes.PyDLL(path)
        lib.tj3SetCroppingRegion  # noqa: B018  (TurboJPEG 3 or nothing)
        lib.decompress8 = ctypes.CDLL(path).tj3Decompress8
    except (OSError, AttributeError):
        return None
    handle, buf, size = ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t
    lib.tj3Init.argtypes, lib.tj3Init.restype = [ctypes.c_int], handle
    lib.tj3Destroy.argtypes, lib.tj3Destroy.restype = [handle], None
    lib.tj3DecompressHeader.argtypes, lib.tj3DecompressHeader.restype = [handle, buf, size], ctypes.c_int
    lib.tj3Get.argtypes, lib.tj3Get.restype = [handle, ctypes.c_int], ctypes.c_int
    lib.tj3Set.argtypes, lib.tj3Set.restype = [handle, ctypes.c_int, ctypes.c_int], ctypes.c_int
    lib.tj3SetScalingFactor.argtypes, lib.tj3SetScalingFactor.restype = [handle, _ScalingFactor], ctypes.c_int
    lib.tj3SetCroppingRegion.argtypes, lib.tj3SetCroppingRegion.restype = [handle, _Region], ctypes.c_int
    lib.decompress8.argtypes = [handle, buf, size, buf, ctypes.c_int, ctypes.c_int]
    lib.decompress8.restype = ctypes.c_int
    lib.tj3GetErrorStr.argtypes, lib.tj3GetErrorStr.restype = [handle], ctypes.c_char_p
    lib.tj3GetErrorCode.argtypes, lib.tj3GetErrorCode.restype = [handle], ctypes.c_int
    return lib


class _Decompressor:
    """One TurboJPEG decompressor handle, destroyed with this object."""

    live = 0  # handles not yet destroyed, for tests

    def __init__(self, lib: ctypes.CDLL):
        self.lib = lib
        self.headed: np.ndarray | None = None  # the data whose header the handle holds, not yet decoded
        self.ptr = lib.tj3Init(_TJINIT_DECOMPRESS)
        if not self.ptr:
            raise MemoryError("tj3Init failed")
        _Decompressor.live += 1

    def __del__(self) -> None:
        if getattr(self, "ptr", None):
            self.lib.tj3Destroy(self.ptr)
            self.ptr = None
            type(self).live -= 1


class _PerThread(threading.local):
    """A decompressor per thread (a handle is not thread-safe); it goes when its thread ends."""

    def __init__(self, lib: ctypes.CDLL):
        self.decompressor = _Decompressor(lib)


class TurboDecoder:
    """Header parsing and (region, scaled) decoding of 8-bit JPEGs into numpy arrays."""

    def __init__(self, lib: ctypes.CDLL, path: str):
        self._lib = lib
        self.path = path
        self._local = _PerThread(lib)

    def _ptr(self) -> int:
        return self._local.decompressor.ptr

    def _error(self, ptr: int, what: str) -> TurboJpegError:
        """The handle's error as a TurboJpegError; the thread gets a fresh handle, since one that
        failed may answer the next image with stale state."""
        message = (self._lib.tj3GetErrorStr(ptr) or b"unknown error").decode(errors="replace")
        self._local.decompressor = _Decompressor(self._lib)
        return TurboJpegError(f"{what}: {message}")

    def _read_header(self, data: np.ndarray) -> int:
        """Read ``data``'s header into this thread's handle and return the handle; checks the
        handle's size against the frame header's (:func:`~raypipe.jpeg_header.frame_size`): libjpeg
        accepts a stream of tables alone, and after some errors a handle answers with the previous
        image's header, so neither may reach a decode. A handle that has just read this same array's
        header (:meth:`header`, then :meth:`decode` of the same sample) is returned as it is, saving
        a second header parse and marker walk with the GIL held."""
        decompressor = self._local.decompressor
        if decompressor.headed is data:
            return decompressor.ptr
        try:
            expected = frame_size(data)
        except JpegHeaderError as exc:
            raise TurboJpegError(f"not a JPEG image with a frame header ({exc})") from None
        if expected is None:
            raise TurboJpegError("not a JPEG image with a frame header")
        lib = self._lib
        for _ in range(2):
            ptr = self._ptr()
            if lib.tj3DecompressHeader(ptr, data.ctypes.data, data.nbytes) != 0:
                raise self._error(ptr, "corrupt or truncated JPEG header")
            if (lib.tj3Get(ptr, _TJPARAM_JPEGWIDTH), lib.tj3Get(ptr, _TJPARAM_JPEGHEIGHT)) == expected:
                self._local.decompressor.headed = data
                return ptr
            self._local.decompressor = _Decompressor(lib)  # stale state: start afresh once
        raise TurboJpegError(f"libjpeg-turbo read a header that is not the frame header's {expected}")

    def header(self, data: np.ndarray | bytes) -> Header:
        """The header of the JPEG ``data``; TurboJpegError when it is not a readable JPEG header."""
        lib = self._lib
        array = np.frombuffer(data, np.uint8) if isinstance(data, (bytes, bytearray, memoryview)) else data
        ptr = self._read_header(array)
        get = lib.tj3Get
        colorspace = get(ptr, _TJPARAM_COLORSPACE)
        supported = (
            get(ptr, _TJPARAM_PRECISION) == 8
            and get(ptr, _TJPARAM_LOSSLESS) == 0
            and colorspace in (_TJCS_RGB, _TJCS_YCBCR, _TJCS_GRAY)
        )
        width, height = get(ptr, _TJPARAM_JPEGWIDTH), get(ptr, _TJPARAM_JPEGHEIGHT)
        return Header(width, height, get(ptr, _TJPARAM_SUBSAMP), colorspace, supported)

    def decode(
        self,
        data: np.ndarray,
        region: tuple[int, int, int, int] | None = None,
        denom: int = 1,
        pixel_format: str = "RGB",
        out: np.ndarray | None = None,
        fast_idct: bool = False,
    ) -> np.ndarray:
        """Decode the JPEG ``data`` scaled by ``1/denom`` (1, 2, 4, 8); ``fast_idct`` uses libjpeg's
        faster, less accurate integer IDCT (DALI's ``use_fast_idct``).

        ``region`` ``(x, y, w, h)`` is in scaled pixels, ``x`` a multiple of the scaled iMCU
        width (:meth:`Header.mcu_width`). Returns an ``h x w x channels`` uint8 array, written
        into ``out`` when given (C-contiguous rows of at least that size)."""
        lib = self._lib
        ptr = self._read_header(data)
        self._local.decompressor.headed = None  # decoding consumes the header: the next decode reads it again
        lib.tj3Set(ptr, _TJPARAM_FASTDCT, int(fast_idct))
        if lib.tj3SetScalingFactor(ptr, _ScalingFactor(1, denom)) != 0:
            raise self._error(ptr, f"scaling by 1/{denom}")
        if region is None:
            width = scaled(lib.tj3Get(ptr, _TJPARAM_JPEGWIDTH), denom)
            height = scaled(lib.tj3Get(ptr, _TJPARAM_JPEGHEIGHT), denom)
            region = (0, 0, width, height)
        x, y, width, height = region
        if lib.tj3SetCroppingRegion(ptr, _Region(x, y, width, height)) != 0:
            raise self._error(ptr, f"cropping region {region}")
        channels = _CHANNELS[pixel_format]
        shape = (height, width, channels)
        if out is None or out.size < height * width * channels:
            image = np.empty(shape, np.uint8)
        else:
            image = out.reshape(-1)[: height * width * channels].reshape(shape)
        if lib.decompress8(ptr, data.ctypes.data, data.nbytes, image.ctypes.data, 0, _TJPF[pixel_format]) != 0:
            error = self._error(ptr, "corrupt or truncated JPEG data")
            # a fatal error, or data that ends early (libjpeg only warns and fills in grey); other
            # warnings (such as extraneous bytes between markers) leave a decoded image, as in Pillow
            if lib.tj3GetErrorCode(ptr) != 0 or "Premature end" in str(error):
                raise error
        return image


def _self_check(decoder: TurboDecoder) -> bool:
    """True when ``decoder`` reads a known JPEG's header and pixels as Pillow does (the same
    libjpeg-turbo algorithms): guards against a library whose API constants differ."""
    from PIL import Image

    rng = np.random.default_rng(0)
    source = rng.integers(0, 256, (40, 56, 3), np.uint8)
    stream = io.BytesIO()
    Image.fromarray(source).save(stream, "JPEG", quality=90, subsampling=2)
    data = np.frombuffer(stream.getvalue(), np.uint8)
    reference = np.asarray(Image.open(io.BytesIO(stream.getvalue())).convert("RGB"))
    try:
        header = decoder.header(data)
        whole = decoder.decode(data)
        rows = decoder.decode(data, (0, 5, 56, 30))
    except (TurboJpegError, MemoryError):
        return False
    return (
        (header.width, header.height, header.subsampling) == (56, 40, 2)
        and np.array_equal(whole, reference)
        and np.array_equal(rows, reference[5:35])
    )


@cache
def decoder() -> TurboDecoder | None:
    """The process's region decoder, or None (no usable libturbojpeg 3, or turned off)."""
    if os.environ.get("RAYPIPE_TURBOJPEG", "1") == "0":
        return None
    for path in _candidates():
        lib = _bind(path)
        if lib is None:
            continue
        candidate = TurboDecoder(lib, path)
        if _self_check(candidate):
            return candidate
    return None


def available() -> bool:
    """True when region-of-interest decoding through libturbojpeg 3 is usable here."""
    return decoder() is not None
