"""COCO annotations: crowds given as RLEs (uncompressed counts and the mask API's compressed strings)
become the same pixel-wise masks as DALI 2.4's reader makes, and have no polygons; the parsed index
survives being saved and loaded."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from PIL import Image

from raypipe.formats.coco import CocoOptions, load_annotations, load_index, save_index
from raypipe.formats.coco_masks import object_mask, pixelwise_mask

HEIGHT, WIDTH = 24, 30


def _rle_counts(mask: np.ndarray) -> list[int]:
    """The column-major runs of ``mask``, starting with zeros (COCO's uncompressed RLE)."""
    counts, current, run = [], False, 0
    for value in mask.T.reshape(-1):
        if value != current:
            counts.append(run)
            current, run = value, 0
        run += 1
    return [*counts, run]


def _rle_string(counts: list[int]) -> str:
    """The mask API's compressed form of ``counts`` (its ``rleToString``)."""
    out = []
    for i, value in enumerate(counts):
        x = value - counts[i - 2] if i > 2 else value
        more = True
        while more:
            c = x & 0x1F
            x >>= 5
            more = x != -1 if c & 0x10 else x != 0
            out.append(chr((c | 0x20 if more else c) + 48))
    return "".join(out)


@pytest.fixture(scope="module")
def crowd_dataset(tmp_path_factory) -> tuple[str, str, list[np.ndarray]]:
    """Two images: one with a polygon and an uncompressed-RLE crowd, one with a compressed-RLE crowd."""
    root = tmp_path_factory.mktemp("coco-rle")
    rng = np.random.default_rng(0)
    masks = [rng.uniform(size=(HEIGHT, WIDTH)) < 0.3 for _ in range(2)]
    masks[1][:, :3] = True  # a run that starts the mask
    for k in range(2):
        Image.fromarray(np.zeros((HEIGHT, WIDTH, 3), np.uint8)).save(os.path.join(root, f"{k}.jpg"))
    uncompressed = {"counts": _rle_counts(masks[0]), "size": [HEIGHT, WIDTH]}
    compressed = {"counts": _rle_string(_rle_counts(masks[1])), "size": [HEIGHT, WIDTH]}
    polygon = [[2.5, 3.0, 20.25, 4.5, 11.0, 18.75]]
    annotations = [
        {"id": 1, "image_id": 7, "category_id": 5, "bbox": [2.5, 3.0, 17.75, 15.75], "iscrowd": 0,
         "segmentation": polygon},
        {"id": 2, "image_id": 7, "category_id": 9, "bbox": [0, 0, 30, 24], "iscrowd": 1, "segmentation": uncompressed},
        {"id": 3, "image_id": 8, "category_id": 5, "bbox": [0, 0, 30, 24], "iscrowd": 1, "segmentation": compressed},
    ]  # fmt: skip
    document = {
        "images": [{"id": 7 + k, "file_name": f"{k}.jpg", "width": WIDTH, "height": HEIGHT} for k in range(2)],
        "annotations": annotations,
        "categories": [{"id": 9, "name": "b"}, {"id": 5, "name": "a"}],
    }
    path = os.path.join(root, "annotations.json")
    with open(path, "w") as f:
        json.dump(document, f)
    return str(root), path, masks


def test_rle_segmentations_decode_to_their_masks(crowd_dataset):
    _, annotations, masks = crowd_dataset
    index = load_annotations(annotations, CocoOptions(rle=True, polygons=True))
    np.testing.assert_array_equal(object_mask(index.segmentations[0][1], HEIGHT, WIDTH), masks[0])
    np.testing.assert_array_equal(object_mask(index.segmentations[1][0], HEIGHT, WIDTH), masks[1])
    assert index.polygons[0].tolist() == [[0, 0, 3]] and len(index.polygons[1]) == 0, "an RLE has no polygon"
    assert index.labels[0].tolist() == [2, 1], "labels: the category's place in the list, from 1"
    mask = pixelwise_mask(index.segmentations[0], index.labels[0], HEIGHT, WIDTH)
    assert mask.shape == (HEIGHT, WIDTH, 1) and mask.dtype == np.int32
    polygon = object_mask(index.segmentations[0][0], HEIGHT, WIDTH)
    expected = np.where(polygon, 2, np.where(masks[0], 1, 0))  # where both lie, the higher label
    np.testing.assert_array_equal(mask[..., 0], expected)


def test_pixelwise_masks_equal_dalis(crowd_dataset):
    pytest.importorskip("nvidia.dali")
    from nvidia.dali import fn, pipeline_def

    file_root, annotations, _ = crowd_dataset

    @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=0)
    def pipe():
        return tuple(fn.readers.coco(file_root=file_root, annotations_file=annotations, pixelwise_masks=True))

    p = pipe()
    p.build()
    theirs = p.run()[3]
    index = load_annotations(annotations, CocoOptions(rle=True))
    for k in range(2):
        ours = pixelwise_mask(index.segmentations[k], index.labels[k], HEIGHT, WIDTH)
        np.testing.assert_array_equal(ours, np.asarray(theirs[k]))


def test_saved_index_loads_back(crowd_dataset, tmp_path):
    _, annotations, _ = crowd_dataset
    index = load_annotations(annotations, CocoOptions(ltrb=True, ratio=True, polygons=True))
    loaded = load_index(os.path.dirname(save_index(index, str(tmp_path))))
    assert loaded.files == index.files and loaded.ids.tolist() == index.ids.tolist()
    for name in ("boxes", "labels", "polygons", "vertices"):
        for a, b in zip(getattr(loaded, name), getattr(index, name), strict=True):
            np.testing.assert_array_equal(a, b)
