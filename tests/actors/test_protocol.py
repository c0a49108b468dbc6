"""The loader-actor protocol: typed, frozen, and intact across the actor's socket."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest

from actors import request_channel
from actors.protocol import BatchReply, BatchRequest, Skip, Timing


def _reply_to(request: BatchRequest) -> BatchReply:
    """What an actor answers, built from the request alone (no pipeline)."""
    return BatchReply(
        outputs=[np.full((2, 3), request.index, np.uint8)],
        is_pad=np.array([False, True]),
        sample_indices=np.array([request.start + request.index, 0]),
        epoch=request.epoch,
        start=request.start,
        index=request.index,
        skipped=(Skip(request.epoch, 7, "bad.jpg", "DecodeError: truncated"),),
    )


def _answers(reply: BatchReply, request: BatchRequest) -> bool:
    return (reply.epoch, reply.start, reply.index) == (request.epoch, request.start, request.index)


def test_messages_are_frozen_and_survive_pickling():
    request = BatchRequest(epoch=2, start=10, index=3, rank_slots=4, released=(1, 2))
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.index = 4
    assert pickle.loads(pickle.dumps(request)) == request
    timing = Timing(waited_s=0.01, trained_s=0.2, in_flight=1, prefetch=2, at=12.5)
    assert pickle.loads(pickle.dumps(timing)) == timing
    reply = _reply_to(request)
    again = pickle.loads(pickle.dumps(reply))
    assert again.skipped == reply.skipped and np.array_equal(again.outputs[0], reply.outputs[0])


@pytest.mark.skipif(not request_channel.supported(), reason="abstract Unix sockets need Linux")
def test_requests_and_replies_cross_the_actor_socket_as_they_are():
    server = request_channel.RequestServer(_reply_to)
    offer = server.offer()
    client = request_channel.RequestClient(offer["address"], offer["token"])
    try:
        requests = [BatchRequest(epoch=1, start=5, index=k, host_exporter="x") for k in range(3)]
        seqs = [client.send((r,)) for r in requests]
        replies = [client.receive(seq) for seq in seqs]
        assert all(_answers(reply, r) for reply, r in zip(replies, requests))
        assert replies[2].skipped == (Skip(1, 7, "bad.jpg", "DecodeError: truncated"),)
        assert np.array_equal(replies[2].outputs[0], np.full((2, 3), 2, np.uint8))
    finally:
        client.close()
