"""Pipelines the service tests serve (importable by Ray workers)."""

from __future__ import annotations

import raypipe as rp
from raypipe import fn


@rp.pipeline_def(batch_size=5, num_threads=1)
def indexed(files):
    """Small images labelled with their sample index, so tests can check exactly-once. The
    decoder is "mixed", so batches come out of the GPU stage (numpy without a GPU)."""
    jpegs, labels = fn.readers.file(files=files, labels=list(range(len(files))), name="Reader")
    images = fn.decoders.image_random_crop(jpegs, device="mixed")
    images = fn.resize(images, resize_x=32, resize_y=32)
    return images, labels
