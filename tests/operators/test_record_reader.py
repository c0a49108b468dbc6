"""The container readers' images: a view of their record where that holds no more memory than the
record (read alone, as under a global shuffle), a copy where the record lies in an extent read
ahead (which a view would keep alive)."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest

from raypipe.convert.plan import list_source
from raypipe.convert.run import convert
from raypipe.formats.registry import get
from raypipe.keyed_random import SampleContext
from raypipe.operators.mxnet_reader import MXNetReader
from raypipe.operators.record_reader import record_output
from raypipe.operators.tfrecord_reader import TFRecordReader
from raypipe.operators.webdataset_reader import WebDatasetReader
from raypipe.tfrecord import FixedLenFeature, int64, string


def owner(a: object) -> object:
    """The object whose memory ``a`` (an array or memoryview) lies in."""
    while True:
        below = a.base if isinstance(a, np.ndarray) else getattr(a, "obj", None)
        if below is None:
            return a
        a = below


def test_record_output_views_a_record_of_its_own_and_copies_out_of_an_extent():
    record = np.arange(100, dtype=np.uint8)
    piece = record[10:20]
    assert record_output(record, piece) is piece
    extent = np.arange(1000, dtype=np.uint8)
    in_extent = extent[100:200]
    copied = record_output(in_extent, in_extent[10:20])
    assert owner(copied) is copied and copied.tobytes() == extent[110:120].tobytes()
    joined = np.concatenate([in_extent[:3], in_extent[5:9]])  # a split record, joined: already its own
    assert record_output(in_extent, joined) is joined


def reader_of(fmt: str, dst: str):
    shards = sorted(glob.glob(os.path.join(dst, "shard-*")))
    data = [p for p in shards if not p.endswith(".idx")]
    indexes = [get(fmt).index_path(p) for p in data]
    if fmt == "tfrecord":
        features = {
            "image/encoded": FixedLenFeature((), string, ""),
            "image/class/label": FixedLenFeature([1], int64, -1),
        }
        return TFRecordReader("cpu", 0, path=data, index_path=indexes, features=features)
    if fmt == "webdataset":
        return WebDatasetReader("cpu", 0, paths=data, index_paths=indexes, ext=["jpg", "cls"])
    return MXNetReader("cpu", 0, path=data, index_path=indexes)


@pytest.mark.parametrize("fmt", ["tfrecord", "webdataset", "recordio"])
@pytest.mark.parametrize("ahead", [False, True], ids=["a record at a time", "extents read ahead"])
def test_an_image_holds_no_more_memory_than_its_record(tmp_path, jpeg_root, jpeg_files, fmt, ahead):
    dst = str(tmp_path / fmt)
    convert(list_source(jpeg_root), dst, get(fmt), part_size=8, workers=1)
    reader = reader_of(fmt, dst)
    assert len(reader) == 24  # lists the records, as a pipeline's build does
    order = [5, 17, 0, 23, 9]
    if ahead:
        reader.will_read(order, sequential=True)
    for i in order:
        image = reader.read(i)[0]
        with open(jpeg_files[i], "rb") as f:
            assert image.tobytes() == f.read()
        held = owner(image)
        record = int(reader.table.sizes[i])
        assert isinstance(held, np.ndarray)
        if ahead:  # a copy: the extent of 8 records is not kept alive by one image
            assert held.nbytes == image.nbytes
        else:  # a view of the record's own array: no copy
            assert held.nbytes == record > image.nbytes
    stats = reader.io_stats()
    assert (stats["extent_reads"] > 0) == ahead and (stats["direct_reads"] > 0) != ahead
    reader.close()


@pytest.mark.parametrize("fmt", ["tfrecord", "webdataset", "recordio"])
def test_a_chunk_reads_as_its_samples_read_one_by_one(tmp_path, jpeg_root, fmt):
    """The CPU stage of a pipeline whose decode is deferred to the GPU reads a chunk at a time;
    a sample it cannot read makes the chunk raise, and the stage then reads sample by sample."""
    dst = str(tmp_path / fmt)
    convert(list_source(jpeg_root), dst, get(fmt), part_size=8, workers=1)
    reader = reader_of(fmt, dst)
    order = [9, 2, 23, 2, 16]
    chunk = reader.run_chunk([], {}, [SampleContext(0, 0, i) for i in order])
    alone = [reader.run_sample([], {}, SampleContext(0, 0, i)) for i in order]
    assert len(chunk) == len(order)
    for a, b in zip(chunk, alone):
        assert [x.tobytes() for x in a] == [x.tobytes() for x in b]
    assert reader.run_chunk([], {}, []) == []
    with pytest.raises(IndexError, match="outside"):
        reader.run_chunk([], {}, [SampleContext(0, 0, 3), SampleContext(0, 0, 24)])
    reader.close()
