"""MXNet RecordIO framing, IRHeader, index and writer on real files; bad data names the file,
record and byte."""

from __future__ import annotations

import os
import struct

import numpy as np
import pytest

from raypipe.errors import ReaderError
from raypipe.formats import recordio as rio

MAGIC = struct.pack("<I", 0xCED7230A)


def part(cflag: int, payload: bytes) -> bytes:
    """One part built by hand: magic, lrecord, payload, zero padding."""
    return MAGIC + struct.pack("<I", (cflag << 29) | len(payload)) + payload + bytes(-len(payload) % 4)


def write_rec(path, records: list[bytes]) -> list[int]:
    """Frame ``records`` with pack_record into ``path``; their offsets."""
    offsets, pos = [], 0
    with open(path, "wb") as f:
        for r in records:
            framed = rio.pack_record(r)
            offsets.append(pos)
            pos += f.write(framed)
    return offsets


def test_pack_record_cuts_at_aligned_magic_only():
    assert rio.pack_record(b"abcde") == part(0, b"abcde")
    data = b"abcd" + MAGIC + b"ef" + MAGIC + b"gh"  # the second magic is at byte 10: not aligned
    assert rio.pack_record(data) == part(1, b"abcd") + part(3, b"ef" + MAGIC + b"gh")
    assert rio.pack_record(MAGIC + MAGIC + b"xyz") == part(1, b"") + part(2, b"") + part(3, b"xyz")
    assert rio.pack_record(b"1234" + MAGIC) == part(1, b"1234") + part(3, b"")


@pytest.mark.parametrize(
    "data", [b"", b"a", b"abcd", MAGIC, MAGIC * 3, b"ab\0\0" + MAGIC + b"xy", b"12" + MAGIC + b"34", os.urandom(999)]
)
def test_record_round_trip(data):
    framed = rio.pack_record(data)
    assert len(framed) % 4 == 0
    assert rio.unpack_record(framed) == data


def test_unpack_record_names_the_bad_offset():
    framed = part(1, b"abcd") + b"XXXX" + struct.pack("<I", (3 << 29) | 2) + b"ef\0\0"
    with pytest.raises(ReaderError, match=r"bad magic number 0x58585858 at byte 12"):
        rio.unpack_record(framed)
    with pytest.raises(ReaderError, match=r"the part at byte 12 has cflag 0 where a record's continuation"):
        rio.unpack_record(part(1, b"abcd") + part(0, b"ef"))
    with pytest.raises(ReaderError, match=r"4 bytes follow the record's last part \(from byte 12\)"):
        rio.unpack_record(part(0, b"abcd") + b"\0\0\0\0")


def test_irheader_single_and_multi_label():
    payload = rio.pack_irheader(0, 7.0, 3, 0, b"img")
    assert payload == struct.pack("<IfQQ", 0, 7.0, 3, 0) + b"img"
    labels, image = rio.unpack_irheader(payload)
    assert labels.dtype == np.float32 and labels.tolist() == [7.0] and image.tobytes() == b"img"
    payload = rio.pack_irheader(3, [1.5, -2.0, 4.25], 9, 1, b"jpeg")
    assert payload == struct.pack("<IfQQ3f", 3, 0.0, 9, 1, 1.5, -2.0, 4.25) + b"jpeg"
    labels, image = rio.unpack_irheader(payload)
    assert labels.dtype == np.float32 and labels.tolist() == [1.5, -2.0, 4.25] and image.tobytes() == b"jpeg"
    with pytest.raises(ValueError, match="flag 3 needs that many labels, got 2"):
        rio.pack_irheader(3, [1.0, 2.0], 0, 0, b"")
    with pytest.raises(ReaderError, match="announces 5 labels"):
        rio.unpack_irheader(struct.pack("<IfQQ", 5, 0.0, 0, 0) + b"abcd")
    with pytest.raises(ReaderError, match="less than the 24-byte IRHeader"):
        rio.unpack_irheader(b"short")


def test_writer_round_trip_and_mxnet_index(jpeg_files, tmp_path):
    path = str(tmp_path / "train.rec")
    with rio.RecordIOWriter(path) as w:
        for i, p in enumerate(jpeg_files):
            w.add(f"img_{i}", open(p, "rb").read(), i // 6)
    result = w.close()
    assert result == {"samples": 24, "bytes": os.path.getsize(path), "index": str(tmp_path / "train.idx")}
    offsets, sizes = rio.scan(path)
    assert (
        offsets[0] == 0
        and (offsets[1:] == offsets[:-1] + sizes[:-1]).all()
        and offsets[-1] + sizes[-1] == result["bytes"]
    )
    index_text = open(result["index"]).read()
    assert index_text == "".join(f"{k}\t{o}\n" for k, o in enumerate(offsets.tolist()))
    assert rio.write_index(path, str(tmp_path / "again.idx")) == 24
    assert open(tmp_path / "again.idx").read() == index_text
    got_offsets, got_sizes = rio.read_index(result["index"], path)
    assert got_offsets.tolist() == offsets.tolist() and got_sizes.tolist() == sizes.tolist()
    with open(path, "rb") as f:
        raw = f.read()
    for i, (o, s) in enumerate(zip(offsets.tolist(), sizes.tolist())):
        payload = rio.unpack_record(raw[o : o + s])
        assert struct.unpack_from("<IfQQ", payload) == (0, float(i // 6), i, 0)
        labels, image = rio.unpack_irheader(payload)
        assert labels.tolist() == [i // 6] and image.tobytes() == open(jpeg_files[i], "rb").read()


def test_scan_bad_magic_names_file_record_and_byte(tmp_path):
    path = tmp_path / "bad.rec"
    offsets = write_rec(path, [b"a" * 10, b"b" * 20, b"c" * 30])
    data = bytearray(path.read_bytes())
    data[offsets[2] : offsets[2] + 4] = b"\0\0\0\0"
    path.write_bytes(bytes(data))
    with pytest.raises(ReaderError, match=rf"bad.rec record 2 \(offset {offsets[2]}\): bad magic number 0x00000000"):
        rio.scan(str(path))


def test_scan_truncated_file(tmp_path):
    path = tmp_path / "cut.rec"
    write_rec(path, [b"a" * 10, b"b" * 20])
    path.write_bytes(path.read_bytes()[:-5])
    with pytest.raises(ReaderError, match=r"cut.rec record 1 \(offset 20\): truncated: the part at byte 20 needs 28"):
        rio.scan(str(path))
    path.write_bytes(part(0, b"a" * 10)[:-1] + b"")
    with pytest.raises(ReaderError, match=r"record 0 \(offset 0\): truncated"):
        rio.write_index(str(path), str(tmp_path / "cut.idx"))
    assert not os.path.exists(tmp_path / "cut.idx")


def test_index_lines_are_checked(tmp_path):
    path = tmp_path / "d.rec"
    write_rec(path, [b"a" * 10, b"b" * 20])
    index = tmp_path / "d.idx"
    index.write_text("0\t0\n1\tx20\n")
    with pytest.raises(ReaderError, match=r"d.idx line 2: expected two non-negative integers 'key<TAB>offset'"):
        rio.read_index(str(index), str(path))
    index.write_text("0\t0\n\n1\n")
    with pytest.raises(ReaderError, match=r"d.idx line 3: expected two numbers"):
        rio.read_index(str(index), str(path))
    index.write_text("")
    with pytest.raises(ReaderError, match=r"d.idx lists no records"):
        rio.read_index(str(index), str(path))
    with pytest.raises(ReaderError, match=r"index file '.*nothere.idx' does not exist: create it with `raypipe index"):
        rio.read_index(str(tmp_path / "nothere.idx"), str(path))


def test_index_that_does_not_match_the_data(tmp_path):
    path = tmp_path / "d.rec"
    offsets = write_rec(path, [b"a" * 10, b"b" * 20, b"c" * 30])
    index = tmp_path / "d.idx"
    index.write_text(f"0\t0\n1\t{offsets[1]}\n2\t{offsets[2] + 8}\n")  # into the middle of the last record
    with pytest.raises(
        ReaderError, match=rf"d.idx line 3 \(key 2, offset {offsets[2] + 8}\) does not match.*bad magic"
    ):
        rio.read_index(str(index), str(path))
    index.write_text(f"1\t{offsets[1]}\n2\t{offsets[2]}\n")
    with pytest.raises(
        ReaderError, match=rf"d.idx line 1 .* the first record listed in .*d.rec starts at byte {offsets[1]}"
    ):
        rio.read_index(str(index), str(path))
    index.write_text(f"0\t0\n1\t{offsets[1]}\n2\t{offsets[2]}\n3\t999\n")
    with pytest.raises(
        ReaderError, match=r"d.idx line 4 \(key 3, offset 999\).*beyond the end of .*d.rec \(88 bytes\)"
    ):
        rio.read_index(str(index), str(path))
    path.write_bytes(path.read_bytes() + b"\0" * 8)
    index.write_text(f"0\t0\n1\t{offsets[1]}\n2\t{offsets[2]}\n")
    with pytest.raises(ReaderError, match=r"line 3 .* 8 bytes follow the record's last part \(from byte 88\)"):
        rio.read_index(str(index), str(path))


def test_index_order_and_repeats_follow_dali(tmp_path):
    path = tmp_path / "d.rec"
    offsets = write_rec(path, [b"a" * 10, b"b" * 20, b"c" * 30])
    index = tmp_path / "d.idx"
    index.write_text(f"7 {offsets[2]}\n3 0\n5 {offsets[1]}\n9 {offsets[1]}\n")
    got, sizes = rio.read_index(str(index), str(path))
    assert got.tolist() == offsets and sizes.tolist() == [20, 28, 40]


def test_shared_index_over_several_files(tmp_path):
    a, b = tmp_path / "a.rec", tmp_path / "b.rec"
    offsets_a = write_rec(a, [b"a" * 10, b"b" * 20])
    offsets_b = write_rec(b, [b"c" * 30])
    size_a = os.path.getsize(a)
    index = tmp_path / "ab.idx"
    index.write_text("".join(f"{k}\t{o}\n" for k, o in enumerate(offsets_a + [size_a + o for o in offsets_b])))
    (oa, sa), (ob, sb) = rio.read_shared_index(str(index), [str(a), str(b)])
    assert oa.tolist() == offsets_a and sa.tolist() == [20, 28] and ob.tolist() == [0] and sb.tolist() == [40]
    index.write_text("".join(f"{k}\t{o}\n" for k, o in enumerate(offsets_a)))
    with pytest.raises(ReaderError, match=r"ab.idx lists no record of .*b.rec"):
        rio.read_shared_index(str(index), [str(a), str(b)])


def test_magic_inside_the_irheader_is_joined_before_parsing():
    payload = rio.pack_irheader(0, 1.0, 0xCED7230A, 0, b"image")  # the id's low word is the magic number
    framed = rio.pack_record(payload)
    assert framed.startswith(part(1, payload[:8]))
    labels, image = rio.unpack_irheader(rio.unpack_record(framed))
    assert labels.tolist() == [1.0] and image.tobytes() == b"image"
