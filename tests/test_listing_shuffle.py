"""DALI's shuffle of a reader's listing, reproduced: the files of every shard equal DALI's."""

from __future__ import annotations

import os

import numpy as np
import pytest

from raypipe.listing_shuffle import dali_listing_permutation

# DALI 2.4's readers.file(random_shuffle=True, initial_fill=1, num_shards=2, shard_id=0) over a
# list of 40 files: the labels (listing positions) of its shard, in the order read.
DALI_SHARD_0_OF_40 = [30, 17, 19, 35, 23, 14, 20, 11, 37, 12, 31, 4, 22, 15, 27, 33, 7, 29, 28, 1]


def test_a_permutation_of_the_listing_that_starts_as_dalis():
    for size in (0, 1, 2, 3, 4, 5, 40, 41, 65535, 65536, 70001):
        order = dali_listing_permutation(size)
        assert order.dtype == np.int64 and np.array_equal(np.sort(order), np.arange(size))
        assert not order.flags.writeable
    assert dali_listing_permutation(40)[:20].tolist() == DALI_SHARD_0_OF_40


def dali_shard(tmp_path, size: int, shard_id: int, num_shards: int) -> list[int]:
    """The listing positions DALI's file reader gives shard ``shard_id``, in the order read."""
    from nvidia.dali import fn, pipeline_def

    (tmp_path / "x").write_bytes(b"a")
    listing = tmp_path / "list.txt"
    listing.write_text("".join(f"x {i}\n" for i in range(size)))
    args = {"shard_id": shard_id, "num_shards": num_shards, "random_shuffle": True, "initial_fill": 1}

    @pipeline_def(batch_size=min(size, 4096), num_threads=1, device_id=None)
    def pipe():
        return fn.readers.file(file_list=os.fspath(listing), **args)[1]

    p = pipe()
    p.build()
    shard_size = size * (shard_id + 1) // num_shards - size * shard_id // num_shards
    labels: list[int] = []
    while len(labels) < shard_size:
        batch = p.run()[0]
        labels += [int(np.asarray(batch.at(i))[0]) for i in range(len(batch))]
    return labels[:shard_size]


@pytest.mark.parametrize(
    ("size", "shard_id", "num_shards"),
    [(24, 1, 3), (41, 2, 3), (65535, 0, 2), (70001, 1, 2)],
    ids=["even", "odd", "largest-paired", "one-draw-per-swap"],
)
def test_every_shard_holds_dalis_files_in_dalis_order(tmp_path, size, shard_id, num_shards):
    """Both of libstdc++'s ways (two swaps per draw up to 65535 elements, one above) against DALI."""
    pytest.importorskip("nvidia.dali")
    start, end = size * shard_id // num_shards, size * (shard_id + 1) // num_shards
    assert dali_listing_permutation(size)[start:end].tolist() == dali_shard(tmp_path, size, shard_id, num_shards)


def test_the_numpy_reader_shuffles_its_files_as_dalis(tmp_path):
    pytest.importorskip("nvidia.dali")
    from nvidia.dali import fn as dali_fn
    from nvidia.dali import pipeline_def as dali_pipeline_def

    import raypipe as rp

    for i in range(10):
        np.save(tmp_path / f"x{i}.npy", np.array([i], dtype=np.int32))
    args = {"file_root": str(tmp_path), "shard_id": 1, "num_shards": 2, "random_shuffle": True, "initial_fill": 1}

    def first_batch(pipeline_def, fn, **device) -> list[int]:
        @pipeline_def(batch_size=5, num_threads=1, seed=0, **device)
        def pipe():
            return fn.readers.numpy(**args)

        p = pipe()
        p.build()
        batch = p.run()[0]
        return [int(np.asarray(batch.at(i))[0]) for i in range(5)]

    assert first_batch(rp.pipeline_def, rp.fn) == first_batch(dali_pipeline_def, dali_fn, device_id=None)
