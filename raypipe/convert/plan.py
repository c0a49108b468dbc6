"""What a conversion writes: the samples in order, with their keys, cut into parts (shards
of a sharded format, commit chunks of an LMDB). Pure functions: a re-run plans the same parts
and skips those already done."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

import numpy as np

from ..errors import ReaderError, UsageError
from ..operators.readers import list_file_root, parse_file_list


@dataclass(frozen=True)
class Sample:
    """One source image: its file, label and key (unique, ordered like the samples)."""

    path: str
    label: int
    key: str


@dataclass(frozen=True)
class Part:
    """Consecutive samples written together: a shard file, or one LMDB transaction."""

    index: int
    name: str
    samples: tuple[Sample, ...]


@dataclass(frozen=True)
class Source:
    """The samples of a conversion and, for a folder tree, the class names by label."""

    samples: tuple[Sample, ...]
    classes: tuple[str, ...]

    def digest(self) -> str:
        """Identifies the source listing (keys and labels), so a re-run can tell it is the same."""
        h = hashlib.sha256()
        for s in self.samples:
            h.update(f"{s.key}\t{s.label}\n".encode())
        return h.hexdigest()[:16]


def list_source(src: str, shuffle_seed: int | None = None) -> Source:
    """A folder of class folders, or a list file of ``path label`` lines, in listed order, or in
    an order shuffled with ``shuffle_seed``: a folder lists class after class, and a reader's own
    shuffle (``random_shuffle``) mixes a container's records only within its ``initial_fill``
    buffer, so containers meant to be read that way are best written shuffled."""
    if os.path.isdir(src):
        paths, labels = list_file_root(src)
        root = src
        classes = tuple(sorted(e.name for e in os.scandir(src) if e.is_dir()))
    elif os.path.isfile(src):
        paths, labels = parse_file_list(src)
        root = os.path.dirname(os.path.abspath(src))
        classes = ()
    else:
        raise ReaderError(f"convert: source {src!r} is neither a folder nor a list file")
    order = range(len(paths))
    if shuffle_seed is not None:
        order = np.random.default_rng(shuffle_seed).permutation(len(paths)).tolist()
    samples = tuple(
        Sample(
            paths[j], int(labels[j]), sample_key(i, os.path.relpath(os.path.abspath(paths[j]), os.path.abspath(root)))
        )
        for i, j in enumerate(order)
    )
    return Source(samples, classes)


def sample_key(position: int, relpath: str) -> str:
    """``00000042_class_003/img_17`` (Caffe's ``convert_imageset`` style): keys sort in sample
    order (LMDB keeps keys sorted), and the rest names the source file."""
    stem = os.path.splitext(relpath)[0].replace(os.sep, "/")
    return f"{position:08d}_{stem}"


def plan_parts(samples: tuple[Sample, ...], part_size: int, stem: str, suffix: str) -> list[Part]:
    """Cut ``samples`` into parts of ``part_size``, named ``stem-00000-of-00010suffix``."""
    if part_size < 1:
        raise UsageError(f"the shard size must be positive, got {part_size}")
    count = max(1, -(-len(samples) // part_size))
    return [
        Part(i, f"{stem}-{i:05d}-of-{count:05d}{suffix}", samples[i * part_size : (i + 1) * part_size])
        for i in range(count)
    ]
