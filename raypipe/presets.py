"""Ready-made pipelines: the ResNet-50 training pipeline used by the examples and benchmarks."""

from __future__ import annotations

import os

from . import fn
from .errors import UsageError
from .formats.registry import CLASSES, converted_format, read_converted
from .pipeline import pipeline_def
from .storage import files, urls
from .types import FLOAT, FLOAT16, UINT8, DALIDataType

IMAGENET_MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
IMAGENET_STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)


def num_classes(file_root: str) -> int:
    """How many classes the labels of :func:`resnet50_train` count for ``file_root``: its class
    folders, or for a conversion by ``raypipe convert`` (a folder or URL) the classes it listed."""
    if converted_format(file_root) is None:
        return len([d for d in os.listdir(file_root) if os.path.isdir(os.path.join(file_root, d))])
    listing = urls.join(file_root, CLASSES)
    try:
        with files.open_binary(listing) as f:
            return len(f.read().splitlines())
    except OSError:
        raise UsageError(
            f"{file_root!r} holds a conversion without {CLASSES} (its source was a file list, not class folders): "
            "count its classes from that list"
        ) from None


@pipeline_def(batch_size=64, num_threads=2, seed=0)
def resnet50_train(
    file_root: str,
    size: int = 224,
    decoder_device: str = "cpu",
    random_shuffle: bool = True,
    dtype: DALIDataType = FLOAT,
    hw_decoder_load: float = 1.0,
):
    """Random-area crop decoded from JPEG, resized to ``size``, random mirror, ImageNet
    normalization, CHW; labels from the class folders of ``file_root``. A ``file_root`` that
    ``raypipe convert`` wrote into (TFRecord, WebDataset, RecordIO, Caffe LMDB) is read with its
    format's reader: the same images and labels in the same order, from container files (the random
    crops may differ: draws are keyed by each operator's place in the graph, and most formats'
    labels take one operator more).

    ``dtype`` is FLOAT (float32), FLOAT16 (half the bytes) or UINT8: a quarter of the bytes,
    not normalized (the rank normalizes, e.g. with ``rp.Normalize``). ``hw_decoder_load``: the
    share of each batch the GPU's hardware JPEG decoder takes (DALI's argument; all of it by default,
    the fastest share measured on an H200: docs/tuning.md)."""
    if dtype not in (FLOAT, FLOAT16, UINT8):
        raise ValueError(f"resnet50_train: dtype must be types.FLOAT, FLOAT16 or UINT8, got {dtype!r}")
    normalized = dtype is not UINT8
    if converted_format(file_root) is None:
        jpegs, labels = fn.readers.file(file_root=file_root, random_shuffle=random_shuffle, name="Reader")
    else:
        jpegs, labels = read_converted(file_root, random_shuffle=random_shuffle, name="Reader")
    images = fn.decoders.image_random_crop(jpegs, device=decoder_device, hw_decoder_load=hw_decoder_load)
    images = fn.resize(images, resize_x=size, resize_y=size)
    images = fn.crop_mirror_normalize(
        images,
        mirror=fn.random.coin_flip(),
        dtype=dtype,
        output_layout="CHW",
        mean=list(IMAGENET_MEAN) if normalized else 0.0,
        std=list(IMAGENET_STD) if normalized else 1.0,
    )
    return images, labels
