"""MXNet RecordIO files (``.rec``): record framing, the image header (IRHeader), the ``.idx``
index of MXNet's ``im2rec.py`` (which DALI's ``readers.mxnet`` reads), and a writer.

A record is one or more *parts*: ``uint32 magic 0xced7230a``, ``uint32 lrecord`` (upper 3 bits
the part's cflag, lower 29 its length), the payload, zero padding to a multiple of 4. MXNet's
writer cuts a record wherever the magic number lies at a 4-byte-aligned position of its data and
drops it there (cflag 1 first, 2 middle, 3 last part; 0 a record in one part); readers join the
parts with the magic number in between. An image record's payload is an IRHeader ``<IfQQ``
(flag, label, id, id2), then ``flag`` float32 labels when flag > 0, then the encoded image.
The index has one line ``key<TAB>offset`` per record; sizes follow from the sorted offsets."""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Callable, Sequence

import numpy as np

from ..errors import ReaderError
from ..storage import files

MAGIC = 0xCED7230A
MAGIC_BYTES = struct.pack("<I", MAGIC)
FULL, FIRST, MIDDLE, LAST = 0, 1, 2, 3
MAX_LENGTH = (1 << 29) - 1
IRHEADER = struct.Struct("<IfQQ")
_PART = struct.Struct("<II")
_MAGIC_ARRAY = np.frombuffer(MAGIC_BYTES, np.uint8)


def _aligned(n: int) -> int:
    return (n + 3) & ~3


def pack_record(data: bytes | memoryview | np.ndarray) -> bytes:
    """``data`` framed as one RecordIO record, cut into parts where the magic number lies at an
    aligned position (as MXNet's ``RecordIOWriter::WriteRecord`` does)."""
    view = memoryview(data).cast("B")
    n = len(view)
    if n > MAX_LENGTH:
        raise ValueError(f"RecordIO records hold less than 2**29 bytes, got {n}")
    words = np.frombuffer(view, "<u4", count=n // 4) if n >= 4 else np.zeros(0, np.uint32)
    out: list[bytes | memoryview] = []
    start = 0
    for i in (np.flatnonzero(words == MAGIC) * 4).tolist():
        out += [_PART.pack(MAGIC, ((FIRST if start == 0 else MIDDLE) << 29) | (i - start)), view[start:i]]
        start = i + 4
    out += [_PART.pack(MAGIC, ((LAST if start else FULL) << 29) | (n - start)), view[start:], bytes(-n % 4)]
    return b"".join(out)


def _walk(buf: bytes | mmap.mmap | np.ndarray, pos: int, end: int, base: int = 0) -> tuple[list[tuple[int, int]], int]:
    """The payload ranges ``(start, length)`` of the record whose first part is at ``pos`` in
    ``buf[:end]``, and where the record ends; ReaderError on bad framing, naming byte
    ``base + position``."""
    parts: list[tuple[int, int]] = []
    while True:
        if pos + 8 > end:
            raise ReaderError(
                f"truncated: the part header at byte {base + pos} needs 8 bytes, only {end - pos} are left"
            )
        magic, lrecord = _PART.unpack_from(buf, pos)
        if magic != MAGIC:
            raise ReaderError(f"bad magic number {magic:#010x} at byte {base + pos} (expected {MAGIC:#010x})")
        cflag, length = lrecord >> 29, lrecord & MAX_LENGTH
        if cflag not in ((MIDDLE, LAST) if parts else (FULL, FIRST)):
            where = "a record's continuation (cflag 2 or 3)" if parts else "the start of a record (cflag 0 or 1)"
            raise ReaderError(f"the part at byte {base + pos} has cflag {cflag} where {where} must be")
        stop = pos + 8 + _aligned(length)
        if stop > end:
            raise ReaderError(
                f"truncated: the part at byte {base + pos} needs {stop - pos} bytes, only {end - pos} are left"
            )
        parts.append((pos + 8, length))
        pos = stop
        if cflag in (FULL, LAST):
            return parts, pos


def record_payload(raw: np.ndarray, base: int = 0) -> np.ndarray:
    """The payload of the framed record that fills ``raw`` (uint8): a view for a record in one
    part, the parts joined with the magic number for a split one. ReaderError (naming byte
    ``base + position``) on bad framing or bytes after the record's last part."""
    parts, stop = _walk(raw, 0, len(raw), base)
    if stop != len(raw):
        raise ReaderError(f"{len(raw) - stop} bytes follow the record's last part (from byte {base + stop})")
    if len(parts) == 1:
        start, length = parts[0]
        return raw[start : start + length]
    pieces = [raw[parts[0][0] : parts[0][0] + parts[0][1]]]
    for start, length in parts[1:]:
        pieces += [_MAGIC_ARRAY, raw[start : start + length]]
    return np.concatenate(pieces)


def unpack_record(raw: bytes | memoryview | np.ndarray) -> bytes:
    """The data of the framed record ``raw`` (its parts joined); ReaderError naming the offset of
    bad framing."""
    return record_payload(np.frombuffer(raw, np.uint8)).tobytes()


def pack_irheader(
    flag: int, label: float | Sequence[float], id: int, id2: int, image_bytes: bytes | memoryview
) -> bytes:
    """An image record's payload (as MXNet's ``recordio.pack``): the IRHeader, then for
    ``flag`` > 0 the ``flag`` float32 values of ``label`` (the header's label field is 0),
    then ``image_bytes``."""
    if flag == 0:
        return IRHEADER.pack(0, float(label), id, id2) + bytes(image_bytes)
    labels = np.asarray(label, "<f4").ravel()
    if flag < 0 or labels.size != flag:
        raise ValueError(f"flag {flag} needs that many labels, got {labels.size}")
    return IRHEADER.pack(flag, 0.0, id, id2) + labels.tobytes() + bytes(image_bytes)


def unpack_irheader(payload: bytes | memoryview | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(labels, image)`` of an image record's payload: labels float32 of shape (1,) (the
    header's label) when flag is 0, else (flag,); image a uint8 view of the bytes after them."""
    view = payload if isinstance(payload, np.ndarray) else np.frombuffer(payload, np.uint8)
    if len(view) < IRHEADER.size:
        raise ReaderError(f"the record holds {len(view)} bytes, less than the {IRHEADER.size}-byte IRHeader")
    (flag,) = struct.unpack_from("<I", view, 0)
    if flag == 0:
        return np.frombuffer(view, "<f4", count=1, offset=4).astype(np.float32), view[IRHEADER.size :]
    end = IRHEADER.size + 4 * flag
    if end > len(view):
        raise ReaderError(
            f"the IRHeader announces {flag} labels ({4 * flag} bytes) but {len(view) - IRHEADER.size} bytes follow it"
        )
    return np.frombuffer(view, "<f4", count=flag, offset=IRHEADER.size).astype(np.float32), view[end:]


def scan(path: str) -> tuple[np.ndarray, np.ndarray]:
    """The ``(offsets, sizes)`` of every record in the RecordIO file at ``path`` (a record's size
    counts all its parts with their padding), every part's header checked; ReaderError naming the
    file, record and byte on bad framing or a file that does not end after its last record."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
    except OSError as exc:
        raise ReaderError(f"cannot open {path!r}: {exc.strerror or exc}") from None
    offsets, sizes = [], []
    pos = 0
    try:
        while pos < size:
            try:
                _, stop = _walk(buf, pos, size)
            except ReaderError as exc:
                raise ReaderError(f"{path} record {len(offsets)} (offset {pos}): {exc}") from None
            offsets.append(pos)
            sizes.append(stop - pos)
            pos = stop
    finally:
        if size:
            buf.close()
    return np.asarray(offsets, np.int64), np.asarray(sizes, np.int64)


def format_index(offsets: Sequence[int] | np.ndarray) -> str:
    """MXNet's index text: one line ``key<TAB>offset`` per record, keys counting from 0."""
    return "".join(f"{k}\t{o}\n" for k, o in enumerate(np.asarray(offsets).tolist()))


def _write_text(path: str, text: str) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="ascii") as f:
        f.write(text)
    os.replace(tmp, path)


def index_path_for(data_path: str) -> str:
    """Where MXNet's tools put the index of ``X.rec``: ``X.idx``."""
    return os.path.splitext(os.fspath(data_path))[0] + ".idx"


def write_index(data_path: str, index_path: str) -> int:
    """Scan the RecordIO file at ``data_path`` and write MXNet's index at ``index_path`` (keys
    0, 1, ... in file order); returns the record count."""
    offsets, _ = scan(data_path)
    _write_text(index_path, format_index(offsets))
    return len(offsets)


def _parse_index(index_path: str, text: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(keys, offsets, line numbers from 0)`` of the index text, every non-blank line checked
    to hold two non-negative integers ``key offset``."""
    b = np.frombuffer(text, np.uint8)
    space = (b == 32) | (b == 9) | (b == 13) | (b == 10)
    newline = b == 10
    line_of = np.cumsum(newline) - newline
    lines = text.split(b"\n")

    def fail(line: int, why: str) -> ReaderError:
        return ReaderError(f"index file {index_path} line {line + 1}: {why}, got {lines[line].decode('latin-1')!r}")

    bad = np.flatnonzero(~space & ((b < 48) | (b > 57)))
    if len(bad):
        raise fail(int(line_of[bad[0]]), "expected two non-negative integers 'key<TAB>offset'")
    starts = ~space & np.concatenate(([True], space[:-1]))
    per_line = np.bincount(line_of[starts], minlength=len(lines))
    bad = np.flatnonzero((per_line != 0) & (per_line != 2))
    if len(bad):
        raise fail(int(bad[0]), "expected two numbers 'key<TAB>offset'")
    record_lines = np.flatnonzero(per_line == 2)
    tokens = np.array(text.split(), dtype=bytes) if len(record_lines) else np.zeros(0, "S1")
    if tokens.dtype.itemsize > 18:
        long = next(i for i, t in enumerate(tokens.tolist()) if len(t) > 18)
        raise fail(int(record_lines[long // 2]), "number too large")
    values = tokens.astype(np.int64).reshape(-1, 2)
    return values[:, 0].copy(), values[:, 1].copy(), record_lines


def read_index(index_path: str, data_path: str) -> tuple[np.ndarray, np.ndarray]:
    """The ``(offsets, sizes)`` of the records of ``data_path`` per its MXNet index, checked
    against the data (see :func:`read_shared_index`)."""
    return read_shared_index(index_path, [data_path])[0]


def read_shared_index(index_path: str, data_paths: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each data file's ``(offsets, sizes)`` from one MXNet index whose offsets count over the
    files laid end to end (DALI's form for several ``.rec`` files; for one file, its own index).

    As DALI does, the records are taken in offset order (the keys are not used), a repeated
    offset is one record, and a record runs to the next offset or to the end of its file. Checked:
    the offsets lie within the data, every file starts with a listed record, and the first and
    last record of each file are whole records ending where the next begins (the last one at the
    end of the file). ReaderError names the index, its line and the data file."""
    hint = f"`raypipe index mxnet {data_paths[0]}`" if len(data_paths) == 1 else "`raypipe index mxnet FILE.rec`"
    try:
        with files.open_binary(index_path) as f:
            text = f.read()
    except FileNotFoundError:
        raise ReaderError(f"index file {index_path!r} does not exist: create it with {hint}") from None
    except OSError as exc:
        raise ReaderError(f"cannot read index file {index_path!r}: {exc.strerror or exc}") from None
    keys, offsets, lines = _parse_index(index_path, text)
    if len(offsets) == 0:
        raise ReaderError(f"index file {index_path} lists no records (rebuild it with {hint})")
    file_sizes = []
    for path in data_paths:
        try:
            file_sizes.append(files.size(path))
        except OSError as exc:
            raise ReaderError(f"cannot open {path!r}: {exc.strerror or exc}") from None
    starts = np.concatenate(([0], np.cumsum(file_sizes, dtype=np.int64)))
    order = np.argsort(offsets, kind="stable")
    offsets, keys, lines = offsets[order], keys[order], lines[order]
    first = np.concatenate(([True], offsets[1:] != offsets[:-1]))
    offsets, keys, lines = offsets[first], keys[first], lines[first]

    def fail(i: int, why: str) -> ReaderError:
        return ReaderError(
            f"index file {index_path} line {int(lines[i]) + 1} (key {int(keys[i])}, offset {int(offsets[i])}) "
            f"does not match the data: {why} (rebuild it with {hint})"
        )

    if int(offsets[-1]) >= int(starts[-1]):
        names = " + ".join(f"{p} ({s} bytes)" for p, s in zip(data_paths, file_sizes))
        raise fail(len(offsets) - 1, f"the offset lies beyond the end of {names}")
    sizes = np.diff(np.append(offsets, starts[-1]))
    file_of = np.searchsorted(starts[1:], offsets, side="right")
    bounds = np.searchsorted(file_of, np.arange(len(data_paths) + 1))
    result = []
    for f, path in enumerate(data_paths):
        lo, hi = int(bounds[f]), int(bounds[f + 1])
        if lo == hi:
            raise ReaderError(f"index file {index_path} lists no record of {path} (rebuild it with {hint})")
        if int(offsets[lo]) != int(starts[f]):
            raise fail(lo, f"the first record listed in {path} starts at byte {int(offsets[lo] - starts[f])}, not 0")
        _check_records(path, offsets[lo:hi] - starts[f], sizes[lo:hi], lambda i, why, lo=lo: fail(lo + i, why))
        result.append((offsets[lo:hi] - starts[f], sizes[lo:hi].copy()))
    return result


def _check_records(path: str, offsets: np.ndarray, sizes: np.ndarray, fail: Callable[[int, str], ReaderError]) -> None:
    """Read the first and last record of ``path`` whole and check that each fills its index
    entry exactly."""
    try:
        f = files.open_binary(path)
    except OSError as exc:
        raise ReaderError(f"cannot open {path!r}: {exc.strerror or exc}") from None
    with f:
        for i in sorted({0, len(offsets) - 1}):
            offset, size = int(offsets[i]), int(sizes[i])
            raw = np.frombuffer(files.read_at(f, size, offset), np.uint8)
            try:
                record_payload(raw, base=offset)
            except ReaderError as exc:
                raise fail(i, f"{path} record {i} (offset {offset}, {size} bytes to the next record): {exc}") from None


class RecordIOWriter:
    """Writes image samples as MXNet image records (IRHeader flag 0, the label as a float, id
    the sample's position, id2 0) and MXNet's index ``X.idx`` next to ``X.rec`` on close. The
    sample names have no place in the format and are not stored."""

    suffix = ".rec"

    def __init__(self, path: str) -> None:
        self.path = os.fspath(path)
        self.index_path = index_path_for(self.path)
        self._file = open(self.path, "wb")
        self._offsets: list[int] = []
        self._written = 0
        self._result: dict | None = None

    def add(self, key: str, data: bytes, label: int) -> None:
        """Append one sample: ``data`` the encoded image, ``label`` its class."""
        record = pack_record(pack_irheader(0, float(label), len(self._offsets), 0, data))
        self._file.write(record)
        self._offsets.append(self._written)
        self._written += len(record)

    def close(self) -> dict:
        """Flush the data file and write its index; ``{"samples", "bytes", "index"}``."""
        if self._result is None:
            self._file.close()
            _write_text(self.index_path, format_index(self._offsets))
            self._result = {"samples": len(self._offsets), "bytes": self._written, "index": self.index_path}
        return self._result

    def __enter__(self) -> RecordIOWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
