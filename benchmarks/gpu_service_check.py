"""The service's GPU path end to end: a torch rank on GPU 0 gets its batches through CUDA IPC, and
they match the host path's.

On a local Ray, the ResNet-50 training pipeline (``raypipe.presets.resnet50_train``, mixed decoder,
float32 CHW) is served twice over the same generated JPEGs with the same seed:

* the *reference*: a rank with ``device="cpu"``, so its pipeline actor sees no GPU and runs the
  mixed and gpu operators on the host (``device_id=None``), one epoch;
* the *candidate*: a rank on ``cuda:0`` whose pipeline actor shares that GPU and hands batches over
  by CUDA IPC, six epochs.

Checks: epoch 0 of both has the same batches (count, shapes, labels, sample indices, padding);
the images agree within ``--max-mean`` / ``--max-p99`` grey levels (differences scaled back by the
normalization's std: nvJPEG and libjpeg-turbo decode a few levels apart); the candidate's batches
are CUDA tensors on GPU 0 with no IPC fallback through host memory; and GPU memory (the device's
use, the rank's torch allocator, the actor's pool) grows by at most ``--memory-slack-mb`` from the
end of the first epoch after ``--warmup-epochs`` (2: pools fill up to the most batches that were
ever in flight at once) to the end of the last. Without a usable GPU the candidate is the host path again
(which must then match exactly) and the report says the GPU was not exercised.

    python benchmarks/gpu_service_check.py --json /tmp/service_check.json
    python benchmarks/gpu_service_check.py --images 64 --batch-size 16      # a quick run

Exit status 0 when every check passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from typing import Any

import numpy as np

# the normalization's std per channel, to read float differences as grey levels
GREY_PER_UNIT = np.array([0.229, 0.224, 0.225], dtype=np.float32).reshape(1, 3, 1, 1) * 255


def grey_level_differences(got: np.ndarray, want: np.ndarray) -> dict[str, float]:
    """Mean, 99th percentile and max of ``|got - want|`` in grey levels for normalized NCHW batches."""
    if got.shape != want.shape:
        raise ValueError(f"shapes differ: {got.shape} and {want.shape}")
    diff = np.abs(got.astype(np.float32) - want.astype(np.float32)) * GREY_PER_UNIT
    return {"mean": float(diff.mean()), "p99": float(np.percentile(diff, 99)), "max": float(diff.max())}


def compare_epochs(got: list[dict[str, np.ndarray]], want: list[dict[str, np.ndarray]]) -> dict[str, Any]:
    """Batch by batch: same count, labels, sample indices and padding; image differences overall.
    Returns ``{"batches", "problems": [...], "grey_levels": {...}}``."""
    problems = []
    if len(got) != len(want):
        problems.append(f"{len(got)} batches, the reference has {len(want)}")
    worst = {"mean": 0.0, "p99": 0.0, "max": 0.0}
    total = 0.0
    for k, (a, b) in enumerate(zip(got, want)):
        for key in ("labels", "sample_indices", "is_pad"):
            if not np.array_equal(a[key], b[key]):
                problems.append(f"batch {k}: {key} differ from the reference")
        if a["images"].shape != b["images"].shape:
            problems.append(f"batch {k}: images {a['images'].shape}, the reference {b['images'].shape}")
            continue
        diff = grey_level_differences(a["images"], b["images"])
        total += diff["mean"]
        worst = {"mean": worst["mean"], "p99": max(worst["p99"], diff["p99"]), "max": max(worst["max"], diff["max"])}
    worst["mean"] = total / max(1, min(len(got), len(want)))
    return {"batches": len(got), "problems": problems, "grey_levels": worst}


def memory_growth(epochs: list[dict[str, float]], slack_mb: float, warmup: int = 0) -> list[str]:
    """Problems where a reading grew by more than ``slack_mb`` from the end of epoch ``warmup`` (the
    epochs before it fill the pools) to the end of the last."""
    if len(epochs) - warmup < 2:
        return []
    first, last = epochs[warmup], epochs[-1]
    return [
        f"{key} grew from {first[key]:.0f} to {last[key]:.0f} MB from epoch {warmup} to epoch {len(epochs) - 1}"
        for key in first
        if key in last and last[key] - first[key] > slack_mb
    ]


def gpu_memory(svc, torch_module) -> dict[str, float]:
    """MB in use: the whole device, the rank's torch allocator, the pipeline actor's pool."""
    out = {}
    if torch_module is not None and torch_module.cuda.is_available():
        torch_module.cuda.synchronize()
        free, total = torch_module.cuda.mem_get_info(0)
        out["device_used_mb"] = (total - free) / 2**20
        out["rank_torch_allocated_mb"] = torch_module.cuda.memory_allocated(0) / 2**20
    actor = svc.stats()["actors"][0]
    pool = actor.get("memory") or {}
    for key in ("pool_used_mb", "pool_total_mb"):
        if isinstance(pool.get(key), (int, float)):
            out[f"actor_{key}"] = float(pool[key])
    return out


def read_epoch(loader, epoch: int) -> tuple[list[dict[str, np.ndarray]], float, list[str]]:
    """Every batch of ``epoch`` as host arrays, the seconds it took, and where batches lived."""
    loader.set_epoch(epoch)
    batches, devices = [], set()
    began = time.perf_counter()
    for images, labels in loader:
        devices.add(str(getattr(images, "device", "host")))
        batches.append(
            {
                "images": _host(images),
                "labels": _host(labels),
                "sample_indices": np.array(loader.last_sample_indices),
                "is_pad": np.array(loader.last_is_pad),
            }
        )
    return batches, time.perf_counter() - began, sorted(devices)


def _host(x: Any) -> np.ndarray:
    return x.detach().cpu().numpy().copy() if hasattr(x, "detach") else np.array(x)


def run(args: argparse.Namespace) -> dict[str, Any]:
    import ray

    import raypipe as rp
    from raypipe.backend import gpu_available, gpu_unavailable_reason
    from raypipe.datasets import make_jpeg_folder
    from raypipe.presets import resnet50_train

    try:
        import torch
    except ImportError:
        torch = None
    on_gpu = gpu_available() and torch is not None and torch.cuda.is_available()
    output = "torch" if torch is not None else "numpy"
    per_class = max(1, args.images // 4)
    make_jpeg_folder(args.data, num_classes=4, per_class=per_class, seed=0, progress=False)
    report: dict[str, Any] = {
        "gpu_exercised": on_gpu,
        "why_not": None if on_gpu else (gpu_unavailable_reason() or "torch has no CUDA device"),
        "images": 4 * per_class,
        "batch_size": args.batch_size,
        "output": output,
    }
    common = {"file_root": args.data, "batch_size": args.batch_size, "num_threads": args.threads}
    # a fresh local Ray, never one another process started on this machine
    ray.init(address="local", include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        svc = rp.serve(resnet50_train, name="check-host", world_size=1, decoder_device="mixed", **common)
        try:
            loader = rp.loader("check-host", rank=0, world_size=1, device="cpu", output=output)
            reference, seconds, _ = read_epoch(loader, 0)
            report["reference"] = {"seconds": seconds, "batches": len(reference)}
            print(f"reference epoch read: {len(reference)} batches in {seconds:.1f} s", flush=True)
            del loader
        finally:
            svc.shutdown()
        svc = rp.serve(resnet50_train, name="check-gpu", world_size=1, decoder_device="mixed", **common)
        try:
            loader = rp.loader("check-gpu", rank=0, world_size=1, device="cuda:0" if on_gpu else "cpu", output=output)
            epochs, memory = [], []
            for epoch in range(args.epochs):
                batches, seconds, devices = read_epoch(loader, epoch)
                epochs.append({"epoch": epoch, "seconds": seconds, "img_per_s": report["images"] / seconds})
                memory.append(gpu_memory(svc, torch))
                print(
                    f"candidate epoch {epoch} read: {len(batches)} batches on {devices} in {seconds:.1f} s", flush=True
                )
                if epoch == 0:
                    report["compare"] = compare_epochs(batches, reference)
                    report["devices"] = devices
                del batches
            actor = svc.stats()["actors"][0]
            report["candidate"] = {
                "epochs": epochs,
                "memory_mb": memory,
                "request_transport": loader.request_transport,
                "ipc_fallbacks": actor.get("ipc_fallbacks"),
                "actor_cuda_visible_devices": actor.get("cuda_visible_devices"),
            }
            del loader
        finally:
            svc.shutdown()
    finally:
        ray.shutdown()
    report["problems"] = judge(report, args)
    return report


def judge(report: dict[str, Any], args: argparse.Namespace) -> list[str]:
    """Every failed check of ``report``, in words."""
    compare = report["compare"]
    problems = list(compare["problems"])
    grey = compare["grey_levels"]
    limits = (args.max_mean, args.max_p99) if report["gpu_exercised"] else (0.0, 0.0)  # host vs host: exact
    if grey["mean"] > limits[0] or grey["p99"] > limits[1]:
        problems.append(
            f"images differ from the host path by {grey['mean']:.3f} grey levels on average and "
            f"{grey['p99']:.2f} at the 99th percentile (limits {limits[0]} and {limits[1]})"
        )
    if report["gpu_exercised"]:
        if report["devices"] != ["cuda:0"]:
            problems.append(f"the rank's batches were on {report['devices']}, not cuda:0")
        if report["candidate"]["ipc_fallbacks"]:
            problems.append(f"{report['candidate']['ipc_fallbacks']} batches fell back to host memory instead of IPC")
        problems += memory_growth(report["candidate"]["memory_mb"], args.memory_slack_mb, args.warmup_epochs)
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "raypipe-gpu-check-jpegs"))
    parser.add_argument("--images", type=int, default=512, help="JPEGs of about 500x375 (4 classes)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=6, help="candidate epochs (memory must stay flat)")
    parser.add_argument(
        "--warmup-epochs", type=int, default=2, help="candidate epochs before memory is compared (pools fill up)"
    )
    parser.add_argument("--max-mean", type=float, default=1.5, help="grey levels, mean over all values")
    parser.add_argument("--max-p99", type=float, default=10.0, help="grey levels, 99th percentile")
    parser.add_argument("--memory-slack-mb", type=float, default=64.0)
    parser.add_argument("--json", help="write the report here")
    args = parser.parse_args(argv)
    if not 0 <= args.warmup_epochs < args.epochs:
        parser.error(f"--warmup-epochs must be at least 0 and below --epochs ({args.epochs}), got {args.warmup_epochs}")
    report = run(args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    where = "GPU 0 through CUDA IPC" if report["gpu_exercised"] else f"the host path again ({report['why_not']})"
    print(f"reference: host path, {report['reference']['batches']} batches of {report['batch_size']}")
    print(f"candidate: {where}; GPU part exercised: {report['gpu_exercised']}")
    grey = report["compare"]["grey_levels"]
    print(f"difference: mean {grey['mean']:.3f}, p99 {grey['p99']:.2f}, max {grey['max']:.1f} grey levels")
    for epoch, memory in zip(report["candidate"]["epochs"], report["candidate"]["memory_mb"]):
        usage = ", ".join(f"{k} {v:.0f}" for k, v in memory.items()) or "no GPU memory"
        print(f"epoch {epoch['epoch']}: {epoch['img_per_s']:.0f} img/s; MB: {usage}")
    print(f"transport: {report['candidate']['request_transport']}; batches on {report['devices']}")
    for problem in report["problems"]:
        print(f"FAILED: {problem}")
    print("service check " + ("failed" if report["problems"] else "passed"))
    return 1 if report["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
