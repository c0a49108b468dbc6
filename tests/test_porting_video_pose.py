"""Lightning Pose's DALI video pipeline, ported by renaming the import: ``fn.readers.video`` on the
GPU with float frames and padded sequences, ``fn.shapes``, a resize of every frame, its "dlc"
augmentation (a random rotation and scale as ``transforms`` matrices applied by ``warp_affine``,
``brightness_contrast``, ``noise.shot``), arithmetic on the frames and ``crop_mirror_normalize`` to
FCHW, read through its ``DALIGenericIterator`` subclass in training and prediction mode, on H.264
files written here. DALI runs this pipeline on the GPU only (its legacy video reader), so the
frames are checked against decoding the files from their start instead."""

from __future__ import annotations

import numpy as np
import pytest

from tests.script_harness import ported
from tests.video_data import decode_all, write_video

pytest.importorskip("torch")
pytest.importorskip("av")

# paninski-lab/lightning-pose, lightning_pose/data/dali.py (commit
# 083ae466eeca48f238ec0ba4ae3e5eed55998fdc): video_pipe and LitDaliWrapper as written. Changed:
# _IMAGENET_MEAN and _IMAGENET_STD (lightning_pose.data) are written out; the lightning_pose
# datatypes UnlabeledBatchDict and MultiviewUnlabeledBatchDict are dict; the omegaconf and
# count_frames imports and PrepareDALI are left out, and the pipelines are made with the arguments
# PrepareDALI gives its "train"/"base" and "predict"/"base" pipes and iterators (dali_config's
# sequence lengths 4 and 6, resize_dims [32, 48], seed 123456, two threads).
POSE = """
import os
from typing import Literal

import numpy as np
import nvidia.dali.fn as fn
import nvidia.dali.types as types
import torch
from nvidia.dali import pipeline_def
from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

_IMAGENET_MEAN = [0.485, 0.456, 0.406]
_IMAGENET_STD = [0.229, 0.224, 0.225]
UnlabeledBatchDict = dict
MultiviewUnlabeledBatchDict = dict


@pipeline_def
def video_pipe(
    filenames: list[str] | str | list[list[str]],
    resize_dims: list[int] | None = None,
    random_shuffle: bool = False,
    sequence_length: int = 16,
    pad_sequences: bool = True,
    initial_fill: int = 16,
    normalization_mean: list[float] = _IMAGENET_MEAN,
    normalization_std: list[float] = _IMAGENET_STD,
    name: str = "reader",
    step: int = 1,
    pad_last_batch: bool = False,
    imgaug: str = "default",
    skip_vfr_check: bool = True,
) -> tuple:
    filenames_2d: list[list[str]]
    if isinstance(filenames, str):
        filenames_2d = [[filenames]]
    elif isinstance(filenames[0], str):
        filenames_2d = [filenames]  # type: ignore[list-item]
    else:
        filenames_2d = filenames  # type: ignore[assignment]

    # loop over views (can be only one)
    frames_list = []
    transform_list = []
    orig_size_list = []
    for f, filename_list in enumerate(filenames_2d):
        video = fn.readers.video(
            device="gpu",
            filenames=filename_list,
            random_shuffle=random_shuffle,
            sequence_length=sequence_length,
            step=step,
            pad_sequences=pad_sequences,
            initial_fill=initial_fill,
            normalized=False,
            name=f"{name}_{f}",
            dtype=types.DALIDataType.FLOAT,
            pad_last_batch=pad_last_batch,  # Important for context loaders
            file_list_include_preceding_frame=True,  # to get rid of dali warnings
            skip_vfr_check=skip_vfr_check,
        )
        orig_size = fn.shapes(video)  # type: ignore[arg-type]
        if resize_dims:
            video = fn.resize(video, size=resize_dims)  # type: ignore[arg-type]
        if imgaug == "dlc" or imgaug == "dlc-top-down":
            assert resize_dims is not None
            size = (resize_dims[0] / 2, resize_dims[1] / 2)
            center = size  # / 2
            # rotate + scale
            angle = fn.random.uniform(range=(-10, 10))
            transform = fn.transforms.rotation(angle=angle, center=center)
            scale = fn.random.uniform(range=(0.8, 1.2), shape=2)
            transform = fn.transforms.scale(transform, scale=scale, center=center)
            video = fn.warp_affine(
                video,  # type: ignore[arg-type]
                matrix=transform, fill_value=0, inverse_map=False,
            )
            # brightness contrast:
            contrast = fn.random.uniform(range=(0.75, 1.25))
            brightness = fn.random.uniform(range=(0.75, 1.25))
            video = fn.brightness_contrast(video, brightness=brightness, contrast=contrast)
            # # shot noise
            factor = fn.random.uniform(range=(0.0, 10.0))
            video = fn.noise.shot(video, factor=factor)
        else:
            # choose arbitrary scalar (rather than a matrix) so that downstream operations know
            # there is no geometric transforms to undo
            transform = np.array([-1])
        # video pixel range is [0, 255]; transform it to [0, 1].
        # happens naturally in the torchvision transform to tensor.
        video = video / 255.0  # type: ignore[operator]
        # permute dimensions and normalize to imagenet statistics
        frames = fn.crop_mirror_normalize(
            video,
            output_layout="FCHW",
            mean=normalization_mean,
            std=normalization_std,
        )
        frames_list.append(frames)
        transform_list.append(transform)
        orig_size_list.append(orig_size)

    return (*frames_list, *transform_list, *orig_size_list)


class LitDaliWrapper(DALIGenericIterator):
    def __init__(
        self,
        *args,
        eval_mode: Literal["train", "predict"],
        num_iters: int = 1,
        do_context: bool = False,
        **kwargs
    ) -> None:
        self.num_iters = num_iters
        self.do_context = do_context
        self.eval_mode = eval_mode
        self.batch_sampler = 1  # hack to get around DALI-ptl issue
        # call parent
        super().__init__(*args, **kwargs)

    def __len__(self) -> int:
        return self.num_iters

    @staticmethod
    def _dali_output_to_tensors(
        batch: list
    ) -> UnlabeledBatchDict | MultiviewUnlabeledBatchDict:

        # always batch_size=1

        if len(batch[0].keys()) == 3:  # single view pipeline

            # shape (sequence_length, 3, H, W)
            frames = batch[0]["frames"][0, :, :, :, :]
            # shape (1,) or (2, 3)
            transforms = batch[0]["transforms"][0]
            # get frame size
            if batch[0]["frame_size"][0, -1] == 3:  # order is seq_len,H,W,C
                height = batch[0]["frame_size"][0, 1]
                width = batch[0]["frame_size"][0, 2]
            else:  # order is seq_len,C,H,W
                height = batch[0]["frame_size"][0, 2]
                width = batch[0]["frame_size"][0, 3]
            bbox = torch.tensor([0, 0, height, width], device=frames.device).repeat(
                (frames.shape[0], 1))

            return UnlabeledBatchDict(
                frames=frames, transforms=transforms, bbox=bbox, is_multiview=False,
            )

        else:  # multiview pipeline
            raise NotImplementedError

    def __next__(self) -> UnlabeledBatchDict | MultiviewUnlabeledBatchDict:
        batch = super().__next__()
        return self._dali_output_to_tensors(batch=batch)


output_map = ["frames", "transforms", "frame_size"]
RESULT = {}
train = video_pipe(filenames=FILES, resize_dims=[32, 48], sequence_length=4, step=4, batch_size=1, seed=123456,
                   num_threads=2, device_id=0, random_shuffle=True, imgaug="dlc")
loader = LitDaliWrapper(train, num_iters=NUM_ITERS, eval_mode="train", do_context=False, output_map=output_map,
                        last_batch_policy=LastBatchPolicy.PARTIAL, auto_reset=True)
RESULT["train"] = [next(loader) for _ in range(len(loader))]
predict = video_pipe(filenames=FILES, resize_dims=[32, 48], sequence_length=6, step=6, batch_size=1, seed=123456,
                     num_threads=2, device_id=0, random_shuffle=False, name="reader", pad_sequences=True,
                     imgaug="default")
loader = LitDaliWrapper(predict, num_iters=NUM_PREDICT, eval_mode="predict", do_context=False, output_map=output_map,
                        last_batch_policy=LastBatchPolicy.FILL, last_batch_padded=False, auto_reset=False,
                        reader_name="reader_0")
RESULT["predict"] = [batch for batch in loader]
"""

MEAN = np.array([0.485, 0.456, 0.406], np.float32)[:, None, None]
STD = np.array([0.229, 0.224, 0.225], np.float32)[:, None, None]


@pytest.fixture(scope="module")
def videos(tmp_path_factory) -> list[str]:
    root = tmp_path_factory.mktemp("pose")
    return [write_video(f"{root}/session{i}.mp4", n, "h264") for i, n in enumerate((14, 9))]


def _resized(frames: np.ndarray) -> np.ndarray:
    """Float frames resized to 32x48 by raypipe's resize, as the pipeline resizes them (CHW)."""
    import raypipe as rp

    @rp.pipeline_def(batch_size=len(frames), num_threads=1, device_id=None)
    def pipe():
        x = rp.fn.external_source(source=lambda: list(frames.astype(np.float32)), layout="HWC", batch=True)
        return rp.fn.resize(x, size=[32, 48])

    p = pipe()
    p.build()
    (out,) = p.run()
    return np.stack([np.asarray(out[i]).transpose(2, 0, 1) for i in range(len(frames))])


def test_lightning_pose_video_pipe(videos):
    result = ported(POSE, "", FILES=videos, NUM_ITERS=5, NUM_PREDICT=5)
    for batch in result["train"]:
        frames = batch["frames"].numpy()
        assert frames.shape == (4, 3, 32, 48) and frames.dtype == np.float32
        assert tuple(batch["transforms"].shape) == (2, 3), "the rotation and scale matrix"
        assert batch["bbox"].numpy().tolist() == [[0, 0, 48, 64]] * 4, "the frames' size before the resize"
    # prediction: the sequences in order, the last of each file padded with zero frames
    starts = [(0, 0), (0, 6), (0, 12), (1, 0), (1, 6)]
    assert len(result["predict"]) == 5, "one epoch of the reader: every sequence once"
    references = [decode_all(v) for v in videos]
    for batch, (k, start) in zip(result["predict"], starts):
        frames = batch["frames"].numpy()
        assert frames.shape == (6, 3, 32, 48) and batch["transforms"].numpy().tolist() == [-1]
        count = min(6, len(references[k]) - start)
        expected = (_resized(references[k][start : start + count]) / np.float32(255) - MEAN) / STD
        np.testing.assert_allclose(frames[:count], expected, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(frames[count:], np.broadcast_to(-MEAN / STD, frames[count:].shape), rtol=1e-5)
