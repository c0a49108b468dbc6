"""One contract, every reader (as torchdata's node conformance test): the file reader and each
container reader over the same 24 JPEGs must agree on length, order, bytes and labels, shard
and shuffle the same way, name their samples, survive close(), keep a digest that ignores
where the data lives, skip bad records on request, and be reachable through ``ops`` under
DALI's class names and aliases."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, ops
from raypipe import tfrecord as tfrec
from raypipe.convert.plan import list_source
from raypipe.convert.run import convert
from raypipe.errors import ReaderError, SampleError
from raypipe.formats.registry import FORMATS, get
from raypipe.graph import Graph, defining
from raypipe.reader_order import listing_order

READERS = ["file", "caffe", "caffe2", "tfrecord", "webdataset", "mxnet"]
FORMAT_OF = {
    "caffe": "caffe",
    "caffe2": "caffe2",
    "tfrecord": "tfrecord",
    "webdataset": "webdataset",
    "mxnet": "recordio",
}


@pytest.fixture(scope="module")
def data(tmp_path_factory, jpeg_root):
    root = tmp_path_factory.mktemp("conformance")
    out = {"file": jpeg_root}
    source = list_source(jpeg_root)
    for reader, fmt in FORMAT_OF.items():
        out[reader] = str(root / fmt)
        convert(source, out[reader], get(fmt), part_size=10, workers=1)
    return out


def reader_args(reader: str, where: str) -> dict:
    """The DALI arguments of ``reader`` over the data at ``where``."""
    if reader == "file":
        return {"file_root": where}
    if reader in ("caffe", "caffe2"):
        return {"path": where}
    fmt = FORMATS[FORMAT_OF[reader]]
    suffix = fmt.writer_class().suffix
    paths = sorted(os.path.join(where, f) for f in os.listdir(where) if f.endswith(suffix))
    index = [fmt.index_path(p) for p in paths]
    if reader == "tfrecord":
        return {
            "path": paths,
            "index_path": index,
            "features": {
                "image/encoded": tfrec.FixedLenFeature((), tfrec.string, ""),
                "image/class/label": tfrec.FixedLenFeature([1], tfrec.int64, -1),
            },
        }
    if reader == "webdataset":
        return {"paths": paths, "index_paths": index, "ext": ["jpg", "cls"]}
    return {"path": paths, "index_path": index}


def make(reader: str, where: str, **extra):
    """The reader operator itself, prepared."""
    graph = Graph()
    with defining(graph):
        getattr(fn.readers, reader)(**reader_args(reader, where), **extra)
    op = graph.nodes[0].op
    op.prepare()
    return op


def sample(op, i) -> tuple[bytes, int]:
    out = op.read(i)
    image, label = out[0], out[1]
    label = int(bytes(label).decode()) if op.schema.name == "readers.webdataset" else int(np.asarray(label).ravel()[0])
    return np.asarray(image).tobytes(), label


@pytest.mark.parametrize("reader", READERS)
def test_same_samples_in_the_same_order(data, jpeg_files, reader):
    op = make(reader, data[reader])
    assert len(op) == 24
    for i, path in enumerate(jpeg_files):
        image, label = sample(op, i)
        assert image == open(path, "rb").read()
        assert label == int(os.path.basename(os.path.dirname(path)).split("_")[1])
        assert os.path.basename(data[reader].rstrip("/")) in op.source_of(i) or reader == "file"
    op.close()


@pytest.mark.parametrize("reader", READERS)
def test_random_access_after_close_equals_sequential(data, reader):
    op = make(reader, data[reader])
    sequential = [sample(op, i) for i in range(24)]
    op.close()
    order = np.random.default_rng(0).permutation(24)
    op.will_read(order[:12])
    assert [sample(op, int(i)) for i in order] == [sequential[int(i)] for i in order]
    op.close()


@pytest.mark.parametrize("reader", READERS)
def test_shards_and_shuffle_follow_dalis_arguments(data, reader):
    seen = []
    for shard in range(3):
        op = make(reader, data[reader], shard_id=shard, num_shards=3, random_shuffle=True, initial_fill=4)
        batches = op.epoch_batches(batch_size=4, epoch=0, seed=1)
        assert op.meta(4)["batches_per_epoch"] == len(batches) == 2
        indices = [int(i) for b in batches for i in b.sample_indices]
        listing = listing_order(24, 0, 24) if reader == "file" else np.arange(24)
        assert sorted(indices) == sorted(listing[8 * shard : 8 * shard + 8]), "a slice of the listing, each once"
        assert indices == [int(i) for b in op.epoch_batches(4, 0, 1) for i in b.sample_indices], "deterministic"
        seen += indices
    assert sorted(seen) == list(range(24))


@pytest.mark.parametrize("reader", ["file", "caffe2", "tfrecord", "webdataset"])
def test_a_shuffled_shard_holds_dalis_samples(data, jpeg_files, reader):
    """DALI's file reader shuffles its listing once before sharding (a class-sorted folder gives
    every shard every class); its container readers shard the records as stored."""
    pytest.importorskip("nvidia.dali")
    from nvidia.dali import fn as dali_fn
    from nvidia.dali import pipeline_def
    from nvidia.dali import tfrecord as dali_tfrec

    index_of = {open(path, "rb").read(): i for i, path in enumerate(jpeg_files)}
    args = reader_args(reader, data[reader])
    if reader == "tfrecord":
        args["features"] = {"image/encoded": dali_tfrec.FixedLenFeature((), dali_tfrec.string, "")}
    shard_args = {"shard_id": 1, "num_shards": 3, "random_shuffle": True, "initial_fill": 1}

    @pipeline_def(batch_size=8, num_threads=1, device_id=None, seed=0)
    def pipe():
        out = getattr(dali_fn.readers, reader)(**args, **shard_args)
        return out["image/encoded"] if reader == "tfrecord" else out[0]

    p = pipe()
    p.build()
    batch = p.run()[0]
    theirs = [index_of[np.asarray(batch.at(i)).tobytes()] for i in range(8)]
    op = make(reader, data[reader], **shard_args)
    ours = [int(i) for i in op.epoch_batches(batch_size=8, epoch=0, seed=0)[0].sample_indices]
    op.close()
    assert ours == theirs
    assert (sorted(ours) == list(range(8, 16))) == (reader != "file")


@pytest.mark.parametrize("reader", READERS)
def test_digest_ignores_the_folder_and_sees_the_layout(data, tmp_path, reader):
    op = make(reader, data[reader])
    moved = str(tmp_path / "moved")
    shutil.copytree(data[reader], moved)
    assert make(reader, moved).digest() == op.digest()
    assert make(reader, moved, shard_id=1, num_shards=2).digest() == op.digest(), "sharding is not layout"
    op.close()


@pytest.mark.parametrize("reader", READERS)
def test_bad_arguments_fail_before_opening_anything(data, reader):
    args = reader_args(reader, data[reader])
    for key in ("file_root", "path", "paths", "index_path", "index_paths"):
        if key in args:  # nothing exists there: the argument check must come first
            args[key] = "/nonexistent/x" if isinstance(args[key], str) else ["/nonexistent/x"] * len(args[key])
    for bad, match in (({"shard_id": 2, "num_shards": 2}, "shard_id"), ({"on_error": "ignore"}, "on_error")):
        with pytest.raises(rp.ArgumentError, match=match):
            with defining(Graph()):
                getattr(fn.readers, reader)(**args, **bad)


@pytest.mark.parametrize("reader", ["file", "tfrecord", "mxnet"])
def test_on_error_skip_drops_a_bad_record_and_names_it(data, tmp_path, reader):
    where = str(tmp_path / reader)
    shutil.copytree(data[reader], where)
    op = make(reader, where)
    victim = op.source_of(5).split(" record ")[0]
    if reader == "file":  # listed, but gone when read
        os.remove(victim)
        os.symlink(str(tmp_path / "gone.jpg"), victim)
    else:
        with open(victim, "r+b") as f:  # sample 5 is record 5 of the first shard
            f.seek(int(op.table.offsets[5]) + (20 if reader == "tfrecord" else 0))
            f.write(b"\x00\x01\x02\x03")
    op.close()

    @rp.pipeline_def(batch_size=8, num_threads=2, device_id=None, seed=0)
    def pipe(on_error):
        jpegs, labels = (
            getattr(fn.readers, reader)(**reader_args(reader, where), on_error=on_error, name="Reader")[:2]
            if reader != "tfrecord"
            else _tf(where, on_error)
        )
        return fn.decoders.image(jpegs), labels

    p = pipe(on_error="skip")
    images, _ = p.run()
    assert len(images) == 7 and p.last_batch_info.sample_indices == [0, 1, 2, 3, 4, 6, 7]
    (skipped,) = p.skipped_samples
    assert skipped.sample_index == 5 and os.path.basename(victim) in skipped.source
    p.close()
    strict = pipe(on_error="raise")
    with pytest.raises((SampleError, ReaderError), match=os.path.basename(victim)):
        strict.run()
    strict.close()


def _tf(where, on_error):
    out = fn.readers.tfrecord(**reader_args("tfrecord", where), on_error=on_error, name="Reader")
    return out["image/encoded"], out["image/class/label"]


@pytest.mark.parametrize(
    "name, alias",
    [
        ("Caffe", "CaffeReader"),
        ("Caffe2", "Caffe2Reader"),
        ("TFRecord", "TFRecordReader"),
        ("MXNet", "MXNetReader"),
        ("File", "FileReader"),
        ("Webdataset", None),
        ("Sequence", "SequenceReader"),
    ],
)
def test_ops_classes_and_dalis_aliases_are_one_class(name, alias):
    cls = getattr(ops.readers, name)
    assert cls is getattr(ops.readers, name)
    if alias is not None:
        assert getattr(ops, alias) is cls


class ClassStyleMXNet(rp.Pipeline):
    """A DALI class-style pipeline through the long-lived alias ``ops.MXNetReader``."""

    def __init__(self, paths, indexes, **kwargs):
        super().__init__(**kwargs)
        self.input = ops.MXNetReader(path=paths, index_path=indexes, random_shuffle=False, name="Reader")
        self.decode = ops.decoders.Image(device="cpu")

    def define_graph(self):
        jpegs, labels = self.input()
        return self.decode(jpegs), labels


def test_a_class_style_pipeline_reads_through_an_alias(data, jpeg_files):
    args = reader_args("mxnet", data["mxnet"])
    pipe = ClassStyleMXNet(args["path"], args["index_path"], batch_size=6, num_threads=1, device_id=None)
    with pipe:
        images, labels = pipe.run()
        assert pipe.epoch_size("Reader") == 24 and len(images) == 6
        assert np.asarray(labels).ravel().tolist() == [0.0] * 6
        assert np.asarray(images.at(0)).shape[2] == 3


@pytest.mark.parametrize("reader", ["tfrecord", "webdataset", "mxnet"])
def test_in_order_reads_take_extents_and_a_global_shuffle_single_records(data, reader):
    from raypipe.epoch_plan import plan

    @rp.pipeline_def(batch_size=8, num_threads=2, device_id=None, seed=0)
    def pipe():
        out = getattr(fn.readers, reader)(**reader_args(reader, data[reader]), name="Reader")
        return list(out.values()) if isinstance(out, dict) else list(out)

    own = pipe()
    own.run()  # the reader's own order: its shard in order
    assert own.read_stats()["extent_reads"] > 0 and own.read_stats()["direct_reads"] == 0
    own.close()
    shuffled = pipe()
    epoch = plan(24, seed=0, epoch=0, world_size=1, batch_size=8, shuffle="global")
    shuffled.engine.drive((epoch.batch(0, k) for k in range(epoch.num_batches)), sequential=False)
    for _ in range(epoch.num_batches):
        shuffled.run()
    assert shuffled.read_stats() == {"direct_reads": 24, "extent_reads": 0, "extent_bytes": 0, "extent_hits": 0}
    shuffled.close()
