"""Start-up self-checks of the GPU components a pipeline uses, run once per process.

Finding a package is not proof that it works: numba-cuda imports without its NVVM compiler and
fails on the first kernel it compiles; nvImageCodec imports without nvJPEG and then returns
``None`` for every image. So before a pipeline's first batch each component it will use proves
itself on this machine:

- ``kernels``: numba compiles a one-element kernel and runs it on a cupy array on a cupy stream,
  the way :func:`raypipe.kernels.launch.launch` launches every batch;
- ``decoder``: nvImageCodec decodes a small JPEG made here with each GPU backend (the hardware
  JPEG decoder, nvJPEG's CUDA decoder) and the result matches the host decode within the
  decoders' stated tolerance.

A component that fails is not used: one :class:`GpuComponentWarning` per process names it and
the reason, and the pipeline takes its host path for that part (host decode; GPU operators
through their per-sample array-module code). :func:`raypipe.Pipeline.device_report` says which
path each part took.
"""

from __future__ import annotations

import functools
import importlib.metadata
import io
import os
import threading
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .backend import gpu_available, gpu_unavailable_reason

DECODE_ENV = "RAYPIPE_GPU_DECODE"
#: nvJPEG (CUDA or hardware decoder) against libjpeg-turbo: IDCT and colour conversion round
#: differently, most pixels within 1-2 grey levels, a few more along sharp colour edges.
DECODE_MEAN_TOLERANCE = 3.0
DECODE_P99_TOLERANCE = 16
#: nvImageCodec's GPU backends this checks, by the name the report uses: "hw_gpu" the hardware JPEG
#: decoder (HW_GPU_ONLY), "gpu" nvJPEG's CUDA decoder, which nvImageCodec files under HYBRID_CPU_GPU
#: (Huffman decoding on the host, the rest on the GPU; its GPU_ONLY kind cannot create that decoder).
GPU_BACKENDS = ("hw_gpu", "gpu")
_EXTRA_HINT = "pip install raypipe[gpu-cu12] or raypipe[gpu-cu13], matching the CUDA major of the driver"


class GpuComponentWarning(UserWarning):
    """A GPU component failed its start-up check and is not used (the warning says why)."""


@dataclass(frozen=True)
class Check:
    """The outcome of one component's check: usable or not, and how (what ran) or why not."""

    component: str
    ok: bool
    detail: str
    backends: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"ok": self.ok, "detail": self.detail}
        if self.backends:
            out["backends"] = list(self.backends)
        return out


_warned: set[str] = set()
_warn_lock = threading.Lock()


def warn_once(key: str, message: str) -> None:
    """Issue ``message`` as a :class:`GpuComponentWarning` the first time ``key`` comes up in this process."""
    with _warn_lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(message, GpuComponentWarning, stacklevel=3)


def installed_cupy() -> list[str]:
    """The cupy distributions installed here (more than one shadow each other in one folder)."""
    names = set()
    for dist in importlib.metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name == "cupy" or name.startswith("cupy-cuda"):
            names.add(name)
    return sorted(names)


@functools.cache
def kernels() -> Check:
    """Whether numba-cuda compiles and runs kernels on this process's current GPU (cached)."""
    if not gpu_available():
        return Check("kernels", False, f"no usable GPU ({gpu_unavailable_reason()})")
    duplicates = installed_cupy()
    if len(duplicates) > 1:
        warn_once(
            "cupy-duplicates",
            f"several cupy wheels are installed ({', '.join(duplicates)}): they overwrite each other's files; "
            f"keep the one matching the driver's CUDA major ({_EXTRA_HINT})",
        )
    try:
        import numba
        from numba import cuda
    except ImportError as exc:
        return Check("kernels", False, f"numba-cuda is not installed ({exc}; {_EXTRA_HINT})")
    if numba.config.ENABLE_CUDASIM:
        return Check("kernels", False, "NUMBA_ENABLE_CUDASIM=1 simulates CUDA in this process")
    try:
        return Check("kernels", True, _run_probe_kernel(numba, cuda))
    except Exception as exc:  # an import, driver, NVVM or launch failure: each is reported, never raised
        return Check("kernels", False, describe_failure(exc))


def _run_probe_kernel(numba, cuda) -> str:
    import cupy

    from .kernels import launch
    from .kernels.probe import probe

    values = cupy.asarray(np.array([20], np.int32))
    with cupy.cuda.Stream(non_blocking=True) as stream:
        launch.launch(cupy, probe, 1, 1, values)
        stream.synchronize()
    got = int(values.get()[0])
    if got != 41:
        raise RuntimeError(f"the probe kernel computed {got}, expected 41")
    version = getattr(cuda, "__version__", None) or numba.__version__
    return f"numba {version}: a kernel compiled and ran"


def describe_failure(exc: BaseException) -> str:
    """A one-line reason for a failed check, with the likely fix for the failures users meet."""
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:300]
    lowered = text.lower()
    if "nvvm" in lowered:
        return f"numba-cuda has no NVVM compiler for this CUDA ({text}; {_EXTRA_HINT})"
    if "ptx" in lowered and ("version" in lowered or "unsupported" in lowered):
        return f"the driver is older than numba-cuda's compiler ({text})"
    return text


def simulated_decode() -> bool:
    """``RAYPIPE_GPU_DECODE=host`` with nvImageCodec installed: under ``RAYPIPE_DEVICE=simulator``
    the Mixed stage decodes the mixed decoders' batches with nvImageCodec's CPU backend, so the GPU
    path's decode (code streams from the CPU stage, one buffer per batch, a packed batch to the
    GPU stage) runs whole on a machine without a GPU. For tests; no effect on a GPU."""
    if os.environ.get(DECODE_ENV, "").strip().lower() != "host":
        return False
    from .gpu_decode import nvimgcodec_installed  # gpu_decode imports this module

    return nvimgcodec_installed()


def decoder(device_id: int) -> Check:
    """Whether nvImageCodec decodes JPEGs on GPU ``device_id``, and with which GPU backends (the
    decode check is made once per device; ``RAYPIPE_GPU_DECODE=0`` is read at every call)."""
    if os.environ.get(DECODE_ENV, "").strip() == "0":
        return Check("decoder", False, f"{DECODE_ENV}=0")
    return _decoder_check(device_id)


@functools.cache
def _decoder_check(device_id: int) -> Check:
    """:func:`decoder`'s check of nvImageCodec on GPU ``device_id`` (cached)."""
    if not gpu_available():
        return Check("decoder", False, f"no usable GPU ({gpu_unavailable_reason()})")
    try:
        from nvidia import nvimgcodec
    except ImportError as exc:
        return Check("decoder", False, f"nvImageCodec is not installed ({exc}; {_EXTRA_HINT})")
    data, reference = probe_jpeg()
    passed, failures = [], []
    for name in GPU_BACKENDS:
        try:
            problem = compare_decoded(_decode_with(nvimgcodec, device_id, name, data), reference)
        except Exception as exc:
            problem = describe_failure(exc)
        if problem is None:
            passed.append(name)
        else:
            failures.append(f"{name}: {problem}")
    if not passed:
        return Check("decoder", False, "no GPU backend decodes a JPEG: " + "; ".join(failures))
    detail = f"nvImageCodec {getattr(nvimgcodec, '__version__', '?')} decodes with {', '.join(passed)}"
    if failures:
        detail += " (not " + "; ".join(failures) + ")"
    return Check("decoder", True, detail, tuple(passed))


def backend_of(nv: Any, name: str, load_hint: float = 1.0) -> Any:
    """nvImageCodec's backend for one of :data:`GPU_BACKENDS` (``load_hint``: its share of a batch)."""
    kind = nv.BackendKind.HW_GPU_ONLY if name == "hw_gpu" else nv.BackendKind.HYBRID_CPU_GPU
    return nv.Backend(kind, load_hint=float(load_hint))


def clear() -> None:
    """Forget the checks made (for tests that change what they see)."""
    kernels.cache_clear()
    _decoder_check.cache_clear()


def _decode_with(nv, device_id: int, backend: str, data: bytes):
    """``data`` decoded by nvImageCodec on ``device_id`` with one GPU backend only, on the host."""
    import cupy

    decoder = nv.Decoder(device_id=device_id, backends=[backend_of(nv, backend)], options=":fancy_upsampling=1")
    image = decoder.decode(nv.CodeStream(np.frombuffer(data, np.uint8)))
    if image is None:
        return None
    with cupy.cuda.Device(device_id):
        return cupy.asarray(image).get()


def compare_decoded(got: np.ndarray | None, reference: np.ndarray) -> str | None:
    """None when ``got`` matches the host decode ``reference`` within the decoders' tolerance, else why not."""
    if got is None:
        return "decoded nothing (its plugin did not load: nvJPEG missing or no such hardware)"
    got = np.asarray(got)
    if got.ndim == 2:
        got = got[:, :, None]
    if got.shape != reference.shape or got.dtype != np.uint8:
        return f"decoded a {got.dtype} array of shape {got.shape}, expected uint8 {reference.shape}"
    diff = np.abs(got.astype(np.int16) - reference.astype(np.int16))
    mean, p99 = float(diff.mean()), float(np.percentile(diff, 99))
    if mean > DECODE_MEAN_TOLERANCE or p99 > DECODE_P99_TOLERANCE:
        return f"differs from the host decode by {mean:.2f} grey levels on average, {p99:.0f} at the 99th percentile"
    return None


@functools.cache
def probe_jpeg() -> tuple[bytes, np.ndarray]:
    """A small colour JPEG (64x48, 4:2:0, quality 90: what datasets hold) and its host decode."""
    from PIL import Image

    y, x = np.mgrid[0:48, 0:64]
    rgb = np.stack([x * 4, y * 5, (x + y) * 2 % 256], axis=-1).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(rgb).save(buffer, format="JPEG", quality=90, subsampling=2)
    data = buffer.getvalue()
    return data, np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
