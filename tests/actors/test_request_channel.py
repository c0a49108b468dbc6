"""Batch requests over a Unix socket across two real processes: a server in a spawned child
answers in order, its exceptions arrive as raised, replies to abandoned requests are skipped, a
server that dies breaks the connection at once instead of hanging the client, and a peer without
the token or of another user is not heard."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time

import pytest

from actors import request_channel
from raypipe.errors import RaypipeError
from tests.actors.spawn import spawn_child

pytestmark = pytest.mark.skipif(not request_channel.supported(), reason="abstract Unix sockets need Linux")


class Unpicklable(Exception):
    def __init__(self, message: str):
        super().__init__(message)
        self.lock = threading.Lock()


def _handle(kind: str, *args):
    if kind == "echo":
        return args[0]
    if kind == "slow":
        time.sleep(args[0])
        return args[1]
    if kind == "fail":
        raise ValueError(args[0])
    if kind == "unpicklable":
        raise Unpicklable("holds a lock")
    if kind == "die":
        import os

        os._exit(3)
    raise AssertionError(kind)


def _child(conn) -> None:
    server = request_channel.RequestServer(_handle)
    conn.send(server.offer())
    conn.recv()  # until the test is done
    conn.send((server.served, server.refused))


def _client(offer: dict, uid: int | None, out) -> None:
    """Ask the server at ``offer`` to die, as user ``uid``; report what came back."""
    if uid is not None:
        os.setuid(uid)
    try:
        client = request_channel.RequestClient(offer["address"], offer["token"])
        out.send(repr(client.receive(client.send(("die",)))))
    except ConnectionError:
        out.send("refused")
    except Exception as exc:
        out.send(type(exc).__name__)


@pytest.fixture()
def server():
    parent, process = spawn_child(_child)
    offer = parent.recv()
    yield offer, parent, process
    if process.is_alive():
        process.kill()
    process.join(10)


def test_requests_in_flight_are_answered_in_order_from_another_process(server):
    offer, _, _ = server
    client = request_channel.RequestClient(offer["address"], offer["token"])
    seqs = [client.send(("slow", 0.05 * (3 - i), i)) for i in range(3)]  # the first is the slowest
    assert [client.receive(seq) for seq in seqs] == [0, 1, 2]
    big = bytes(range(256)) * 4096  # 1 MiB: more than a socket buffer holds
    assert client.receive(client.send(("echo", big))) == big


def test_an_exception_arrives_as_raised_or_named_when_it_cannot_travel(server):
    offer, _, _ = server
    client = request_channel.RequestClient(offer["address"], offer["token"])
    with pytest.raises(ValueError, match="bad sample 7"):
        client.receive(client.send(("fail", "bad sample 7")))
    with pytest.raises(RaypipeError, match="Unpicklable: holds a lock"):
        client.receive(client.send(("unpicklable",)))
    assert client.receive(client.send(("echo", "still open"))) == "still open"


def test_replies_to_abandoned_requests_are_skipped_and_drain_reads_them_all(server):
    offer, parent, _ = server
    client = request_channel.RequestClient(offer["address"], offer["token"])
    client.send(("echo", "abandoned"))
    wanted = client.send(("echo", "wanted"))
    assert client.receive(wanted) == "wanted"
    for i in range(3):
        client.send(("slow", 0.05, i))
    client.drain(timeout_s=10)
    assert client.receive(client.send(("echo", "next"))) == "next", "no reply of the drained requests is left"
    with pytest.raises(RaypipeError, match="no request 99 waiting"):
        client.receive(99)
    client.close()
    parent.send("done")
    assert parent.recv() == (6, 0), "every request was answered, the abandoned ones too"


def test_a_server_that_dies_breaks_the_connection_at_once(server):
    offer, _, process = server
    client = request_channel.RequestClient(offer["address"], offer["token"])
    waiting = client.send(("slow", 60, "never"))
    killer = threading.Timer(0.3, process.kill)
    killer.start()
    began = time.monotonic()
    with pytest.raises(ConnectionError, match="closed the connection"):
        client.receive(waiting)
    assert time.monotonic() - began < 30 and client.broken
    with pytest.raises(ConnectionError, match="broke earlier"):
        client.send(("echo", 1))
    process.join(10)
    with pytest.raises(OSError):
        request_channel.RequestClient(offer["address"], offer["token"])  # nobody listens there any more


def test_a_request_that_kills_its_server_breaks_the_connection(server):
    offer, _, _ = server
    client = request_channel.RequestClient(offer["address"], offer["token"])
    with pytest.raises(ConnectionError):
        client.receive(client.send(("die",)))
    assert client.broken
    client.drain(timeout_s=1)  # nothing to wait for on a broken connection


def test_a_peer_without_the_token_or_of_another_user_is_not_heard(server):
    offer, parent, process = server
    wrong = request_channel.RequestClient(offer["address"], "00" * request_channel.TOKEN_BYTES)
    with pytest.raises(ConnectionError):
        wrong.receive(wrong.send(("die",)))
    refused = 1
    if os.getuid() == 0:  # as root, try as another user too
        ctx = multiprocessing.get_context("spawn")
        out, into = ctx.Pipe()
        other = ctx.Process(target=_client, args=(offer, 65534, into))
        other.start()
        assert out.recv() == "refused"
        other.join(10)
        refused += 1
    assert process.is_alive(), "no request of theirs was run"
    client = request_channel.RequestClient(offer["address"], offer["token"])
    assert client.receive(client.send(("echo", "heard"))) == "heard"
    client.close()
    parent.send("done")
    assert parent.recv() == (1, refused)


def test_a_connection_closed_by_its_finalizer_is_broken_and_drains_quietly(server):
    """At interpreter exit the finalizer closes the socket before a loader's abandoned iteration
    is wound up: its drain is then a no-op, not an OSError printed as an ignored exception."""
    offer, _, _ = server
    client = request_channel.RequestClient(offer["address"], offer["token"])
    client.send(("slow", 0.05, "abandoned"))
    client._finalizer()  # as atexit runs it
    assert client.broken
    client.drain(timeout_s=1)
    with pytest.raises(ConnectionError, match="broke earlier"):
        client.send(("echo", 1))
