"""readers.file on real folders, list files and explicit lists; bad input names the culprit."""

from __future__ import annotations

import os

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn


@rp.pipeline_def(batch_size=4, num_threads=2, seed=0)
def read(**reader_args):
    jpegs, labels = fn.readers.file(name="Reader", **reader_args)
    return jpegs, labels


def _epoch(pipe):
    data, labels = [], []
    while True:
        jpegs, lab = pipe.run()
        info = pipe.last_batch_info
        data.extend(jpegs.at(i).tobytes() for i, pad in enumerate(info.is_pad) if not pad)
        labels.extend(int(v) for v, pad in zip(np.asarray(lab).ravel(), info.is_pad) if not pad)
        if info.last_in_epoch:
            return data, labels


def test_file_root_labels_follow_sorted_class_folders(jpeg_root, jpeg_files):
    with read(file_root=jpeg_root) as pipe:
        assert pipe.epoch_size("Reader") == 24
        data, labels = _epoch(pipe)
    assert labels == [i // 6 for i in range(24)]
    assert data == [open(p, "rb").read() for p in jpeg_files]


def test_file_list_paths_are_relative_to_the_list(jpeg_root, jpeg_files, tmp_path):
    listing = os.path.join(jpeg_root, "list.txt")
    with open(listing, "w") as f:
        for i, p in enumerate(jpeg_files[:5]):
            f.write(f"{os.path.relpath(p, jpeg_root)} {10 + i}\n\n")
    with read(file_list=listing) as pipe:
        data, labels = _epoch(pipe)
    assert labels == [10, 11, 12, 13, 14]
    assert data == [open(p, "rb").read() for p in jpeg_files[:5]]


def test_files_with_and_without_labels(jpeg_files):
    with read(files=jpeg_files[:3], labels=[7, 8, 9]) as pipe:
        assert _epoch(pipe)[1] == [7, 8, 9]
    with read(files=jpeg_files[:3]) as pipe:
        assert _epoch(pipe)[1] == [0, 1, 2]


def test_random_access_reads_any_index(jpeg_files):
    from raypipe.operators.readers import FileReader

    reader = FileReader(device="cpu", op_id=0, files=jpeg_files, labels=list(range(24)))
    reader.prepare()
    data, label = reader.read(17)
    assert data.tobytes() == open(jpeg_files[17], "rb").read() and label.tolist() == [17]
    with pytest.raises(IndexError, match="sample index 24 outside"):
        reader.read(24)


def test_shards_split_and_move(jpeg_files):
    seen = []
    for shard in range(3):
        with read(files=jpeg_files, labels=list(range(24)), shard_id=shard, num_shards=3) as pipe:
            assert pipe.reader_meta("Reader")["number_of_shards"] == 3
            seen.append(_epoch(pipe)[1])
            assert _epoch(pipe)[1] == list(range(((shard + 1) % 3) * 8, ((shard + 1) % 3) * 8 + 8))
    assert seen == [list(range(0, 8)), list(range(8, 16)), list(range(16, 24))]


def test_missing_and_empty_sources(tmp_path):
    with pytest.raises(rp.ReaderError, match="file_root '.*nowhere' does not exist"):
        read(file_root=str(tmp_path / "nowhere")).build()
    (tmp_path / "empty" / "cls").mkdir(parents=True)
    with pytest.raises(rp.ReaderError, match="file_root '.*empty' holds no images"):
        read(file_root=str(tmp_path / "empty")).build()
    with pytest.raises(rp.ReaderError, match="cannot open file_list '.*missing.txt'"):
        read(file_list=str(tmp_path / "missing.txt")).build()


def test_file_list_line_without_label_names_the_line(tmp_path):
    listing = tmp_path / "list.txt"
    listing.write_text("a.jpg 0\nb.jpg\n")
    with pytest.raises(rp.ReaderError, match=r"list.txt:2: expected 'path label', got 'b.jpg'"):
        read(file_list=str(listing)).build()
    listing.write_text("a.jpg zero\n")
    with pytest.raises(rp.ReaderError, match=r"list.txt:1: label 'zero' is not an integer"):
        read(file_list=str(listing)).build()


def test_missing_file_is_named_when_read(jpeg_files, tmp_path):
    missing = str(tmp_path / "gone.jpg")
    with read(files=[jpeg_files[0], missing]) as pipe:
        with pytest.raises(rp.SampleError, match=r"sample 1 \(.*gone.jpg\).*cannot read"):
            pipe.run()


@pytest.mark.parametrize(
    "args, message",
    [
        ({}, "exactly one of file_root, file_list, files"),
        ({"files": ["a"], "file_root": "b"}, "exactly one of"),
        ({"files": ["a", "b"], "labels": [1]}, "2 files but 1 labels"),
        ({"files": ["a"], "shard_id": 2, "num_shards": 2}, r"shard_id must be in \[0, 2\)"),
        ({"files": ["a"], "initial_fill": 0}, "initial_fill must be a positive int"),
    ],
)
def test_argument_errors(args, message):
    with pytest.raises(rp.ArgumentError, match=message):
        read(**args).build()


@pytest.mark.parametrize("pad", [True, False])
def test_epoch_size_and_reader_meta_match_dali(jpeg_files, pad):
    dali = pytest.importorskip("nvidia.dali")
    files = jpeg_files[:23]
    args = {"files": files, "shard_id": 0, "num_shards": 2, "pad_last_batch": pad}

    @dali.pipeline_def(batch_size=4, num_threads=1, device_id=None)
    def dali_read():
        return tuple(dali.fn.readers.file(name="Reader", **args))

    reference = dali_read()
    reference.build()
    with read(**args) as pipe:
        assert pipe.epoch_size("Reader") == reference.epoch_size("Reader") == (24 if pad else 23)
        meta = pipe.reader_meta("Reader")
        for key, value in reference.reader_meta("Reader").items():
            assert meta[key] == value, key
