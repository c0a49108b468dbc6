"""Pipelines the object-store service tests serve (importable by Ray workers)."""

from __future__ import annotations

import raypipe as rp
from raypipe import fn


@rp.pipeline_def(batch_size=4, num_threads=1)
def folder(file_root):
    """Every image of a class folder tree (local or on a bucket) at 32 x 32, with its class."""
    jpegs, labels = fn.readers.file(file_root=file_root, name="Reader")
    return fn.resize(fn.decoders.image(jpegs), resize_x=32, resize_y=32), labels
