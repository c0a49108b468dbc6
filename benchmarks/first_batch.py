"""Where the time from ``rp.serve`` to a rank's first batch goes, on a running local Ray.

Starts a service, opens rank 0's loader (which starts the rank's pipeline actor and waits until
it has built its pipeline) and takes the first batch, several services in a row; prints each
phase. ``RAYPIPE_*`` variables reach the actors (``RAYPIPE_HOST_RESIZE=pillow`` to compare).

    python benchmarks/first_batch.py --trials 3 --images 512
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import ray

import raypipe as rp
from raypipe.datasets import make_jpeg_folder
from raypipe.presets import resnet50_train


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--images", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--settle", type=float, default=2.0, help="seconds Ray idles before each service (its workers start)"
    )
    args = parser.parse_args()

    root = os.path.join(tempfile.gettempdir(), f"raypipe-first-batch-{args.images}")
    if not os.path.isdir(root):
        make_jpeg_folder(root, num_classes=4, per_class=args.images // 4, seed=0)
    env = {k: v for k, v in os.environ.items() if k.startswith("RAYPIPE_")}
    ray.init(
        address="local",
        num_cpus=2,
        num_gpus=1,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": env},
    )
    ray.get(ray.remote(lambda: None).remote())  # a running Ray, as the target says

    print("trial  serve s  loader s  first batch s  total s")
    for trial in range(args.trials):
        name = f"first-batch-{trial}"
        time.sleep(args.settle)
        began = time.perf_counter()
        svc = rp.serve(
            resnet50_train,
            name=name,
            world_size=1,
            seed=0,
            file_root=root,
            batch_size=args.batch_size,
            num_threads=args.threads,
        )
        served = time.perf_counter()
        loader = rp.loader(name, rank=0, world_size=1, output="numpy")
        opened = time.perf_counter()
        loader.set_epoch(0)
        next(iter(loader))
        first = time.perf_counter()
        print(
            f"{trial:<5}  {served - began:7.2f}  {opened - served:8.2f}  {first - opened:13.2f}  {first - began:7.2f}"
        )
        del loader
        svc.shutdown()


if __name__ == "__main__":
    main()
