"""``readers.sequence`` against DALI 2.4's sequence reader on real frame folders written here:
which streams and frames are listed and in what order (hidden entries, non-image files, upper-case
extensions, streams sorted by whole path, empty and short streams), the sequences that ``step``,
``stride`` and ``sequence_length`` give, the decoded pixels (JPEG through libjpeg-turbo, RGB, BGR,
GRAY), sharding, and errors naming the operator and the folder."""

from __future__ import annotations

import os
import re
import shutil

import numpy as np
import pytest
from PIL import Image

import raypipe as rp
from raypipe import fn, ops, types
from raypipe.graph import Graph, defining
from raypipe.operators.sequence_reader import list_streams, sequence_starts


def _png(path: str, value: int, size: tuple[int, int] = (6, 4)) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    Image.fromarray(np.full((size[1], size[0], 3), value, np.uint8)).save(path, format="PNG")


def _jpeg(path: str, seed: int, size: tuple[int, int] = (40, 28)) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 256, (size[1] // 4, size[0] // 4, 3), np.uint8)
    image = Image.fromarray(base).resize(size, Image.Resampling.BILINEAR)
    image.save(path, format="JPEG", quality=85)


@pytest.fixture(scope="module")
def tricky_root(tmp_path_factory) -> str:
    """Streams whose frames are flat PNGs numbered by their grey value, with DALI's listing traps."""
    root = str(tmp_path_factory.mktemp("seq_tricky"))
    value = 0
    for stream in ["b", "a", "a.b", "a-b", "a b", "B", "10", "2"]:
        for name in ["f2.png", "f10.PNG", "F1.jpg.png", "f1.Png", "x-y.png", "x.y.png"]:
            value += 1
            _png(f"{root}/{stream}/{name}", value)
    for name in ["notes.txt", "noext", ".hidden.png", "h.png ", "c.png.txt"]:
        _png(f"{root}/a/{name}", 250)
    _png(f"{root}/a/sub/s1.png", 251)  # a sub-folder of a stream (no image extension): not read
    _png(f"{root}/top.png", 252)  # beside the streams: not read
    _png(f"{root}/.hidden/x.png", 253)  # a hidden stream
    os.makedirs(f"{root}/empty")
    for i, n in enumerate(range(3)):
        _png(f"{root}/short/{i:03d}.png", 200 + n)
    os.symlink(f"{root}/2", f"{root}/linked")  # a link to a stream folder is a stream
    return root


@pytest.fixture(scope="module")
def jpeg_root(tmp_path_factory) -> str:
    """JPEG streams of 7, 3, 10 and 1 frames."""
    root = str(tmp_path_factory.mktemp("seq_jpeg"))
    for s, (stream, frames) in enumerate([("s0", 7), ("s1", 3), ("s2", 10), ("s3", 1)]):
        for i in range(frames):
            _jpeg(f"{root}/{stream}/frame_{i:04d}.jpg", 100 * s + i)
    return root


def _ours(root: str, batch_size: int = 1, batches: int | None = None, **kwargs) -> tuple[int, list[np.ndarray], str]:
    @rp.pipeline_def(batch_size=batch_size, num_threads=1, device_id=None, seed=0)
    def pipe():
        return fn.readers.sequence(file_root=root, name="Reader", **kwargs)

    with pipe() as p:
        return _epoch(p, batch_size, batches)


def _dalis(root: str, batch_size: int = 1, batches: int | None = None, **kwargs) -> tuple[int, list[np.ndarray], str]:
    dali = pytest.importorskip("nvidia.dali")
    dali_types = pytest.importorskip("nvidia.dali.types")
    if "image_type" in kwargs:
        kwargs["image_type"] = getattr(dali_types.DALIImageType, kwargs["image_type"].name)

    @dali.pipeline_def(batch_size=batch_size, num_threads=1, device_id=None, seed=0)
    def pipe():
        return dali.fn.readers.sequence(file_root=root, name="Reader", **kwargs)

    p = pipe()
    p.build()
    return _epoch(p, batch_size, batches)


def _epoch(p, batch_size: int, batches: int | None) -> tuple[int, list[np.ndarray], str]:
    """The reader's epoch size, the sequences of ``batches`` batches (a whole epoch by default) and
    their layout, from a built raypipe or DALI pipeline."""
    size = p.epoch_size("Reader")
    out, layout = [], ""
    for _ in range(batches if batches is not None else -(-size // batch_size)):
        (seqs,) = p.run()
        layout = seqs.layout()
        out += [np.asarray(seqs.at(i)) for i in range(len(seqs))]
    return size, out, layout


def _ids(sequences: list[np.ndarray]) -> list[tuple[int, ...]]:
    return [tuple(int(frame[0, 0, 0]) for frame in seq) for seq in sequences]


@pytest.mark.parametrize(
    "args",
    [
        {"sequence_length": 1},
        {"sequence_length": 2},
        {"sequence_length": 3, "step": 2},
        {"sequence_length": 2, "stride": 3},
        {"sequence_length": 2, "step": 4, "stride": 2},
    ],
)
def test_streams_frames_and_sequences_are_dalis(tricky_root, args):
    size, ours, layout = _ours(tricky_root, **args)
    dali_size, theirs, dali_layout = _dalis(tricky_root, **args)
    assert size == dali_size == len(ours) and layout == dali_layout == "FHWC"
    assert _ids(ours) == _ids(theirs)
    assert all(a.dtype == np.uint8 and a.shape == b.shape for a, b in zip(ours, theirs))


def test_listing_rules(tricky_root):
    streams = [os.path.basename(folder) for folder, _ in list_streams(tricky_root)]
    # byte order of the whole path: "a b/" < "a-b/" < "a.b/" < "a/"; hidden and file entries are out
    assert streams == ["10", "2", "B", "a b", "a-b", "a.b", "a", "b", "linked", "short"]  # "empty" has no entry
    frames = dict(list_streams(tricky_root))[os.path.join(tricky_root, "a")]
    names = [os.path.basename(f) for f in frames]
    assert names == ["F1.jpg.png", "f1.Png", "f10.PNG", "f2.png", "x-y.png", "x.y.png"]
    assert list(sequence_starts(10, 3, 2, 2)) == [0, 2, 4] and list(sequence_starts(4, 3, 1, 2)) == []


@pytest.mark.parametrize("image_type", [types.RGB, types.BGR, types.GRAY])
@pytest.mark.parametrize(
    "args",
    [
        {"sequence_length": 3},
        {"sequence_length": 3, "step": 2, "stride": 2},
        {"sequence_length": 4, "step": 5, "stride": 2},
        {"sequence_length": 1, "step": 3},
    ],
)
def test_jpeg_pixels_equal_dalis(jpeg_root, image_type, args):
    size, ours, _ = _ours(jpeg_root, batch_size=2, image_type=image_type, **args)
    dali_size, theirs, _ = _dalis(jpeg_root, batch_size=2, image_type=image_type, **args)
    assert size == dali_size and len(ours) == len(theirs) == 2 * -(-size // 2)
    channels = 1 if image_type is types.GRAY else 3
    for a, b in zip(ours[:size], theirs[:size]):
        assert a.shape == (args["sequence_length"], 28, 40, channels)
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("num_shards", [2, 3])
def test_shards_read_dalis_sequences(jpeg_root, num_shards):
    args = {"sequence_length": 2, "stride": 2}
    size = _ours(jpeg_root, batches=0, **args)[0]
    for shard in range(num_shards):
        count = size * (shard + 1) // num_shards - size * shard // num_shards
        ours = _ours(jpeg_root, batches=count, shard_id=shard, num_shards=num_shards, **args)[1]
        theirs = _dalis(jpeg_root, batches=count, shard_id=shard, num_shards=num_shards, **args)[1]
        assert len(ours) == count
        for a, b in zip(ours, theirs):
            np.testing.assert_array_equal(a, b)


def _op(root: str, **kwargs):
    graph = Graph()
    with defining(graph):
        fn.readers.sequence(file_root=root, **kwargs)
    op = graph.nodes[0].op
    op.prepare()
    return op


@pytest.mark.parametrize("shuffle", [False, True])
def test_shards_and_shuffling_give_each_sequence_once_per_epoch(jpeg_root, shuffle):
    size = len(_op(jpeg_root, sequence_length=1))
    assert size == 7 + 3 + 10 + 1  # 7 a shard
    for epoch in range(2):
        seen = []
        for shard in range(3):
            op = _op(jpeg_root, sequence_length=1, shard_id=shard, num_shards=3, random_shuffle=shuffle, initial_fill=4)
            seen += [int(i) for b in op.epoch_batches(batch_size=1, epoch=epoch, seed=5) for i in b.sample_indices]
        assert sorted(seen) == list(range(size))


def test_frames_of_a_sample_and_its_source(jpeg_root):
    op = _op(jpeg_root, sequence_length=3, step=2, stride=3)
    assert len(op) == 1 + 0 + 2
    names = [os.path.basename(p) for p in op.frames_of(2)]
    assert names == ["frame_0002.jpg", "frame_0005.jpg", "frame_0008.jpg"]
    assert "s2" in op.source_of(2) and "frame_0002.jpg" in op.source_of(2)
    (seq,) = op.read(0)
    assert seq.shape == (3, 28, 40, 3) and seq.dtype == np.uint8


def test_digest_survives_a_move_and_sees_the_sequences(jpeg_root, tmp_path):
    moved = str(tmp_path / "moved")
    shutil.copytree(jpeg_root, moved)
    digest = _op(jpeg_root, sequence_length=2).digest()
    assert _op(moved, sequence_length=2).digest() == digest
    assert _op(moved, sequence_length=2, shard_id=1, num_shards=2).digest() == digest
    assert _op(moved, sequence_length=2, step=2).digest() != digest


def test_old_names_read_the_same(jpeg_root):
    def run(make):
        @rp.pipeline_def(batch_size=3, num_threads=1, device_id=None, seed=0)
        def pipe():
            return make()

        with pipe() as p:
            return [np.asarray(s).tobytes() for s in p.run()[0]]

    new = run(lambda: fn.readers.sequence(file_root=jpeg_root, sequence_length=2))
    assert run(lambda: fn.sequence_reader(file_root=jpeg_root, sequence_length=2)) == new
    assert run(lambda: ops.SequenceReader(file_root=jpeg_root, sequence_length=2)()) == new
    assert ops.SequenceReader is ops.readers.Sequence


@pytest.mark.parametrize(
    "bad, match",
    [
        ({}, "sequence_length is required"),
        ({"sequence_length": 0}, "sequence_length must be a positive int"),
        ({"sequence_length": 2, "step": 0}, "step must be a positive int"),
        ({"sequence_length": 2, "stride": -1}, "stride must be a positive int"),
        ({"sequence_length": 2, "image_type": types.YCbCr}, "image_type"),
        ({"sequence_length": 2, "image_type": 4}, "image_type"),
        ({"sequence_length": 2, "shard_id": 2, "num_shards": 2}, "shard_id"),
        ({"sequence_length": 2, "no_such_argument": 1}, "no_such_argument"),
    ],
)
def test_bad_arguments_name_the_operator(bad, match):
    with pytest.raises(rp.ArgumentError, match=rf"^readers\.sequence: .*{match}"):
        with defining(Graph()):
            fn.readers.sequence(file_root="/nonexistent/streams", **bad)


def test_bad_folders_name_the_operator_and_the_folder(jpeg_root, tmp_path):
    cases = {str(tmp_path / "missing"): "does not exist", str(tmp_path): "no stream folders"}
    (tmp_path / "a").mkdir()
    cases[jpeg_root] = "no sequence of 11 frames"
    for root, why in cases.items():
        with pytest.raises(rp.ReaderError, match=rf"^readers\.sequence: file_root {re.escape(repr(root))} .*{why}"):
            _op(root, sequence_length=11 if root == jpeg_root else 1)
    with pytest.raises(rp.ReaderError, match=rf"^readers\.sequence: 17 sequences in {re.escape(repr(jpeg_root))}"):
        _op(jpeg_root, sequence_length=2, shard_id=0, num_shards=18)


def test_bad_frames_name_the_file(tmp_path):
    root = str(tmp_path / "root")
    _jpeg(f"{root}/s/0.jpg", 0)
    _jpeg(f"{root}/s/1.jpg", 1, size=(40, 32))
    with open(f"{root}/s/2.jpg", "wb") as f:
        f.write(b"not a jpeg at all")
    os.makedirs(f"{root}/s/3.jpg")  # a folder with an image name is listed, as in DALI
    op = _op(root, sequence_length=2)
    assert len(op) == 3
    with pytest.raises(rp.ReaderError, match=r"^readers\.sequence: frame .*1\.jpg.* must have one shape"):
        op.read(0)
    with pytest.raises(rp.ReaderError, match=r"^readers\.sequence: cannot decode .*2\.jpg"):
        op.read(1)
    with pytest.raises(rp.ReaderError, match=r"^readers\.sequence: cannot read .*3\.jpg"):
        _op(root, sequence_length=1).read(3)
