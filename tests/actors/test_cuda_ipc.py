"""CUDA IPC delivery: when batches go by IPC, the ring's bookkeeping, and (on a GPU) a real
exporter process and importer process exercising the ring."""

from __future__ import annotations

import multiprocessing

import numpy as np
import pytest

from actors.cuda_ipc import CopiedReleases, Exporter, Importer, IpcArray, SlotRing, device_uuid, use_ipc
from raypipe.backend import gpu_available
from raypipe.errors import ArgumentError, RaypipeError

needs_gpu = pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU")


def test_host_arrays_never_go_by_ipc():
    assert not use_ipc(np.zeros(3), b"gpu-a", b"gpu-a")


def test_device_uuid_is_none_without_a_usable_gpu(monkeypatch):
    monkeypatch.setenv("RAYPIPE_DEVICE", "cpu")
    assert device_uuid(0) is None
    assert not use_ipc(np.zeros(3), device_uuid(0), device_uuid(0))


@pytest.mark.gpu
@needs_gpu
def test_only_the_same_gpu_gets_ipc():
    import cupy

    array = cupy.zeros(4)
    own = device_uuid(0)
    assert use_ipc(array, own, own)
    assert not use_ipc(array, own, None) and not use_ipc(array, own, b"another-gpu")


# The ring's bookkeeping (no CUDA).


def test_ring_never_hands_out_a_held_slot_and_is_full_when_all_are_held():
    ring = SlotRing(3)
    slots = [ring.acquire(("batch", k), 100) for k in range(3)]
    assert sorted(s.index for s in slots) == [0, 1, 2]
    assert ring.free == 0
    assert ring.acquire(("batch", 3), 100) is None
    assert ring.release(("batch", 1)) == 1
    again = ring.acquire(("batch", 3), 100)
    assert again.index == slots[1].index
    assert again.generation == slots[1].generation, "a slot that fits is reused, not regrown"
    assert ring.acquire(("batch", 4), 1) is None


def test_ring_growth_bumps_the_generation_and_capacity_only_grows():
    ring = SlotRing(1)
    first = ring.acquire("a", 100)
    assert (first.capacity, first.generation) == (100, 1)
    ring.release("a")
    smaller = ring.acquire("b", 10)
    assert (smaller.capacity, smaller.generation) == (100, 1)
    ring.release("b")
    bigger = ring.acquire("c", 1000)
    assert (bigger.index, bigger.capacity, bigger.generation) == (0, 1000, 2)


def test_ring_prefers_a_fitting_slot_and_grows_unallocated_slots_first():
    ring = SlotRing(3)
    big = ring.acquire("images", 1000)
    small = ring.acquire("labels", 8)
    ring.release("images")
    ring.release("labels")
    assert ring.acquire("labels-2", 8).index == small.index, "the smallest slot that fits"
    assert ring.acquire("images-2", 1000).index == big.index
    grown = ring.acquire("images-3", 2000)
    assert grown.index not in (big.index, small.index) and grown.generation == 1


def test_one_token_holds_one_slot_per_output_and_releases_them_together():
    ring = SlotRing(4)
    token = (0, 0, 7)
    images, labels = ring.acquire(token, 4096), ring.acquire(token, 64)
    assert images.index != labels.index
    assert ring.held_by(token) == (images.index, labels.index)
    assert ring.release(token) == 2
    assert ring.free == 4 and ring.held_by(token) == ()


def test_release_is_idempotent_and_reset_frees_everything():
    ring = SlotRing(2)
    ring.acquire("a", 10)
    ring.acquire("b", 20)
    assert ring.release("a") == 1
    assert ring.release("a") == 0, "a duplicate release frees nothing"
    assert ring.release("never-acquired") == 0
    assert ring.reset() == 1
    assert ring.free == 2
    assert ring.release("b") == 0, "a release after reset frees nothing"
    kept = ring.acquire("c", 20)
    assert (kept.capacity, kept.generation) == (20, 1), "reset keeps capacities and generations"


def test_zero_byte_outputs_get_a_one_byte_slot():
    ring = SlotRing(1)
    assert ring.acquire("empty", 0).capacity == 1


@pytest.mark.parametrize("size", [0, -1, 2.0, True, None])
def test_ring_rejects_a_bad_size(size):
    with pytest.raises(ArgumentError, match="SlotRing: size"):
        SlotRing(size)


def test_ring_rejects_bad_acquire_arguments():
    ring = SlotRing(1)
    with pytest.raises(ArgumentError, match="nbytes must be >= 0"):
        ring.acquire("a", -1)
    with pytest.raises(ArgumentError, match="nbytes must be an int"):
        ring.acquire("a", 1.5)
    with pytest.raises(ArgumentError, match="token must be hashable"):
        ring.acquire(["unhashable"], 1)
    assert ring.free == 1, "a rejected acquire holds nothing"


def test_exporter_needs_no_gpu_until_it_exports():
    exporter = Exporter(4)
    assert exporter.size == 4 and exporter.ring.free == 4
    with pytest.raises(ArgumentError, match="expects a cupy array"):
        exporter.export(np.zeros(3), "a")
    assert exporter.ring.free == 4
    exporter.close()
    exporter.close()


def test_importer_rejects_what_is_not_an_ipc_array_and_refuses_work_once_closed():
    importer = Importer()
    with pytest.raises(ArgumentError, match="expects an IpcArray"):
        importer.to_torch(np.zeros(3), 0)
    importer.close()
    importer.close()
    assert importer.open_slots == 0
    with pytest.raises(RaypipeError, match="closed"):
        importer.to_torch(IpcArray("exporter", 0, 1, bytes(64), (1,), "<f4", 4), 0)


# Two real processes on one GPU.


def _export_batches(sizes: list[int], ring_size: int, batches: multiprocessing.Queue, releases: multiprocessing.Queue):
    """Exporter process: batch k is ``arange(sizes[k]) + 1000 * k`` (float32); when the ring is
    full it applies the consumer's next release and tries again."""
    import cupy

    exporter = Exporter(ring_size)
    full = 0
    for k, size in enumerate(sizes):
        array = cupy.arange(size, dtype=cupy.float32) + 1000 * k
        while (ipc := exporter.export(array, k)) is None:
            full += 1
            exporter.release(releases.get(timeout=60))
        batches.put((k, ipc))
    for _ in range(ring_size):
        exporter.release(releases.get(timeout=60))
    batches.put(("done", full, exporter.handles_made, exporter.ring.free))
    exporter.close()


@pytest.mark.gpu
@needs_gpu
def test_ring_delivers_more_batches_than_slots_between_two_processes():
    import torch

    sizes = [4096] * 5 + [65536] * 3
    ring_size = 2
    ctx = multiprocessing.get_context("spawn")
    batches, releases = ctx.Queue(), ctx.Queue()
    producer = ctx.Process(target=_export_batches, args=(sizes, ring_size, batches, releases))
    producer.start()
    try:
        importer = Importer()
        seen = []
        for k, size in enumerate(sizes):
            got, ipc = batches.get(timeout=60)
            assert got == k and isinstance(ipc, IpcArray)
            tensor = importer.to_torch(ipc, 0)
            expected = torch.arange(size, dtype=torch.float32, device="cuda:0") + 1000 * k
            assert torch.equal(tensor, expected), f"batch {k} differs from its source"
            seen.append((ipc.slot, ipc.generation))
            releases.put(k)
        done, full, handles_made, free = batches.get(timeout=60)
    finally:
        producer.join(timeout=60)
    assert done == "done" and producer.exitcode == 0
    assert len(set(seen)) == 4, "two slots, each grown once for the bigger batches"
    assert full == len(sizes) - ring_size, "each batch past the first two waited for a release"
    assert importer.handles_opened == handles_made == len(set(seen)), "one handle per (slot, generation)"
    assert importer.open_slots == ring_size, "superseded generations are unmapped"
    assert free == ring_size
    importer.close()
    assert importer.open_slots == 0
    with pytest.raises(RaypipeError, match="closed"):
        importer.to_torch(ipc, 0)


def _export_then_wait(batches: multiprocessing.Queue, done: multiprocessing.Queue):
    """Exporter process: two batches in a ring of two, both held until the consumer is done."""
    import cupy

    exporter = Exporter(2)
    for k in range(2):
        batches.put(exporter.export(cupy.full((64, 3), k + 1, dtype=cupy.uint8), k))
    batches.put(exporter.export(cupy.zeros(1, dtype=cupy.uint8), 2))
    done.get(timeout=60)


@pytest.mark.gpu
@needs_gpu
def test_held_slots_are_not_reused_and_a_full_ring_says_none():
    import torch

    ctx = multiprocessing.get_context("spawn")
    batches, done = ctx.Queue(), ctx.Queue()
    producer = ctx.Process(target=_export_then_wait, args=(batches, done))
    producer.start()
    try:
        first, second, third = (batches.get(timeout=60) for _ in range(3))
        assert third is None, "every slot is held: ship through host memory"
        assert first.slot != second.slot
        importer = Importer()
        for k, ipc in enumerate((first, second)):
            tensor = importer.to_torch(ipc, 0)
            assert tensor.dtype == torch.uint8 and tuple(tensor.shape) == (64, 3)
            assert bool((tensor == k + 1).all())
        importer.close()
    finally:
        done.put(True)
        producer.join(timeout=60)
    assert producer.exitcode == 0


@pytest.mark.gpu
@needs_gpu
def test_exporter_reuses_its_handle_for_a_slot():
    import cupy

    exporter = Exporter(1)
    first = exporter.export(cupy.arange(8), "a")
    assert exporter.export(cupy.arange(8), "b") is None
    exporter.release("a")
    second = exporter.export(cupy.arange(4), "b")
    assert (second.slot, second.generation, second.handle) == (first.slot, first.generation, first.handle)
    assert exporter.handles_made == 1
    exporter.close()
    with pytest.raises(RaypipeError, match="closed"):
        exporter.export(cupy.arange(4), "c")


class _Signal:
    """A stand-in with a CUDA event's protocol (``query``, ``synchronize``) that the test sets."""

    def __init__(self) -> None:
        self.passed = False
        self.waited = False

    def query(self) -> bool:
        return self.passed

    def synchronize(self) -> None:
        self.waited = self.passed = True


def test_copied_batches_are_released_in_order_once_their_copies_ran():
    released = []
    releases = CopiedReleases(released.append)
    first, second, third = _Signal(), _Signal(), _Signal()
    releases.add((0, 0), first)
    releases.add((0, 1), second)
    assert released == [] and len(releases) == 2  # no copy has run: no slot goes back
    second.passed = True
    releases.sweep()
    assert released == [], "batch 1's copy ran, but batch 0's is queued before it: order is kept"
    first.passed = True
    releases.add((0, 2), third)
    assert released == [(0, 0), (0, 1)] and len(releases) == 1
    releases.flush()  # the end of a pass waits for the last copy
    assert third.waited and released == [(0, 0), (0, 1), (0, 2)] and len(releases) == 0


def _export_one_range(batches: multiprocessing.Queue, done: multiprocessing.Queue):
    """Exporter process: one batch of 0..2**20-1 as float32, held until the consumer is done."""
    import cupy

    exporter = Exporter(2)
    batches.put(exporter.export(cupy.arange(1 << 20, dtype=cupy.float32), 0))
    done.get(timeout=60)


@pytest.mark.gpu
@needs_gpu
def test_import_does_not_wait_for_the_consumer_stream():
    """The copy out of the ring goes on a side stream: a long kernel queued on torch's current
    stream does not delay it, and the current stream still sees the data after its own work."""
    import torch

    ctx = multiprocessing.get_context("spawn")
    batches, done = ctx.Queue(), ctx.Queue()
    producer = ctx.Process(target=_export_one_range, args=(batches, done))
    producer.start()
    try:
        ipc = batches.get(timeout=60)
        importer = Importer()
        torch.cuda._sleep(500_000_000)  # a long kernel on the current stream, as a training step
        out = importer.to_torch(ipc, 0)
        importer.last_copy.synchronize()
        assert not torch.cuda.current_stream(0).query(), "the copy finished while the consumer was still busy"
        assert torch.equal(out.cpu(), torch.arange(1 << 20, dtype=torch.float32))
        importer.close()
    finally:
        done.put(True)
        producer.join(timeout=60)
    assert producer.exitcode == 0
