"""readers.mxnet on real RecordIO files: what our writer and hand-built records hold, the same
samples and labels as DALI's reader, sharding and random access, and bad data named."""

from __future__ import annotations

import os
import struct

import numpy as np
import pytest

import raypipe as rp
import raypipe.operators.mxnet_reader  # noqa: F401  (registers readers.mxnet)
from raypipe import fn
from raypipe.formats import recordio as rio
from raypipe.operators.mxnet_reader import MXNetReader

MAGIC = struct.pack("<I", 0xCED7230A)


@rp.pipeline_def(batch_size=4, num_threads=1, seed=0)
def read(**reader_args):
    images, labels = fn.readers.mxnet(name="Reader", **reader_args)
    return images, labels


def _epoch(pipe) -> list[tuple[bytes, np.ndarray]]:
    samples = []
    while True:
        images, labels = pipe.run()
        info = pipe.last_batch_info
        samples.extend(
            (images.at(i).tobytes(), np.asarray(labels.at(i))) for i, pad in enumerate(info.is_pad) if not pad
        )
        if info.last_in_epoch:
            return samples


def _dali_epoch(path, index_path, n: int) -> list[tuple[bytes, np.ndarray]]:
    pytest.importorskip("nvidia.dali")
    from nvidia.dali import fn as dali_fn
    from nvidia.dali import pipeline_def

    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        images, labels = dali_fn.readers.mxnet(path=path, index_path=index_path)
        return images, labels

    p = pipe()
    p.build()
    samples = []
    for _ in range(n):
        images, labels = p.run()
        samples.append((np.asarray(images[0]).tobytes(), np.asarray(labels[0])))
    return samples


def _same(a: list[tuple[bytes, np.ndarray]], b: list[tuple[bytes, np.ndarray]]) -> None:
    assert [x for x, _ in a] == [x for x, _ in b]
    for (_, la), (_, lb) in zip(a, b):
        assert la.dtype == lb.dtype == np.float32 and la.shape == lb.shape and (la == lb).all()


def part(cflag: int, payload: bytes) -> bytes:
    """One part built by hand: magic, lrecord, payload, zero padding."""
    return MAGIC + struct.pack("<I", (cflag << 29) | len(payload)) + payload + bytes(-len(payload) % 4)


@pytest.fixture
def rec(jpeg_files, tmp_path) -> tuple[str, str]:
    """The 24 JPEGs written by RecordIOWriter: ``(data path, index path)``."""
    path = str(tmp_path / "train.rec")
    with rio.RecordIOWriter(path) as w:
        for i, p in enumerate(jpeg_files):
            w.add(f"img_{i}", open(p, "rb").read(), i // 6)
    return path, w.close()["index"]


def _write(path, payloads: list[bytes]) -> str:
    """Frame ``payloads`` into ``path`` with our writer's framing and index it; the index path."""
    with open(path, "wb") as f:
        for payload in payloads:
            f.write(rio.pack_record(payload))
    index = rio.index_path_for(str(path))
    rio.write_index(str(path), index)
    return index


def test_reads_the_writer_output_in_order(rec, jpeg_files):
    path, index = rec
    with read(path=path, index_path=index) as pipe:
        assert pipe.epoch_size("Reader") == 24
        samples = _epoch(pipe)
    assert [s for s, _ in samples] == [open(p, "rb").read() for p in jpeg_files]
    for i, (_, label) in enumerate(samples):
        assert label.dtype == np.float32 and label.shape == (1,) and label[0] == i // 6


def test_dali_reads_our_files_the_same(rec):
    path, index = rec
    with read(path=[path], index_path=[index]) as pipe:
        ours = _epoch(pipe)
    _same(ours, _dali_epoch([path], [index], 24))


def test_split_and_multi_label_records_match_dali(tmp_path):
    images = [b"head" + MAGIC + b"tail", MAGIC + MAGIC + b"x", b"ab" + MAGIC + b"cd", b"1234" + MAGIC]
    payloads = [rio.pack_irheader(0, float(i), i, 0, img) for i, img in enumerate(images)]
    payloads.append(rio.pack_irheader(3, [0.5, 1.5, -2.5], 4, 0, b"lab" + b"e" + MAGIC + b"ls"))
    path = tmp_path / "split.rec"
    index = _write(path, payloads)
    _, sizes = rio.scan(str(path))
    assert sizes.tolist()[:2] == [8 + 28 + 8 + 4, 8 + 24 + 8 + 8 + 4]  # cut at the aligned magic numbers
    with read(path=str(path), index_path=index) as pipe:
        ours = _epoch(pipe)
    assert [s for s, _ in ours] == images + [b"labe" + MAGIC + b"ls"]
    assert ours[4][1].tolist() == [0.5, 1.5, -2.5] and ours[4][1].dtype == np.float32
    _same(ours, _dali_epoch(str(path), index, 5))


def test_hand_built_records(tmp_path):
    path = tmp_path / "hand.rec"
    first = part(0, struct.pack("<IfQQ", 0, 2.0, 11, 0) + b"image")
    second = part(1, struct.pack("<IfQQ2f", 2, 9.0, 12, 0, 3.0, 4.0) + b"abcd") + part(2, b"") + part(3, b"efg")
    path.write_bytes(first + second)
    index = tmp_path / "hand.idx"
    index.write_text(f"11\t0\n12\t{len(first)}\n")
    with read(path=str(path), index_path=str(index)) as pipe:
        samples = _epoch(pipe)
    assert samples[0][0] == b"image" and samples[0][1].tolist() == [2.0]
    assert samples[1][0] == b"abcd" + MAGIC + MAGIC + b"efg" and samples[1][1].tolist() == [3.0, 4.0]


def test_shards_and_random_access_equal_sequential_reading(rec):
    path, index = rec
    with read(path=path, index_path=index) as pipe:
        everything = _epoch(pipe)
    shards = []
    for shard in range(3):
        with read(path=path, index_path=index, shard_id=shard, num_shards=3) as pipe:
            shards.extend(_epoch(pipe))
    _same(shards, everything)
    reader = MXNetReader(device="cpu", op_id=0, path=path, index_path=index)
    reader.prepare()
    for i in (17, 0, 23, 5):
        image, label = reader.read(i)
        assert image.tobytes() == everything[i][0] and label.tolist() == everything[i][1].tolist()
    reader.close()


def test_several_files_with_a_shared_or_per_file_index(tmp_path):
    a, b = tmp_path / "a.rec", tmp_path / "b.rec"
    index_a = _write(a, [rio.pack_irheader(0, float(i), i, 0, b"A%d" % i) for i in range(3)])
    index_b = _write(b, [rio.pack_irheader(0, float(i), i, 0, b"B%d" % i) for i in range(2)])
    shared = tmp_path / "ab.idx"
    size_a = os.path.getsize(a)
    offsets = rio.scan(str(a))[0].tolist() + [size_a + o for o in rio.scan(str(b))[0].tolist()]
    shared.write_text(rio.format_index(offsets))
    with read(path=[str(a), str(b)], index_path=[index_a, index_b]) as pipe:
        per_file = _epoch(pipe)
    with read(path=[str(a), str(b)], index_path=str(shared)) as pipe:
        together = _epoch(pipe)
    assert [s for s, _ in per_file] == [b"A0", b"A1", b"A2", b"B0", b"B1"]
    _same(together, per_file)
    _same(per_file, _dali_epoch([str(a), str(b)], [str(shared)], 5))


def test_bad_magic_names_the_file_and_record(rec):
    path, index = rec
    offsets, _ = rio.scan(path)
    with open(path, "r+b") as f:
        f.seek(int(offsets[5]))
        f.write(b"\0\0\0\0")
    with read(path=path, index_path=index) as pipe:
        with pytest.raises(rp.SampleError, match=rf"train.rec record 5 \(offset {offsets[5]}\): bad magic number"):
            _epoch(pipe)


def test_index_into_the_middle_of_a_record_is_named(rec):
    path, index = rec
    offsets, _ = rio.scan(path)
    lines = open(index).read().splitlines()
    lines[8] = f"8\t{int(offsets[8]) + 40}"
    with open(index, "w") as f:
        f.write("\n".join(lines) + "\n")
    with read(path=path, index_path=index) as pipe:
        with pytest.raises(
            rp.SampleError, match=r"train.rec record 7 .*bytes follow the record's last part.*train.idx"
        ):
            _epoch(pipe)


def test_truncated_file_is_named_at_build(rec):
    path, index = rec
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 10)
    with pytest.raises(rp.ReaderError, match=r"train.idx line 24 \(key 23.*train.rec record 23 .*truncated"):
        read(path=path, index_path=index).build()


@pytest.mark.parametrize(
    "args, message",
    [
        ({"path": "x.rec"}, r"index_path is required .*`raypipe index mxnet x.rec`"),
        ({"path": ["a.rec", "b.rec", "c.rec"], "index_path": ["a.idx", "b.idx"]}, "one index_path for all 3 files"),
        ({"index_path": "x.idx"}, "path is required"),
        ({"path": "x.rec", "index_path": "x.idx", "shuffle": True}, "unexpected argument"),
    ],
)
def test_argument_errors(args, message):
    with pytest.raises(rp.ArgumentError, match=message):
        read(**args).build()
