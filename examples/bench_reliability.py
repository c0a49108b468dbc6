"""What failures and resumes cost: recovery times and position-state costs.

1. ``state_dict()`` / ``load_state_dict()`` in the middle of a 2,000,000,000-sample epoch,
   for every shuffle mode: plan arithmetic only (the state, the resumed plan and the
   first batch's sample indices), no decoding.
2. On a local Ray instance: the time from a pipeline actor's SIGKILL to the rank's next
   batch (against the time of an undisturbed batch, same run), and from the
   coordinator's SIGKILL to a new loader attached.

    python examples/bench_reliability.py
    python examples/bench_reliability.py --rounds 10 --images 256
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import tempfile
import time

import ray

import raypipe as rp
from raypipe.datasets import make_jpeg_folder
from raypipe.service_config import ServiceConfig


def state_costs(rounds: int) -> None:
    n, world, batch = 2_000_000_000, 4096, 256
    print(f"position state at mid-epoch, N={n:,}, world {world} x batch {batch} (median of {rounds}, ms)")
    print(f"{'shuffle':<10}{'state_dict':>12}{'load_state_dict':>17}{'first batch after':>19}")
    for shuffle in ("global", "buffer", "none"):
        config = ServiceConfig("bench", world, batch, n, "digest", seed=1, shuffle=shuffle)
        k = config.plan(3).num_batches // 2
        save, load, first = [], [], []
        for _ in range(rounds):
            t0 = time.perf_counter()
            state = config.state(3, 0, k)
            t1 = time.perf_counter()
            epoch, start = config.resume(state, owner="bench")
            t2 = time.perf_counter()
            config.plan(epoch, start).batch(world - 1, 0)
            t3 = time.perf_counter()
            save.append(t1 - t0)
            load.append(t2 - t1)
            first.append(t3 - t2)
        print(
            f"{shuffle:<10}{statistics.median(save) * 1e3:>12.3f}{statistics.median(load) * 1e3:>17.3f}"
            f"{statistics.median(first) * 1e3:>19.3f}"
        )


@rp.pipeline_def(batch_size=16, num_threads=1)
def small(file_root):
    jpegs, labels = rp.fn.readers.file(file_root=file_root, name="Reader")
    images = rp.fn.decoders.image_random_crop(jpegs)
    return rp.fn.resize(images, resize_x=64, resize_y=64), labels


def recovery(root: str, rounds: int) -> None:
    ray.init(num_cpus=2, num_gpus=1, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    svc = rp.serve(
        small,
        name="bench-recovery",
        world_size=1,
        file_root=root,
        num_cpus_per_actor=0.5,
        replace=True,
        max_restarts=-1,
    )
    try:
        loader = rp.loader("bench-recovery", rank=0, world_size=1, output="numpy", prefetch=1)
        normal, after_actor, attach = [], [], []
        epoch = 0
        for _ in range(rounds):
            loader.set_epoch(epoch)
            it = iter(loader)
            next(it)
            t0 = time.perf_counter()
            next(it)
            normal.append(time.perf_counter() - t0)
            pid = svc.stats()["actors"][0]["pid"]
            t0 = time.perf_counter()
            os.kill(pid, signal.SIGKILL)
            next(it)
            after_actor.append(time.perf_counter() - t0)
            pid = svc.stats()["coordinator"]["pid"]
            t0 = time.perf_counter()
            os.kill(pid, signal.SIGKILL)
            rp.loader("bench-recovery", rank=0, world_size=1)
            attach.append(time.perf_counter() - t0)
            epoch += 1
    finally:
        svc.shutdown()
        ray.shutdown()
    print(f"\nrecovery on a local Ray instance (median of {rounds}, ms)")
    print(f"{'what':<58}{'ms':>8}")
    print(f"{'next batch, undisturbed':<58}{statistics.median(normal) * 1e3:>8.0f}")
    print(f"{'pipeline actor SIGKILL -> the rank has its next batch':<58}{statistics.median(after_actor) * 1e3:>8.0f}")
    print(f"{'coordinator SIGKILL -> a new loader is attached':<58}{statistics.median(attach) * 1e3:>8.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--images", type=int, default=128)
    args = parser.parse_args()
    state_costs(max(args.rounds, 5))
    with tempfile.TemporaryDirectory() as root:
        make_jpeg_folder(root, num_classes=4, per_class=max(1, args.images // 4), seed=0)
        recovery(root, args.rounds)


if __name__ == "__main__":
    main()
