"""Joining the cluster (:mod:`cluster.ray_connection`): an address whose head does not answer
fails in seconds naming the address and where it came from, where ``ray.init`` retries for as
long as the process lives."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SERVE = """
import raypipe as rp
from raypipe import fn

@rp.pipeline_def(batch_size=2, num_threads=1, device_id=None)
def pipe(file_root):
    jpegs, labels = fn.readers.file(file_root=file_root, name="Reader")
    return jpegs, labels

try:
    rp.serve(pipe, name="x", world_size=1, file_root={root!r})
except rp.RaypipeError as exc:
    print("refused:", exc)
"""

LOADER = """
import raypipe as rp
try:
    rp.loader("x", rank=0, world_size=1)
except rp.RaypipeError as exc:
    print("refused:", exc)
"""


@pytest.fixture
def closed_port():
    """A port nothing listens on, held for the test: bound on every address and never listening,
    so a connection is refused and no process (the suite's own Ray cluster) can take the port
    meanwhile. Ray resolves 127.0.0.1 to the node's address, where a released port could be taken."""
    with socket.socket() as s:
        s.bind(("", 0))
        yield s.getsockname()[1]


def _run(command: list[str], **env: str) -> subprocess.CompletedProcess:
    """``command`` with ``env``; ``ray.init`` alone would still be waiting at the timeout."""
    environ = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_TMPDIR")} | env
    return subprocess.run(command, cwd=ROOT, env=environ, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("entry", ["raypipe stats", "rp.loader"])
def test_an_address_nothing_answers_at_is_named_at_once(entry, closed_port):
    port = closed_port
    command = ["-m", "raypipe.cli", "stats", "imagenet"] if entry == "raypipe stats" else ["-c", LOADER]
    done = _run([sys.executable, *command], RAY_ADDRESS=f"127.0.0.1:{port}")
    said = done.stderr if entry == "raypipe stats" else done.stdout
    assert done.returncode == (1 if entry == "raypipe stats" else 0), done.stderr[-2000:]
    assert f":{port} (RAY_ADDRESS): Connection refused" in said
    assert "cannot reach the Ray cluster's head at" in said
    assert "Traceback" not in done.stderr


def test_a_stale_address_file_is_named_with_the_way_out(tmp_path, jpeg_root, closed_port):
    """``ray start`` writes the head's address in Ray's temporary folder; a head that died without
    ``ray stop`` leaves it behind, and ``ray.init()`` would wait on it for ever. (``rp.loader`` and
    ``raypipe stats`` ask Ray for address "auto", which prefers a cluster running on the machine
    to the file, as the suite's own cluster would be.)"""
    (tmp_path / "ray").mkdir()
    stale = tmp_path / "ray" / "ray_current_cluster"
    stale.write_text(f"127.0.0.1:{closed_port}\n")
    done = _run([sys.executable, "-c", SERVE.format(root=jpeg_root)], RAY_TMPDIR=str(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "refused: cannot reach the Ray cluster's head at" in done.stdout
    assert f"read from {stale}, which `ray start` wrote" in done.stdout
    assert "`ray stop --force` removes the file, and RAY_ADDRESS=local starts a fresh local instance" in done.stdout
