"""The cost of distribution: img/s delivered to one rank by a raypipe service vs the same
pipeline in one process, time from ``serve`` to the first batch, and peak object-store use.

Both run the ResNet-50 training pipeline (224x224 float32 CHW) on the same JPEG files in
the same run, epochs alternating; the service is paused during in-process epochs so its
read-ahead neither competes for the CPUs nor gives it a head start. Medians.

    python examples/bench_service.py                  # 512 generated ~500x375 JPEGs
    python examples/bench_service.py --data /data/train --images 4096 --threads 4
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import numpy as np
import ray

import raypipe as rp
from raypipe.bench.memory import StorePeak
from raypipe.datasets import make_jpeg_folder
from raypipe.presets import resnet50_train


def in_process_epoch(root: str, batch_size: int, threads: int, epoch: int) -> float:
    with resnet50_train(root, batch_size=batch_size, num_threads=threads, seed=0) as pipe:
        pipe.reset(epoch)
        pipe.run()
        start, images = time.perf_counter(), 0
        while True:
            out, _ = pipe.run()
            images += len(np.asarray(out))
            if pipe.last_batch_info.last_in_epoch:
                return images / (time.perf_counter() - start)


def service_epoch(loader, epoch: int) -> float:
    loader.set_epoch(epoch)
    it = iter(loader)
    next(it)
    start, images = time.perf_counter(), 0
    for out, _ in it:
        images += out.shape[0]
    return images / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", help="a folder of class folders of JPEGs (default: generate)")
    parser.add_argument("--images", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    root = args.data or os.path.join(tempfile.gettempdir(), "raypipe-bench-jpegs")
    if not args.data:
        make_jpeg_folder(root, num_classes=8, per_class=max(1, args.images // 8), seed=0)
    ray.init(num_gpus=1, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    start = time.perf_counter()
    svc = rp.serve(
        resnet50_train,
        name="bench",
        world_size=1,
        num_cpus_per_actor=args.threads,
        replace=True,
        file_root=root,
        batch_size=args.batch_size,
        num_threads=args.threads,
    )
    served = time.perf_counter()
    loader = rp.loader("bench", rank=0, world_size=1)
    next(iter(loader))
    first_batch = time.perf_counter()
    service_epoch(loader, 0)  # warm-up: Ray's agents and imports settle in the first seconds
    in_process_epoch(root, args.batch_size, args.threads, 0)
    local, remote = [], []
    with StorePeak(interval_s=0.02) as store:
        for r in range(args.rounds):
            svc.pause()
            local.append(in_process_epoch(root, args.batch_size, args.threads, r + 1))
            remote.append(service_epoch(loader, r + 1))
    svc.shutdown()
    batch_mb = args.batch_size * 3 * 224 * 224 * 4 / 2**20
    print(
        f"{len(loader) * args.batch_size} images/epoch, batch {args.batch_size} ({batch_mb:.1f} MiB float32), "
        f"{args.threads} threads, loader prefetch {loader.prefetch}, {args.rounds} rounds"
    )
    print(f"{'what':<44}{'value':>14}")
    print(f"{'in-process pipeline, img/s (median)':<44}{statistics.median(local):>14.0f}")
    print(f"{'service -> one rank, img/s (median)':<44}{statistics.median(remote):>14.0f}")
    print(f"{'service / in-process':<44}{statistics.median(remote) / statistics.median(local):>13.2f}x")
    print(f"{'serve() returns, s':<44}{served - start:>14.2f}")
    print(f"{'serve() to first batch at the rank, s':<44}{first_batch - start:>14.2f}")
    print(f"{'peak object store in use, MiB':<44}{store.peak / 2**20:>14.1f}")
    print(f"{'  = batches of 64 x 3 x 224 x 224 float32':<44}{store.peak / 2**20 / batch_mb:>14.1f}")


if __name__ == "__main__":
    main()
