"""readers.caffe and readers.caffe2 on LMDBs built here with the protobuf and lmdb packages (not
our writers), on our writers' LMDBs, and against DALI's own readers."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

import raypipe as rp
import raypipe.operators.caffe_readers  # noqa: F401  (registers the readers)
from raypipe import fn
from raypipe.formats.caffe import Caffe2Writer, CaffeWriter, DataType
from raypipe.operators.caffe_readers import Caffe2Reader, CaffeReader
from tests.formats.test_caffe import PbDatum, pb_tensor_protos, write_lmdb

STRING, INT32, FLOAT, BYTE, INT64 = DataType.STRING, DataType.INT32, DataType.FLOAT, DataType.BYTE, DataType.INT64


@rp.pipeline_def(batch_size=5, num_threads=2, seed=0)
def read(reader="caffe", **reader_args):
    return getattr(fn.readers, reader)(name="Reader", **reader_args)


def _epoch(pipe) -> list[tuple[np.ndarray, ...]]:
    """The samples of one epoch (padding left out), each as a tuple of its outputs."""
    samples = []
    while True:
        outs = pipe.run()
        outs = outs if isinstance(outs, tuple) else (outs,)
        info = pipe.last_batch_info
        samples.extend(tuple(o.at(i) for o in outs) for i, pad in enumerate(info.is_pad) if not pad)
        if info.last_in_epoch:
            return samples


def _keys(jpeg_files) -> list[str]:
    return [f"{i:08d}_{os.path.basename(p)}" for i, p in enumerate(jpeg_files)]


@pytest.fixture(scope="module")
def caffe_db(jpeg_files, tmp_path_factory) -> str:
    """A Caffe LMDB as convert_imageset --encoded writes it, built with protobuf."""
    path = str(tmp_path_factory.mktemp("caffe") / "db")
    values = [PbDatum(data=open(p, "rb").read(), label=i // 6, encoded=True) for i, p in enumerate(jpeg_files)]
    write_lmdb(path, zip(_keys(jpeg_files), (v.SerializeToString() for v in values)))
    return path


@pytest.fixture(scope="module")
def caffe2_db(jpeg_files, tmp_path_factory) -> str:
    """A Caffe2 LMDB as make_image_db writes it, built with protobuf."""
    path = str(tmp_path_factory.mktemp("caffe2") / "db")
    values = [
        pb_tensor_protos(
            dict(data_type=STRING, dims=[1], string_data=[open(p, "rb").read()]),
            dict(data_type=INT32, dims=[1], int32_data=[i // 6]),
        )
        for i, p in enumerate(jpeg_files)
    ]
    write_lmdb(path, zip(_keys(jpeg_files), values))
    return path


@pytest.mark.parametrize("reader", ["caffe", "caffe2"])
def test_reads_every_image_and_label_in_key_order(reader, caffe_db, caffe2_db, jpeg_files):
    with read(reader=reader, path=caffe_db if reader == "caffe" else caffe2_db) as pipe:
        assert pipe.epoch_size("Reader") == 24
        samples = _epoch(pipe)
    assert [s[0].tobytes() for s in samples] == [open(p, "rb").read() for p in jpeg_files]
    assert all(s[1].dtype == np.int32 and s[1].shape == (1,) for s in samples)
    assert [int(s[1][0]) for s in samples] == [i // 6 for i in range(24)]


def test_caffe_outputs_follow_the_datum(tmp_path):
    pixels = bytes(range(24))
    values = [
        PbDatum(channels=3, height=2, width=4, data=pixels, label=5, encoded=False),
        PbDatum(data=b"\xff\xd8no-flag", label=-1),
        PbDatum(data=b"\xff\xd8no-label", encoded=True),
        PbDatum(float_data=[1.0, 2.0], label=2),
    ]
    write_lmdb(tmp_path / "db", [(str(i), v.SerializeToString()) for i, v in enumerate(values)])
    reader = CaffeReader("cpu", 0, path=str(tmp_path / "db"))
    raw, label = reader.read(0)
    # DALI's layout: the stored bytes, unchanged, shaped (height, width, channels)
    assert raw.shape == (2, 4, 3) and raw.dtype == np.uint8 and raw.tobytes() == pixels and label.tolist() == [5]
    assert reader.read(1)[0].tobytes() == b"\xff\xd8no-flag" and reader.read(1)[1].tolist() == [-1]
    image, label = reader.read(2)
    assert image.tobytes() == b"\xff\xd8no-label" and label.dtype == np.int32 and label.shape == (0,)
    image, label = reader.read(3)
    assert image.dtype == np.uint8 and image.shape == (0,) and label.tolist() == [2]
    assert image.flags.writeable and raw.flags.writeable, "pixels are copies"
    encoded = reader.read(1)[0]
    assert not encoded.flags.writeable, "encoded bytes are read-only views into the map (test_caffe.py)"
    labels_only = CaffeReader("cpu", 0, path=str(tmp_path / "db"), image_available=False)
    assert labels_only.num_outputs == 1 and [labels_only.read(i)[0].tolist() for i in (0, 1)] == [[5], [-1]]
    with read(batch_size=1, path=str(tmp_path / "db"), label_available=False) as pipe:  # one batch, one ndim
        assert [s[0].shape for s in _epoch(pipe)] == [(2, 4, 3), (9,), (10,), (0,)]


def test_unencoded_datum_of_the_wrong_size_names_the_key(tmp_path):
    write_lmdb(
        tmp_path / "db",
        [("raw", PbDatum(channels=3, height=2, width=4, data=b"x" * 10, encoded=False).SerializeToString())],
    )
    reader = CaffeReader("cpu", 0, path=str(tmp_path / "db"))
    with pytest.raises(rp.ReaderError, match=r"db key raw \(sample 0\): unencoded Datum of .* \(2, 4, 3\) holds 10"):
        reader.read(0)


IMG = dict(data_type=STRING, dims=[1], string_data=[b"\xff\xd8img"])


@pytest.mark.parametrize(
    "args, tensors, expected",
    [
        ({}, [IMG, dict(data_type=INT32, int32_data=[7])], [np.array([7], np.int32)]),
        ({}, [IMG, dict(data_type=FLOAT, float_data=[2.5])], [np.array([2.5], np.float32)]),
        (
            {"label_type": 1, "num_labels": 5},
            [IMG, dict(data_type=INT32, int32_data=[1, 3])],
            [np.array([0, 1, 0, 1, 0], np.int32)],
        ),
        (
            {"label_type": 1, "num_labels": 3},
            [IMG, dict(data_type=FLOAT, float_data=[2])],
            [np.array([0, 0, 1], np.float32)],
        ),
        ({"label_type": 2}, [IMG, dict(data_type=INT32, int32_data=[4, -2, 9])], [np.array([4, -2, 9], np.int32)]),
        ({"label_type": 2}, [IMG, dict(data_type=FLOAT, float_data=[0.5, 1])], [np.array([0.5, 1], np.float32)]),
        (
            {"label_type": 3, "num_labels": 4},
            [IMG, dict(data_type=INT32, int32_data=[3, 0]), dict(data_type=FLOAT, float_data=[0.25, 0.75])],
            [np.array([0.75, 0, 0, 0.25], np.float32)],
        ),
        ({"label_type": 4}, [IMG], []),
        (
            {"additional_inputs": 2, "bbox": True},
            [
                IMG,
                dict(data_type=INT32, int32_data=[1]),
                dict(data_type=FLOAT, float_data=[1, 2, 3]),
                dict(data_type=INT64, int64_data=[2**40]),
                dict(data_type=INT32, int32_data=[10, 20, 30, 40]),
            ],
            [
                np.array([1], np.int32),
                np.array([1, 2, 3], np.float32),
                np.array([2**40], np.int64),
                np.array([10, 20, 30, 40], np.int32),
            ],
        ),
        (
            {"label_type": 3, "num_labels": 2, "additional_inputs": 1},
            [
                IMG,
                dict(data_type=INT32, int32_data=[1]),
                dict(data_type=FLOAT, float_data=[0.5]),
                dict(data_type=INT32, int32_data=[8]),
            ],
            [np.array([0, 0.5], np.float32), np.array([8], np.int32)],
        ),
    ],
)
def test_caffe2_label_types_and_extra_outputs(tmp_path, args, tensors, expected):
    write_lmdb(tmp_path / "db", [("k", pb_tensor_protos(*tensors))])
    reader = Caffe2Reader("cpu", 0, path=str(tmp_path / "db"), **args)
    outputs = reader.read(0)
    assert reader.num_outputs == len(outputs) == 1 + len(expected)
    assert outputs[0].tobytes() == b"\xff\xd8img"
    for got, want in zip(outputs[1:], expected):
        assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)


def test_caffe2_pixel_images_and_no_image(tmp_path):
    pixels = dict(data_type=BYTE, dims=[2, 3, 2], byte_data=bytes(range(12)))
    gray = dict(data_type=BYTE, dims=[2, 3], byte_data=bytes(range(6)))
    label = dict(data_type=INT32, int32_data=[1])
    write_lmdb(tmp_path / "db", [("a", pb_tensor_protos(pixels, label)), ("b", pb_tensor_protos(gray, label))])
    reader = Caffe2Reader("cpu", 0, path=str(tmp_path / "db"))
    assert reader.read(0)[0].shape == (2, 3, 2) and reader.read(0)[0].tobytes() == bytes(range(12))
    assert reader.read(1)[0].shape == (2, 3, 1)
    write_lmdb(tmp_path / "labels", [("a", pb_tensor_protos(label))])
    with read(reader="caffe2", path=str(tmp_path / "labels"), image_available=False) as pipe:
        assert [s[0].tolist() for s in _epoch(pipe)] == [[1]]


@pytest.mark.parametrize(
    "args, tensors, message",
    [
        ({}, [IMG, dict(data_type=INT32, int32_data=[1, 2])], "holds 2 values; label_type 0 needs one"),
        ({}, [IMG, dict(data_type=INT64, int64_data=[1])], r"label \(tensor 1\) is INT64; expected INT32 or FLOAT"),
        ({}, [IMG], "holds 1 tensors; the label would be tensor 1"),
        ({"label_type": 1, "num_labels": 2}, [IMG, dict(data_type=INT32, int32_data=[2])], r"not all in \[0, 2\)"),
        (
            {"label_type": 3, "num_labels": 4},
            [IMG, dict(data_type=INT32, int32_data=[1, 2]), dict(data_type=FLOAT, float_data=[1])],
            r"FLOAT with one value per index \(2\), got FLOAT with 1 values",
        ),
        ({"bbox": True}, [IMG, dict(data_type=INT32, int32_data=[1])], "the bbox would be tensor 2"),
        (
            {"bbox": True},
            [IMG, dict(data_type=INT32, int32_data=[1]), dict(data_type=FLOAT, float_data=[1, 2, 3, 4])],
            "bbox .* must be INT32 with 4 values, got FLOAT",
        ),
        ({}, [dict(data_type=FLOAT, float_data=[1]), dict(data_type=INT32, int32_data=[1])], "image tensor is FLOAT"),
        ({}, [dict(data_type=BYTE, dims=[2, 2], byte_data=b"abc"), IMG], r"dims \[2, 2\] holds 3 bytes"),
    ],
)
def test_caffe2_bad_values_name_path_key_and_sample(tmp_path, args, tensors, message):
    good = pb_tensor_protos(IMG, dict(data_type=INT32, int32_data=[0]))
    write_lmdb(tmp_path / "db", [("good", good), ("the-key", pb_tensor_protos(*tensors))])
    reader = Caffe2Reader("cpu", 0, path=str(tmp_path / "db"), **args)
    with pytest.raises(rp.ReaderError, match=rf"readers.caffe2: .*db key the-key \(sample 1\): .*{message}"):
        reader.read(1)


@pytest.mark.parametrize("reader", ["caffe", "caffe2"])
def test_truncated_value_names_path_and_key(reader, tmp_path):
    good = PbDatum(data=b"\xff\xd8ok", label=1, encoded=True).SerializeToString()
    if reader == "caffe2":
        good = pb_tensor_protos(IMG, dict(data_type=INT32, int32_data=[1]))
    write_lmdb(tmp_path / "db", [("a-good", good), ("b-cut", good[:-3])])
    cls = CaffeReader if reader == "caffe" else Caffe2Reader
    with pytest.raises(rp.ReaderError, match=rf"readers.{reader}: .*db key b-cut \(sample 1\): .*byte"):
        cls("cpu", 0, path=str(tmp_path / "db")).read(1)
    with read(reader=reader, path=str(tmp_path / "db")) as pipe:
        with pytest.raises(rp.SampleError, match=r"sample 1 \(.*db key b-cut\)"):
            pipe.run()


def test_missing_or_invalid_lmdb_is_named_at_build(tmp_path):
    with pytest.raises(rp.ReaderError, match="readers.caffe: LMDB '.*nowhere' does not exist"):
        read(path=str(tmp_path / "nowhere")).build()
    with pytest.raises(rp.ReaderError, match="readers.caffe2: LMDB '.*' is not an LMDB folder"):
        read(reader="caffe2", path=str(tmp_path)).build()
    (tmp_path / "data.mdb").write_bytes(os.urandom(20000))
    with pytest.raises(rp.ReaderError, match="cannot be opened"):
        read(path=str(tmp_path)).build()


@pytest.mark.parametrize(
    "reader, args, message",
    [
        ("caffe", {}, "path is required"),
        ("caffe", {"path": "x", "image_available": False, "label_available": False}, "nothing to read"),
        ("caffe", {"path": "x", "image_available": 1}, "image_available must be a bool"),
        ("caffe2", {"path": "x", "label_type": 5}, "label_type must be 0"),
        ("caffe2", {"path": "x", "num_labels": 0}, "num_labels must be an int >= 1"),
        ("caffe2", {"path": "x", "additional_inputs": -1}, "additional_inputs must be an int >= 0"),
        ("caffe2", {"path": "x", "label_type": 4, "image_available": False}, "nothing to read"),
        ("caffe2", {"path": "x", "shard_id": 1}, r"shard_id must be in \[0, 1\)"),
        ("caffe2", {"path": "x", "label": 1}, "unexpected argument"),
    ],
)
def test_argument_errors(reader, args, message):
    with pytest.raises(rp.ArgumentError, match=message):
        read(reader=reader, **args).build()


@pytest.mark.parametrize("writer, reader", [(CaffeWriter, "caffe"), (Caffe2Writer, "caffe2")])
def test_our_writers_are_read_back(writer, reader, jpeg_root, jpeg_files, tmp_path):
    path = str(tmp_path / f"db{writer.suffix}")
    with writer(path) as w:
        for i, p in enumerate(jpeg_files):
            w.add(os.path.relpath(p, jpeg_root), open(p, "rb").read(), i // 6)
    with read(reader=reader, path=path) as pipe:
        samples = _epoch(pipe)
    assert [s[0].tobytes() for s in samples] == [open(p, "rb").read() for p in jpeg_files]
    assert [s[1].tolist() for s in samples] == [[i // 6] for i in range(24)]


def _dali_epoch(reader: str, **args) -> list[tuple[np.ndarray, ...]]:
    dali = pytest.importorskip("nvidia.dali")

    @dali.pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        outs = getattr(dali.fn.readers, reader)(name="Reader", **args)
        return tuple(outs) if isinstance(outs, list) else outs

    p = pipe()
    p.build()
    samples = []
    for _ in range(p.epoch_size("Reader")):
        outs = p.run()
        samples.append(tuple(np.array(o.at(0)) for o in (outs if isinstance(outs, tuple) else (outs,))))
    return samples


@pytest.mark.parametrize("writer, reader", [(CaffeWriter, "caffe"), (Caffe2Writer, "caffe2")])
def test_dali_reads_our_writers(writer, reader, jpeg_files, tmp_path):
    path = str(tmp_path / "db")
    with writer(path) as w:
        for key, p in zip(_keys(jpeg_files[:6]), jpeg_files[:6]):
            w.add(key, open(p, "rb").read(), 3)
    samples = _dali_epoch(reader, path=path)
    assert [s[0].tobytes() for s in samples] == [open(p, "rb").read() for p in jpeg_files[:6]]
    assert all(s[1].dtype == np.int32 and s[1].tolist() == [3] for s in samples)


def test_outputs_equal_dali_where_dali_reads_the_layout(tmp_path):
    datums = [
        PbDatum(channels=3, height=2, width=4, data=bytes(range(24)), label=5, encoded=False),
        PbDatum(data=b"\xff\xd8enc", label=-2, encoded=True),
        PbDatum(data=b"\xff\xd8no-label"),
    ]
    write_lmdb(tmp_path / "caffe", [(str(i), d.SerializeToString()) for i, d in enumerate(datums)])
    protos = [
        pb_tensor_protos(IMG, dict(data_type=INT32, int32_data=[7])),
        pb_tensor_protos(
            dict(data_type=BYTE, dims=[2, 3, 2], byte_data=bytes(range(12))), dict(data_type=FLOAT, float_data=[2.5])
        ),
    ]
    write_lmdb(tmp_path / "caffe2", [(str(i), v) for i, v in enumerate(protos)])
    dense = [pb_tensor_protos(IMG, dict(data_type=INT32, int32_data=[1, 3, 9]), dict(data_type=FLOAT, float_data=[4]))]
    write_lmdb(tmp_path / "dense", [("0", dense[0])])
    cases = [
        ("caffe", CaffeReader, {"path": str(tmp_path / "caffe")}),
        ("caffe2", Caffe2Reader, {"path": str(tmp_path / "caffe2")}),
        ("caffe2", Caffe2Reader, {"path": str(tmp_path / "dense"), "label_type": 2, "additional_inputs": 1}),
    ]
    for name, cls, args in cases:
        ours = cls("cpu", 0, **args)
        for i, theirs in enumerate(_dali_epoch(name, **args)):
            mine = ours.read(i)
            assert [(a.dtype, a.shape, a.tobytes()) for a in mine] == [(b.dtype, b.shape, b.tobytes()) for b in theirs]


def test_threads_read_the_right_values(caffe2_db, jpeg_files):
    reader = Caffe2Reader("cpu", 0, path=caffe2_db)
    expected = [open(p, "rb").read() for p in jpeg_files]
    errors = []

    def work(order):
        try:
            for i in order:
                image, label = reader.read(i)
                assert image.tobytes() == expected[i] and label.tolist() == [i // 6]
        except Exception as exc:  # reported by the main thread
            errors.append(exc)

    threads = [
        threading.Thread(target=work, args=(np.random.default_rng(s).permutation(24).tolist() * 4,)) for s in (0, 1)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_close_then_read_again(caffe_db, jpeg_files):
    reader = CaffeReader("cpu", 0, path=caffe_db)
    first = reader.read(3)[0].tobytes()
    reader.close()
    assert reader.read(3)[0].tobytes() == first == open(jpeg_files[3], "rb").read()
    with read(path=caffe_db) as pipe:
        before = _epoch(pipe)
    assert [s[0].tobytes() for s in _epoch(pipe)] == [s[0].tobytes() for s in before]


def test_shards_and_random_access_equal_sequential(caffe_db, caffe2_db, jpeg_files):
    sequential = [open(p, "rb").read() for p in jpeg_files]
    shards = []
    for shard in range(3):
        with read(path=caffe_db, shard_id=shard, num_shards=3) as pipe:
            assert pipe.reader_meta("Reader")["number_of_shards"] == 3
            shards.append([s[0].tobytes() for s in _epoch(pipe)])
    assert shards == [sequential[0:8], sequential[8:16], sequential[16:24]]
    reader = CaffeReader("cpu", 0, path=caffe_db)
    order = np.random.default_rng(3).permutation(24).tolist()
    assert [reader.read(i)[0].tobytes() for i in order] == [sequential[i] for i in order]
    with read(path=caffe_db, random_shuffle=True, initial_fill=8) as pipe:
        assert sorted(s[0].tobytes() for s in _epoch(pipe)) == sorted(sequential)
    both = Caffe2Reader("cpu", 0, path=[caffe2_db, caffe2_db])
    assert len(both) == 48 and both.read(30)[0].tobytes() == sequential[6]
    assert both.source_of(30) == f"{caffe2_db} key {_keys(jpeg_files)[6]}"


def test_digest_follows_keys_and_arguments(caffe_db, caffe2_db, jpeg_files, tmp_path):
    copy = str(tmp_path / "copy")
    write_lmdb(copy, [(k, b"other values") for k in _keys(jpeg_files)])
    assert CaffeReader("cpu", 0, path=copy).digest() == CaffeReader("cpu", 0, path=caffe_db).digest()
    assert (
        CaffeReader("cpu", 0, path=caffe_db, label_available=False).digest()
        != CaffeReader("cpu", 0, path=caffe_db).digest()
    )
    assert (
        Caffe2Reader("cpu", 0, path=caffe2_db, label_type=2).digest() != Caffe2Reader("cpu", 0, path=caffe2_db).digest()
    )
