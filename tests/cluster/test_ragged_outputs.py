"""Outputs whose samples differ in shape through ``rp.serve``: a WebDataset's ``.cls`` labels, one or
two ASCII characters each, reach 2 ranks as per-sample arrays or tensors, or padded with their
shapes; every sample exactly once per epoch, labels intact."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import raypipe as rp
from raypipe.convert.plan import list_source
from raypipe.convert.run import convert
from raypipe.formats.registry import get
from tests.cluster.pipelines import webdataset_text_labels

WORLD = 2


@pytest.fixture(scope="module")
def webdataset(tmp_path_factory, jpeg_files):
    """The 24 JPEGs as a WebDataset labelled with their sample index ("0" ... "23")."""
    root = tmp_path_factory.mktemp("ragged")
    listing = root / "list.txt"
    listing.write_text("".join(f"{p} {i}\n" for i, p in enumerate(jpeg_files)))
    convert(list_source(str(listing)), str(root / "wds"), get("webdataset"), part_size=7, workers=1)
    return str(root / "wds")


@pytest.fixture(scope="module")
def service(cluster, webdataset):
    svc = rp.serve(
        webdataset_text_labels,
        name="svc-ragged",
        dst=webdataset,
        world_size=WORLD,
        seed=5,
        num_cpus_per_actor=0.25,
        replace=True,
    )
    yield svc
    svc.shutdown()


def _epoch(loaders, epoch: int, check) -> list[int]:
    """The labels of ``epoch`` over every rank, read as integers, padding left out."""
    seen = []
    for ld in loaders:
        ld.set_epoch(epoch)
        for images, labels in ld:
            assert tuple(images.shape[1:]) == (32, 32, 3)
            texts = check(labels, ld.last_shapes[1])
            seen += [int(t) for t, pad in zip(texts, ld.last_is_pad) if not pad]
    return seen


def test_each_sample_once_with_its_label_as_a_list_of_arrays(service, jpeg_files):
    loaders = [rp.loader("svc-ragged", rank=r, world_size=WORLD, output="numpy") for r in range(WORLD)]
    ragged_batches = 0

    def check(labels, shapes):
        nonlocal ragged_batches
        if isinstance(labels, list):
            ragged_batches += 1
            assert all(isinstance(t, np.ndarray) and t.dtype == np.uint8 for t in labels)
            assert [t.shape for t in labels] == [tuple(s) for s in shapes.tolist()]
            return [bytes(t).decode("ascii") for t in labels]
        return [bytes(row).decode("ascii") for row in labels]

    for epoch in (0, 1):
        assert sorted(_epoch(loaders, epoch, check)) == list(range(len(jpeg_files))), f"epoch {epoch}: exactly once"
    assert ragged_batches > 0, "some batches mix one- and two-character labels"


def test_torch_outputs_are_lists_of_tensors(service, jpeg_files):
    loaders = [rp.loader("svc-ragged", rank=r, world_size=WORLD, output="torch") for r in range(WORLD)]

    def check(labels, shapes):
        samples = labels if isinstance(labels, list) else list(labels)
        assert all(isinstance(t, torch.Tensor) and t.dtype == torch.uint8 for t in samples)
        return [bytes(t.numpy()).decode("ascii") for t in samples]

    assert sorted(_epoch(loaders, 0, check)) == list(range(len(jpeg_files)))


def test_pad_ragged_gives_one_array_and_the_shapes(service, jpeg_files):
    loaders = [rp.loader("svc-ragged", rank=r, world_size=WORLD, output="numpy", pad_ragged=True) for r in range(WORLD)]

    def check(labels, shapes):
        assert isinstance(labels, np.ndarray) and labels.dtype == np.uint8 and labels.ndim == 2
        assert labels.shape[1] == shapes[:, 0].max()
        return [bytes(row[:n]).decode("ascii") for row, n in zip(labels, shapes[:, 0])]

    assert sorted(_epoch(loaders, 0, check)) == list(range(len(jpeg_files)))


def test_pad_ragged_must_be_a_bool(service):
    with pytest.raises(rp.ArgumentError, match="pad_ragged must be True or False"):
        rp.loader("svc-ragged", rank=0, world_size=WORLD, pad_ragged="yes")
