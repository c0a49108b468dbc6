"""WebDataset shards: POSIX tar files whose members are grouped into samples by key, and
DALI's index of them (what ``wds2idx`` writes and ``fn.readers.webdataset`` reads).

A member ``dir/abc.seg.png`` has key ``dir/abc`` and extension ``seg.png`` (the key ends at the
first dot of the file name); consecutive members with the same key form one sample. Only
regular files count; directories, links, hidden files (``dir/.x``) and names without an
extension are skipped, as the WebDataset library does.

DALI's index (version ``v1.2``): a first line ``v1.2 N``, then one line per sample listing its
members as ``ext offset size name`` (offset = where the member's data starts, a multiple of 512).
DALI also reads ``v1.1`` indexes, which lack the name.
"""

from __future__ import annotations

import io
import os
import tarfile
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from ..errors import ArgumentError, ReaderError
from ..storage import files

BLOCK = tarfile.BLOCKSIZE
INDEX_VERSION = "v1.2"
READABLE_VERSIONS = {"v1.1": 3, "v1.2": 4}  # tokens per member
REGULAR_TYPES = (tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.CONTTYPE)
IMAGE_MAGIC = (
    (b"\xff\xd8\xff", "jpg"),
    (b"\x89PNG\r\n\x1a\n", "png"),
    (b"GIF8", "gif"),
    (b"BM", "bmp"),
    (b"II*\x00", "tiff"),
    (b"MM\x00*", "tiff"),
)


class Component(NamedTuple):
    """One member of a sample: its extension, data offset and size, and member name."""

    ext: str
    offset: int
    size: int
    name: str


class Sample(NamedTuple):
    """Consecutive members sharing a key."""

    key: str
    components: list[Component]


@dataclass(frozen=True)
class TarIndex:
    """Every sample of one tar file: sample ``i`` has members ``starts[i]:starts[i + 1]``.
    ``names`` and ``keys`` are None for a ``v1.1`` index (which does not hold them)."""

    starts: np.ndarray
    exts: np.ndarray
    offsets: np.ndarray
    sizes: np.ndarray
    names: np.ndarray | None
    keys: np.ndarray | None

    def __len__(self) -> int:
        return len(self.starts) - 1


def split_name(name: str) -> tuple[str, str] | None:
    """``(key, ext)`` of a member name, or None when WebDataset skips it (hidden file, no dot)."""
    slash = name.rfind("/") + 1
    dot = name.find(".", slash)
    if dot <= slash:
        return None
    return name[:dot], name[dot + 1 :]


def scan(path: str) -> list[Sample]:
    """The samples of the tar at ``path``, in file order. ReaderError naming the tar and the
    member (or byte offset) when the file is truncated, compressed or not a tar."""
    try:
        file_size = os.path.getsize(path)
        tar = tarfile.open(path, "r:")
    except (OSError, tarfile.TarError) as exc:
        raise ReaderError(f"{path}: cannot open as an uncompressed tar file: {exc}") from None
    samples: list[Sample] = []
    with tar:
        while True:
            try:
                member = tar.next()
            except tarfile.TarError as exc:
                raise ReaderError(f"{path}: unreadable tar header at byte {tar.offset}: {exc}") from None
            if member is None:
                break
            tar.members.clear()  # tarfile keeps every member otherwise; a shard may hold millions
            if member.type not in REGULAR_TYPES:
                continue
            if member.offset_data + member.size > file_size:
                raise ReaderError(
                    f"{path}: member {member.name!r} (data at byte {member.offset_data}, {member.size} bytes) "
                    f"runs past the end of the file ({file_size} bytes): the tar is truncated"
                )
            parts = split_name(member.name)
            if parts is None:
                continue
            key, ext = parts
            component = Component(ext, member.offset_data, member.size, member.name)
            if samples and samples[-1].key == key:
                samples[-1].components.append(component)
            else:
                samples.append(Sample(key, [component]))
        _check_end(path, tar.offset, file_size)
    return samples


def _check_end(path: str, offset: int, file_size: int) -> None:
    """tarfile stops quietly at a bad or cut header; only zeros (or nothing) may follow the last member."""
    with open(path, "rb") as f:
        f.seek(offset)
        tail = f.read(2 * BLOCK)
    if tail.strip(b"\0"):
        raise ReaderError(
            f"{path}: unreadable tar header at byte {offset} of {file_size} "
            f"(truncated or corrupt file); the members after it cannot be found"
        )


def index_of(samples: list[Sample]) -> TarIndex:
    """The :class:`TarIndex` of scanned samples."""
    counts = np.fromiter((len(s.components) for s in samples), np.int64, len(samples))
    components = [c for s in samples for c in s.components]
    return TarIndex(
        starts=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        exts=np.array([c.ext for c in components], dtype=str),
        offsets=np.fromiter((c.offset for c in components), np.int64, len(components)),
        sizes=np.fromiter((c.size for c in components), np.int64, len(components)),
        names=np.array([c.name for c in components], dtype=str),
        keys=np.array([s.key for s in samples], dtype=str),
    )


def write_index(data_path: str, index_path: str) -> int:
    """Scan the tar at ``data_path`` and write DALI's ``v1.2`` index at ``index_path``; the
    sample count. ReaderError when the tar is bad, holds no sample, or has a member name with
    whitespace (the index is whitespace-separated, so DALI could not read it back)."""
    samples = scan(data_path)
    if not samples:
        raise ReaderError(f"{data_path}: the tar holds no WebDataset sample (no regular file named key.ext)")
    lines = [f"{INDEX_VERSION} {len(samples)}\n"]
    for sample in samples:
        for c in sample.components:
            if len(c.name.split()) != 1:
                raise ReaderError(
                    f"{data_path}: member {c.name!r} has whitespace in its name, which DALI's index cannot hold"
                )
        lines.append(" ".join(f"{c.ext} {c.offset} {c.size} {c.name}" for c in sample.components) + "\n")
    tmp = f"{index_path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.writelines(lines)
    os.replace(tmp, index_path)
    return len(samples)


def read_index(index_path: str, data_path: str) -> TarIndex:
    """Parse DALI's index of the tar at ``data_path`` and check it against the tar (sample count,
    offsets on 512-byte blocks, every member inside the file, the first and last member's tar
    header); ReaderError naming the index file and line otherwise."""
    try:
        with files.open_binary(index_path) as f:
            lines = f.read().decode("utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise ReaderError(f"cannot read WebDataset index {index_path!r}: {exc}") from None
    while lines and not lines[-1].strip():
        lines.pop()
    header = lines[0].split() if lines else []
    if len(header) != 2 or header[0] not in READABLE_VERSIONS or not header[1].isdigit():
        raise ReaderError(
            f"{index_path} line 1: expected '{INDEX_VERSION} N' (or 'v1.1 N'), got {lines[0] if lines else ''!r}"
        )
    width = READABLE_VERSIONS[header[0]]
    count = int(header[1])
    body = [line.split() for line in lines[1:]]
    if count != len(body) or count == 0:
        raise ReaderError(f"{index_path} line 1: the header says {count} samples but {len(body)} lines follow")
    counts = np.fromiter(map(len, body), np.int64, len(body))
    bad = np.flatnonzero((counts == 0) | (counts % width != 0))
    if len(bad):
        fields = "ext offset size name" if width == 4 else "ext offset size"
        line = int(bad[0])
        raise ReaderError(f"{index_path} line {line + 2}: expected groups of '{fields}', got {lines[line + 1]!r}")
    tokens = [t for parts in body for t in parts]
    members = counts // width
    starts = np.concatenate([[0], np.cumsum(members)]).astype(np.int64)
    offsets = _numbers(index_path, tokens[1::width], starts, "offset")
    sizes = _numbers(index_path, tokens[2::width], starts, "size")
    index = TarIndex(
        starts=starts,
        exts=np.array(tokens[0::width], dtype=str),
        offsets=offsets,
        sizes=sizes,
        names=np.array(tokens[3::width], dtype=str) if width == 4 else None,
        keys=None,
    )
    _check_index(index_path, data_path, index)
    if index.names is not None:
        first = index.names[starts[:-1]]
        index = replace(index, keys=np.array([_key(str(n)) for n in first], dtype=str))
    return index


def _key(name: str) -> str:
    parts = split_name(name)
    return parts[0] if parts is not None else name


def _numbers(index_path: str, tokens: list[str], starts: np.ndarray, what: str) -> np.ndarray:
    """Non-negative integers; ReaderError naming the index line of the first bad one."""
    ok = np.fromiter((t.isascii() and t.isdigit() for t in tokens), bool, len(tokens))
    if not ok.all():
        member = int(np.argmin(ok))
        line = int(np.searchsorted(starts, member, side="right")) + 1
        raise ReaderError(f"{index_path} line {line}: {what} {tokens[member]!r} is not a non-negative integer")
    return np.array(tokens, dtype=np.int64) if tokens else np.zeros(0, np.int64)


def _check_index(index_path: str, data_path: str, index: TarIndex) -> None:
    try:
        file_size = files.size(data_path)
    except OSError as exc:
        raise ReaderError(f"cannot open WebDataset tar {data_path!r}: {exc.strerror or exc}") from None

    def line_of(member: int) -> int:
        return int(np.searchsorted(index.starts, member, side="right")) + 1

    ends = index.offsets + index.sizes
    for problem, mask in (
        ("is not on a 512-byte tar block", index.offsets % BLOCK != 0),
        ("has no room for its tar header", index.offsets < BLOCK),
        (f"runs past the end of {data_path} ({file_size} bytes)", ends > file_size),
    ):
        if mask.any():
            m = int(np.argmax(mask))
            raise ReaderError(
                f"{index_path} line {line_of(m)}: member at offset {int(index.offsets[m])} "
                f"({int(index.sizes[m])} bytes) {problem}: the index does not match {data_path}"
            )
    with files.open_binary(data_path) as f:
        for m in sorted({0, len(index.offsets) - 1}):
            offset, size = int(index.offsets[m]), int(index.sizes[m])
            f.seek(offset - BLOCK)
            try:
                info = tarfile.TarInfo.frombuf(f.read(BLOCK), "utf-8", "surrogateescape")
            except tarfile.HeaderError as exc:
                info, reason = None, f"no tar header before it ({exc})"
            if info is not None and info.size != size:
                reason = f"its tar header says {info.size} bytes"
            elif info is not None:
                continue
            raise ReaderError(
                f"{index_path} line {line_of(m)}: member at offset {offset} ({size} bytes): {reason}: "
                f"the index does not match {data_path}"
            )


def image_extension(data: bytes) -> str | None:
    """The usual WebDataset extension of encoded image bytes, by their magic number."""
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    for magic, ext in IMAGE_MAGIC:
        if data.startswith(magic):
            return ext
    return None


def sample_key(key: str) -> str:
    """A key usable in a tar shard: no dots or slashes (they would split it) and no whitespace
    (DALI's index could not hold it)."""
    return "".join("_" if c in "./" or c.isspace() else c for c in key)


class WebDatasetWriter:
    """Writes image samples as ``<key>.<image ext>`` and ``<key>.cls`` (the label as decimal
    text) into a POSIX tar, and DALI's index at ``path + ".idx"`` on close."""

    suffix = ".tar"

    def __init__(self, path: str) -> None:
        self.path = os.fspath(path)
        self.index_path = self.path + ".idx"
        self._tar = tarfile.open(self.path, "w", format=tarfile.PAX_FORMAT)
        self._last_key: str | None = None
        self._samples = 0

    def add(self, key: str, data: bytes, label: int) -> None:
        """Append one sample; ArgumentError for an unknown image format or a key that would
        merge with the previous sample."""
        name = sample_key(key)
        ext = image_extension(data)
        if ext is None:
            raise ArgumentError(f"WebDatasetWriter: {key!r}: not a JPEG, PNG, GIF, BMP, TIFF or WebP image")
        if not name or name == self._last_key:
            raise ArgumentError(
                f"WebDatasetWriter: key {key!r} becomes {name!r} in the tar, "
                f"which would {'be empty' if not name else 'merge it with the previous sample'}"
            )
        self._member(f"{name}.{ext}", bytes(data))
        self._member(f"{name}.cls", str(int(label)).encode("ascii"))
        self._last_key = name
        self._samples += 1

    def _member(self, name: str, data: bytes) -> None:
        info = tarfile.TarInfo(name)
        info.size, info.mode, info.mtime = len(data), 0o644, 0
        self._tar.addfile(info, io.BytesIO(data))

    def close(self) -> dict:
        """Finish the tar and write its index: ``{"samples", "bytes", "index"}``."""
        if not self._tar.closed:
            self._tar.close()
            if self._samples:
                write_index(self.path, self.index_path)
        index = self.index_path if self._samples else None
        return {"samples": self._samples, "bytes": os.path.getsize(self.path), "index": index}

    def __enter__(self) -> WebDatasetWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
