"""``decoders.video`` on the bytes of real video files read by ``readers.file``: every frame
selection and padding against DALI 2.4's CPU decoder (VP9 and MJPEG, bit for bit), the codecs only
raypipe decodes on the CPU (H.264 with B-frames, MPEG-4) against decoding from the start, per-sample
selections, ``device="mixed"``, and the errors."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("av")

import raypipe as rp  # noqa: E402
from raypipe import fn  # noqa: E402
from raypipe.errors import ArgumentError, SampleError  # noqa: E402
from tests.video_data import decode_all, write_video  # noqa: E402


@pytest.fixture(scope="module")
def videos(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("encoded")
    return {
        "vp9": write_video(f"{root}/a.webm", 30, "vp9"),
        "mjpeg": write_video(f"{root}/b.avi", 14, "mjpeg"),
        "h264": write_video(f"{root}/c.mp4", 25, "h264"),
        "mpeg4": write_video(f"{root}/d.mp4", 18, "mpeg4"),
    }


def _decode(lib, files, device="cpu", **kwargs) -> list[np.ndarray]:
    @lib.pipeline_def(batch_size=len(files), num_threads=1, device_id=None, seed=1)
    def pipe():
        encoded, _ = lib.fn.readers.file(files=files)
        return lib.fn.decoders.video(encoded, device=device, **kwargs)

    p = pipe()
    p.build()
    (out,) = p.run()
    assert out.layout() == "FHWC"
    out = out.as_cpu() if hasattr(out, "as_cpu") else out
    return [np.asarray(out[i]) for i in range(len(files))]


SELECTIONS = [
    {},
    dict(frames=[0, 5, 5, 2]),
    dict(frames=[0, 20]),
    dict(start_frame=10, sequence_length=5, stride=2),
    dict(start_frame=10, sequence_length=5, stride=2, pad_mode="none"),
    dict(start_frame=10, sequence_length=5, stride=2, pad_mode="edge"),
    dict(start_frame=3, end_frame=9, stride=2),
    dict(start_frame=3),
    dict(stride=4),
    dict(end_frame=20),
    dict(start_frame=8, sequence_length=12, stride=3, pad_mode="reflect_101"),
    dict(start_frame=8, sequence_length=12, stride=3, pad_mode="symmetric"),
    dict(start_frame=8, sequence_length=12, stride=3, fill_value=[1, 2, 3]),
    dict(frames=[3, 1, 40, 2], pad_mode="reflect"),
]


@pytest.mark.parametrize("kwargs", SELECTIONS)
def test_equals_dali(videos, kwargs):
    """The frames DALI 2.4's CPU decoder gives, bit for bit (its padding, reflections and ranges)."""
    dali = pytest.importorskip("nvidia.dali")
    files = [videos["vp9"], videos["mjpeg"]]
    for theirs, ours in zip(_decode(dali, files, **kwargs), _decode(rp, files, **kwargs), strict=True):
        assert theirs.shape == ours.shape
        np.testing.assert_array_equal(theirs, ours)


@pytest.mark.parametrize("codec", ["h264", "mpeg4", "vp9"])
def test_frames_equal_decoding_from_the_start(videos, codec):
    reference = decode_all(videos[codec])
    (every,) = _decode(rp, [videos[codec]])
    np.testing.assert_array_equal(every, reference)
    (some,) = _decode(rp, [videos[codec]], frames=[17, 3, 9, 9, 0])
    np.testing.assert_array_equal(some, reference[[17, 3, 9, 9, 0]])


def test_per_sample_selection_and_mixed_device(videos):
    """``start_frame`` and ``sequence_length`` per sample (argument inputs), on ``mixed`` too."""
    files = [videos["h264"], videos["vp9"]]
    starts = [np.asarray(4, np.int32), np.asarray(20, np.int32)]
    lengths = [np.asarray(3, np.int32), np.asarray(2, np.int32)]
    references = [decode_all(f) for f in files]

    @rp.pipeline_def(batch_size=2, num_threads=2, device_id=None)
    def pipe(device):
        encoded, _ = fn.readers.file(files=files)
        start = fn.external_source(source=lambda: starts, batch=True)
        length = fn.external_source(source=lambda: lengths, batch=True)
        return fn.decoders.video(encoded, device=device, start_frame=start, sequence_length=length, stride=2)

    for device in ("cpu", "mixed"):
        p = pipe(device)
        p.build()
        (out,) = p.run()
        out = out.as_cpu() if hasattr(out, "as_cpu") else out
        np.testing.assert_array_equal(np.asarray(out[0]), references[0][[4, 6, 8]])
        np.testing.assert_array_equal(np.asarray(out[1]), references[1][[20, 22]])


def test_errors(videos, tmp_path):
    bad = tmp_path / "bad.webm"
    bad.write_bytes(b"\x1a\x45\xdf\xa3" + b"garbage" * 50)
    with pytest.raises(SampleError, match="decoders.video: .*sample 1"):
        _decode(rp, [videos["vp9"], str(bad)])
    with pytest.raises(SampleError, match="frame 20 is past the 14 frames of sample 1"):
        _decode(rp, [videos["vp9"], videos["mjpeg"]], frames=[0, 20], pad_mode="none")
    with pytest.raises(SampleError, match="start_frame 20 is past the 14 frames"):
        _decode(rp, [videos["vp9"], videos["mjpeg"]], start_frame=20, end_frame=30)
    with pytest.raises(ArgumentError, match="frames cannot be given with"):
        _decode(rp, [videos["vp9"]], frames=[0], stride=2)
    with pytest.raises(ArgumentError, match="end_frame and sequence_length cannot both be given"):
        _decode(rp, [videos["vp9"]], end_frame=4, sequence_length=2)
    with pytest.raises(ArgumentError, match="pad_mode must be one of"):
        _decode(rp, [videos["vp9"]], pad_mode="wrap")


def test_names():
    assert rp.ops.experimental.decoders.Video is rp.ops.decoders.Video
