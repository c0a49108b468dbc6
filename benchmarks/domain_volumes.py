"""Volumes: the CPU stage of nnU-Net's DALI training pipeline (read image and label ``.npy``
volumes, pick a random object, draw a crop around it and cut the patch out of both), raypipe
against DALI 2.4's CPU build in the same run, on volumes written for the run.

    python benchmarks/domain_volumes.py [--seconds 5]

The rate counts the voxels of the image volumes read per second (Mvoxel/s), one thread each
(the machine is shared); the CPU-stage cost is raypipe's process CPU time per sample, what a CPU
helper would take over from a GPU node (nnU-Net runs everything after this crop on the GPU).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable

import numpy as np

CASES, BATCH = 16, 4
SHAPE = (1, 64, 96, 96)
PATCH = [48, 64, 64]


def write_cases(root: str) -> tuple[list[str], list[str]]:
    """``CASES`` float32 images and uint8 labels (three classes, a few objects each)."""
    rng = np.random.default_rng(0)
    imgs, lbls = [], []
    for case in range(CASES):
        image = rng.normal(size=SHAPE).astype(np.float32)
        label = np.zeros(SHAPE, np.uint8)
        for cls in (1, 2):
            d, h, w = (int(rng.integers(0, s - 12)) for s in SHAPE[1:])
            label[0, d : d + 12, h : h + 16, w : w + 16] = cls
        for kind, array, paths in (("x", image, imgs), ("y", label, lbls)):
            path = os.path.join(root, f"case{case}_{kind}.npy")
            np.save(path, array)
            paths.append(path)
    return imgs, lbls


def biased_crop(fn, types, imgs: list[str], lbls: list[str]):
    """nnU-Net's load_data and biased_crop_fn (its CPU part), for either library's ``fn``."""
    img = fn.reshape(fn.readers.numpy(files=imgs, seed=1, name="ReaderX"), layout="CDHW")
    lbl = fn.reshape(fn.readers.numpy(files=lbls, seed=1, name="ReaderY"), layout="CDHW")
    start, end = fn.segmentation.random_object_bbox(lbl, background=0, format="start_end", foreground_prob=0.4)
    anchor = fn.roi_random_crop(lbl, roi_start=start, roi_end=end, crop_shape=[1, *PATCH])
    anchor = fn.slice(anchor, 1, 3, axes=[0])
    shape = types.Constant(np.array(PATCH), dtype=types.INT64)
    img = fn.slice(img, anchor, shape, axis_names="DHW", out_of_bounds_policy="pad")
    lbl = fn.slice(lbl, anchor, shape, axis_names="DHW", out_of_bounds_policy="pad")
    return img, lbl


def _rate(run: Callable[[], object], seconds: float) -> tuple[float, float]:
    """Samples per second of ``run`` (a batch each) over ``seconds``, and process CPU s per sample."""
    run()  # warm up
    began, cpu, batches = time.perf_counter(), time.process_time(), 0
    while time.perf_counter() - began < seconds:
        run()
        batches += 1
    wall, used = time.perf_counter() - began, time.process_time() - cpu
    return batches * BATCH / wall, used / (batches * BATCH)


def measure(seconds: float) -> dict:
    """raypipe's and DALI CPU's Mvoxel/s over ``seconds`` each, their ratio, and raypipe's CPU-stage
    ms per sample (DALI's rate is None where DALI is not installed)."""
    import raypipe as rp

    voxels = float(np.prod(SHAPE))
    with tempfile.TemporaryDirectory() as root:
        imgs, lbls = write_cases(root)

        @rp.pipeline_def(batch_size=BATCH, num_threads=1, seed=0)
        def ours():
            return biased_crop(rp.fn, rp.types, imgs, lbls)

        with ours() as pipe:
            per_second, cpu_per_sample = _rate(pipe.run, seconds)
        theirs = None
        try:
            from nvidia.dali import fn as dali_fn
            from nvidia.dali import pipeline_def
            from nvidia.dali import types as dali_types
        except ImportError:
            pass
        else:

            @pipeline_def(batch_size=BATCH, num_threads=1, device_id=None, seed=0)
            def dali():
                return biased_crop(dali_fn, dali_types, imgs, lbls)

            pipe = dali()
            pipe.build()
            theirs = _rate(pipe.run, seconds)[0] * voxels / 1e6
            del pipe
    rate = per_second * voxels / 1e6
    return {
        "domain": "volumes (nnU-Net biased crop)",
        "unit": "Mvoxel/s",
        "raypipe": rate,
        "dali_cpu": theirs,
        "ratio": rate / theirs if theirs else None,
        "cpu_stage_ms_per_sample": cpu_per_sample * 1e3,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    result = measure(parser.parse_args().seconds)
    dali = "n/a" if result["dali_cpu"] is None else f"{result['dali_cpu']:.1f}"
    ratio = "n/a" if result["ratio"] is None else f"{result['ratio']:.2f}"
    print("| domain | unit | raypipe | DALI CPU | ratio | CPU stage ms/sample |\n|---|---|---|---|---|---|")
    print(
        f"| {result['domain']} | {result['unit']} | {result['raypipe']:.1f} | {dali} | {ratio} | "
        f"{result['cpu_stage_ms_per_sample']:.2f} |"
    )


if __name__ == "__main__":
    main()
