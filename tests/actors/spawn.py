"""A child process for the two-process tests of this package."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess


def spawn_child(target: Callable[[Connection], None]) -> tuple[Connection, BaseProcess]:
    """Start ``target(conn)`` in a spawned daemon process (a fresh interpreter, as another
    process of Ray's would be); returns this side's end of the pipe and the process."""
    ctx = multiprocessing.get_context("spawn")
    ours, theirs = ctx.Pipe()
    process = ctx.Process(target=target, args=(theirs,), daemon=True)
    process.start()
    return ours, process
