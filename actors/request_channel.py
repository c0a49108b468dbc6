"""Batch requests from a rank to its pipeline actor on the same machine, over a Unix socket.

A Ray actor call costs about 0.5 ms of CPU in the caller and as much in the actor (submitting,
serializing, Ray's threads on both sides), for every batch; on a machine with two cores per
GPU that was about 2 % of what the pipeline could have used. Where a rank maps its actor's
shared memory (:mod:`actors.host_ring`), it is on the actor's machine, and it also sends its
batch requests over a socket the actor listens on: a length-prefixed pickle each way, answered
in order on one connection, by the same method Ray would call. Ray keeps everything else:
starting, placing and restarting the actor, and its control calls.

A request that cannot go this way goes through Ray: no socket here, or a connection that broke
(the actor died), in which case Ray waits for the restarted actor or says it is gone. The socket
is in Linux's abstract namespace: nothing on disk, and it goes with the actor's process.

Abstract sockets have no file permissions and their names are listed in ``/proc/net/unix``, and
requests are pickles, so the server trusts a connection only when its peer runs as the same
user (``SO_PEERCRED``; the same bar as mapping the actor's memory through ``/proc``) and its
first message is the server's random token, which the rank got through Ray. Nothing is
unpickled before both checks.
"""

from __future__ import annotations

import hmac
import os
import pickle
import socket
import struct
import sys
import threading
import uuid
import weakref
from collections.abc import Callable
from typing import Any

from raypipe.errors import RaypipeError

_LENGTH = struct.Struct("<Q")
_CREDENTIALS = struct.Struct("3i")  # struct ucred: pid, uid, gid
TOKEN_BYTES = 16


def supported() -> bool:
    """True where abstract Unix sockets exist (Linux)."""
    return sys.platform.startswith("linux") and hasattr(socket, "AF_UNIX")


def _peer_uid(conn: socket.socket) -> int:
    return _CREDENTIALS.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CREDENTIALS.size))[1]


def _send(conn: socket.socket, message: Any) -> None:
    data = pickle.dumps(message, protocol=5)
    conn.sendall(_LENGTH.pack(len(data)) + data)


def _read_exactly(conn: socket.socket, size: int) -> bytearray | None:
    """``size`` bytes, or None at a clean end of the stream before the first byte."""
    data = bytearray(size)
    view, got = memoryview(data), 0
    while got < size:
        n = conn.recv_into(view[got:])
        if n == 0:
            if got == 0:
                return None
            raise ConnectionError("request channel: the stream ended inside a message")
        got += n
    return data


def _receive(conn: socket.socket) -> Any:
    """The next message, or None when the other side closed the connection."""
    head = _read_exactly(conn, _LENGTH.size)
    if head is None:
        return None
    body = _read_exactly(conn, _LENGTH.unpack(head)[0])
    if body is None:
        raise ConnectionError("request channel: the stream ended inside a message")
    return pickle.loads(body)


def _portable(exc: Exception) -> Exception:
    """``exc`` if it survives pickling, else a RaypipeError with its type and message."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return RaypipeError(f"{type(exc).__name__}: {exc}")


class RequestServer:
    """The actor's side: answers each trusted connection's requests in order with
    ``handle(*args)``, on a thread per connection (a rank has one; a new one may come after a
    broken one). :meth:`offer` is what a rank needs to connect."""

    def __init__(self, handle: Callable[..., Any]):
        self._handle = handle
        self._token = os.urandom(TOKEN_BYTES)
        self.address = f"\0raypipe-requests-{uuid.uuid4().hex}"
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._socket.bind(self.address)
        self._socket.listen(4)
        self._finalizer = weakref.finalize(self, self._socket.close)
        self.served = 0  # requests answered
        self.refused = 0  # connections closed unheard (another user, or no token)
        threading.Thread(target=self._accept, name="raypipe-requests", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._socket.accept()
            except OSError:  # closed
                return
            threading.Thread(target=self._serve, args=(conn,), name="raypipe-request-conn", daemon=True).start()

    def offer(self) -> dict[str, str]:
        """The socket's address and token, for the rank (through Ray)."""
        return {"address": self.address, "token": self._token.hex()}

    def _trusted(self, conn: socket.socket) -> bool:
        """The peer runs as this process's user and its first message is the token."""
        try:
            if _peer_uid(conn) != os.getuid():
                return False
            conn.settimeout(10.0)
            token = _read_exactly(conn, TOKEN_BYTES)
            conn.settimeout(None)
        except OSError:
            return False
        return token is not None and hmac.compare_digest(token, self._token)

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            if not self._trusted(conn):
                self.refused += 1
                return
            while True:
                try:
                    request = _receive(conn)
                except (OSError, pickle.UnpicklingError):
                    return
                if request is None:
                    return
                seq, args = request
                try:
                    reply = (seq, True, self._handle(*args))
                except Exception as exc:
                    reply = (seq, False, _portable(exc))
                self.served += 1
                try:
                    _send(conn, reply)
                except OSError:  # the rank went away
                    return


class RequestClient:
    """The rank's side: one connection to the server at ``address`` (``token`` from its
    :meth:`RequestServer.offer`); :meth:`send` returns a sequence number that
    :meth:`receive` waits for, discarding replies to requests abandoned before it.

    Any failure on the connection (the actor died, an interrupt mid-message) marks the client
    ``broken``, and every call after raises ConnectionError. So does the socket's closing by the
    client's finalizer, which runs at interpreter exit, before a loader's iteration is wound up."""

    def __init__(self, address: str, token: str):
        self.address = address
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._socket.connect(address)
            self._socket.sendall(bytes.fromhex(token))
        except OSError:
            self._socket.close()
            raise
        self._sent = 0  # sequence number of the last request
        self._received = 0  # ... of the last reply read
        self._closed = False
        self._finalizer = weakref.finalize(self, self._socket.close)  # a dropped loader's connection ends

    def send(self, args: tuple) -> int:
        """Queue a request; its sequence number."""
        self._check()
        try:
            _send(self._socket, (self._sent + 1, args))
        except BaseException:
            self.close()
            raise
        self._sent += 1
        return self._sent

    def receive(self, seq: int) -> Any:
        """The reply to request ``seq``: its result, or its exception raised here."""
        self._check()
        if not self._received < seq <= self._sent:
            raise RaypipeError(f"request channel: no request {seq} waiting (sent {self._sent}, read {self._received})")
        try:
            while True:
                message = _receive(self._socket)
                if message is None:
                    raise ConnectionError("request channel: the pipeline actor closed the connection")
                got, ok, value = message
                self._received = got
                if got == seq:
                    break
        except BaseException:
            self.close()
            raise
        if not ok:
            raise value
        return value

    def drain(self, timeout_s: float) -> None:
        """Read (and drop) the replies to every request sent, waiting at most ``timeout_s``; a
        connection that does not answer in time is given up."""
        if self.broken or self._received == self._sent:
            return
        self._socket.settimeout(timeout_s)
        try:
            while self._received < self._sent:
                message = _receive(self._socket)
                if message is None:
                    raise ConnectionError("request channel: the pipeline actor closed the connection")
                self._received = message[0]
        except Exception:
            self.close()
        except BaseException:
            self.close()
            raise
        finally:
            if not self.broken:
                self._socket.settimeout(None)

    def _check(self) -> None:
        if self.broken:
            raise ConnectionError("request channel: the connection to the pipeline actor broke earlier")

    @property
    def broken(self) -> bool:
        """True once the connection failed or was closed, here or by the finalizer."""
        return self._closed or self._socket.fileno() == -1

    def close(self) -> None:
        """Close the connection (it is ``broken`` from now on). Idempotent."""
        self._closed = True
        self._socket.close()
