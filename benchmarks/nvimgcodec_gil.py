"""Which of nvImageCodec's per-image Python calls give up the GIL, and what each then costs while
other Python threads of the process are busy: the Mixed stage's host time on a GPU.

    python benchmarks/nvimgcodec_gil.py [--images 256] [--busy 0 1 2] [--threads 0 4 8] [--rounds 3]

The first table: the Python binding's per-image calls for a batch's code streams (a ``CodeStream``
over the file's bytes and a sub code stream cut to the crop window). A call that releases the GIL
must get it back from whichever thread took it meanwhile; in a pipeline those are the CPU stage's
thread (file reads, JPEG headers, crop windows: :func:`gpu_decode_rate.cpu_stage_work`, run here
by ``--busy`` threads) and the GPU stage's. Each row times one batch's calls (median of
``--rounds``, in alternation) with 0 to 2 busy threads; ``--threads`` also splits a batch's code
streams over that many threads (0: all in the calling thread), which tells whether threads that
wait for the GIL together get it back sooner than one thread alone.

The second table: the Mixed stage's whole decode of the batch into one buffer on nvImageCodec's
CPU backend, through its Python binding (which gives up the GIL several times per image inside
the decode) and through its C API (:mod:`raypipe.nvimgcodec_c`: twice per batch), beside the same
busy threads. It decodes the top-left 16x16 pixels of each image (:data:`CORNER`), which the CPU
backend decodes quickly, so that the host calls around the decode weigh as they do on a GPU.

Needs only nvImageCodec (no GPU), from the ``gpu-cu12`` / ``gpu-cu13`` extras or the GPU kit's
wheel; without it it says why and exits 0.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gpu_decode_rate import batches_of, cpu_stage_work

from raypipe import nvimgcodec_c
from raypipe.datasets import make_jpeg_folder
from raypipe.gpu_decode import GpuImageDecoder, code_stream
from raypipe.operators.readers import list_file_root


def calls(nv: Any) -> dict[str, Callable[[list, list], object]]:
    """Each way of making a batch's code streams, by name: ``f(data, windows)``."""

    def region(x: int, y: int, w: int, h: int) -> Any:
        return nv.Region(start_y=y, start_x=x, end_y=y + h, end_x=x + w)

    return {
        "Region per image (no GIL release expected)": lambda data, windows: [region(*w) for w in windows],
        "CodeStream per image": lambda data, windows: [nv.CodeStream(d) for d in data],
        "CodeStream + sub code stream per image (the Mixed stage)": lambda data, windows: [
            nv.CodeStream(d).get_sub_code_stream(region=region(*w)) for d, w in zip(data, windows)
        ],
    }


def split(work: Callable[[list, list], object], pool: ThreadPoolExecutor | None, parts: int) -> Callable:
    """``work`` over a batch, in this thread (``pool`` None) or in ``parts`` slices on ``pool``."""
    if pool is None:
        return work
    return lambda data, windows: list(
        pool.map(work, *zip(*[(data[k::parts], windows[k::parts]) for k in range(parts)]))
    )


def mixed_stage(nv: Any, api: str, streams_here: bool, batch: tuple[list, list]) -> Callable[[list, list], object]:
    """The Mixed stage's whole decode of ``batch`` (:meth:`GpuImageDecoder.decode`, here on
    nvImageCodec's CPU backend, into one buffer) through nvImageCodec's ``api`` (``c`` or
    ``python``), making the code streams itself when ``streams_here`` (``RAYPIPE_GPU_CODE_STREAMS=mixed``),
    else given them as the CPU stage makes them (made here beforehand, not timed)."""
    previous = os.environ.get(nvimgcodec_c.API_ENV)
    os.environ[nvimgcodec_c.API_ENV] = api
    try:
        decoder = GpuImageDecoder(0, num_threads=1, on_host=True)
    finally:
        if previous is None:
            del os.environ[nvimgcodec_c.API_ENV]
        else:
            os.environ[nvimgcodec_c.API_ENV] = previous
    if decoder.api != api:
        raise RuntimeError(f"nvImageCodec's {api} API is not usable here: {decoder.api_detail}")
    make = nvimgcodec_c.code_stream if api == "c" else functools.partial(code_stream, nv=nv)
    data, windows = batch
    made = None if streams_here else [make(d, tuple(w)) for d, w in zip(data, windows)]

    def work(data: list, windows: list) -> object:
        return decoder.decode(data, [tuple(w) for w in windows], False, None, [tuple(w[2:]) for w in windows], made)

    return work


#: The window the Mixed stage's table decodes of every image: its top-left 16x16 pixels, which the CPU
#: backend decodes in a fraction of what a crop costs, so that the APIs' own host calls weigh.
CORNER = (0, 0, 16, 16)
#: The rows of the Mixed stage's table: nvImageCodec's API, and whether the stage makes the code streams.
ARRANGEMENTS = {
    "Python binding, code streams made here (CODE_STREAMS=mixed)": ("python", True),
    "Python binding, code streams from the CPU stage (the default)": ("python", False),
    "C API (NVIMGCODEC_API=c), code streams from the CPU stage": ("c", False),
}


def timed(work: Callable, batch: tuple[list, list], busy: int, paths: list[str], code_streams: bool = False) -> float:
    """Milliseconds ``work`` takes on ``batch`` while ``busy`` threads run a CPU stage's work (with
    its code streams when ``code_streams``)."""
    stop = threading.Event()
    workers = [threading.Thread(target=cpu_stage_work, args=(paths, stop, 64, code_streams)) for _ in range(busy)]
    for worker in workers:
        worker.start()
    time.sleep(0.05)
    try:
        start = time.perf_counter()
        work(*batch)
        return 1000 * (time.perf_counter() - start)
    finally:
        stop.set()
        for worker in workers:
            worker.join()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=256, help="images in the batch")
    parser.add_argument("--busy", type=int, nargs="+", default=[0, 1, 2], help="busy Python threads per row")
    parser.add_argument("--threads", type=int, nargs="+", default=[0, 4, 8], help="threads making the code streams")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if args.images < 1 or args.rounds < 1 or min(args.busy) < 0 or min(args.threads) < 0:
        parser.error("--images and --rounds must be positive, --busy and --threads at least 0")
    try:
        import nvidia.nvimgcodec as nv
    except ImportError as exc:
        print(f"nvImageCodec is not installed here ({exc}): nothing to measure")
        return 0
    root = os.path.join(tempfile.gettempdir(), "raypipe-bench-gpu-jpegs")
    make_jpeg_folder(root, num_classes=16, per_class=max(1, args.images // 16), seed=0)
    paths = list_file_root(root)[0]
    batch = batches_of(root, args.images, args.images)[0]
    pools = {k: ThreadPoolExecutor(k) if k else None for k in args.threads}
    grid = [(name, k, busy) for name in calls(nv) for k in args.threads for busy in args.busy]
    times: dict[tuple, list[float]] = {key: [] for key in grid}
    for _ in range(args.rounds):
        for name, k, busy in grid:
            times[(name, k, busy)].append(timed(split(calls(nv)[name], pools[k], k), batch, busy, paths))
    corners = (batch[0], [CORNER] * len(batch[0]))
    mixed = {name: mixed_stage(nv, api, here, corners) for name, (api, here) in ARRANGEMENTS.items()}
    mixed_times: dict[tuple, list[float]] = {(name, busy): [] for name in mixed for busy in args.busy}
    for _ in range(args.rounds):
        for name, busy in mixed_times:
            mixed_times[(name, busy)].append(timed(mixed[name], corners, busy, paths, not ARRANGEMENTS[name][1]))
    for pool in pools.values():
        if pool is not None:
            pool.shutdown()
    print(f"batch of {args.images} JPEGs; Python's GIL switch interval {1000 * sys.getswitchinterval():g} ms")
    print(f"{'calls':<58}{'threads':>8}{'busy':>6}{'ms/batch':>10}{'us/image':>10}{'vs idle':>9}")
    for name, k, busy in grid:
        ms = statistics.median(times[(name, k, busy)])
        idle = statistics.median(times[(name, k, 0)]) if 0 in args.busy else ms
        print(f"{name:<58}{k or 1:>8}{busy:>6}{ms:>10.2f}{1000 * ms / args.images:>10.1f}{ms / idle:>8.1f}x")
    print("\nthe Mixed stage's decode of a batch of 16x16 corners (nvImageCodec's CPU backend), beside busy threads")
    print(f"{'arrangement':<68}{'busy':>6}{'ms/batch':>10}{'us/image':>10}{'vs idle':>9}")
    for name, busy in mixed_times:
        ms = statistics.median(mixed_times[(name, busy)])
        idle = statistics.median(mixed_times[(name, 0)]) if 0 in args.busy else ms
        print(f"{name:<68}{busy:>6}{ms:>10.2f}{1000 * ms / args.images:>10.1f}{ms / idle:>8.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
