"""DALI tutorial-style training scripts run unchanged after renaming ``nvidia.dali`` to ``raypipe``.

Each script below is written as a DALI user writes it (``from nvidia.dali ...``). The test renames
the import and runs it on the JPEG fixture with ``device_id=0`` on a machine without a GPU (raypipe
warns and runs on the CPU). Where DALI is installed (CPU build), the same script made CPU-only
(``device="cpu"``, ``device_id=None``, no ``.gpu()``) runs under DALI too, and both give the same
steps per epoch, shapes, dtypes, layouts and labels per epoch (augmentations draw from different
random generators, so pixels differ).
"""

from __future__ import annotations

import pytest

from tests.script_harness import as_dali_cpu, ported, run_script, structure

# Class-style pipeline with the long-lived ops names, a rotation by a random.Uniform angle,
# RandomResizedCrop, CropMirrorNormalize with a CoinFlip mirror, labels moved to the GPU, and
# DALIClassificationIterator(size=N) with reset() after every epoch.
CLASS_STYLE = """
from nvidia.dali.pipeline import Pipeline
import nvidia.dali.ops as ops
import nvidia.dali.types as types
from nvidia.dali.plugin.pytorch import DALIClassificationIterator


class HybridTrainPipe(Pipeline):
    def __init__(self, batch_size, num_threads, device_id, data_dir, crop):
        super().__init__(batch_size, num_threads, device_id, seed=12 + device_id, exec_async=True,
                         exec_pipelined=True, prefetch_queue_depth=2)
        self.input = ops.FileReader(file_root=data_dir, random_shuffle=True, initial_fill=32)
        self.decode = ops.ImageDecoder(device="mixed", output_type=types.RGB)
        self.angle = ops.random.Uniform(range=(-10.0, 10.0))
        self.rotate = ops.Rotate(device="gpu", fill_value=0, keep_size=True, interp_type=types.INTERP_LINEAR)
        self.rrc = ops.RandomResizedCrop(device="gpu", size=crop, random_area=[0.25, 1.0])
        self.cmnp = ops.CropMirrorNormalize(device="gpu", dtype=types.FLOAT, output_layout=types.NCHW,
                                            crop=(crop, crop), mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
                                            std=[0.229 * 255, 0.224 * 255, 0.225 * 255])
        self.coin = ops.CoinFlip(probability=0.5)

    def define_graph(self):
        rng = self.coin()
        self.jpegs, self.labels = self.input(name="Reader")
        images = self.decode(self.jpegs)
        images = self.rotate(images, angle=self.angle())
        images = self.rrc(images)
        output = self.cmnp(images, mirror=rng)
        return [output, self.labels.gpu()]


pipe = HybridTrainPipe(batch_size=8, num_threads=2, device_id=0, data_dir=DATA, crop=32)
pipe.build()
train_loader = DALIClassificationIterator(pipe, size=pipe.epoch_size("Reader"))
RESULT = {"epochs": [], "len": len(train_loader)}
for epoch in range(2):
    steps = []
    for i, data in enumerate(train_loader):
        images = data[0]["data"]
        labels = data[0]["label"].squeeze(-1).long()
        steps.append((tuple(images.shape), str(images.dtype), labels.tolist()))
    train_loader.reset()
    RESULT["epochs"].append(steps)
"""

# Functional style: pipeline_def, decoders.image_random_crop, resize, crop_mirror_normalize with a
# coin_flip mirror; the TensorList API on pipe.run() outputs; DALIGenericIterator with reader_name
# and LastBatchPolicy.PARTIAL.
FUNCTIONAL = """
import numpy as np
from nvidia.dali import pipeline_def, fn, types
from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy


@pipeline_def(batch_size=5, num_threads=2, device_id=0, seed=3)
def train_pipe(data_dir):
    jpegs, labels = fn.readers.file(file_root=data_dir, random_shuffle=False, name="Reader")
    images = fn.decoders.image_random_crop(jpegs, device="mixed", output_type=types.RGB)
    images = fn.resize(images, resize_x=40, resize_y=40, interp_type=types.INTERP_LINEAR)
    images = fn.crop_mirror_normalize(images, crop=(32, 32), mirror=fn.random.coin_flip(probability=0.5),
                                      dtype=types.FLOAT, output_layout="CHW", mean=[128.0], std=[64.0])
    return images, labels


probe = train_pipe(DATA)
probe.build()
images, labels = probe.run()
first = images.as_cpu()
RESULT = {
    "run": (len(images), first.layout(), tuple(first.at(0).shape), tuple(np.asarray(first[1]).shape),
            tuple(first.as_array().shape), [int(np.asarray(labels.as_cpu()[i]).item()) for i in range(len(labels))]),
}
loader = DALIGenericIterator([train_pipe(DATA)], ["images", "labels"], reader_name="Reader",
                             last_batch_policy=LastBatchPolicy.PARTIAL, auto_reset=True)
RESULT["len"] = len(loader)
RESULT["epochs"] = []
for epoch in range(2):
    steps = []
    for data in loader:
        batch = data[0]
        steps.append((tuple(batch["images"].shape), str(batch["images"].dtype), batch["labels"].view(-1).tolist()))
    RESULT["epochs"].append(steps)
"""

# DALI's ResNet-50 PyTorch example (docs/examples/use_cases/pytorch/resnet50): one pipeline per rank
# (shard_id/num_shards), the decoders' memory hints, INTERP_TRIANGULAR resizes, a padded last batch,
# and DALIClassificationIterator(reader_name=..., last_batch_policy=PARTIAL, auto_reset=True).
RESNET50 = """
from nvidia.dali.pipeline import pipeline_def
import nvidia.dali.types as types
import nvidia.dali.fn as fn
from nvidia.dali.plugin.pytorch import DALIClassificationIterator, LastBatchPolicy


@pipeline_def
def create_dali_pipeline(data_dir, crop, size, shard_id, num_shards, dali_cpu=False, is_training=True):
    images, labels = fn.readers.file(file_root=data_dir, shard_id=shard_id, num_shards=num_shards,
                                     random_shuffle=is_training, pad_last_batch=True, name="Reader")
    dali_device = "cpu" if dali_cpu else "gpu"
    decoder_device = "cpu" if dali_cpu else "mixed"
    device_memory_padding = 211025920 if decoder_device == "mixed" else 0
    host_memory_padding = 140544512 if decoder_device == "mixed" else 0
    preallocate_width_hint = 5980 if decoder_device == "mixed" else 0
    preallocate_height_hint = 6430 if decoder_device == "mixed" else 0
    if is_training:
        images = fn.decoders.image_random_crop(images, device=decoder_device, output_type=types.RGB,
                                               device_memory_padding=device_memory_padding,
                                               host_memory_padding=host_memory_padding,
                                               preallocate_width_hint=preallocate_width_hint,
                                               preallocate_height_hint=preallocate_height_hint,
                                               random_aspect_ratio=[0.8, 1.25], random_area=[0.1, 1.0],
                                               num_attempts=100)
        images = fn.resize(images, device=dali_device, resize_x=crop, resize_y=crop,
                           interp_type=types.INTERP_TRIANGULAR)
        mirror = fn.random.coin_flip(probability=0.5)
    else:
        images = fn.decoders.image(images, device=decoder_device, output_type=types.RGB)
        images = fn.resize(images, device=dali_device, size=size, mode="not_smaller",
                           interp_type=types.INTERP_TRIANGULAR)
        mirror = False
    images = fn.crop_mirror_normalize(images.gpu(), dtype=types.FLOAT, output_layout="CHW", crop=(crop, crop),
                                      mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
                                      std=[0.229 * 255, 0.224 * 255, 0.225 * 255], mirror=mirror)
    labels = labels.gpu()
    return images, labels


RESULT = {"len": [], "epochs": []}
for is_training in (True, False):
    loaders = []
    for rank in range(2):
        pipe = create_dali_pipeline(batch_size=5, num_threads=2, device_id=0, seed=12 + rank, data_dir=DATA,
                                    crop=24, size=28, dali_cpu=False, shard_id=rank, num_shards=2,
                                    is_training=is_training)
        pipe.build()
        loaders.append(DALIClassificationIterator(pipe, reader_name="Reader",
                                                  last_batch_policy=LastBatchPolicy.PARTIAL, auto_reset=True))
    RESULT["len"].append([len(loader) for loader in loaders])
    for epoch in range(2):
        steps = []
        for loader in loaders:
            for data in loader:
                images = data[0]["data"]
                labels = data[0]["label"].squeeze(-1).long()
                steps.append((tuple(images.shape), str(images.dtype), labels.tolist()))
        RESULT["epochs"].append(steps)
"""


def test_class_style_script_with_legacy_ops_names(jpeg_root):
    result = ported(CLASS_STYLE, jpeg_root)
    assert result["len"] == 3
    for steps in result["epochs"]:
        assert [(s, d) for s, d, _ in steps] == [((8, 3, 32, 32), "torch.float32")] * 3
        assert sorted(label for *_, ls in steps for label in ls) == sorted(i // 6 for i in range(24)), (
            "each sample once"
        )
    assert result["epochs"][0] != result["epochs"][1], "random_shuffle: epochs differ"
    pytest.importorskip("nvidia.dali")
    assert structure(result) == structure(run_script(as_dali_cpu(CLASS_STYLE), jpeg_root))


def test_functional_script_with_tensor_lists_and_a_partial_last_batch(jpeg_root):
    result = ported(FUNCTIONAL, jpeg_root)
    assert result["run"] == (5, "CHW", (3, 32, 32), (3, 32, 32), (5, 3, 32, 32), [0, 0, 0, 0, 0])
    assert result["len"] == 5
    for steps in result["epochs"]:
        assert [s for s, _, _ in steps] == [(5, 3, 32, 32)] * 4 + [(4, 3, 32, 32)], "24 samples: the last step has 4"
        assert [label for *_, ls in steps for label in ls] == [i // 6 for i in range(24)], "no shuffle: folder order"
    pytest.importorskip("nvidia.dali")
    assert structure(result) == structure(run_script(as_dali_cpu(FUNCTIONAL), jpeg_root))
    assert result["run"] == run_script(as_dali_cpu(FUNCTIONAL), jpeg_root)["run"]


def test_dalis_resnet50_example_with_two_ranks(jpeg_root):
    result = ported(RESNET50, jpeg_root)
    assert result["len"] == [[3, 3], [3, 3]], "12 samples per rank in batches of 5, the last partial"
    everything = sorted(i // 6 for i in range(24))
    for steps in result["epochs"]:
        assert [s for s, _, _ in steps] == [(5, 3, 24, 24), (5, 3, 24, 24), (2, 3, 24, 24)] * 2
        assert {d for _, d, _ in steps} == {"torch.float32"}
        assert sorted(label for *_, ls in steps for label in ls) == everything, "the two ranks read every sample once"
    pytest.importorskip("nvidia.dali")
    assert structure(result) == structure(run_script(as_dali_cpu(RESNET50), jpeg_root))
