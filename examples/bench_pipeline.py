"""Throughput of the ResNet-50 training pipeline: raypipe vs a plain Pillow + numpy loop.

All read the same JPEG files in the same process and produce the same thing: a
random-area crop resized to 224x224, randomly mirrored, normalized, float32 CHW.
raypipe runs the DESIGN's recipe (``presets.resnet50_train``) twice: with the
decoder on ``device="cpu"`` and on ``device="mixed"`` (on GPU 0 where one is
usable, else the host fallback), and the mixed/cpu ratio is printed. Rounds
alternate between the contenders and the median is reported, so the ratio holds
up on a noisy machine.

    python examples/bench_pipeline.py                  # generates 512 JPEGs of ~500x375
    python examples/bench_pipeline.py --data /imagenet/train --images 2048
    python examples/bench_pipeline.py --profile        # where the time goes, per stage and operator

``raypipe bench`` (the console script) runs the same recipe through more contenders in one
run: the raypipe service, NVIDIA DALI's CPU pipeline, a torch DataLoader, Ray Data and a
decode-only bound, with time to first batch and peak memory.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from raypipe.backend import gpu_available
from raypipe.bench.reference import reference_sample
from raypipe.datasets import make_jpeg_folder
from raypipe.operators.readers import list_file_root
from raypipe.presets import resnet50_train


def run_reference(paths: list[str], batch_size: int, threads: int) -> float:
    rngs = [np.random.default_rng(i) for i in range(len(paths))]
    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        for b in range(0, len(paths), batch_size):
            chunk = range(b, min(b + batch_size, len(paths)))
            np.stack(list(pool.map(lambda i: reference_sample(paths[i], rngs[i]), chunk)))
    return len(paths) / (time.perf_counter() - start)


def run_raypipe(root: str, num_images: int, batch_size: int, threads: int, decoder_device: str = "cpu") -> float:
    """Images per second of the recipe; a mixed decoder runs on GPU 0 where one is usable. Batches
    stay where the pipeline made them (``run()`` returns once they are complete)."""
    device_id = 0 if decoder_device == "mixed" and gpu_available() else None
    with resnet50_train(
        root, batch_size=batch_size, num_threads=threads, decoder_device=decoder_device, device_id=device_id
    ) as pipe:
        pipe.run()
        batches = max(1, num_images // batch_size)
        start = time.perf_counter()
        for _ in range(batches):
            images, _ = pipe.run()
            images.as_tensor()
        return batches * batch_size / (time.perf_counter() - start)


def profile_raypipe(root: str, num_images: int, batch_size: int, threads: int, decoder_device: str) -> None:
    """Print where the recipe's time goes: per stage and operator, and the per-sample overhead."""
    device_id = 0 if decoder_device == "mixed" and gpu_available() else None
    with resnet50_train(
        root, batch_size=batch_size, num_threads=threads, decoder_device=decoder_device, device_id=device_id
    ) as pipe:
        pipe.run()
        pipe.enable_profiling()
        for _ in range(max(1, num_images // batch_size)):
            pipe.run()
    report = pipe.profile()
    samples = next(r["calls"] for r in report["rows"] if (r["stage"], r["name"]) == ("cpu", "sample"))
    print(f"\nprofile, decoder device={decoder_device!r}, {threads} threads (wall time summed over threads)")
    print(f"{'stage':<8}{'operator':<40}{'calls':>8}{'total s':>10}{'ms/call':>10}{'ms/sample':>11}")
    for r in report["rows"]:
        per_sample = 1000 * r["total_s"] / samples
        print(
            f"{r['stage']:<8}{r['name']:<40}{r['calls']:>8}{r['total_s']:>10.3f}{r['mean_ms']:>10.3f}{per_sample:>11.3f}"
        )
    print(f"per-sample Python overhead of the CPU stage: {report['overhead_us_per_sample']:.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", help="a folder of class folders of JPEGs (default: generate)")
    parser.add_argument("--images", type=int, default=512, help="images per timed round")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="print time per stage and operator, then stop")
    args = parser.parse_args()
    root = args.data or os.path.join(tempfile.gettempdir(), "raypipe-bench-jpegs")
    if not args.data:
        make_jpeg_folder(root, num_classes=8, per_class=max(1, args.images // 8), seed=0)
    paths = list_file_root(root)[0][: args.images]
    if args.profile:
        for device in ("cpu", "mixed"):
            profile_raypipe(root, len(paths), args.batch_size, args.threads, device)
        return
    print(f"{len(paths)} JPEGs from {root}, batch {args.batch_size}, {args.threads} threads, {args.rounds} rounds")
    cpu_name = f"raypipe cpu, {args.threads} threads"
    mixed_name = f"raypipe mixed ({'GPU 0' if gpu_available() else 'no GPU'}), {args.threads} threads"
    results: dict[str, list[float]] = {
        "pillow loop, 1 thread": [],
        f"pillow loop, {args.threads} threads": [],
        cpu_name: [],
        mixed_name: [],
    }
    run_reference(paths[: args.batch_size], args.batch_size, 1)
    for _ in range(args.rounds):
        results["pillow loop, 1 thread"].append(run_reference(paths, args.batch_size, 1))
        results[f"pillow loop, {args.threads} threads"].append(run_reference(paths, args.batch_size, args.threads))
        results[cpu_name].append(run_raypipe(root, len(paths), args.batch_size, args.threads, "cpu"))
        results[mixed_name].append(run_raypipe(root, len(paths), args.batch_size, args.threads, "mixed"))
    base = statistics.median(results["pillow loop, 1 thread"])
    print(f"{'pipeline':<36}{'img/s (median)':>16}{'vs pillow 1 thread':>22}")
    for name, values in results.items():
        value = statistics.median(values)
        print(f"{name:<36}{value:>16.0f}{value / base:>21.2f}x")
    ratios = [m / c for m, c in zip(results[mixed_name], results[cpu_name])]
    print(f"recipe with decoder device='mixed' vs 'cpu', same run: {statistics.median(ratios):.2f}x (median of rounds)")


if __name__ == "__main__":
    main()
