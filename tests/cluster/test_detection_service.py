"""A COCO detection pipeline through ``rp.serve`` to 2 ranks: every image exactly once per epoch,
the ranks given equal batch counts, and each image's boxes and labels (ragged: 0 to 5 per image)
intact, equal to a one-process read of that image."""

from __future__ import annotations

import numpy as np
import pytest
import ray

import raypipe as rp
from raypipe.coco_dataset import make_coco_dataset
from raypipe.formats.coco import CocoOptions, load_annotations
from tests.cluster.detection_pipelines import coco_boxes
from tests.cluster.ranks import RankProcess

WORLD = 2
IMAGES = 14


@pytest.fixture(scope="module")
def coco(tmp_path_factory) -> tuple[str, str]:
    return make_coco_dataset(str(tmp_path_factory.mktemp("coco-service")), images=IMAGES, seed=2)


@pytest.fixture(scope="module")
def service(cluster, coco):
    svc = rp.serve(
        coco_boxes,
        name="svc-coco",
        file_root=coco[0],
        annotations_file=coco[1],
        world_size=WORLD,
        seed=3,
        num_cpus_per_actor=0.25,
        replace=True,
    )
    yield svc
    svc.shutdown()


def _samples(batch) -> list[np.ndarray]:
    """A ragged output's samples (a list when their shapes differ, else one array)."""
    return list(batch)


def test_each_image_once_per_epoch_with_its_boxes_intact(service, coco):
    index = load_annotations(coco[1], CocoOptions(ltrb=True, ratio=True))
    expected = {int(i): (b, lab) for i, b, lab in zip(index.ids, index.boxes, index.labels)}
    loaders = [rp.loader("svc-coco", rank=r, world_size=WORLD, output="numpy") for r in range(WORLD)]
    for epoch in (0, 1):
        seen, steps = [], []
        for ld in loaders:
            ld.set_epoch(epoch)
            count = 0
            for images, boxes, labels, ids, crop_boxes, crop_labels in ld:
                count += 1
                assert tuple(np.asarray(images).shape[1:]) == (32, 32, 3)
                rows = zip(_samples(boxes), _samples(labels), np.asarray(ids).reshape(-1), _samples(crop_boxes),
                           _samples(crop_labels), ld.last_is_pad)  # fmt: skip
                for b, lab, image_id, cb, cl, pad in rows:
                    if pad:
                        continue
                    seen.append(int(image_id))
                    want_boxes, want_labels = expected[int(image_id)]
                    assert b.dtype == np.float32 and b.shape == want_boxes.shape and lab.dtype == np.int32
                    np.testing.assert_array_equal(b, want_boxes)
                    np.testing.assert_array_equal(lab, want_labels)
                    assert cb.shape == (len(cl), 4) and set(cl.tolist()) <= set(want_labels.tolist())
                    assert ((cb >= 0) & (cb <= 1)).all()
            steps.append(count)
        assert sorted(seen) == sorted(expected), f"epoch {epoch}: every image exactly once"
        assert len(set(steps)) == 1, f"epoch {epoch}: equal batch counts {steps}"
    assert any(len(b) == 0 for b, _ in expected.values()) and len({len(b) for b, _ in expected.values()}) > 2


def test_a_cpu_helper_takes_detection_samples_and_changes_no_batch(cluster, cpu_node, coco):
    """The same pipeline served with a CPU helper on a CPU-only node (ranks in GPU-holding actors,
    so their pipeline actors stage for a GPU and ship CPU-stage samples): every batch, ragged boxes
    and random crops included, equals the one served without it, and the helper ran samples."""
    got, stats = {}, None
    for helpers in (0, 1):
        name = f"svc-coco-helpers-{helpers}"
        # pipeline actors reserve no CPU: the session's cluster may still hold CPUs of services that earlier tests
        # shut down (Ray releases them asynchronously), and what this test checks is the helper's samples
        svc = rp.serve(coco_boxes, name=name, file_root=coco[0], annotations_file=coco[1], world_size=WORLD, seed=3,
                       num_cpus_per_actor=0, cpu_helpers=helpers, replace=True)  # fmt: skip
        ranks = [ray.remote(num_gpus=1)(RankProcess).remote() for _ in range(WORLD)]
        try:
            got[helpers] = ray.get([r.epoch_outputs.remote(name, i, WORLD, 0) for i, r in enumerate(ranks)])
            stats = svc.stats()
        finally:
            for r in ranks:
                ray.kill(r)
            svc.shutdown()
    assert stats["helpers"]["details"][0]["samples"] > 0, "the helper ran samples"
    for mine, theirs in zip(got[1], got[0]):
        assert len(mine) == len(theirs)
        for a, b in zip(mine, theirs):
            assert a[-1] == b[-1]
            for out_a, out_b in zip(a[:-1], b[:-1]):
                assert all(np.array_equal(x, y) for x, y in zip(out_a, out_b))
