"""A real S3-compatible server for the tests: moto's standalone server on 127.0.0.1, on a port
chosen when the tests load, with the standard AWS environment variables pointing at it.

The variables are set when the test session loads (:mod:`tests.conftest` calls :func:`set_env`),
before any Ray cluster starts, so that Ray's worker processes inherit them; they name only this
local server and dummy credentials. The retry budget is cut to a few seconds so that a test of a
server that stopped answering ends quickly."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PORT = _free_port()
ENDPOINT = f"http://127.0.0.1:{PORT}"
ENV = {
    "AWS_ENDPOINT_URL": ENDPOINT,
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
    "RAYPIPE_STORAGE_RETRIES": "3",
    "RAYPIPE_STORAGE_RETRY_TIMEOUT_S": "4",
    "RAYPIPE_STORAGE_TIMEOUT_S": "5",
}


def set_env() -> None:
    """Point the AWS variables of this process (and the processes it starts) at the test server:
    this process's own, also where they came from a parent (pytest-xdist's workers inherit the
    controller's environment, and each worker serves on a port of its own)."""
    os.environ.update(ENV)


class S3Server:
    """moto's server on :data:`PORT`; stop and start it again to test a store that goes away."""

    def __init__(self):
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line per request otherwise
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=PORT, verbose=False)
        self.running = False

    def start(self) -> None:
        for _ in range(50):  # the port may linger a moment after a stop
            try:
                self._server.start()
                break
            except OSError:
                time.sleep(0.1)
        self.running = True

    def stop(self) -> None:
        self._server.stop()
        self.running = False

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=ENDPOINT)

    def bucket(self, name: str) -> str:
        """Create bucket ``name`` (if new) and return it."""
        s3 = self.client()
        if name not in {b["Name"] for b in s3.list_buckets().get("Buckets", [])}:
            s3.create_bucket(Bucket=name)
        return name

    def upload(self, folder: str | Path, bucket: str, prefix: str) -> str:
        """Upload every file under ``folder`` to ``s3://bucket/prefix/<relative path>``; the URL."""
        s3 = self.client()
        self.bucket(bucket)
        root = Path(folder)
        for path in sorted(root.rglob("*")):
            if path.is_file():
                s3.upload_file(str(path), bucket, f"{prefix}/{path.relative_to(root).as_posix()}")
        return f"s3://{bucket}/{prefix}"


@contextlib.contextmanager
def checking_server() -> Iterator[str]:
    """Another moto server, in its own process, that checks every request's credentials (moto's
    ``INITIAL_NO_AUTH_ACTION_COUNT=0``: only keys made through its IAM are accepted); its endpoint."""
    import subprocess
    import sys

    port = _free_port()
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "0"}
    cmd = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="session")
def s3_server():
    """The running test S3 server (started once; a test that stops it starts it again)."""
    pytest.importorskip("moto.server")
    pytest.importorskip("obstore")
    server = S3Server()
    server.start()
    yield server
    if server.running:
        server.stop()
