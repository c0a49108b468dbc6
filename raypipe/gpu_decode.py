"""Batched image decoding on the GPU through nvImageCodec (the ``gpu-cu12`` / ``gpu-cu13`` extras).

One :meth:`GpuImageDecoder.decode` call decodes a whole batch: nvImageCodec
spreads it over the hardware JPEG decoder where the GPU has one (A100, H100),
nvJPEG's CUDA decoder otherwise, and its CPU backends for formats the GPU
cannot decode. A region of interest per image (the random crop window) is
decoded without decoding the rest of the image where the backend allows.

Chroma is upsampled the way libjpeg-turbo does by default (``fancy_upsampling``),
so results stay close to Pillow's host decode: nvJPEG's IDCT and colour conversion
round differently, a few grey levels on most pixels.

nvImageCodec is imported lazily and only where a GPU is usable: without a GPU,
without the package, when it fails its start-up check (:mod:`raypipe.device_check`)
or with ``RAYPIPE_GPU_DECODE=0``, the CPU stage decodes on the host and the Mixed
stage copies the images to the device instead.

The Mixed stage's host work per batch is what limits a GPU pipeline (its thread shares the
process's GIL with the CPU and GPU stages), so each batch costs it as few Python calls as can be:
the code streams come made by the CPU stage (:func:`code_stream`, ``RAYPIPE_GPU_CODE_STREAMS``),
the outputs are described to nvImageCodec by plain interface records rather than array views, and a
batch that decodes entirely into its buffer goes on as one :class:`~raypipe.kernels.launch.Packed`
batch, with nothing made per image.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from . import device_check, nvimgcodec_c
from .errors import ArgumentError, DeviceError
from .kernels.launch import Packed

Window = tuple[int, int, int, int]  # x, y, width, height
DECODE_ENV = device_check.DECODE_ENV
#: How many nvImageCodec decoders share each batch (see :class:`GpuImageDecoder`).
DECODERS_ENV = "RAYPIPE_GPU_DECODERS"
#: ``0`` lets nvImageCodec allocate each decoded image instead of decoding a batch into one buffer.
INTO_ENV = "RAYPIPE_GPU_DECODE_INTO"
#: Who makes each sample's nvImageCodec code stream: ``cpu`` (the default), the CPU stage's thread
#: that read the sample; ``mixed``, the Mixed stage when it decodes the batch (see :func:`code_streams_in`).
CODE_STREAMS_ENV = "RAYPIPE_GPU_CODE_STREAMS"
#: nvImageCodec decoder options added to raypipe's own (``:fancy_upsampling=1``).
OPTIONS_ENV = "RAYPIPE_NVIMGCODEC_OPTIONS"
#: The share of each batch for the hardware JPEG decoder where the GPU has one (DALI's default).
DEFAULT_HW_LOAD = 0.65
#: Where each decoded image starts in a batch's buffer: a multiple of this many bytes (cupy's and
#: CUDA's allocation granularity, so every image is aligned as one allocated alone would be).
IMAGE_ALIGNMENT = 256
#: A batch's buffer is allocated in multiples of this many bytes (:func:`buffer_bytes`).
BUFFER_GRANULE = 8 << 20
#: A batch that needs more than the buffers so far gets this much more than it needs, and every
#: later batch that fits gets the same size: the pool hands the same blocks back batch after batch
#: instead of holding more blocks of slightly different sizes (batches of random crops vary by a
#: few per cent).
BUFFER_HEADROOM = 1.25


@functools.cache
def _nvimgcodec() -> ModuleType | None:
    try:
        from nvidia import nvimgcodec
    except ImportError:
        return None
    return nvimgcodec


def nvimgcodec_installed() -> bool:
    """Whether the nvImageCodec package imports here, GPU or not (its CPU backend decodes without one)."""
    return _nvimgcodec() is not None


def nvimgcodec_available(device_id: int = 0) -> bool:
    """True when nvImageCodec passed its start-up check on GPU ``device_id`` (it decodes a JPEG with a
    GPU backend, close to the host decode: :func:`raypipe.device_check.decoder`); False without a GPU,
    without the package or with ``RAYPIPE_GPU_DECODE=0``."""
    return device_check.decoder(device_id).ok


class GpuImageDecoder:
    """nvImageCodec decoders bound to one device; decode batches of encoded images into cupy arrays.

    Uses the GPU backends that passed the start-up check (the hardware JPEG decoder taking
    ``hw_load`` of each batch, as DALI's ``hw_decoder_load``; nvJPEG's CUDA decoder the rest) and
    nvImageCodec's CPU backend for formats no GPU backend reads. ``decoders`` nvImageCodec decoders
    (default ``RAYPIPE_GPU_DECODERS``, 1) each take an equal part of every batch at the same time,
    on a thread and CUDA stream of their own; ``RAYPIPE_NVIMGCODEC_OPTIONS`` adds nvImageCodec
    decoder options (for example ``nvjpeg_cuda_decoder:hybrid_huffman_threshold=0``, nvJPEG's
    Huffman decoding on the GPU for every image). Owns the library's decoder state (CUDA streams,
    nvJPEG handles, host threads); :meth:`close` releases it, and so does dropping the object.

    ``on_host=True`` decodes with nvImageCodec's CPU backend into numpy arrays instead (``stream``
    None): the same batch logic, buffers and code streams without a GPU, which is how this class
    is tested on machines that have none.

    ``batch_hint``: the pipeline's batch size. nvImageCodec 0.9's hardware decoder takes, in every
    batch, at most as many images as its decoder's first batch held (rounded up to a multiple of
    the GPU's JPEG engines) and hands the rest to nvJPEG's CUDA decoder, several times slower. A
    decoder whose first part of a batch is smaller than its part of ``batch_hint`` (a batch that
    lost skipped samples, a resume at an epoch's short last batch) first decodes that many copies
    of the start-up check's crop into a scratch buffer, once (:meth:`_prime`).
    """

    def __init__(
        self,
        device_id: int,
        num_threads: int = 0,
        hw_load: float = DEFAULT_HW_LOAD,
        decoders: int | None = None,
        *,
        on_host: bool = False,
        batch_hint: int | None = None,
    ):
        count = decoder_count() if decoders is None else decoders
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"GpuImageDecoder: decoders must be a positive int, got {count!r}")
        if batch_hint is not None and (
            isinstance(batch_hint, bool) or not isinstance(batch_hint, int) or batch_hint < 1
        ):
            raise ValueError(f"GpuImageDecoder: batch_hint must be a positive int or None, got {batch_hint!r}")
        nv = _nvimgcodec()
        if on_host:
            if nv is None:
                raise RuntimeError("nvImageCodec is not installed (pip install raypipe[gpu-cu12] or raypipe[gpu-cu13])")
            named = [("cpu", 1.0)]
            device_id, self.backends, self._cp, self._xp = nv.NVIMGCODEC_DEVICE_CPU_ONLY, ("cpu",), None, np
        else:
            check = device_check.decoder(device_id)
            if nv is None or not check.ok:
                raise RuntimeError(
                    f"GPU decoding is not usable here: {check.detail} "
                    "(pip install raypipe[gpu-cu12] or raypipe[gpu-cu13])"
                )
            import cupy

            self.backends = check.backends
            self._cp = self._xp = cupy
            # the hardware decoder takes hw_load of a batch when nvJPEG's CUDA decoder can take the rest,
            # else all of it (nvImageCodec would hand the rest to its CPU backend)
            hw_share = float(hw_load) if "gpu" in check.backends else 1.0
            named = [(name, hw_share if name == "hw_gpu" else 1.0) for name in check.backends] + [("cpu", 1.0)]
        backends = [
            nv.Backend(nv.BackendKind.CPU_ONLY) if name == "cpu" else device_check.backend_of(nv, name, share)
            for name, share in named
        ]
        self._nv = nv
        self._device_id = device_id
        options = " ".join([":fancy_upsampling=1", os.environ.get(OPTIONS_ENV, "").strip()]).strip()

        def binding_decoder() -> Any:
            return nv.Decoder(device_id=device_id, max_num_cpu_threads=num_threads, backends=backends, options=options)

        self._decoders = [binding_decoder() for _ in range(count)]
        #: Per API, which decoders have decoded their first batch (see ``batch_hint``).
        self._started = {"c": [False] * count, "python": [False] * count}
        self._part_hint = 0 if not batch_hint else -(-int(batch_hint) // count)
        self._streams = [None if on_host else self._cp.cuda.Stream(non_blocking=True) for _ in range(count - 1)]
        self._threads = ThreadPoolExecutor(count - 1, thread_name_prefix="raypipe-gpu-decode") if count > 1 else None
        color = nv.ColorSpec.SRGB if hasattr(nv.ColorSpec, "SRGB") else nv.ColorSpec.RGB  # RGB before 0.7
        #: Whether batches decode into one buffer raypipe allocates (see :meth:`decode`).
        self.into_given = hasattr(nv, "as_images") and decode_into_buffer()
        self._buffer_bytes = 0
        self._params = {
            False: nv.DecodeParams(apply_exif_orientation=False, color_spec=color, allow_any_depth=False),
            True: nv.DecodeParams(apply_exif_orientation=False, color_spec=nv.ColorSpec.GRAY, allow_any_depth=False),
        }
        #: Which nvImageCodec API decodes batches into their buffer: ``"c"`` or ``"python"``, and why.
        self.api, self.api_detail = "python", nvimgcodec_c.problem() or "the C API passed its check"
        self._c_decoders: list[nvimgcodec_c.Decoder] = []
        if self.into_given and nvimgcodec_c.enabled():
            failure = self._check_c_api(
                lambda: nvimgcodec_c.Decoder(device_id, num_threads, named, options), binding_decoder
            )
            if failure is None:
                self._c_decoders = [nvimgcodec_c.Decoder(device_id, num_threads, named, options) for _ in range(count)]
                self.api = "c"
            else:
                self._stop_c_api(failure)
        elif not self.into_given:
            self.api_detail = "nvImageCodec allocates each image (RAYPIPE_GPU_DECODE_INTO=0): the Python binding"

    def _check_c_api(self, make_c: Callable[[], nvimgcodec_c.Decoder], make_binding: Callable[[], Any]) -> str | None:
        """Why the C API cannot decode here (None when it can): its own nvImageCodec instance must
        decode with each of this decoder's backends alone (:func:`c_api_backend_problem`), and a
        decoder from ``make_c`` a batch into a buffer exactly as one from ``make_binding`` (the
        Python binding) decodes it into another. The batch (:func:`check_batch`) is textured, so
        that two different backends (the hardware decoder and nvJPEG's CUDA decoder, say) would
        hardly give the same pixels. Both decode on CUDA's default stream, which outlives every
        image (nvImageCodec frees an image it allocated on the stream it was decoded on: a
        destroyed stream there crashes the process).

        The check decodes with decoders of its own, dropped after it, never with those that decode
        batches: nvImageCodec 0.9's hardware decoder sizes itself at a decoder's first batch
        (rounded up to a multiple of the GPU's JPEG engines, 7 on an H200) and hands what exceeds
        that in later batches to the next backend. A decoder that decoded the check's 3 images
        first decoded 7 images of each later batch on the hardware decoder and the rest on nvJPEG's
        CUDA decoder: 2,852 against 17,778 img/s on an H200."""
        for name in self.backends:
            with self._on_device():
                problem = c_api_backend_problem(self._device_id, name, self._xp)
            if problem is not None:
                return (
                    f"its nvImageCodec instance does not decode with the {name} backend, the binding's does: {problem}"
                )
        sources, windows, sizes = check_batch()
        stream = None if self._cp is None else self._cp.cuda.Stream.null
        to_host = np.asarray if self._cp is None else self._cp.asnumpy
        try:
            checker = make_c()
        except nvimgcodec_c.CApiError as exc:
            return f"{type(exc).__name__}: {exc}"
        try:
            made = [nvimgcodec_c.code_stream(s, w) for s, w in zip(sources, windows)]
            if any(m is None for m in made):
                return "it could not parse a JPEG"
            with self._on_device():
                binding = self._buffer(sizes, 3, stream)
                decoded = self._decode_into(
                    make_binding(),
                    [code_stream(s, w, self._nv) for s, w in zip(sources, windows)],
                    binding.targets(0, len(sizes)),
                    self._params[False],
                    stream,
                )
                if decoded is None or any(image is None for image in decoded):
                    return "the Python binding did not decode the check's JPEGs into a buffer either"
                ours = self._buffer(sizes, 3, stream)
                offsets, dims = ours.packed.offsets, ours.dims
                ok = checker.decode(made, ours.base, offsets, dims, False, _pointer(stream))
                got = [to_host(image) for image in ours.packed]
                reference = [to_host(image) for image in binding.packed]
        except (nvimgcodec_c.CApiError, RuntimeError) as exc:
            return f"{type(exc).__name__}: {exc}"
        finally:
            checker.close()
        if not ok.all():
            return f"it decoded {int(ok.sum())} of {len(ok)} JPEGs the Python binding decodes"
        if not all(np.array_equal(a, b) for a, b in zip(got, reference)):
            return "its decode of a batch differs from the Python binding's (another backend decoded it)"
        return None

    def _stop_c_api(self, reason: str) -> None:
        """Decode through the Python binding from now on, warning once per process why."""
        for decoder in self._c_decoders:
            decoder.close()
        self._c_decoders = []
        self.api, self.api_detail = "python", f"nvImageCodec's C API failed: {reason}"
        device_check.warn_once(
            "nvimgcodec_c", f"nvImageCodec's C API is not used ({reason}); batches decode through its Python binding"
        )

    @property
    def _decoder(self) -> Any:
        """The first decoder (None once closed): the one a batch that is not split uses."""
        return self._decoders[0] if self._decoders else None

    def decode(
        self,
        sources: Sequence[np.ndarray],
        windows: Sequence[Window | None],
        gray: bool,
        stream: Any,
        sizes: Sequence[tuple[int, int]] | None = None,
        code_streams: Sequence[Any] | None = None,
    ) -> Packed | list[Any | None]:
        """Decode ``sources`` (encoded bytes as uint8 arrays), each cut to its ``window`` (None: the
        whole image), to HWC uint8 cupy arrays (3 channels RGB, or 1 when ``gray``), in one batched
        call per decoder, ordered on the cupy ``stream``. The arrays may be used on ``stream`` at
        once: no host synchronisation. ``code_streams``: the sources' code streams where already
        made (:func:`code_stream`; None entries, and any made for the other API, are made here).

        With ``sizes``, each output's ``(width, height)`` (the window's, or the image's where the
        window is None), the batch decodes into one buffer allocated for it from cupy's pool on
        ``stream`` (:func:`packed_layout`): no allocation per image, and the memory counts in the
        pipeline's pool. When every source decodes into it the result is that buffer as one
        :class:`~raypipe.kernels.launch.Packed` batch; otherwise a list with one array per source,
        None where a source could not be decoded (a source that does not decode into the buffer is
        decoded again through the Python binding, into an image nvImageCodec allocates). Should
        nvImageCodec refuse the given outputs, this decoder warns once and lets nvImageCodec
        allocate each image from then on.

        nvImageCodec reports every failure as None, its own (out of memory, a sticky CUDA error, a
        lost plugin) as well as the sample's: when not one source of a batch decodes although
        nvImageCodec parsed them, that is the device's failure, raised as :class:`DeviceError`."""
        if not self._decoders:
            raise RuntimeError("this GpuImageDecoder was closed")
        into = sizes is not None and self.into_given
        in_c = into and bool(self._c_decoders)
        made = code_streams if code_streams is not None else [None] * len(sources)
        streams = [self._code_stream(given, s, w, in_c) for given, s, w in zip(made, sources, windows)]
        valid = [i for i, stream_i in enumerate(streams) if stream_i is not None]
        if not valid:
            return [None] * len(streams)
        given = [streams[i] for i in valid] if len(valid) < len(streams) else streams
        layout = self._buffer([sizes[i] for i in valid], 1 if gray else 3, stream) if into else None
        try:
            decoded = self._decode_parts(given, layout, gray, stream)
        except nvimgcodec_c.CApiError as exc:
            self._stop_c_api(str(exc))
            return self.decode(sources, windows, gray, stream, sizes)
        if in_c and not all(image is _INTO for image in decoded):
            kept = [sources[i] for i in valid], [windows[i] for i in valid]
            decoded = self._decode_again(decoded, *kept, gray, stream)
        if all(image is None for image in decoded):
            raise DeviceError(
                f"the GPU decoder decoded none of the {len(valid)} images of this batch although it parsed them: "
                "the device failed the batch (out of memory or a CUDA error; see RAYPIPE_GPU_MEMORY_MB)"
            )
        if layout is not None and len(valid) == len(streams) and all(image is _INTO for image in decoded):
            return layout.packed
        out: list[Any | None] = [None] * len(streams)
        for k, (i, image) in enumerate(zip(valid, decoded)):
            out[i] = layout.packed[k] if image is _INTO else image
        return out

    def _code_stream(self, given: Any, source: np.ndarray, window: Window | None, in_c: bool) -> Any:
        """``given`` where it is a code stream of the API this batch decodes with, else one made here."""
        if given is not None and isinstance(given, nvimgcodec_c.CodeStream) == in_c:
            return given
        return nvimgcodec_c.code_stream(source, window) if in_c else code_stream(source, window, self._nv)

    def _decode_again(self, decoded: list, sources: list, windows: list, gray: bool, stream: Any) -> list:
        """``decoded`` with each source the C API did not decode into the buffer decoded again
        through the Python binding (a format only a CPU backend reads decodes there apart from the
        buffer), None where that fails too."""
        missing = [k for k, image in enumerate(decoded) if image is not _INTO]
        again = [code_stream(sources[k], windows[k], self._nv) for k in missing]
        parsed = [k for k, made in zip(missing, again) if made is not None]
        if parsed:
            with self._on_device():
                images = self._decode_batch(
                    self._decoders[0], [m for m in again if m is not None], self._params[gray], stream
                )
                for k, image in zip(parsed, images):
                    decoded[k] = self._to_array(image, stream)
        return decoded

    def _decode_parts(self, code_streams: list, layout: _BatchBuffer | None, gray: bool, stream: Any) -> list[Any]:
        """Each decoder decodes an equal, consecutive part of ``code_streams`` (:meth:`_decode_part`),
        the first on ``stream`` in this thread, the others on their own streams and threads, which
        start after the work queued on ``stream`` so far (the outputs' allocation) and which
        ``stream`` then waits for."""
        bounds = np.linspace(0, len(code_streams), len(self._decoders) + 1).astype(int).tolist()
        parts = [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]
        if len(parts) == 1:
            return self._decode_part(0, code_streams, layout, 0, len(code_streams), gray, stream)
        allocated = stream.record() if stream is not None else None
        futures = []
        for k, (a, b) in enumerate(parts[1:], start=1):
            side = self._streams[k - 1]
            if side is not None:
                side.wait_event(allocated)
            futures.append(self._threads.submit(self._decode_part, k, code_streams, layout, a, b, gray, side))
        a, b = parts[0]
        decoded = self._decode_part(0, code_streams, layout, a, b, gray, stream)
        for k, future in enumerate(futures):
            decoded += future.result()
            if stream is not None:
                stream.wait_event(self._streams[k].record())
        return decoded

    def _decode_part(
        self, k: int, code_streams: list, layout: _BatchBuffer | None, a: int, b: int, gray: bool, stream: Any
    ) -> list[Any]:
        """Decoder ``k``'s results for ``code_streams[a:b]`` on ``stream``: :data:`_INTO` for an
        image decoded into its place in ``layout``'s buffer, where given, else an array nvImageCodec
        allocated; None for an image it could not decode. Through the C API that is the whole of
        it; through the Python binding an image that does not decode into its place (a format
        only a CPU backend reads, say) is decoded again the usual way."""
        part, params = code_streams[a:b], self._params[gray]
        api = "c" if layout is not None and self._c_decoders else "python"
        if not self._started[api][k]:
            self._started[api][k] = True
            if b - a < self._part_hint:
                self._prime(k, api, self._part_hint, stream)
        with self._on_device():
            if layout is not None and self._c_decoders:
                ok = self._c_decoders[k].decode(
                    part, layout.base, layout.packed.offsets[a:b], layout.dims[a:b], gray, _pointer(stream)
                )
                return [_INTO if good else None for good in ok.tolist()]
            decoder = self._decoders[k]
            images = None if layout is None else self._decode_into(decoder, part, layout.targets(a, b), params, stream)
            if images is None:
                images = self._decode_batch(decoder, part, params, stream)
                return [self._to_array(image, stream) for image in images]
            out = [_INTO if image is not None else None for image in images]
            missing = [j for j, image in enumerate(images) if image is None]
            if missing:
                again = self._decode_batch(decoder, [part[j] for j in missing], params, stream)
                for j, image in zip(missing, again):
                    out[j] = self._to_array(image, stream)
            return out

    def _prime(self, k: int, api: str, count: int, stream: Any) -> None:
        """Decoder ``k`` of ``api`` decodes ``count`` copies of the start-up check's crop (224x160),
        dropped after: its first batch, which sizes nvImageCodec's hardware decoder for the batches
        after (the C API into a scratch buffer, the binding into images it allocates)."""
        sources, windows, sizes = check_batch()
        source, window, size = sources[1], windows[1], sizes[1]
        with self._on_device():
            if api == "c":
                layout = self._buffer([size] * count, 3, stream)
                made = [nvimgcodec_c.code_stream(source, window) for _ in range(count)]
                offsets = layout.packed.offsets
                self._c_decoders[k].decode(made, layout.base, offsets, layout.dims, False, _pointer(stream))
            else:
                made = [code_stream(source, window, self._nv) for _ in range(count)]
                self._decode_batch(self._decoders[k], made, self._params[False], stream)

    def _on_device(self) -> Any:
        return contextlib.nullcontext() if self._cp is None else self._cp.cuda.Device(self._device_id)

    def _decode_batch(self, decoder: Any, code_streams: list, params: Any, stream: Any) -> list:
        """nvImageCodec's images for ``code_streams``, each allocated by nvImageCodec."""
        try:
            return decoder.decode(code_streams, params=params, cuda_stream=_pointer(stream))
        except RuntimeError:  # a stream that fails late fails the batch call: find it one by one
            return [self._decode_one(decoder, code_stream, params, stream) for code_stream in code_streams]

    def _buffer(self, sizes: list[tuple[int, int]], channels: int, stream: Any) -> _BatchBuffer:
        """One buffer for HWC uint8 images of ``sizes`` (``(width, height)``), from cupy's pool on
        ``stream`` (numpy on the host), laid out by :func:`packed_layout`."""
        offsets, total = packed_layout(sizes, channels)
        self._buffer_bytes = buffer_bytes(total, self._buffer_bytes)
        if self._cp is None:
            buffer = np.empty(self._buffer_bytes, np.uint8)
            base = buffer.ctypes.data
        else:
            with stream:
                buffer = self._cp.empty(self._buffer_bytes, self._cp.uint8)
            base = buffer.data.ptr
        dims = np.asarray(sizes, dtype=np.int64).reshape(-1, 2)
        shapes = np.column_stack([dims[:, 1], dims[:, 0], np.full(len(dims), channels, np.int64)])
        return _BatchBuffer(Packed(buffer, shapes, offsets), base, dims, self._cp is None)

    def _decode_into(self, decoder: Any, code_streams: list, targets: list, params: Any, stream: Any) -> list | None:
        """nvImageCodec's images for ``code_streams`` decoded into ``targets``; None to decode them
        the usual way instead. That is when a stream fails late (it fails the batch call), and, from
        then on, when nvImageCodec refuses the given outputs: it raises, or decodes none of them
        into them but some into its own. A refusal is warned of once."""
        try:
            images = self._nv.as_images(targets, cuda_stream=_pointer(stream))
            images = decoder.decode(code_streams, images=images, params=params, cuda_stream=_pointer(stream))
        except RuntimeError:
            return None
        except (ValueError, TypeError) as exc:
            self._stop_giving_outputs(f"{type(exc).__name__}: {exc}")
            return None
        if any(image is not None for image in images) or all(
            image is None for image in self._decode_batch(decoder, code_streams, params, stream)
        ):
            return images
        self._stop_giving_outputs("it decoded none of a batch into the given outputs and some of it into its own")
        return None

    def _stop_giving_outputs(self, reason: str) -> None:
        if not self.into_given:
            return
        self.into_given = False
        warnings.warn(
            f"raypipe: nvImageCodec does not decode into outputs raypipe allocates ({reason}); "
            "it allocates each image from now on",
            RuntimeWarning,
            stacklevel=2,
        )

    def _decode_one(self, decoder: Any, code_stream: Any, params: Any, stream: Any) -> Any:
        try:
            return decoder.decode(code_stream, params=params, cuda_stream=_pointer(stream))
        except RuntimeError:
            return None

    def _to_array(self, image: Any, stream: Any) -> Any:
        """A decoded image as an HWC array: on the GPU a cupy array viewing nvImageCodec's buffer
        through its ``__cuda_array_interface__``, with no DLPack exchange and no synchronisation
        (the decode was queued on the stream the Mixed stage goes on with); None for a failed
        decode. The array keeps the image and then the decode's ``stream`` alive (:class:`ImageOwner`)."""
        if image is None:
            return None
        if image.buffer_kind == self._nv.ImageBufferKind.STRIDED_HOST:
            array = self._xp.asarray(np.asarray(image))
        else:
            array = device_view(self._cp, image.__cuda_array_interface__, ImageOwner(image, stream))
        return array[:, :, None] if array.ndim == 2 else array

    def close(self) -> None:
        """Release the decoders' resources and threads; idempotent."""
        if self._threads is not None:
            self._threads.shutdown(wait=True)
            self._threads = None
        for decoder in self._c_decoders:
            decoder.close()
        self._c_decoders = []
        self._decoders = []


#: :meth:`GpuImageDecoder._decode_part`'s mark for an image decoded into its target in the batch's buffer.
_INTO = object()


@dataclass(frozen=True)
class _BatchBuffer:
    """A batch's buffer as the :class:`Packed` batch it becomes: its address, and each image's
    ``(width, height)``; :meth:`targets` describes images to nvImageCodec's Python binding."""

    packed: Packed
    base: int
    dims: np.ndarray
    on_host: bool

    def targets(self, a: int, b: int) -> list:
        """Images ``a`` to ``b`` as the Python binding's ``as_images`` reads them: plain records of
        their interfaces, far cheaper to make than array views, each keeping the buffer alive."""
        target = _HostTarget if self.on_host else _DeviceTarget
        channels = int(self.packed.shapes[0, 2]) if len(self.packed.shapes) else 3
        buffer, base = self.packed.data, self.base
        return [
            target({"shape": (h, w, channels), "typestr": "|u1", "data": (base + offset, False), "version": 3}, buffer)
            for offset, (w, h) in zip(self.packed.offsets[a:b].tolist(), self.dims[a:b].tolist())
        ]


class _DeviceTarget:
    """One image's place in a batch's device buffer, as nvImageCodec's ``as_images`` reads it; keeps
    the buffer alive as long as the image nvImageCodec wraps around it."""

    __slots__ = ("__cuda_array_interface__", "owner")

    def __init__(self, interface: dict[str, Any], owner: Any):
        self.__cuda_array_interface__ = interface
        self.owner = owner


class _HostTarget:
    """:class:`_DeviceTarget` for a host buffer (``on_host`` decoders)."""

    __slots__ = ("__array_interface__", "owner")

    def __init__(self, interface: dict[str, Any], owner: Any):
        self.__array_interface__ = interface
        self.owner = owner


def _pointer(stream: Any) -> int:
    """A cupy stream's handle for nvImageCodec; 0 for None (host decoding)."""
    return 0 if stream is None else stream.ptr


def code_stream_maker() -> Callable[[np.ndarray, Window | None], Any]:
    """The function that makes code streams for the nvImageCodec API batches decode through
    (:func:`raypipe.nvimgcodec_c.code_stream` with ``RAYPIPE_NVIMGCODEC_API=c``, else
    :func:`code_stream` through the Python binding), chosen once: a CPU stage binds it for its
    pipeline rather than read the environment per sample."""
    if nvimgcodec_c.enabled():
        return nvimgcodec_c.code_stream
    nv = _nvimgcodec()
    if nv is None or hasattr(nv, "DecodeSource") or not hasattr(nv.CodeStream, "get_sub_code_stream"):
        return functools.partial(code_stream, nv=nv)
    return _sub_code_stream_maker(nv)


def _sub_code_stream_maker(nv: ModuleType) -> Callable[[np.ndarray, Window | None], Any]:
    """:func:`code_stream` for nvImageCodec 0.7 and newer, its API looked up once and its calls made
    with positional arguments: 4 us a sample against 7 (keyword arguments cost nvImageCodec's
    binding a lookup each, and the CPU stage makes one per sample)."""
    make_stream, region, sub = nv.CodeStream, nv.Region, nv.CodeStream.get_sub_code_stream
    uint8 = np.dtype(np.uint8)

    def make(data: np.ndarray, window: Window | None) -> Any:
        if data.dtype != uint8 or not data.flags.c_contiguous:
            data = np.ascontiguousarray(data, dtype=np.uint8)
        try:
            stream = make_stream(data)
            if window is None:
                return stream
            x, y, w, h = window
            return sub(stream, 0, region(y, x, y + h, x + w))
        except RuntimeError:  # nvImageCodec reports an unparsable stream this way
            return None

    return make


def code_stream(data: np.ndarray, window: Window | None, nv: ModuleType | None = None) -> Any:
    """nvImageCodec's code stream over ``data`` (encoded bytes) restricted to ``window`` (None: the
    whole image), through the Python module ``nv`` (default: the installed one) with whichever API
    it has (``get_sub_code_stream`` from 0.7, ``getSubCodeStream`` in 0.6, ``DecodeSource`` in
    0.5); None when nvImageCodec cannot parse it or is not installed. It keeps ``data`` alive.
    Making one gives up the GIL twice, so a GPU pipeline's CPU stage makes them
    (:func:`code_streams_in`), not the Mixed stage."""
    nv = nv or _nvimgcodec()
    if nv is None:
        return None
    data = np.ascontiguousarray(data, dtype=np.uint8)
    region = None
    if window is not None:
        x, y, w, h = window
        region = nv.Region(start_y=y, start_x=x, end_y=y + h, end_x=x + w)
    try:
        if hasattr(nv, "DecodeSource"):
            return nv.DecodeSource(data, region=region)
        stream = nv.CodeStream(data)
        if region is None:
            return stream
        sub = getattr(stream, "get_sub_code_stream", None) or stream.getSubCodeStream
        return sub(region=region)
    except RuntimeError:  # nvImageCodec reports an unparsable stream this way
        return None


def code_streams_in() -> str:
    """``RAYPIPE_GPU_CODE_STREAMS``: which stage makes each sample's code stream for the GPU
    decoder: ``"cpu"`` (the default; the CPU stage's thread that read the sample, while the Mixed
    stage, the GPU pipeline's bottleneck, waits for no GIL on them) or ``"mixed"`` (the Mixed stage,
    as a batch is decoded). Samples a CPU helper prepared get theirs in the Mixed stage."""
    value = os.environ.get(CODE_STREAMS_ENV, "").strip().lower() or "cpu"
    if value not in ("cpu", "mixed"):
        raise ArgumentError(f"{CODE_STREAMS_ENV} must be cpu or mixed, got {value!r}")
    return value


class ImageOwner:
    """Keeps an nvImageCodec image and the CUDA stream it was decoded on alive, and lets go of the
    image first. nvImageCodec frees an image's buffer on its decode stream (``cudaFreeAsync``):
    a stream destroyed before the image makes that free crash the process (a segmentation fault
    in ``cuMemFreeAsync`` on an H200, when a tuple ``(image, stream)``, which drops its items
    last first, owned the array)."""

    __slots__ = ("image", "stream")

    def __init__(self, image: Any, stream: Any):
        self.image = image
        self.stream = stream

    def __del__(self) -> None:
        self.image = None
        self.stream = None


def buffer_bytes(needed: int, current: int) -> int:
    """The size to allocate for a batch's buffer of ``needed`` bytes when the batches so far had
    ``current``: ``current`` where it fits, else :data:`BUFFER_HEADROOM` times ``needed`` rounded up
    to :data:`BUFFER_GRANULE`."""
    if needed <= current:
        return int(current)
    return -(-int(needed * BUFFER_HEADROOM) // BUFFER_GRANULE) * BUFFER_GRANULE


def decode_into_buffer() -> bool:
    """``RAYPIPE_GPU_DECODE_INTO``: whether a batch decodes into one buffer from the pipeline's pool
    (``1``, the default) or nvImageCodec allocates each image (``0``: its own stream-ordered pool,
    outside the pipeline's budget; on an H200 alone 15,103 against 13,438 img/s)."""
    value = os.environ.get(INTO_ENV, "").strip()
    if value not in ("", "0", "1"):
        raise ArgumentError(f"{INTO_ENV} must be 0 or 1, got {value!r}")
    return value != "0"


def decoder_count() -> int:
    """``RAYPIPE_GPU_DECODERS``: how many nvImageCodec decoders share each batch (1 when unset)."""
    value = os.environ.get(DECODERS_ENV, "").strip()
    if not value:
        return 1
    if not value.isdigit() or int(value) < 1:
        raise ArgumentError(f"{DECODERS_ENV} must be a positive integer, got {value!r}")
    return int(value)


@functools.cache
def c_api_backend_problem(device_id: int, backend: str, xp: ModuleType = np) -> str | None:
    """Why the C API's own nvImageCodec instance does not decode the device check's JPEG with
    ``backend`` alone as the host does (None when it does), into an ``xp`` array (numpy, or cupy on
    the current device). The Python binding's instance and the C API's register their decoders each
    for itself: a backend that came up in one may be missing from the other (nvImageCodec then hands
    the batch to the next backend, a slower one, and the pixels can still match). Checked once per
    process, as the device check is: the decoders an instance registers do not change."""
    data, reference = device_check.probe_jpeg()
    height, width = reference.shape[:2]
    try:
        decoder = nvimgcodec_c.Decoder(device_id, 1, [(backend, 1.0)], ":fancy_upsampling=1")
    except nvimgcodec_c.CApiError as exc:
        return f"no decoder has it ({exc})"
    try:
        buffer = xp.zeros(height * width * 3, xp.uint8)
        made = nvimgcodec_c.code_stream(np.frombuffer(data, np.uint8), None)
        if made is None:
            return "it could not parse the JPEG"
        base = buffer.ctypes.data if xp is np else buffer.data.ptr
        ok = decoder.decode([made], base, np.zeros(1, np.int64), np.array([[width, height]]), False, 0)
        if xp is not np:
            xp.cuda.Stream.null.synchronize()
        got = np.asarray(buffer if xp is np else buffer.get()).reshape(height, width, 3) if ok.all() else None
    except nvimgcodec_c.CApiError as exc:
        return str(exc)
    finally:
        decoder.close()
    return device_check.compare_decoded(got, reference)


@functools.cache
def check_batch() -> tuple[list[np.ndarray], list[Window | None], list[tuple[int, int]]]:
    """The batch the C API's start-up check decodes: a textured colour JPEG of a dataset's size
    (320x240, 4:2:0, quality 90), whole and cut to a crop window, and the device check's small
    JPEG; their encoded bytes, windows and output sizes."""
    from PIL import Image

    rng = np.random.default_rng(7)
    y, x = np.mgrid[0:240, 0:320]
    smooth = np.stack([x * 0.8, y * 1.0, (x + y) * 0.4], axis=-1)
    rgb = np.clip(smooth + rng.normal(0, 24, smooth.shape), 0, 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(rgb).save(buffer, format="JPEG", quality=90, subsampling=2)
    textured = np.frombuffer(buffer.getvalue(), np.uint8)
    small = np.frombuffer(device_check.probe_jpeg()[0], np.uint8)
    windows: list[Window | None] = [None, (37, 21, 224, 160), None]
    return [textured, textured, small], windows, [(320, 240), (224, 160), (64, 48)]


def packed_layout(sizes: Sequence[tuple[int, int]], channels: int) -> tuple[np.ndarray, int]:
    """Where each of a batch's HWC uint8 images of ``sizes`` (``(width, height)``) starts in one
    buffer, each at a multiple of :data:`IMAGE_ALIGNMENT` bytes, and the buffer's size."""
    dims = np.asarray(sizes, dtype=np.int64).reshape(-1, 2)
    nbytes = dims[:, 0] * dims[:, 1] * channels
    spans = -(-nbytes // IMAGE_ALIGNMENT) * IMAGE_ALIGNMENT
    ends = np.cumsum(spans)
    return ends - spans, int(ends[-1]) if len(ends) else 0


def device_view(cp: ModuleType, interface: dict[str, Any], owner: Any) -> Any:
    """A cupy array over the device memory that ``interface`` (a ``__cuda_array_interface__``)
    describes, keeping ``owner`` alive; unlike ``cupy.asarray`` it never synchronises a stream."""
    shape = tuple(interface["shape"])
    dtype = np.dtype(interface["typestr"])
    pointer = interface["data"][0]
    strides = interface.get("strides")
    size = dtype.itemsize * (int(np.prod(shape)) if strides is None else _extent(shape, strides, dtype.itemsize))
    memory = cp.cuda.UnownedMemory(pointer, size, owner)
    return cp.ndarray(shape, dtype, cp.cuda.MemoryPointer(memory, 0), strides=strides)


def _extent(shape: tuple[int, ...], strides: Sequence[int], itemsize: int) -> int:
    """Elements spanned by a strided array (its last byte past its first, in items)."""
    return (sum((n - 1) * s for n, s in zip(shape, strides)) + itemsize) // itemsize
