"""Caffe ``Datum`` and Caffe2 ``TensorProtos``: the messages stored as LMDB values by Caffe's
``convert_imageset`` and Caffe2's ``make_image_db``, and writers of such LMDBs.

Messages are parsed with :mod:`~raypipe.formats.protowire`, not the ``protobuf`` package
(``benchmarks/protobuf_parse.py``, to the readers' outputs): 1.46x faster on a Datum holding a
119 KB JPEG, 0.95-0.97x on the same as TensorProtos (under a microsecond behind), byte fields are
zero-copy slices of the value, and ``protobuf`` stays a test-only dependency. Encoders join each
message once, copying the image once."""

from __future__ import annotations

import enum
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from . import protowire as pw
from .lmdb_store import LmdbWriter


class DataType(enum.IntEnum):
    """caffe2.proto ``TensorProto.DataType``."""

    UNDEFINED = 0
    FLOAT = 1
    INT32 = 2
    BYTE = 3
    STRING = 4
    BOOL = 5
    UINT8 = 6
    INT8 = 7
    UINT16 = 8
    INT16 = 9
    INT64 = 10
    FLOAT16 = 12
    DOUBLE = 13


def _empty(dtype: type) -> np.ndarray:
    empty = np.empty(0, dtype)
    empty.flags.writeable = False
    return empty


_EMPTY = {dtype: _empty(dtype) for dtype in (np.float32, np.int32, np.float64, np.int64)}


@dataclass(slots=True)
class Datum:
    """A Caffe ``Datum``; ``data`` (absent: None) is a slice of the parsed buffer. ``label`` and
    ``encoded`` are None when absent (DALI tells an absent label, and absent ``encoded``
    means encoded)."""

    channels: int = 0
    height: int = 0
    width: int = 0
    data: memoryview | None = None
    label: int | None = None
    float_data: np.ndarray = field(default_factory=lambda: _EMPTY[np.float32])
    encoded: bool | None = None


@dataclass(slots=True)
class Tensor:
    """A Caffe2 ``TensorProto``; byte fields are slices of the parsed buffer."""

    data_type: int = DataType.FLOAT
    dims: list[int] = field(default_factory=list)
    float_data: np.ndarray = field(default_factory=lambda: _EMPTY[np.float32])
    int32_data: np.ndarray = field(default_factory=lambda: _EMPTY[np.int32])
    byte_data: memoryview | bytes | None = None
    string_data: list[memoryview | bytes] = field(default_factory=list)
    name: str | None = None
    double_data: np.ndarray = field(default_factory=lambda: _EMPTY[np.float64])
    int64_data: np.ndarray = field(default_factory=lambda: _EMPTY[np.int64])
    raw_data: memoryview | bytes | None = None


def parse_datum(buf: bytes | memoryview) -> Datum:
    """A ``Datum`` from its serialized bytes; raises :class:`~raypipe.formats.protowire.WireError`."""
    mv = memoryview(buf)
    d = Datum()
    floats: list[np.ndarray] = []
    for number, wire, a, b in pw.fields(mv):
        if number == 4:
            _expect(number, wire, pw.LEN)
            d.data = mv[a:b]
        elif number == 5:
            _expect(number, wire, pw.VARINT)
            d.label = pw.signed(a, 32)
        elif number in (1, 2, 3):
            _expect(number, wire, pw.VARINT)
            setattr(d, ("channels", "height", "width")[number - 1], pw.signed(a, 32))
        elif number == 7:
            _expect(number, wire, pw.VARINT)
            d.encoded = a != 0
        elif number == 6:
            floats.append(_floats(mv, wire, a, b, number))
    if floats:
        d.float_data = np.concatenate(floats)
    return d


def encode_datum(
    data: bytes | None = None,
    label: int | None = None,
    *,
    channels: int | None = None,
    height: int | None = None,
    width: int | None = None,
    encoded: bool | None = None,
    float_data: Sequence[float] | np.ndarray | None = None,
) -> bytes:
    """A serialized ``Datum`` with the fields given (None: absent), byte for byte as
    ``protobuf`` writes it."""
    out = [
        pw.field_varint(number, value)
        for number, value in ((1, channels), (2, height), (3, width))
        if value is not None
    ]
    if data is not None:
        out += _len_field(4, [data])
    if label is not None:
        out.append(pw.field_varint(5, label))
    if float_data is not None:
        tag = pw.encode_varint(6 << 3 | pw.FIXED32)
        out.extend(tag + v.tobytes() for v in np.asarray(float_data, "<f4").reshape(-1))
    if encoded is not None:
        out.append(pw.field_varint(7, int(bool(encoded))))
    return b"".join(out)


def parse_tensor_protos(buf: bytes | memoryview) -> list[Tensor]:
    """The tensors of a ``TensorProtos`` message; raises
    :class:`~raypipe.formats.protowire.WireError`."""
    mv = memoryview(buf)
    tensors = []
    for number, wire, a, b in pw.fields(mv):
        if number == 1:
            _expect(number, wire, pw.LEN)
            tensors.append(parse_tensor(mv, a, b))
    return tensors


def parse_tensor(mv: memoryview, start: int, end: int) -> Tensor:
    """One ``TensorProto`` in ``mv[start:end]``."""
    t = Tensor()
    ints: dict[int, list[int]] = {}
    reals: dict[int, list[np.ndarray]] = {}
    for number, wire, a, b in pw.fields(mv, start, end):
        if number == 6:
            _expect(number, wire, pw.LEN)
            t.string_data.append(mv[a:b])
        elif number == 2:
            _expect(number, wire, pw.VARINT)
            t.data_type = pw.signed(a, 32)
        elif number in (1, 4, 10):
            values = ints.setdefault(number, [])
            if wire == pw.LEN:
                values.extend(pw.packed_varints(mv, a, b))
            else:
                values.append(pw.signed(_expect(number, wire, pw.VARINT, a)))
        elif number in (3, 9):
            reals.setdefault(number, []).append((_floats if number == 3 else _doubles)(mv, wire, a, b, number))
        elif number in (5, 13):
            _expect(number, wire, pw.LEN)
            setattr(t, "byte_data" if number == 5 else "raw_data", mv[a:b])
        elif number == 7:
            _expect(number, wire, pw.LEN)
            t.name = bytes(mv[a:b]).decode("utf-8", "replace")
    if ints:
        t.dims = ints.get(1, t.dims)
        if 4 in ints:
            t.int32_data = _int32(ints[4])
        if 10 in ints:
            t.int64_data = np.array(ints[10], np.int64)
    for number, parts in reals.items():
        values = np.concatenate(parts) if len(parts) > 1 else parts[0]
        setattr(t, "float_data" if number == 3 else "double_data", values)
    return t


def encode_tensor_protos(tensors: Sequence[Tensor]) -> bytes:
    """A serialized ``TensorProtos`` holding ``tensors``, byte for byte as ``protobuf`` writes it
    (``data_type`` is always written, as Caffe2 sets it)."""
    out: list[bytes | memoryview] = []
    for t in tensors:
        out += _len_field(1, _tensor_fields(t))
    return b"".join(out)


def _tensor_fields(t: Tensor) -> list[bytes | memoryview]:
    out = [pw.field_varint(1, d) for d in t.dims]
    out.append(pw.field_varint(2, t.data_type))
    if len(t.float_data):
        out.append(pw.field_packed_floats(3, t.float_data))
    if len(t.int32_data):
        out.append(pw.field_packed_varints(4, [int(v) for v in np.asarray(t.int32_data, np.int32)]))
    if t.byte_data is not None:
        out += _len_field(5, [t.byte_data])
    for s in t.string_data:
        out += _len_field(6, [s])
    if t.name is not None:
        out.append(pw.field_bytes(7, t.name.encode()))
    if len(t.double_data):
        out.append(pw.field_bytes(9, np.asarray(t.double_data, "<f8").tobytes()))
    if len(t.int64_data):
        out.append(pw.field_packed_varints(10, [int(v) for v in np.asarray(t.int64_data, np.int64)]))
    if t.raw_data is not None:
        out += _len_field(13, [t.raw_data])
    return out


def _len_field(number: int, parts: list[bytes | memoryview]) -> list[bytes | memoryview]:
    """A length-delimited field as its key and length, then ``parts`` uncopied."""
    size = sum(memoryview(p).nbytes for p in parts)
    return [pw.encode_varint(number << 3 | pw.LEN) + pw.encode_varint(size), *parts]


def _expect(number: int, wire: int, expected: int, value: int = 0) -> int:
    if wire != expected:
        raise pw.WireError(f"field {number} has wire type {wire}, expected {expected}")
    return value


def _int32(values: list[int]) -> np.ndarray:
    """``int32`` values read as 64-bit varints (two's complement, as protobuf reads them)."""
    try:
        return np.array(values, np.int32)
    except OverflowError:
        return np.array(values, np.int64).astype(np.int32)


def _floats(mv: memoryview, wire: int, a: int, b: int, number: int) -> np.ndarray:
    """A packed chunk or one unpacked value of a ``repeated float`` field."""
    if wire == pw.LEN:
        return pw.packed_floats(mv, a, b)
    _expect(number, wire, pw.FIXED32)
    return np.array(struct.unpack("<f", struct.pack("<I", a)), np.float32)


def _doubles(mv: memoryview, wire: int, a: int, b: int, number: int) -> np.ndarray:
    """A packed chunk or one unpacked value of a ``repeated double`` field."""
    if wire == pw.LEN:
        if (b - a) % 8:
            raise pw.WireError(f"packed double field {number} of {b - a} bytes at byte {a}")
        return np.frombuffer(mv, "<f8", (b - a) // 8, a).astype(np.float64)
    _expect(number, wire, pw.FIXED64)
    return np.array(struct.unpack("<d", struct.pack("<Q", a)), np.float64)


class _ImageLmdbWriter:
    """An LMDB of one message per image, keyed by the caller's sample keys; ``append`` adds to
    the LMDB at ``path`` instead of replacing it (a resumed conversion)."""

    suffix = "_lmdb"

    def __init__(self, path: str, append: bool = False) -> None:
        self.path = path
        self._db = LmdbWriter(path, append=append)

    def encode(self, data: bytes, label: int) -> bytes:
        raise NotImplementedError

    def add(self, key: str, data: bytes, label: int) -> None:
        """Store one encoded image and its label under ``key`` (DALI reads in key order)."""
        self._db.put(key.encode(), self.encode(data, label))

    def close(self) -> dict:
        """Commit and close; there is no index file."""
        samples, nbytes = self._db.close()
        return {"samples": samples, "bytes": nbytes, "index": None}

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class CaffeWriter(_ImageLmdbWriter):
    """A Caffe LMDB as ``convert_imageset --encoded`` writes it: ``Datum(data, label, encoded)``."""

    def encode(self, data: bytes, label: int) -> bytes:
        return encode_datum(data, label, encoded=True)


class Caffe2Writer(_ImageLmdbWriter):
    """A Caffe2 LMDB as ``make_image_db`` writes it: a STRING tensor holding the image and an
    INT32 tensor holding the label."""

    def encode(self, data: bytes, label: int) -> bytes:
        image = Tensor(DataType.STRING, dims=[1], string_data=[data])
        return encode_tensor_protos([image, Tensor(DataType.INT32, dims=[1], int32_data=np.array([label], np.int32))])
