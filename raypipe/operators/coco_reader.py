"""``readers.coco``: encoded images of a COCO dataset with their boxes and labels (and polygons or
pixel-wise masks, and image ids), in DALI's output order, sharded and shuffled as every reader.

The annotations are parsed by :mod:`raypipe.formats.coco`. ``save_preprocessed_annotations`` writes
the parsed index to ``save_preprocessed_annotations_dir`` and ``preprocessed_annotations`` reads it
back instead of the JSON: raypipe's own format (one ``.npz``), not DALI's binary files.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ArgumentError, ReaderError
from ..formats.coco import CocoIndex, CocoOptions, load_annotations, load_index, save_index
from ..formats.coco_masks import pixelwise_mask
from ..operator import Schema, register
from .reader_base import ShardedReader, refuse_unexpanded_home
from .readers import read_file

OP = "readers.coco"
#: DALI's deprecated aliases: old argument -> current one
DEPRECATED = {
    "masks": "polygon_masks",
    "save_img_ids": "image_ids",
    "meta_files_path": "preprocessed_annotations",
    "dump_meta_files": "save_preprocessed_annotations",
    "dump_meta_files_path": "save_preprocessed_annotations_dir",
}


@register
class CocoReader(ShardedReader):
    """Encoded images (uint8), boxes (float32, ``(objects, 4)``) and labels (int32, ``(objects,)``);
    then polygons (int32 ``(polygons, 3)``) and vertices (float32 ``(vertices, 2)``) with
    ``polygon_masks``, or masks (int32 ``(H, W, 1)``) with ``pixelwise_masks``; then the image id
    (int32 ``(1,)``) with ``image_ids``."""

    schema = Schema(OP, devices=("cpu",), min_inputs=0, max_inputs=0, num_outputs=3, is_reader=True)
    SHUFFLES_LISTING = True

    def configure(
        self,
        file_root: str | None = None,
        annotations_file: str = "",
        images: Sequence[str] | None = None,
        ltrb: bool = False,
        ratio: bool = False,
        skip_empty: bool = False,
        size_threshold: float = 0.1,
        include_iscrowd: bool = True,
        avoid_class_remapping: bool = False,
        polygon_masks: bool = False,
        pixelwise_masks: bool = False,
        image_ids: bool = False,
        preprocessed_annotations: str = "",
        save_preprocessed_annotations: bool = False,
        save_preprocessed_annotations_dir: str = "",
        **reader_args: Any,
    ) -> None:
        given = {old: reader_args.pop(old) for old in list(reader_args) if old in DEPRECATED}
        chosen = {
            "polygon_masks": polygon_masks,
            "image_ids": image_ids,
            "preprocessed_annotations": preprocessed_annotations,
            "save_preprocessed_annotations": save_preprocessed_annotations,
            "save_preprocessed_annotations_dir": save_preprocessed_annotations_dir,
        }
        for old, value in given.items():
            chosen[DEPRECATED[old]] = value
        self.configure_reader(**reader_args)
        if file_root is None:
            raise ArgumentError(f"{OP}: file_root is required")
        if bool(annotations_file) == bool(chosen["preprocessed_annotations"]):
            raise ArgumentError(f"{OP}: give exactly one of annotations_file and preprocessed_annotations")
        if images is not None and chosen["preprocessed_annotations"]:
            raise ArgumentError(f"{OP}: images cannot be used with preprocessed_annotations (as in DALI)")
        if chosen["polygon_masks"] and pixelwise_masks:
            raise ArgumentError(f"{OP}: polygon_masks and pixelwise_masks are mutually exclusive")
        if chosen["save_preprocessed_annotations"] and not chosen["save_preprocessed_annotations_dir"]:
            raise ArgumentError(f"{OP}: save_preprocessed_annotations needs save_preprocessed_annotations_dir")
        if pixelwise_masks and chosen["preprocessed_annotations"]:
            raise ArgumentError(f"{OP}: pixelwise_masks are not kept in preprocessed annotations")
        self.file_root = os.fspath(file_root)
        self.annotations_file = os.fspath(annotations_file) if annotations_file else ""
        for name, value in (("file_root", self.file_root), ("annotations_file", self.annotations_file)):
            refuse_unexpanded_home(OP, name, [value])
        self.images = None if images is None else [os.fspath(i) for i in images]
        self.options = CocoOptions(
            ltrb=bool(ltrb),
            ratio=bool(ratio),
            skip_empty=bool(skip_empty),
            size_threshold=float(size_threshold),
            include_iscrowd=bool(include_iscrowd),
            avoid_class_remapping=bool(avoid_class_remapping),
            polygons=bool(chosen["polygon_masks"]),
            rle=bool(pixelwise_masks),
        )
        self.image_ids = bool(chosen["image_ids"])
        self.preprocessed = chosen["preprocessed_annotations"]
        self.save_dir = chosen["save_preprocessed_annotations_dir"] if chosen["save_preprocessed_annotations"] else ""
        self._num_outputs = 3 + 2 * self.options.polygons + self.options.rle + self.image_ids
        self.index: CocoIndex | None = None

    @property
    def num_outputs(self) -> int:
        return self._num_outputs

    def prepare(self) -> None:
        """Parse the annotations (or read the preprocessed index); save it when asked."""
        if self.index is not None:
            return
        if self.preprocessed:
            index = load_index(os.fspath(self.preprocessed))
            if self.options.polygons and not index.polygons and len(index):
                raise ReaderError(f"{OP}: the preprocessed annotations hold no polygons (saved without polygon_masks)")
        else:
            index = load_annotations(self.annotations_file, self.options, self.images)
        if not len(index):
            raise ReaderError(f"{OP}: no images to read in {self.annotations_file or self.preprocessed!r}")
        self.check_shards(len(index))
        if self.save_dir:
            save_index(index, os.fspath(self.save_dir))
        self.index = index

    def __len__(self) -> int:
        self.prepare()
        return len(self.index)

    def source_of(self, index: int) -> str:
        """The image file behind sample ``index``."""
        if self.index is not None and 0 <= index < len(self.index):
            return os.path.join(self.file_root, self.index.files[index])
        return f"sample {index}"

    def content_digest(self) -> str:
        """A hash of the image files, ids and boxes (what identifies the dataset's layout)."""
        self.prepare()
        h = hashlib.sha256()
        for name in self.index.files:
            h.update(name.encode() + b"\0")
        h.update(self.index.ids.tobytes())
        for boxes in self.index.boxes:
            h.update(boxes.tobytes())
        return h.hexdigest()[:16]

    def read(self, index: int) -> tuple[np.ndarray, ...]:
        """Random access: the outputs of sample ``index`` (copies: a sample may be changed downstream)."""
        self.prepare()
        if not 0 <= index < len(self.index):
            raise IndexError(f"{OP}: sample index {index} outside [0, {len(self.index)})")
        path = os.path.join(self.file_root, self.index.files[index])
        try:
            data = read_file(path)
        except OSError as exc:
            raise ReaderError(f"{OP}: cannot read {path!r}: {exc.strerror or exc}") from None
        out = [data, self.index.boxes[index].copy(), self.index.labels[index].copy()]
        if self.options.polygons:
            out += [self.index.polygons[index].copy(), self.index.vertices[index].copy()]
        if self.options.rle:
            width, height = (int(v) for v in self.index.sizes[index])
            out.append(pixelwise_mask(self.index.segmentations[index], self.index.labels[index], height, width))
        if self.image_ids:
            out.append(self.index.ids[index : index + 1].copy())
        return tuple(out)
