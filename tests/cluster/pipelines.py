"""Pipelines the service tests serve (importable by Ray workers)."""

from __future__ import annotations

import numpy as np

import raypipe as rp
from raypipe import fn, types


@rp.pipeline_def(batch_size=5, num_threads=1)
def indexed(files):
    """Small images labelled with their sample index, so tests can check exactly-once. The
    decoder is "mixed", so batches come out of the GPU stage (numpy without a GPU)."""
    jpegs, labels = fn.readers.file(files=files, labels=list(range(len(files))), name="Reader")
    images = fn.decoders.image_random_crop(jpegs, device="mixed")
    images = fn.resize(images, resize_x=32, resize_y=32)
    return images, labels


@rp.pipeline_def(batch_size=5, num_threads=1, enable_conditionals=True)
def augmented(files):
    """``indexed`` through RandAugment (``raypipe.auto_aug``) where a coin flip says so (an ``if``
    on pipeline data): the flips and the augmentations are drawn from each sample's keyed streams,
    so any actor makes the same batch."""
    from raypipe.auto_aug import rand_augment

    images, labels = indexed.__wrapped__(files)
    if fn.random.coin_flip(dtype=types.BOOL, probability=0.75):
        images = rand_augment.rand_augment(images, n=2, m=9, fill_value=None)
    return images, labels


@rp.pipeline_def(batch_size=5, num_threads=1, device_id=0)
def indexed_on_gpu_0(files):
    """``indexed`` with ``device_id=0`` in its decorator, as DALI scripts write it."""
    return indexed.__wrapped__(files)


@rp.pipeline_def(batch_size=5, num_threads=1)
def skipping(files):
    """``indexed`` with a decoder that skips undecodable files instead of raising."""
    jpegs, labels = fn.readers.file(files=files, labels=list(range(len(files))), name="Reader")
    images = fn.decoders.image_random_crop(jpegs, device="mixed", on_error="skip")
    images = fn.resize(images, resize_x=32, resize_y=32)
    return images, labels


@rp.pipeline_def(batch_size=4, num_threads=1)
def large(files):
    """Batches of 4 x 160 x 160 x 3 uint8 (300 KiB): large enough to live in the object store."""
    jpegs, labels = fn.readers.file(files=files, labels=list(range(len(files))), name="Reader")
    images = fn.resize(fn.decoders.image(jpegs), resize_x=160, resize_y=160)
    return images, labels


@rp.pipeline_def(batch_size=8, num_threads=1)
def big_batches(files):
    """Batches of 8 x 512 x 512 x 3 uint8 (6 MiB) labelled with their sample index: a dozen fill a
    small object store."""
    jpegs, labels = fn.readers.file(files=files, labels=list(range(len(files))), name="Reader")
    images = fn.resize(fn.decoders.image(jpegs), resize_x=512, resize_y=512)
    return images, labels


@rp.pipeline_def(batch_size=8, num_threads=1)
def big_skipping(files):
    """``big_batches`` with a decoder that skips undecodable files instead of raising."""
    jpegs, labels = fn.readers.file(files=files, labels=list(range(len(files))), name="Reader")
    images = fn.resize(fn.decoders.image(jpegs, on_error="skip"), resize_x=512, resize_y=512)
    return images, labels


@rp.pipeline_def(batch_size=5, num_threads=1)
def broken_in_actors(files):
    """Builds in the driver, fails in every pipeline actor (to test a serve that fails part-way)."""
    import ray

    if ray.is_initialized() and ray.get_runtime_context().get_actor_id() is not None:
        raise RuntimeError("this pipeline cannot be built inside an actor")
    jpegs, labels = fn.readers.file(files=files, name="Reader")
    return fn.decoders.image(jpegs), labels


MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]


@rp.pipeline_def(batch_size=4, num_threads=1)
def resized(files, normalize: bool):
    """32 x 32 crops as uint8 HWC, or (``normalize``) normalized float32 CHW."""
    jpegs, labels = fn.readers.file(files=files, labels=list(range(len(files))), name="Reader")
    images = fn.resize(fn.decoders.image(jpegs), resize_x=32, resize_y=32)
    if normalize:
        images = fn.crop_mirror_normalize(images, mean=MEAN, std=STD, output_layout="CHW")
    return images, labels


@rp.pipeline_def(batch_size=5, num_threads=1)
def converted(dst):
    """What ``raypipe convert`` wrote into ``dst``, through the format's own reader, decoded to 32 x 32."""
    from raypipe.formats.registry import read_converted

    jpegs, labels = read_converted(dst, name="Reader")
    images = fn.decoders.image_random_crop(jpegs, device="mixed")
    return fn.resize(images, resize_x=32, resize_y=32), labels


def _slow(image):
    """50 ms of extra CPU-stage work per sample (sleeping: the test machine has 2 cores)."""
    import time

    time.sleep(0.05)
    return image


@rp.pipeline_def(batch_size=5, num_threads=1)
def slowed(files):
    """``indexed`` with a slow CPU-stage operator, so a rank reading fast waits for data."""
    jpegs, labels = fn.readers.file(files=files, labels=list(range(len(files))), name="Reader")
    images = fn.python_function(fn.decoders.image(jpegs), function=_slow)
    return fn.resize(images, resize_x=32, resize_y=32), labels


@rp.pipeline_def(batch_size=5, num_threads=1)
def webdataset_text_labels(dst):
    """A WebDataset that ``raypipe convert`` wrote into ``dst``: images at 32 x 32 and each sample's
    ``.cls`` member as it is, ASCII bytes of one or two characters ("7", "12"): a ragged output."""
    import os

    from raypipe.formats.registry import get

    fmt = get("webdataset")
    data = sorted(os.path.join(dst, f) for f in os.listdir(dst) if f.startswith("shard-") and f.endswith(".tar"))
    jpegs, labels = fn.readers.webdataset(
        paths=data, index_paths=[fmt.index_path(p) for p in data], ext=["jpg;png", "cls"], name="Reader"
    )
    images = fn.resize(fn.decoders.image(jpegs), resize_x=32, resize_y=32)
    return images, labels


NUMBERED = 22  # samples of ``numbered``'s epoch


def numbered_sample(info: rp.types.SampleInfo):
    """Sample ``info.idx_in_epoch`` of a 22-sample dataset: a 6 x 6 x 3 image whose pixels encode
    the index, and the index; StopIteration past the end, as DALI's per-sample sources end."""
    import numpy as np

    index = info.idx_in_epoch
    if index >= NUMBERED:
        raise StopIteration
    image = (np.arange(6 * 6 * 3, dtype=np.uint8).reshape(6, 6, 3) + index * 7).astype(np.uint8)
    return image, np.array([index], dtype=np.int64)


@rp.pipeline_def(batch_size=4, num_threads=1)
def from_source():
    """``numbered_sample`` through an external source (the service drives it like a reader), with
    a random flip: exactly-once and identical bytes include the sample's keyed randomness."""
    images, labels = fn.external_source(numbered_sample, num_outputs=2, batch=False, layout=["HWC", ""])
    return fn.flip(images, horizontal=fn.random.coin_flip()), labels


def counting_batches():
    """A generator of batches: a stateful source the service must refuse."""
    import numpy as np

    for i in range(3):
        yield [np.array([i])] * 4


@rp.pipeline_def(batch_size=4, num_threads=1)
def from_generator():
    return fn.external_source(counting_batches)


@rp.pipeline_def(batch_size=3, num_threads=1)
def speech_features(manifest):
    """Speech from a NeMo manifest: each file's audio at 16 kHz (its length differs by file), its
    log mel spectrogram (64 bands, time ragged) and its index in the manifest."""
    audio, idx = fn.readers.nemo_asr(
        manifest_filepaths=manifest,
        sample_rate=16000,
        read_sample_rate=False,
        read_text=False,
        read_idxs=True,
        name="Reader",
    )
    spec = fn.spectrogram(fn.preemphasis_filter(audio), nfft=512, window_length=320, window_step=160)
    mel = fn.mel_filter_bank(spec, sample_rate=16000, nfilter=64)
    return audio, fn.to_decibels(mel, multiplier=10.0, reference=1.0, cutoff_db=-100), idx


@rp.pipeline_def(batch_size=4, num_threads=2)
def video_clips(files):
    """3-frame sequences of video files (``readers.video`` on the GPU, as DALI scripts write it),
    labelled with their file and first frame, cropped at the top left."""
    video, label, first = fn.readers.video(device="gpu", filenames=files, labels=list(range(len(files))),
                                           sequence_length=3, step=3, enable_frame_num=True, name="Reader")  # fmt: skip
    return fn.crop(video, crop=(24, 32), crop_pos_x=0.0, crop_pos_y=0.0), label, first


#: the brightness of each frame of :func:`video_clips_per_frame`'s sequences
FRAME_GAINS = (1.0, 0.5, 0.25)


@rp.pipeline_def(batch_size=4, num_threads=2)
def video_clips_per_frame(files):
    """:func:`video_clips`'s sequences with each frame's brightness scaled by its own gain
    (``fn.per_frame``)."""
    video, label, first = fn.readers.video(device="gpu", filenames=files, labels=list(range(len(files))),
                                           sequence_length=3, step=3, enable_frame_num=True, name="Reader")  # fmt: skip
    clips = fn.crop(video, crop=(24, 32), crop_pos_x=0.0, crop_pos_y=0.0)
    gains = fn.per_frame(np.array(FRAME_GAINS, np.float32))
    return fn.brightness(clips, brightness=gains), label, first
