"""A pipeline with two readers that read in step, served: every rank's rows pair both readers'
samples under the service's shuffle, and a pipeline actor whose second dataset differs is refused."""

from __future__ import annotations

import numpy as np
import pytest
import ray

import raypipe as rp
from raypipe import fn


@rp.pipeline_def(batch_size=3, num_threads=1)
def paired(files, rotate_on_actors=False):
    """Two readers over parallel lists, labelled with their sample index; with ``rotate_on_actors``
    the second reader reads another list (of the same length) where it runs in an actor: a node
    that sees another second dataset."""
    second = list(files)
    if rotate_on_actors and ray.get_runtime_context().get_actor_id() is not None:
        second = second[1:] + second[:1]
    _, first_labels = fn.readers.file(files=files, labels=list(range(len(files))), name="Images")
    _, second_labels = fn.readers.file(files=second, labels=list(range(len(files))), name="Masks")
    return first_labels, second_labels


def test_served_readers_stay_paired_and_another_second_dataset_is_refused(cluster, jpeg_files):
    files = jpeg_files[:10]
    svc = rp.serve(paired, name="svc-paired", files=files, world_size=2, seed=3, num_cpus_per_actor=0.25, replace=True)
    try:
        rows = []
        for rank in range(2):
            loader = rp.loader("svc-paired", rank=rank, world_size=2, output="numpy")
            loader.set_epoch(1)
            for first, second in loader:
                assert np.array_equal(first, second), "each row holds one sample index from both readers"
                rows.extend(np.asarray(first).ravel().tolist())
        assert sorted(set(rows)) == list(range(10)) and rows != sorted(rows), "every sample, shuffled"
    finally:
        svc.shutdown()
    svc = rp.serve(
        paired, name="svc-rotated", files=files, rotate_on_actors=True, world_size=1, num_cpus_per_actor=0.25
    )
    try:
        with pytest.raises(rp.RaypipeError, match="every node must see the same dataset"):
            loader = rp.loader("svc-rotated", rank=0, world_size=1, output="numpy")
            next(iter(loader))
    finally:
        svc.shutdown()
