"""readers.tfrecord on TFRecord files written by TFRecordWriter: the same samples as DALI's
reader, DALI's output shapes, sharding and shuffling, and bad files named with their record."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

import raypipe as rp
import raypipe.tfrecord as tfrec
from raypipe import fn
from raypipe.formats.tfrecord_file import TFRecordWriter, encode_example, frame, write_index
from raypipe.operators.tfrecord_reader import TFRecordReader

IMAGE_FEATURES = {
    "image/encoded": tfrec.FixedLenFeature([], tfrec.string, ""),
    "image/class/label": tfrec.FixedLenFeature([1], tfrec.int64, -1),
    "image/filename": tfrec.FixedLenFeature((), tfrec.string),
}


def expected_labels(jpeg_files):
    """The class folder index of every file (``class_002/...`` -> 2)."""
    return [int(os.path.basename(os.path.dirname(p)).split("_")[1]) for p in jpeg_files]


@pytest.fixture(scope="module")
def shards(tmp_path_factory, jpeg_files) -> list[str]:
    """The 24 JPEGs in two TFRecord files of 10 and 14 records, with their indexes."""
    root = tmp_path_factory.mktemp("tfrecord")
    paths = [str(root / "train-0.tfrecord"), str(root / "train-1.tfrecord")]
    for path, files in zip(paths, (jpeg_files[:10], jpeg_files[10:])):
        with TFRecordWriter(path) as writer:
            for p, label in zip(files, expected_labels(files)):
                writer.add(f"class_{label}/{os.path.basename(p)}", open(p, "rb").read(), label)
    return paths


@pytest.fixture(scope="module")
def labelled(tmp_path_factory, jpeg_files) -> str:
    """One TFRecord file of the 24 JPEGs with their class labels."""
    path = str(tmp_path_factory.mktemp("labelled") / "all.tfrecord")
    with TFRecordWriter(path) as writer:
        for p, label in zip(jpeg_files, expected_labels(jpeg_files)):
            writer.add(os.path.basename(p), open(p, "rb").read(), label)
    return path


@rp.pipeline_def(batch_size=4, num_threads=2, device_id=None, seed=0)
def read(features=IMAGE_FEATURES, **reader_args):
    outputs = fn.readers.tfrecord(name="Reader", features=features, **reader_args)
    return tuple(outputs[name] for name in features)


def epoch(pipe) -> list[tuple[np.ndarray, ...]]:
    samples = []
    while True:
        outputs = pipe.run()
        info = pipe.last_batch_info
        for i, pad in enumerate(info.is_pad):
            if not pad:
                samples.append(tuple(np.asarray(out.at(i)) for out in outputs))
        if info.last_in_epoch:
            return samples


def reader(paths, features=IMAGE_FEATURES) -> TFRecordReader:
    """A prepared reader of ``paths`` (their indexes next to them), outside any pipeline."""
    paths = [paths] if isinstance(paths, str) else paths
    index_paths = [p + ".idx" for p in paths]
    r = TFRecordReader(device="cpu", op_id=0, path=paths, index_path=index_paths, features=features)
    r.prepare()
    return r


def test_reads_what_the_writer_wrote(labelled, jpeg_files):
    with read(path=labelled, index_path=labelled + ".idx") as pipe:
        assert pipe.epoch_size("Reader") == 24
        samples = epoch(pipe)
    assert [s[0].tobytes() for s in samples] == [open(p, "rb").read() for p in jpeg_files]
    assert [s[1].tolist() for s in samples] == [[v] for v in expected_labels(jpeg_files)]
    assert [s[2].tobytes().decode() for s in samples] == [os.path.basename(p) for p in jpeg_files]
    assert all(s[0].dtype == np.uint8 and s[0].ndim == 1 and s[1].dtype == np.int64 for s in samples)


def test_outputs_are_a_dict_named_after_the_features(labelled):
    @rp.pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=0)
    def named():
        outputs = fn.readers.tfrecord(path=labelled, index_path=labelled + ".idx", features=IMAGE_FEATURES)
        assert isinstance(outputs, dict) and list(outputs) == list(IMAGE_FEATURES)
        return outputs["image/class/label"]

    with named() as pipe:
        (labels,) = pipe.run()
    assert np.asarray(labels).tolist() == [[0], [0]]


def test_matches_dali(shards):
    dali = pytest.importorskip("nvidia.dali")
    dali_tfrec = pytest.importorskip("nvidia.dali.tfrecord")
    spec = {
        "image/encoded": ([], "string", ""),
        "image/class/label": ([], "int64", -1),
        "image/filename": ([1], "string", ""),
    }
    index_paths = [p + ".idx" for p in shards]

    @dali.pipeline_def(batch_size=4, num_threads=1, device_id=None)
    def dali_read(shard_id, num_shards):
        features = {k: dali_tfrec.FixedLenFeature(s, getattr(dali_tfrec, t), d) for k, (s, t, d) in spec.items()}
        out = dali.fn.readers.tfrecord(
            path=shards, index_path=index_paths, features=features, shard_id=shard_id, num_shards=num_shards
        )
        return tuple(out[k] for k in spec)

    features = {k: tfrec.FixedLenFeature(s, getattr(tfrec, t), d) for k, (s, t, d) in spec.items()}
    for shard_id, num_shards in ((0, 1), (1, 3)):
        theirs = dali_read(shard_id, num_shards)
        theirs.build()
        args = {"path": shards, "index_path": index_paths, "shard_id": shard_id, "num_shards": num_shards}
        with read(features=features, **args) as pipe:
            for _ in range(2):
                for ours_out, dali_out in zip(pipe.run(), theirs.run()):
                    for i in range(4):
                        a, b = np.asarray(ours_out.at(i)), np.asarray(dali_out[i])
                        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
        labels = theirs.run()[1]
        assert np.asarray(labels[0]).shape == ()  # FixedLenFeature([], int64) is 0-d in DALI


def test_random_access_equals_sequential(shards):
    r = reader(shards)
    r.will_read(list(range(24)))
    sequential = [r.read(i) for i in range(24)]
    r.close()
    for i in (23, 0, 11, 10, 9, 17):
        assert [a.tobytes() for a in r.read(i)] == [a.tobytes() for a in sequential[i]]
    assert r.source_of(12).endswith(f"train-1.tfrecord record 2 (offset {r.table.offsets[12]})")
    with pytest.raises(IndexError, match="sample index 24 outside"):
        r.read(24)


def test_shards_are_disjoint_contiguous_and_cover_every_record(shards):
    names = []
    for shard_id in range(3):
        with read(path=shards, index_path=[p + ".idx" for p in shards], shard_id=shard_id, num_shards=3) as pipe:
            names.append([s[2].tobytes() for s in epoch(pipe)])
    everything = [reader(shards).read(i)[2].tobytes() for i in range(24)]
    assert names == [everything[0:8], everything[8:16], everything[16:24]]


def test_random_shuffle_is_deterministic_per_seed(shards):
    def order(seed):
        args = {"path": shards, "index_path": [p + ".idx" for p in shards], "random_shuffle": True}
        with read(**args, seed=seed, initial_fill=8) as pipe:
            return [s[2].tobytes() for s in epoch(pipe)]

    first = order(1)
    assert order(1) == first
    assert order(2) != first
    assert sorted(first) == sorted(reader(shards).read(i)[2].tobytes() for i in range(24))
    assert first != sorted(first)


def write_examples(path, examples) -> str:
    with open(path, "wb") as f:
        for e in examples:
            f.write(frame(encode_example(e)))
    write_index(str(path), str(path) + ".idx")
    return str(path)


def test_fixed_and_variable_length_shapes(tmp_path):
    path = write_examples(
        tmp_path / "shapes.tfrecord",
        [
            {"s": 7, "one": [5], "m": list(range(6)), "f": [0.5, 1.5], "v": [1, 2, 3, 4], "text": b"abc"},
            {"s": 8, "one": [6], "m": list(range(6, 12)), "f": [2.5, 3.5], "v": [9, 8], "text": b""},
        ],
    )
    features = {
        "s": tfrec.FixedLenFeature([], tfrec.int64, 0),
        "one": tfrec.FixedLenFeature([1], tfrec.int64, 0),
        "m": tfrec.FixedLenFeature([2, 3], tfrec.int64, 0),
        "f": tfrec.FixedLenFeature([2], tfrec.float32, 0.0),
        "v": tfrec.VarLenFeature(tfrec.int64, 0),
        "text": tfrec.FixedLenFeature([1], tfrec.string, ""),
    }
    r = TFRecordReader(device="cpu", op_id=0, path=path, index_path=path + ".idx", features=features)
    assert r.output_names == tuple(features)
    for record in range(2):
        s, one, m, f, v, text = r.read(record)
        assert s.shape == () and s.dtype == np.int64 and int(s) == 7 + record
        assert one.shape == (1,) and one.tolist() == [5 + record]
        assert m.shape == (2, 3) and m.ravel().tolist() == list(range(6 * record, 6 * record + 6))
        assert f.dtype == np.float32 and f.tolist() == [[0.5, 1.5], [2.5, 3.5]][record]
        assert v.dtype == np.int64 and v.tolist() == [[1, 2, 3, 4], [9, 8]][record]
        assert text.dtype == np.uint8 and text.tobytes() == (b"abc", b"")[record]
    r = TFRecordReader(
        device="cpu",
        op_id=0,
        path=path,
        index_path=path + ".idx",
        features={"v": tfrec.VarLenFeature([2], tfrec.int64, 0)},
    )
    assert r.read(0)[0].tolist() == [[1, 2], [3, 4]] and r.read(1)[0].shape == (1, 2)


def test_missing_and_miscounted_features(tmp_path):
    path = write_examples(tmp_path / "m.tfrecord", [{"label": [1, 2]}, {"other": b"x"}])

    def read_one(feature, index=1):
        r = TFRecordReader(device="cpu", op_id=0, path=path, index_path=path + ".idx", features={"label": feature})
        return r.read(index)[0]

    assert read_one(tfrec.FixedLenFeature([2], tfrec.int64, -1)).tolist() == [-1, -1]
    assert read_one(tfrec.FixedLenFeature([], tfrec.string, "none")).tobytes() == b"none"
    assert read_one(tfrec.VarLenFeature([2], tfrec.float32, 0.0)).shape == (0, 2)
    with pytest.raises(rp.ReaderError, match=r"m.tfrecord record 1 \(offset \d+\): feature 'label' is missing"):
        read_one(tfrec.FixedLenFeature([2], tfrec.int64))
    with pytest.raises(rp.ReaderError, match="record 0 .*'label' holds 2 int64 values, its FixedLenFeature shape"):
        read_one(tfrec.FixedLenFeature([1], tfrec.int64, 0), 0)
    with pytest.raises(rp.ReaderError, match="'label' holds int64 values, the spec asks for float32"):
        read_one(tfrec.VarLenFeature(tfrec.float32, 0.0), 0)
    with pytest.raises(rp.ReaderError, match="'label' holds 2 int64 values, not a multiple of partial_shape"):
        read_one(tfrec.VarLenFeature([3], tfrec.int64, 0), 0)


def copy_with_index(src: str, dst) -> str:
    shutil.copy(src, dst)
    shutil.copy(src + ".idx", str(dst) + ".idx")
    return str(dst)


def test_a_corrupt_record_is_named_when_read(labelled, tmp_path):
    path = copy_with_index(labelled, tmp_path / "bad.tfrecord")
    r = reader(path)
    offset, size = int(r.table.offsets[6]), int(r.table.sizes[6])
    with open(path, "r+b") as f:
        f.seek(offset + size // 2)
        byte = f.read(1)
        f.seek(offset + size // 2)
        f.write(bytes([byte[0] ^ 0x10]))
        f.seek(int(r.table.offsets[9]) + 3)  # the length field of record 9
        f.write(b"\x01")
    with pytest.raises(rp.ReaderError, match=rf"bad.tfrecord record 6 \(offset {offset}\): data CRC mismatch"):
        r.read(6)
    with pytest.raises(rp.ReaderError, match=r"bad.tfrecord record 9 \(offset \d+\): length CRC mismatch"):
        r.read(9)
    assert r.read(7)[0].size > 0
    with read(path=path, index_path=path + ".idx") as pipe:
        pipe.run()
        with pytest.raises(rp.SampleError, match=r"sample 6 .*bad.tfrecord record 6 .*: data CRC mismatch"):
            pipe.run()


def test_a_truncated_file_or_a_foreign_index_fails_at_open(labelled, shards, tmp_path):
    path = copy_with_index(labelled, tmp_path / "cut.tfrecord")
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 100)
    with pytest.raises(rp.ReaderError, match=r"index file .*cut.tfrecord.idx line 24 \(record 23\) does not match"):
        read(path=path, index_path=path + ".idx").build()
    with pytest.raises(rp.ReaderError, match=r"index file .*train-1.tfrecord.idx line \d+ \(record \d+\) does not"):
        read(path=labelled, index_path=shards[1] + ".idx").build()
    os.remove(path + ".idx")
    with pytest.raises(rp.ReaderError, match=r"cut.tfrecord.idx' .* create it with `raypipe index tfrecord .*cut"):
        read(path=path, index_path=path + ".idx").build()


def test_layout_and_features_change_the_digest(shards):
    a = reader(shards).digest()
    b = reader(shards, features={**IMAGE_FEATURES, "image/class/label": tfrec.FixedLenFeature([], tfrec.int64, -1)})
    assert a == reader(shards).digest() != b.digest() != reader(shards[:1]).digest()


@pytest.mark.parametrize(
    "args, message",
    [
        ({"path": "a.tfrecord"}, r"index_path is required .* `raypipe index tfrecord FILE`"),
        ({"path": ["a", "b"], "index_path": ["a.idx"]}, r"2 path\(s\) but 1 index_path\(s\)"),
        ({"index_path": "a.idx"}, "path is required"),
        ({"path": "a", "index_path": "a.idx", "features": {}}, "features must be a non-empty dict"),
        ({"path": "a", "index_path": "a.idx", "features": {"x": 3}}, "feature 'x' must come from raypipe.tfrecord"),
        ({"path": "a", "index_path": "a.idx", "num_shards": 0}, "num_shards must be a positive int"),
    ],
)
def test_argument_errors(args, message):
    args.setdefault("features", IMAGE_FEATURES)
    with pytest.raises(rp.ArgumentError, match=message):
        read(**args).build()


def test_feature_spec_errors():
    with pytest.raises(rp.ArgumentError, match="no tensors of strings"):
        tfrec.FixedLenFeature([2], tfrec.string, "")
    with pytest.raises(rp.ArgumentError, match="VarLenFeature is not supported"):
        tfrec.VarLenFeature(tfrec.string, "")
    with pytest.raises(rp.ArgumentError, match="invalid default_value 'x'"):
        tfrec.FixedLenFeature([], tfrec.int64, "x")
    with pytest.raises(rp.ArgumentError, match="dtype must be"):
        tfrec.FixedLenFeature([], 7, 0)
    assert (tfrec.int64, tfrec.string, tfrec.float32) == (0, 1, 2)  # DALI's values
    assert repr(tfrec.VarLenFeature([2], tfrec.float32, 1)) == "VarLenFeature([2], float32, 1.0)"
