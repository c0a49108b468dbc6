"""What running the pipeline inside Ray costs, before and after shipping anything.

Three ways to run the same ResNet-50 CPU recipe (``presets.resnet50_train``, float32), in
alternating rounds on one local Ray, each timed over the same number of batches after a
warm-up, with the CPU time of the process that runs the pipeline:

- ``driver``: the pipeline in this process (``Pipeline.run`` in a loop);
- ``bare actor``: the same loop inside a Ray actor that ships nothing (the floor for anything
  that runs in a Ray worker);
- ``service``: ``rp.serve`` plus ``rp.loader`` in this process (the pipeline actor ships every
  batch to the rank).

The table gives img/s, the ratio to the driver, the pipeline process's CPU use (of the
machine's cores), its CPU milliseconds per image, and the share of the machine's CPU time
the hypervisor took (steal) while it ran: rows with unlike steal do not compare.

The two Ray rows run at ``--niceness`` (the service's ``niceness``; 0 by default, this
process's, which the rank's pipeline actor takes when none is given; 15 is Ray's for workers).
``--busy K`` keeps K busy processes at niceness 0 beside every round, as a training process
computing on the same cores would be.

    python benchmarks/actor_overhead.py --rounds 3 --batches 45
    python benchmarks/actor_overhead.py --busy 1 --niceness 15   # Ray's default priority
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import psutil
import ray

import raypipe as rp
from actors import niceness
from raypipe.bench.cpu_share import CpuShare
from raypipe.datasets import make_jpeg_folder
from raypipe.presets import resnet50_train

SERVICE = "actor-overhead"


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def time_pipeline(root: str, batches: int, warmup: int, batch_size: int, threads: int) -> dict[str, float]:
    """img/s, CPU % and CPU ms per image of ``batches`` batches of the recipe in the calling process."""
    process = psutil.Process()
    with resnet50_train(root, batch_size=batch_size, num_threads=threads, device_id=None, seed=0) as pipe:
        pipe.build()
        for _ in range(warmup):
            pipe.run()
        cpu, began = _cpu(process), time.perf_counter()
        for _ in range(batches):
            pipe.run()
        wall, used = time.perf_counter() - began, _cpu(process) - cpu
    images = batches * batch_size
    return {"img_s": images / wall, "cpu_pct": 100 * used / wall, "cpu_ms": 1e3 * used / images}


@ray.remote(num_cpus=0)
class BareActor:
    """The recipe's loop in a Ray worker process, shipping nothing."""

    def run(self, nice: int, *args: Any) -> dict[str, float]:
        niceness.apply(nice, "the bare actor")
        return time_pipeline(*args)


def _endless(loader: Any) -> Any:
    """The loader's batches from epoch 1 on, without end."""
    epoch = 1
    while True:
        loader.set_epoch(epoch)
        yield from loader
        epoch += 1


def time_service(root: str, batches: int, batch_size: int, threads: int, nice: int) -> dict[str, float]:
    """The service with one rank (this process): an epoch to warm up, then ``batches`` batches
    timed, with the pipeline actor's CPU."""
    svc = rp.serve(
        resnet50_train,
        name=SERVICE,
        world_size=1,
        seed=0,
        last_batch="drop",
        replace=True,
        niceness=nice,
        file_root=root,
        batch_size=batch_size,
        num_threads=threads,
    )
    try:
        loader = rp.loader(SERVICE, rank=0, world_size=1, output="numpy")
        loader.set_epoch(0)
        for _ in loader:
            pass
        actor = psutil.Process(loader.actor_info["pid"])
        it = _endless(loader)
        cpu, began = _cpu(actor), time.perf_counter()
        for _ in range(batches):
            next(it)
        wall, used = time.perf_counter() - began, _cpu(actor) - cpu
        it.close()
        del loader
    finally:
        svc.shutdown()
    images = batches * batch_size
    return {"img_s": images / wall, "cpu_pct": 100 * used / wall, "cpu_ms": 1e3 * used / images}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", help="a folder of class folders of JPEGs (default: 1,024 generated)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batches", type=int, default=45)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--niceness", type=int, default=0, help="of the Ray rows (serve's niceness)")
    parser.add_argument("--busy", type=int, default=0, help="busy nice-0 processes beside every round")
    args = parser.parse_args()

    root = args.data or os.path.join(tempfile.gettempdir(), "raypipe-actor-overhead")
    if not args.data and not os.path.isdir(root):
        make_jpeg_folder(root, num_classes=4, per_class=256, seed=0)
    ray.init(
        address="local",
        num_cpus=args.threads,
        num_gpus=1,
        include_dashboard=False,
        log_to_driver=False,
        logging_level="ERROR",
    )
    work = (root, args.batches, args.warmup, args.batch_size, args.threads)
    runs: dict[str, list[dict[str, float]]] = {"driver": [], "bare actor": [], "service": []}
    with contextlib.ExitStack() as stack:
        for _ in range(args.busy):
            hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
            stack.callback(hog.kill)
        _rounds(args, root, work, runs)
    _report(args, runs)


def _rounds(args: argparse.Namespace, root: str, work: tuple, runs: dict[str, list[dict[str, float]]]) -> None:
    for round_ in range(args.rounds):
        with CpuShare() as share:
            runs["driver"].append(time_pipeline(*work))
        runs["driver"][-1].update(share.result or {})
        actor = BareActor.remote()
        with CpuShare() as share:
            runs["bare actor"].append(ray.get(actor.run.remote(args.niceness, *work)))
        runs["bare actor"][-1].update(share.result or {})
        ray.kill(actor)
        with CpuShare() as share:
            runs["service"].append(time_service(root, args.batches, args.batch_size, args.threads, args.niceness))
        runs["service"][-1].update(share.result or {})
        print(f"round {round_ + 1}/{args.rounds}: " + ", ".join(f"{k} {v[-1]['img_s']:.0f}" for k, v in runs.items()))


def _report(args: argparse.Namespace, runs: dict[str, list[dict[str, float]]]) -> None:
    driver = statistics.median(r["img_s"] for r in runs["driver"])
    print(
        f"\n{args.batches} batches of {args.batch_size}, {args.threads} threads, medians of {args.rounds} rounds; "
        f"Ray rows at niceness {args.niceness}, {args.busy} busy nice-0 process(es) beside"
    )
    print(
        f"{'where the pipeline runs':<24} {'img/s':>6} {'vs driver':>9} {'CPU %':>6} {'CPU ms/img':>10} {'steal %':>7}"
    )
    for name, values in runs.items():
        img_s = statistics.median(r["img_s"] for r in values)
        cpu_pct = statistics.median(r["cpu_pct"] for r in values)
        cpu_ms = statistics.median(r["cpu_ms"] for r in values)
        steal = statistics.median(r.get("steal_pct", float("nan")) for r in values)
        print(f"{name:<24} {img_s:>6.0f} {img_s / driver:>8.2f}x {cpu_pct:>6.0f} {cpu_ms:>10.2f} {steal:>7.1f}")
    print("steal %: the machine's CPU time the hypervisor gave other guests during the round (of all CPUs)")


if __name__ == "__main__":
    main()
