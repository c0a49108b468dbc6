"""A ragged output packed by the pipeline actor and split back by the rank: one flat array, views
of it per sample; in shared memory when the exporter allocates it."""

from __future__ import annotations

import numpy as np
import pytest

from actors import host_ring, ragged
from actors.protocol import RaggedArray
from raypipe.errors import RaypipeError

SAMPLES = [np.array([55], np.uint8), np.array([49, 50], np.uint8), np.zeros((0,), np.uint8)]


def test_pack_then_split_gives_the_samples_back_as_views():
    flat, shapes = ragged.pack(SAMPLES)
    assert flat.tolist() == [55, 49, 50] and shapes.tolist() == [[1], [2], [0]]
    back = ragged.split(flat, shapes)
    assert [s.tolist() for s in back] == [[55], [49, 50], []]
    assert all(np.shares_memory(s, flat) for s in back if s.size)


def test_multi_dimensional_samples_keep_their_shapes():
    samples = [np.arange(6, dtype=np.float32).reshape(2, 3), np.arange(4, dtype=np.float32).reshape(4, 1)]
    flat, shapes = ragged.pack(samples)
    assert shapes.tolist() == [[2, 3], [4, 1]] and RaggedArray(flat, shapes).nbytes == 40
    for mine, theirs in zip(ragged.split(flat, shapes), samples, strict=True):
        np.testing.assert_array_equal(mine, theirs)


def test_samples_of_several_dtypes_or_ranks_are_refused():
    with pytest.raises(RaypipeError, match="one dtype and one rank"):
        ragged.pack([np.zeros(2, np.uint8), np.zeros(3, np.int32)])
    with pytest.raises(RaypipeError, match="one dtype and one rank"):
        ragged.pack([np.zeros(2, np.uint8), np.zeros((1, 3), np.uint8)])


@pytest.mark.skipif(not host_ring.supported(), reason="needs memfd and /proc")
def test_a_large_ragged_output_is_packed_into_shared_memory():
    exporter = host_ring.Exporter()
    samples = [np.full(n, i, np.uint8) for i, n in enumerate((host_ring.MIN_BYTES, 7, host_ring.MIN_BYTES // 2))]
    flat, shapes = ragged.pack(samples, exporter.allocate)
    shipped = exporter.export(flat)
    assert isinstance(shipped, host_ring.HostArray) and shipped.shape == (sum(s.size for s in samples),)
    assert [int(s[0]) for s in ragged.split(flat, shapes)] == [0, 1, 2]
