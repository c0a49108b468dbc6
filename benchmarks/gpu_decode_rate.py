"""How fast nvImageCodec decodes the ResNet-50 recipe's random crops on this GPU, alone: the ceiling
the Mixed stage works under, and whether decoding two batches at once raises it.

    python benchmarks/gpu_decode_rate.py [--images 512] [--batch 256] [--seconds 4] [--decoders 1 2 3]
        [--hw-load 1 0.65] [--options '' 'nvjpeg_cuda_decoder:hybrid_huffman_threshold=0']
        [--busy 0 4] [--switch-ms 5 0.5]

Every row decodes the same batches (generated JPEGs of about 500x375, one random-resized-crop
window each, drawn as the recipe draws them) over ``--seconds``, each batch waited for on its
stream. ``decoders`` is how many :class:`raypipe.gpu_decode.GpuImageDecoder` decode batches at
the same time, each on its own thread and CUDA stream (as ``RAYPIPE_GPU_DECODERS`` shares a
pipeline's batches); ``hw`` the hardware decoder's share (nvJPEG's CUDA decoder takes the rest);
``--options`` adds nvImageCodec decoder options (``RAYPIPE_NVIMGCODEC_OPTIONS``). Two further
rows split one decode into its parts, one decoder, hardware share 1: the code streams alone (host
work, no decode), and decoding code streams made beforehand (the library's own time per batch).
The last rows decode as a pipeline's Mixed stage does (one decoder, hardware share 1, into one
buffer per batch) while ``--busy`` Python threads do a CPU stage's work for the GPU path (read a
file, walk its JPEG header, draw crop windows), at each of Python's GIL switch intervals
``--switch-ms``: how much a decode loses to the threads that share its process's GIL.

Needs a CUDA GPU with nvImageCodec (the ``gpu-cu12`` / ``gpu-cu13`` extras, or the GPU kit);
without one it says why and exits 0.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable

import numpy as np

from raypipe.backend import gpu_available, gpu_unavailable_reason
from raypipe.datasets import make_jpeg_folder
from raypipe.gpu_decode import OPTIONS_ENV, GpuImageDecoder, code_stream, nvimgcodec_available
from raypipe.jpeg_header import frame_size
from raypipe.kernels.launch import Packed
from raypipe.operators.crop_window import DRAWS, random_crop_windows
from raypipe.operators.readers import list_file_root, read_file

ATTEMPTS = 10


def batches_of(root: str, images: int, batch: int, seed: int = 0) -> list[tuple[list[np.ndarray], list]]:
    """The files of ``root`` in batches of ``batch``, each image with a random-resized-crop window
    (area 0.08-1, aspect ratio 3/4-4/3, as the recipe)."""
    paths = list_file_root(root)[0][:images]
    data = [read_file(path) for path in paths]
    sizes = np.array([frame_size(d) for d in data], dtype=np.int64).T
    draws = np.random.default_rng(seed).random((DRAWS, ATTEMPTS, len(data)))
    windows = [tuple(int(v) for v in w) for w in random_crop_windows(sizes, (0.08, 1.0), (3 / 4, 4 / 3), draws)]
    return [(data[i : i + batch], windows[i : i + batch]) for i in range(0, len(data) - batch + 1, batch)]


def timed(work: Callable[[int], int], workers: int, seconds: float) -> tuple[float, float]:
    """Run ``work(worker)`` (returns images done) on ``workers`` threads until ``seconds`` have
    passed; images per second and host CPU milliseconds per image (the whole process)."""
    stop = threading.Event()
    done = [0] * workers

    def loop(k: int) -> None:
        work(k)  # warm-up: first allocations and plugin start
        while not stop.is_set():
            done[k] += work(k)

    threads = [threading.Thread(target=loop, args=(k,)) for k in range(workers)]
    for thread in threads:
        thread.start()
    time.sleep(1.0)
    first, cpu, wall = sum(done), time.process_time(), time.perf_counter()
    time.sleep(seconds)
    images, cpu, wall = sum(done) - first, time.process_time() - cpu, time.perf_counter() - wall
    stop.set()
    for thread in threads:
        thread.join()
    return images / wall, 1000 * cpu / max(images, 1)


def decode_rate(
    batches: list, count: int, hw: float, threads: int, seconds: float, options: str = "", into_given: bool = False
) -> tuple[float, float]:
    """Images per second and host ms per image of ``count`` decoders at hardware share ``hw``,
    with nvImageCodec decoder ``options`` added to raypipe's; ``into_given``: each batch into one
    buffer (the sizes given, as the Mixed stage gives them)."""
    import cupy

    os.environ[OPTIONS_ENV] = options
    try:
        pool = [GpuImageDecoder(0, threads, hw, decoders=1) for _ in range(count)]
    finally:
        os.environ.pop(OPTIONS_ENV, None)
    streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(count)]
    turn = [0] * count

    def work(k: int) -> int:
        cupy.cuda.Device(0).use()
        data, windows = batches[turn[k] % len(batches)]
        turn[k] += 1
        sizes = [window[2:] for window in windows] if into_given else None
        images = pool[k].decode(data, windows, False, streams[k], sizes)  # as the Mixed stage
        streams[k].synchronize()
        return len(images) if isinstance(images, Packed) else sum(image is not None for image in images)

    try:
        return timed(work, count, seconds)
    finally:
        for decoder in pool:
            decoder.close()


def decode_rows(
    batches: list, decoders: list[int], loads: list[float], threads: int, seconds: float, options: list[str]
) -> list:
    """``(name, img/s, host ms/img)`` for each set of options, hardware share and number of decoders."""
    return [
        (
            f"{count} decoder(s), hw {hw:g}" + (f", {extra}" if extra else ""),
            *decode_rate(batches, count, hw, threads, seconds, extra),
        )
        for extra in options
        for hw in loads
        for count in decoders
    ]


def part_rows(batches: list, threads: int, seconds: float) -> list:
    """One decoder, hardware share 1: making the code streams alone, and decoding ready ones."""
    import cupy

    decoder = GpuImageDecoder(0, threads, 1.0, decoders=1)
    stream = cupy.cuda.Stream(non_blocking=True)
    made = [[code_stream(d, w) for d, w in zip(*batch)] for batch in batches]
    turn = [0]

    def streams_only(_: int) -> int:
        data, windows = batches[turn[0] % len(batches)]
        turn[0] += 1
        return len([code_stream(d, w) for d, w in zip(data, windows)])

    def decode_only(_: int) -> int:
        cupy.cuda.Device(0).use()
        code_streams = made[turn[0] % len(made)]
        turn[0] += 1
        images = decoder._decoder.decode(code_streams, params=decoder._params[False], cuda_stream=stream.ptr)
        stream.synchronize()
        return sum(image is not None for image in images)

    rows = [("code streams alone (host)", *timed(streams_only, 1, seconds / 2))]
    rows.append(("decode of ready code streams", *timed(decode_only, 1, seconds)))
    decoder.close()
    return rows


def cpu_stage_work(paths: list[str], stop: threading.Event, chunk: int = 64, code_streams: bool = False) -> int:
    """A CPU stage's work on the GPU path until ``stop``: read each file, walk its JPEG header and
    draw crop windows, a chunk of files at a time, and with ``code_streams`` make each file's
    nvImageCodec code stream for its window, as the pipeline's CPU stage does by default; returns
    how many files it read."""
    rng = np.random.default_rng(1)
    k = 0
    while not stop.is_set():
        part = [paths[(k + i) % len(paths)] for i in range(chunk)]
        k += chunk
        data = [read_file(path) for path in part]
        sizes = np.array([frame_size(d) for d in data], dtype=np.int64).T
        windows = random_crop_windows(sizes, (0.08, 1.0), (3 / 4, 4 / 3), rng.random((DRAWS, ATTEMPTS, chunk)))
        if code_streams:
            [code_stream(d, tuple(w)) for d, w in zip(data, windows.tolist())]
    return k


def contention_rows(
    batches: list, paths: list[str], threads: int, seconds: float, busy: list[int], switches: list[float]
) -> list:
    """One decoder, hardware share 1, into one buffer per batch, while ``busy`` Python threads do
    :func:`cpu_stage_work`, at each GIL switch interval in ``switches`` (ms)."""
    rows = []
    interval = sys.getswitchinterval()
    for count in busy:
        for switch in switches if count else [interval * 1000]:
            stop = threading.Event()
            workers = [threading.Thread(target=cpu_stage_work, args=(paths, stop)) for _ in range(count)]
            sys.setswitchinterval(switch / 1000)
            for worker in workers:
                worker.start()
            try:
                rate, cpu = decode_rate(batches, 1, 1.0, threads, seconds, into_given=True)
            finally:
                stop.set()
                for worker in workers:
                    worker.join()
                sys.setswitchinterval(interval)
            name = f"1 decoder, hw 1, into one buffer, {count} busy threads"
            name += f", switch {switch:g} ms" if count else ""
            rows.append((name, rate, cpu))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", help="a folder of class folders of JPEGs (default: generate)")
    parser.add_argument("--images", type=int, default=512)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--seconds", type=float, default=4.0, help="per row")
    parser.add_argument("--threads", type=int, default=4, help="nvImageCodec's CPU threads per decoder")
    parser.add_argument("--decoders", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--hw-load", type=float, nargs="+", default=[1.0])
    parser.add_argument(
        "--options",
        nargs="+",
        default=[""],
        help="nvImageCodec decoder options, one set of rows each ('' for none), for example "
        "'nvjpeg_cuda_decoder:hybrid_huffman_threshold=0' (nvJPEG's Huffman decoding on the GPU)",
    )
    parser.add_argument(
        "--busy", type=int, nargs="+", default=[0, 4],
        help="Python threads doing a CPU stage's work during the last rows, one set of rows each",
    )  # fmt: skip
    parser.add_argument(
        "--switch-ms", type=float, nargs="+", default=[5.0, 0.5],
        help="Python's GIL switch intervals for the rows with busy threads",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if any(count < 0 for count in args.busy) or any(ms <= 0 for ms in args.switch_ms):
        parser.error("--busy values must be at least 0 and --switch-ms values positive")
    if not gpu_available() or not nvimgcodec_available():
        reason = gpu_unavailable_reason() or "nvImageCodec is not usable here"
        print(f"gpu_decode_rate: needs a CUDA GPU with nvImageCodec ({reason}); nothing measured")
        return 0
    root = args.data or os.path.join(tempfile.gettempdir(), "raypipe-bench-gpu-jpegs")
    if not args.data:
        make_jpeg_folder(root, num_classes=16, per_class=max(1, args.images // 16), seed=0)
    batches = batches_of(root, args.images, args.batch)
    if not batches:
        parser.error(f"--images {args.images} gives no whole batch of {args.batch}")
    rows = decode_rows(batches, args.decoders, args.hw_load, args.threads, args.seconds, args.options)
    rows += part_rows(batches, args.threads, args.seconds)
    paths = list_file_root(root)[0][: args.images]
    rows += contention_rows(batches, paths, args.threads, args.seconds, args.busy, args.switch_ms)
    print(f"\nnvImageCodec on GPU 0: batches of {args.batch} random crops, {args.threads} CPU threads per decoder")
    print("| decode | img/s | host CPU ms/img |")
    print("|---|---|---|")
    for name, rate, cpu in rows:
        print(f"| {name} | {rate:,.0f} | {cpu:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
