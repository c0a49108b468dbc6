"""readers.coco on a generated COCO dataset (JPEGs, boxes, polygons, crowds, an empty image and tiny
objects): every output against DALI 2.4's reader, the options that shape them, sharding and
shuffling, preprocessed annotations, and errors that name the file at fault."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, ops
from raypipe.coco_dataset import make_coco_dataset

IMAGES = 12


@pytest.fixture(scope="module")
def coco(tmp_path_factory) -> tuple[str, str]:
    """``(file_root, annotations_file)`` of 12 generated images."""
    return make_coco_dataset(str(tmp_path_factory.mktemp("coco")), images=IMAGES, seed=3)


def _read_all(file_root: str, annotations_file: str, batch: int = IMAGES, **args) -> list[list[np.ndarray]]:
    """One batch of raypipe's reader, per output the samples (the whole dataset when ``batch`` is its size)."""

    @rp.pipeline_def(batch_size=batch, num_threads=1, seed=0)
    def pipe():
        return tuple(fn.readers.coco(file_root=file_root, annotations_file=annotations_file, name="Reader", **args))

    with pipe() as p:
        outs = p.run()
        return [[np.asarray(o.at(i)) for i in range(len(o))] for o in outs]


def _dali_read_all(file_root: str, annotations_file: str, batch: int = IMAGES, **args) -> list[list[np.ndarray]]:
    pytest.importorskip("nvidia.dali")
    from nvidia.dali import fn as dali_fn
    from nvidia.dali import pipeline_def

    @pipeline_def(batch_size=batch, num_threads=1, device_id=None, seed=0)
    def pipe():
        return tuple(dali_fn.readers.coco(file_root=file_root, annotations_file=annotations_file, **args))

    p = pipe()
    p.build()
    return [[np.asarray(o[i]) for i in range(len(o))] for o in p.run()]


OPTIONS = [
    {"image_ids": True},
    {"ltrb": True, "ratio": True, "skip_empty": True, "image_ids": True},
    {"ratio": True, "size_threshold": 2.5, "include_iscrowd": False, "avoid_class_remapping": True},
    {"polygon_masks": True, "image_ids": True},
    {"polygon_masks": True, "ratio": True, "ltrb": True},
    {"polygon_masks": True, "size_threshold": 2.5, "include_iscrowd": False},
    {"pixelwise_masks": True, "image_ids": True},
]


@pytest.mark.parametrize("args", OPTIONS, ids=lambda a: ",".join(sorted(a)))
def test_outputs_equal_dalis(coco, args):
    """Each output of each sample, byte for byte, with DALI's dtypes and shapes (one whole epoch)."""
    batch = 10 if args.get("skip_empty") else IMAGES  # two images have no objects left when skipped
    theirs = _dali_read_all(*coco, batch=batch, **args)
    ours = _read_all(*coco, batch=batch, **args)
    assert len(ours) == len(theirs)
    for k, (mine, dalis) in enumerate(zip(ours, theirs)):
        for i, (a, b) in enumerate(zip(mine, dalis)):
            assert a.dtype == b.dtype and a.shape == b.shape, (k, i, a.shape, b.shape)
            np.testing.assert_array_equal(a, b, err_msg=f"output {k}, sample {i}")


def test_order_labels_and_filters_follow_the_annotations(coco):
    file_root, annotations_file = coco
    document = json.load(open(annotations_file))
    by_id = sorted(document["images"], key=lambda e: e["id"])
    images, boxes, labels, ids = _read_all(*coco, image_ids=True)
    assert [int(i[0]) for i in ids] == [e["id"] for e in by_id]  # ordered by image id, not by file
    assert [bytes(i) for i in images] == [open(os.path.join(file_root, e["file_name"]), "rb").read() for e in by_id]
    places = {c["id"]: k + 1 for k, c in enumerate(document["categories"])}
    for entry, b, lab in zip(by_id, boxes, labels):
        objects = [a for a in document["annotations"] if a["image_id"] == entry["id"]]
        kept = [a for a in objects if min(a["bbox"][2:]) >= 0.1]
        assert lab.tolist() == [places[a["category_id"]] for a in kept]
        np.testing.assert_array_equal(b, np.array([a["bbox"] for a in kept], np.float32).reshape(-1, 4))
    assert any(len(b) == 0 for b in boxes)  # the empty image is read (skip_empty=False)
    _, boxes, _ = _read_all(*coco, batch=10, skip_empty=True)
    assert all(len(b) for b in boxes)


def test_images_argument_picks_and_orders(coco):
    document = json.load(open(coco[1]))
    names = [document["images"][5]["file_name"], document["images"][1]["file_name"], document["images"][5]["file_name"]]
    _, _, _, ids = _read_all(*coco, batch=3, images=names, image_ids=True)
    assert [int(i[0]) for i in ids] == [document["images"][k]["id"] for k in (5, 1, 5)]


def test_preprocessed_annotations_read_back_the_same(coco, tmp_path):
    args = {"ltrb": True, "ratio": True, "polygon_masks": True, "image_ids": True}
    saved = _read_all(
        *coco, save_preprocessed_annotations=True, save_preprocessed_annotations_dir=str(tmp_path), **args
    )

    @rp.pipeline_def(batch_size=IMAGES, num_threads=1, seed=0)
    def again():
        return tuple(fn.readers.coco(file_root=coco[0], preprocessed_annotations=str(tmp_path), **args))

    with again() as p:
        reread = [[np.asarray(o.at(i)) for i in range(IMAGES)] for o in p.run()]
    for mine, other in zip(saved, reread):
        for a, b in zip(mine, other):
            np.testing.assert_array_equal(a, b)


def test_shards_split_an_epoch_and_shuffle_after_epoch_reorders(coco):
    seen = []
    for shard in range(2):
        ids = _read_all(*coco, batch=6, image_ids=True, shard_id=shard, num_shards=2)[-1]
        seen += [int(i[0]) for i in ids]
    assert sorted(seen) == sorted(json.load(open(coco[1]))["images"][i]["id"] for i in range(IMAGES))

    @rp.pipeline_def(batch_size=IMAGES, num_threads=1, seed=0)
    def shuffled():
        return tuple(fn.readers.coco(file_root=coco[0], annotations_file=coco[1], image_ids=True,
                                     shuffle_after_epoch=True, name="Reader"))  # fmt: skip

    with shuffled() as p:
        assert p.epoch_size("Reader") == IMAGES
        first = [int(i) for i in np.asarray(p.run()[-1]).ravel()]
        second = [int(i) for i in np.asarray(p.run()[-1]).ravel()]
    assert sorted(first) == sorted(second) and first != second


def test_ops_class_names(coco):
    assert ops.COCOReader is ops.readers.COCO

    class Pipe(rp.Pipeline):
        def __init__(self):
            super().__init__(batch_size=2, num_threads=1, seed=0)
            self.input = ops.COCOReader(file_root=coco[0], annotations_file=coco[1], ratio=True, ltrb=True)

        def define_graph(self):
            return self.input()

    with Pipe() as p:
        images, boxes, labels = p.run()
        assert np.asarray(boxes.at(0)).shape[1] == 4 and np.asarray(labels.at(0)).dtype == np.int32


def test_bad_arguments_and_files_name_the_problem(coco, tmp_path):
    with pytest.raises(rp.ArgumentError, match="polygon_masks and pixelwise_masks"):
        _read_all(*coco, polygon_masks=True, pixelwise_masks=True)
    with pytest.raises(rp.ArgumentError, match="exactly one of annotations_file and preprocessed_annotations"):
        _read_all(coco[0], "")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(rp.ReaderError, match="bad.json"):
        _read_all(coco[0], str(bad))
