"""The host ring across two real processes: an exporter in a spawned child allocates batch arrays
in memfd segments and ships descriptors; this process maps them, reads the same bytes without a
copy, and releases each batch only once every view and tensor of it is gone."""

from __future__ import annotations

import gc
import os
import warnings

import numpy as np
import pytest

from actors import host_ring
from raypipe.errors import RaypipeError
from tests.actors.spawn import spawn_child

pytestmark = pytest.mark.skipif(not host_ring.supported(), reason="memfd segments need Linux")

SHAPE = (4, 3, 256, 256)  # 3 MiB of float32: above the ring's MIN_BYTES


def _child(conn) -> None:
    """Serve batches from a ring: ``("make", value)`` fills a new pooled batch with ``value`` and
    ships it; ``("release", tokens)`` releases; ``("stats",)`` answers the exporter's stats."""
    from actors import host_ring
    from raypipe.batch_buffers import BufferPool

    exporter = host_ring.Exporter()
    pool = BufferPool(3, exporter.allocate)
    conn.send(exporter.channel())
    while True:
        message = conn.recv()
        if message[0] == "make":
            array = pool.take(SHAPE, np.float32)
            array[...] = message[1]
            conn.send(exporter.export(array))
            del array
        elif message[0] == "release":
            conn.send(exporter.release(message[1]))
        elif message[0] == "stats":
            conn.send(exporter.stats())
        else:
            exporter.close()
            conn.send("closed")
            return


@pytest.fixture
def child():
    ours, process = spawn_child(_child)
    channel = ours.recv()

    def call(*message):
        ours.send(message)
        return ours.recv()

    yield channel, call, process
    if process.is_alive():
        call("close")
        process.join(10)


@pytest.fixture
def mapped(child):
    """The child's channel, a way to call it, and an importer that has checked the channel."""
    channel, call, _ = child
    importer = host_ring.Importer()
    assert importer.check(channel) is None
    assert importer.check(channel) is None, "a checked exporter stays usable"
    return channel, call, importer


def test_a_batch_crosses_without_a_copy_and_is_released_when_every_view_is_gone(mapped):
    channel, call, importer = mapped
    shipped = call("make", 7.0)
    assert isinstance(shipped, host_ring.HostArray) and shipped.shape == SHAPE
    batch = importer.to_array(shipped)
    assert batch.dtype == np.float32 and batch.shape == SHAPE and not batch.flags.writeable
    assert np.all(batch == 7.0)
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tensor = torch.from_numpy(batch)[1:]
    part = batch[2]
    del batch
    gc.collect()
    assert importer.released(channel.exporter) == [], "a tensor and a slice still use it"
    del tensor
    gc.collect()
    assert importer.released(channel.exporter) == []
    assert float(part.sum()) == 7.0 * part.size
    del part
    gc.collect()
    assert importer.released(channel.exporter) == [shipped.token]
    assert call("stats")["held"] == 1
    assert call("release", [shipped.token]) == 1
    assert call("release", [shipped.token]) == 0, "a late duplicate release frees nothing"
    assert call("stats")["held"] == 0


def test_a_batch_changed_in_place_on_the_rank_neither_faults_nor_stales_later_batches(mapped):
    channel, call, importer = mapped
    first = call("make", 2.0)
    batch = importer.to_array(first)
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tensor = torch.from_numpy(batch)
    tensor.mul_(3.0)  # a training script normalizing in place
    assert float(tensor[0, 0, 0, 0]) == 6.0 and float(batch[3, 2, 255, 255]) == 6.0
    del batch, tensor
    gc.collect()
    assert call("release", importer.released(channel.exporter)) == 1
    second = call("make", 5.0)
    assert second.serial == first.serial, "the same array, through the mapping the rank already has"
    assert np.all(importer.to_array(second) == 5.0), "the rank sees the new batch, no stale page of its own"


def test_a_held_batch_is_never_overwritten_and_a_released_one_is_reused(mapped):
    channel, call, importer = mapped
    first = call("make", 1.0)
    kept = importer.to_array(first)
    second = call("make", 2.0)
    assert second.serial != first.serial, "the first batch is held: the pool makes another array"
    assert np.all(kept == 1.0) and np.all(importer.to_array(second) == 2.0)
    gc.collect()
    assert call("release", importer.released(channel.exporter)) == 1  # the second, dropped at once
    third = call("make", 3.0)
    assert third.serial == second.serial, "the released array is reused, the held one is not"
    assert np.all(kept == 1.0)
    stats = call("stats")
    assert stats["segments_made"] == 2 and stats["exported"] == 3 and stats["held"] == 2
    assert importer.mapped == 2, "each segment is mapped once"


def test_batches_stay_readable_after_the_exporting_process_is_gone(child):
    channel, call, process = child
    importer = host_ring.Importer()
    assert importer.check(channel) is None
    batch = importer.to_array(call("make", 5.0))
    process.kill()
    process.join(10)
    assert np.all(batch == 5.0), "the mapping keeps the memory alive"


def test_a_channel_this_process_cannot_map_is_refused_and_remembered(child):
    channel, _, _ = child
    importer = host_ring.Importer()
    wrong_fd = host_ring.Channel(channel.exporter, channel.pid, 987654)
    why = importer.check(wrong_fd)
    assert why is not None and "probe segment" in why
    assert importer.check(channel) == why, "a refused exporter is not tried again, even with the right probe"
    other = host_ring.Channel("0" * 32, channel.pid, channel.probe_fd)  # a probe of another exporter
    assert "not visible here" in host_ring.Importer().check(other)


def test_a_descriptor_that_names_another_segment_is_an_error_not_wrong_data(mapped):
    channel, call, importer = mapped
    shipped = call("make", 1.0)
    wrong = host_ring.HostArray(**{**shipped.__dict__, "serial": shipped.serial + 1})
    with pytest.raises(RaypipeError, match=f"is not segment {shipped.serial + 1}"):
        importer.to_array(wrong)


def test_small_and_foreign_arrays_do_not_go_through_segments():
    exporter = host_ring.Exporter()
    small = exporter.allocate((10,), np.int32)
    assert exporter.export(small) is None and exporter.stats()["segments_made"] == 0
    foreign = np.zeros(host_ring.MIN_BYTES, np.uint8)
    assert exporter.export(foreign) is None and exporter.stats()["not_in_ring"] == 1
    pooled = exporter.allocate((2, host_ring.MIN_BYTES), np.uint8)
    assert exporter.export(pooled[:, ::2]) is None, "not C-contiguous"
    assert exporter.export(pooled[1:]).offset == host_ring.DATA_OFFSET + host_ring.MIN_BYTES
    exporter.close()


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_segment_closes_with_its_array_and_close_drops_held_arrays():
    before = _open_fds()
    exporter = host_ring.Exporter()
    array = exporter.allocate((host_ring.MIN_BYTES,), np.uint8)
    assert _open_fds() > before
    assert exporter.export(array) is not None
    del array
    gc.collect()
    assert exporter.stats()["segments_live"] == 1, "held for the rank"
    exporter.close()
    gc.collect()
    assert exporter.stats()["segments_live"] == 0 and exporter.held == 0
    assert _open_fds() == before, "every segment's descriptors and the probe's are closed"


def test_the_ranks_mappings_go_with_its_importer_and_batches(child):
    channel, call, _ = child
    importer = host_ring.Importer()  # not the fixture's: this test drops it
    assert importer.check(channel) is None
    before = _open_fds()
    batches = [importer.to_array(call("make", float(i))) for i in range(2)]
    assert _open_fds() == before + 2, "one descriptor per mapped segment"
    del importer
    gc.collect()
    assert _open_fds() == before + 2 and float(batches[1].mean()) == 1.0, "the batches keep their mappings"
    del batches
    gc.collect()
    assert _open_fds() == before
