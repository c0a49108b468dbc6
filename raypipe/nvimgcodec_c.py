"""nvImageCodec's C API through ctypes: a batch decoded into one buffer with two GIL hand-offs.

nvImageCodec's Python binding gives up and takes back the GIL several times per image of a batch
(making each output image, and for each sample inside ``Decoder.decode``). The Mixed stage shares
its process's GIL with the CPU and GPU stages' threads, so beside them each of those hand-offs
waits: on an H200 the profile of the recipe showed most of the Mixed stage's decode spent waiting
for the GIL inside ``Image.reuse`` and ``CodeStream.getImageInfo``. Through the C API the calls
per image (a code stream, its region, an output image) run with the GIL held (they are quick
library calls, no waiting inside), and a batch gives the GIL up twice: for the decode call and
for the wait for its host work.

It is the default where it loads (``RAYPIPE_NVIMGCODEC_API=python`` chooses the binding): on an
H200 the Mixed stage's decoder decoded the recipe's crops at 17,132 img/s through it against
15,798 through the binding, the recipe in one process at 13,229 against 6,429 img/s (0.14 against
0.23 ms of host CPU per image), and served by a pipeline actor at 9,737 against 9,153.
``GpuImageDecoder`` checks at start-up that this module's own nvImageCodec instance (the
binding's is not reachable from Python) decodes with each backend alone and decodes a batch as
the binding does, and decodes through the binding, with one warning, where it does not.
``benchmarks/nvimgcodec_backends.py`` times each API per backend, and with ``--conditions`` under
the Mixed stage's conditions.
On nvImageCodec's CPU backend both APIs give bit-identical images. This module's instance reports
nvImageCodec's own messages on stderr as the binding's does (``PYNVIMGCODEC_VERBOSITY``, default 2:
warnings and errors; 3 adds the decoders each instance registers, the hardware decoder or why not).

The structures follow nvImageCodec 0.9's ``nvimgcodec.h`` (their sizes are checked against it in
the tests); a library that reports another version is not used (:func:`problem` says why), and
raypipe then decodes through the Python binding.
"""

from __future__ import annotations

import ctypes
import functools
import os
import threading
from collections.abc import Callable, Sequence

import numpy as np

from .errors import ArgumentError

#: ``c`` (the default, where the C library loads) or ``python``: which nvImageCodec API decodes
#: batches into their buffer.
API_ENV = "RAYPIPE_NVIMGCODEC_API"
#: The nvImageCodec versions (major, minor) whose structure layouts this module matches.
SUPPORTED = ((0, 9),)

_VOID = ctypes.c_void_p
_HEADER = [("struct_type", ctypes.c_int), ("struct_size", ctypes.c_size_t), ("struct_next", _VOID)]


class _Properties(ctypes.Structure):
    _fields_ = [*_HEADER, ("version", ctypes.c_uint32), ("cudart_version", ctypes.c_uint32)]


class _Orientation(ctypes.Structure):
    _fields_ = [*_HEADER, ("rotated", ctypes.c_int), ("flip_x", ctypes.c_int), ("flip_y", ctypes.c_int)]


class _Plane(ctypes.Structure):
    _fields_ = [
        *_HEADER,
        ("width", ctypes.c_uint32),
        ("height", ctypes.c_uint32),
        ("row_stride", ctypes.c_size_t),
        ("num_channels", ctypes.c_uint32),
        ("sample_type", ctypes.c_int),
        ("precision", ctypes.c_uint8),
    ]


class _ImageInfo(ctypes.Structure):
    _fields_ = [
        *_HEADER,
        ("codec_name", ctypes.c_char * 256),
        ("color_spec", ctypes.c_int),
        ("chroma_subsampling", ctypes.c_int),
        ("sample_format", ctypes.c_int),
        ("orientation", _Orientation),
        ("num_planes", ctypes.c_uint32),
        ("plane_info", _Plane * 32),
        ("buffer", _VOID),
        ("buffer_kind", ctypes.c_int),
        ("cuda_stream", _VOID),
    ]


class _OutOfBounds(ctypes.Structure):
    _fields_ = [("value", ctypes.c_uint32), ("type", ctypes.c_int)]


class _Region(ctypes.Structure):
    _fields_ = [
        *_HEADER,
        ("ndim", ctypes.c_int),
        ("start", ctypes.c_int * 5),
        ("end", ctypes.c_int * 5),
        ("out_of_bounds_policy", ctypes.c_int),
        ("out_of_bounds_samples", _OutOfBounds * 5),
    ]


class _View(ctypes.Structure):
    _fields_ = [*_HEADER, ("image_idx", ctypes.c_size_t), ("region", _Region), ("bitstream_offset", ctypes.c_size_t)]


class _CreateInfo(ctypes.Structure):
    _fields_ = [
        *_HEADER,
        ("load_builtin_modules", ctypes.c_int),
        ("load_extension_modules", ctypes.c_int),
        ("extension_modules_path", ctypes.c_char_p),
        ("create_debug_messenger", ctypes.c_int),
        ("debug_messenger_desc", _VOID),
        ("message_severity", ctypes.c_uint32),
        ("message_category", ctypes.c_uint32),
    ]


class _BackendParams(ctypes.Structure):
    _fields_ = [*_HEADER, ("load_hint", ctypes.c_float), ("load_hint_policy", ctypes.c_int)]


class _Backend(ctypes.Structure):
    _fields_ = [*_HEADER, ("kind", ctypes.c_int), ("params", _BackendParams)]


class _ExecutionParams(ctypes.Structure):
    _fields_ = [
        *_HEADER,
        ("device_allocator", _VOID),
        ("pinned_allocator", _VOID),
        ("max_num_cpu_threads", ctypes.c_int),
        ("executor", _VOID),
        ("device_id", ctypes.c_int),
        ("pre_init", ctypes.c_int),
        ("skip_pre_sync", ctypes.c_int),
        ("num_backends", ctypes.c_int),
        ("backends", ctypes.POINTER(_Backend)),
    ]


class _DecodeParams(ctypes.Structure):
    _fields_ = [*_HEADER, ("apply_exif_orientation", ctypes.c_int)]


#: nvimgcodecStructureType_t values of the structures above.
_TYPES = {
    _Properties: 1,
    _CreateInfo: 2,
    _DecodeParams: 5,
    _Orientation: 7,
    _Region: 8,
    _View: 9,
    _ImageInfo: 11,
    _Plane: 12,
    _Backend: 17,
    _BackendParams: 29,
    _ExecutionParams: 30,
}
#: The structures' sizes in nvImageCodec 0.9's header (x86_64), which the tests compare with ctypes'.
HEADER_SIZES = {"ImageInfo": 2160, "CodeStreamView": 152, "ExecutionParams": 80, "ImagePlaneInfo": 56, "Region": 112}

#: The binding's verbosity variable, read here too: 0 silent, 1 errors, 2 (its default) warnings,
#: 3 information (the decoders created), 4 debug (which backend can decode each image), 5 trace.
VERBOSITY_ENV = "PYNVIMGCODEC_VERBOSITY"
_DEFAULT_VERBOSITY = 2
_CATEGORY_ALL = 0x0FFFFFFF
#: nvimgcodecDebugMessageSeverity_t of each verbosity level and those above it.
_SEVERITIES = ((1, 0x00100000 | 0x00010000), (2, 0x00001000), (3, 0x00000100), (4, 0x00000010), (5, 0x00000001))

#: nvimgcodecBackendKind_t by the names raypipe's device check uses (``cpu`` for the CPU backend).
BACKEND_KINDS = {"cpu": 1, "gpu": 3, "hw_gpu": 4}
_LOAD_HINT_FIXED = 2
DEVICE_CPU_ONLY = -99999
_STRIDED_DEVICE, _STRIDED_HOST = 1, 2
_UINT8 = 0x0802
_SRGB, _GRAY = 1, 2
_SAMPLING_NONE, _SAMPLING_GRAY = 0, 7
_I_RGB, _I_Y = 8, 4
_SUCCESS = 1

_INFO = np.dtype(_ImageInfo)


def _header(struct: ctypes.Structure) -> ctypes.Structure:
    """``struct`` with its type and size filled in, as every nvImageCodec structure needs."""
    struct.struct_type = _TYPES[type(struct)]
    struct.struct_size = ctypes.sizeof(struct)
    struct.struct_next = None
    return struct


class CApiError(RuntimeError):
    """An nvImageCodec C call returned an error status (named with the call)."""


class _Library:
    """libnvimgcodec loaded twice over: ``held`` calls keep the GIL (ctypes.PyDLL), ``free`` calls
    give it up for their duration (ctypes.CDLL); one library instance for the process."""

    def __init__(self, path: str):
        self.held = ctypes.PyDLL(path)
        self.free = ctypes.CDLL(path)
        for lib in (self.held, self.free):
            for name in _FUNCTIONS:
                getattr(lib, name).restype = ctypes.c_int
            for name, types in _ARGTYPES.items():  # typed where called per sample: plain ints for pointers
                getattr(lib, name).argtypes = types
        properties = _header(_Properties())
        self._check("nvimgcodecGetProperties", self.held.nvimgcodecGetProperties(ctypes.byref(properties)))
        self.version = (properties.version // 1000, properties.version % 1000 // 100, properties.version % 100)
        self._instance: _VOID | None = None
        self._lock = threading.Lock()

    @property
    def instance(self) -> int:
        """The process's nvImageCodec instance, created on first use with the built-in and
        extension modules and nvImageCodec's own messages on stderr, as the Python binding creates
        its own (:func:`verbosity`); it lives as long as the process."""
        with self._lock:
            if self._instance is None:
                info = _header(_CreateInfo())
                info.load_builtin_modules = 1
                info.load_extension_modules = 1
                severity = message_severity(verbosity())
                if severity:
                    info.create_debug_messenger = 1
                    info.message_severity = severity
                    info.message_category = _CATEGORY_ALL
                instance = _VOID()
                status = self.free.nvimgcodecInstanceCreate(ctypes.byref(instance), ctypes.byref(info))
                self._check("nvimgcodecInstanceCreate", status)
                self._instance = instance
            return self._instance.value

    @staticmethod
    def _check(call: str, status: int) -> None:
        if status != 0:
            raise CApiError(f"{call} failed with nvimgcodecStatus_t {status}")


#: The C functions this module calls (each returns an nvimgcodecStatus_t).
_FUNCTIONS = (
    "nvimgcodecGetProperties",
    "nvimgcodecInstanceCreate",
    "nvimgcodecCodeStreamCreateFromHostMem",
    "nvimgcodecCodeStreamGetSubCodeStream",
    "nvimgcodecCodeStreamDestroy",
    "nvimgcodecDecoderCreate",
    "nvimgcodecDecoderDestroy",
    "nvimgcodecDecoderDecode",
    "nvimgcodecFutureWaitForAll",
    "nvimgcodecFutureGetProcessingStatus",
    "nvimgcodecFutureDestroy",
    "nvimgcodecImageCreate",
    "nvimgcodecImageDestroy",
)


_POINTER_OUT = ctypes.POINTER(ctypes.c_void_p)
#: Argument types of the calls made per sample (a code stream, its region, its release).
_ARGTYPES = {
    "nvimgcodecCodeStreamCreateFromHostMem": [
        ctypes.c_void_p,
        _POINTER_OUT,
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_void_p,
    ],
    "nvimgcodecCodeStreamGetSubCodeStream": [ctypes.c_void_p, _POINTER_OUT, ctypes.c_void_p],
    "nvimgcodecCodeStreamDestroy": [ctypes.c_void_p],
}


def verbosity() -> int:
    """``PYNVIMGCODEC_VERBOSITY`` as nvImageCodec's Python binding reads it, within 0-5: default 2,
    and the default for a value that is not a whole number, as there."""
    try:
        value = int(os.environ.get(VERBOSITY_ENV, _DEFAULT_VERBOSITY))
    except ValueError:
        return _DEFAULT_VERBOSITY
    return max(0, min(value, 5))


def message_severity(level: int) -> int:
    """The nvImageCodec message severities a verbosity ``level`` shows (0: none)."""
    severity = 0
    for threshold, bits in _SEVERITIES:
        if level >= threshold:
            severity |= bits
    return severity


@functools.cache
def _loaded() -> tuple[_Library | None, str | None]:
    try:
        from nvidia import nvimgcodec
    except ImportError as exc:
        return None, f"nvImageCodec is not installed ({exc})"
    path = os.path.join(os.path.dirname(nvimgcodec.__file__), "libnvimgcodec.so.0")
    try:
        library = _Library(path)
    except (OSError, AttributeError, CApiError) as exc:
        return None, f"its C library does not load from {path}: {exc}"
    if library.version[:2] not in SUPPORTED:
        return None, f"nvImageCodec {'.'.join(map(str, library.version))} (raypipe's C structures match 0.9)"
    return library, None


def library() -> _Library | None:
    """The loaded C library, or None where it is missing or another version (:func:`problem`)."""
    return _loaded()[0]


def problem() -> str | None:
    """Why the C API is not used here, or None when it is: the binding was chosen
    (``RAYPIPE_NVIMGCODEC_API=python``), no nvImageCodec, or a version whose structures differ.
    Raises :class:`ArgumentError` for a bad value."""
    choice = os.environ.get(API_ENV, "").strip().lower()
    if choice not in ("", "c", "python"):
        raise ArgumentError(f"{API_ENV} must be c or python, got {choice!r}")
    if choice == "python":
        return f"{API_ENV}=python"
    return _loaded()[1]


def enabled() -> bool:
    """Whether decoders and code streams use the C API (:func:`problem` is None)."""
    return problem() is None


class CodeStream:
    """An nvImageCodec code stream over encoded bytes, cut to a region where given; keeps the bytes
    alive and destroys its handles when dropped (the region's first)."""

    __slots__ = ("_destroy", "_parent", "data", "handle")

    def __init__(self, library: _Library, parent: int, handle: int, data: np.ndarray):
        self._destroy = library.held.nvimgcodecCodeStreamDestroy
        self._parent = parent
        self.handle = handle
        self.data = data

    def __del__(self) -> None:
        if self.handle != self._parent:
            self._destroy(self.handle)
        self._destroy(self._parent)


def code_stream(data: np.ndarray, window: tuple[int, int, int, int] | None) -> CodeStream | None:
    """A :class:`CodeStream` over ``data`` (encoded bytes) cut to ``window`` (x, y, width, height;
    None: the whole image); None when nvImageCodec cannot parse it. Made with the GIL held."""
    return _code_stream_maker()(data, window)


@functools.cache
def _code_stream_maker() -> Callable[[np.ndarray, tuple[int, int, int, int] | None], CodeStream | None]:
    """:func:`code_stream`'s work, bound once to the library: its functions typed (plain ints for
    pointers), the instance's handle, and one region description per thread, refilled per call
    (nvImageCodec copies it into the sub code stream). A CPU stage makes one per sample."""
    library = library_or_raise()
    instance = library.instance
    create = library.held.nvimgcodecCodeStreamCreateFromHostMem
    cut = library.held.nvimgcodecCodeStreamGetSubCodeStream
    destroy = library.held.nvimgcodecCodeStreamDestroy
    views = threading.local()
    uint8 = np.dtype(np.uint8)
    addressof, c_char = ctypes.addressof, ctypes.c_char

    def view() -> tuple[_View, int]:
        made = _header(_View())
        _header(made.region)
        made.region.ndim = 2
        views.made = made, addressof(made)
        return views.made

    def make(data: np.ndarray, window: tuple[int, int, int, int] | None) -> CodeStream | None:
        flags = data.flags
        if data.dtype != uint8 or not flags.c_contiguous:
            data = np.ascontiguousarray(data, dtype=uint8)
            flags = data.flags
        # a writable array's address for half the cost of data.ctypes.data (from_buffer refuses 0 bytes)
        address = addressof(c_char.from_buffer(data)) if flags.writeable and data.size else data.ctypes.data
        parent = ctypes.c_void_p()
        if create(instance, parent, address, data.size, None) != 0 or not parent.value:
            return None
        if window is None:
            return CodeStream(library, parent.value, parent.value, data)
        region, view_address = getattr(views, "made", None) or view()
        x, y, w, h = window
        start, end = region.region.start, region.region.end
        start[0], start[1], end[0], end[1] = y, x, y + h, x + w
        sub = ctypes.c_void_p()
        if cut(parent, sub, view_address) != 0 or not sub.value:
            destroy(parent)
            return None
        return CodeStream(library, parent.value, sub.value, data)

    return make


class Decoder:
    """One nvImageCodec decoder through the C API, decoding batches of :class:`CodeStream` into
    given places of one buffer (:meth:`decode`). ``backends``: ``(name, load_hint)`` pairs, names
    from :data:`BACKEND_KINDS`; ``device_id`` :data:`DEVICE_CPU_ONLY` decodes on the host. Owns the
    decoder; :meth:`close` (or dropping it) releases it. Each batch's output images are made for it
    and destroyed after it, as the Python binding makes them."""

    def __init__(self, device_id: int, num_threads: int, backends: Sequence[tuple[str, float]], options: str):
        library = library_or_raise()
        self._library = library
        kinds = (_Backend * len(backends))()
        for slot, (name, load) in zip(kinds, backends):
            _header(slot)
            slot.kind = BACKEND_KINDS[name]
            _header(slot.params)
            slot.params.load_hint = float(load)
            slot.params.load_hint_policy = _LOAD_HINT_FIXED
        params = _header(_ExecutionParams())
        params.max_num_cpu_threads = int(num_threads)
        params.device_id = int(device_id)
        params.num_backends = len(backends)
        params.backends = kinds
        handle = _VOID()
        status = library.free.nvimgcodecDecoderCreate(
            _VOID(library.instance), ctypes.byref(handle), ctypes.byref(params), options.encode()
        )
        _Library._check("nvimgcodecDecoderCreate", status)
        self._handle: int | None = handle.value
        self._host = device_id == DEVICE_CPU_ONLY
        self._params = _header(_DecodeParams())
        self._infos = np.zeros(0, _INFO)
        #: Batches decoded so far (nvImageCodec's hardware decoder sizes itself at the first).
        self.batches = 0

    def decode(
        self, streams: Sequence[CodeStream], base: int, offsets: np.ndarray, sizes: np.ndarray, gray: bool, stream: int
    ) -> np.ndarray:
        """Decode ``streams`` into one buffer at address ``base``: image ``k`` HWC uint8 (RGB, or
        one channel when ``gray``), ``sizes[k]`` ``(width, height)``, from byte ``offsets[k]``,
        ordered on the CUDA ``stream`` (a handle; 0 on the host). Returns whether each decoded.
        Raises :class:`CApiError` when the library fails the call as a whole."""
        if self._handle is None:
            raise RuntimeError("this nvimgcodec_c.Decoder was closed")
        n = len(streams)
        infos = self._outputs(n)
        channels = 1 if gray else 3
        widths = np.asarray(sizes, dtype=np.int64).reshape(-1, 2)[:, 0]
        heights = np.asarray(sizes, dtype=np.int64).reshape(-1, 2)[:, 1]
        plane = infos["plane_info"][:, 0]
        plane["width"] = widths
        plane["height"] = heights
        plane["row_stride"] = widths * channels
        plane["num_channels"] = channels
        infos["color_spec"] = _GRAY if gray else _SRGB
        infos["chroma_subsampling"] = _SAMPLING_GRAY if gray else _SAMPLING_NONE
        infos["sample_format"] = _I_Y if gray else _I_RGB
        infos["buffer"] = np.asarray(offsets, dtype=np.uint64) + np.uint64(base)
        infos["cuda_stream"] = stream
        held = self._library.held
        instance = _VOID(self._library.instance)
        images = np.zeros(n, np.uint64)  # new images each batch, as the Python binding makes them
        first_info, first_image, size = self._infos.ctypes.data, images.ctypes.data, _INFO.itemsize
        create = held.nvimgcodecImageCreate
        try:
            for k in range(n):
                status = create(instance, _VOID(first_image + 8 * k), _VOID(first_info + size * k))
                if status != 0:
                    raise CApiError(f"nvimgcodecImageCreate failed with nvimgcodecStatus_t {status} for image {k}")
            return self._decode(streams, first_image, n)
        finally:
            destroy = held.nvimgcodecImageDestroy
            for handle in images.tolist():
                if handle:
                    destroy(_VOID(handle))

    def _decode(self, streams: Sequence[CodeStream], images: int, n: int) -> np.ndarray:
        """The decode call and the wait for its host work, both without the GIL; each image's success."""
        held, free = self._library.held, self._library.free
        handles = np.fromiter((s.handle for s in streams), np.uint64, n)
        self.batches += 1
        future = _VOID()
        status = free.nvimgcodecDecoderDecode(
            _VOID(self._handle),
            _VOID(handles.ctypes.data),
            _VOID(images),
            ctypes.c_int(n),
            ctypes.byref(self._params),
            ctypes.byref(future),
        )
        _Library._check("nvimgcodecDecoderDecode", status)
        try:
            _Library._check("nvimgcodecFutureWaitForAll", free.nvimgcodecFutureWaitForAll(future))
            statuses = np.zeros(n, np.uint32)
            count = ctypes.c_size_t(n)
            _Library._check(
                "nvimgcodecFutureGetProcessingStatus",
                held.nvimgcodecFutureGetProcessingStatus(future, _VOID(statuses.ctypes.data), ctypes.byref(count)),
            )
        finally:
            held.nvimgcodecFutureDestroy(future)
        return statuses == _SUCCESS

    def _outputs(self, n: int) -> np.ndarray:
        """The first ``n`` output image descriptions, grown as batches grow, their constant fields
        set once."""
        if len(self._infos) < n:
            infos = np.zeros(n, _INFO)
            template = _header(_ImageInfo())
            _header(template.orientation)
            template.num_planes = 1
            _header(template.plane_info[0])
            template.plane_info[0].sample_type = _UINT8
            template.buffer_kind = _STRIDED_HOST if self._host else _STRIDED_DEVICE
            infos[:] = np.frombuffer(bytes(template), _INFO)[0]
            self._infos = infos
        return self._infos[:n]

    def close(self) -> None:
        """Destroy the decoder (its threads, CUDA streams and nvJPEG state); idempotent."""
        if self._handle is None:
            return
        self._library.free.nvimgcodecDecoderDestroy(_VOID(self._handle))
        self._handle = None

    def __del__(self) -> None:
        if getattr(self, "_handle", None) is not None:
            self.close()


def library_or_raise() -> _Library:
    """The loaded C library; :class:`RuntimeError` saying why where there is none."""
    library, reason = _loaded()
    if library is None:
        raise RuntimeError(f"nvImageCodec's C API is not usable here: {reason}")
    return library
