"""A video pipeline through ``rp.serve`` with 2 ranks: sequences decoded from H.264 and VP9 files
in the pipeline actors reach each rank, every sequence exactly once per epoch, with the frames that
decoding each file from its start gives, and equal batch counts on the ranks; per-frame arguments
(``fn.per_frame``) travel to the actors with their pipeline."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from tests.cluster.pipelines import FRAME_GAINS, video_clips, video_clips_per_frame
from tests.video_data import decode_all, write_video

pytest.importorskip("av")

WORLD = 2
#: the files: (codec, frames); 3-frame sequences every 3 frames
FILES = [("h264", 14), ("vp9", 10), ("h264", 9), ("vp9", 7)]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> list[str]:
    root = tmp_path_factory.mktemp("video-service")
    suffix = {"h264": "mp4", "vp9": "webm"}
    return [write_video(f"{root}/clip{i}.{suffix[c]}", n, c) for i, (c, n) in enumerate(FILES)]


def test_each_sequence_once_per_epoch_with_its_frames(cluster, files):
    references = [decode_all(f) for f in files]
    expected = sorted((k, s) for k, (_, n) in enumerate(FILES) for s in range(0, n - 2, 3))
    svc = rp.serve(video_clips, name="svc-video", files=files, world_size=WORLD, seed=2, num_cpus_per_actor=0.25,
                   replace=True)  # fmt: skip
    try:
        loaders = [rp.loader("svc-video", rank=r, world_size=WORLD, output="numpy") for r in range(WORLD)]
        for epoch in (0, 1):
            seen, counts = [], []
            for ld in loaders:
                ld.set_epoch(epoch)
                count = 0
                for clips, labels, firsts in ld:
                    count += 1
                    for clip, label, first, pad in zip(clips, labels, firsts, ld.last_is_pad):
                        if pad:
                            continue
                        k, s = int(np.asarray(label)[0]), int(np.asarray(first)[0])
                        np.testing.assert_array_equal(clip, references[k][s : s + 3, :24, :32])
                        seen.append((k, s))
                counts.append(count)
            assert sorted(seen) == expected, f"epoch {epoch}: each sequence exactly once"
            assert counts[0] == counts[1] > 0, "the ranks step together"
    finally:
        svc.shutdown()


def test_per_frame_arguments_reach_the_actors(cluster, files):
    """Each frame of every sequence scaled by its own gain, in the pipeline actors."""
    references = [decode_all(f) for f in files]
    svc = rp.serve(video_clips_per_frame, name="svc-video-frames", files=files, world_size=WORLD, seed=2,
                   num_cpus_per_actor=0.25, replace=True)  # fmt: skip
    try:
        checked = 0
        for rank in range(WORLD):
            loader = rp.loader("svc-video-frames", rank=rank, world_size=WORLD, output="numpy")
            loader.set_epoch(0)
            for clips, labels, firsts in loader:
                for clip, label, first, pad in zip(clips, labels, firsts, loader.last_is_pad):
                    if pad:
                        continue
                    k, s = int(np.asarray(label)[0]), int(np.asarray(first)[0])
                    for f, gain in enumerate(FRAME_GAINS):
                        expected = references[k][s + f, :24, :32].astype(np.float64) * gain
                        assert np.abs(clip[f].astype(np.float64) - expected).max() <= 1, (k, s, f)
                    checked += 1
        assert checked == sum(len(range(0, n - 2, 3)) for _, n in FILES)
    finally:
        svc.shutdown()
