"""NVIDIA DALI's CPU pipeline for the same recipe: the reference raypipe is measured against.

``nvidia-dali-cuda120`` (the ``bench`` extra) runs CPU-only pipelines (``device_id=None``)
on machines without a GPU. Its ``image_random_crop`` decodes only the crop window.
"""

from __future__ import annotations

from typing import Any

from raypipe.presets import IMAGENET_MEAN, IMAGENET_STD


def dali_unavailable() -> str | None:
    """Why DALI cannot run here (not installed, or fails to import), or None when it can."""
    try:
        import nvidia.dali  # noqa: F401
    except Exception as exc:  # a broken install raises more than ImportError
        return f"nvidia.dali cannot be imported ({type(exc).__name__}: {exc}); pip install nvidia-dali-cuda120"
    return None


def dali_pipeline(file_root: str, batch_size: int, num_threads: int, seed: int) -> Any:
    """The built DALI pipeline: random-area crop decoded on the CPU, resized to 224x224, random
    mirror, ImageNet normalization, float32 CHW; labels from the class folders."""
    from nvidia.dali import fn, pipeline_def, types

    @pipeline_def(batch_size=batch_size, num_threads=num_threads, device_id=None, seed=seed)
    def resnet50_train():
        jpegs, labels = fn.readers.file(file_root=file_root, random_shuffle=True, name="Reader")
        images = fn.decoders.image_random_crop(jpegs, device="cpu")
        images = fn.resize(images, resize_x=224, resize_y=224)
        images = fn.crop_mirror_normalize(
            images,
            mirror=fn.random.coin_flip(),
            dtype=types.FLOAT,
            output_layout="CHW",
            mean=list(IMAGENET_MEAN),
            std=list(IMAGENET_STD),
        )
        return images, labels

    pipe = resnet50_train()
    pipe.build()
    return pipe
