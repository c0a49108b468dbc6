"""A small protocol-buffers wire-format reader and writer.

Enough for the fixed messages the readers meet (Caffe ``Datum``, Caffe2 ``TensorProtos``,
TensorFlow ``Example``): fields are walked once and byte fields come back as slices of the
record, without a schema compiler and without copying the image. Measured against the
``protobuf`` package by ``benchmarks/protobuf_parse.py`` (results in ``benchmarks/RESULTS.md``)."""

from __future__ import annotations

import struct
from collections.abc import Iterator

import numpy as np

VARINT, FIXED64, LEN, FIXED32 = 0, 1, 2, 5


class WireError(ValueError):
    """The bytes are not a well-formed protocol-buffers message."""


def read_varint(buf: bytes | memoryview, pos: int, end: int) -> tuple[int, int]:
    """The varint at ``pos`` and the position after it."""
    result = shift = 0
    while True:
        if pos >= end:
            raise WireError(f"truncated varint at byte {pos}")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise WireError(f"varint longer than 10 bytes at byte {pos}")


def fields(buf: bytes | memoryview, start: int = 0, end: int | None = None) -> Iterator[tuple[int, int, int, int]]:
    """``(field number, wire type, a, b)`` for each field of the message in ``buf[start:end]``:
    ``a`` is the value of a varint or fixed field (``b`` unused), or ``[a, b)`` the bytes of a
    length-delimited one."""
    end = len(buf) if end is None else end
    pos = start
    while pos < end:
        key = buf[pos]
        if key < 0x80:  # one-byte varints (field numbers below 16, small values) skip the call
            pos += 1
        else:
            key, pos = read_varint(buf, pos, end)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise WireError(f"field number 0 at byte {pos}")
        if wire == VARINT:
            if pos < end and buf[pos] < 0x80:
                value = buf[pos]
                pos += 1
            else:
                value, pos = read_varint(buf, pos, end)
            yield number, wire, value, 0
        elif wire == LEN:
            if pos < end and buf[pos] < 0x80:
                length = buf[pos]
                pos += 1
            else:
                length, pos = read_varint(buf, pos, end)
            if pos + length > end:
                raise WireError(f"field {number} needs {length} bytes at byte {pos}, {end - pos} left")
            yield number, wire, pos, pos + length
            pos += length
        elif wire == FIXED64:
            if pos + 8 > end:
                raise WireError(f"truncated fixed64 field {number} at byte {pos}")
            yield number, wire, struct.unpack_from("<Q", buf, pos)[0], 0
            pos += 8
        elif wire == FIXED32:
            if pos + 4 > end:
                raise WireError(f"truncated fixed32 field {number} at byte {pos}")
            yield number, wire, struct.unpack_from("<I", buf, pos)[0], 0
            pos += 4
        else:
            raise WireError(f"unsupported wire type {wire} for field {number} at byte {pos}")


def signed(value: int, bits: int = 64) -> int:
    """A varint read as a two's-complement ``int32``/``int64``."""
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >> 63 else value if bits == 64 else _int32(value)


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >> 31 else value


def packed_varints(buf: bytes | memoryview, start: int, end: int) -> list[int]:
    """The signed varints of a packed repeated field."""
    out = []
    pos = start
    while pos < end:
        v, pos = read_varint(buf, pos, end)
        out.append(signed(v))
    return out


def packed_floats(buf: bytes | memoryview, start: int, end: int) -> np.ndarray:
    """A packed repeated ``float`` field as float32."""
    if (end - start) % 4:
        raise WireError(f"packed float field of {end - start} bytes at byte {start}")
    return np.frombuffer(buf, "<f4", (end - start) // 4, start).astype(np.float32)


def encode_varint(value: int) -> bytes:
    """``value`` as a varint (negative numbers as 10-byte two's complement, as protobuf does)."""
    value &= (1 << 64) - 1
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def field_varint(number: int, value: int) -> bytes:
    return encode_varint(number << 3 | VARINT) + encode_varint(value)


def field_bytes(number: int, value: bytes | memoryview) -> bytes:
    return encode_varint(number << 3 | LEN) + encode_varint(len(value)) + bytes(value)


def field_packed_varints(number: int, values: list[int]) -> bytes:
    return field_bytes(number, b"".join(encode_varint(v) for v in values))


def field_packed_floats(number: int, values) -> bytes:
    return field_bytes(number, np.asarray(values, "<f4").tobytes())
