"""``readers.video`` and ``experimental.readers.video`` on real video files written here (H.264
with B-frames, VP9, MJPEG, MPEG-4): the sequences each reader plans, the frames it decodes (against
decoding each file from its start, and against DALI 2.4's CPU video reader for the codecs DALI
decodes on the CPU), its extra outputs, padding, file lists and folders, sharding, checkpoints,
``device="gpu"``, and the errors."""

from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip("av")

import raypipe as rp  # noqa: E402
from raypipe import fn, types  # noqa: E402
from raypipe.errors import ArgumentError, ReaderError  # noqa: E402
from raypipe.operators.video_reader import sequence_plan  # noqa: E402
from tests.video_data import decode_all, write_video  # noqa: E402


@pytest.fixture(scope="module")
def videos(tmp_path_factory) -> dict[str, str]:
    """Files of several codecs and lengths, and a folder of class sub-folders."""
    root = tmp_path_factory.mktemp("videos")
    paths = {
        "h264": write_video(f"{root}/a.mp4", 30, "h264"),
        "h264_short": write_video(f"{root}/b.mp4", 17, "h264"),
        "vp9": write_video(f"{root}/c.webm", 30, "vp9"),
        "vp9_small": write_video(f"{root}/d.mkv", 12, "vp9", size=(32, 40)),
        "mjpeg": write_video(f"{root}/e.avi", 14, "mjpeg"),
        "mpeg4": write_video(f"{root}/f.mp4", 20, "mpeg4"),
    }
    write_video(f"{root}/classes/walk/1.mp4", 12, "h264")
    write_video(f"{root}/classes/run/2.webm", 10, "vp9")
    write_video(f"{root}/classes/run/1.mp4", 9, "h264")
    paths["root"] = f"{root}/classes"
    return paths


def _run(reader, batch_size: int = 4, iterations: int = 1, device: str = "cpu", **kwargs) -> list[list]:
    """Outputs of ``iterations`` batches of a pipeline of one video reader, as lists of arrays."""

    @rp.pipeline_def(batch_size=batch_size, num_threads=2, device_id=None, seed=3)
    def pipe():
        out = reader(device=device, name="Reader", **kwargs)
        return tuple(out) if isinstance(out, list) else out

    p = pipe()
    p.build()
    batches = []
    for _ in range(iterations):
        outs = p.run()
        batches.append([[np.asarray(o.as_cpu()[i]) for i in range(len(o))] for o in outs])
    return batches


@pytest.mark.parametrize(
    "frames,length,step,stride,legacy,tails,expected",
    [
        (30, 4, 5, 2, True, "none", [0, 5, 10, 15, 20]),  # span 7
        (30, 4, 5, 2, False, "none", [0, 5, 10, 15, 20]),  # span 8
        (17, 4, 5, 2, True, "none", [0, 5, 10]),
        (17, 4, 5, 2, False, "none", [0, 5]),
        (30, 4, 8, 2, False, "one", [0, 8, 16, 24]),
        (30, 4, 2, 3, False, "one", list(range(0, 21, 2))),  # 20 is a tail, though it fits
        (10, 3, 3, 1, True, "all", [0, 3, 6, 9]),
        (12, 2, 2, 3, True, "all", [0, 2, 4, 6, 8, 10]),
    ],
)
def test_sequence_plan(frames, length, step, stride, legacy, tails, expected):
    span = (length - 1) * stride + 1 if legacy else length * stride
    starts, counts = sequence_plan(0, frames, length, step, stride, span, tails)
    assert starts.tolist() == expected
    assert counts.tolist() == [min(length, 1 + (frames - 1 - s) // stride) for s in expected]


@pytest.mark.parametrize("codec", ["h264", "vp9", "mjpeg", "mpeg4"])
@pytest.mark.parametrize("legacy", [True, False])
def test_frames_equal_decoding_from_the_start(videos, codec, legacy):
    """Every sequence (starting between key frames, B-frames reordered) holds the frames that
    decoding the whole file from its start gives, at its frame numbers."""
    path = videos[codec]
    reference = decode_all(path)
    step, stride, length = 3, 2, 4
    reader = fn.readers.video if legacy else fn.experimental.readers.video
    (batch,) = _run(reader, batch_size=40, filenames=[path], labels=[7], sequence_length=length, step=step,
                    stride=stride, enable_frame_num=True, enable_timestamps=True)  # fmt: skip
    video, labels, first, seconds = batch
    span = (length - 1) * stride + 1 if legacy else length * stride
    starts = range(0, len(reference) - span + 1, step)
    assert [int(f[0]) for f in first] == np.resize(starts, len(video)).tolist()  # wrapping around the shard
    for clip, f, stamps in zip(video, first, seconds):
        frames = int(f[0]) + stride * np.arange(length)
        np.testing.assert_array_equal(clip, reference[frames])
        np.testing.assert_allclose(stamps, frames / 25.0)
    assert all(label.tolist() == [7] and label.dtype == np.int32 for label in labels)


def test_outputs_follow_dali(videos):
    """Which outputs each reader gives, as DALI decides."""
    files = [videos["h264"]]
    legacy, exp = fn.readers.video, fn.experimental.readers.video
    assert len(_run(legacy, filenames=files, sequence_length=2)[0]) == 1
    assert len(_run(legacy, filenames=files, labels=[], sequence_length=2)[0]) == 2
    assert len(_run(exp, filenames=files, sequence_length=2, enable_frame_num=True)[0]) == 2
    assert len(_run(exp, file_root=videos["root"], sequence_length=2, enable_timestamps=True)[0]) == 3
    with pytest.raises(ArgumentError, match="only with file_list, or filenames with labels"):
        _run(legacy, filenames=files, sequence_length=2, enable_frame_num=True)
    with pytest.raises(ArgumentError, match="experimental.readers.video: 0 labels for 1 files"):
        _run(exp, filenames=files, labels=[], sequence_length=2)
    (batch,) = _run(exp, filenames=files, sequence_length=3, step=10, enable_frame_num="sequence")
    assert [f.tolist() for f in batch[1][:3]] == [[0, 1, 2], [10, 11, 12], [20, 21, 22]]


def test_file_root_labels_by_sorted_folder(videos):
    (batch,) = _run(fn.readers.video, batch_size=20, file_root=videos["root"], sequence_length=3, step=3)
    video, labels = batch
    # run/1.mp4 (9 frames): 3 sequences, run/2.webm (10): 3, walk/1.mp4 (12): 4
    assert [int(x[0]) for x in labels[:10]] == [0] * 6 + [1] * 4
    assert video[0].shape == (3, 48, 64, 3) and video[0].dtype == np.uint8


def test_file_list_ranges(videos, tmp_path):
    """The legacy reader's ``file_list`` ranges: frames with ``file_list_frame_num``, else seconds
    (start rounded up and end down, or the other way with ``file_list_include_preceding_frame``);
    a line whose start equals its end is left out with a warning."""
    frames = tmp_path / "frames.txt"
    frames.write_text(f"{videos['h264']} 3 4 12\n{videos['mjpeg']} 1 2 2\n{videos['vp9']} 5\n")
    with pytest.warns(UserWarning, match="start equals end"):
        (batch,) = _run(fn.readers.video, batch_size=20, file_list=str(frames), sequence_length=2, step=2,
                        enable_frame_num=True, file_list_frame_num=True)  # fmt: skip
    pairs = [(int(label[0]), int(f[0])) for label, f in zip(batch[1], batch[2])]
    assert pairs[:4] == [(3, 4), (3, 6), (3, 8), (3, 10)]  # frames [4, 12)
    assert pairs[4:19] == [(5, s) for s in range(0, 30, 2)]  # the whole file
    seconds = tmp_path / "seconds.txt"
    seconds.write_text(f"{videos['vp9']} 5 0.2 0.5\n")
    for preceding, expected in ((False, [5, 7, 9]), (True, [5, 7, 9, 11])):  # frames 5 to 12.5 at 25 fps
        (batch,) = _run(fn.readers.video, batch_size=len(expected), file_list=str(seconds), sequence_length=2,
                        step=2, enable_frame_num=True, file_list_include_preceding_frame=preceding)  # fmt: skip
        assert [int(f[0]) for f in batch[2]] == expected


def test_pad_sequences_and_pad_modes(videos):
    path = [videos["h264"]]
    reference = decode_all(path[0])
    (batch,) = _run(fn.readers.video, batch_size=3, filenames=path, labels=[0], sequence_length=4, step=12,
                    stride=3, pad_sequences=True, enable_frame_num=True, enable_timestamps=True)  # fmt: skip
    video, _, first, seconds = batch
    assert [int(f[0]) for f in first] == [0, 12, 24]
    np.testing.assert_array_equal(video[2][:2], reference[[24, 27]])
    assert not video[2][2:].any()
    np.testing.assert_allclose(seconds[2], [24 / 25, 27 / 25, -1, -1])
    for mode, tail in (("constant", [-1]), ("edge", [29]), ("reflect_1001", [27]), ("reflect_101", [26])):
        (batch,) = _run(fn.experimental.readers.video, batch_size=3, filenames=path, sequence_length=3, step=13,
                        stride=3, pad_mode=mode, fill_value=[1, 2, 3], enable_frame_num="sequence")  # fmt: skip
        video, frames = batch
        assert frames[2].tolist() == [26, 29, *tail]
        last = video[2][2]
        if tail == [-1]:
            assert (last == [1, 2, 3]).all()
        else:
            np.testing.assert_array_equal(last, reference[tail[0]])


def test_float_and_normalized(videos):
    args = dict(filenames=[videos["vp9"]], sequence_length=2, step=7)
    (plain,) = _run(fn.readers.video, **args)
    (floats,) = _run(fn.readers.video, dtype=types.FLOAT, **args)
    (normal,) = _run(fn.readers.video, dtype=types.FLOAT, normalized=True, **args)
    assert floats[0][0].dtype == np.float32
    np.testing.assert_array_equal(floats[0][0], plain[0][0].astype(np.float32))
    np.testing.assert_allclose(normal[0][0], plain[0][0] / np.float32(255), rtol=1e-6)


def test_ycbcr_keeps_the_decoded_luma(videos):
    """YCbCr frames hold the decoded luma plane as it is, and chroma upsampled to full size."""
    import av

    (ycc,) = _run(fn.readers.video, filenames=[videos["vp9"]], sequence_length=2, step=9, image_type=types.YCbCr)
    with av.open(videos["vp9"]) as container:
        frames = [f for _, f in zip(range(11), container.decode(video=0))]
    for clip, first in zip(ycc[0][:2], (0, 9)):
        for k in range(2):
            frame = frames[first + k]
            luma = np.frombuffer(frame.planes[0], np.uint8).reshape(frame.height, -1)[:, : frame.width]
            np.testing.assert_array_equal(clip[k][..., 0], luma)
    assert ycc[0][0].shape == (2, 48, 64, 3)


def test_shards_cover_every_sequence_once(videos):
    files = [videos["h264"], videos["vp9"], videos["mjpeg"]]
    seen = []
    for shard in range(3):
        (batch,) = _run(fn.experimental.readers.video, batch_size=6, filenames=files, labels=[0, 1, 2],
                        sequence_length=3, step=4, enable_frame_num=True, shard_id=shard, num_shards=3,
                        pad_last_batch=True)  # fmt: skip
        seen += [(int(label[0]), int(f[0])) for label, f in zip(batch[1], batch[2])]
    expected = {(0, s) for s in range(0, 28, 4)} | {(1, s) for s in range(0, 28, 4)} | {(2, s) for s in range(0, 12, 4)}
    assert expected <= set(seen)


def test_checkpoint_resumes_the_same_sequences(videos):
    def pipe(checkpoint=None):
        @rp.pipeline_def(batch_size=3, num_threads=2, device_id=None, seed=5, enable_checkpointing=True)
        def video_pipe():
            video, label = fn.readers.video(file_root=videos["root"], sequence_length=2, step=2, random_shuffle=True,
                                            name="Reader")  # fmt: skip
            return video, label

        p = video_pipe(checkpoint=checkpoint)
        p.build()
        return p

    first = pipe()
    first.run()
    saved = first.checkpoint()
    expected = [np.asarray(first.run()[0][i]) for i in range(3)]
    resumed = pipe(saved)
    got = [np.asarray(resumed.run()[0][i]) for i in range(3)]
    for a, b in zip(expected, got):
        np.testing.assert_array_equal(a, b)


def test_gpu_device_gives_the_same_frames(videos):
    args = dict(filenames=[videos["h264"]], labels=[1], sequence_length=3, step=5, enable_frame_num=True)
    (cpu,) = _run(fn.readers.video, **args)
    (gpu,) = _run(fn.readers.video, device="gpu", **args)
    for a, b in zip(cpu, gpu):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)


def test_gpu_device_places_a_transfer_after_the_host_reader(videos):
    """``device="gpu"`` reads on the host and moves every output to the GPU, as ``.gpu()``."""

    @rp.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        video, label = fn.readers.video(device="gpu", filenames=[videos["h264"]], labels=[0], sequence_length=2)
        return video, label

    p = pipe()
    p.build()
    staged = p._staged
    assert [(n.op.schema.name, n.op.device) for n in staged.host_nodes][0] == ("readers.video", "cpu")
    assert all(out.producer.op.schema.name == "_transfer" for out in staged.outputs)


def test_errors_name_the_file(videos, tmp_path):
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(b"not a video at all" * 100)
    with pytest.raises(ReaderError, match="broken.mp4"):
        _run(fn.readers.video, filenames=[str(broken)], sequence_length=2)
    with pytest.raises(ReaderError, match="no sequence of 50 frames"):
        _run(fn.readers.video, filenames=[videos["mjpeg"]], sequence_length=50)
    changed = tmp_path / "changed.avi"
    data = open(videos["mjpeg"], "rb").read()
    changed.write_bytes(data)

    @rp.pipeline_def(batch_size=14, num_threads=1, device_id=None)
    def pipe():
        return fn.readers.video(filenames=[str(changed)], sequence_length=1)

    p = pipe()
    p.build()  # indexed: 14 frames
    changed.write_bytes(data[: len(data) // 2])  # the file loses frames after the pipeline listed it
    with pytest.raises(Exception, match=r"cannot decode .*changed.avi"):
        p.run()
    for bad, message in (
        (dict(filenames=[videos["h264"]]), "sequence_length is required"),
        (dict(filenames=[videos["h264"]], file_root=videos["root"], sequence_length=2), "exactly one of"),
        (dict(file_root=videos["root"], labels=[1], sequence_length=2), "labels can only be given with filenames"),
        (dict(filenames=[videos["h264"]], sequence_length=2, dtype=types.INT32), "dtype must be"),
        (dict(filenames=[videos["h264"]], sequence_length=2, image_type=types.GRAY), "image_type must be"),
        (dict(filenames=[videos["h264"]], sequence_length=0), "sequence_length must be a positive int"),
    ):
        with pytest.raises(ArgumentError, match=message):
            _run(fn.readers.video, **bad)
    with pytest.raises(ArgumentError, match="pad_mode must be one of"):
        _run(fn.experimental.readers.video, filenames=[videos["h264"]], sequence_length=2, pad_mode="wrap")


def test_names():
    assert rp.ops.VideoReader is rp.ops.readers.Video
    assert fn.video_reader.__qualname__ == "fn.readers.video"
    assert os.path.basename(fn.experimental.readers.video.__qualname__) == "fn.experimental.readers.video"


# ---------------------------------------------------------------------------------------- DALI


def _dali_run(files, batch_size, **kwargs):
    dali = pytest.importorskip("nvidia.dali")

    @dali.pipeline_def(batch_size=batch_size, num_threads=1, device_id=None, seed=3)
    def pipe():
        return tuple(dali.fn.experimental.readers.video(device="cpu", filenames=files, **kwargs))

    p = pipe()
    p.build()
    outs = p.run()
    return p.epoch_size(), [[np.asarray(o[i]) for i in range(len(o))] for o in outs]


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(sequence_length=4, step=5, stride=2),
        dict(sequence_length=3),
        dict(sequence_length=4, stride=2, pad_mode="constant", fill_value=[9, 8, 7]),
        dict(sequence_length=4, stride=3, step=7, pad_mode="edge"),
        dict(sequence_length=4, stride=3, step=20, pad_mode="symmetric"),
        dict(sequence_length=5, stride=2, step=9, pad_mode="reflect_101"),
        dict(sequence_length=5, uniform_sample=True),
        dict(sequence_length=40, uniform_sample=True),
    ],
)
def test_experimental_reader_equals_dali(videos, kwargs):
    """Against DALI 2.4's CPU reader on the codecs it decodes on the CPU (VP9, MJPEG): the same
    epoch size, sequences, frame numbers, timestamps, labels and pixels, bit for bit."""
    files = [videos["vp9"], videos["vp9_small"], videos["mjpeg"]]
    kwargs = dict(labels=[4, 5, 6], enable_frame_num="sequence", enable_timestamps=True, **kwargs)
    size, dali_batch = _dali_run(files, 6, **kwargs)
    (ours,) = _run(fn.experimental.readers.video, batch_size=6, filenames=files, **kwargs)
    pipe_size = _epoch_size(files, kwargs)
    assert pipe_size == next(iter(size.values()))
    for theirs, mine in zip(dali_batch, ours):
        for a, b in zip(theirs, mine):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(file_list_format="frames"),
        dict(file_list_format="frames", file_list_include_end=False),
        dict(file_list_format="timestamps"),
        dict(file_list_format="timestamps", file_list_rounding="all_up"),
        dict(file_list_format="timestamps", file_list_rounding="start_up_end_down", file_list_include_end=False),
    ],
)
def test_experimental_file_list_equals_dali(videos, tmp_path, kwargs):
    """The experimental reader's ``file_list`` ranges (frames or seconds, rounded and ended as
    asked) give DALI's sequences."""
    dali = pytest.importorskip("nvidia.dali")
    listing = tmp_path / "list.txt"
    listing.write_text(f"{videos['vp9']} 2 4 13\n{videos['mjpeg']} 1 0.13 0.37\n{videos['vp9_small']} 0\n")
    kwargs = dict(file_list=str(listing), sequence_length=3, step=3, enable_frame_num=True, **kwargs)

    @dali.pipeline_def(batch_size=12, num_threads=1, device_id=None, seed=3)
    def dali_pipe():
        return tuple(dali.fn.experimental.readers.video(device="cpu", name="Reader", **kwargs))

    p = dali_pipe()
    p.build()
    theirs = [[int(v) for v in np.asarray(o[i]).ravel()] for o in p.run()[1:] for i in range(12)]
    (ours,) = _run(fn.experimental.readers.video, batch_size=12, **kwargs)
    mine = [[int(v) for v in x.ravel()] for o in ours[1:] for x in o]
    assert p.epoch_size("Reader") == _epoch_size(None, kwargs)
    assert mine == theirs


def _epoch_size(files, kwargs):
    @rp.pipeline_def(batch_size=6, num_threads=1, device_id=None, seed=3)
    def pipe():
        sources = {} if files is None else {"filenames": files}
        return tuple(fn.experimental.readers.video(name="Reader", **sources, **kwargs))

    p = pipe()
    p.build()
    return p.epoch_size("Reader")


def test_on_error_skip_drops_the_sequence_that_cannot_be_decoded(videos, tmp_path):
    """With ``on_error="skip"`` a sequence whose frames cannot be decoded is left out of its batch
    and reported, naming the file; the other file's sequences are read."""
    changed = tmp_path / "changed.avi"
    data = open(videos["mjpeg"], "rb").read()
    changed.write_bytes(data)

    @rp.pipeline_def(batch_size=6, num_threads=1, device_id=None)
    def pipe():
        video, label = fn.readers.video(filenames=[str(changed), videos["vp9_small"]], labels=[0, 1],
                                        sequence_length=4, step=4, on_error="skip", name="Reader")  # fmt: skip
        return video, label

    p = pipe()
    p.build()  # changed.avi: 3 sequences, d.mkv: 3
    changed.write_bytes(data[: len(data) * 2 // 5])  # the file loses frames after the pipeline listed it
    video, labels = p.run()
    kept = [int(np.asarray(label)[0]) for label in labels]
    assert kept[-3:] == [1, 1, 1] and len(kept) + len(p.skipped_samples) == 6
    assert p.skipped_samples and all("changed.avi" in s.source for s in p.skipped_samples)
    assert {s.sample_index for s in p.skipped_samples} <= {0, 1, 2}


@pytest.mark.parametrize(
    "resize",
    [dict(resize_shorter=20), dict(resize_x=40, resize_y=30, interp_type=types.INTERP_NN), dict(size=(24, 0))],
)
def test_video_resize_resizes_every_frame_as_resize_does(videos, resize):
    """``readers.video_resize`` gives ``readers.video``'s sequences with every frame resized as
    ``fn.resize`` resizes that frame as an image."""
    args = dict(filenames=[videos["h264"], videos["vp9_small"]], labels=[0, 1], sequence_length=3, step=9)
    (plain,) = _run(fn.readers.video, batch_size=5, **args)
    (resized,) = _run(fn.readers.video_resize, batch_size=5, **args, **resize)
    frames = [frame for clip in plain[0] for frame in clip]

    @rp.pipeline_def(batch_size=len(frames), num_threads=1, device_id=None)
    def reference():
        return fn.resize(fn.external_source(source=lambda: frames, layout="HWC", batch=True), **resize)

    p = reference()
    p.build()
    (expected,) = p.run()
    got = [frame for clip in resized[0] for frame in clip]
    for a, b in zip(expected, got, strict=True):
        np.testing.assert_array_equal(np.asarray(a), b)
    np.testing.assert_array_equal(np.concatenate(resized[1]), np.concatenate(plain[1]))
    with pytest.raises(ArgumentError, match="region of interest"):
        _run(fn.readers.video_resize, **args, resize_x=10, roi_start=(0, 0))


def test_videos_on_a_bucket_read_as_the_local_files(videos, s3_server, tmp_path):
    """``file_root`` and ``file_list`` on an S3 bucket (moto): the same sequences, labels and frames
    as the local folder, the objects read by ranged requests."""
    url = s3_server.upload(videos["root"], "video-test", "classes")
    args = dict(sequence_length=3, step=3, enable_timestamps=False)
    (local,) = _run(fn.readers.video, batch_size=10, file_root=videos["root"], **args)
    (remote,) = _run(fn.readers.video, batch_size=10, file_root=url, **args)
    for a, b in zip(local, remote):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    s3_server.client().put_object(Bucket="video-test", Key="list.txt", Body=f"{url}/walk/1.mp4 4 2 8\n".encode())
    (listed,) = _run(fn.readers.video, batch_size=2, file_list="s3://video-test/list.txt", sequence_length=2,
                     step=2, file_list_frame_num=True, enable_frame_num=True)  # fmt: skip
    assert [int(f[0]) for f in listed[2]] == [2, 4] and [int(x[0]) for x in listed[1]] == [4, 4]
