"""An nnU-Net-style volume pipeline through ``rp.serve`` with 2 ranks: three ``readers.numpy`` in
step (images, labels, case ids), a crop biased towards objects (``random_object_bbox``,
``roi_random_crop``, ``slice``) and each volume's own shape as a ragged output; every case exactly
once per epoch, the same batch count on both ranks, patches that hold their label."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn

WORLD, CASES, BATCH = 2, 12, 2
PATCH = [6, 8, 8]


@rp.pipeline_def(batch_size=BATCH, num_threads=1)
def volumes(imgs, lbls, ids):
    """Patches of image and label around a random object, the case id and the volume's shape."""
    img = fn.reshape(fn.readers.numpy(files=imgs, name="ReaderX"), layout="CDHW")
    lbl = fn.reshape(fn.readers.numpy(files=lbls, name="ReaderY"), layout="CDHW")
    case = fn.readers.numpy(files=ids, name="ReaderI")
    start, end = fn.segmentation.random_object_bbox(lbl, format="start_end", foreground_prob=1.0)
    anchor = fn.roi_random_crop(lbl, roi_start=start, roi_end=end, crop_shape=[1, *PATCH])
    anchor = fn.slice(anchor, 1, 3, axes=[0])
    shape = rp.types.Constant(np.array(PATCH), dtype=rp.types.INT64)
    img = fn.slice(img, anchor, shape, axis_names="DHW", out_of_bounds_policy="pad")
    lbl = fn.slice(lbl, anchor, shape, axis_names="DHW", out_of_bounds_policy="pad")
    return img, lbl, case, fn.shapes(fn.readers.numpy(files=imgs, name="ReaderS"))


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> dict[str, list[str]]:
    """Twelve cases of different shapes; each label holds one cube of class 1, and the image's
    value is the case id where the label is 1."""
    root = tmp_path_factory.mktemp("volumes")
    rng = np.random.default_rng(2)
    out: dict[str, list[str]] = {"imgs": [], "lbls": [], "ids": []}
    for case in range(CASES):
        shape = (1, *(int(s) for s in rng.integers(8, 14, size=3)))
        label = np.zeros(shape, np.uint8)
        label[0, 2:5, 3:6, 2:6] = 1
        image = np.where(label == 1, case, -1).astype(np.float32)
        for kind, array in (("imgs", image), ("lbls", label), ("ids", np.array([case], np.int32))):
            path = root / f"{kind}_{case}.npy"
            np.save(path, array)
            out[kind].append(str(path))
    return out


def test_volumes_served_to_two_ranks_exactly_once(cluster, cases):
    svc = rp.serve(volumes, name="svc-volumes", **cases, world_size=WORLD, seed=4, num_cpus_per_actor=0.25)
    try:
        loaders = [rp.loader("svc-volumes", rank=r, world_size=WORLD, output="numpy") for r in range(WORLD)]
        for epoch in (0, 1):
            seen, counts = [], []
            for loader in loaders:
                loader.set_epoch(epoch)
                count = 0
                for img, lbl, case, shapes in loader:
                    count += 1
                    assert img.shape == lbl.shape == (BATCH, 1, *PATCH) and img.dtype == np.float32
                    for k in range(BATCH):
                        if loader.last_is_pad[k]:
                            continue
                        held = np.unique(img[k][lbl[k] == 1])
                        assert lbl[k].any() and held.tolist() == [case[k][0]], "the patch holds its case's object"
                        assert shapes[k][0] == 1 and (shapes[k][1:] >= 8).all()
                        seen.append(int(case[k][0]))
                counts.append(count)
            assert sorted(seen) == list(range(CASES)), f"epoch {epoch}: every case exactly once"
            assert counts[0] == counts[1] == CASES // (WORLD * BATCH)
    finally:
        svc.shutdown()
