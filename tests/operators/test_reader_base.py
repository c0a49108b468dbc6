"""What every reader shares (:mod:`raypipe.operators.reader_base`): the dataset identity position
states record."""

from __future__ import annotations

import hashlib
import os
import re
import shutil

import pytest

import raypipe as rp
from raypipe import tfrecord
from raypipe.operators import reader_base
from raypipe.operators.path_table import PathTable
from raypipe.operators.readers import FileReader
from raypipe.storage import urls


def _hash_one_by_one(paths: list[str]) -> str:
    """The definition: every path made absolute and related to the common folder on its own."""
    where = [urls.as_posix(p) for p in paths]
    common = os.path.commonpath(where) if len(where) > 1 else ""
    h = hashlib.sha256()
    for path, at in zip(paths, where):
        h.update(os.path.relpath(at, common).encode() if common else os.path.basename(path).encode())
        h.update(b"\0")
    return h.hexdigest()


LISTS = {
    "empty": [],
    "one file": ["/data/train/a/x.jpg"],
    "class folders": [f"/data/train/c{c}/img{i}.jpg" for c in range(3) for i in range(4)],
    "one folder": ["/data/train/a/x.jpg", "/data/train/a/y.jpg"],
    "relative": ["train/a/x.jpg", "train/b/y.jpg", "z.jpg", "w.jpg"],
    "dot and double slash": ["./train//a/x.jpg", "train/./b/y.jpg"],
    "parent references": ["/data/a/../b/x.jpg", "/data/b/y.jpg", "/data/c/sub/../z.jpg"],
    "files at the root": ["/x.jpg", "/y.jpg", "/d/z.jpg"],
    "the same file twice": ["/data/a/x.jpg", "/data/a/x.jpg"],
    "a file beside the folder of the others": ["/data/a/x.jpg", "/data/a/sub/y.jpg", "/data/a/sub/z.jpg"],
    "a name that is also a folder": ["s3://bucket/a/b", "s3://bucket/a/b/c", "s3://bucket/a/b/d"],
    "URLs": [f"s3://bucket/train/c{c}/img{i}.jpg" for c in range(2) for i in range(3)],
    "URLs at the bucket's top": ["s3://bucket/x.jpg", "s3://bucket/y.jpg"],
    "URL keys not normalised": ["s3://bucket/a//x.jpg", "s3://bucket/a/../b/y.jpg", "gs://other/z.jpg"],
    "a folder ending in a slash": ["/data/a/", "/data/b/x.jpg"],
}


#: lists hashed folder by folder; the others are related one path at a time
BY_FOLDER = {"class folders", "one folder", "relative", "dot and double slash", "parent references", "URLs"}
BY_FOLDER |= {"files at the root", "URLs at the bucket's top"}


@pytest.mark.parametrize("as_table", [False, True], ids=["list", "PathTable"])
@pytest.mark.parametrize("name", LISTS)
def test_paths_hash_is_every_path_related_on_its_own(name, as_table, monkeypatch):
    """A list, and the same paths as a table (hashed a folder's names at a time)."""
    paths = LISTS[name]
    expected = _hash_one_by_one(paths)
    if name in BY_FOLDER:
        monkeypatch.setattr(reader_base, "_relative_one_by_one", None)  # not called
    assert reader_base.paths_hash(PathTable.of(paths) if as_table else paths).hexdigest() == expected


@pytest.mark.parametrize(
    "groups",
    [
        [("/data/train/c", ["0/a.jpg", "1/b.jpg"])],  # a prefix that is no folder
        [("", ["/data/a/x.jpg", "/data/b/y.jpg"])],  # names that hold folders (a file list's absolute paths)
        [("/data/a/", ["x.jpg"]), ("/data/b/", ["y.jpg"]), ("/data/a/", ["z.jpg"])],  # a folder twice
        [("/data/a/", ["x.jpg", "y.jpg"]), ("/data/", ["a"])],  # a name that is also a folder
    ],
    ids=["prefix no folder", "names with folders", "a folder twice", "name and folder"],
)
def test_a_table_of_any_shape_hashes_as_its_paths(groups):
    table = PathTable(groups)
    assert reader_base.paths_hash(table).hexdigest() == _hash_one_by_one(list(table))


def test_a_reader_works_its_digest_out_once(jpeg_files, monkeypatch):
    """A pipeline asks for the digest at every ``state_dict()``: an ImageNet-sized listing must not
    be hashed again each time."""
    op = FileReader("cpu", 0, files=jpeg_files[:6])
    calls = []
    content_digest = op.content_digest
    monkeypatch.setattr(op, "content_digest", lambda: calls.append(1) or content_digest())
    assert op.digest() == op.digest() == content_digest()
    assert len(calls) == 1


FEATURES = {"x": tfrecord.FixedLenFeature((), tfrecord.string, "")}


@pytest.mark.parametrize(
    "reader, args",
    [
        ("file", {"file_root": "~/imagenet/train"}),
        ("file", {"file_list": "~/train.txt"}),
        ("file", {"files": ["/data/a.jpg", "~/b.jpg"]}),
        ("webdataset", {"paths": "~/train.tar", "ext": "jpg"}),
        ("tfrecord", {"path": "~/train.tfrecord", "index_path": "/data/train.idx", "features": FEATURES}),
        ("caffe", {"path": "~/train-lmdb"}),
        ("numpy", {"file_root": "~/volumes"}),
        ("coco", {"file_root": "~/coco/images", "annotations_file": "/data/instances.json"}),
        ("sequence", {"file_root": "~/videos", "sequence_length": 2}),
    ],
)
def test_a_path_beginning_with_a_tilde_is_refused_before_any_read(reader, args):
    """Readers take paths as written, as DALI does; ``~`` would fail only at the first read, as a
    missing file. The error says what to pass instead."""
    path = next(v if isinstance(v, str) else v[-1] for v in args.values() if "~" in str(v))

    @rp.pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def reading():
        out = getattr(rp.fn.readers, reader)(**args)
        return tuple(out.values()) if isinstance(out, dict) else out

    expected = re.escape(f"os.path.expanduser({path!r}) ({os.path.expanduser(path)!r})")
    with pytest.raises(
        rp.ArgumentError, match=rf"readers.{reader}: .* {re.escape(repr(path))} begins with '~'.*{expected}"
    ):
        reading().build()


def test_a_folder_named_tilde_is_a_path_as_written(tmp_path, monkeypatch, jpeg_files):
    (tmp_path / "~" / "a").mkdir(parents=True)
    shutil.copy(jpeg_files[0], tmp_path / "~" / "a" / "x.jpg")
    shutil.copy(jpeg_files[1], tmp_path / "~" / "a" / "y.jpg")
    monkeypatch.chdir(tmp_path)
    assert len(FileReader("cpu", 0, file_root="~")) == 2
