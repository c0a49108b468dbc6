"""COCO instances annotations parsed into what ``readers.coco`` returns per image, as DALI does.

Images are ordered by id (or as ``images`` lists them); an image's objects keep the file's order.
Boxes are float32 ``[x, y, w, h]`` (``ltrb``: ``[l, t, r, b]``; ``ratio``: divided by the image's
size, in float32 as DALI computes them); objects with a side below ``size_threshold`` pixels are
dropped, crowds too unless ``include_iscrowd``; labels are the category's 1-based place in the
categories list (``avoid_class_remapping``: the category id). Polygons are ``[object, first vertex,
end vertex]`` rows over the image's ``(x, y)`` vertices; RLE segmentations (crowds) come as RLE
for pixel-wise masks.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import ReaderError

#: the file a preprocessed index is saved to, inside ``save_preprocessed_annotations_dir``
INDEX_FILE = "coco_index.npz"


@dataclass(frozen=True)
class CocoOptions:
    """How annotations become outputs (the arguments of ``readers.coco`` that shape them)."""

    ltrb: bool = False
    ratio: bool = False
    skip_empty: bool = False
    size_threshold: float = 0.1
    include_iscrowd: bool = True
    avoid_class_remapping: bool = False
    polygons: bool = False
    rle: bool = False


@dataclass
class CocoIndex:
    """Every image's file, id and size with its objects' boxes, labels and polygons."""

    files: list[str]
    ids: np.ndarray  # int32 (images,)
    sizes: np.ndarray  # int32 (images, 2): width, height
    boxes: list[np.ndarray]  # float32 (objects, 4) per image
    labels: list[np.ndarray]  # int32 (objects,) per image
    polygons: list[np.ndarray] = field(default_factory=list)  # int32 (polygons, 3) per image
    vertices: list[np.ndarray] = field(default_factory=list)  # float32 (vertices, 2) per image
    segmentations: list[list] = field(default_factory=list)  # per image, per object: polygons or an RLE dict

    def __len__(self) -> int:
        return len(self.files)


def load_annotations(annotations_file: str, options: CocoOptions, images: Sequence[str] | None = None) -> CocoIndex:
    """Parse ``annotations_file`` (raise ReaderError naming it and what is wrong)."""
    try:
        with open(annotations_file, encoding="utf-8") as f:
            document = json.load(f)
    except OSError as exc:
        raise ReaderError(f"readers.coco: cannot open annotations_file {annotations_file!r}: {exc.strerror}") from None
    except ValueError as exc:
        raise ReaderError(f"readers.coco: annotations_file {annotations_file!r} is not JSON: {exc}") from None
    try:
        return _index(document, options, images)
    except (KeyError, TypeError, ValueError) as exc:
        raise ReaderError(f"readers.coco: annotations_file {annotations_file!r}: malformed entry ({exc!r})") from None


def _index(document: dict, options: CocoOptions, wanted: Sequence[str] | None) -> CocoIndex:
    categories = {int(c["id"]): k + 1 for k, c in enumerate(document.get("categories", []))}
    entries = sorted(document["images"], key=lambda e: int(e["id"]))
    objects: dict[int, list[dict]] = {int(e["id"]): [] for e in entries}
    for ann in document.get("annotations", []):
        if int(ann["image_id"]) in objects:
            objects[int(ann["image_id"])].append(ann)
    if wanted is not None:
        by_name = {e["file_name"]: e for e in entries}
        missing = [name for name in wanted if name not in by_name]
        if missing:
            raise ValueError(f"images {missing[:3]} are not in the annotations")
        entries = [by_name[name] for name in wanted]
    index = CocoIndex([], np.zeros(0, np.int32), np.zeros((0, 2), np.int32), [], [])
    ids, sizes = [], []
    for entry in entries:
        width, height = int(entry["width"]), int(entry["height"])
        kept = [a for a in objects[int(entry["id"])] if _kept(a, options)]
        if options.skip_empty and not kept:
            continue
        index.files.append(entry["file_name"])
        ids.append(int(entry["id"]))
        sizes.append((width, height))
        boxes = np.array([a["bbox"] for a in kept], dtype=np.float32).reshape(-1, 4)
        index.boxes.append(_shape_boxes(boxes, width, height, options))
        label = [
            int(a["category_id"]) if options.avoid_class_remapping else categories[int(a["category_id"])] for a in kept
        ]
        index.labels.append(np.array(label, dtype=np.int32))
        if options.polygons:
            polygons, vertices = _polygons(kept, width, height, options.ratio)
            index.polygons.append(polygons)
            index.vertices.append(vertices)
        if options.rle:
            index.segmentations.append([a.get("segmentation", []) for a in kept])
    index.ids = np.array(ids, dtype=np.int32)
    index.sizes = np.array(sizes, dtype=np.int32).reshape(-1, 2)
    return index


def _kept(ann: dict, options: CocoOptions) -> bool:
    if not options.include_iscrowd and int(ann.get("iscrowd", 0)):
        return False
    width, height = (np.float32(v) for v in ann["bbox"][2:4])
    return not (width < options.size_threshold or height < options.size_threshold)


def _shape_boxes(boxes: np.ndarray, width: int, height: int, options: CocoOptions) -> np.ndarray:
    """``[x, y, w, h]`` in float32 as ``ltrb`` and ``ratio`` ask (DALI's float32 arithmetic)."""
    if options.ltrb:
        boxes[:, 2:] += boxes[:, :2]
    if options.ratio:
        boxes /= np.array([width, height, width, height], dtype=np.float32)
    return boxes


def _polygons(kept: list[dict], width: int, height: int, ratio: bool) -> tuple[np.ndarray, np.ndarray]:
    """An image's polygons ``[object, first vertex, end vertex]`` and its ``(x, y)`` vertices."""
    rows, coordinates = [], []
    count = 0
    for k, ann in enumerate(kept):
        segmentation = ann.get("segmentation", [])
        if not isinstance(segmentation, list):
            continue  # an RLE (crowd) has no polygon
        for polygon in segmentation:
            points = np.asarray(polygon, dtype=np.float32).reshape(-1, 2)
            rows.append((k, count, count + len(points)))
            coordinates.append(points)
            count += len(points)
    vertices = np.concatenate(coordinates) if coordinates else np.zeros((0, 2), np.float32)
    if ratio:
        vertices = vertices / np.array([width, height], dtype=np.float32)
    return np.array(rows, dtype=np.int32).reshape(-1, 3), vertices


def save_index(index: CocoIndex, folder: str) -> str:
    """Write ``index`` (without segmentations) to ``folder``; return the file's path."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, INDEX_FILE)
    arrays = {"files": np.array(index.files), "ids": index.ids, "sizes": index.sizes}
    for name in ("boxes", "labels", "polygons", "vertices"):
        parts = getattr(index, name)
        arrays[f"{name}_counts"] = np.array([len(p) for p in parts], dtype=np.int64)
        if parts:
            arrays[name] = np.concatenate(parts)
    np.savez(path, **arrays)
    return path


def load_index(folder: str) -> CocoIndex:
    """An index that :func:`save_index` wrote to ``folder`` (raise ReaderError when absent)."""
    path = os.path.join(folder, INDEX_FILE)
    try:
        data = np.load(path)
    except OSError as exc:
        raise ReaderError(f"readers.coco: cannot read preprocessed annotations {path!r}: {exc}") from None
    index = CocoIndex([str(f) for f in data["files"]], data["ids"], data["sizes"], [], [])
    for name in ("boxes", "labels", "polygons", "vertices"):
        counts = data[f"{name}_counts"]
        if len(counts):
            setattr(index, name, np.split(data[name], np.cumsum(counts)[:-1]))
    return index
