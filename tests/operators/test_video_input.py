"""``experimental.inputs.video`` on real encoded videos written here: batches of sequences of a
queue of fed videos (against DALI 2.4's CPU operator for the codecs it decodes on the CPU, and
against decoding each file from its start for H.264 with B-frames), both last-sequence policies,
decoding one batch at a time, ``device="mixed"``, and the errors."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("av")

import raypipe as rp  # noqa: E402
import raypipe.operators.video_input as video_input  # noqa: E402
from raypipe import fn  # noqa: E402
from raypipe.errors import ArgumentError, PipelineDefinitionError, ReaderError  # noqa: E402
from tests.video_data import decode_all, write_video  # noqa: E402


@pytest.fixture(scope="module")
def videos(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("video-input")
    return {
        "mjpeg": write_video(f"{root}/a.avi", 17, "mjpeg"),
        "vp9": write_video(f"{root}/b.webm", 7, "vp9"),
        "h264": write_video(f"{root}/c.mp4", 23, "h264"),
    }


def _encoded(path: str) -> np.ndarray:
    return np.fromfile(path, dtype=np.uint8)


def _batches(pipeline_def, fn_, paths: list[str], runs: int, **kwargs) -> list[list[np.ndarray]]:
    """``runs`` batches of a pipeline of one video input (batch size 3) fed ``paths`` in order."""

    @pipeline_def(batch_size=3, num_threads=1, device_id=None, prefetch_queue_depth=1)
    def pipe():
        return fn_.experimental.inputs.video(name="video", sequence_length=5, **kwargs)

    p = pipe()
    p.build()
    for path in paths:
        p.feed_input("video", [_encoded(path)])
    out = []
    for _ in range(runs):
        (batch,) = p.run()
        assert batch.layout() == "FHWC"
        out.append([np.asarray(batch.as_cpu().at(i)) for i in range(len(batch))])
    return out


@pytest.mark.parametrize("policy", ["partial", "pad"])
def test_batches_of_sequences_of_a_queue_of_videos_equal_dalis(videos, policy):
    """17 frames then 7, sequences of 5, batches of 3: [5 5 5] [2] then [5 2] (the last sequence
    of each video padded with zero frames under "pad"), the next video starting a new batch."""
    dali = pytest.importorskip("nvidia.dali")
    paths = [videos["mjpeg"], videos["vp9"]]
    ours = _batches(rp.pipeline_def, fn, paths, 3, last_sequence_policy=policy)
    theirs = _batches(dali.pipeline_def, dali.fn, paths, 3, last_sequence_policy=policy, device="cpu")
    lengths = [5, 5, 5, 2, 5, 2] if policy == "partial" else [5] * 6
    assert [len(s) for batch in ours for s in batch] == lengths
    assert [len(b) for b in ours] == [3, 1, 2]
    for a, b in zip(ours, theirs, strict=True):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)


def test_the_frames_are_the_videos_in_order_with_b_frames(videos):
    """H.264 with B-frames (which DALI decodes on the GPU only): the sequences are the frames that
    decoding the file from its start gives, in order; the pad is zero frames."""
    reference = decode_all(videos["h264"])  # 23 frames: sequences 0-4, ..., 20-22
    batches = _batches(rp.pipeline_def, fn, [videos["h264"]], 2, last_sequence_policy="pad")
    sequences = [s for batch in batches for s in batch]
    assert [len(b) for b in batches] == [3, 2]
    for k, sequence in enumerate(sequences):
        frames = reference[5 * k : 5 * k + 5]
        np.testing.assert_array_equal(sequence[: len(frames)], frames)
        assert not sequence[len(frames) :].any()


def test_one_batch_of_frames_is_decoded_at_a_time(videos, monkeypatch):
    decoded = []
    real = video_input.decode_frames

    def counting(index, frames):
        decoded.append(frames.tolist())
        return real(index, frames)

    monkeypatch.setattr(video_input, "decode_frames", counting)
    _batches(rp.pipeline_def, fn, [videos["h264"]], 2)
    assert decoded == [list(range(15)), list(range(15, 23))]


def test_mixed_device_gives_the_same_frames_on_the_gpu(videos):
    cpu = _batches(rp.pipeline_def, fn, [videos["vp9"]], 1)

    @rp.pipeline_def(batch_size=3, num_threads=1, device_id=None)
    def pipe():
        return fn.experimental.inputs.video(name="video", sequence_length=5, device="mixed")

    p = pipe()
    p.build()
    p.feed_input("video", [_encoded(videos["vp9"])])
    (batch,) = p.run()
    assert batch.device == "gpu"
    for x, y in zip(cpu[0], [np.asarray(batch.as_cpu().at(i)) for i in range(len(batch))], strict=True):
        np.testing.assert_array_equal(x, y)


def _pipe(**kwargs):
    @rp.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        return fn.experimental.inputs.video(name="video", **kwargs)

    p = pipe()
    p.build()
    return p


def test_bad_feeds_are_errors_of_the_feed(videos):
    p = _pipe(sequence_length=4)
    with pytest.raises(ArgumentError, match="one encoded video per call .* got 2"):
        p.feed_input("video", [_encoded(videos["vp9"]), _encoded(videos["mjpeg"])])
    with pytest.raises(ArgumentError, match="1-D uint8 array, got a 2-D uint8 array"):
        p.feed_input("video", [np.zeros((4, 4), np.uint8)])
    with pytest.raises(ReaderError, match="experimental.inputs.video: cannot open video file 'video 0 fed to"):
        p.feed_input("video", [np.zeros(100, np.uint8)])
    with pytest.raises(PipelineDefinitionError, match="no data was fed to external source 'video'"):
        p.run()
    p.feed_input("video", [_encoded(videos["vp9"])])  # 7 frames: sequences 0-3 and 4-6
    (batch,) = p.run()
    assert [len(s) for s in batch.as_cpu()] == [4, 3]
    with pytest.raises(PipelineDefinitionError, match="no data was fed"):
        p.run()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({}, r"sequence_length \(a positive int\) is required"),
        ({"sequence_length": 0}, "sequence_length must be a positive int"),
        ({"sequence_length": 2, "last_sequence_policy": "edge"}, "last_sequence_policy must be one of"),
        ({"sequence_length": 2, "blocking": True}, "blocking=True is not supported"),
    ],
)
def test_argument_errors_when_the_pipeline_is_defined(kwargs, match):
    with pytest.raises(ArgumentError, match=f"experimental.inputs.video: {match}"):
        _pipe(**kwargs)
