"""Caffe ``Datum`` / Caffe2 ``TensorProtos`` codecs checked against the ``protobuf`` package (message
classes built here from caffe.proto / caffe2.proto field numbers), LMDB access from several
threads, and the LMDB writers."""

from __future__ import annotations

import gc
import os
import threading

import lmdb
import numpy as np
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from raypipe.errors import ReaderError
from raypipe.formats import lmdb_store
from raypipe.formats import protowire as pw
from raypipe.formats.caffe import (
    Caffe2Writer,
    CaffeWriter,
    DataType,
    Tensor,
    encode_datum,
    encode_tensor_protos,
    parse_datum,
    parse_tensor_protos,
)
from raypipe.formats.lmdb_store import LmdbStore, LmdbWriter

F = descriptor_pb2.FieldDescriptorProto


def _messages() -> tuple[type, type, type]:
    """``Datum`` (caffe.proto) and ``TensorProto``/``TensorProtos`` (caffe2.proto) classes."""
    fdp = descriptor_pb2.FileDescriptorProto(name="test_caffe.proto", package="testcaffe", syntax="proto2")

    def add(message, name, number, ftype, repeated=False, packed=False, type_name=None):
        f = message.field.add(name=name, number=number, type=ftype)
        f.label = F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL
        if packed:
            f.options.packed = True
        if type_name:
            f.type_name = type_name

    datum = fdp.message_type.add(name="Datum")
    add(datum, "channels", 1, F.TYPE_INT32)
    add(datum, "height", 2, F.TYPE_INT32)
    add(datum, "width", 3, F.TYPE_INT32)
    add(datum, "data", 4, F.TYPE_BYTES)
    add(datum, "label", 5, F.TYPE_INT32)
    add(datum, "float_data", 6, F.TYPE_FLOAT, repeated=True)
    add(datum, "encoded", 7, F.TYPE_BOOL)
    tensor = fdp.message_type.add(name="TensorProto")
    add(tensor, "dims", 1, F.TYPE_INT64, repeated=True)
    add(tensor, "data_type", 2, F.TYPE_INT32)
    add(tensor, "float_data", 3, F.TYPE_FLOAT, repeated=True, packed=True)
    add(tensor, "int32_data", 4, F.TYPE_INT32, repeated=True, packed=True)
    add(tensor, "byte_data", 5, F.TYPE_BYTES)
    add(tensor, "string_data", 6, F.TYPE_BYTES, repeated=True)
    add(tensor, "name", 7, F.TYPE_STRING)
    add(tensor, "double_data", 9, F.TYPE_DOUBLE, repeated=True, packed=True)
    add(tensor, "int64_data", 10, F.TYPE_INT64, repeated=True, packed=True)
    add(tensor, "raw_data", 13, F.TYPE_BYTES)
    protos = fdp.message_type.add(name="TensorProtos")
    add(protos, "protos", 1, F.TYPE_MESSAGE, repeated=True, type_name=".testcaffe.TensorProto")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return tuple(
        message_factory.GetMessageClass(pool.FindMessageTypeByName(f"testcaffe.{name}"))
        for name in ("Datum", "TensorProto", "TensorProtos")
    )


PbDatum, PbTensor, PbTensorProtos = _messages()


def pb_tensor_protos(*tensors: dict) -> bytes:
    """A serialized ``TensorProtos`` of tensors given as field dicts, by the protobuf package."""
    message = PbTensorProtos()
    for fields in tensors:
        message.protos.add(**fields)
    return message.SerializeToString()


def write_lmdb(path, items) -> None:
    """An LMDB of ``(key, value)`` pairs written with the lmdb package alone."""
    env = lmdb.open(str(path), map_size=1 << 26)
    with env.begin(write=True) as txn:
        for key, value in items:
            txn.put(key if isinstance(key, bytes) else key.encode(), value)
    env.close()


def test_datum_matches_protobuf_both_ways():
    fields = dict(channels=3, height=2, width=5, data=b"\xff\xd8pixels", label=-7, float_data=[1.5, -2.25])
    fields["encoded"] = True
    ours = encode_datum(
        b"\xff\xd8pixels", -7, channels=3, height=2, width=5, encoded=True, float_data=np.array([1.5, -2.25])
    )
    assert ours == PbDatum(**fields).SerializeToString()
    d = parse_datum(PbDatum(**fields).SerializeToString())
    assert (d.channels, d.height, d.width, bytes(d.data), d.label, d.encoded) == (3, 2, 5, b"\xff\xd8pixels", -7, True)
    assert d.float_data.tolist() == [1.5, -2.25]
    empty = parse_datum(PbDatum().SerializeToString())
    assert (empty.data, empty.label, empty.encoded) == (None, None, None)


def test_datum_data_is_a_slice_of_the_buffer():
    buf = encode_datum(bytes(range(200)), 1, encoded=True)
    d = parse_datum(buf)
    assert isinstance(d.data, memoryview) and d.data.obj is buf and bytes(d.data) == bytes(range(200))


def test_tensor_protos_match_protobuf_both_ways():
    big = 2**40
    tensors = (
        dict(data_type=DataType.STRING, dims=[1], string_data=[b"jpeg", b""], name="image"),
        dict(
            data_type=DataType.INT32,
            dims=[2, -1],
            int32_data=[5, -3, 2**31 - 1],
            float_data=[0.5],
            double_data=[1.25],
            int64_data=[-big],
            byte_data=b"\x00\x01",
            raw_data=b"raw",
        ),
    )
    serialized = pb_tensor_protos(*tensors)
    parsed = parse_tensor_protos(serialized)
    image, mixed = parsed
    assert (image.data_type, image.dims, [bytes(s) for s in image.string_data], image.name) == (
        DataType.STRING,
        [1],
        [b"jpeg", b""],
        "image",
    )
    assert mixed.int32_data.dtype == np.int32 and mixed.int32_data.tolist() == [5, -3, 2**31 - 1]
    assert (mixed.dims, mixed.float_data.tolist(), mixed.double_data.tolist(), mixed.int64_data.tolist()) == (
        [2, -1],
        [0.5],
        [1.25],
        [-big],
    )
    assert (bytes(mixed.byte_data), bytes(mixed.raw_data)) == (b"\x00\x01", b"raw")
    assert encode_tensor_protos(parsed) == serialized
    weights = Tensor(DataType.FLOAT, dims=[3], float_data=np.array([0.5, 1, 2], np.float32))
    assert encode_tensor_protos([weights]) == pb_tensor_protos(dict(data_type=1, dims=[3], float_data=[0.5, 1, 2]))


def test_unpacked_and_split_repeated_fields_are_read():
    """Writers may store repeated numbers unpacked, or packed in several chunks."""
    body = (
        pw.field_varint(2, DataType.INT32)
        + pw.field_varint(4, 2**64 - 4)  # int32 -4, unpacked
        + pw.field_packed_varints(4, [9, 10])
        + pw.encode_varint(3 << 3 | pw.FIXED32)
        + np.float32(2.5).tobytes()
        + pw.field_packed_varints(1, [3, 4])
    )
    (t,) = parse_tensor_protos(pw.field_bytes(1, body))
    assert t.int32_data.tolist() == [-4, 9, 10] and t.float_data.tolist() == [2.5] and t.dims == [3, 4]


@pytest.mark.parametrize("cut", [1, 5, 12])
def test_truncated_messages_raise_wire_errors(cut):
    datum = encode_datum(b"x" * 10, 3, encoded=True)
    protos = pb_tensor_protos(dict(data_type=DataType.STRING, string_data=[b"y" * 10]))
    with pytest.raises(pw.WireError):
        parse_datum(datum[:-cut])
    with pytest.raises(pw.WireError):
        parse_tensor_protos(protos[:-cut])


def test_wrong_wire_type_is_an_error():
    with pytest.raises(pw.WireError, match="field 4 has wire type 0"):
        parse_datum(pw.field_varint(4, 1))


def test_store_lists_keys_in_order_and_reads_values(tmp_path):
    write_lmdb(tmp_path / "db", [(b"b", b"2"), (b"a", b"1"), (b"a0", b"10")])
    store = LmdbStore(str(tmp_path / "db"))
    assert store.keys == [b"a", b"a0", b"b"] and len(store) == 3
    assert [bytes(store.get(i)) for i in range(3)] == [b"1", b"10", b"2"]
    write_lmdb(tmp_path / "other", [(b"a", b"x"), (b"a0", b"y"), (b"b", b"z")])
    assert LmdbStore(str(tmp_path / "other")).digest() == store.digest()
    write_lmdb(tmp_path / "more", [(b"a", b"x"), (b"a0", b"y"), (b"c", b"z")])
    assert LmdbStore(str(tmp_path / "more")).digest() != store.digest()


def test_store_errors_name_the_path(tmp_path):
    with pytest.raises(ReaderError, match="LMDB '.*nowhere' does not exist"):
        len(LmdbStore(str(tmp_path / "nowhere")))
    with pytest.raises(ReaderError, match="is not an LMDB folder"):
        len(LmdbStore(str(tmp_path)))
    (tmp_path / "data.mdb").write_bytes(b"not an lmdb" * 1000)
    with pytest.raises(ReaderError, match="cannot be opened"):
        len(LmdbStore(str(tmp_path)))


def test_store_reads_from_threads_and_reopens_after_close(tmp_path):
    values = [np.random.default_rng(i).bytes(1000 + i) for i in range(200)]
    write_lmdb(tmp_path / "db", [(f"{i:04d}", v) for i, v in enumerate(values)])
    store = LmdbStore(str(tmp_path / "db"))
    errors = []

    def work(order):
        try:
            for i in order:
                assert bytes(store.get(i)) == values[i]
        except Exception as exc:  # reported by the main thread
            errors.append(exc)

    orders = [np.random.default_rng(s).permutation(200).tolist() * 3 for s in range(2)]
    threads = [threading.Thread(target=work, args=(o,)) for o in orders]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    store.close()
    assert bytes(store.get(7)) == values[7]
    store.close()
    store.close()
    worker = threading.Thread(target=work, args=([3, 199, 0],))
    worker.start()
    worker.join()
    assert errors == []


def test_close_waits_for_reads_in_flight(tmp_path):
    write_lmdb(tmp_path / "db", [(b"k", b"value")])
    store = LmdbStore(str(tmp_path / "db"))
    entered, release, result = threading.Event(), threading.Event(), []

    def slow_parse(value, view):
        entered.set()
        release.wait(5)
        return bytes(value)

    reader = threading.Thread(target=lambda: result.append(store.apply(0, slow_parse)))
    reader.start()
    assert entered.wait(5)
    closer = threading.Thread(target=store.close)
    closer.start()
    closer.join(0.2)
    assert closer.is_alive()
    release.set()
    reader.join(5)
    closer.join(5)
    assert result == [b"value"] and not closer.is_alive()
    assert store.get(0) == b"value"


def test_views_keep_the_map_after_close_and_release_it_with_the_last_one(tmp_path):
    values = [np.random.default_rng(i).bytes(70_000 + i) for i in range(3)]
    write_lmdb(tmp_path / "db", [(f"{i}", v) for i, v in enumerate(values)])
    store = LmdbStore(str(tmp_path / "db"))
    first = store.apply(0, lambda value, view: view(value))
    part = store.apply(1, lambda value, view: view(value))[100:200]  # a view of a view
    assert not first.flags.writeable and first.tobytes() == values[0]
    key = (os.getpid(), os.path.realpath(tmp_path / "db"))
    store.close()
    assert key in lmdb_store._SHARED, "closed, but views remain: the map stays"
    assert store.get(2) == values[2], "the next read reopens it, sharing the environment"
    store.close()
    assert first.tobytes() == values[0] and part.tobytes() == values[1][100:200]
    del first
    gc.collect()
    assert key in lmdb_store._SHARED
    del part
    gc.collect()
    assert key not in lmdb_store._SHARED and not lmdb_store._PENDING


def test_a_view_outlives_its_dropped_store(tmp_path):
    write_lmdb(tmp_path / "db", [(b"k", b"x" * 50_000)])
    store = LmdbStore(str(tmp_path / "db"))
    image = store.apply(0, lambda value, view: view(value))
    key = (os.getpid(), os.path.realpath(tmp_path / "db"))
    del store
    gc.collect()
    assert key in lmdb_store._SHARED and image.tobytes() == b"x" * 50_000
    del image
    gc.collect()
    assert key not in lmdb_store._SHARED


def test_stores_of_one_database_share_its_environment(tmp_path):
    write_lmdb(tmp_path / "db", [(b"a", b"1"), (b"b", b"2")])
    first, second = LmdbStore(str(tmp_path / "db")), LmdbStore(str(tmp_path / "db") + "/")
    assert (first.get(0), second.get(1)) == (b"1", b"2")
    first.close()
    assert second.get(0) == b"1"
    second.close()
    assert (first.get(1), second.get(1)) == (b"2", b"2")


def test_lmdb_writer_grows_the_map_and_refuses_duplicate_keys(tmp_path):
    writer = LmdbWriter(str(tmp_path / "db"), map_size=64 << 10, commit_every=8)
    values = [bytes([i]) * 20_000 for i in range(40)]
    for i, value in enumerate(values):
        writer.put(f"{i:03d}".encode(), value)
    with pytest.raises(ValueError, match="key b'001' was added twice"):
        writer.put(b"001", b"again")
    writer.put(b"040", b"last")
    with pytest.raises(ValueError, match="key b'040' was added twice"):
        writer.put(b"040", b"again")
    assert writer.close() == (41, 800_004)
    store = LmdbStore(str(tmp_path / "db"))
    assert [bytes(store.get(i)) for i in range(41)] == [*values, b"last"]


def test_writers_lay_out_values_as_caffe_and_caffe2_do(tmp_path):
    with CaffeWriter(str(tmp_path / "caffe")) as w:
        w.add("b/2", b"\xff\xd8two", 2)
        w.add("a/1", b"\xff\xd8one", 1)
    assert w.close() == {"samples": 2, "bytes": 2 * len(encode_datum(b"\xff\xd8one", 1, encoded=True)), "index": None}
    assert os.path.getsize(tmp_path / "caffe" / "data.mdb") < 1 << 20  # truncated to the pages used
    store = LmdbStore(str(tmp_path / "caffe"))
    assert store.keys == [b"a/1", b"b/2"]
    datum = PbDatum()
    datum.ParseFromString(bytes(store.get(0)))
    assert (datum.data, datum.label, datum.encoded, datum.HasField("channels")) == (b"\xff\xd8one", 1, True, False)

    with Caffe2Writer(str(tmp_path / "caffe2")) as w:
        w.add("k", b"\xff\xd8img", -3)
    protos = PbTensorProtos()
    protos.ParseFromString(bytes(LmdbStore(str(tmp_path / "caffe2")).get(0)))
    image, label = protos.protos
    assert (image.data_type, list(image.dims), list(image.string_data)) == (DataType.STRING, [1], [b"\xff\xd8img"])
    assert (label.data_type, list(label.dims), list(label.int32_data)) == (DataType.INT32, [1], [-3])


def test_writer_replaces_an_existing_database(tmp_path):
    with CaffeWriter(str(tmp_path / "db")) as w:
        w.add("old", b"1", 1)
    with CaffeWriter(str(tmp_path / "db")) as w:
        w.add("new", b"2", 2)
    assert LmdbStore(str(tmp_path / "db")).keys == [b"new"]
