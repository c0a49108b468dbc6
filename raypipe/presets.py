"""Ready-made pipelines: the ResNet-50 training pipeline used by the examples and benchmarks."""

from __future__ import annotations

from . import fn
from .pipeline import pipeline_def
from .types import FLOAT

IMAGENET_MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
IMAGENET_STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)


@pipeline_def(batch_size=64, num_threads=2, seed=0)
def resnet50_train(file_root: str, size: int = 224, decoder_device: str = "cpu", random_shuffle: bool = True):
    """Random-area crop decoded from JPEG, resized to ``size``, random mirror, ImageNet
    normalization, float32 CHW; labels from the class folders of ``file_root``."""
    jpegs, labels = fn.readers.file(file_root=file_root, random_shuffle=random_shuffle, name="Reader")
    images = fn.decoders.image_random_crop(jpegs, device=decoder_device)
    images = fn.resize(images, resize_x=size, resize_y=size)
    images = fn.crop_mirror_normalize(
        images,
        mirror=fn.random.coin_flip(),
        dtype=FLOAT,
        output_layout="CHW",
        mean=list(IMAGENET_MEAN),
        std=list(IMAGENET_STD),
    )
    return images, labels
