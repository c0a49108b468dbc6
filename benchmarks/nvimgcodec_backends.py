"""Which nvImageCodec backend decodes a batch, through its Python binding and through its C API.

    python benchmarks/nvimgcodec_backends.py [--images 512] [--batch 256] [--seconds 3] [--sets SET ...]
    python benchmarks/nvimgcodec_backends.py --conditions [--threads 4]

On an H200 the recipe once decoded through the C API (:mod:`raypipe.nvimgcodec_c`) at 3,622 img/s
against 9,165 through the Python binding, at 1.15 against 0.18 ms of host CPU per image; these
rows told why (its start-up check's small batch, decoded first, had sized the hardware decoder:
``--conditions``' "the check's batch decoded first" row).

Each row here decodes the recipe's random crops into one buffer per batch (as the Mixed stage does)
through one API with one set of backends allowed: the hardware JPEG decoder alone
(``hw_gpu``), nvJPEG's CUDA decoder alone (``gpu``, Huffman decoding on the host), the CPU backend
alone (``cpu``), and all three as the pipeline allows them. It reports the images decoded, img/s,
host CPU ms per image (the whole process), and whether the batch's pixels equal those of the
Python binding with the same backends: equal pixels mean the same backend decoded them. An
instance that has no decoder for a set (nvImageCodec registers the hardware decoder per instance,
where ``nvjpegCreateEx`` gives it one) gets a row that says so, with the library's status.

``--conditions`` times instead, all backends allowed, the C API under each of the Mixed stage's
conditions in turn (its host threads, ``--threads``; a non-blocking CUDA stream instead of CUDA's
default one) and the Mixed stage's own decoder (:class:`raypipe.gpu_decode.GpuImageDecoder`) with
each API: a condition that makes the C API slow shows as the first slow row.

Without a GPU only the CPU backend runs by default (nvImageCodec's CPU backend needs no GPU); without
nvImageCodec it says why and exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from gpu_decode_rate import batches_of

from raypipe import device_check, nvimgcodec_c
from raypipe.backend import gpu_available
from raypipe.datasets import make_jpeg_folder
from raypipe.gpu_decode import GpuImageDecoder, c_api_backend_problem, check_batch, code_stream, packed_layout
from raypipe.kernels.launch import Packed

#: The backend sets of the rows, by the names :data:`raypipe.nvimgcodec_c.BACKEND_KINDS` uses.
GPU_SETS = {"hw_gpu": ["hw_gpu"], "gpu": ["gpu"], "cpu": ["cpu"], "all": ["hw_gpu", "gpu", "cpu"]}
OPTIONS = ":fancy_upsampling=1"


class Target:
    """One image's place in a batch's buffer, as the Python binding's ``as_images`` reads it."""

    def __init__(self, interface: dict, key: str, owner: Any):
        setattr(self, key, interface)
        self.owner = owner


def python_decoder(nv: Any, device_id: int, names: list[str], cp: Any) -> Callable:
    """``decode(batch, buffer, offsets, dims)`` through the Python binding into the buffer; returns
    how many images decoded."""
    backends = [
        nv.Backend(nv.BackendKind.CPU_ONLY) if name == "cpu" else device_check.backend_of(nv, name) for name in names
    ]
    decoder = nv.Decoder(device_id=device_id, backends=backends, options=OPTIONS)
    params = nv.DecodeParams(apply_exif_orientation=False, color_spec=nv.ColorSpec.SRGB, allow_any_depth=False)
    key = "__array_interface__" if cp is None else "__cuda_array_interface__"

    def decode(batch: tuple[list, list], buffer: Any, base: int, offsets: np.ndarray, dims: np.ndarray) -> int:
        data, windows = batch
        streams = [code_stream(d, w, nv) for d, w in zip(data, windows)]
        targets = [
            Target({"shape": (h, w, 3), "typestr": "|u1", "data": (base + o, False), "version": 3}, key, buffer)
            for o, (w, h) in zip(offsets.tolist(), dims.tolist())
        ]
        images = decoder.decode(streams, images=nv.as_images(targets), params=params, cuda_stream=0)
        return sum(image is not None for image in images)

    return decode


def c_decoder(
    device_id: int, names: list[str], threads: int = 0, stream: Any = None, first: Callable | None = None
) -> Callable:
    """The same through the C API, nvImageCodec on ``threads`` host threads (0: its default),
    ordered on the cupy ``stream`` (None: CUDA's default stream); ``first(decoder)`` runs once
    before the first batch."""
    decoder = nvimgcodec_c.Decoder(device_id, threads, [(name, 1.0) for name in names], OPTIONS)
    if first is not None:
        first(decoder)
    handle = 0 if stream is None else stream.ptr

    def decode(batch: tuple[list, list], buffer: Any, base: int, offsets: np.ndarray, dims: np.ndarray) -> int:
        data, windows = batch
        streams = [nvimgcodec_c.code_stream(d, w) for d, w in zip(data, windows)]
        return int(decoder.decode(streams, base, offsets, dims, False, handle).sum())

    return decode


def close_another(device_id: int, cp: Any) -> Callable:
    """``first`` for :func:`c_decoder`: another decoder of the C API's instance made, used and
    closed (the start-up check's per-backend decoders)."""
    backend = "hw_gpu" if cp is not None else "cpu"
    return lambda decoder: c_api_backend_problem.__wrapped__(device_id, backend, np if cp is None else cp)


def decode_check_batch(cp: Any) -> Callable:
    """``first`` for :func:`c_decoder`: the start-up check's batch decoded by the decoder itself."""

    def first(decoder: nvimgcodec_c.Decoder) -> None:
        sources, windows, sizes = check_batch()
        offsets, total = packed_layout(sizes, 3)
        buffer = np.zeros(total, np.uint8) if cp is None else cp.zeros(total, cp.uint8)
        made = [nvimgcodec_c.code_stream(s, w) for s, w in zip(sources, windows)]
        decoder.decode(
            made, buffer.ctypes.data if cp is None else buffer.data.ptr, offsets, np.asarray(sizes), False, 0
        )
        if cp is not None:
            cp.cuda.Device().synchronize()

    return first


def stage_decoder(device_id: int, api: str, threads: int, cp: Any) -> tuple[Callable, str]:
    """The Mixed stage's decoder (hardware decoder share 1, one nvImageCodec decoder) through
    ``api`` on a non-blocking stream, each batch copied into the row's buffer for the pixel
    comparison; and the API it decodes with (it falls back to the binding where the C API fails
    its check)."""
    previous = os.environ.get(nvimgcodec_c.API_ENV)
    os.environ[nvimgcodec_c.API_ENV] = api  # read when the decoder is made
    try:
        decoder = GpuImageDecoder(device_id, threads, hw_load=1.0, decoders=1, on_host=cp is None)
    finally:
        if previous is None:
            del os.environ[nvimgcodec_c.API_ENV]
        else:
            os.environ[nvimgcodec_c.API_ENV] = previous
    stream = None if cp is None else cp.cuda.Stream(non_blocking=True)

    def decode(batch: tuple[list, list], buffer: Any, base: int, offsets: np.ndarray, dims: np.ndarray) -> int:
        data, windows = batch
        out = decoder.decode(data, windows, False, stream, sizes=[tuple(w[2:]) for w in windows])
        if not isinstance(out, Packed):
            return sum(image is not None for image in out)
        with contextlib.nullcontext() if stream is None else stream:
            buffer[:] = out.data[: len(buffer)]
        return len(out)

    return decode, decoder.api


def run(decode: Callable, batches: list, cp: Any, seconds: float) -> tuple[int, float, float, np.ndarray]:
    """Decode ``batches`` in turn for ``seconds`` after one warm-up pass: the first batch's images
    decoded, img/s, host CPU ms per image, and the first batch's pixels on the host (its images'
    bytes, without the gaps between them)."""
    dims = [np.asarray([w[2:] for w in windows], np.int64) for _, windows in batches]
    layouts = [packed_layout(d.tolist(), 3) for d in dims]
    buffers = [np.zeros(total, np.uint8) if cp is None else cp.zeros(total, cp.uint8) for _, total in layouts]
    bases = [b.ctypes.data if cp is None else b.data.ptr for b in buffers]

    def one(k: int) -> int:
        done = decode(batches[k], buffers[k], bases[k], layouts[k][0], dims[k])
        if cp is not None:
            cp.cuda.Device().synchronize()
        return done

    first = one(0)
    for k in range(1, len(batches)):
        one(k)
    images, began, began_cpu = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - began < seconds:
        for k in range(len(batches)):
            one(k)
            images += len(batches[k][0])
    wall, cpu = time.perf_counter() - began, time.process_time() - began_cpu
    whole = buffers[0] if cp is None else buffers[0].get()
    ends = layouts[0][0] + 3 * dims[0].prod(axis=1)
    pixels = np.concatenate([whole[a:b] for a, b in zip(layouts[0][0].tolist(), ends.tolist())])  # not the gaps
    return first, images / wall, 1000 * cpu / images, pixels


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=512)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--seconds", type=float, default=3.0, help="timed seconds per row")
    parser.add_argument("--conditions", action="store_true", help="the C API under the Mixed stage's conditions")
    parser.add_argument("--threads", type=int, default=4, help="the Mixed stage's host threads for --conditions")
    parser.add_argument(
        "--sets", nargs="+", choices=sorted(GPU_SETS), metavar="SET",
        help=f"backend sets to time ({', '.join(GPU_SETS)}; default: all on a GPU, cpu without one)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.images < 1 or args.batch < 1 or args.batch > args.images or args.seconds <= 0 or args.threads < 0:
        parser.error(
            "--images and --batch must be positive, --batch at most --images, --seconds positive, --threads at least 0"
        )
    try:
        from nvidia import nvimgcodec as nv
    except ImportError as exc:
        print(f"nvImageCodec is not installed here ({exc}): nothing to measure")
        return 0
    if nvimgcodec_c.library() is None:
        print(f"nvImageCodec's C API is not usable here ({nvimgcodec_c.problem()}): nothing to compare")
        return 0
    on_gpu = gpu_available() and device_check.decoder(0).ok
    cp = None
    if on_gpu:
        import cupy as cp
    device_id = 0 if on_gpu else nvimgcodec_c.DEVICE_CPU_ONLY
    sets = {name: GPU_SETS[name] for name in args.sets or (GPU_SETS if on_gpu else ["cpu"])}
    root = os.path.join(tempfile.gettempdir(), "raypipe-bench-gpu-jpegs")
    make_jpeg_folder(root, num_classes=16, per_class=max(1, args.images // 16), seed=0)
    batches = batches_of(root, args.images, args.batch)
    print(f"{'GPU 0' if on_gpu else 'no GPU: the CPU backend only'}; {len(batches)} batches of {args.batch} crops")
    if args.conditions:
        return conditions(device_id, sets.get("all", sets.get("cpu")), args, batches, cp)
    print(
        f"{'backends':<10}{'API':<8}{'decoded':>9}{'img/s':>10}{'host CPU ms/img':>18}  pixels as the Python binding's"
    )
    for label, names in sets.items():
        reference = None
        for api in ("python", "c"):
            try:
                decode = python_decoder(nv, device_id, names, cp) if api == "python" else c_decoder(device_id, names)
            except (nvimgcodec_c.CApiError, RuntimeError) as exc:  # no decoder with these backends in its instance
                print(f"{label:<10}{api:<8}  no decoder: {exc}", flush=True)
                continue
            first, rate, cpu_ms, pixels = run(decode, batches, cp, args.seconds)
            if reference is None or not first:
                reference, same = (pixels if first else None), "-"
            else:
                same = "equal" if np.array_equal(pixels, reference) else "differ"
            decoded = f"{first}/{len(batches[0][0])}"
            print(f"{label:<10}{api:<8}{decoded:>9}{rate:>10.0f}{cpu_ms:>18.3f}  {same}", flush=True)
    return 0


def conditions(device_id: int, names: list[str], args: argparse.Namespace, batches: list, cp: Any) -> int:
    """The ``--conditions`` table: the C API under each of the Mixed stage's conditions, then the
    Mixed stage's decoder with each API, every row's pixels against the first's."""
    stream = None if cp is None else cp.cuda.Stream(non_blocking=True)
    rows: list[tuple[str, Callable[[], Callable]]] = [
        ("C API, nvImageCodec's threads, default stream", lambda: c_decoder(device_id, names)),
        (f"C API, {args.threads} threads, default stream", lambda: c_decoder(device_id, names, args.threads)),
        ("C API, nvImageCodec's threads, own stream", lambda: c_decoder(device_id, names, 0, stream)),
        (f"C API, {args.threads} threads, own stream", lambda: c_decoder(device_id, names, args.threads, stream)),
        (
            "C API, another decoder of its instance closed",
            lambda: c_decoder(device_id, names, args.threads, stream, close_another(device_id, cp)),
        ),
        (
            "C API, the check's batch decoded first",
            lambda: c_decoder(device_id, names, args.threads, stream, decode_check_batch(cp)),
        ),
    ]
    for api in ("python", "c"):
        rows.append((f"Mixed stage's decoder, {api}", lambda api=api: stage_decoder(device_id, api, args.threads, cp)))
    print(f"{'condition':<48}{'decoded':>9}{'img/s':>10}{'host CPU ms/img':>18}  pixels as the first row's")
    reference = None
    for label, make in rows:
        made = make()
        decode, used = made if isinstance(made, tuple) else (made, "c")
        first, rate, cpu_ms, pixels = run(decode, batches, cp, args.seconds)
        same = "-" if reference is None else ("equal" if np.array_equal(pixels, reference) else "differ")
        reference = pixels if reference is None else reference
        note = "" if label.endswith(used) or label.startswith("C API") else f" (decoded through {used}: C API failed)"
        print(f"{label:<48}{f'{first}/{len(batches[0][0])}':>9}{rate:>10.0f}{cpu_ms:>18.3f}  {same}{note}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
