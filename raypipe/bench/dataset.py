"""The benchmark's JPEG files: a folder of class folders that every contender reads, generated
(and cached) when no folder is given, and described by count, mean size and megapixels."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import shutil
import statistics

from PIL import Image

from raypipe.datasets import make_jpeg_folder
from raypipe.operators.readers import list_file_root

GENERATED_SIZE = (480, 360)  # generated images are 320-640 x 240-480 (each side +-1/3)
GENERATED_VARY = 1 / 3
GENERATED_CLASSES = 8


@dataclasses.dataclass(frozen=True)
class Dataset:
    """The files of one benchmark run, in reader order, and what they are on average."""

    root: str
    paths: list[str]
    source: str
    mean_width: float
    mean_height: float
    mean_megapixels: float
    mean_kib: float

    def as_dict(self) -> dict:
        """For the JSON report (without the list of paths)."""
        fields = dataclasses.asdict(self)
        del fields["paths"]
        return {"images": len(self.paths), **fields}


def cache_dir() -> str:
    """Where generated data sets and subsets live: ``$XDG_CACHE_HOME/raypipe/bench``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "raypipe", "bench")


def prepare(data: str | None, images: int) -> Dataset:
    """The data set of ``images`` JPEGs: ``data``'s (all of them, or an even spread of
    ``images`` hard-linked into a cached folder so every contender reads exactly those), or
    generated into the cache. Reads every file once, which also warms the page cache."""
    root = data if data is not None else _generated(images)
    source = data if data is not None else "generated: 320-640 x 240-480, JPEG quality 90"
    paths = list_file_root(root)[0]
    if len(paths) > images:
        source = f"{images} of the {len(paths)} JPEGs of {source}"
        root = _subset(root, paths, images)
        paths = list_file_root(root)[0]
    return _describe(root, paths, source)


def _generated(images: int) -> str:
    """A cached folder of at least ``images`` generated JPEGs (written once, then reused)."""
    root = os.path.join(cache_dir(), f"generated-{images}")
    if not os.path.isdir(root):
        staging = f"{root}.tmp-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        per_class = -(-images // GENERATED_CLASSES)
        make_jpeg_folder(staging, GENERATED_CLASSES, per_class, GENERATED_SIZE, seed=0, vary=GENERATED_VARY)
        os.makedirs(os.path.dirname(root), exist_ok=True)
        os.replace(staging, root)
    return root


def _subset(root: str, paths: list[str], images: int) -> str:
    """A cached folder holding ``images`` of ``paths`` (evenly spread over the reader order, so
    over the classes) as hard links, or copies across file systems, with the same class folders."""
    step = len(paths) / images
    chosen = [paths[int(i * step)] for i in range(images)]
    key = hashlib.sha256()
    for path in chosen:
        stat = os.stat(path)
        key.update(f"{os.path.realpath(path)}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    folder = os.path.join(cache_dir(), f"subset-{key.hexdigest()[:16]}")
    if not os.path.isdir(folder):
        staging = f"{folder}.tmp-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        for path in chosen:
            target = os.path.join(staging, os.path.relpath(path, root))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            try:
                os.link(path, target)
            except OSError:
                shutil.copyfile(path, target)
        os.replace(staging, folder)
    return folder


def _describe(root: str, paths: list[str], source: str) -> Dataset:
    """Sizes from every file's header; reading the files warms the page cache for round 1."""
    widths, heights, sizes = [], [], []
    for path in paths:
        with open(path, "rb") as f:
            data = f.read()
        width, height = Image.open(io.BytesIO(data)).size
        widths.append(width)
        heights.append(height)
        sizes.append(len(data))
    return Dataset(
        root=root,
        paths=paths,
        source=source,
        mean_width=statistics.fmean(widths),
        mean_height=statistics.fmean(heights),
        mean_megapixels=statistics.fmean(w * h for w, h in zip(widths, heights)) / 1e6,
        mean_kib=statistics.fmean(sizes) / 1024,
    )
