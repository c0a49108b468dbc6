"""Pipelines and helpers shared by the framework iterator tests.

Most pipelines give the reader ``labels=range(N)``, so a sample's label is its sample index
and the tests can say exactly which samples every yielded row holds.
"""

from __future__ import annotations

import numpy as np

from raypipe import fn, pipeline_def

SIDE = 64
NAMES = ["images", "labels"]


def _corner(image: np.ndarray) -> np.ndarray:
    """Top-left SIDE x SIDE pixels: one shape for every sample (the fixtures are larger)."""
    return image[:SIDE, :SIDE]


@pipeline_def(batch_size=5, num_threads=1, seed=7)
def image_pipe(files, ragged=False, on_error="raise", **reader):
    jpegs, labels = fn.readers.file(files=files, labels=list(range(len(files))), name="Reader", **reader)
    images = fn.decoders.image(jpegs, on_error=on_error, name="images")
    if not ragged:
        images = fn.python_function(images, function=_corner, device="cpu")
    return images, labels


@pipeline_def(batch_size=5, num_threads=1, seed=7)
def label_pipe(files, **reader):
    _, labels = fn.readers.file(files=files, labels=list(range(len(files))), name="Reader", **reader)
    return labels


@pipeline_def(batch_size=6, num_threads=1, seed=7)
def folder_pipe(root):
    jpegs, labels = fn.readers.file(file_root=root, name="Reader")
    return fn.python_function(fn.decoders.image(jpegs), function=_corner, device="cpu"), labels


def labels_of(batch: dict, name: str = "labels") -> list[int]:
    return np.asarray(batch[name]).ravel().tolist()


def run_epoch(it) -> list[tuple[list[dict], list]]:
    """Every step of one epoch with the infos of its rows (one per pipeline)."""
    return [(step, it.last_batch_info) for step in it]


def drain(it) -> list[list[dict]]:
    """The rest of the epoch's steps, without ``iter()`` (which resets, or warns mid-epoch, as DALI's does)."""
    steps = []
    while True:
        try:
            steps.append(next(it))
        except StopIteration:
            return steps


def real_labels(steps, pipeline: int = 0) -> list[int]:
    """One pipeline's labels of the rows that are not padding, in yield order."""
    return [
        label
        for step, infos in steps
        for label, pad in zip(labels_of(step[pipeline]), infos[pipeline].is_pad, strict=True)
        if not pad
    ]
