"""The container readers over object-store URLs in one process: what ``raypipe convert`` wrote,
uploaded to a bucket, reads back exactly as the local files (data and index files on the bucket,
extents as byte-range requests); LMDB on a bucket is refused, saying what to do instead."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn
from raypipe.convert.plan import list_source
from raypipe.convert.run import convert
from raypipe.errors import RaypipeError
from raypipe.formats.registry import get, read_converted

SHARDED = ("tfrecord", "webdataset", "recordio")


@pytest.fixture(scope="module")
def converted(tmp_path_factory, jpeg_files, s3_server):
    """Per format: (local folder, its URL on the bucket) of the 24 JPEGs labelled by index."""
    root = tmp_path_factory.mktemp("bucket-containers")
    listing = root / "list.txt"
    listing.write_text("".join(f"{p} {i}\n" for i, p in enumerate(jpeg_files)))
    out = {}
    for fmt in (*SHARDED, "caffe"):
        dst = str(root / fmt)
        convert(list_source(str(listing)), dst, get(fmt), part_size=7, workers=1)
        out[fmt] = (dst, s3_server.upload(dst, "containers", fmt))
    return out


@rp.pipeline_def(batch_size=24, num_threads=2)
def whole(dst):
    jpegs, labels = read_converted(dst, name="Reader")
    return jpegs, labels


def _samples(dst: str) -> tuple[list[bytes], list[int], dict]:
    pipe = whole(dst=dst)
    jpegs, labels = pipe.run()
    stats = pipe.read_stats()
    pipe.close()
    data = [np.asarray(jpegs.at(i)).tobytes() for i in range(len(jpegs))]
    return data, [int(np.asarray(labels.at(i)).ravel()[0]) for i in range(len(labels))], stats


@pytest.mark.parametrize("fmt", SHARDED)
def test_a_converted_dataset_on_a_bucket_reads_back_exactly(converted, jpeg_files, fmt):
    local, url = converted[fmt]
    mine, theirs = _samples(url), _samples(local)
    assert mine[:2] == theirs[:2] and sorted(mine[1]) == list(range(len(jpeg_files)))
    assert [bytes(open(jpeg_files[label], "rb").read()) for label in mine[1]] == mine[0]
    assert mine[2]["extent_reads"] > 0, mine[2]


def test_lmdb_on_a_bucket_is_refused_saying_what_to_do(converted):
    with pytest.raises(RaypipeError, match=r"is on an object store: LMDB is memory-mapped and needs a local copy"):
        _samples(converted["caffe"][1])


@rp.pipeline_def(batch_size=4, num_threads=1)
def _tfrecord(path, index_path):
    from raypipe import tfrecord

    out = fn.readers.tfrecord(
        path=path, index_path=index_path, features={"image/encoded": tfrecord.FixedLenFeature((), tfrecord.string, "")}
    )
    return out["image/encoded"]


def test_a_missing_index_or_data_object_is_named_before_any_batch(converted):
    _, url = converted["tfrecord"]
    data = f"{url}/shard-00000-of-00004.tfrecord"
    with pytest.raises(RaypipeError, match=r"index file '.*none.idx' for .* does not exist"):
        _tfrecord(path=data, index_path=f"{url}/none.idx").build()
    with pytest.raises(RaypipeError, match=r"cannot open 's3://containers/tfrecord/gone.tfrecord': .*no such object"):
        _tfrecord(path=f"{url}/gone.tfrecord", index_path=f"{data}.idx").build()
