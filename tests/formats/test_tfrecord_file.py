"""TFRecord framing, DALI's index files and tf.train.Example encoding, against known bytes and
against messages the ``protobuf`` package writes and reads."""

from __future__ import annotations

import os

import numpy as np
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from raypipe.errors import ReaderError
from raypipe.formats.tfrecord_file import (
    TFRecordWriter,
    encode_example,
    frame,
    masked_crc,
    parse_example,
    read_index,
    scan,
    unframe,
    write_index,
)

PAYLOADS = [b"", b"x", b"hello tfrecord", np.random.default_rng(0).bytes(100_000)]


def write_records(path, payloads=PAYLOADS) -> str:
    with open(path, "wb") as f:
        for p in payloads:
            f.write(frame(p))
    return str(path)


def test_framing_matches_known_bytes():
    # An empty record as TensorFlow writes it, and a masked CRC from another TFRecord implementation.
    assert frame(b"") == bytes.fromhex("000000000000000029039807d8ea82a2")
    assert masked_crc(b"1234567890asdfghjkl") == 4134599430


@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: f"{len(p)}B")
def test_frame_unframe_round_trip(payload):
    raw = frame(payload)
    assert len(raw) == len(payload) + 16
    assert bytes(unframe(raw)) == payload
    assert bytes(unframe(np.frombuffer(raw, np.uint8))) == payload


def test_unframe_says_which_check_failed():
    raw = bytearray(frame(b"some record data"))
    bad_data = bytearray(raw)
    bad_data[14] ^= 1
    with pytest.raises(ReaderError, match="data CRC mismatch"):
        unframe(bytes(bad_data))
    assert bytes(unframe(bytes(bad_data), check_crc=False)) == bytes(bad_data[12:-4])
    bad_length = bytearray(raw)
    bad_length[0] ^= 1
    with pytest.raises(ReaderError, match="length CRC mismatch"):
        unframe(bytes(bad_length))
    with pytest.raises(ReaderError, match="bad length: the length field says 16 data bytes, the record holds 15"):
        unframe(bytes(raw[:-1]))
    with pytest.raises(ReaderError, match="shorter than the 16-byte"):
        unframe(b"\0" * 10)


def test_scan_and_index_round_trip(tmp_path):
    data = write_records(tmp_path / "a.tfrecord")
    sizes = [len(p) + 16 for p in PAYLOADS]
    offsets, found_sizes = scan(data)
    assert found_sizes.tolist() == sizes and offsets.tolist() == np.cumsum([0, *sizes[:-1]]).tolist()
    assert write_index(data, str(tmp_path / "a.idx")) == len(PAYLOADS)
    lines = (tmp_path / "a.idx").read_text().splitlines()
    assert lines == [f"{o} {s}" for o, s in zip(offsets.tolist(), sizes)]
    read_offsets, read_sizes = read_index(str(tmp_path / "a.idx"), data)
    assert read_offsets.tolist() == offsets.tolist() and read_sizes.tolist() == sizes
    with open(data, "rb") as f:
        for o, s, p in zip(offsets.tolist(), sizes, PAYLOADS):
            f.seek(o)
            assert bytes(unframe(f.read(s))) == p


def test_empty_file_has_an_empty_index(tmp_path):
    data = write_records(tmp_path / "e.tfrecord", [])
    assert write_index(data, str(tmp_path / "e.idx")) == 0
    assert read_index(str(tmp_path / "e.idx"), data)[0].tolist() == []


def test_scan_rejects_a_truncated_file_or_a_bad_header(tmp_path):
    data = write_records(tmp_path / "a.tfrecord")
    size = os.path.getsize(data)
    with open(data, "r+b") as f:
        f.truncate(size - 5)
    with pytest.raises(
        ReaderError, match=r"a\.tfrecord record 3 \(offset 63\): truncated file: the record needs 100016"
    ):
        scan(data)
    with open(data, "r+b") as f:
        f.truncate(63 + 7)
    with pytest.raises(ReaderError, match="record 3 .*: truncated file: 7 of the 12 header bytes left"):
        scan(data)
    data = write_records(tmp_path / "b.tfrecord")
    with open(data, "r+b") as f:
        f.seek(16 + 8)  # the length CRC of record 1
        f.write(b"\0\0\0\0")
    with pytest.raises(ReaderError, match=r"b\.tfrecord record 1 \(offset 16\): length CRC mismatch"):
        write_index(data, str(tmp_path / "b.idx"))
    assert not (tmp_path / "b.idx").exists()


@pytest.mark.parametrize(
    "text, error",
    [
        ("0 16\n16 x7\n", r"line 2: expected two non-negative integers"),
        ("0 16\n-1 17\n", r"line 2: expected two non-negative integers"),
        ("0 16\n\n16 17 1\n", r"line 3: expected two numbers 'offset size'"),
        ("0 16\n16\n", r"line 2: expected two numbers"),
        ("0 16\n16 12345678901234567890\n", r"line 2: number too large"),
        ("0 16\n10 17\n33 30\n63 100016\n", r"line 2 \(record 1\) does not match .*offset 10 is before the end"),
        ("0 16\n16 17\n33 30\n", r"line 3 \(record 2\) does not match .*ends at byte 63 but the data file has 100079"),
        ("0 16\n16 17\n33 30\n63 100020\n", r"line 4 \(record 3\) does not match .*ends at byte 100083"),
        ("0 8\n", r"line 1 \(record 0\) does not match .*size 8 is below the 16-byte framing"),
        ("", r"lists no records but .* holds 100079 bytes"),
        ("0 33\n33 30\n63 100016\n", r"line 1 \(record 0\) does not match .*size 33 but the record header says 16"),
        ("0 16\n16 17\n33 20\n53 100026\n", r"line 4 \(record 3\) does not match .*length CRC mismatch"),
    ],
)
def test_read_index_rejects_an_index_that_does_not_match(tmp_path, text, error):
    data = write_records(tmp_path / "a.tfrecord")
    (tmp_path / "a.idx").write_text(text)
    with pytest.raises(ReaderError, match=f"index file .*a.idx {error}"):
        read_index(str(tmp_path / "a.idx"), data)


def test_read_index_accepts_blank_lines_and_names_a_missing_index(tmp_path):
    data = write_records(tmp_path / "a.tfrecord")
    (tmp_path / "a.idx").write_text("\n0 16\n 16  17 \r\n\n33 30\n63 100016")
    assert read_index(str(tmp_path / "a.idx"), data)[1].tolist() == [16, 17, 30, 100016]
    with pytest.raises(ReaderError, match=r"nowhere.idx' .* does not exist: create it with `raypipe index tfrecord"):
        read_index(str(tmp_path / "nowhere.idx"), data)


def example_class(packed: bool):
    """tf.train.Example built from a descriptor (TensorFlow is not needed); ``packed=False``
    makes protobuf write repeated numbers one field each, as old writers did."""
    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="example.proto", package="tf", syntax="proto3")

    def add(msg, name, number, type_, label=F.LABEL_OPTIONAL, **kw):
        return msg.field.add(name=name, number=number, type=type_, label=label, **kw)

    add(fdp.message_type.add(name="BytesList"), "value", 1, F.TYPE_BYTES, F.LABEL_REPEATED)
    add(fdp.message_type.add(name="FloatList"), "value", 1, F.TYPE_FLOAT, F.LABEL_REPEATED).options.packed = packed
    add(fdp.message_type.add(name="Int64List"), "value", 1, F.TYPE_INT64, F.LABEL_REPEATED).options.packed = packed
    feature = fdp.message_type.add(name="Feature")
    feature.oneof_decl.add(name="kind")
    for number, (name, kind) in enumerate(
        (("bytes_list", "Bytes"), ("float_list", "Float"), ("int64_list", "Int64")), 1
    ):
        add(feature, name, number, F.TYPE_MESSAGE, type_name=f".tf.{kind}List", oneof_index=0)
    features = fdp.message_type.add(name="Features")
    entry = features.nested_type.add(name="FeatureEntry")
    entry.options.map_entry = True
    add(entry, "key", 1, F.TYPE_STRING)
    add(entry, "value", 2, F.TYPE_MESSAGE, type_name=".tf.Feature")
    add(features, "feature", 1, F.TYPE_MESSAGE, F.LABEL_REPEATED, type_name=".tf.Features.FeatureEntry")
    add(fdp.message_type.add(name="Example"), "features", 1, F.TYPE_MESSAGE, type_name=".tf.Features")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tf.Example"))


@pytest.mark.parametrize("packed", [True, False], ids=["packed", "unpacked"])
def test_parse_example_reads_what_protobuf_writes(packed):
    example = example_class(packed)()
    feature = example.features.feature
    feature["image/encoded"].bytes_list.value.extend([b"\xff\xd8jpeg", b""])
    feature["label"].int64_list.value.extend([3, -2, 2**40, -(2**63)])
    feature["bbox"].float_list.value.extend([0.5, -1.25, 3e38])
    feature["empty_ints"].int64_list.SetInParent()
    feature["unset"].SetInParent()
    buf = example.SerializeToString()
    assert (b"\x08\x03" in buf) is not packed  # unpacked: a tag before every value
    parsed = parse_example(buf)
    assert set(parsed) == {"image/encoded", "label", "bbox", "empty_ints", "unset"}
    kind, values = parsed["image/encoded"]
    assert kind == "bytes" and [bytes(v) for v in values] == [b"\xff\xd8jpeg", b""]
    kind, values = parsed["label"]
    assert kind == "int64" and values.dtype == np.int64 and values.tolist() == [3, -2, 2**40, -(2**63)]
    kind, values = parsed["bbox"]
    assert kind == "float" and values.dtype == np.float32 and values.tolist() == np.float32([0.5, -1.25, 3e38]).tolist()
    assert parsed["empty_ints"][0] == "int64" and parsed["empty_ints"][1].tolist() == []
    assert parsed["unset"] == (None, [])


def test_parse_example_parses_only_the_features_asked_for():
    example = example_class(True)()
    feature = example.features.feature
    feature["image/encoded"].bytes_list.value.append(b"\xff\xd8jpeg")
    feature["label"].int64_list.value.append(7)
    feature["missing_value"].SetInParent()
    buf = example.SerializeToString()
    whole = parse_example(buf)
    asked = parse_example(buf, {"label", "missing_value", "absent"})
    assert set(asked) == {"label", "missing_value"}
    assert asked["label"][1].tolist() == whole["label"][1].tolist() == [7]
    assert asked["missing_value"] == whole["missing_value"] == (None, [])
    # a feature not asked for is skipped over unparsed: its malformed value goes unnoticed
    bad_value = encode_example({"label": [7]}) + b"\x0a\x0b\x0a\x09\x0a\x03bad\x12\x02\x1a\x05"
    assert parse_example(bad_value, {"label"})["label"][1].tolist() == [7]
    with pytest.raises(ReaderError, match="malformed tf.train.Example"):
        parse_example(bad_value)


def test_protobuf_reads_what_encode_example_writes():
    features = {
        "image/encoded": b"\xff\xd8data",
        "many": [b"a", b"bc"],
        "ints": [1, -5, 2**62],
        "floats": [0.25, 1.5],
        "array": np.arange(6, dtype=np.int32).reshape(2, 3),
        "farray": np.float64([1.0, 2.5]),
    }
    example = example_class(True)()
    example.ParseFromString(encode_example(features))
    got = example.features.feature
    assert got["image/encoded"].bytes_list.value == [b"\xff\xd8data"]
    assert got["many"].bytes_list.value == [b"a", b"bc"]
    assert list(got["ints"].int64_list.value) == [1, -5, 2**62]
    assert list(got["floats"].float_list.value) == [0.25, 1.5]
    assert list(got["array"].int64_list.value) == list(range(6))
    assert list(got["farray"].float_list.value) == [1.0, 2.5]
    with pytest.raises(ValueError, match="'x': an empty list has no type"):
        encode_example({"x": []})


def test_parse_example_rejects_malformed_messages():
    with pytest.raises(ReaderError, match="malformed tf.train.Example: truncated varint"):
        parse_example(b"\x0a\x80")
    with pytest.raises(ReaderError, match="malformed tf.train.Example: field 1 needs 5 bytes"):
        parse_example(b"\x0a\x05\x0a")
    with pytest.raises(ReaderError, match="Example.features with wire type 0"):
        parse_example(b"\x08\x01")


def test_writer_writes_examples_and_their_index(tmp_path, jpeg_files):
    path = str(tmp_path / "train.tfrecord")
    with TFRecordWriter(path) as writer:
        for i, p in enumerate(jpeg_files[:5]):
            writer.add(f"img_{i}", open(p, "rb").read(), i * 10)
    result = writer.close()
    assert result == {"samples": 5, "bytes": os.path.getsize(path), "index": path + ".idx"}
    assert TFRecordWriter.suffix == ".tfrecord"
    offsets, sizes = read_index(path + ".idx", path)
    assert [a.tolist() for a in scan(path)] == [offsets.tolist(), sizes.tolist()]
    with open(path, "rb") as f:
        raw = f.read()
    for i, (o, s) in enumerate(zip(offsets.tolist(), sizes.tolist())):
        example = parse_example(unframe(raw[o : o + s]))
        assert bytes(example["image/encoded"][1][0]) == open(jpeg_files[i], "rb").read()
        assert example["image/class/label"][1].tolist() == [i * 10]
        assert bytes(example["image/filename"][1][0]) == f"img_{i}".encode()
