"""CPU helpers: what one helper adds to a rank, what it ships and what it costs in latency; the
per-sample CPU-stage costs behind the sizing model; and whether ``cpu_helpers="auto"`` reaches
the model's number of helpers.

    python benchmarks/cpu_helpers.py                 # all three parts
    python benchmarks/cpu_helpers.py --part measure  # or: costs, auto

``measure``: local Ray with 2 CPUs; the ResNet-50 training pipeline (224x224, batch 32) served
to one rank whose pipeline actor has 1 thread, without helpers and with one helper of 1 CPU
(the second core), float32 CHW and uint8 CHW outputs, epochs of the same 1,000 JPEGs (the
``raypipe bench`` dataset). ``costs``: CPU time per sample of the CPU stage for the three places
a pipeline's CPU stage can end (everything on the CPU; a GPU node decoding on the host; a GPU
node decoding with nvImageCodec); it needs no Ray, so it also runs on a GPU machine without it.
``auto``: a simulated cluster (a GPU node whose pipeline actor
has 1 thread, two CPU-only nodes) serving a pipeline with a 20 ms CPU-stage operator to a rank
that trains at a fixed rate; the model says how many helpers that rate needs, ``"auto"`` finds
its own number.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time

import numpy as np

import raypipe as rp
from raypipe import fn, types
from raypipe.bench.dataset import prepare
from raypipe.keyed_random import SampleContext
from raypipe.presets import resnet50_train


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far, from /proc/stat."""
    fields = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    idle = fields[3] + fields[4]
    hz = os.sysconf("SC_CLK_TCK")
    return (sum(fields) - idle) / hz, sum(fields) / hz


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` so far."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rank_epoch(loader, epoch: int) -> float:
    """Images per second one rank receives over an epoch (after its first batch)."""
    loader.set_epoch(epoch)
    it = iter(loader)
    next(it)
    began, images = time.perf_counter(), 0
    for out, _ in it:
        images += out.shape[0]
    return images / (time.perf_counter() - began)


def measure(root: str, rounds: int) -> None:
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    rows = []
    for dtype in (types.FLOAT, types.UINT8):
        for helpers in (0, 1):
            name = f"helpers-{helpers}-{dtype.name.lower()}"
            svc = rp.serve(
                resnet50_train, name=name, world_size=1, replace=True, cpu_helpers=helpers,
                file_root=root, batch_size=32, num_threads=1, dtype=dtype,
            )  # fmt: skip
            loader = rp.loader(name, rank=0, world_size=1, output="numpy")
            rank_epoch(loader, 0)  # warm-up; the actor finds its helper
            stats = svc.stats()
            pids = [stats["actors"][0]["pid"]] + [d["pid"] for d in stats["helpers"].get("details", [])]
            cpu_before, (busy_before, total_before) = sum(process_cpu(p) for p in pids), machine_busy()
            rates = [rank_epoch(loader, e) for e in range(1, rounds + 1)]
            cpu_used, (busy_after, total_after) = sum(process_cpu(p) for p in pids) - cpu_before, machine_busy()
            stats = svc.stats()
            offload = stats["actors"][0].get("offload", {})
            worker = next(iter(offload.get("workers", {}).values()), None)
            detail = stats["helpers"].get("details", [{}])
            row = {
                "dtype": dtype.name,
                "helpers": helpers,
                "img_s": statistics.median(rates),
                "cpu_ms": 1000 * cpu_used / (rounds * 1000),
                "machine_busy": (busy_after - busy_before) / (total_after - total_before),
            }
            if worker and worker["units"]:
                busy = detail[0].get("busy_s", 0.0) / max(1, detail[0].get("units", 1))
                row["bytes_per_sample"] = worker["bytes"] / worker["samples"]
                row["unit_ms"] = 1000 * worker["seconds"] / worker["units"]
                row["added_ms"] = row["unit_ms"] - 1000 * busy
                row["share"] = worker["samples"] / (worker["samples"] + 16 * offload["units_local"])
            rows.append(row)
            del loader
            svc.shutdown()
    ray.shutdown()
    print(f"\nOne rank, pipeline actor with 1 thread, local Ray with 2 CPUs (median of {rounds} epochs of 1,000)")
    print(
        "| output | helpers | img/s | vs no helper | actor + helper CPU ms/img | machine busy | bytes/sample shipped "
        "| unit round trip ms | added ms/unit |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        base = next(r["img_s"] for r in rows if r["dtype"] == row["dtype"] and r["helpers"] == 0)
        extra = (
            f"{row['bytes_per_sample'] / 1e3:,.0f} KB | {row['unit_ms']:.1f} | {row['added_ms']:.1f}"
            if "unit_ms" in row else "- | - | -"
        )  # fmt: skip
        print(
            f"| {row['dtype']} | {row['helpers']} | {row['img_s']:.0f} | {row['img_s'] / base:.2f}x | "
            f"{row['cpu_ms']:.2f} | {row['machine_busy']:.0%} | {extra} |"
        )


def stage_cost(root: str, split: dict[str, bool], samples: int = 300) -> float:
    """CPU milliseconds per sample of the ResNet-50 pipeline's CPU stage with ``split``, 1 thread."""
    pipe = resnet50_train(root, batch_size=32, num_threads=1, decoder_device="mixed", seed=0)
    stage = pipe.engine.cpu_stage(split)
    ctxs = [SampleContext(0, 0, i) for i in range(samples)]
    stage.run_chunk(ctxs[:20], 0, None)
    began = time.process_time()
    stage.run_chunk(ctxs, 0, None)
    return 1000 * (time.process_time() - began) / samples


def costs(root: str) -> dict[str, float]:
    splits = {
        "all on the CPU (no GPU)": {"on_gpu": False, "decode_on_gpu": False},
        "GPU node, host decode (ROI JPEG decode of the crop)": {"on_gpu": True, "decode_on_gpu": False},
        "GPU node, nvImageCodec decode (read only)": {"on_gpu": True, "decode_on_gpu": True},
    }
    out = {name: stage_cost(root, split) for name, split in splits.items()}
    print("\nCPU-stage cost per sample, 1 thread (0.17 MP JPEGs, about the ImageNet average)")
    print("| where the CPU stage ends | CPU ms/sample |")
    print("|---|---|")
    for name, ms in out.items():
        print(f"| {name} | {ms:.2f} |")
    host = out["GPU node, host decode (ROI JPEG decode of the crop)"]
    print("\nHelper cores for a 16-GPU node with 3 cores per GPU (1 per GPU left to its trainer, 2 to its pipeline)")
    print("| img/s per GPU | cores the CPU stage needs | node cores for it | helper cores |")
    print("|---|---|---|---|")
    for rate in (1000, 2000, 3000):
        need = 16 * rate * host / 1000
        print(f"| {rate:,} | {need:.0f} | 32 | {max(0, math.ceil(need - 32))} |")
    return out


def _slow_20ms(image):
    time.sleep(0.02)
    return image


@rp.pipeline_def(batch_size=8, num_threads=1)
def slowed(files):
    jpegs, labels = fn.readers.file(files=files, name="Reader")
    images = fn.python_function(fn.decoders.image(jpegs), function=_slow_20ms)
    return fn.resize(images, resize_x=32, resize_y=32), labels


class Trainer:
    """A rank on the GPU node training at ``rate`` img/s (sleeping), as long as asked."""

    def train(self, name: str, rate: float, seconds: float) -> float:
        """Images per second received over the last third of ``seconds`` (the steady state)."""
        loader = rp.loader(name, rank=0, world_size=1, output="numpy")
        began, epoch, seen = time.perf_counter(), 0, []
        while time.perf_counter() - began < seconds:
            loader.set_epoch(epoch)
            for _, labels in loader:
                step = time.perf_counter()
                seen.append((step, len(labels)))
                time.sleep(max(0.0, len(labels) / rate - (time.perf_counter() - step)))
                if time.perf_counter() - began > seconds:
                    break
            epoch += 1
        tail = [(t, n) for t, n in seen if t > began + 2 * seconds / 3]
        return sum(n for _, n in tail[1:]) / (tail[-1][0] - tail[0][0])


def auto(files: list[str], seconds: float) -> None:
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    cluster.add_node(num_cpus=2, num_gpus=1)  # the GPU node: its trainer and its pipeline actor
    for _ in range(2):
        cluster.add_node(num_cpus=3)  # CPU-only nodes
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False, logging_level="ERROR")
    stage = slowed(files=files).engine.cpu_stage({"on_gpu": False, "decode_on_gpu": False})
    ctxs = [SampleContext(0, 0, i) for i in range(len(files))]
    stage.run_chunk(ctxs[:8], 0, None)  # warm-up: imports, first decodes
    began = time.perf_counter()
    stage.run_chunk(ctxs, 0, None)
    cost = (time.perf_counter() - began) / len(files)
    print(
        f"\n'auto' on a simulated cluster: CPU stage {1000 * cost:.1f} ms/sample (20 ms of it sleeping), pipeline "
        "actor 1 thread, rate over the last third of the run"
    )
    print("| trainer img/s | model: helpers (1 thread each) | auto reached | rank got img/s | decisions |")
    print("|---|---|---|---|---|")
    try:
        for rate in (100, 150):
            name = f"auto-{rate}"
            svc = rp.serve(
                slowed, name=name, files=files, world_size=1, replace=True, cpu_helpers="auto",
                autoscale_interval_s=2.0, cpu_reserve_per_gpu=1.0,
            )  # fmt: skip
            trainer = ray.remote(num_gpus=1)(Trainer).remote()
            got = ray.get(trainer.train.remote(name, rate, seconds))
            helpers = svc.stats()["helpers"]
            model = max(0, math.ceil(rate * cost) - 1)  # workers the rate needs, less the actor's own thread
            actions = ", ".join(d["action"] for d in helpers["decisions"] if d["action"] != "keep")
            print(f"| {rate} | {model} | {len(helpers['running'])} | {got:.0f} | {actions} |")
            ray.kill(trainer)
            svc.shutdown()
    finally:
        ray.shutdown()
        cluster.shutdown()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=("all", "measure", "costs", "auto"), default="all")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--auto-seconds", type=float, default=60.0)
    args = parser.parse_args(argv)
    data = prepare(None, 1000)
    if args.part in ("all", "measure"):
        measure(data.root, args.rounds)
    if args.part in ("all", "costs"):
        costs(data.root)
    if args.part in ("all", "auto"):
        auto(data.paths[:64], args.auto_seconds)
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
