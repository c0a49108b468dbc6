"""The GPU benchmark: the ResNet-50 training pipeline in one pipeline on GPU 0.

Mixed decode (nvImageCodec with region-of-interest decode where installed, else host decode
and pinned asynchronous copies), resize 224, crop_mirror_normalize with a random mirror,
float32 NCHW, batch 256. Prints img/s, host CPU time per image (all threads of this
process), the pipeline's GPU memory pool (used, held and limit, each epoch, to show it stays
flat), for the rows in this process how busy each stage's thread was in one more epoch, profiled
and untimed (the one near 100 % bounds the rate), for the actor's row the same over its timed epochs
and, per timed epoch, its first batch's wait and the rate after it (the actor runs on into the
next epoch as a pipeline in this process does: a wait far longer than a batch's time says it
stalled there), and, for reference in the same run, the same recipe with ``device="cpu"`` on the
same files.

Where the GPU stage runs (``--where``): ``process``, the pipeline in this process, which stands
for the training rank's own (one CUDA context, as DALI runs); ``actor``, the service's layout:
a pipeline actor on the same GPU serves this process as rank 0 through CUDA IPC (two CUDA
contexts on one GPU, which take turns without MPS), its host CPU time counted with this
process's; ``both`` runs the two in one go.

    python examples/bench_gpu.py                       # generates 5,120 JPEGs of ~500x375
    python examples/bench_gpu.py --data /imagenet/train --images 20000 --threads 4
    python examples/bench_gpu.py --where both          # in the rank's process and in the actor
    python examples/bench_gpu.py --hw-load 0.65 0.9 1  # the hardware decoder's share of each batch
    python examples/bench_gpu.py --decoders 1 2        # nvImageCodec decoders sharing each batch
    python examples/bench_gpu.py --decode-into 1 0     # a batch into one buffer, or images allocated
    python examples/bench_gpu.py --code-streams cpu mixed  # which stage makes the code streams
    python examples/bench_gpu.py --api c python        # nvImageCodec's C API or its Python binding
    python examples/bench_gpu.py --source caffe        # the JPEGs converted into LMDB (or tfrecord, ...)
    python examples/bench_gpu.py --mixed-threads 1 4 --switch-ms 5 0.5
                                   # CPU-stage threads of the mixed rows; Python's GIL switch interval

Without a GPU it runs the host fallback (and says so), which is what the mixed/cpu ratio on
a laptop measures.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import itertools
import os
import sys
import tempfile
import time
from collections.abc import Iterator

from raypipe.backend import gpu_available, gpu_unavailable_reason
from raypipe.convert.plan import list_source
from raypipe.convert.run import convert
from raypipe.datasets import make_jpeg_folder
from raypipe.formats.registry import FORMATS, get
from raypipe.gpu_decode import CODE_STREAMS_ENV, DECODERS_ENV, INTO_ENV, nvimgcodec_available
from raypipe.nvimgcodec_c import API_ENV
from raypipe.presets import resnet50_train
from raypipe.profile import report_between
from raypipe.stage_threads import THREADS_ENV

NAME_WIDTH = 56


def run(
    root: str,
    decoder_device: str,
    batch_size: int,
    threads: int,
    batches: int,
    epochs: int,
    hw_load: float = 1.0,
    decoders: int = 1,
    switch_ms: float | None = None,
    cpu_threads: int | None = None,
    decode_into: bool = True,
    code_streams: str = "cpu",
    api: str = "python",
) -> dict:
    """Time ``batches`` batches per epoch after one warm-up batch, with ``decoders`` nvImageCodec
    decoders sharing each batch, ``cpu_threads`` CPU-stage threads (None: the pipeline's choice),
    Python's GIL switch interval at ``switch_ms`` (None: as it is) and each batch decoded into one
    buffer (``decode_into``) or into images nvImageCodec allocates, the code streams made by the
    ``code_streams`` stage (``cpu`` or ``mixed``), through nvImageCodec's ``api`` (``c`` or
    ``python``); returns rates and memory."""
    device_id = 0 if decoder_device == "mixed" and gpu_available() else None
    interval = sys.getswitchinterval()
    if switch_ms is not None:
        sys.setswitchinterval(switch_ms / 1000)
    settings = {
        DECODERS_ENV: str(decoders),
        THREADS_ENV: None if cpu_threads is None else str(cpu_threads),
        INTO_ENV: str(int(decode_into)),
        CODE_STREAMS_ENV: code_streams,
        API_ENV: api,
    }
    try:
        with (
            environment(settings),
            resnet50_train(
                root,
                batch_size=batch_size,
                num_threads=threads,
                decoder_device=decoder_device,
                device_id=device_id,
                hw_decoder_load=hw_load,
            ) as pipe,
        ):
            pipe.run()
            wall = cpu = 0.0
            memory = []
            for _ in range(epochs):
                began, began_cpu = time.perf_counter(), time.process_time()
                for _ in range(batches):
                    images, _ = pipe.run()
                wall += time.perf_counter() - began
                cpu += time.process_time() - began_cpu
                memory.append(pipe.memory_stats())
            shape = tuple(images.as_tensor().shape)
            pipe.enable_profiling()  # one more epoch, untimed: where the time goes
            for _ in range(batches):
                pipe.run()
            cpu_stage = pipe.device_report()["cpu_stage"]
            stages = stage_shares(pipe.profile(), cpu_stage["threads"])
    finally:
        sys.setswitchinterval(interval)
    images_done = epochs * batches * batch_size
    return {
        "img_per_s": images_done / wall,
        "cpu_ms_per_image": 1000 * cpu / images_done,
        "memory": memory,
        "shape": shape,
        "stages": stages,
        "cpu_stage": cpu_stage,
    }


@contextlib.contextmanager
def environment(settings: dict[str, str | None]) -> Iterator[None]:
    """``settings`` in this process's environment (None: unset) for the block, then as they were:
    the pipeline reads them where it is built, a local Ray cluster's workers when it starts."""
    previous = {name: os.environ.get(name) for name in settings}
    try:
        _set_environment(settings)
        yield
    finally:
        _set_environment(previous)


def _set_environment(values: dict[str, str | None]) -> None:
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def stage_shares(profile: dict, threads: int) -> list[tuple[str, float, float]]:
    """``(what, ms per batch, share of the wall time)`` of each stage's thread from the pipeline's
    profile: the stage whose thread is busy nearly all the time is the one that bounds the rate.
    The CPU stage's share is of its ``threads`` threads together; the GPU stage's is the time its
    thread spends queuing kernels (they run later on the device), the caller's is waiting."""
    wall = profile["wall_s"]
    batches = max(1, max((row["calls"] for row in profile["rows"] if row["stage"] == "caller"), default=1))
    shares = []
    for row in profile["rows"]:
        stage, name, total = row["stage"], row["name"], row["total_s"]
        if stage == "cpu" and name != "sample":
            continue
        label = "CPU stage, all samples" if stage == "cpu" else f"{stage}: {name}"
        share = total / wall / (threads if stage == "cpu" else 1)
        shares.append((label, 1000 * total / batches, share))
    gpu_total = sum(row["total_s"] for row in profile["rows"] if row["stage"] == "gpu")
    shares.append(("gpu: all operators (host time)", 1000 * gpu_total / batches, gpu_total / wall))
    return shares


def run_actor(
    root: str,
    batch_size: int,
    threads: int,
    batches: int,
    epochs: int,
    api: str = "python",
    cpu_threads: int | None = None,
) -> dict:
    """The recipe served by a pipeline actor to this process as rank 0 on GPU 0 (by CUDA IPC;
    host batches without a GPU), decoding through nvImageCodec's ``api``, its CPU stage on
    ``cpu_threads`` threads (None: the pipeline's choice): a warm-up epoch, then
    ``epochs`` timed, each of at most ``batches`` batches. CPU time is this process's and the
    actor's; memory per epoch is the actor's pool and, with torch on a GPU, the whole device's use.
    Each timed epoch also gives its first batch's wait (``first_ms``: the actor runs on into the
    next epoch, so a wait far longer than a batch's time is a stall at the epoch's start) and the
    rate after it (``steady_img_per_s``); ``stages`` is where the actor's pipeline spent its time
    from the end of the warm-up epoch on (:func:`stage_shares`)."""
    import psutil
    import ray

    import raypipe as rp

    try:
        import torch
    except ImportError:
        torch = None
    on_gpu = gpu_available() and torch is not None and torch.cuda.is_available()
    with environment({API_ENV: api, THREADS_ENV: None if cpu_threads is None else str(cpu_threads)}):
        ray.init(address="local", include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        svc = rp.serve(
            resnet50_train, name="bench-gpu", world_size=1, file_root=root, batch_size=batch_size,
            num_threads=threads, decoder_device="mixed",
        )  # fmt: skip
        try:
            loader = rp.loader("bench-gpu", rank=0, world_size=1, device="cuda:0" if on_gpu else "cpu",
                               output="torch" if torch is not None else "numpy")  # fmt: skip
            actor = psutil.Process(svc.stats()["actors"][0]["pid"])
            wall = cpu = steady_s = 0.0
            images_done, steady_images, memory, first_ms = 0, 0, [], []
            for epoch in range(epochs + 1):
                loader.set_epoch(epoch)
                began, began_cpu = time.perf_counter(), time.process_time() + sum(actor.cpu_times()[:2])
                seen = 0
                for k, (images, _) in enumerate(loader):
                    if k == 0:
                        first = time.perf_counter()
                    seen += images.shape[0]
                    shape = tuple(images.shape)
                    if k + 1 == batches:
                        break
                if on_gpu:
                    torch.cuda.synchronize()
                if epoch == 0:
                    warm = svc.stats()["actors"][0]["stages"]
                    continue  # warm-up: the actor's start, first compiles and allocations
                ended = time.perf_counter()
                wall += ended - began
                cpu += time.process_time() + sum(actor.cpu_times()[:2]) - began_cpu
                images_done += seen
                first_ms.append(1000 * (first - began))
                steady_s += ended - first
                steady_images += seen - shape[0]
                usage = dict(svc.stats()["actors"][0]["memory"])
                if on_gpu:
                    free, total = torch.cuda.mem_get_info(0)
                    usage["device_used_mb"] = round((total - free) / 2**20)
                memory.append(usage)
            served = svc.stats()["actors"][0]
            cpu_stage = served["device"]["cpu_stage"]
            stages = stage_shares(report_between(warm, served["stages"]), cpu_stage["threads"])
            del loader
        finally:
            svc.shutdown()
    finally:
        ray.shutdown()
    return {
        "img_per_s": images_done / wall,
        "cpu_ms_per_image": 1000 * cpu / images_done,
        "memory": memory,
        "shape": shape,
        "stages": stages,
        "cpu_stage": cpu_stage,
        "first_ms": first_ms,
        "steady_img_per_s": steady_images / steady_s if steady_s > 0 else None,
    }


def converted(root: str, fmt: str) -> str:
    """``root``'s JPEGs converted into ``fmt`` by ``raypipe convert``, in a temporary folder named
    after the source's digest: written once, then reused."""
    source = list_source(root)
    dst = os.path.join(tempfile.gettempdir(), f"raypipe-bench-gpu-{fmt}-{source.digest()[:12]}")
    summary = convert(source, dst, get(fmt), part_size=1024, workers=os.cpu_count() or 1)
    print(f"reading {summary.samples} JPEGs as {fmt} from {dst}")
    return dst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", help="a folder of class folders of JPEGs (default: generate)")
    parser.add_argument(
        "--source", choices=("files", *FORMATS), default="files",
        help="read the JPEGs as a folder of files, or converted by raypipe convert (once, into a cached folder "
        "beside the generated data) into a container format: its reader in every row",
    )  # fmt: skip
    parser.add_argument("--images", type=int, default=5120, help="images per timed epoch")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--cpu-images", type=int, default=1024, help="images for the device='cpu' reference")
    parser.add_argument(
        "--where", choices=("process", "actor", "both"), default="process",
        help="the GPU stage in this (the rank's) process, in a pipeline actor serving it, or both",
    )  # fmt: skip
    parser.add_argument(
        "--hw-load", type=float, nargs="+", default=[1.0], metavar="SHARE",
        help="hw_decoder_load: the share of each batch the hardware JPEG decoder takes; several values "
        "give one in-process row each (nvJPEG's CUDA decoder takes the rest, its Huffman stage on the threads)",
    )  # fmt: skip
    parser.add_argument(
        "--decoders", type=int, nargs="+", default=[1], metavar="N",
        help="nvImageCodec decoders sharing each batch at once (RAYPIPE_GPU_DECODERS); several values give "
        "one in-process row each",
    )  # fmt: skip
    parser.add_argument(
        "--mixed-threads", type=int, nargs="+", metavar="N",
        help="CPU-stage threads of the mixed rows, in this process and in the actor (RAYPIPE_CPU_STAGE_THREADS; "
        "default: the pipeline's choice, one where the GPU decodes); several values give one row each",
    )  # fmt: skip
    parser.add_argument(
        "--switch-ms", type=float, nargs="+", metavar="MS",
        help="Python's GIL switch interval for the mixed rows (sys.setswitchinterval, default 5 ms as "
        "Python has it); several values give one row each",
    )  # fmt: skip
    parser.add_argument(
        "--decode-into", type=int, nargs="+", choices=(0, 1), default=[1], metavar="0|1",
        help="1: each batch decodes into one buffer from the pipeline's pool (RAYPIPE_GPU_DECODE_INTO); "
        "0: nvImageCodec allocates each image; both give one row each",
    )  # fmt: skip
    parser.add_argument(
        "--code-streams", nargs="+", choices=("cpu", "mixed"), default=["cpu"],
        help="the stage that makes nvImageCodec's code streams (RAYPIPE_GPU_CODE_STREAMS): the CPU stage "
        "(the default) or the Mixed stage; both give one row each",
    )  # fmt: skip
    parser.add_argument(
        "--api", nargs="+", choices=("c", "python"), default=["c"],
        help="nvImageCodec's API for the mixed rows (RAYPIPE_NVIMGCODEC_API): its C API (the default) or "
        "its Python binding; both give one row each, in this process and in an actor",
    )  # fmt: skip
    args = parser.parse_args()
    mixed_threads = args.mixed_threads or [None]
    switches = args.switch_ms or [None]
    if any(count < 1 for count in args.mixed_threads or []):
        parser.error(f"--mixed-threads values must be positive, got {mixed_threads}")
    if any(ms <= 0 for ms in args.switch_ms or []):
        parser.error(f"--switch-ms values must be positive, got {args.switch_ms}")
    if any(not 0.0 <= share <= 1.0 for share in args.hw_load):
        parser.error(f"--hw-load values must be within [0, 1], got {args.hw_load}")
    if any(count < 1 for count in args.decoders):
        parser.error(f"--decoders values must be positive, got {args.decoders}")
    where = "GPU 0" if gpu_available() else f"no GPU ({gpu_unavailable_reason()}): host fallback"
    decoder = "nvImageCodec" if gpu_available() and nvimgcodec_available() else "host decode"
    # the setting first: generating the JPEGs the first time takes a while
    print(f"{where}; mixed decoder: {decoder}; batch {args.batch_size}, {args.threads} threads", flush=True)
    root = args.data or os.path.join(tempfile.gettempdir(), "raypipe-bench-gpu-jpegs")
    if not args.data:
        make_jpeg_folder(root, num_classes=16, per_class=max(1, args.images // 16), seed=0)
    if args.source != "files":
        root = converted(root, args.source)
    batches = max(1, args.images // args.batch_size)
    # the reference first, so that each row prints (with its ratio) as soon as it is measured
    cpu = run(root, "cpu", args.batch_size, args.threads, max(1, args.cpu_images // args.batch_size), 1)
    print(f"{'recipe':<{NAME_WIDTH}}{'img/s':>10}{'host CPU ms/img':>18}{'vs cpu':>9}")
    sizes = (args.batch_size, args.threads)
    rows = [("cpu (reference)", lambda: cpu)]
    if args.where in ("process", "both"):
        grid = itertools.product(
            args.hw_load, args.decoders, mixed_threads, switches, args.decode_into, args.code_streams, args.api
        )
        for share, count, threads, switch, into, streams, api in grid:
            name = "mixed, in this process" + (f" (hw {share:g})" if len(args.hw_load) > 1 else "")
            name += f" ({count} decoders)" if len(args.decoders) > 1 else ""
            name += f" ({threads} CPU-stage threads)" if threads is not None else ""
            name += f" (switch {switch:g} ms)" if switch is not None else ""
            name += "" if len(args.decode_into) == 1 else (" (one buffer)" if into else " (images allocated)")
            name += "" if len(args.code_streams) == 1 else f" (code streams: {streams} stage)"
            name += "" if len(args.api) == 1 else f" ({api} API)"
            measure = functools.partial(
                run, root, "mixed", args.batch_size, args.threads, batches, args.epochs, share, count, switch, threads,
                bool(into), streams, api,
            )  # fmt: skip
            rows.append((name, measure))
    if args.where in ("actor", "both"):
        for api, threads in itertools.product(args.api, mixed_threads):
            name = "mixed, served by an actor" + ("" if len(args.api) == 1 else f" ({api} API)")
            name += f" ({threads} CPU-stage threads)" if threads is not None else ""
            rows.append((name, functools.partial(run_actor, root, *sizes, batches, args.epochs, api, threads)))
    for name, measure in rows:
        result = measure()
        ratio = result["img_per_s"] / cpu["img_per_s"]
        print(
            f"{name:<{NAME_WIDTH}}{result['img_per_s']:>10.0f}{result['cpu_ms_per_image']:>18.2f}{ratio:>8.2f}x",
            flush=True,
        )
        if result is not cpu:
            print(f"  output batch shape {result['shape']}")
            print(f"  CPU stage on {result['cpu_stage']['threads']} threads: {result['cpu_stage']['detail']}")
            for epoch, memory in enumerate(result["memory"]):
                print(f"  epoch {epoch}: GPU memory {memory}")
            if "first_ms" in result:
                waits = ", ".join(f"{ms:.0f}" for ms in result["first_ms"])
                steady = result["steady_img_per_s"]
                print(f"  first batch of each timed epoch after {waits} ms; from there on {steady or 0:.0f} img/s")
            for what, ms, share in result.get("stages", []):
                print(f"  {what:<48}{ms:>9.2f} ms/batch {100 * share:>6.1f} % busy")


if __name__ == "__main__":
    main()
