"""Local files and object-store objects opened alike, for the container formats' indexes and
checks: a URL opens as a seekable binary file whose reads are byte-range requests (buffered), so
code written for ``open(path, "rb")`` reads an object unchanged. Bulk record reads do not come
here: :class:`~raypipe.formats.record_files.RecordFiles` fetches whole extents or records."""

from __future__ import annotations

import io
import os
from typing import BinaryIO

from . import store
from .urls import is_url

BUFFER = 64 << 10  # bytes per ranged read when a URL is read as a file


class RemoteFile(io.RawIOBase):
    """An object read as a raw binary file: every read a ranged GET."""

    def __init__(self, url: str):
        self.url = url
        self.size = store.size(url)  # a missing object fails here, as ``open`` does
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer) -> int:
        end = min(self.size, self._pos + len(buffer))
        if end <= self._pos:
            return 0
        data = store.read_range(self.url, self._pos, end)
        memoryview(buffer).cast("B")[: len(data)] = data
        self._pos = end
        return len(data)


def open_binary(path: str) -> BinaryIO:
    """``open(path, "rb")`` for a local path, a buffered :class:`RemoteFile` for a URL."""
    if is_url(path):
        return io.BufferedReader(RemoteFile(path), BUFFER)
    return open(path, "rb")


def size(path: str) -> int:
    """The size in bytes of a local file or an object."""
    return store.size(path) if is_url(path) else os.stat(path).st_size


def read_at(f: BinaryIO | int, size: int, offset: int) -> bytes:
    """``size`` bytes at ``offset`` of an open file (a file object of :func:`open_binary`, or a
    descriptor), fewer at its end."""
    if isinstance(f, int):
        return os.pread(f, size, offset)
    if hasattr(f, "raw") and isinstance(f.raw, RemoteFile):
        end = min(f.raw.size, offset + size)
        return store.read_range(f.raw.url, offset, end).tobytes() if end > offset else b""
    return os.pread(f.fileno(), size, offset)
