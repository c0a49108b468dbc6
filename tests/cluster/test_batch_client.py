"""The rank's batch client without Ray: a spawned process plays the pipeline actor (a request
socket and a host ring, as the actor has), and the client sends its requests over the socket,
reads the batches from the other process's shared memory, and hands each back once dropped."""

from __future__ import annotations

import dataclasses
import gc

import numpy as np
import pytest

from actors import host_ring, request_channel
from cluster.batch_client import HOST_RING_ENV, REQUEST_SOCKET_ENV, BatchClient
from tests.actors.spawn import spawn_child

pytestmark = pytest.mark.skipif(
    not (host_ring.supported() and request_channel.supported()), reason="memfd segments and Unix sockets need Linux"
)

SHAPE = (4, 3, 512, 512)  # 3 MiB of uint8: above the ring's MIN_BYTES, in a segment of its own


def _actor(conn) -> None:
    """Answer each batch request with a batch in shared memory filled with the batch's index;
    report the tokens each request released and the exporter's held count on ``"stats"``."""
    from actors import host_ring, request_channel
    from actors.protocol import BatchReply

    exporter = host_ring.Exporter()
    released: list[int] = []

    def answer(request):
        released.extend(request.released)
        exporter.release(request.released)
        array = exporter.allocate(SHAPE, np.uint8)
        array[...] = request.index
        return BatchReply(
            outputs=[exporter.export(array), np.arange(SHAPE[0])],
            is_pad=np.zeros(SHAPE[0], bool),
            sample_indices=np.arange(SHAPE[0]) + request.index * SHAPE[0],
            epoch=request.epoch,
            start=request.start,
            index=request.index,
        )

    server = request_channel.RequestServer(answer)
    conn.send((dataclasses.asdict(exporter.channel()), server.offer()))
    while conn.recv() == "stats":
        conn.send((list(released), exporter.held, server.served))


@pytest.fixture
def actor():
    ours, process = spawn_child(_actor)
    channel, offer = ours.recv()

    def stats():
        ours.send("stats")
        return ours.recv()

    yield channel, offer, stats
    ours.send("stop")
    process.join(10)


def test_requests_go_over_the_socket_and_batches_come_through_shared_memory(actor):
    channel, offer, stats = actor
    client = BatchClient(None, "rank 0 of 'unit'", rank_slots=3)
    assert (client.host_transport, client.request_transport) == ("object store", "ray")
    client.offer(channel, offer)
    assert (client.host_transport, client.request_transport) == ("shared memory", "socket")
    assert client.maps_host_memory
    try:
        pending = [client.request(2, 8, k) for k in range(3)]
        assert all(p.ref is None and p.socket is not None for p in pending), "no request went through Ray"
        for k, p in enumerate(pending):
            reply = client.receive(p)
            assert (reply.epoch, reply.start, reply.index) == (2, 8, k)
            images, labels = client.unpack(reply)
            assert images.shape == SHAPE and not images.flags.writeable
            assert np.all(images == k) and np.array_equal(labels, np.arange(SHAPE[0]))
            del images
        gc.collect()
        client.receive(client.request(2, 8, 3))  # carries the tokens of the three dropped batches
        released, held, served = stats()
        assert sorted(released) == [1, 2, 3] and held == 1 and served == 4
    finally:
        client.close()


def test_a_kept_batch_is_not_released(actor):
    channel, offer, stats = actor
    client = BatchClient(None, "rank 0 of 'unit'", rank_slots=3)
    client.offer(channel, offer)
    try:
        kept = client.unpack(client.receive(client.request(0, 0, 0)))[0]
        client.receive(client.request(0, 0, 1))
        assert stats()[:2] == ([], 2), "the first batch is still held by the rank"
        assert np.all(kept == 0)
    finally:
        client.close()


def test_the_environment_keeps_batches_and_requests_on_ray(actor, monkeypatch):
    channel, offer, _ = actor
    monkeypatch.setenv(HOST_RING_ENV, "0")
    client = BatchClient(None, "rank 0 of 'unit'", rank_slots=3)
    client.offer(channel, offer)
    assert (client.host_transport, client.request_transport) == (f"object store ({HOST_RING_ENV}=0)", "ray")
    assert not client.maps_host_memory
    monkeypatch.setenv(HOST_RING_ENV, "1")
    monkeypatch.setenv(REQUEST_SOCKET_ENV, "0")
    client = BatchClient(None, "rank 0 of 'unit'", rank_slots=3)
    client.offer(channel, offer)
    assert (client.host_transport, client.request_transport) == ("shared memory", f"ray ({REQUEST_SOCKET_ENV}=0)")


def test_a_gpu_rank_keeps_its_requests_on_ray(actor):
    channel, offer, _ = actor
    client = BatchClient(None, "rank 0 of 'unit'", rank_slots=3, gpu_uuid=b"GPU-0")
    client.offer(channel, offer)
    assert client.request_transport == "ray (batches come by CUDA IPC)"
