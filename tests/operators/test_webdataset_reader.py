"""readers.webdataset on real tar shards: outputs per ext entry, with or without DALI's index,
missing members, several shards, sharding and random access; bad data names the file."""

from __future__ import annotations

import io
import os
import tarfile

import numpy as np
import pytest

import raypipe as rp
import raypipe.operators.webdataset_reader  # noqa: F401  (registers readers.webdataset)
from raypipe import fn
from raypipe.errors import ArgumentError, ReaderError
from raypipe.formats.webdataset import WebDatasetWriter, write_index
from raypipe.operators.webdataset_reader import WebDatasetReader


def make_tar(path, members) -> str:
    with tarfile.open(path, "w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return str(path)


@pytest.fixture(scope="module")
def shards(tmp_path_factory, jpeg_root, jpeg_files) -> list[str]:
    """jpeg_files in three shards of 8 samples (``.jpg`` and ``.cls``), each with its index."""
    root = tmp_path_factory.mktemp("wds")
    paths = []
    for s in range(3):
        with WebDatasetWriter(str(root / f"shard-{s}.tar")) as writer:
            for i in range(8 * s, 8 * s + 8):
                writer.add(os.path.relpath(jpeg_files[i], jpeg_root), open(jpeg_files[i], "rb").read(), i // 6)
        paths.append(writer.path)
    return paths


def mixed_tar(path) -> str:
    """Samples with and without each member: a (jpg, cls), b (jpeg, cls), c (cls), d (JPG)."""
    return make_tar(
        path,
        [
            ("a.jpg", b"A" * 10),
            ("a.cls", b"1"),
            ("b.jpeg", b"B" * 7),
            ("b.cls", b"2"),
            ("c.cls", b"3"),
            ("d.JPG", b"D"),
        ],
    )


@rp.pipeline_def(batch_size=4, num_threads=1, device_id=None, seed=0)
def read(**reader_args):
    return fn.readers.webdataset(name="Reader", **reader_args)


def epoch(**reader_args) -> list[list[bytes]]:
    """One epoch's outputs (per output, the samples' bytes), padding left out."""
    with read(**reader_args) as pipe:
        result = None
        while True:
            outputs = pipe.run()
            info = pipe.last_batch_info
            if result is None:
                result = [[] for _ in outputs]
            for got, out in zip(result, outputs):
                got.extend(out.at(i).tobytes() for i, pad in enumerate(info.is_pad) if not pad)
            if info.last_in_epoch:
                return result


def test_round_trip_of_the_writer(shards, jpeg_files):
    images, labels = epoch(paths=shards, index_paths=[p + ".idx" for p in shards], ext=["jpg", "cls"])
    assert images == [open(p, "rb").read() for p in jpeg_files]
    assert [int(v) for v in labels] == [i // 6 for i in range(24)]


def test_without_index_equals_with_index(shards):
    with_index = epoch(paths=shards, index_paths=[p + ".idx" for p in shards], ext=["cls", "jpg"])
    assert epoch(paths=shards, ext=["cls", "jpg"]) == with_index
    assert (
        epoch(paths=shards[::-1], ext=["cls", "jpg"])[0] == with_index[0][16:] + with_index[0][8:16] + with_index[0][:8]
    )


def test_one_ext_entry_is_one_output_of_uint8_bytes(tmp_path):
    path = mixed_tar(tmp_path / "m.tar")
    reader = WebDatasetReader(device="cpu", op_id=0, paths=path, ext="cls")
    assert reader.num_outputs == 1 and len(reader) == 4
    (label,) = reader.read(2)
    assert label.dtype == np.uint8 and label.shape == (1,) and label.tobytes() == b"3"
    with read(paths=path, ext="cls") as pipe:
        (labels,) = pipe.run()
    assert [labels.at(i).tobytes() for i in range(4)] == [b"1", b"2", b"3", b""]


def test_ext_alternatives_and_case(tmp_path):
    path = mixed_tar(tmp_path / "m.tar")
    assert epoch(paths=path, ext=["jpg;jpeg", "cls"]) == [[b"A" * 10, b"B" * 7, b"", b""], [b"1", b"2", b"3", b""]]
    assert epoch(paths=path, ext="jpg")[0] == [b"A" * 10, b"", b"", b""]
    assert epoch(paths=path, ext="JPG;jpeg", case_sensitive_extensions=False)[0] == [b"A" * 10, b"B" * 7, b"", b"D"]


def test_missing_component_behavior(tmp_path):
    path = mixed_tar(tmp_path / "m.tar")
    assert epoch(paths=path, ext=["jpg;jpeg", "cls"], missing_component_behavior="skip") == [
        [b"A" * 10, b"B" * 7],
        [b"1", b"2"],
    ]
    write_index(path, str(tmp_path / "m.idx"))
    with pytest.raises(
        ReaderError, match=r"m\.tar: sample 'c' \(.*m\.idx line 4\) has no member with extension 'jpeg;jpg'"
    ):
        read(
            paths=path,
            index_paths=[str(tmp_path / "m.idx")],
            ext=["cls", "jpg;jpeg"],
            missing_component_behavior="error",
        ).build()
    with pytest.raises(ReaderError, match=r"m\.tar: sample 'c' has no member with extension 'jpeg;jpg'"):
        read(paths=path, ext=["jpg;jpeg", "cls"], missing_component_behavior="Error").build()
    with pytest.raises(ReaderError, match="no sample of .*m.tar has members for ext 'png'"):
        read(paths=path, ext="png", missing_component_behavior="skip").build()


def test_dtypes_reinterpret_the_bytes(tmp_path):
    values = np.arange(5, dtype=np.int32)
    path = make_tar(
        tmp_path / "d.tar", [("a.bin", values.tobytes()), ("a.f", np.float32([1.5]).tobytes()), ("b.f", b"")]
    )
    reader = WebDatasetReader(device="cpu", op_id=0, paths=path, ext=["bin", "f"], dtypes=[rp.types.INT32, "float32"])
    data, scale = reader.read(0)
    assert data.dtype == np.int32 and data.tolist() == values.tolist() and scale.tolist() == [1.5]
    assert reader.read(1)[0].dtype == np.int32 and reader.read(1)[0].shape == (0,)
    bad = make_tar(tmp_path / "bad.tar", [("a.bin", b"12345")])
    with pytest.raises(ReaderError, match=r"bad\.tar: member 'a\.bin' has 5 bytes, not a whole number of int32"):
        WebDatasetReader(device="cpu", op_id=0, paths=bad, ext="bin", dtypes=[rp.types.INT32]).prepare()


def test_truncated_tar_names_the_tar_and_member_at_open(tmp_path):
    path = mixed_tar(tmp_path / "t.tar")
    with open(path, "r+b") as f:
        f.truncate(512 * 5 + 3)  # inside b.jpeg's data
    with pytest.raises(ReaderError, match=r"t\.tar: member 'b\.jpeg' .* the tar is truncated"):
        read(paths=path, ext="cls").build()


def test_index_that_does_not_match_names_the_index(shards, tmp_path):
    index = str(tmp_path / "wrong.idx")
    write_index(shards[1], index)
    with pytest.raises(ReaderError, match=r"wrong\.idx line .*the index does not match .*shard-0\.tar"):
        read(paths=shards[0], index_paths=[index], ext="jpg").build()
    lines = open(shards[0] + ".idx").read().splitlines()
    with open(index, "w") as f:
        f.write("\n".join(["v1.2 9", *lines[1:]]) + "\n")
    with pytest.raises(ReaderError, match=r"wrong\.idx line 1: the header says 9 samples but 8 lines follow"):
        read(paths=shards[0], index_paths=[index], ext="jpg").build()


def test_shards_and_random_access_equal_sequential_reading(shards):
    sequential = epoch(paths=shards, ext=["jpg", "cls"])
    for shard in range(3):
        got = epoch(paths=shards, ext=["jpg", "cls"], shard_id=shard, num_shards=3)
        assert got == [out[8 * shard : 8 * shard + 8] for out in sequential]
    reader = WebDatasetReader(device="cpu", op_id=0, paths=shards, ext=["jpg", "cls"])
    for i in (23, 0, 9, 16):
        assert [o.tobytes() for o in reader.read(i)] == [sequential[0][i], sequential[1][i]]
    assert "shard-1.tar record 1" in reader.source_of(9) and "class_001_img_00003_jpg" in reader.source_of(9)
    with pytest.raises(IndexError, match="sample index 24 outside"):
        reader.read(24)


def test_consecutive_samples_are_read_as_extents(shards):
    reader = WebDatasetReader(device="cpu", op_id=0, paths=shards, ext=["cls", "jpg"])
    direct = [[o.tobytes() for o in reader.read(i)] for i in range(8)]
    reader.close()
    reader.will_read(list(range(8)), sequential=True)  # as the executor announces batches read in order
    assert [[o.tobytes() for o in reader.read(i)] for i in range(8)] == direct
    stats = reader.io_stats()
    assert stats["extent_reads"] == 1 and stats["extent_hits"] == 8
    reader.close()


def test_digest_follows_the_layout_not_the_folder(shards, tmp_path):
    def digest(paths, ext):
        return WebDatasetReader(device="cpu", op_id=0, paths=paths, ext=ext).digest()

    moved = []
    for p in shards:
        moved.append(str(tmp_path / os.path.basename(p)))
        with open(p, "rb") as src, open(moved[-1], "wb") as dst:
            dst.write(src.read())
    assert digest(shards, ["jpg", "cls"]) == digest(moved, ["jpg", "cls"])
    assert digest(shards, ["jpg", "cls"]) != digest(shards, ["cls", "jpg"])


@pytest.mark.parametrize("behavior, size", [("empty", 4), ("skip", 2)])
def test_outputs_equal_dalis(tmp_path, behavior, size):
    pytest.importorskip("nvidia.dali")
    from nvidia.dali import fn as dali_fn
    from nvidia.dali import pipeline_def

    path = mixed_tar(tmp_path / "m.tar")

    @pipeline_def(batch_size=size, num_threads=1, device_id=None)
    def dali():
        images, labels = dali_fn.readers.webdataset(
            paths=[path], ext=["jpg;jpeg", "cls"], missing_component_behavior=behavior
        )
        return images, labels

    p = dali()
    p.build()
    expected = [[np.asarray(out[i]).tobytes() for i in range(size)] for out in p.run()]
    assert epoch(paths=path, ext=["jpg;jpeg", "cls"], missing_component_behavior=behavior) == expected


@pytest.mark.parametrize(
    "args, message",
    [
        ({"ext": "jpg"}, "paths is required"),
        ({"paths": "x.tar"}, "ext is required"),
        ({"paths": "x.tar", "ext": [";"]}, "ext entry ';' names no extension"),
        ({"paths": ["x.tar", "y.tar"], "index_paths": ["x.idx"], "ext": "jpg"}, "2 paths but 1 index_paths"),
        ({"paths": "x.tar", "ext": "jpg", "missing_component_behavior": "drop"}, "must be 'empty', 'skip' or 'error'"),
        ({"paths": "x.tar", "ext": ["jpg", "cls"], "dtypes": [rp.types.UINT8]}, "1 dtypes for 2 ext entries"),
        ({"paths": "x.tar", "ext": "jpg", "dtypes": rp.types.BOOL}, "is not supported"),
        ({"paths": "x.tar", "ext": "jpg", "sharding": 2}, "unexpected argument"),
    ],
)
def test_argument_errors(args, message):
    with pytest.raises(ArgumentError, match=message):
        WebDatasetReader(device="cpu", op_id=0, **args)
