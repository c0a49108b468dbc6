"""A public DALI video training input pipeline, ported by renaming the import: DALI's video
super-resolution example (``ops.VideoReader`` on the GPU, a random crop of every sequence, a
transpose to CFHW, ``DALIGenericIterator`` with ``auto_reset``), run on VP9 files written here, and
compared with DALI 2.4's CPU build running the same script with the CPU video reader."""

from __future__ import annotations

import numpy as np
import pytest

from tests.script_harness import as_dali_cpu, ported, run_script
from tests.video_data import write_video

pytest.importorskip("torch")
pytest.importorskip("av")

# NVIDIA/DALI, docs/examples/use_cases/video_superres/dataloading/dataloaders.py (commit
# 0ff87c643991a321dd33c3bbbdec96c833a4e1aa): VideoReaderPipeline and DALILoader as written
# (ops.VideoReader on the GPU with random_shuffle, initial_fill and pad_last_batch, ops.Crop with
# its deprecated output_dtype and uniform crop positions from ops.Uniform, ops.Transpose to CFHW,
# DALIGenericIterator with reader_name, fill_last_batch=False and auto_reset=True). Changed: the
# torch and dataloading.datasets imports and get_loader (the PyTorch-loader branch) are left out;
# two epochs of batches of 2, 3-frame sequences cropped to 24x32, over the test's files.
SUPERRES = """
import sys
import copy
from glob import glob
import math
import os

from nvidia.dali.pipeline import Pipeline
from nvidia.dali.plugin import pytorch
import nvidia.dali.ops as ops
import nvidia.dali.types as types

class VideoReaderPipeline(Pipeline):
    def __init__(self, batch_size, sequence_length, num_threads, device_id, files, crop_size):
        super(VideoReaderPipeline, self).__init__(batch_size, num_threads, device_id, seed=12)
        self.reader = ops.VideoReader(device="gpu", filenames=files, sequence_length=sequence_length,
                                     normalized=False, random_shuffle=True, image_type=types.RGB,
                                     dtype=types.UINT8, initial_fill=16, pad_last_batch=True)
        self.crop = ops.Crop(device="gpu", crop=crop_size, output_dtype=types.FLOAT)
        self.uniform = ops.Uniform(range=(0.0, 1.0))
        self.transpose = ops.Transpose(device="gpu", perm=[3, 0, 1, 2])

    def define_graph(self):
        input = self.reader(name="Reader")
        cropped = self.crop(input, crop_pos_x=self.uniform(), crop_pos_y=self.uniform())
        output = self.transpose(cropped)
        return output

class DALILoader():
    def __init__(self, batch_size, file_root, sequence_length, crop_size):
        container_files = os.listdir(file_root)
        container_files = [file_root + '/' + f for f in container_files]
        self.pipeline = VideoReaderPipeline(batch_size=batch_size,
                                            sequence_length=sequence_length,
                                            num_threads=2,
                                            device_id=0,
                                            files=container_files,
                                            crop_size=crop_size)
        self.pipeline.build()
        self.epoch_size = self.pipeline.epoch_size("Reader")
        self.dali_iterator = pytorch.DALIGenericIterator(self.pipeline,
                                                         ["data"],
                                                         reader_name="Reader",
                                                         fill_last_batch=False,
                                                         auto_reset=True)
    def __len__(self):
        return int(self.epoch_size)
    def __iter__(self):
        return self.dali_iterator.__iter__()

loader = DALILoader(2, DATA, 3, [24, 32])
RESULT = {"len": len(loader), "epochs": []}
for epoch in range(2):
    RESULT["epochs"].append([batch[0]["data"].cpu().numpy() for batch in loader])
"""

# DALI's CPU build has no legacy video reader (it decodes on the GPU only): its CPU reader, with the
# same sequences for stride 1, reads the files there; it has no dtype or normalized arguments.
DALI_CPU_EDITS = (
    ("ops.VideoReader(", "ops.experimental.readers.Video("),
    ("normalized=False, random_shuffle=True", "random_shuffle=True"),
    ("dtype=types.UINT8, initial_fill=16", "initial_fill=16"),
)


@pytest.fixture(scope="module")
def video_root(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("superres")
    for name, frames in (("a.webm", 10), ("b.webm", 7), ("c.mkv", 9)):
        write_video(f"{root}/{name}", frames, "vp9")
    return str(root)


def test_video_superres_loader(video_root):
    result = ported(SUPERRES, video_root)
    assert result["len"] == 8, "3 + 2 + 3 sequences of 3 frames"
    for steps in result["epochs"]:
        assert [s.shape for s in steps] == [(2, 3, 3, 24, 32)] * 4
        for batch in steps:
            assert batch.dtype == np.float32 and 0 <= batch.min() and batch.max() <= 255
            red = np.median(batch[:, 0], axis=(2, 3))  # frame k's red level is 8 k
            np.testing.assert_allclose(np.diff(red, axis=1), 8, atol=3)
    first = [np.median(s[:, 0, 0], axis=(1, 2)) for s in result["epochs"][0]]
    assert sorted(np.round(np.concatenate(first) / 8).astype(int).tolist()) == [0, 0, 0, 3, 3, 3, 6, 6]
    pytest.importorskip("nvidia.dali")
    dali = run_script(as_dali_cpu(SUPERRES, DALI_CPU_EDITS), video_root)
    assert dali["len"] == result["len"]
    for ours, theirs in zip(result["epochs"], dali["epochs"], strict=True):
        assert [(s.shape, s.dtype) for s in ours] == [(s.shape, s.dtype) for s in theirs]
