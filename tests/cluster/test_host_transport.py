"""Host batches through the pipeline actor's shared memory (:mod:`actors.host_ring`), requested
over its socket (:mod:`actors.request_channel`), on the simulated cluster: the same bytes as
through the object store and Ray calls, batches a rank keeps are never overwritten and are
released once dropped, and a restarted actor is picked up again."""

from __future__ import annotations

import gc
import os
import signal

import numpy as np
import pytest

import raypipe as rp
from actors import host_ring
from cluster.loader import HOST_RING_ENV, REQUEST_SOCKET_ENV
from tests.cluster.pipelines import big_batches, big_skipping

pytestmark = pytest.mark.skipif(not host_ring.supported(), reason="memfd segments need Linux")


def _epoch(loader, epoch: int) -> list[tuple[np.ndarray, np.ndarray]]:
    loader.set_epoch(epoch)
    return list(loader)


def _drain(loader, epoch: int) -> int:
    """Read an epoch, dropping each batch as the next comes, as a training loop does."""
    loader.set_epoch(epoch)
    return sum(1 for _ in loader)


def _serve(name: str, files: list[str]):
    return rp.serve(big_batches, name=name, world_size=1, seed=3, files=files, replace=True)


def _actor(svc) -> dict:
    [actor] = svc.stats()["actors"]
    return actor


def test_batches_through_shared_memory_are_those_of_the_object_store(cluster, jpeg_files, monkeypatch):
    svc = _serve("ring-same", jpeg_files)
    try:
        loader = rp.loader("ring-same", rank=0, world_size=1, output="numpy")
        assert (loader.host_transport, loader.request_transport) == ("shared memory", "socket")
        through_ring = [(images.copy(), labels.copy()) for images, labels in _epoch(loader, 1)]
        actor = _actor(svc)
        assert actor["host_ring"]["exported"] == len(through_ring) == 3
        assert actor["socket_requests"] == 3, "every request came over the socket"
        image_bytes = through_ring[0][0].nbytes
        assert actor["copied_bytes"] < image_bytes, "only the small labels were copied"
    finally:
        svc.shutdown()
    monkeypatch.setenv(REQUEST_SOCKET_ENV, "0")
    svc = _serve("ring-same", jpeg_files)
    try:
        loader = rp.loader("ring-same", rank=0, world_size=1, output="numpy")
        assert loader.request_transport == f"ray ({REQUEST_SOCKET_ENV}=0)"
        through_ray = _epoch(loader, 1)
        assert (_actor(svc)["host_ring"]["exported"], _actor(svc)["socket_requests"]) == (3, 0)
    finally:
        svc.shutdown()
    monkeypatch.setenv(HOST_RING_ENV, "0")
    svc = _serve("ring-same", jpeg_files)
    try:
        loader = rp.loader("ring-same", rank=0, world_size=1, output="numpy")
        assert loader.host_transport == f"object store ({HOST_RING_ENV}=0)" and loader.request_transport == "ray"
        through_store = _epoch(loader, 1)
        assert _actor(svc)["host_ring"]["exported"] == 0
    finally:
        svc.shutdown()
    for other in (through_ray, through_store):
        assert len(other) == len(through_ring)
        for (ring_images, ring_labels), (images, labels) in zip(through_ring, other):
            np.testing.assert_array_equal(ring_images, images)
            np.testing.assert_array_equal(ring_labels, labels)


def test_batches_with_skipped_samples_come_whole_through_shared_memory(cluster, jpeg_files, tmp_path):
    bad = tmp_path / "bad.jpg"
    bad.write_text("not an image")
    files = [*jpeg_files[:5], str(bad), *jpeg_files[5:15]]  # 2 batches of 8, sample 5 skipped
    svc = rp.serve(big_skipping, name="ring-skip", world_size=1, seed=3, files=files, replace=True)
    try:
        loader = rp.loader("ring-skip", rank=0, world_size=1, output="numpy")
        loader.set_epoch(0)
        batches = [(images.copy(), labels.ravel().tolist(), list(loader.last_is_pad)) for images, labels in loader]
        actor = _actor(svc)
    finally:
        svc.shutdown()
    assert [len(labels) for _, labels, _ in batches] == [8, 8] and all(5 not in labels for _, labels, _ in batches)
    [(images, labels, is_pad)] = [b for b in batches if any(b[2])]
    [slot] = [j for j, pad in enumerate(is_pad) if pad]
    [kept] = [j for j, label in enumerate(labels) if label == labels[slot] and j != slot]
    np.testing.assert_array_equal(images[slot], images[kept])  # a copy of a kept sample of the batch
    assert actor["skipped"] == 1
    ring = actor["host_ring"]
    assert (ring["exported"], ring["not_in_ring"]) == (2, 0), "the batch with a replaced sample too"
    assert actor["copied_bytes"] < images.nbytes, "only the small labels were copied"


def test_kept_batches_are_never_overwritten_and_dropped_ones_are_released(cluster, jpeg_files):
    svc = _serve("ring-keep", jpeg_files * 2)  # 6 batches an epoch
    try:
        loader = rp.loader("ring-keep", rank=0, world_size=1)  # torch tensors
        kept = _epoch(loader, 0) + _epoch(loader, 1)  # every batch of two epochs, uncopied
        copies = [images.clone() for images, _ in kept]
        _drain(loader, 2)  # the actor goes on making batches meanwhile
        for (images, _), copy in zip(kept, copies):
            assert images.equal(copy), "a batch the rank keeps is never reused by the actor"
        held = _actor(svc)["host_ring"]["held"]
        assert held >= len(kept)
        del kept, images
        gc.collect()
        _drain(loader, 3)  # its requests hand the dropped batches back
        ring = _actor(svc)["host_ring"]
        assert ring["held"] <= loader.prefetch + 1 < held
        assert ring["exported"] == 4 * 6, "every batch of the four epochs went through shared memory"
    finally:
        svc.shutdown()


def test_a_restarted_actor_is_mapped_again_and_kept_batches_survive_it(cluster, jpeg_files):
    svc = _serve("ring-restart", jpeg_files * 2)
    try:
        loader = rp.loader("ring-restart", rank=0, world_size=1, output="numpy")
        reference = [(images.copy(), labels.copy()) for images, labels in _epoch(loader, 0)]
        loader.set_epoch(0)
        it = iter(loader)
        first, _ = next(it)
        os.kill(loader.actor_info["pid"], signal.SIGKILL)
        rest = list(it)
        np.testing.assert_array_equal(first, reference[0][0])  # mapped memory outlives its actor
        for (images, labels), (ref_images, ref_labels) in zip(rest, reference[1:]):
            np.testing.assert_array_equal(images, ref_images)
            np.testing.assert_array_equal(labels, ref_labels)
        assert len(rest) == len(reference) - 1
        again = _epoch(loader, 0)
        actor = _actor(svc)
        assert actor["pid"] != loader.actor_info["pid"], "the actor was restarted"
        assert (loader.host_transport, loader.request_transport) == ("shared memory", "socket")
        assert actor["socket_requests"] >= len(again) - 1, "the new actor's socket took over after one Ray call"
        assert actor["host_ring"]["exported"] >= len(again), "the new actor's batches come through its segments"
        for (images, _), (ref_images, _) in zip(again, reference):
            np.testing.assert_array_equal(images, ref_images)
    finally:
        svc.shutdown()


def test_an_epoch_broken_off_and_read_again_over_the_socket_has_every_batch_in_order(cluster, jpeg_files):
    svc = _serve("ring-again", jpeg_files * 2)  # 6 batches an epoch
    try:
        loader = rp.loader("ring-again", rank=0, world_size=1, output="numpy", prefetch=3)
        reference = [labels.copy() for _, labels in _epoch(loader, 0)]
        loader.set_epoch(0)
        for k, _ in enumerate(loader):
            if k == 1:
                break  # two requests still in flight: their replies must not answer the next ones
        again = [labels.copy() for _, labels in _epoch(loader, 0)]
        assert loader.request_transport == "socket"
        assert len(again) == len(reference) == 6
        for labels, ref in zip(again, reference):
            np.testing.assert_array_equal(labels, ref)
        assert _actor(svc)["socket_requests"] == 6 + 4 + 6, "two epochs, two batches read, two in flight at the break"
    finally:
        svc.shutdown()
