"""Public DALI training pipelines, each run unchanged after renaming ``nvidia.dali`` to ``raypipe``.

Each script is a public pipeline as its source has it (named above it: repository, path, commit),
with its pipeline definitions and iterator loop kept operator for operator, argument for argument;
it is cut down only where it must be to run here: the data come from the JPEG fixture (readers
point at ``jpeg_root``; external sources read its files), batches are small, one or two epochs,
and code outside the data pipeline (models, framework wrappers, command lines) is left out; lines
longer than 120 columns are wrapped. Each change is listed above the script. The test runs it
under raypipe with ``device_id=0`` on a machine without a GPU (raypipe warns and runs on the
CPU) and, where DALI is installed (CPU build), its CPU-only variant under DALI, and compares
steps, shapes, dtypes, layouts and labels, and the values where the pipeline is deterministic.
"""

from __future__ import annotations

import os
import random

import numpy as np
import pytest
from PIL import Image

from raypipe.formats.recordio import RecordIOWriter
from tests.script_harness import as_dali_cpu, ported, run_script, structure

#: DATALOADERS_DALI_IMAGENET's decoder names before DALI 1.0 -> DALI 2.4's
DALI_1_DECODER_NAMES = [
    ("HostDecoderRandomCrop", "ImageDecoderRandomCrop"),
    ("nvJPEGDecoderRandomCrop", "ImageDecoderRandomCrop"),
    ("nvJPEGDecoder", "ImageDecoder"),
]

# tanglang96/DataLoaders_DALI, imagenet.py (commit 387cbe2e583f3dc19d36af6b43a93d941d6c90a1): ImageNet
# training and validation pipelines in the class style, with CropMirrorNormalize's deprecated
# output_dtype= and image_type=, INTERP_TRIANGULAR resizes and DALIClassificationIterator(size=...).
# Its decoders keep their names from before DALI 1.0 (ops.nvJPEGDecoderRandomCrop,
# ops.HostDecoderRandomCrop, ops.nvJPEGDecoder), which raypipe takes and DALI 2.4 no longer has:
# DALI runs it with ops.ImageDecoderRandomCrop and ops.ImageDecoder. Changed: the torchvision loader
# and the timing __main__ (Python 2's .cuda(async=True)) are left out; the loop runs two epochs with
# reset() on batches of 8, crop 32, val_size 40.
DATALOADERS_DALI_IMAGENET = """
from nvidia.dali.pipeline import Pipeline
import nvidia.dali.ops as ops
import nvidia.dali.types as types
from nvidia.dali.plugin.pytorch import DALIClassificationIterator, DALIGenericIterator


class HybridTrainPipe(Pipeline):
    def __init__(self, batch_size, num_threads, device_id, data_dir, crop, dali_cpu=False, local_rank=0, world_size=1):
        super(HybridTrainPipe, self).__init__(batch_size, num_threads, device_id, seed=12 + device_id)
        self.input = ops.FileReader(file_root=data_dir, shard_id=local_rank, num_shards=world_size,
                                    random_shuffle=True)
        # let user decide which pipeline works him bets for RN version he runs
        if dali_cpu:
            dali_device = "cpu"
            self.decode = ops.HostDecoderRandomCrop(device=dali_device, output_type=types.RGB,
                                                    random_aspect_ratio=[0.8, 1.25],
                                                    random_area=[0.1, 1.0],
                                                    num_attempts=100)
        else:
            dali_device = "gpu"
            # This padding sets the size of the internal nvJPEG buffers to be able to handle all images from
            # full-sized ImageNet without additional reallocations
            self.decode = ops.nvJPEGDecoderRandomCrop(device="mixed", output_type=types.RGB,
                                                      device_memory_padding=211025920, host_memory_padding=140544512,
                                                      random_aspect_ratio=[0.8, 1.25],
                                                      random_area=[0.1, 1.0],
                                                      num_attempts=100)
        self.res = ops.Resize(device=dali_device, resize_x=crop, resize_y=crop, interp_type=types.INTERP_TRIANGULAR)
        self.cmnp = ops.CropMirrorNormalize(device="gpu",
                                            output_dtype=types.FLOAT,
                                            output_layout=types.NCHW,
                                            crop=(crop, crop),
                                            image_type=types.RGB,
                                            mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
                                            std=[0.229 * 255, 0.224 * 255, 0.225 * 255])
        self.coin = ops.CoinFlip(probability=0.5)
        print('DALI "{0}" variant'.format(dali_device))

    def define_graph(self):
        rng = self.coin()
        self.jpegs, self.labels = self.input(name="Reader")
        images = self.decode(self.jpegs)
        images = self.res(images)
        output = self.cmnp(images.gpu(), mirror=rng)
        return [output, self.labels]


class HybridValPipe(Pipeline):
    def __init__(self, batch_size, num_threads, device_id, data_dir, crop, size, local_rank=0, world_size=1):
        super(HybridValPipe, self).__init__(batch_size, num_threads, device_id, seed=12 + device_id)
        self.input = ops.FileReader(file_root=data_dir, shard_id=local_rank, num_shards=world_size,
                                    random_shuffle=False)
        self.decode = ops.nvJPEGDecoder(device="mixed", output_type=types.RGB)
        self.res = ops.Resize(device="gpu", resize_shorter=size, interp_type=types.INTERP_TRIANGULAR)
        self.cmnp = ops.CropMirrorNormalize(device="gpu",
                                            output_dtype=types.FLOAT,
                                            output_layout=types.NCHW,
                                            crop=(crop, crop),
                                            image_type=types.RGB,
                                            mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
                                            std=[0.229 * 255, 0.224 * 255, 0.225 * 255])

    def define_graph(self):
        self.jpegs, self.labels = self.input(name="Reader")
        images = self.decode(self.jpegs)
        images = self.res(images)
        output = self.cmnp(images)
        return [output, self.labels]


def get_imagenet_iter_dali(type, image_dir, batch_size, num_threads, device_id, num_gpus, crop, val_size=256,
                           world_size=1,
                           local_rank=0):
    if type == 'train':
        pip_train = HybridTrainPipe(batch_size=batch_size, num_threads=num_threads, device_id=local_rank,
                                    data_dir=image_dir,
                                    crop=crop, world_size=world_size, local_rank=local_rank)
        pip_train.build()
        dali_iter_train = DALIClassificationIterator(pip_train, size=pip_train.epoch_size("Reader") // world_size)
        return dali_iter_train
    elif type == 'val':
        pip_val = HybridValPipe(batch_size=batch_size, num_threads=num_threads, device_id=local_rank,
                                data_dir=image_dir,
                                crop=crop, size=val_size, world_size=world_size, local_rank=local_rank)
        pip_val.build()
        dali_iter_val = DALIClassificationIterator(pip_val, size=pip_val.epoch_size("Reader") // world_size)
        return dali_iter_val


RESULT = {"len": [], "epochs": []}
for type in ("train", "val"):
    loader = get_imagenet_iter_dali(type=type, image_dir=DATA, batch_size=8, num_threads=2, crop=32, device_id=0,
                                    num_gpus=1, val_size=40)
    RESULT["len"].append(len(loader))
    for epoch in range(2):
        steps = []
        for i, data in enumerate(loader):
            images = data[0]["data"]
            labels = data[0]["label"].squeeze().long()
            steps.append((tuple(images.shape), str(images.dtype), labels.tolist()))
        loader.reset()
        RESULT["epochs"].append(steps)
RESULT["val_images"] = images.numpy().copy()
"""

# NVIDIA/DALI, docs/examples/general/data_loading/external_input.ipynb (commit
# 7be7458a4dd4b8e3578bb975978415ad636ea1d9): an iterator of encoded JPEG batches and labels fed by
# fn.external_source(num_outputs=2, dtype=), the graph defined with pipe = Pipeline(...), with pipe:
# and pipe.set_outputs(...), fn.brightness_contrast, and pipe.run() outputs of varying shapes.
# Changed: images_dir is a folder holding the fixture's file_list.txt (relative paths and labels,
# the notebook's format); the notebook's pipe.run() is called twice (the second batch wraps around
# the 24 files); matplotlib display cells are left out.
EXTERNAL_INPUT = """
import types
import collections
import numpy as np
from random import shuffle
from nvidia.dali.pipeline import Pipeline
import nvidia.dali.fn as fn
import nvidia.dali.types as types

batch_size = 16


class ExternalInputIterator(object):
    def __init__(self, batch_size):
        self.images_dir = IMAGES_DIR
        self.batch_size = batch_size
        with open(self.images_dir + "file_list.txt", "r") as f:
            self.files = [line.rstrip() for line in f if line != ""]
        shuffle(self.files)

    def __iter__(self):
        self.i = 0
        self.n = len(self.files)
        return self

    def __next__(self):
        batch = []
        labels = []
        for _ in range(self.batch_size):
            jpeg_filename, label = self.files[self.i].split(" ")
            f = open(self.images_dir + jpeg_filename, "rb")
            batch.append(np.frombuffer(f.read(), dtype=np.uint8))
            labels.append(np.array([label], dtype=np.uint8))
            self.i = (self.i + 1) % self.n
        return (batch, labels)


eii = ExternalInputIterator(batch_size)

pipe = Pipeline(batch_size=batch_size, num_threads=2, device_id=0)
with pipe:
    jpegs, labels = fn.external_source(
        source=eii, num_outputs=2, dtype=types.UINT8
    )
    decode = fn.decoders.image(jpegs, device="mixed", output_type=types.RGB)
    enhance = fn.brightness_contrast(decode, contrast=2)
    pipe.set_outputs(enhance, labels)

pipe.build()
RESULT = {"runs": []}
for run in range(2):
    pipe_out = pipe.run()
    batch_cpu = pipe_out[0].as_cpu()
    labels_cpu = pipe_out[1]
    RESULT["runs"].append({
        "layout": batch_cpu.layout(),
        "images": [np.array(batch_cpu.at(i)) for i in range(len(batch_cpu))],
        "labels": [np.array(labels_cpu.at(i)) for i in range(len(labels_cpu))],
    })
"""

# NVIDIA/DALI, docs/examples/general/data_loading/external_input.ipynb as its ops-API revision has it
# (commit 08427cc685d36c4b9a0bf42caec7354aa01a491c): the same iterator fed by
# ops.ExternalSource(source=eii, num_outputs=2) in a Pipeline subclass, ops.ImageDecoder and
# ops.BrightnessContrast. Changed: as for EXTERNAL_INPUT (its `line is not ''` is `line != ''`, a
# SyntaxWarning on Python 3.8 and later).
EXTERNAL_INPUT_OPS = """
import types
import collections
import numpy as np
from random import shuffle
from nvidia.dali.pipeline import Pipeline
import nvidia.dali.ops as ops
import nvidia.dali.types as types

batch_size = 16


class ExternalInputIterator(object):
    def __init__(self, batch_size):
        self.images_dir = IMAGES_DIR
        self.batch_size = batch_size
        with open(self.images_dir + "file_list.txt", 'r') as f:
            self.files = [line.rstrip() for line in f if line != '']
        shuffle(self.files)

    def __iter__(self):
        self.i = 0
        self.n = len(self.files)
        return self

    def __next__(self):
        batch = []
        labels = []
        for _ in range(self.batch_size):
            jpeg_filename, label = self.files[self.i].split(' ')
            f = open(self.images_dir + jpeg_filename, 'rb')
            batch.append(np.frombuffer(f.read(), dtype = np.uint8))
            labels.append(np.array([label], dtype = np.uint8))
            self.i = (self.i + 1) % self.n
        return (batch, labels)


eii = ExternalInputIterator(batch_size)


class ExternalSourcePipeline(Pipeline):
    def __init__(self, batch_size, num_threads, device_id):
        super(ExternalSourcePipeline, self).__init__(batch_size,
                                      num_threads,
                                      device_id,
                                      seed=12)

        self.source = ops.ExternalSource(source = eii, num_outputs = 2)
        self.decode = ops.ImageDecoder(device = "mixed", output_type = types.RGB)
        self.enhance = ops.BrightnessContrast(device = "gpu", contrast = 2)

    def define_graph(self):
        jpegs, labels = self.source()
        images = self.decode(jpegs)
        output = self.enhance(images)
        return (output, labels)


pipe = ExternalSourcePipeline(batch_size=batch_size, num_threads=2, device_id = 0)
pipe.build()
RESULT = {"runs": []}
for run in range(2):
    pipe_out = pipe.run()
    batch_cpu = pipe_out[0].as_cpu()
    labels_cpu = pipe_out[1]
    RESULT["runs"].append({
        "layout": batch_cpu.layout(),
        "images": [np.array(batch_cpu.at(i)) for i in range(len(batch_cpu))],
        "labels": [np.array(labels_cpu.at(i)) for i in range(len(labels_cpu))],
    })
"""

# NVIDIA/DALI, docs/examples/general/data_loading/parallel_external_source_fork.ipynb (commit
# 0d400baf8b716a0ecb929afa41bfe32257f31c12): a callable of SampleInfo (idx_in_epoch; StopIteration
# past the end) run by fn.external_source(batch=False, parallel=True) in py_num_workers=4 worker
# processes started with pipe.start_py_workers() (fork), fn.random.uniform as a per-sample contrast
# of fn.brightness_contrast, a training and a validation pipeline. Changed: images_dir as in
# EXTERNAL_INPUT; the notebook's single run() of each pipeline is a loop over two whole epochs
# (run() until StopIteration, then reset()); display cells are left out.
PARALLEL_EXTERNAL_SOURCE_FORK = """
import numpy as np
from nvidia.dali import pipeline_def
import nvidia.dali.fn as fn

batch_size = 6

class ExternalInputCallable:
    def __init__(self, batch_size):
        self.images_dir = IMAGES_DIR
        self.batch_size = batch_size
        with open(self.images_dir + "file_list.txt", 'r') as f:
            file_label = [line.rstrip().split(' ') for line in f if line != '']
            self.files, self.labels = zip(*file_label)
        self.n = len(self.files)

    def __call__(self, sample_info):
        if sample_info.idx_in_epoch >= self.n:
            raise StopIteration()
        jpeg_filename = self.files[sample_info.idx_in_epoch]
        label = np.int32([self.labels[sample_info.idx_in_epoch]])
        with open(self.images_dir + jpeg_filename, 'rb') as f:
            encoded_img = np.frombuffer(f.read(), dtype=np.uint8)
        return encoded_img, label


@pipeline_def(batch_size=batch_size, num_threads=2, device_id=0, py_num_workers=4)
def training_pipeline():
    jpegs, labels = fn.external_source(source=ExternalInputCallable(batch_size),
                                       num_outputs=2, batch=False,
                                       parallel=True)
    decode = fn.decoders.image(jpegs, device="mixed")
    contrast = fn.random.uniform(range=(1, 3.0))
    enhance = fn.brightness_contrast(decode, contrast=contrast)
    return enhance, labels

@pipeline_def(batch_size=batch_size, num_threads=2, device_id=0, py_num_workers=4)
def validation_pipeline():
    jpegs, labels = fn.external_source(source=ExternalInputCallable(batch_size),
                                       num_outputs=2, batch=False,
                                       parallel=True)
    decode = fn.decoders.image(jpegs, device="mixed")
    enhance = fn.brightness_contrast(decode, contrast=1.5)
    return enhance, labels


train_pipe = training_pipeline()
val_pipe = validation_pipeline()

pipelines = [train_pipe, val_pipe]

for pipe in pipelines:
    pipe.start_py_workers()

for pipe in pipelines:
    pipe.build()

RESULT = {"train": [], "val": []}
for name, pipe in (("train", train_pipe), ("val", val_pipe)):
    for epoch in range(2):
        steps = []
        while True:
            try:
                out, labels = pipe.run()
            except StopIteration:
                pipe.reset()
                break
            out = out.as_cpu()
            steps.append({
                "layout": out.layout(),
                "images": [np.array(out.at(i)) for i in range(len(out))],
                "labels": [int(np.array(labels.at(i)).item()) for i in range(len(labels))],
            })
        RESULT[name].append(steps)
"""

# NVIDIA/DALI, docs/examples/use_cases/paddle/resnet50/dali.py (commit
# 29a69f528b83fb91a25041710065c54419f37e11): create_dali_pipeline as written, a graph built with
# pipeline = Pipeline(...), with pipeline: and pipeline.set_outputs(...), one pipeline per rank
# (shard_id/num_shards, pad_last_batch), decoders with memory hints, fn.cast of the labels, and the
# PipeOpMeta its dali_dataloader() fills from the example's default arguments (linear
# interpolation, ImageNet mean and std scaled from 1/255, CHW, no padding, float32). Changed: the
# iterator is nvidia.dali.plugin.pytorch's DALIGenericIterator (the same class and arguments as
# nvidia.dali.plugin.paddle's, which needs Paddle); crop 24, resize_shorter 28, batches of 5 on two
# ranks; args parsing, Paddle devices and the synthetic loader (CUDA pinned memory) are left out.
PADDLE_RESNET50 = """
from dataclasses import dataclass
import numpy as np
import nvidia.dali.ops as ops
import nvidia.dali.fn as fn
import nvidia.dali.types as types
from nvidia.dali.pipeline import Pipeline
from nvidia.dali.plugin.pytorch import DALIGenericIterator


@dataclass
class PipeOpMeta:
    crop: int
    resize_shorter: int
    min_area: float
    max_area: float
    lower: float
    upper: float
    interp: types.DALIInterpType
    mean: float
    std: float
    output_dtype: types.DALIDataType
    output_layout: str
    pad_output: bool

def create_dali_pipeline(batch_size, num_threads, device_id, data_dir, ops_meta,
                         shard_id, num_shards, dali_cpu=False, is_training=True,
                         seed=12):
    pipeline = Pipeline(batch_size, num_threads, device_id, seed=seed)
    with pipeline:
        images, labels = fn.readers.file(file_root=data_dir,
                                         shard_id=shard_id,
                                         num_shards=num_shards,
                                         random_shuffle=is_training,
                                         pad_last_batch=True,
                                         name="Reader")
        dali_device = 'cpu' if dali_cpu else 'gpu'
        decoder_device = 'cpu' if dali_cpu else 'mixed'
        # ask nvJPEG to preallocate memory for the biggest sample in ImageNet for CPU and
        #  GPU to avoid reallocations in runtime
        device_memory_padding = 211025920 if decoder_device == 'mixed' else 0
        host_memory_padding = 140544512 if decoder_device == 'mixed' else 0
        # ask HW nvJPEG to allocate memory ahead for the biggest image in the data set to
        # avoid reallocations in runtime
        preallocate_width_hint = 5980 if decoder_device == 'mixed' else 0
        preallocate_height_hint = 6430 if decoder_device == 'mixed' else 0
        if is_training:
            images = fn.decoders.image_random_crop(images,
                                                   device=decoder_device,
                                                   output_type=types.RGB,
                                                   device_memory_padding=device_memory_padding,
                                                   host_memory_padding=host_memory_padding,
                                                   preallocate_width_hint=preallocate_width_hint,
                                                   preallocate_height_hint=preallocate_height_hint,
                                                   random_aspect_ratio=[
                                                       ops_meta.lower, ops_meta.upper],
                                                   random_area=[ops_meta.min_area,
                                                                ops_meta.max_area],
                                                   num_attempts=100)
            images = fn.resize(images,
                               resize_x=ops_meta.crop,
                               resize_y=ops_meta.crop,
                               interp_type=ops_meta.interp)
            mirror = fn.random.coin_flip(probability=0.5)
        else:
            images = fn.decoders.image(images,
                                       device=decoder_device,
                                       output_type=types.RGB)
            images = fn.resize(images,
                               resize_shorter=ops_meta.resize_shorter,
            interp_type=ops_meta.interp)
            mirror = False

        images = fn.crop_mirror_normalize(images.gpu(),
                                          dtype=ops_meta.output_dtype,
                                          output_layout=ops_meta.output_layout,
                                          crop=(ops_meta.crop, ops_meta.crop),
                                          mean=ops_meta.mean,
                                          std=ops_meta.std,
                                          pad_output=ops_meta.pad_output,
                                          mirror=mirror)
        labels = labels.gpu()
        labels = fn.cast(labels, dtype=types.INT64)
        pipeline.set_outputs(images, labels)
    return pipeline


interp = 1  # settings.interpolation or 1  # default to linear
interp_map = {
    # cv2.INTER_NEAREST
    0: types.DALIInterpType.INTERP_NN,
    # cv2.INTER_LINEAR
    1: types.DALIInterpType.INTERP_LINEAR,
    # cv2.INTER_CUBIC
    2: types.DALIInterpType.INTERP_CUBIC,
    # LANCZOS3 for cv2.INTER_LANCZOS4
    3: types.DALIInterpType.INTERP_LANCZOS3
}
interp = interp_map[interp]
normalize_scale = 1.0 / 255.0
normalize_mean = [v / normalize_scale for v in [0.485, 0.456, 0.406]]
normalize_std = [v / normalize_scale for v in [0.229, 0.224, 0.225]]
output_layout = "NCHW"[1:]  # NCHW -> CHW or NHWC -> HWC
pad_output = 3 == 4
output_dtype = types.FLOAT
scale, ratio = [0.08, 1.0], [3.0 / 4.0, 4.0 / 3.0]
ops_meta = PipeOpMeta(crop=24, resize_shorter=28, min_area=scale[0], max_area=scale[1], lower=ratio[0],
                      upper=ratio[1], interp=interp, mean=normalize_mean, std=normalize_std,
                      output_dtype=output_dtype, output_layout=output_layout, pad_output=pad_output)

RESULT = {"len": [], "epochs": []}
for is_training in (True, False):
    loaders = []
    for shard_id in range(2):
        pipe = create_dali_pipeline(data_dir=DATA, batch_size=5, is_training=is_training, device_id=0,
                                    ops_meta=ops_meta, num_threads=2, seed=12 + shard_id, shard_id=shard_id,
                                    num_shards=2, dali_cpu=False)
        pipe.build()
        loaders.append(DALIGenericIterator([pipe], ['data', 'label'], reader_name='Reader'))
    RESULT["len"].append([len(loader) for loader in loaders])
    for epoch in range(2):
        steps = []
        for loader in loaders:
            for data in loader:
                images, labels = data[0]["data"], data[0]["label"]
                steps.append((tuple(images.shape), str(images.dtype), labels.view(-1).tolist()))
            loader.reset()
        RESULT["epochs"].append(steps)
    RESULT["label_dtype"] = str(labels.dtype)
"""

# NVIDIA/DeepLearningExamples, PyTorch/Classification/ConvNets/image_classification/dataloaders.py
# (commit 097c7ff917b7c56246590b1246a8f5bd8957c534): HybridTrainPipe and HybridValPipe in the class
# style (FileReader sharded with pad_last_batch, ImageDecoder memory padding, RandomResizedCrop with
# INTERP_LINEAR, CropMirrorNormalize to NCHW), DALIClassificationIterator(reader_name=...,
# fill_last_batch=False) (the deprecated argument) and the DALIWrapper generator the training loop
# iterates. Changed: data_path holds the fixture as its train and val folders; device_id is 0 where
# the source computes rank % torch.cuda.device_count() (no CUDA here), and DALIWrapper's target
# stays on the host (no .cuda()); batches of 5, crop 224 as written; two epochs; torch loaders and
# the synthetic loader are left out.
DEEPLEARNINGEXAMPLES_CONVNETS = """
import os
import torch
import numpy as np
from nvidia.dali.plugin.pytorch import DALIClassificationIterator
from nvidia.dali.pipeline import Pipeline
import nvidia.dali.ops as ops
import nvidia.dali.types as types


class HybridTrainPipe(Pipeline):
    def __init__(
        self, batch_size, num_threads, device_id, data_dir, crop, dali_cpu=False
    ):
        super(HybridTrainPipe, self).__init__(
            batch_size, num_threads, device_id, seed=12 + device_id
        )
        if torch.distributed.is_initialized():
            rank = torch.distributed.get_rank()
            world_size = torch.distributed.get_world_size()
        else:
            rank = 0
            world_size = 1

        self.input = ops.FileReader(
            file_root=data_dir,
            shard_id=rank,
            num_shards=world_size,
            random_shuffle=True,
            pad_last_batch=True,
        )

        if dali_cpu:
            dali_device = "cpu"
            self.decode = ops.ImageDecoder(device=dali_device, output_type=types.RGB)
        else:
            dali_device = "gpu"
            # This padding sets the size of the internal nvJPEG buffers to be able to handle all images from
            # full-sized ImageNet without additional reallocations
            self.decode = ops.ImageDecoder(
                device="mixed",
                output_type=types.RGB,
                device_memory_padding=211025920,
                host_memory_padding=140544512,
            )

        self.res = ops.RandomResizedCrop(
            device=dali_device,
            size=[crop, crop],
            interp_type=types.INTERP_LINEAR,
            random_aspect_ratio=[0.75, 4.0 / 3.0],
            random_area=[0.08, 1.0],
            num_attempts=100,
        )

        self.cmnp = ops.CropMirrorNormalize(
            device="gpu",
            dtype=types.FLOAT,
            output_layout=types.NCHW,
            crop=(crop, crop),
            mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
            std=[0.229 * 255, 0.224 * 255, 0.225 * 255],
        )
        self.coin = ops.CoinFlip(probability=0.5)

    def define_graph(self):
        rng = self.coin()
        self.jpegs, self.labels = self.input(name="Reader")
        images = self.decode(self.jpegs)
        images = self.res(images)
        output = self.cmnp(images.gpu(), mirror=rng)
        return [output, self.labels]


class HybridValPipe(Pipeline):
    def __init__(self, batch_size, num_threads, device_id, data_dir, crop, size):
        super(HybridValPipe, self).__init__(
            batch_size, num_threads, device_id, seed=12 + device_id
        )
        if torch.distributed.is_initialized():
            rank = torch.distributed.get_rank()
            world_size = torch.distributed.get_world_size()
        else:
            rank = 0
            world_size = 1

        self.input = ops.FileReader(
            file_root=data_dir,
            shard_id=rank,
            num_shards=world_size,
            random_shuffle=False,
            pad_last_batch=True,
        )

        self.decode = ops.ImageDecoder(device="mixed", output_type=types.RGB)
        self.res = ops.Resize(device="gpu", resize_shorter=size)
        self.cmnp = ops.CropMirrorNormalize(
            device="gpu",
            dtype=types.FLOAT,
            output_layout=types.NCHW,
            crop=(crop, crop),
            mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
            std=[0.229 * 255, 0.224 * 255, 0.225 * 255],
        )

    def define_graph(self):
        self.jpegs, self.labels = self.input(name="Reader")
        images = self.decode(self.jpegs)
        images = self.res(images)
        output = self.cmnp(images)
        return [output, self.labels]


class DALIWrapper(object):
    def gen_wrapper(dalipipeline, num_classes, one_hot, memory_format):
        for data in dalipipeline:
            input = data[0]["data"].contiguous(memory_format=memory_format)
            target = torch.reshape(data[0]["label"], [-1]).long()
            if one_hot:
                target = expand(num_classes, torch.float, target)
            yield input, target
        dalipipeline.reset()

    def __init__(self, dalipipeline, num_classes, one_hot, memory_format):
        self.dalipipeline = dalipipeline
        self.num_classes = num_classes
        self.one_hot = one_hot
        self.memory_format = memory_format

    def __iter__(self):
        return DALIWrapper.gen_wrapper(
            self.dalipipeline, self.num_classes, self.one_hot, self.memory_format
        )


def get_dali_train_loader(dali_cpu=False):
    def gdtl(
        data_path,
        batch_size,
        num_classes,
        one_hot,
        start_epoch=0,
        workers=5,
        _worker_init_fn=None,
        memory_format=torch.contiguous_format,
    ):
        if torch.distributed.is_initialized():
            rank = torch.distributed.get_rank()
            world_size = torch.distributed.get_world_size()
        else:
            rank = 0
            world_size = 1

        traindir = os.path.join(data_path, "train")

        pipe = HybridTrainPipe(
            batch_size=batch_size,
            num_threads=workers,
            device_id=0,
            data_dir=traindir,
            crop=224,
            dali_cpu=dali_cpu,
        )

        pipe.build()
        train_loader = DALIClassificationIterator(
            pipe, reader_name="Reader", fill_last_batch=False
        )

        return (
            DALIWrapper(train_loader, num_classes, one_hot, memory_format),
            int(pipe.epoch_size("Reader") / (world_size * batch_size)),
        )

    return gdtl


def get_dali_val_loader():
    def gdvl(
        data_path,
        batch_size,
        num_classes,
        one_hot,
        workers=5,
        _worker_init_fn=None,
        memory_format=torch.contiguous_format,
    ):
        if torch.distributed.is_initialized():
            rank = torch.distributed.get_rank()
            world_size = torch.distributed.get_world_size()
        else:
            rank = 0
            world_size = 1

        valdir = os.path.join(data_path, "val")

        pipe = HybridValPipe(
            batch_size=batch_size,
            num_threads=workers,
            device_id=0,
            data_dir=valdir,
            crop=224,
            size=256,
        )

        pipe.build()
        val_loader = DALIClassificationIterator(
            pipe, reader_name="Reader", fill_last_batch=False
        )

        return (
            DALIWrapper(val_loader, num_classes, one_hot, memory_format),
            int(pipe.epoch_size("Reader") / (world_size * batch_size)),
        )

    return gdvl


RESULT = {"len": [], "epochs": []}
for get_loader in (get_dali_train_loader(dali_cpu=False), get_dali_val_loader()):
    loader, steps_per_epoch = get_loader(DATA, batch_size=5, num_classes=4, one_hot=False, workers=2)
    RESULT["len"].append(steps_per_epoch)
    for epoch in range(2):
        steps = []
        for input, target in loader:
            steps.append((tuple(input.shape), str(input.dtype), target.tolist()))
        RESULT["epochs"].append(steps)
RESULT["val_images"] = input.numpy().copy()
"""

# vturrisi/solo-learn, solo/data/dali_dataloader.py (commit 1aeb6e97508b6e16fc75a903315904d0f4985cbe):
# the self-supervised pretraining pipeline (SimCLR/BYOL-style views): Mux built from ops.Cast to BOOL,
# ops.random.CoinFlip, `^` and arithmetic on pipeline data; grey-scale by ops.ColorSpaceConversion
# (image_type=, output_type=) and fn.cat; colour jitter by ops.ColorTwist with ops.random.Uniform
# arguments; ops.GaussianBlur with a sigma computed from a random node; solarisation by `255 - x`,
# `x >= t` and `True ^ mask`; RandomResizedCrop with INTERP_CUBIC; ops.readers.File(files=, labels=,
# shuffle_after_epoch=); and the PretrainWrapper/BaseWrapper subclasses of DALIGenericIterator with
# LastBatchPolicy.DROP. Then the linear-evaluation pipeline (NormalPipelineBuilder: resize_shorter
# 256 and crop 224 with INTERP_CUBIC) through its Wrapper. Changed: the two augmentation configs
# (crop 32, one view each, colour jitter, grey-scale, blur and flip as solo-learn's SimCLR/BYOL
# configs, solarisation only in the second view as in BYOL's) are SimpleNamespace objects with
# omegaconf's get() where solo-learn reads omegaconf; NCropAugmentation and FullTransformPipeline
# are solo/data/pretrain_dataloader.py's (the views as a list); timm's IMAGENET_DEFAULT_MEAN/STD are
# written out; the sklearn data_fraction branch, the Lightning DataModules (their
# train_dataloader's calls are the loop below) and omegaconf_select are left out; model_device is
# the CPU; batches of 8, two epochs.
SOLO_LEARN = """
import math
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Callable, List, Optional, Union

import nvidia.dali.fn as fn
import nvidia.dali.ops as ops
import nvidia.dali.types as types
import torch
import torch.nn as nn
from nvidia.dali.pipeline import pipeline_def
from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

IMAGENET_DEFAULT_MEAN = (0.485, 0.456, 0.406)
IMAGENET_DEFAULT_STD = (0.229, 0.224, 0.225)


class Mux:
    def __init__(self, prob: float):
        self.to_bool = ops.Cast(dtype=types.DALIDataType.BOOL)
        self.rng = ops.random.CoinFlip(probability=prob)

    def __call__(self, true_case, false_case):
        condition = self.to_bool(self.rng())
        neg_condition = condition ^ True
        return condition * true_case + neg_condition * false_case


class RandomGrayScaleConversion:
    def __init__(self, prob: float = 0.2, device: str = "gpu"):
        self.mux = Mux(prob=prob)
        self.grayscale = ops.ColorSpaceConversion(
            device=device, image_type=types.RGB, output_type=types.GRAY
        )

    def __call__(self, images):
        out = self.grayscale(images)
        out = fn.cat(out, out, out, axis=2)
        return self.mux(true_case=out, false_case=images)


class RandomColorJitter:
    def __init__(
        self,
        brightness: float,
        contrast: float,
        saturation: float,
        hue: float,
        prob: float = 0.8,
        device: str = "gpu",
    ):
        assert 0 <= hue <= 0.5

        self.mux = Mux(prob=prob)

        self.color = ops.ColorTwist(device=device)

        # look at torchvision docs to see how colorjitter samples stuff
        # for bright, cont and sat, it samples from [1-v, 1+v]
        # for hue, it samples from [-hue, hue]

        self.brightness = 1
        self.contrast = 1
        self.saturation = 1
        self.hue = 0

        if brightness:
            self.brightness = ops.random.Uniform(range=[max(0, 1 - brightness), 1 + brightness])

        if contrast:
            self.contrast = ops.random.Uniform(range=[max(0, 1 - contrast), 1 + contrast])

        if saturation:
            self.saturation = ops.random.Uniform(range=[max(0, 1 - saturation), 1 + saturation])

        if hue:
            # dali uses hue in degrees for some reason...
            hue = 360 * hue
            self.hue = ops.random.Uniform(range=[-hue, hue])

    def __call__(self, images):
        out = self.color(
            images,
            brightness=self.brightness() if callable(self.brightness) else self.brightness,
            contrast=self.contrast() if callable(self.contrast) else self.contrast,
            saturation=self.saturation() if callable(self.saturation) else self.saturation,
            hue=self.hue() if callable(self.hue) else self.hue,
        )
        return self.mux(true_case=out, false_case=images)


class RandomGaussianBlur:
    def __init__(self, prob: float = 0.5, window_size: int = 23, device: str = "gpu"):
        self.mux = Mux(prob=prob)
        # gaussian blur
        self.gaussian_blur = ops.GaussianBlur(device=device, window_size=(window_size, window_size))
        self.sigma = ops.random.Uniform(range=[0, 1])

    def __call__(self, images):
        sigma = self.sigma() * 1.9 + 0.1
        out = self.gaussian_blur(images, sigma=sigma)
        return self.mux(true_case=out, false_case=images)


class RandomSolarize:
    def __init__(self, threshold: int = 128, prob: float = 0.0):
        self.mux = Mux(prob=prob)

        self.threshold = threshold

    def __call__(self, images):
        inverted_img = 255 - images
        mask = images >= self.threshold
        out = mask * inverted_img + (True ^ mask) * images
        return self.mux(true_case=out, false_case=images)


class NormalPipelineBuilder:
    def __init__(
        self,
        data_path: str,
        batch_size: int,
        device: str,
        validation: bool = False,
        device_id: int = 0,
        shard_id: int = 0,
        num_shards: int = 1,
        num_threads: int = 4,
        seed: int = 12,
        data_fraction: float = -1.0,
    ):
        super().__init__()

        self.batch_size = batch_size
        self.num_threads = num_threads
        self.device_id = device_id
        self.seed = seed + device_id

        self.device = device
        self.validation = validation

        # manually load files and labels
        labels = sorted(Path(entry.name) for entry in os.scandir(data_path) if entry.is_dir())
        data = [
            (data_path / label / file, label_idx)
            for label_idx, label in enumerate(labels)
            for file in sorted(os.listdir(data_path / label))
        ]
        files, labels = map(list, zip(*data))

        self.reader = ops.readers.File(
            files=files,
            labels=labels,
            shard_id=shard_id,
            num_shards=num_shards,
            shuffle_after_epoch=not self.validation,
        )
        decoder_device = "mixed" if self.device == "gpu" else "cpu"
        device_memory_padding = 211025920 if decoder_device == "mixed" else 0
        host_memory_padding = 140544512 if decoder_device == "mixed" else 0
        self.decode = ops.decoders.Image(
            device=decoder_device,
            output_type=types.RGB,
            device_memory_padding=device_memory_padding,
            host_memory_padding=host_memory_padding,
        )

        # crop operations
        if self.validation:
            self.resize = ops.Resize(
                device=self.device,
                resize_shorter=256,
                interp_type=types.INTERP_CUBIC,
            )
            # center crop and normalize
            self.cmn = ops.CropMirrorNormalize(
                device=self.device,
                dtype=types.FLOAT,
                output_layout=types.NCHW,
                crop=(224, 224),
                mean=[v * 255 for v in IMAGENET_DEFAULT_MEAN],
                std=[v * 255 for v in IMAGENET_DEFAULT_STD],
            )
        else:
            self.resize = ops.RandomResizedCrop(
                device=self.device,
                size=224,
                random_area=(0.08, 1.0),
                interp_type=types.INTERP_CUBIC,
            )
            # normalize and horizontal flip
            self.cmn = ops.CropMirrorNormalize(
                device=self.device,
                dtype=types.FLOAT,
                output_layout=types.NCHW,
                mean=[v * 255 for v in IMAGENET_DEFAULT_MEAN],
                std=[v * 255 for v in IMAGENET_DEFAULT_STD],
            )

        self.coin05 = ops.random.CoinFlip(probability=0.5)
        self.to_int64 = ops.Cast(dtype=types.INT64, device=device)

    @pipeline_def
    def pipeline(self):
        # read images from memory
        inputs, labels = self.reader(name="Reader")
        images = self.decode(inputs)

        # crop into large and small images
        images = self.resize(images)

        if self.validation:
            # crop and normalize
            images = self.cmn(images)
        else:
            # normalize and maybe apply horizontal flip with 0.5 chance
            images = self.cmn(images, mirror=self.coin05())

        if self.device == "gpu":
            labels = labels.gpu()
        # PyTorch expects labels as INT64
        labels = self.to_int64(labels)

        return (images, labels)


def build_transform_pipeline_dali(dataset, cfg, dali_device):
    MEANS_N_STD = {
        "cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
        "cifar100": ((0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)),
        "stl10": ((0.4914, 0.4823, 0.4466), (0.247, 0.243, 0.261)),
        "imagenet100": (IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD),
        "imagenet": (IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD),
    }

    mean, std = MEANS_N_STD.get(
        dataset, (cfg.get("mean", IMAGENET_DEFAULT_MEAN), cfg.get("std", IMAGENET_DEFAULT_STD))
    )

    augmentations = []
    if cfg.rrc.enabled:
        augmentations.append(
            ops.RandomResizedCrop(
                device=dali_device,
                size=cfg.crop_size,
                random_area=(cfg.rrc.crop_min_scale, cfg.rrc.crop_max_scale),
                interp_type=types.INTERP_CUBIC,
            )
        )
    else:
        augmentations.append(
            ops.Resize(
                device=dali_device,
                size=(cfg.crop_size, cfg.crop_size),
                interp_type=types.INTERP_CUBIC,
            )
        )

    if cfg.color_jitter.prob:
        augmentations.append(
            RandomColorJitter(
                brightness=cfg.color_jitter.brightness,
                contrast=cfg.color_jitter.contrast,
                saturation=cfg.color_jitter.saturation,
                hue=cfg.color_jitter.hue,
                prob=cfg.color_jitter.prob,
                device=dali_device,
            )
        )

    if cfg.grayscale.prob:
        augmentations.append(RandomGrayScaleConversion(prob=cfg.grayscale.prob, device=dali_device))

    if cfg.gaussian_blur.prob:
        augmentations.append(RandomGaussianBlur(prob=cfg.gaussian_blur.prob, device=dali_device))

    if cfg.solarization.prob:
        augmentations.append(RandomSolarize(prob=cfg.solarization.prob))

    if cfg.equalization.prob:
        raise NotImplementedError(
            "Equalization is not available for DALI"
            "turn it off by setting augmentations.equalization.enabled to False."
        )

    coin = None
    if cfg.horizontal_flip.prob:
        coin = ops.random.CoinFlip(probability=cfg.horizontal_flip.prob)

    cmn = ops.CropMirrorNormalize(
        device=dali_device,
        dtype=types.FLOAT,
        output_layout=types.NCHW,
        mean=[v * 255 for v in mean],
        std=[v * 255 for v in std],
    )

    class AugWrapper:
        def __init__(self, augmentations, cmn, coin) -> None:
            self.augmentations = augmentations
            self.cmn = cmn
            self.coin = coin

        def __call__(self, images):
            for aug in self.augmentations:
                images = aug(images)
            if self.coin:
                images = self.cmn(images, mirror=self.coin())
            else:
                images = self.cmn(images)
            return images

        def __repr__(self) -> str:
            return f"{self.augmentations}"

    return AugWrapper(augmentations=augmentations, cmn=cmn, coin=coin)


class PretrainPipelineBuilder:
    def __init__(
        self,
        data_path: Union[str, Path],
        batch_size: int,
        device: str,
        transforms: Callable,
        random_shuffle: bool = True,
        device_id: int = 0,
        shard_id: int = 0,
        num_shards: int = 1,
        num_threads: int = 4,
        seed: int = 12,
        no_labels: bool = False,
        encode_indexes_into_labels: bool = False,
        data_fraction: float = -1.0,
    ):
        super().__init__()

        self.batch_size = batch_size
        self.num_threads = num_threads
        self.device_id = device_id
        self.seed = seed + device_id

        self.device = device

        data_path = Path(data_path)

        # manually load files and labels
        if no_labels:
            files = [data_path / f for f in sorted(os.listdir(data_path))]
            labels = [-1] * len(files)
        else:
            labels = sorted(Path(entry.name) for entry in os.scandir(data_path) if entry.is_dir())
            data = [
                (data_path / label / file, label_idx)
                for label_idx, label in enumerate(labels)
                for file in sorted(os.listdir(data_path / label))
            ]
            files, labels = map(list, zip(*data))

        if encode_indexes_into_labels:
            encoded_labels = []

            self.conversion_map = []
            for file_idx, label_idx in enumerate(labels):
                encoded_labels.append(file_idx)
                self.conversion_map.append(label_idx)

            # to assert that everything is fine
            for file_idx, label_idx in zip(encoded_labels, labels):
                assert self.conversion_map[file_idx] == label_idx

            # use the encoded labels which will be decoded later
            labels = encoded_labels

        self.reader = ops.readers.File(
            files=files,
            labels=labels,
            shard_id=shard_id,
            num_shards=num_shards,
            shuffle_after_epoch=random_shuffle,
        )

        decoder_device = "mixed" if self.device == "gpu" else "cpu"
        device_memory_padding = 211025920 if decoder_device == "mixed" else 0
        host_memory_padding = 140544512 if decoder_device == "mixed" else 0
        self.decode = ops.decoders.Image(
            device=decoder_device,
            output_type=types.RGB,
            device_memory_padding=device_memory_padding,
            host_memory_padding=host_memory_padding,
        )
        self.to_int64 = ops.Cast(dtype=types.INT64, device=device)

        self.transforms = transforms

    @pipeline_def
    def pipeline(self):
        # read images from memory
        inputs, labels = self.reader(name="Reader")

        images = self.decode(inputs)

        crops = self.transforms(images)

        if self.device == "gpu":
            labels = labels.gpu()
        # PyTorch expects labels as INT64
        labels = self.to_int64(labels)

        return (*crops, labels)

    def __repr__(self) -> str:
        return str(self.transforms)


class BaseWrapper(DALIGenericIterator):
    def __len__(self):
        size = (
            self._size_no_pad // self._shards_num
            if self._last_batch_policy == LastBatchPolicy.DROP
            else self.size
        )
        if self._reader_name:
            if self._last_batch_policy != LastBatchPolicy.DROP:
                return math.ceil(size / self.batch_size)

            return size // self.batch_size
        else:
            if self._last_batch_policy != LastBatchPolicy.DROP:
                return math.ceil(size / (self._devices * self.batch_size))

            return size // (self._devices * self.batch_size)


class PretrainWrapper(BaseWrapper):
    def __init__(
        self,
        model_batch_size: int,
        model_rank: int,
        model_device: str,
        dataset_size: int,
        conversion_map: List[int] = None,
        *args,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        self.model_batch_size = model_batch_size
        self.model_rank = model_rank
        self.model_device = model_device
        self.dataset_size = dataset_size
        self.conversion_map = conversion_map
        if self.conversion_map is not None:
            self.conversion_map = torch.tensor(
                self.conversion_map, dtype=torch.float32, device=self.model_device
            ).reshape(-1, 1)
            self.conversion_map = nn.Embedding.from_pretrained(self.conversion_map)

    def __next__(self):
        batch = super().__next__()[0]
        if self.conversion_map is not None:
            *all_X, indexes = [batch[v] for v in self.output_map]
            targets = self.conversion_map(indexes).flatten().long().detach().clone()
            indexes = indexes.flatten().long().detach().clone()
        else:
            *all_X, targets = [batch[v] for v in self.output_map]
            targets = targets.squeeze(-1).long().detach().clone()
            # creates dummy indexes
            indexes = (
                (
                    torch.arange(self.model_batch_size, device=self.model_device)
                    + (self.model_rank * self.model_batch_size)
                )
                .detach()
                .clone()
            )

        all_X = [x.detach().clone() for x in all_X]
        return [indexes, all_X, targets]


class Wrapper(BaseWrapper):
    def __init__(self, dataset_size: int, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.dataset_size = dataset_size

    def __next__(self):
        batch = super().__next__()
        x, target = batch[0]["x"], batch[0]["label"]
        target = target.squeeze(-1).long()
        x = x.detach().clone()
        target = target.detach().clone()
        return x, target


class NCropAugmentation:
    def __init__(self, transform: Callable, num_crops: int):
        self.transform = transform
        self.num_crops = num_crops

    def __call__(self, x):
        return [self.transform(x) for _ in range(self.num_crops)]


class FullTransformPipeline:
    def __init__(self, transforms: Callable) -> None:
        self.transforms = transforms

    def __call__(self, x):
        out = []
        for transform in self.transforms:
            out.extend(transform(x))
        return out


class Config(SimpleNamespace):
    def get(self, key, default=None):
        return getattr(self, key, default)


def simclr_augmentation(solarization_prob):
    return Config(
        crop_size=32,
        num_crops=1,
        rrc=SimpleNamespace(enabled=True, crop_min_scale=0.08, crop_max_scale=1.0),
        color_jitter=SimpleNamespace(prob=0.8, brightness=0.4, contrast=0.4, saturation=0.2, hue=0.1),
        grayscale=SimpleNamespace(prob=0.2),
        gaussian_blur=SimpleNamespace(prob=0.5),
        solarization=SimpleNamespace(prob=solarization_prob),
        equalization=SimpleNamespace(prob=0.0),
        horizontal_flip=SimpleNamespace(prob=0.5),
    )


dali_device = "gpu"
augmentations = [simclr_augmentation(0.0), simclr_augmentation(0.2)]
transform = FullTransformPipeline(
    [NCropAugmentation(build_transform_pipeline_dali("imagenet", aug_cfg, dali_device=dali_device),
                       aug_cfg.num_crops) for aug_cfg in augmentations]
)
RESULT = {"len": [], "epochs": []}

train_pipeline_builder = PretrainPipelineBuilder(
    DATA, batch_size=8, transforms=transform, device=dali_device, num_threads=2
)
train_pipeline = train_pipeline_builder.pipeline(
    batch_size=train_pipeline_builder.batch_size,
    num_threads=train_pipeline_builder.num_threads,
    device_id=train_pipeline_builder.device_id,
    seed=train_pipeline_builder.seed,
)
train_pipeline.build()
output_map = [f"large{i}" for i in range(2)] + [f"small{i}" for i in range(0)] + ["label"]
train_loader = PretrainWrapper(
    model_batch_size=8,
    model_rank=0,
    model_device=torch.device("cpu"),
    dataset_size=train_pipeline.epoch_size("Reader"),
    conversion_map=None,
    pipelines=train_pipeline,
    output_map=output_map,
    reader_name="Reader",
    last_batch_policy=LastBatchPolicy.DROP,
    auto_reset=True,
)
RESULT["len"].append(len(train_loader))
for epoch in range(2):
    steps = []
    for indexes, all_X, targets in train_loader:
        assert indexes.tolist() == list(range(8))
        steps.append(([tuple(x.shape) for x in all_X], [str(x.dtype) for x in all_X], targets.tolist()))
    RESULT["epochs"].append(steps)

for validation in (False, True):
    pipeline_builder = NormalPipelineBuilder(Path(DATA), validation=validation, batch_size=8, device=dali_device,
                                             num_threads=2)
    pipeline = pipeline_builder.pipeline(
        batch_size=pipeline_builder.batch_size,
        num_threads=pipeline_builder.num_threads,
        device_id=pipeline_builder.device_id,
        seed=pipeline_builder.seed,
    )
    pipeline.build()
    loader = Wrapper(
        pipelines=pipeline,
        dataset_size=pipeline.epoch_size("Reader"),
        output_map=["x", "label"],
        reader_name="Reader",
        last_batch_policy=LastBatchPolicy.PARTIAL if validation else LastBatchPolicy.DROP,
        auto_reset=True,
    )
    RESULT["len"].append(len(loader))
    for epoch in range(2):
        steps = []
        for x, target in loader:
            steps.append((tuple(x.shape), str(x.dtype), target.tolist()))
        RESULT["epochs"].append(steps)
RESULT["val_images"] = x.numpy().copy()
"""

# NVIDIA/DALI, docs/examples/frameworks/pytorch/pytorch-external_input.ipynb (commit
# 254f3610db8d24ee9eae35e4c800348557740186): a per-GPU shard of a file list read by an iterator that
# gives numpy images and torch labels, fn.external_source(num_outputs=2) in a graph defined with
# pipe = Pipeline(...), with pipe: and pipe.set_outputs(...), fn.image_decoder (the deprecated
# name), fn.resize, fn.cast, and DALIClassificationIterator(size=len(eii), last_batch_padded=True,
# last_batch_policy=PARTIAL) over three epochs with reset(). Changed: images_dir as in
# EXTERNAL_INPUT (24 files: 8 steps of 3 per epoch); each step's shape, type and labels are kept
# besides the notebook's print.
PYTORCH_EXTERNAL_INPUT = """
import types
import collections
import numpy as np
from random import shuffle
from nvidia.dali.pipeline import Pipeline
import nvidia.dali.types as types
import nvidia.dali.fn as fn
import torch

batch_size = 3
epochs = 3


class ExternalInputIterator(object):
    def __init__(self, batch_size, device_id, num_gpus):
        self.images_dir = IMAGES_DIR
        self.batch_size = batch_size
        with open(self.images_dir + "file_list.txt", 'r') as f:
            self.files = [line.rstrip() for line in f if line != '']
        # whole data set size
        self.data_set_len = len(self.files)
        # based on the device_id and total number of GPUs - world size
        # get proper shard
        self.files = self.files[self.data_set_len * device_id // num_gpus:
                                self.data_set_len * (device_id + 1) // num_gpus]
        self.n = len(self.files)

    def __iter__(self):
        self.i = 0
        shuffle(self.files)
        return self

    def __next__(self):
        batch = []
        labels = []

        if self.i >= self.n:
            raise StopIteration

        for _ in range(self.batch_size):
            jpeg_filename, label = self.files[self.i].split(' ')
            batch.append(np.fromfile(self.images_dir + jpeg_filename, dtype = np.uint8))  # we can use numpy
            labels.append(torch.tensor([int(label)], dtype = torch.uint8)) # or PyTorch's native tensors
            self.i = (self.i + 1) % self.n
        return (batch, labels)

    def __len__(self):
        return self.data_set_len

    next = __next__


def ExternalSourcePipeline(batch_size, num_threads, device_id, external_data):
    pipe = Pipeline(batch_size, num_threads, device_id)
    with pipe:
        jpegs, labels = fn.external_source(source=external_data, num_outputs=2)
        images = fn.image_decoder(jpegs, device="mixed")
        images = fn.resize(images, resize_x=240, resize_y=240)
        output = fn.cast(images, dtype=types.UINT8)
        pipe.set_outputs(output, labels)
    return pipe


from nvidia.dali.plugin.pytorch import DALIClassificationIterator as PyTorchIterator
from nvidia.dali.plugin.pytorch import LastBatchPolicy

eii = ExternalInputIterator(batch_size, 0, 1)
pipe = ExternalSourcePipeline(batch_size=batch_size, num_threads=2, device_id = 0,
                              external_data = eii)
pii = PyTorchIterator(pipe, size=len(eii), last_batch_padded=True, last_batch_policy=LastBatchPolicy.PARTIAL)

RESULT = {"len": len(pii), "epochs": []}
for e in range(epochs):
    steps = []
    for i, data in enumerate(pii):
        print("epoch: {}, iter {}, real batch size: {}".format(e, i, len(data[0]["data"])))
        steps.append((tuple(data[0]["data"].shape), str(data[0]["data"].dtype), data[0]["label"].view(-1).tolist()))
    pii.reset()
    RESULT["epochs"].append(steps)
"""

# NVIDIA/DeepLearningExamples, MxNet/Classification/RN50v1.5/dali.py (commit
# 1bd98ac3723aaf483098c265095cd7e8c350879c): HybridTrainPipe and HybridValPipe over MXNet RecordIO
# (ops.MXNetReader with dont_use_mmap), the fused ImageDecoderRandomCrop with the nvJPEG padding
# and size hints (given when DALI's version is at least 1.2.0), CropMirrorNormalize with the
# deprecated output_dtype= (FLOAT16) and image_type=, pad_output and an NHWC layout, and
# get_rec_iter building one pipeline per GPU and DALIClassificationIterator(pipes, size) (train)
# and (pipes, size, fill_last_batch=False) (validation). Changed: the RecordIO files are the
# fixture's 24 JPEGs (written with raypipe's RecordIO writer, MXNet's format); args are a
# SimpleNamespace with the script's defaults and the NHWC float16 configuration with 4-channel
# output (image_shape 4,224,224), batches of 8, data_val_resize 256; the iterator is
# nvidia.dali.plugin.pytorch's DALIClassificationIterator (the same arguments as
# nvidia.dali.plugin.mxnet's, which needs MXNet); horovod's import and add_dali_args are left out
# (kv_store "device" never reaches hvd); two epochs with reset().
DEEPLEARNINGEXAMPLES_MXNET_RN50 = """
import warnings
from types import SimpleNamespace
from packaging.version import Version
from nvidia import dali
from nvidia.dali.pipeline import Pipeline
import nvidia.dali.ops as ops
import nvidia.dali.types as types
from nvidia.dali.plugin.pytorch import DALIClassificationIterator


class HybridTrainPipe(Pipeline):
    def __init__(self, args, batch_size, num_threads, device_id, rec_path, idx_path,
                 shard_id, num_shards, crop_shape, nvjpeg_padding, prefetch_queue=3,
                 output_layout=types.NCHW, pad_output=True, dtype='float16', dali_cpu=False,
                 nvjpeg_width_hint=5980, nvjpeg_height_hint=6430,
                 ):
        super(HybridTrainPipe, self).__init__(batch_size, num_threads, device_id, seed=12 + device_id,
                                              prefetch_queue_depth = prefetch_queue)
        self.input = ops.MXNetReader(path=[rec_path], index_path=[idx_path],
                                     random_shuffle=True, shard_id=shard_id, num_shards=num_shards,
                                     dont_use_mmap=args.dali_dont_use_mmap)

        if dali_cpu:
            dali_device = "cpu"
            decoder_device = "cpu"
        else:
            dali_device = "gpu"
            decoder_device = "mixed"

        dali_kwargs_fallback = {}
        if Version(dali.__version__) >= Version("1.2.0"):
            dali_kwargs_fallback = {
                "preallocate_width_hint": nvjpeg_width_hint,
                "preallocate_height_hint": nvjpeg_height_hint,
            }
        if args.dali_fuse_decoder:
            self.decode = ops.ImageDecoderRandomCrop(device=decoder_device, output_type=types.RGB,
                                                     device_memory_padding=nvjpeg_padding,
                                                     host_memory_padding=nvjpeg_padding,
                                                     **dali_kwargs_fallback)
        else:
            self.decode = ops.ImageDecoder(device=decoder_device, output_type=types.RGB,
                                           device_memory_padding=nvjpeg_padding,
                                           host_memory_padding=nvjpeg_padding,
                                           **dali_kwargs_fallback)

        if args.dali_fuse_decoder:
            self.resize = ops.Resize(device=dali_device, resize_x=crop_shape[1], resize_y=crop_shape[0])
        else:
            self.resize = ops.RandomResizedCrop(device=dali_device, size=crop_shape)

        self.cmnp = ops.CropMirrorNormalize(device="gpu",
                                            output_dtype=types.FLOAT16 if dtype == 'float16' else types.FLOAT,
                                            output_layout=output_layout, crop=crop_shape, pad_output=pad_output,
                                            image_type=types.RGB, mean=args.rgb_mean, std=args.rgb_std)
        self.coin = ops.CoinFlip(probability=0.5)

    def define_graph(self):
        rng = self.coin()
        self.jpegs, self.labels = self.input(name="Reader")

        images = self.decode(self.jpegs)
        images = self.resize(images)
        output = self.cmnp(images.gpu(), mirror=rng)
        return [output, self.labels]


class HybridValPipe(Pipeline):
    def __init__(self, args, batch_size, num_threads, device_id, rec_path, idx_path,
                 shard_id, num_shards, crop_shape, nvjpeg_padding, prefetch_queue=3, resize_shp=None,
                 output_layout=types.NCHW, pad_output=True, dtype='float16', dali_cpu=False,
                 nvjpeg_width_hint=5980, nvjpeg_height_hint=6430):
        super(HybridValPipe, self).__init__(batch_size, num_threads, device_id, seed=12 + device_id,
                                            prefetch_queue_depth=prefetch_queue)
        self.input = ops.MXNetReader(path=[rec_path], index_path=[idx_path],
                                     random_shuffle=False, shard_id=shard_id, num_shards=num_shards,
                                     dont_use_mmap=args.dali_dont_use_mmap)

        if dali_cpu:
            dali_device = "cpu"
            decoder_device = "cpu"
        else:
            dali_device = "gpu"
            decoder_device = "mixed"

        dali_kwargs_fallback = {}
        if Version(dali.__version__) >= Version("1.2.0"):
            dali_kwargs_fallback = {
                "preallocate_width_hint": nvjpeg_width_hint,
                "preallocate_height_hint": nvjpeg_height_hint
            }

        self.decode = ops.ImageDecoder(device=decoder_device, output_type=types.RGB,
                                       device_memory_padding=nvjpeg_padding,
                                       host_memory_padding=nvjpeg_padding,
                                       **dali_kwargs_fallback)
        self.resize = ops.Resize(device=dali_device, resize_shorter=resize_shp) if resize_shp else None
        self.cmnp = ops.CropMirrorNormalize(device="gpu",
                                            output_dtype=types.FLOAT16 if dtype == 'float16' else types.FLOAT,
                                            output_layout=output_layout, crop=crop_shape, pad_output=pad_output,
                                            image_type=types.RGB, mean=args.rgb_mean, std=args.rgb_std)

    def define_graph(self):
        self.jpegs, self.labels = self.input(name="Reader")
        images = self.decode(self.jpegs)
        if self.resize:
            images = self.resize(images)
        output = self.cmnp(images.gpu())
        return [output, self.labels]


def get_rec_iter(args, kv=None, dali_cpu=False):
    gpus = args.gpus
    num_threads = args.dali_threads
    num_validation_threads = args.dali_validation_threads
    pad_output = (args.image_shape[0] == 4)

    # the input_layout w.r.t. the model is the output_layout of the image pipeline
    output_layout = types.NHWC if args.input_layout == 'NHWC' else types.NCHW

    if 'horovod' in args.kv_store:
        rank = hvd.rank()
        nWrk = hvd.size()
    else:
        rank = kv.rank if kv else 0
        nWrk = kv.num_workers if kv else 1

    batch_size = args.batch_size // nWrk // len(gpus)

    trainpipes = [HybridTrainPipe(args           = args,
                                  batch_size     = batch_size,
                                  num_threads    = num_threads,
                                  device_id      = gpu_id,
                                  rec_path       = args.data_train,
                                  idx_path       = args.data_train_idx,
                                  shard_id       = gpus.index(gpu_id) + len(gpus)*rank,
                                  num_shards     = len(gpus)*nWrk,
                                  crop_shape     = args.image_shape[1:],
                                  output_layout  = output_layout,
                                  dtype          = args.dtype,
                                  pad_output     = pad_output,
                                  dali_cpu       = dali_cpu,
                                  nvjpeg_padding = args.dali_nvjpeg_memory_padding * 1024 * 1024,
                                  prefetch_queue = args.dali_prefetch_queue,
                                  nvjpeg_width_hint  = args.dali_nvjpeg_width_hint,
                                  nvjpeg_height_hint = args.dali_nvjpeg_height_hint) for gpu_id in gpus]


    if args.data_val:
        valpipes = [HybridValPipe(args           = args,
                                  batch_size     = batch_size,
                                  num_threads    = num_validation_threads,
                                  device_id      = gpu_id,
                                  rec_path       = args.data_val,
                                  idx_path       = args.data_val_idx,
                                  shard_id       = 0 if args.dali_separ_val
                                                      else gpus.index(gpu_id) + len(gpus)*rank,
                                  num_shards     = 1 if args.dali_separ_val else len(gpus)*nWrk,
                                  crop_shape     = args.image_shape[1:],
                                  resize_shp     = args.data_val_resize,
                                  output_layout  = output_layout,
                                  dtype          = args.dtype,
                                  pad_output     = pad_output,
                                  dali_cpu       = dali_cpu,
                                  nvjpeg_padding = args.dali_nvjpeg_memory_padding * 1024 * 1024,
                                  prefetch_queue = args.dali_prefetch_queue,
                                  nvjpeg_width_hint  = args.dali_nvjpeg_width_hint,
                                  nvjpeg_height_hint = args.dali_nvjpeg_height_hint) for gpu_id in gpus] \\
                                  if args.data_val else None
    trainpipes[0].build()
    if args.data_val:
        valpipes[0].build()
        worker_val_examples = valpipes[0].epoch_size("Reader")
        if not args.dali_separ_val:
            worker_val_examples = worker_val_examples // nWrk
            if rank < valpipes[0].epoch_size("Reader") % nWrk:
                worker_val_examples += 1

    if args.num_examples < trainpipes[0].epoch_size("Reader"):
        warnings.warn("{} training examples will be used, although full training set contains {} examples".format(
            args.num_examples, trainpipes[0].epoch_size("Reader")))
    dali_train_iter = DALIClassificationIterator(trainpipes, args.num_examples // nWrk)

    if args.data_val:
        dali_val_iter = DALIClassificationIterator(valpipes, worker_val_examples, fill_last_batch = False) \\
            if args.data_val else None
    else:
        dali_val_iter = None

    return dali_train_iter, dali_val_iter


args = SimpleNamespace(
    gpus=[0], kv_store="device", batch_size=8, image_shape=[4, 224, 224], input_layout="NHWC", dtype="float16",
    data_train=REC, data_train_idx=IDX, data_val=REC, data_val_idx=IDX, data_val_resize=256, num_examples=24,
    rgb_mean=[123.68, 116.779, 103.939], rgb_std=[58.393, 57.12, 57.375], dali_separ_val=False, dali_threads=2,
    dali_validation_threads=2, dali_prefetch_queue=5, dali_nvjpeg_memory_padding=256, dali_fuse_decoder=1,
    dali_nvjpeg_width_hint=5980, dali_nvjpeg_height_hint=6430, dali_dont_use_mmap=False,
)
dali_train_iter, dali_val_iter = get_rec_iter(args, dali_cpu=False)
RESULT = {"len": [], "epochs": []}
for loader in (dali_train_iter, dali_val_iter):
    RESULT["len"].append(len(loader))
    for epoch in range(2):
        steps = []
        for data in loader:
            images = data[0]["data"]
            steps.append((tuple(images.shape), str(images.dtype), data[0]["label"].view(-1).tolist()))
        loader.reset()
        RESULT["epochs"].append(steps)
RESULT["val_images"] = images.float().numpy().copy()
"""

# hamidriasat/UNet-3-Plus, data_generators/dali_data_generator.py (commit
# 7d655107e75d5a680542d7bff0b95a9e6451eea3): a segmentation pipeline (UNet 3+ on LiTS): images and
# masks from two fn.readers.file(files=...) with one seed so that they shuffle alike, a grey-scale
# mask decode, fn.resize(size=...), fn.normalize(mean=0, stddev=255) of the images and of the masks
# (NORMALIZE_MASK), fn.squeeze(axes=[2]) and fn.one_hot of the masks; single_gpu_pipeline as
# written. Changed: cfg is a SimpleNamespace with the config's keys (resize to 64x64, normalised
# images, masks of values 0 and 1 kept as they are, 2 classes, seed 5, batches of 8), and
# get_data_paths gives the fixture's JPEGs and a PNG mask for each (its pixels brighter than 128);
# the data go to TensorFlow through dali_tf.DALIDataset there (TensorFlow is not installed here),
# so the loop runs the pipeline for two epochs of batches with pipe.run(); the multi-GPU
# pipeline (the same graph, sharded) and data_generator are left out.
UNET3PLUS_SEGMENTATION = """
import nvidia.dali.fn as fn
from nvidia.dali import pipeline_def
import nvidia.dali.types as types
import numpy as np
from types import SimpleNamespace


def get_data_paths(cfg, mode, mask_available):
    return IMAGES, MASKS


def data_generator_pipeline(cfg, mode: str, mask_available: bool):
    \"\"\"
    Returns DALI data pipeline object.
    \"\"\"
    data_paths = get_data_paths(cfg, mode, mask_available)  # get data paths
    images_paths = data_paths[0]
    if mask_available:
        mask_paths = data_paths[1]

    @pipeline_def(batch_size=cfg.HYPER_PARAMETERS.BATCH_SIZE)
    def single_gpu_pipeline(device):
        \"\"\"
        Returns DALI data pipeline object for single GPU training.
        \"\"\"
        device = 'mixed' if 'gpu' in device.lower() else 'cpu'

        pngs, _ = fn.readers.file(
            files=images_paths,
            random_shuffle=cfg.PREPROCESS_DATA.SHUFFLE[mode].VALUE,
            seed=cfg.SEED
        )
        images = fn.decoders.image(pngs, device=device, output_type=types.RGB)
        if cfg.PREPROCESS_DATA.RESIZE.VALUE:
            # TODO verify image resizing method
            images = fn.resize(
                images,
                size=[
                    cfg.PREPROCESS_DATA.RESIZE.HEIGHT,
                    cfg.PREPROCESS_DATA.RESIZE.WIDTH
                ]
            )
        if cfg.PREPROCESS_DATA.IMAGE_PREPROCESSING_TYPE == "normalize":
            images = fn.normalize(images, mean=0, stddev=255, )  # axes=(2,)

        if mask_available:
            labels, _ = fn.readers.file(
                files=mask_paths,
                random_shuffle=cfg.PREPROCESS_DATA.SHUFFLE[mode].VALUE,
                seed=cfg.SEED
            )
            labels = fn.decoders.image(
                labels,
                device=device,
                output_type=types.GRAY
            )
            if cfg.PREPROCESS_DATA.RESIZE.VALUE:
                # TODO verify image resizing method
                labels = fn.resize(
                    labels,
                    size=[
                        cfg.PREPROCESS_DATA.RESIZE.HEIGHT,
                        cfg.PREPROCESS_DATA.RESIZE.WIDTH
                    ]
                )
            if cfg.PREPROCESS_DATA.NORMALIZE_MASK.VALUE:
                labels = fn.normalize(
                    labels,
                    mean=0,
                    stddev=cfg.PREPROCESS_DATA.NORMALIZE_MASK.NORMALIZE_VALUE,
                )
            labels = fn.squeeze(labels, axes=[2])
            labels = fn.one_hot(labels, num_classes=cfg.OUTPUT.CLASSES)

        if mask_available:
            return images, labels
        else:
            return images,

    return single_gpu_pipeline


def config(mode, shuffle, normalize_mask):
    return SimpleNamespace(
        SEED=5,
        HYPER_PARAMETERS=SimpleNamespace(BATCH_SIZE=8),
        DATALOADER_WORKERS=2,
        OUTPUT=SimpleNamespace(CLASSES=2),
        PREPROCESS_DATA=SimpleNamespace(
            RESIZE=SimpleNamespace(VALUE=True, HEIGHT=64, WIDTH=64),
            IMAGE_PREPROCESSING_TYPE="normalize",
            NORMALIZE_MASK=SimpleNamespace(VALUE=normalize_mask, NORMALIZE_VALUE=255),
            SHUFFLE={mode: SimpleNamespace(VALUE=shuffle)},
        ),
    )


RESULT = {}
for mode, shuffle in (("TRAIN", True), ("VAL", False)):
    cfg = config(mode, shuffle, normalize_mask=False)
    data_pipeline = data_generator_pipeline(cfg, mode, mask_available=True)
    pipeline = data_pipeline(
        batch_size=cfg.HYPER_PARAMETERS.BATCH_SIZE,
        num_threads=cfg.DATALOADER_WORKERS,
        device="gpu",
        device_id=0
    )
    pipeline.build()
    steps = []
    for step in range(2 * 24 // cfg.HYPER_PARAMETERS.BATCH_SIZE):
        images, labels = pipeline.run()
        images, labels = images.as_cpu(), labels.as_cpu()
        steps.append({
            "layouts": (images.layout(), labels.layout()),
            "images": images.as_array().copy(),
            "labels": labels.as_array().copy(),
        })
    RESULT[mode] = steps
"""

EVERY_LABEL = sorted(i // 6 for i in range(24))
#: one grey level after normalising by ImageNet's std (its smallest, 0.224 * 255)
LEVEL = 1 / (0.224 * 255)
#: raypipe's resampling against DALI's, through normalisation: a few pixels of a 224x224 crop
#: resized from about 500x375 differ by up to 10.8 grey levels (measured), the mean far below one
RESAMPLED = {"max_diff": 11.5 * LEVEL, "mean_diff": 0.6 * LEVEL}
_SOLO_BUILDERS = ("train_pipeline_builder", "pipeline_builder")


@pytest.fixture
def images_dir(tmp_path, jpeg_root, jpeg_files) -> str:
    """The fixture's class folders beside a ``file_list.txt`` of ``relative/path label`` lines (the
    DALI examples' data format), ending in a slash as the notebooks' ``images_dir``."""
    root = tmp_path / "images"
    root.mkdir()
    for folder in sorted({os.path.dirname(path) for path in jpeg_files}):
        os.symlink(folder, root / os.path.basename(folder))
    lines = [f"{os.path.relpath(path, jpeg_root)} {i // 6}" for i, path in enumerate(jpeg_files)]
    (root / "file_list.txt").write_text("\n".join(lines) + "\n")
    return str(root) + os.sep


@pytest.fixture
def train_val_root(tmp_path, jpeg_root) -> str:
    """A data path with the fixture as its ``train`` and ``val`` folders (DeepLearningExamples' layout)."""
    root = tmp_path / "imagenet"
    root.mkdir()
    for split in ("train", "val"):
        os.symlink(jpeg_root, root / split)
    return str(root)


@pytest.fixture
def recordio(tmp_path, jpeg_files) -> tuple[str, str]:
    """The fixture's JPEGs as one MXNet RecordIO file and its index, labels by folder."""
    with RecordIOWriter(str(tmp_path / "train.rec")) as writer:
        for i, path in enumerate(jpeg_files):
            with open(path, "rb") as f:
                writer.add(os.path.basename(path), f.read(), i // 6)
    return writer.path, writer.index_path


@pytest.fixture
def masks(tmp_path, jpeg_files) -> list[str]:
    """A PNG mask for each fixture JPEG: 1 where the image is brighter than 128, else 0."""
    paths = []
    for path in jpeg_files:
        mask = tmp_path / "masks" / os.path.basename(os.path.dirname(path)) / os.path.basename(path)
        mask = mask.with_suffix(".png")
        mask.parent.mkdir(parents=True, exist_ok=True)
        Image.open(path).convert("L").point(lambda v: 1 if v > 128 else 0).save(mask)
        paths.append(str(mask))
    return paths


def _assert_close_images(ours: np.ndarray, theirs: np.ndarray, max_diff: float, mean_diff: float) -> None:
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    diff = np.abs(ours.astype(np.float64) - theirs.astype(np.float64))
    assert diff.max() <= max_diff and diff.mean() <= mean_diff, (diff.max(), diff.mean())


def _mask_agreement(step: dict) -> float:
    """The smallest fraction, over a batch, of pixels whose mask class is its image's grey > 128."""
    grey = step["images"] @ np.array([0.299, 0.587, 0.114], np.float32)
    agree = (grey > 128 / 255) == (step["labels"][..., 1] > 0.5)
    return float(agree.reshape(len(agree), -1).mean(1).min())


def _pipe_runs(result: dict) -> list:
    """Per run: the layout, each sample's (shape, dtype), and the labels."""
    return [
        (run["layout"], [(i.shape, str(i.dtype)) for i in run["images"]], [lbl.tolist() for lbl in run["labels"]])
        for run in result["runs"]
    ]


def test_dataloaders_dali_imagenet_with_deprecated_arguments(jpeg_root):
    result = ported(DATALOADERS_DALI_IMAGENET, jpeg_root)
    assert result["len"] == [3, 3]
    for steps in result["epochs"]:
        assert [(s, d) for s, d, _ in steps] == [((8, 3, 32, 32), "torch.float32")] * 3
        assert sorted(label for *_, ls in steps for label in ls) == EVERY_LABEL
    assert [label for *_, ls in result["epochs"][2] for label in ls] == [i // 6 for i in range(24)], "val: in order"
    pytest.importorskip("nvidia.dali")
    names = [(f"ops.{old}(", f"ops.{new}(") for old, new in DALI_1_DECODER_NAMES]
    dali = run_script(
        as_dali_cpu(DATALOADERS_DALI_IMAGENET, [("device_id=local_rank,", "device_id=None,"), *names]), jpeg_root
    )
    assert structure(result) == structure(dali)
    assert result["epochs"][2:] == dali["epochs"][2:], "validation: the same labels in the same order"
    _assert_close_images(result["val_images"], dali["val_images"], **RESAMPLED)


@pytest.mark.parametrize("script", [EXTERNAL_INPUT, EXTERNAL_INPUT_OPS], ids=["fn_with_pipe", "ops_class"])
def test_dalis_external_input_notebook(images_dir, script):
    random.seed(0)
    result = ported(script, images_dir, IMAGES_DIR=images_dir)
    assert len(result["runs"]) == 2
    for layout, samples, labels in _pipe_runs(result):
        assert layout == "HWC" and len(samples) == 16
        assert all(len(shape) == 3 and shape[2] == 3 and dtype == "uint8" for shape, dtype in samples)
        assert len({shape for shape, _ in samples}) > 1, "the decoded images keep their own sizes"
        assert all(len(label) == 1 for label in labels)
    pytest.importorskip("nvidia.dali")
    random.seed(0)
    dali = run_script(as_dali_cpu(script), images_dir, IMAGES_DIR=images_dir)
    assert _pipe_runs(result) == _pipe_runs(dali)
    for ours, theirs in zip(result["runs"], dali["runs"], strict=True):
        for a, b in zip(ours["images"], theirs["images"], strict=True):
            _assert_close_images(a, b, max_diff=1, mean_diff=0.01)


def test_dalis_parallel_external_source_fork_notebook(images_dir):
    result = ported(PARALLEL_EXTERNAL_SOURCE_FORK, images_dir, IMAGES_DIR=images_dir)
    for name in ("train", "val"):
        assert len(result[name]) == 2
        for steps in result[name]:
            assert len(steps) == 4, "24 samples in batches of 6, StopIteration at index 24"
            assert [label for step in steps for label in step["labels"]] == [i // 6 for i in range(24)]
            assert all(step["layout"] == "HWC" for step in steps)
            assert all(image.dtype == np.uint8 and image.ndim == 3 for step in steps for image in step["images"])
    pytest.importorskip("nvidia.dali")
    dali = run_script(as_dali_cpu(PARALLEL_EXTERNAL_SOURCE_FORK), images_dir, IMAGES_DIR=images_dir)

    def shapes(steps: list) -> list:
        return [(s["layout"], [i.shape for i in s["images"]], s["labels"]) for s in steps]

    for name in ("train", "val"):
        assert [shapes(steps) for steps in result[name]] == [shapes(steps) for steps in dali[name]]
    for ours, theirs in zip(result["val"], dali["val"], strict=True):
        for step, dali_step in zip(ours, theirs, strict=True):
            for a, b in zip(step["images"], dali_step["images"], strict=True):
                _assert_close_images(a, b, max_diff=1, mean_diff=0.01)


def test_dalis_paddle_resnet50_pipeline_with_graph_context(jpeg_root):
    result = ported(PADDLE_RESNET50, jpeg_root)
    assert result["len"] == [[3, 3], [3, 3]], "12 samples per rank in batches of 5"
    for steps in result["epochs"]:
        assert [(s, d) for s, d, _ in steps] == [((5, 3, 24, 24), "torch.float32")] * 6, "FILL: whole batches"
        assert set(EVERY_LABEL) == {label for *_, ls in steps for label in ls}
    assert result["label_dtype"] == "torch.int64"
    pytest.importorskip("nvidia.dali")
    dali = run_script(as_dali_cpu(PADDLE_RESNET50), jpeg_root)
    ours, theirs = structure(result), structure(dali)
    assert ours["len"] == theirs["len"]
    for (steps, labels), (dali_steps, dali_labels) in zip(ours["epochs"][:2], theirs["epochs"][:2], strict=True):
        assert steps == dali_steps
        # each rank's shard holds DALI's files; pad_last_batch repeats the last sample the shuffle
        # buffer gives, which is random: up to 3 entries per rank may differ
        assert (labels - dali_labels).total() <= 2 * 3
    assert result["epochs"][2:] == dali["epochs"][2:], "validation: the same labels in the same order"
    assert result["label_dtype"] == dali["label_dtype"]


def test_deeplearningexamples_convnets_dataloaders(train_val_root):
    result = ported(DEEPLEARNINGEXAMPLES_CONVNETS, train_val_root)
    assert result["len"] == [4, 4], "int(24 / 5)"
    for steps in result["epochs"]:
        assert [(s, d) for s, d, _ in steps] == [((5, 3, 224, 224), "torch.float32")] * 4 + [
            ((4, 3, 224, 224), "torch.float32")
        ], "fill_last_batch=False: the last step has the 4 left"
        assert sorted(label for *_, ls in steps for label in ls) == EVERY_LABEL
    pytest.importorskip("nvidia.dali")
    dali = run_script(as_dali_cpu(DEEPLEARNINGEXAMPLES_CONVNETS), train_val_root)
    assert structure(result) == structure(dali)
    assert result["epochs"][2:] == dali["epochs"][2:], "validation: the same labels in the same order"
    _assert_close_images(result["val_images"], dali["val_images"], **RESAMPLED)


def test_solo_learn_self_supervised_and_linear_pipelines(jpeg_root):
    result = ported(SOLO_LEARN, jpeg_root)
    assert result["len"] == [3, 3, 3]
    pretrain, linear, val = result["epochs"][:2], result["epochs"][2:4], result["epochs"][4:]
    for steps in pretrain:
        assert [(s, d) for s, d, _ in steps] == [([(8, 3, 32, 32)] * 2, ["torch.float32"] * 2)] * 3
        assert sorted(label for *_, ls in steps for label in ls) == EVERY_LABEL
    for steps in linear + val:
        assert [(s, d) for s, d, _ in steps] == [((8, 3, 224, 224), "torch.float32")] * 3
        assert sorted(label for *_, ls in steps for label in ls) == EVERY_LABEL
    assert pretrain[0] != pretrain[1], "shuffle_after_epoch: the epochs differ"
    pytest.importorskip("nvidia.dali")
    edits = [(f"device_id={builder}.device_id", "device_id=None") for builder in _SOLO_BUILDERS]
    dali = run_script(as_dali_cpu(SOLO_LEARN, edits), jpeg_root)
    assert structure(result) == structure(dali)
    assert result["epochs"][4:] == dali["epochs"][4:], "validation: the same labels in the same order"
    _assert_close_images(result["val_images"], dali["val_images"], **RESAMPLED)


def test_dalis_pytorch_external_input_notebook(images_dir):
    random.seed(0)
    result = ported(PYTORCH_EXTERNAL_INPUT, images_dir, IMAGES_DIR=images_dir)
    assert result["len"] == 8
    for steps in result["epochs"]:
        assert [(s, d) for s, d, _ in steps] == [((3, 240, 240, 3), "torch.uint8")] * 8
        assert sorted(label for *_, ls in steps for label in ls) == EVERY_LABEL, "each file once per epoch"
    pytest.importorskip("nvidia.dali")
    random.seed(0)
    # DALI 2.4 asks torch for the current CUDA stream of any torch tensor fed to external_source,
    # which fails with a CPU-only torch: its run gets the labels as numpy arrays
    numpy_labels = ("torch.tensor([int(label)], dtype = torch.uint8)", "np.array([int(label)], dtype = np.uint8)")
    dali = run_script(as_dali_cpu(PYTORCH_EXTERNAL_INPUT, [numpy_labels]), images_dir, IMAGES_DIR=images_dir)
    assert structure(result) == structure(dali)


def test_deeplearningexamples_mxnet_rn50_recordio_pipelines(recordio, jpeg_root):
    rec, idx = recordio
    result = ported(DEEPLEARNINGEXAMPLES_MXNET_RN50, jpeg_root, REC=rec, IDX=idx)
    assert result["len"] == [3, 3]
    for steps in result["epochs"]:
        assert [(s, d) for s, d, _ in steps] == [((8, 224, 224, 4), "torch.float16")] * 3
        assert sorted(label for *_, ls in steps for label in ls) == EVERY_LABEL
    assert result["val_images"][..., 3].max() == 0, "pad_output: the fourth channel is zero"
    pytest.importorskip("nvidia.dali")
    edit = ("device_id      = gpu_id", "device_id      = None")
    dali = run_script(as_dali_cpu(DEEPLEARNINGEXAMPLES_MXNET_RN50, [edit]), jpeg_root, REC=rec, IDX=idx)
    assert structure(result) == structure(dali)
    assert result["epochs"][2:] == dali["epochs"][2:], "validation: the same labels in the same order"
    _assert_close_images(result["val_images"], dali["val_images"], **RESAMPLED)


def test_unet3plus_segmentation_pipeline(jpeg_root, jpeg_files, masks):
    result = ported(UNET3PLUS_SEGMENTATION, jpeg_root, IMAGES=jpeg_files, MASKS=masks)
    for mode in ("TRAIN", "VAL"):
        assert len(result[mode]) == 6
        for step in result[mode]:
            assert step["images"].shape == (8, 64, 64, 3) and step["images"].dtype == np.float32
            assert step["labels"].shape == (8, 64, 64, 2) and step["labels"].dtype == np.float32
            assert np.array_equal(step["labels"].sum(-1), np.ones((8, 64, 64))), "one class per pixel"
            assert 0 <= step["images"].min() and step["images"].max() <= 1, "images / 255"
            assert _mask_agreement(step) > 0.9, "each mask read with its image: the readers shuffle alike"
    pytest.importorskip("nvidia.dali")
    dali = run_script(as_dali_cpu(UNET3PLUS_SEGMENTATION), jpeg_root, IMAGES=jpeg_files, MASKS=masks)
    for mode in ("TRAIN", "VAL"):
        assert [s["layouts"] for s in result[mode]] == [s["layouts"] for s in dali[mode]]
        assert [s["labels"].shape for s in result[mode]] == [s["labels"].shape for s in dali[mode]]
    for ours, theirs in zip(result["VAL"], dali["VAL"], strict=True):
        _assert_close_images(ours["images"], theirs["images"], max_diff=11.5 / 255, mean_diff=0.6 / 255)
        # A uint8 linear resize rounds between its two passes, as Pillow does (DALI keeps floats): on
        # 0/1 masks about 0.6-1.1 % of the classes differ (measured); more would be a misaligned mask.
        assert np.mean(ours["labels"] != theirs["labels"]) < 0.02, "the masks' classes, up to resampling"
