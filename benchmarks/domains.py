"""Whole training pipelines beyond classification, one per domain: raypipe's rate against DALI's CPU
build in the same run, and the CPU time per sample of raypipe's CPU stage on a GPU node (what CPU
helpers would take on).

    python benchmarks/domains.py [--domain detection|speech|volumes|auto_augment|...] [--samples 256] [--batch 32]

Each domain registers itself below (:func:`domain`) with its data, its pipeline written once for
both libraries (``fn`` and ``types`` of either), the GPU-stage device and its rate's unit: detection
(NVIDIA's SSD pipeline, img/s), speech (Jasper's feature pipeline, seconds of audio per second),
volumes (nnU-Net's biased crop, Mvoxel/s of image volumes read), a user's Numba function in the
ResNet-50 pipeline (``numba_function``, img/s), video (8-frame clips decoded from VP9
files, cropped and laid out for a 3-D CNN, frames/s) and automatic augmentation (the
ResNet-50 training pipeline with AutoAugment, RandAugment or TrivialAugment Wide, img/s). The rate
is samples (or the domain's unit) per second on the CPU only, everything on ``device="cpu"``, after
a warm-up batch, best of ``--rounds`` rounds of ``--seconds``: both libraries run with ``--threads``
threads on the same data, taking turns within each round. The CPU-stage cost is one thread's CPU time per sample
for the stage a GPU node runs on the host (the operators before ``.gpu()``), best of the rounds.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
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
    ``fn`` and ``types``, its GPU stage on device ``gpu``; ``units(outputs, kwargs)`` counts what one
    batch carries in the rate's ``unit`` (its samples by default); ``reader`` names the reader whose
    epoch the CPU-stage cost walks."""

    name: str
    unit: str
    prepare: Callable[[int], dict]
    graph: Callable[..., tuple]
    units: Callable[[tuple, dict], float] | None = None
    reader: str = "Reader"
    conditionals: bool = False  # DALI's enable_conditionals (its automatic augmentations need it)


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


# --- speech: Jasper's feature pipeline (DeepLearningExamples, PyTorch/SpeechRecognition/Jasper) ---


def _speech_clips(samples: int) -> dict:
    """``samples`` speech-like clips of 2-6 s (a third 22.05 kHz FLAC, the rest 16 kHz WAV) and a
    ``path label`` list of them; their mean length in seconds."""
    import soundfile

    root = os.path.join(cache_dir(), f"speech-{samples}")
    listing = os.path.join(root, "files.txt")
    rng = np.random.default_rng(0)
    durations, lines = [], []
    os.makedirs(root, exist_ok=True)
    for i in range(samples):
        rate, ext = (22050, "flac") if i % 3 == 0 else (16000, "wav")
        duration = 2.0 + 4.0 * rng.random()
        name = f"utt{i}.{ext}"
        durations.append(duration)
        lines.append(f"{name} {i}\n")
        if os.path.exists(listing):
            continue
        t = np.arange(int(rate * duration)) / rate
        voiced = sum(np.sin(2 * np.pi * 150 * h * t) / h for h in range(1, 10))
        envelope = ((t > 0.3) & (t < duration - 0.3)) * 0.5 * (1 - np.cos(2 * np.pi * 4 * t))
        soundfile.write(os.path.join(root, name), 0.2 * voiced * envelope + 1e-3 * rng.standard_normal(t.size), rate)
    if not os.path.exists(listing):
        with open(listing, "w") as f:
            f.writelines(lines)
    return {"listing": listing, "mean_seconds": float(np.mean(durations))}


def _jasper(fn, types, gpu: str, listing: str, mean_seconds: float) -> tuple:
    """Jasper's validation features (``common/dali/pipeline.py``): 16 kHz mono audio, silence trimmed,
    pre-emphasis, 20 ms windows every 10 ms, 64 mel bands in decibels, normalised over time, padded to
    a multiple of 16 frames (every operator on the CPU: Jasper's GPU part starts after the reader)."""
    encoded, label = fn.readers.file(file_list=listing, name="Reader")
    audio, _ = fn.decoders.audio(encoded, sample_rate=16000, downmix=True)
    begin, length = fn.nonsilent_region(audio, cutoff_db=-60)
    audio = fn.preemphasis_filter(fn.slice(audio, begin, length, axes=[0]), preemph_coeff=0.97)
    spec = fn.spectrogram(audio, nfft=512, window_length=320, window_step=160)
    mel = fn.mel_filter_bank(spec, sample_rate=16000, nfilter=64, normalize=True)
    logs = fn.to_decibels(mel, multiplier=math.log(10), reference=1.0, cutoff_db=math.log(1e-20))
    return fn.pad(fn.normalize(logs, axes=[1]), axes=[1], fill_value=0, align=16), label


domain(Domain("speech", "audio s/s", _speech_clips, _jasper, lambda out, kw: len(out[0]) * kw["mean_seconds"]))


# --- volumes: nnU-Net's biased crop (DeepLearningExamples, PyTorch/Segmentation/nnUNet) ---

VOLUME, PATCH = (1, 64, 96, 96), [48, 64, 64]


def _volumes(samples: int) -> dict:
    """``samples`` float32 image and uint8 label volumes (two classes, one object each)."""
    root = os.path.join(cache_dir(), f"volumes-{samples}")
    os.makedirs(root, exist_ok=True)
    rng = np.random.default_rng(0)
    imgs, lbls = [], []
    for case in range(samples):
        image = rng.normal(size=VOLUME).astype(np.float32)
        label = np.zeros(VOLUME, np.uint8)
        for cls in (1, 2):
            d, h, w = (int(rng.integers(0, s - 12)) for s in VOLUME[1:])
            label[0, d : d + 12, h : h + 16, w : w + 16] = cls
        for kind, array, paths in (("x", image, imgs), ("y", label, lbls)):
            path = os.path.join(root, f"case{case}_{kind}.npy")
            if not os.path.exists(path):
                np.save(path, array)
            paths.append(path)
    return {"imgs": imgs, "lbls": lbls}


def _biased_crop(fn, types, gpu: str, imgs: list[str], lbls: list[str]) -> tuple:
    """nnU-Net's ``load_data`` and ``biased_crop_fn`` (its CPU part: the rest runs on the GPU)."""
    img = fn.reshape(fn.readers.numpy(files=imgs, seed=1, name="Reader"), layout="CDHW")
    lbl = fn.reshape(fn.readers.numpy(files=lbls, seed=1, name="ReaderY"), layout="CDHW")
    start, end = fn.segmentation.random_object_bbox(lbl, background=0, format="start_end", foreground_prob=0.4)
    anchor = fn.roi_random_crop(lbl, roi_start=start, roi_end=end, crop_shape=[1, *PATCH])
    anchor = fn.slice(anchor, 1, 3, axes=[0])
    shape = types.Constant(np.array(PATCH), dtype=types.INT64)
    img = fn.slice(img, anchor, shape, axis_names="DHW", out_of_bounds_policy="pad")
    lbl = fn.slice(lbl, anchor, shape, axis_names="DHW", out_of_bounds_policy="pad")
    return img, lbl


domain(Domain("volumes", "Mvoxel/s", _volumes, _biased_crop, lambda out, kw: len(out[0]) * math.prod(VOLUME) / 1e6))


# --- augmentation: the ResNet-50 training pipeline with an automatic augmentation policy ---


def _jpegs(samples: int) -> dict:
    from raypipe.bench.dataset import prepare

    return {"file_root": prepare(None, samples).root}


def _augmented(fn, types, gpu: str, file_root: str, policy: str, antialias: bool = True) -> tuple:
    """Random-crop decode, resize to 224, then the policy (``fn``'s library's ``auto_aug``; none for
    ``"none"``, the reference), a flip and normalisation to CHW float, as DALI's EfficientNet example
    (which resizes with ``antialias=False``: the ``efficientnet`` domain)."""
    import importlib

    auto_aug = fn.__name__.rpartition(".")[0] + ".auto_aug"
    jpegs, labels = fn.readers.file(file_root=file_root, random_shuffle=True, name="Reader")
    images = fn.decoders.image_random_crop(jpegs, output_type=types.RGB, random_area=[0.08, 1.0])
    images = fn.resize(images, size=[224, 224], antialias=antialias)
    if policy == "rand_augment":
        images = importlib.import_module(f"{auto_aug}.rand_augment").rand_augment(images, n=2, m=9, shape=[224, 224])
    elif policy == "trivial_augment":
        images = importlib.import_module(f"{auto_aug}.trivial_augment").trivial_augment_wide(images, shape=[224, 224])
    elif policy == "auto_augment":
        images = importlib.import_module(f"{auto_aug}.auto_augment").auto_augment_image_net(images, shape=[224, 224])
    images = fn.crop_mirror_normalize(
        images, device=gpu, dtype=types.FLOAT, output_layout="CHW", mirror=fn.random.coin_flip(),
        mean=[0.485 * 255, 0.456 * 255, 0.406 * 255], std=[0.229 * 255, 0.224 * 255, 0.225 * 255],
    )  # fmt: skip
    return images, labels


domain(
    Domain(
        "efficientnet",
        "img/s",
        lambda samples: {**_jpegs(samples), "policy": "trivial_augment", "antialias": False},
        _augmented,
        conditionals=True,
    )
)
for _policy in ("none", "auto_augment", "rand_augment", "trivial_augment"):
    domain(
        Domain(
            _policy if _policy != "none" else "no_augment",
            "img/s",
            lambda samples, p=_policy: {**_jpegs(samples), "policy": p},
            _augmented,
            conditionals=True,
        )
    )


def _gamma(out0, in0):
    """A per-pixel loop of the kind users hand to Numba: gamma 0.8 on every channel value."""
    for y in range(in0.shape[0]):
        for x in range(in0.shape[1]):
            for c in range(in0.shape[2]):
                out0[y, x, c] = np.uint8(255.0 * (in0[y, x, c] / 255.0) ** 0.8 + 0.5)


def _numba_augmented(fn, types, gpu: str, file_root: str) -> tuple:
    """The ResNet-50 training pipeline with a user's Numba function (``fn``'s library's Numba plugin)
    after the resize: ``run_fn`` compiled by Numba in both libraries, the rest as in ``no_augment``."""
    import importlib

    plugin = importlib.import_module(fn.__name__.rpartition(".")[0] + ".plugin.numba.fn")
    jpegs, labels = fn.readers.file(file_root=file_root, random_shuffle=True, name="Reader")
    images = fn.decoders.image_random_crop(jpegs, output_type=types.RGB, random_area=[0.08, 1.0])
    images = fn.resize(images, size=[224, 224])
    images = plugin.numba_function(
        images, run_fn=_gamma, out_types=[types.UINT8], in_types=[types.UINT8], outs_ndim=[3], ins_ndim=[3]
    )
    images = fn.crop_mirror_normalize(
        images, device=gpu, dtype=types.FLOAT, output_layout="CHW", mirror=fn.random.coin_flip(),
        mean=[0.485 * 255, 0.456 * 255, 0.406 * 255], std=[0.229 * 255, 0.224 * 255, 0.225 * 255],
    )  # fmt: skip
    return images, labels


domain(Domain("numba_function", "img/s", _jpegs, _numba_augmented))


def _simclr_view(fn, types, gpu: str, file_root: str) -> tuple:
    """A SimCLR/BYOL view as solo-learn's DALI pipeline makes it: random-crop decode and resize, then
    colour jitter (p=0.8), grey-scale (p=0.2) and Gaussian blur (p=0.5), each an ``if`` on a coin flip
    (``enable_conditionals``), a flip and normalisation to CHW float."""
    jpegs, labels = fn.readers.file(file_root=file_root, random_shuffle=True, name="Reader")
    images = fn.decoders.image_random_crop(jpegs, output_type=types.RGB, random_area=[0.08, 1.0])
    images = fn.resize(images, size=[224, 224])
    if fn.random.coin_flip(probability=0.8, dtype=types.BOOL):
        images = fn.color_twist(
            images, brightness=fn.random.uniform(range=[0.6, 1.4]), contrast=fn.random.uniform(range=[0.6, 1.4]),
            saturation=fn.random.uniform(range=[0.8, 1.2]), hue=fn.random.uniform(range=[-36.0, 36.0]),
        )  # fmt: skip
    if fn.random.coin_flip(probability=0.2, dtype=types.BOOL):
        grey = fn.color_space_conversion(images, image_type=types.RGB, output_type=types.GRAY)
        images = fn.cat(grey, grey, grey, axis=2)
    if fn.random.coin_flip(probability=0.5, dtype=types.BOOL):
        images = fn.gaussian_blur(images, window_size=23, sigma=fn.random.uniform(range=[0.1, 2.0]))
    images = fn.crop_mirror_normalize(
        images, device=gpu, dtype=types.FLOAT, output_layout="CHW", mirror=fn.random.coin_flip(),
        mean=[0.485 * 255, 0.456 * 255, 0.406 * 255], std=[0.229 * 255, 0.224 * 255, 0.225 * 255],
    )  # fmt: skip
    return images, labels


domain(Domain("simclr_views", "img/s", _jpegs, _simclr_view, conditionals=True))


# --- video: clips of an action-recognition training pipeline (UCF101-like VP9 files) ---

CLIP = (240, 320, 64)  # height, width, frames of each file


def _clips(samples: int) -> dict:
    """``samples // 8`` VP9 files (at least 4) of :data:`CLIP`: a textured scene panning and
    changing, keyframes every 16 frames (VP9: a codec DALI's CPU build decodes)."""
    import av

    height, width, frames = CLIP
    root = os.path.join(cache_dir(), f"clips-{samples}")
    os.makedirs(root, exist_ok=True)
    files = []
    for clip in range(max(4, samples // 8)):
        path = os.path.join(root, f"clip{clip}.webm")
        files.append(path)
        if os.path.exists(path):
            continue
        rng = np.random.default_rng(clip)
        scene = rng.integers(0, 256, (height, 2 * width, 3), dtype=np.uint8)
        with av.open(path + ".part", "w", format="webm") as container:
            stream = container.add_stream("libvpx-vp9", rate=25, options={"g": "16", "deadline": "realtime"})
            stream.height, stream.width, stream.pix_fmt = height, width, "yuv420p"
            for k in range(frames):
                image = np.ascontiguousarray(scene[:, 2 * k : 2 * k + width])
                image[: 8 + k, : 8 + k] = (4 * k) % 256
                container.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")))
            container.mux(stream.encode())
        os.replace(path + ".part", path)
    return {"files": files}


def _video_clips(fn, types, gpu: str, files: list[str]) -> tuple:
    """8-frame clips 2 frames apart, shuffled, each cropped to 112x112 at a random place and laid out
    as CFHW floats (the input of a 3-D CNN)."""
    video, label = fn.experimental.readers.video(filenames=files, labels=list(range(len(files))), sequence_length=8,
                                                 stride=2, step=8, random_shuffle=True, name="Reader")  # fmt: skip
    crop = fn.crop(video.gpu() if gpu == "gpu" else video, crop=(112, 112), crop_pos_x=fn.random.uniform(range=(0, 1)),
                   crop_pos_y=fn.random.uniform(range=(0, 1)), dtype=types.FLOAT)  # fmt: skip
    return fn.transpose(crop, perm=[3, 0, 1, 2]), label


domain(Domain("video", "frames/s", _clips, _video_clips, lambda out, kw: 8 * len(out[0])))

#: a mild perspective (output to input, row by row), as a camera-tilt augmentation of video frames applies
_TILT = [1.02, 0.03, -4.0, -0.02, 0.98, 3.0, 0.0002, -0.0001, 1.0]


def _video_augment(fn, types, gpu: str, files: list[str]) -> tuple:
    """The ``video`` clips with DALI's per-frame colour jitter (a brightness and contrast drawn for
    each frame, given through ``fn.per_frame``) and a perspective warp of every frame, before the
    crop: the augmentations of video training scripts."""
    video, label = fn.experimental.readers.video(filenames=files, labels=list(range(len(files))), sequence_length=8,
                                                 stride=2, step=8, random_shuffle=True, name="Reader")  # fmt: skip
    video = video.gpu() if gpu == "gpu" else video
    brightness = fn.per_frame(fn.random.uniform(range=(0.7, 1.3), shape=(8,)))
    contrast = fn.per_frame(fn.random.uniform(range=(0.7, 1.3), shape=(8,)))
    video = fn.color_twist(video, brightness=brightness, contrast=contrast)
    video = fn.experimental.warp_perspective(video, matrix=_TILT, border_mode="replicate")
    crop = fn.crop(video, crop=(112, 112), crop_pos_x=fn.random.uniform(range=(0, 1)),
                   crop_pos_y=fn.random.uniform(range=(0, 1)), dtype=types.FLOAT)  # fmt: skip
    return fn.transpose(crop, perm=[3, 0, 1, 2]), label


domain(Domain("video_augment", "frames/s", _clips, _video_augment, lambda out, kw: 8 * len(out[0])))


# --- measuring ---


def _raypipe_pipe(entry: Domain, kwargs: dict, batch: int, threads: int, gpu: str):
    import raypipe as rp
    from raypipe import fn, types

    def graph():
        return entry.graph(fn, types, gpu, **kwargs)

    return rp.pipeline_def(
        graph, batch_size=batch, num_threads=threads, seed=0, enable_conditionals=entry.conditionals
    )()


def _dali_pipe(entry: Domain, kwargs: dict, batch: int, threads: int):
    from nvidia.dali import fn, pipeline_def, types

    def graph():
        return entry.graph(fn, types, "cpu", **kwargs)

    pipe = pipeline_def(graph, batch_size=batch, num_threads=threads, device_id=None, seed=0,
                        enable_conditionals=entry.conditionals)()  # fmt: skip
    pipe.build()
    return pipe


def one_round(pipe, entry: Domain, kwargs: dict, seconds: float) -> float:
    """Units per second of ``pipe.run()`` over about ``seconds``."""
    units, began = 0.0, time.perf_counter()
    while time.perf_counter() - began < seconds:
        outputs = pipe.run()
        units += entry.units(outputs, kwargs) if entry.units else len(outputs[0])
    return units / (time.perf_counter() - began)


def rates(pipes: list, entry: Domain, kwargs: dict, seconds: float, rounds: int) -> list[float]:
    """Each pipeline's best rate over ``rounds`` rounds, the pipelines taking turns within each round
    (the machine is shared: load that comes and goes falls on both alike); a warm-up batch first."""
    for pipe in pipes:
        pipe.run()
    best = [0.0] * len(pipes)
    for _ in range(rounds):
        for k, pipe in enumerate(pipes):
            best[k] = max(best[k], one_round(pipe, entry, kwargs, seconds))
    return best


def cpu_stage_ms(entry: Domain, kwargs: dict, batch: int, rounds: int, samples: int = 128) -> float:
    """One thread's CPU milliseconds per sample of the CPU stage of a GPU node (best of ``rounds``)."""
    pipe = _raypipe_pipe(entry, kwargs, batch, 1, "gpu")
    stage = pipe.engine.cpu_stage({"on_gpu": True, "decode_on_gpu": False})
    size = pipe.epoch_size(entry.reader)
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
                ours, theirs = rates([pipe, _dali_pipe(entry, kwargs, args.batch, args.threads)], entry, kwargs,
                                     args.seconds, args.rounds)  # fmt: skip
            except ImportError:
                (ours,), theirs = rates([pipe], entry, kwargs, args.seconds, args.rounds), float("nan")
        cost = cpu_stage_ms(entry, kwargs, args.batch, args.rounds)
        print(f"| {name} | {ours:.1f} {entry.unit} | {theirs:.1f} {entry.unit} | {ours / theirs:.2f}x | {cost:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
