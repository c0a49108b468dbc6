"""``decoders.inflate`` (GPU-only in DALI): LZ4 blocks as DALI's tests write them
(``lz4.block.compress(sample, store_size=False)``) inflate to the original arrays, one chunk per
sample or several (by offsets, sizes or both) stacked along the sequence axis; ``gpu`` gives the cpu
result; broken chunks and bad arguments fail naming them."""

from __future__ import annotations

import numpy as np
import pytest

from raypipe import fn
from raypipe.errors import ArgumentError, SampleError

lz4_block = pytest.importorskip("lz4.block")

RNG = np.random.default_rng(11)


def deflated(array: np.ndarray) -> np.ndarray:
    return np.frombuffer(lz4_block.compress(np.ascontiguousarray(array).tobytes(), store_size=False), np.uint8)


def _run(ours, samples, build, per_sample=()):
    ((out, layout),) = ours(samples, build, per_sample=per_sample)
    return out, layout


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("dtype", ["uint8", "int8", "uint16", "int32", "float32", "float16"])
def test_samples_inflate_to_the_arrays_compressed(ours, dtype, device):
    originals = [(np.arange(n * 3) * 7 % 251).astype(dtype).reshape(n, 3) for n in (1, 50, 1000)]
    shapes = [np.array(a.shape, np.int32) for a in originals]

    def build(x, shape):
        return fn.decoders.inflate(x.gpu() if device == "gpu" else x, shape=shape, dtype=np.dtype(dtype))

    out, layout = _run(ours, [deflated(a) for a in originals], build, per_sample=[shapes])
    assert layout == ""
    for mine, original in zip(out, originals, strict=True):
        assert mine.dtype == original.dtype
        np.testing.assert_array_equal(mine, original)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("by", ["chunk_offsets", "chunk_sizes", "both"])
def test_chunks_stack_into_sequences(ours, by, device):
    """DALI's example: a video's frames compressed one by one and concatenated."""
    videos = [RNG.integers(0, 256, (frames, 6, 5, 3), dtype=np.uint8) for frames in (3, 1)]
    blobs, offsets, sizes = [], [], []
    for video in videos:
        chunks = [deflated(frame) for frame in video]
        sizes.append(np.array([len(c) for c in chunks], np.int32))
        offsets.append(np.cumsum([0, *sizes[-1][:-1]]).astype(np.int32))
        blobs.append(np.concatenate(chunks))
    given = {"chunk_offsets": [offsets], "chunk_sizes": [sizes], "both": [offsets, sizes]}[by]

    def build(x, *chunks):
        named = dict(zip(["chunk_offsets", "chunk_sizes"] if by == "both" else [by], chunks))
        return fn.decoders.inflate(x.gpu() if device == "gpu" else x, shape=[6, 5, 3], layout="HWC", **named)

    out, layout = _run(ours, blobs, build, per_sample=given)
    assert layout == "FHWC"
    for mine, video in zip(out, videos, strict=True):
        np.testing.assert_array_equal(mine, video)


def test_chunks_between_gaps_and_a_sequence_axis_named(ours):
    frames = [RNG.integers(0, 256, (4, 4), dtype=np.uint8) for _ in range(2)]
    first, second = deflated(frames[0]), deflated(frames[1])
    blob = np.concatenate([np.zeros(3, np.uint8), first, np.zeros(5, np.uint8), second])

    def build(x):
        return fn.experimental.inflate(
            x,
            shape=[4, 4],
            layout="HW",
            sequence_axis_name="T",
            chunk_offsets=[3, 8 + len(first)],
            chunk_sizes=[len(first), len(second)],
        )

    (out,), layout = _run(ours, [blob], build)
    assert layout == "THW"
    np.testing.assert_array_equal(out, np.stack(frames))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "shape is required"),
        ({"shape": [2], "algorithm": "deflate"}, "algorithm must be 'LZ4'"),
        ({"shape": [-1]}, "shape must not be negative"),
        ({"shape": [2], "chunk_sizes": [-3]}, "chunk_sizes must not be negative"),
        (
            {"shape": [2], "layout": "HW", "chunk_sizes": [3], "sequence_axis_name": "H"},
            "sequence_axis_name 'H' is already in layout",
        ),
    ],
)
def test_bad_arguments_fail_when_the_pipeline_is_built(ours, kwargs, message):
    with pytest.raises(ArgumentError, match=f"decoders.inflate: {message}"):
        _run(ours, [deflated(np.zeros(2, np.uint8))], lambda x: fn.decoders.inflate(x, **kwargs))


@pytest.mark.parametrize(
    ("sample", "kwargs", "message"),
    [
        (np.arange(40, dtype=np.uint8), {"shape": [40]}, "chunk 0 is not an LZ4 block inflating to 40 bytes"),
        (
            deflated(np.zeros(10, np.uint8)),
            {"shape": [12]},
            "chunk 0 inflates to 10 bytes, the shape and dtype need 12",
        ),
        (
            deflated(np.zeros(10, np.uint8)),
            {"shape": [10], "chunk_offsets": [0, 999]},
            "chunk 0 spans bytes 0 to 999 of a sample of",
        ),
        (
            deflated(np.zeros(10, np.uint8)),
            {"shape": [10], "chunk_offsets": [0], "chunk_sizes": [1, 2]},
            "1 chunk_offsets and 2 chunk_sizes",
        ),
        (np.zeros(8, np.int32), {"shape": [8]}, "input samples must be 1-D uint8"),
        (deflated(np.zeros(12, np.uint8)), {"shape": [12], "layout": "HW"}, "layout 'HW' does not fit the shape"),
    ],
)
def test_broken_samples_fail_naming_the_chunk(ours, sample, kwargs, message):
    with pytest.raises(SampleError, match=message):
        _run(ours, [sample], lambda x: fn.decoders.inflate(x, **kwargs))
