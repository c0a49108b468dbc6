"""A public DALI detection training pipeline run unchanged after renaming ``nvidia.dali`` to ``raypipe``,
and compared with DALI 2.4's CPU build, as the port tests of :mod:`tests.test_porting_scripts`: the
script is its source's pipeline, operator for operator and argument for argument, cut down only
where it must be to run here (named above it, with every change)."""

from __future__ import annotations

import numpy as np
import pytest

from raypipe.coco_dataset import make_coco_dataset
from tests.script_harness import as_dali_cpu, ported, run_script

# NVIDIA/DeepLearningExamples, PyTorch/Detection/SSD/ssd/coco_pipeline.py (commit
# 04099020ae68b5767bf5c74db3dcace0c215c730): COCOPipeline as written (ops.readers.COCO with ratio, ltrb,
# shuffle_after_epoch and skip_empty, ops.decoders.ImageSlice fed by ops.RandomBBoxCrop's anchor and
# shape, ops.Flip and ops.BbFlip on one coin, ops.Resize to 300x300, ops.Hsv and ops.BrightnessContrast on
# random.Uniform arguments, ops.CropMirrorNormalize to NCHW, ops.BoxEncoder over the SSD300 default
# boxes), with the DefaultBoxes class and dboxes300_coco() of the same example's ssd/utils.py (commit
# 04099020ae68b5767bf5c74db3dcace0c215c730) that its callers pass as default_boxes, with the imports they use
# (itertools, sqrt). Changed: the
# DALICOCOIterator and feed_ndarray (CUDA tensors, torch.cuda.synchronize) and utils.py's other classes
# are left out; the loop runs the pipeline for two epochs of pipe.epoch_size("Reader") samples in batches
# of 4 with pipe.run() and records shapes, dtypes, layouts and the encoded labels; lines longer than 120
# columns are wrapped.
SSD_COCO_PIPELINE = """
import ctypes
import time
import logging

import numpy as np
import torch
import itertools
from math import sqrt

# DALI imports
import nvidia.dali as dali
from nvidia.dali.pipeline import Pipeline
from nvidia.dali.types import to_numpy_type


class COCOPipeline(Pipeline):
    def __init__(self, batch_size, file_root, annotations_file, default_boxes,
                 device_id, num_shards,
                 output_fp16=False, output_nhwc=False, pad_output=False,
                 num_threads=1, seed=15):
        super(COCOPipeline, self).__init__(batch_size=batch_size,
                                           device_id=device_id,
                                           num_threads=num_threads,
                                           seed=seed)

        if torch.distributed.is_initialized():
            shard_id = torch.distributed.get_rank()
        else:
            shard_id = 0

        # Data loader and image decoder
        self.input = dali.ops.readers.COCO(file_root=file_root,
                                           annotations_file=annotations_file,
                                           shard_id=shard_id,
                                           num_shards=num_shards,
                                           ratio=True,
                                           ltrb=True,
                                           shuffle_after_epoch=True,
                                           skip_empty=True)
        self.decode_slice = dali.ops.decoders.ImageSlice(device="cpu",
                                                         output_type=dali.types.RGB)

        # Augumentation techniques
        ## Random crop
        self.crop = dali.ops.RandomBBoxCrop(device="cpu",
                                            aspect_ratio=[0.5, 2.0],
                                            thresholds=[0, 0.1, 0.3, 0.5, 0.7, 0.9],
                                            scaling=[0.3, 1.0],
                                            bbox_layout="xyXY",
                                            allow_no_crop=True,
                                            num_attempts=1)
        ## Color twist
        self.hsv = dali.ops.Hsv(device="gpu",
                                dtype=dali.types.FLOAT)  # use float to avoid clipping and quantizing the intermediate
                                                         # result
        self.bc = dali.ops.BrightnessContrast(device="gpu",
                                              contrast_center=128,  # input is in the [0, 255] range
                                              dtype=dali.types.UINT8)
        ## Cropping and normalization
        dtype = dali.types.FLOAT16 if output_fp16 else dali.types.FLOAT
        output_layout = dali.types.NHWC if output_nhwc else dali.types.NCHW
        self.normalize = dali.ops.CropMirrorNormalize(
            device="gpu",
            crop=(300, 300),
            mean=[0.0, 0.0, 0.0],
            std=[255.0, 255.0, 255.0],
            mirror=0,
            dtype=dtype,
            output_layout=output_layout,
            pad_output=pad_output)
        ## Flipping
        self.flip = dali.ops.Flip(device="cpu")
        self.bbflip = dali.ops.BbFlip(device="cpu", ltrb=True)

        # Resize
        self.resize = dali.ops.Resize(device="cpu",
                                      resize_x=300,
                                      resize_y=300)

        # Random variables
        self.rng1 = dali.ops.random.Uniform(range=[0.5, 1.5])
        self.rng2 = dali.ops.random.Uniform(range=[0.875, 1.125])
        self.rng3 = dali.ops.random.Uniform(range=[-0.5, 0.5])
        self.flip_coin = dali.ops.random.CoinFlip(probability=0.5)

        # bbox encoder
        self.anchors = default_boxes(order='ltrb').cpu().numpy().flatten().tolist()
        self.box_encoder = dali.ops.BoxEncoder(device="cpu",
                                               criteria=0.5,
                                               anchors=self.anchors)

    def define_graph(self):
        saturation = self.rng1()
        contrast = self.rng1()
        brightness = self.rng2()
        hue = self.rng3()
        coin_rnd = self.flip_coin()

        inputs, bboxes, labels = self.input(name="Reader")
        crop_begin, crop_size, bboxes, labels = self.crop(bboxes, labels)
        images = self.decode_slice(inputs, crop_begin, crop_size)

        images = self.flip(images, horizontal=coin_rnd)
        bboxes = self.bbflip(bboxes, horizontal=coin_rnd)
        images = self.resize(images)
        images = images.gpu()

        images = self.hsv(images, hue=hue, saturation=saturation)
        images = self.bc(images, brightness=brightness, contrast=contrast)

        images = self.normalize(images)
        bboxes, labels = self.box_encoder(bboxes, labels)

        # bboxes and images and labels on GPU
        return (images, bboxes.gpu(), labels.gpu())


class DefaultBoxes(object):
    def __init__(self, fig_size, feat_size, steps, scales, aspect_ratios, \\
                       scale_xy=0.1, scale_wh=0.2):

        self.feat_size = feat_size
        self.fig_size = fig_size

        self.scale_xy_ = scale_xy
        self.scale_wh_ = scale_wh

        # According to https://github.com/weiliu89/caffe
        # Calculation method slightly different from paper
        self.steps = steps
        self.scales = scales

        fk = fig_size/np.array(steps)
        self.aspect_ratios = aspect_ratios

        self.default_boxes = []
        # size of feature and number of feature
        for idx, sfeat in enumerate(self.feat_size):

            sk1 = scales[idx]/fig_size
            sk2 = scales[idx+1]/fig_size
            sk3 = sqrt(sk1*sk2)
            all_sizes = [(sk1, sk1), (sk3, sk3)]

            for alpha in aspect_ratios[idx]:
                w, h = sk1*sqrt(alpha), sk1/sqrt(alpha)
                all_sizes.append((w, h))
                all_sizes.append((h, w))
            for w, h in all_sizes:
                for i, j in itertools.product(range(sfeat), repeat=2):
                    cx, cy = (j+0.5)/fk[idx], (i+0.5)/fk[idx]
                    self.default_boxes.append((cx, cy, w, h))

        self.dboxes = torch.tensor(self.default_boxes, dtype=torch.float)
        self.dboxes.clamp_(min=0, max=1)
        # For IoU calculation
        self.dboxes_ltrb = self.dboxes.clone()
        self.dboxes_ltrb[:, 0] = self.dboxes[:, 0] - 0.5 * self.dboxes[:, 2]
        self.dboxes_ltrb[:, 1] = self.dboxes[:, 1] - 0.5 * self.dboxes[:, 3]
        self.dboxes_ltrb[:, 2] = self.dboxes[:, 0] + 0.5 * self.dboxes[:, 2]
        self.dboxes_ltrb[:, 3] = self.dboxes[:, 1] + 0.5 * self.dboxes[:, 3]

    @property
    def scale_xy(self):
        return self.scale_xy_

    @property
    def scale_wh(self):
        return self.scale_wh_

    def __call__(self, order="ltrb"):
        if order == "ltrb": return self.dboxes_ltrb
        if order == "xywh": return self.dboxes


def dboxes300_coco():
    figsize = 300
    feat_size = [38, 19, 10, 5, 3, 1]
    steps = [8, 16, 32, 64, 100, 300]
    # use the scales here: https://github.com/amdegroot/ssd.pytorch/blob/master/data/config.py
    scales = [21, 45, 99, 153, 207, 261, 315]
    aspect_ratios = [[2], [2, 3], [2, 3], [2, 3], [2], [2]]
    dboxes = DefaultBoxes(figsize, feat_size, steps, scales, aspect_ratios)
    return dboxes


pipe = COCOPipeline(batch_size=4, file_root=FILE_ROOT, annotations_file=ANNOTATIONS,
                    default_boxes=dboxes300_coco(), device_id=0, num_shards=1)
pipe.build()
size = pipe.epoch_size("Reader")
RESULT = {"size": size, "epochs": [], "anchors": len(pipe.anchors) // 4}
for epoch in range(2):
    steps = []
    for _ in range((size + 3) // 4):
        images, bboxes, labels = pipe.run()
        images, bboxes, labels = images.as_cpu(), bboxes.as_cpu(), labels.as_cpu()
        steps.append({
            "layouts": (images.layout(), bboxes.layout(), labels.layout()),
            "types": tuple(str(to_numpy_type(out.dtype)) for out in (images, bboxes, labels)),
            "images": np.array(images.as_tensor()),
            "bboxes": [np.array(bboxes.at(i)) for i in range(len(bboxes))],
            "labels": [np.array(labels.at(i)) for i in range(len(labels))],
        })
    RESULT["epochs"].append(steps)
"""


@pytest.fixture(scope="module")
def coco(tmp_path_factory) -> tuple[str, str]:
    return make_coco_dataset(str(tmp_path_factory.mktemp("coco")), images=12, seed=5)


def _structure(result: dict) -> dict:
    """Steps, layouts, dtypes and shapes of each output (boxes and labels per anchor)."""
    return {
        "size": result["size"],
        "anchors": result["anchors"],
        "epochs": [
            [
                (
                    s["layouts"],
                    s["types"],
                    s["images"].shape,
                    [b.shape for b in s["bboxes"]],
                    [x.shape for x in s["labels"]],
                )
                for s in steps
            ]
            for steps in result["epochs"]
        ],
    }


def test_deeplearningexamples_ssd_coco_pipeline(coco):
    file_root, annotations = coco
    result = ported(SSD_COCO_PIPELINE, file_root, FILE_ROOT=file_root, ANNOTATIONS=annotations)
    assert result["size"] == 11, "skip_empty drops the image without objects"
    assert result["anchors"] == 8732, "SSD300's default boxes"
    for steps in result["epochs"]:
        assert len(steps) == 3
        for step in steps:
            assert step["layouts"] == ("CHW", "", "")
            assert step["types"] == ("<class 'numpy.float32'>", "<class 'numpy.float32'>", "<class 'numpy.int32'>")
            assert step["images"].shape == (4, 3, 300, 300)
            assert 0.0 <= step["images"].min() and step["images"].max() <= 1.0
            for boxes, labels in zip(step["bboxes"], step["labels"]):
                assert boxes.shape == (8732, 4) and labels.shape == (8732,)
                assert set(np.unique(labels).tolist()) <= {0, 1, 2, 3, 4} and labels.any(), "every image keeps a box"
                matched = boxes[labels > 0]
                assert (matched[:, 2:] > 0).all() and (matched[:, :2] >= 0).all() and (matched[:, :2] <= 1).all()
    pytest.importorskip("nvidia.dali")
    dali = run_script(as_dali_cpu(SSD_COCO_PIPELINE), file_root, FILE_ROOT=file_root, ANNOTATIONS=annotations)
    assert _structure(result) == _structure(dali)
