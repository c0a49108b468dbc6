"""Whole training pipelines beyond classification, one per domain: raypipe's rate against DALI's CPU
build in the same run, and the CPU time per sample of raypipe's CPU stage on a GPU node (what CPU
helpers would take on).

    python benchmarks/domains.py --domain detection [--samples 256] [--batch 32] [--threads 2] [--seconds 20]

Each domain registers itself below (:func:`domain`) with its data, its pipeline written once for
both libraries (``fn`` and ``types`` of either), the GPU-stage device and its rate's unit. The rate
is samples (or the domain's unit) per second on the CPU only, everything on ``device="cpu"``, after
a warm-up batch, best of ``--rounds`` rounds of ``--seconds``: both libraries run with ``--threads``
threads on the same data, taking turns within each round. The CPU-stage cost is one thread's CPU time per sample
for the stage a GPU node runs on the host (the operators before ``.gpu()``), best of the rounds.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from collections.abc import Callable

import numpy as np

from raypipe.bench.dataset import cache_dir
from raypipe.keyed_random import SampleContext


@dataclasses.dataclass(frozen=True)
class Domain:
    """A domain's benchmark: ``prepare(samples)`` makes (or finds) its data and returns the pipeline's
    keyword arguments; ``graph(fn, types, gpu, **kwargs)`` defines the pipeline with either library's
    ``fn`` and ``types``, its GPU stage on device ``gpu``; ``units(outputs)`` counts what one batch
    carries in the rate's ``unit`` (its samples by default)."""

    name: str
    unit: str
    prepare: Callable[[int], dict]
    graph: Callable[..., tuple]
    units: Callable[[tuple], float] | None = None


DOMAINS: dict[str, Domain] = {}


def domain(entry: Domain) -> Domain:
    """Register a domain (each domain's section below ends with one call)."""
    DOMAINS[entry.name] = entry
    return entry


# --- detection: NVIDIA's SSD training pipeline (DeepLearningExamples, PyTorch/Detection/SSD) ---


def _ssd_anchors() -> list[float]:
    """SSD300's 8732 default boxes, ``ltrb`` and flattened (DeepLearningExamples' dboxes300_coco)."""
    fig, feats, steps = 300, [38, 19, 10, 5, 3, 1], [8, 16, 32, 64, 100, 300]
    scales, ratios = [21, 45, 99, 153, 207, 261, 315], [[2], [2, 3], [2, 3], [2, 3], [2], [2]]
    boxes = []
    for k, feat in enumerate(feats):
        sk1, sk2 = scales[k] / fig, scales[k + 1] / fig
        sizes = [(sk1, sk1), (np.sqrt(sk1 * sk2),) * 2]
        for alpha in ratios[k]:
            sizes += [(sk1 * np.sqrt(alpha), sk1 / np.sqrt(alpha)), (sk1 / np.sqrt(alpha), sk1 * np.sqrt(alpha))]
        for w, h in sizes:
            for i in range(feat):
                for j in range(feat):
                    cx, cy = (j + 0.5) * steps[k] / fig, (i + 0.5) * steps[k] / fig
                    boxes.append((cx, cy, w, h))
    xywh = np.clip(np.array(boxes, np.float32), 0, 1)
    return np.concatenate([xywh[:, :2] - 0.5 * xywh[:, 2:], xywh[:, :2] + 0.5 * xywh[:, 2:]], axis=1).ravel().tolist()


def _coco(samples: int) -> dict:
    from raypipe.coco_dataset import make_coco_dataset

    root = os.path.join(cache_dir(), f"coco-{samples}")
    file_root, annotations_file = make_coco_dataset(root, images=samples, size=(640, 480), seed=0)
    return {"file_root": file_root, "annotations_file": annotations_file, "anchors": _ssd_anchors()}


def _ssd(fn, types, gpu: str, file_root: str, annotations_file: str, anchors: list[float]) -> tuple:
    """COCOPipeline.define_graph of the SSD example, with its operators' arguments."""
    saturation, contrast = fn.random.uniform(range=[0.5, 1.5]), fn.random.uniform(range=[0.5, 1.5])
    brightness, hue = fn.random.uniform(range=[0.875, 1.125]), fn.random.uniform(range=[-0.5, 0.5])
    coin = fn.random.coin_flip(probability=0.5)
    inputs, bboxes, labels = fn.readers.coco(
        file_root=file_root, annotations_file=annotations_file, ratio=True, ltrb=True, shuffle_after_epoch=True,
        skip_empty=True, name="Reader",
    )  # fmt: skip
    crop_begin, crop_size, bboxes, labels = fn.random_bbox_crop(
        bboxes, labels, aspect_ratio=[0.5, 2.0], thresholds=[0, 0.1, 0.3, 0.5, 0.7, 0.9], scaling=[0.3, 1.0],
        bbox_layout="xyXY", allow_no_crop=True, num_attempts=1,
    )  # fmt: skip
    images = fn.decoders.image_slice(inputs, crop_begin, crop_size, output_type=types.RGB)
    images = fn.flip(images, horizontal=coin)
    bboxes = fn.bb_flip(bboxes, ltrb=True, horizontal=coin)
    images = fn.resize(images, resize_x=300, resize_y=300)
    images = fn.hsv(images, device=gpu, hue=hue, saturation=saturation, dtype=types.FLOAT)
    images = fn.brightness_contrast(images, device=gpu, brightness=brightness, contrast=contrast,
                                    contrast_center=128, dtype=types.UINT8)  # fmt: skip
    images = fn.crop_mirror_normalize(
        images, device=gpu, crop=(300, 300), mean=[0.0, 0.0, 0.0], std=[255.0, 255.0, 255.0], mirror=0,
        dtype=types.FLOAT, output_layout="CHW",
    )  # fmt: skip
    bboxes, labels = fn.box_encoder(bboxes, labels, criteria=0.5, anchors=anchors)
    return images, bboxes, labels


domain(Domain("detection", "img/s", _coco, _ssd))


# --- measuring ---


def _raypipe_pipe(entry: Domain, kwargs: dict, batch: int, threads: int, gpu: str):
    import raypipe as rp
    from raypipe import fn, types

    return rp.pipeline_def(
        lambda: entry.graph(fn, types, gpu, **kwargs), batch_size=batch, num_threads=threads, seed=0
    )()


def _dali_pipe(entry: Domain, kwargs: dict, batch: int, threads: int):
    from nvidia.dali import fn, pipeline_def, types

    pipe = pipeline_def(lambda: entry.graph(fn, types, "cpu", **kwargs), batch_size=batch, num_threads=threads,
                        device_id=None, seed=0)()  # fmt: skip
    pipe.build()
    return pipe


def one_round(pipe, entry: Domain, seconds: float) -> float:
    """Units per second of ``pipe.run()`` over about ``seconds``."""
    units, began = 0.0, time.perf_counter()
    while time.perf_counter() - began < seconds:
        outputs = pipe.run()
        units += entry.units(outputs) if entry.units else len(outputs[0])
    return units / (time.perf_counter() - began)


def rates(pipes: list, entry: Domain, seconds: float, rounds: int) -> list[float]:
    """Each pipeline's best rate over ``rounds`` rounds, the pipelines taking turns within each round
    (the machine is shared: load that comes and goes falls on both alike); a warm-up batch first."""
    for pipe in pipes:
        pipe.run()
    best = [0.0] * len(pipes)
    for _ in range(rounds):
        for k, pipe in enumerate(pipes):
            best[k] = max(best[k], one_round(pipe, entry, seconds))
    return best


def cpu_stage_ms(entry: Domain, kwargs: dict, batch: int, rounds: int, samples: int = 128) -> float:
    """One thread's CPU milliseconds per sample of the CPU stage of a GPU node (best of ``rounds``)."""
    pipe = _raypipe_pipe(entry, kwargs, batch, 1, "gpu")
    stage = pipe.engine.cpu_stage({"on_gpu": True, "decode_on_gpu": False})
    size = pipe.epoch_size("Reader")
    ctxs = [SampleContext(0, 0, i % size) for i in range(samples)]
    stage.run_chunk(ctxs[:8], 0, None)
    best = float("inf")
    for _ in range(rounds):
        began = time.thread_time()
        stage.run_chunk(ctxs, 0, None)
        best = min(best, 1000 * (time.thread_time() - began) / samples)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--domain", choices=sorted(DOMAINS), action="append", help="default: every domain")
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    print("| domain | raypipe rate | DALI CPU rate | ratio | CPU-stage ms/sample |")
    print("|---|---|---|---|---|")
    for name in args.domain or sorted(DOMAINS):
        entry = DOMAINS[name]
        kwargs = entry.prepare(args.samples)
        with _raypipe_pipe(entry, kwargs, args.batch, args.threads, "cpu") as pipe:
            try:
                ours, theirs = rates([pipe, _dali_pipe(entry, kwargs, args.batch, args.threads)], entry,
                                     args.seconds, args.rounds)  # fmt: skip
            except ImportError:
                (ours,), theirs = rates([pipe], entry, args.seconds, args.rounds), float("nan")
        cost = cpu_stage_ms(entry, kwargs, args.batch, args.rounds)
        print(f"| {name} | {ours:.1f} {entry.unit} | {theirs:.1f} {entry.unit} | {ours / theirs:.2f}x | {cost:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
