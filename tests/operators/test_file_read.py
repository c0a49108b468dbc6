"""``io.file.read`` against DALI 2.4's CPU build where installed: the bytes of real JPEGs (paths as
uint8 and int8) and the decode that follows; an empty file (DALI fails to map it); a bucket's
object; errors that name the path and the sample; arguments checked before any batch."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn
from raypipe.errors import ArgumentError, SampleError


def _paths(paths: list[str], dtype=np.uint8) -> list[np.ndarray]:
    return [np.frombuffer(p.encode(), dtype) for p in paths]


def _read_and_decode(x, f, t):
    data = f.io.file.read(x)
    return data, f.decoders.image(data)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_the_bytes_and_their_decode_are_dalis(ours, dali, jpeg_files, dtype):
    paths = _paths(jpeg_files[:4], dtype)
    mine = ours(paths, lambda x: _read_and_decode(x, fn, rp.types))
    theirs = dali(paths, _read_and_decode)
    for (my_samples, my_layout), (their_samples, their_layout), name in zip(mine, theirs, ("bytes", "decoded")):
        assert my_layout == their_layout, name
        for a, b in zip(my_samples, their_samples, strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape, name
            np.testing.assert_array_equal(a, b)
    for data, path in zip(mine[0][0], jpeg_files[:4]):
        assert data.tobytes() == open(path, "rb").read()


def test_an_empty_file_is_an_empty_sample(ours, tmp_path):
    (tmp_path / "empty").write_bytes(b"")
    (tmp_path / "some").write_bytes(b"\x00\x01\xff")
    ((samples, layout),) = ours(_paths([str(tmp_path / "empty"), str(tmp_path / "some")]), lambda x: fn.io.file.read(x))
    assert layout == "" and [s.tolist() for s in samples] == [[], [0, 1, 255]]
    assert all(s.dtype == np.uint8 for s in samples)


def test_an_object_in_a_bucket_reads_as_its_local_file(ours, s3_server, jpeg_root, jpeg_files):
    url = s3_server.upload(jpeg_root, "file-read-test", "jpegs")
    relative = [p[len(jpeg_root) + 1 :] for p in jpeg_files[:2]]
    ((samples, _),) = ours(_paths([f"{url}/{r}" for r in relative]), lambda x: fn.io.file.read(x))
    assert [s.tobytes() for s in samples] == [open(p, "rb").read() for p in jpeg_files[:2]]


@pytest.mark.parametrize(("name", "message"), [("nope.jpg", "No such file"), ("", "is a folder")])
def test_a_missing_file_or_a_folder_fails_naming_it_and_the_sample(ours, jpeg_files, tmp_path, name, message):
    bad = str(tmp_path / name) if name else str(tmp_path)
    with pytest.raises(SampleError, match=f"failed on sample 1 .*'{bad}'.*{message}"):
        ours(_paths([jpeg_files[0], bad]), lambda x: fn.io.file.read(x))


@pytest.mark.parametrize(
    ("sample", "message"),
    [
        (np.zeros((1, 3), np.uint8), "1-D uint8 or int8 array"),
        (np.zeros(3, np.int32), "1-D uint8 or int8 array"),
        (np.zeros(0, np.uint8), "the path is empty"),
        (np.array([0xFF, 0xFE], np.uint8), "not UTF-8"),
    ],
    ids=["2-D", "int32", "empty", "not-utf8"],
)
def test_a_bad_path_sample_fails_naming_the_operator(ours, sample, message):
    with pytest.raises(SampleError, match=message):
        ours([sample], lambda x: fn.io.file.read(x))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"use_o_direct": True}, "needs dont_use_mmap=True"), ({"dont_use_mmap": "yes"}, "must be a bool")],
)
def test_bad_arguments_fail_when_the_pipeline_is_built(kwargs, message):
    @rp.pipeline_def(batch_size=1, num_threads=1)
    def pipe():
        return fn.io.file.read(fn.external_source(source=lambda: [np.zeros(1, np.uint8)], batch=True), **kwargs)

    with pytest.raises(ArgumentError, match=message):
        pipe().build()


def test_o_direct_with_plain_reads_is_accepted(ours, jpeg_files):
    ((samples, _),) = ours(_paths(jpeg_files[:1]), lambda x: fn.io.file.read(x, dont_use_mmap=True, use_o_direct=True))
    assert samples[0].tobytes() == open(jpeg_files[0], "rb").read()
