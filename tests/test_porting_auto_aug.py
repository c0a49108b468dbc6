"""Public DALI training pipelines with automatic augmentations (``nvidia.dali.auto_aug``), run
unchanged after renaming ``nvidia.dali`` to ``raypipe``, and compared with DALI 2.4's CPU build, as
the port tests of :mod:`tests.test_porting_scripts`: each script is its source's pipeline, operator
for operator and argument for argument, cut down only where it must be to run here (named above
it, with every change). The augmentations are drawn at random, so the comparison is of steps,
shapes, dtypes and labels; raypipe's values are checked against the same pipeline without them."""

from __future__ import annotations

import numpy as np
import pytest

from tests.script_harness import as_dali_cpu, ported, run_script, structure

# NVIDIA/DALI, docs/examples/use_cases/pytorch/efficientnet/image_classification/dali.py (commit
# 120db77267b5e29c34bf24a33515d7bba12c2c66): the EfficientNet example's training pipeline as written
# (pipeline_def from nvidia.dali.pipeline.experimental with enable_conditionals=True, a random crop
# decode, resize with antialias=False, .gpu(), a coin-flip fn.flip, then AutoAugment's ImageNet policy
# or TrivialAugment Wide given the shape, or neither, and crop_mirror_normalize), with get_dali_train_loader
# and DALIWrapper of the same example's dataloaders.py (commit 0472490b23514efd4986c68d2aa63b786e51f98b).
# Changed: the data path is the fixture itself (not its train folder); rank 0 of 1 on device 0 with seed
# 12 (torch.cuda.device_count() is 0 here); the target stays on the host (no .cuda()); the other
# loaders, the validation pipeline and the external-source variants are left out; the loop runs each
# augmentation for two epochs of 32x32 images in batches of 8.
EFFICIENTNET = """
import os
import torch
from nvidia.dali import fn
from nvidia.dali import types

from nvidia.dali.pipeline.experimental import pipeline_def

from nvidia.dali.auto_aug import auto_augment, trivial_augment
from nvidia.dali.plugin.pytorch import DALIClassificationIterator


def processing_training_pipe(
    jpegs_input,
    interpolation,
    image_size,
    output_layout,
    automatic_augmentation,
    dali_device="gpu",
):
    decoder_device = "mixed" if dali_device == "gpu" else "cpu"
    images = fn.decoders.image_random_crop(
        jpegs_input,
        device=decoder_device,
        output_type=types.RGB,
        random_aspect_ratio=[0.75, 4.0 / 3.0],
        random_area=[0.08, 1.0],
    )

    images = fn.resize(
        images,
        size=[image_size, image_size],
        interp_type=interpolation,
        antialias=False,
    )

    # Make sure that from this point we are processing on GPU regardless of dali_device parameter
    images = images.gpu()

    rng = fn.random.coin_flip(probability=0.5)
    images = fn.flip(images, horizontal=rng)

    if automatic_augmentation == "autoaugment":
        output = auto_augment.auto_augment_image_net(
            images, shape=[image_size, image_size]
        )
    elif automatic_augmentation == "trivialaugment":
        output = trivial_augment.trivial_augment_wide(
            images, shape=[image_size, image_size]
        )
    else:
        output = images

    output = fn.crop_mirror_normalize(
        output,
        dtype=types.FLOAT,
        output_layout=output_layout,
        crop=(image_size, image_size),
        mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
        std=[0.229 * 255, 0.224 * 255, 0.225 * 255],
    )

    return output


@pipeline_def(enable_conditionals=True)
def training_pipe(
    data_dir,
    interpolation,
    image_size,
    output_layout,
    automatic_augmentation,
    dali_device="gpu",
    rank=0,
    world_size=1,
):
    jpegs, labels = fn.readers.file(
        name="Reader",
        file_root=data_dir,
        shard_id=rank,
        num_shards=world_size,
        random_shuffle=True,
        pad_last_batch=True,
    )
    outputs = processing_training_pipe(
        jpegs,
        interpolation,
        image_size,
        output_layout,
        automatic_augmentation,
        dali_device,
    )
    return outputs, labels


class DALIWrapper(object):

    def gen_wrapper(dalipipeline, num_classes, one_hot, memory_format):
        for data in dalipipeline:
            input = data[0]["data"].contiguous(memory_format=memory_format)
            target = torch.reshape(data[0]["label"], [-1]).long()
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


def get_dali_train_loader(dali_device="gpu"):
    def gdtl(
        data_path,
        image_size,
        batch_size,
        num_classes,
        one_hot,
        interpolation="bilinear",
        augmentation="disabled",
        start_epoch=0,
        workers=5,
        _worker_init_fn=None,
        memory_format=torch.contiguous_format,
        **kwargs,
    ):
        if torch.distributed.is_initialized():
            rank = torch.distributed.get_rank()
            world_size = torch.distributed.get_world_size()
        else:
            rank = 0
            world_size = 1

        interpolation = {
            "bicubic": types.INTERP_CUBIC,
            "bilinear": types.INTERP_LINEAR,
            "triangular": types.INTERP_TRIANGULAR,
        }[interpolation]

        output_layout = "HWC" if memory_format == torch.channels_last else "CHW"

        traindir = data_path

        pipeline_kwargs = {
            "batch_size" : batch_size,
            "num_threads" : workers,
            "device_id" : 0,
            "seed": 12,
        }

        pipe = training_pipe(data_dir=traindir, interpolation=interpolation, image_size=image_size,
                             output_layout=output_layout, automatic_augmentation=augmentation,
                             dali_device=dali_device, rank=rank, world_size=world_size,
                             prefetch_queue_depth=8,
                             **pipeline_kwargs)

        pipe.build()
        train_loader = DALIClassificationIterator(
            pipe, reader_name="Reader", fill_last_batch=False
        )

        return (
            DALIWrapper(train_loader, num_classes, one_hot, memory_format),
            int(pipe.epoch_size("Reader") / (world_size * batch_size)),
        )

    return gdtl


RESULT = {"len": [], "epochs": [], "images": {}}
for augmentation in ("autoaugment", "trivialaugment", "disabled"):
    loader, steps_per_epoch = get_dali_train_loader()(DATA, 32, 8, 4, False, augmentation=augmentation, workers=2)
    RESULT["len"].append(steps_per_epoch)
    RESULT["images"][augmentation] = []
    for epoch in range(2):
        steps = []
        for input, target in loader:
            steps.append((tuple(input.shape), str(input.dtype), target.tolist()))
            RESULT["images"][augmentation].append(input.numpy().copy())
        RESULT["epochs"].append(steps)
"""

# jxiong21029/archibox, archibox/ropend/dali_imagenet_loaders.py (commit
# 14578c4b4f9ffd339fa027ac7caa88e7a9f3257d): an ImageNet training pipeline with RandAugment (n and m
# given, fill_value=None: the border repeated), enable_conditionals and enable_checkpointing, as
# written. Changed: file_root is the fixture; the validation pipeline is left out; the loop (the
# repository's training code is elsewhere) runs shard 0 of 2 in batches of 4 with RandAugment n=2,
# m=9, checkpoints after the first batch, and resumes a new pipeline from the checkpoint.
ARCHIBOX_RAND_AUGMENT = """
import nvidia.dali as dali
from nvidia.dali.auto_aug import rand_augment


@dali.pipeline_def(enable_conditionals=True, enable_checkpointing=True, seed=0)
def imagenet_train_pipeline(num_shards, shard_id, randaug_n: int, randaug_m: int):
    images, labels = dali.fn.readers.file(
        file_root=DATA,
        random_shuffle=True,
        num_shards=num_shards,
        shard_id=shard_id,
    )
    images = dali.fn.decoders.image_random_crop(
        images,
        output_type=dali.types.RGB,
        random_aspect_ratio=[0.75, 1.33],
        random_area=[0.08, 1.0],
        device="mixed",
    )
    images = dali.fn.resize(images, resize_x=224, resize_y=224)
    images = rand_augment.rand_augment(
        images,
        n=randaug_n,
        m=randaug_m,
        fill_value=None,  # edge pad
    )
    images = dali.fn.crop_mirror_normalize(
        images,
        dtype=dali.types.FLOAT,
        output_layout="CHW",
        crop=(224, 224),
        mirror=dali.fn.random.coin_flip(),
        mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
        std=[0.229 * 255, 0.224 * 255, 0.225 * 255],
    )
    return images, labels.gpu()


def batches(pipe, count):
    out = []
    for _ in range(count):
        images, labels = pipe.run()
        out.append((images.as_cpu().as_array().copy(), labels.as_cpu().as_array().reshape(-1).tolist()))
    return out


pipe = imagenet_train_pipeline(2, 0, 2, 9, batch_size=4, num_threads=2, device_id=0)
pipe.build()
first = batches(pipe, 1)
checkpoint = pipe.checkpoint()
rest = batches(pipe, 2)
resumed = imagenet_train_pipeline(2, 0, 2, 9, batch_size=4, num_threads=2, device_id=0, checkpoint=checkpoint)
resumed.build()
RESULT = {"steps": first + rest, "resumed": batches(resumed, 2), "rest": rest}
"""

EVERY_LABEL = sorted(i // 6 for i in range(24))


def test_dalis_efficientnet_example_with_autoaugment_and_trivialaugment(jpeg_root):
    result = ported(EFFICIENTNET, jpeg_root)
    assert result["len"] == [3, 3, 3]
    for steps in result["epochs"]:
        assert [(s, d) for s, d, _ in steps] == [((8, 3, 32, 32), "torch.float32")] * 3
        assert sorted(label for *_, ls in steps for label in ls) == EVERY_LABEL
    plain = np.concatenate(result["images"]["disabled"])
    for policy in ("autoaugment", "trivialaugment"):
        augmented = np.concatenate(result["images"][policy])
        changed = np.abs(augmented - plain).reshape(len(plain), -1).max(1) > 1e-6
        assert 0 < changed.mean() < 1, f"{policy}: the same crops, some samples augmented and some not"
    pytest.importorskip("nvidia.dali")
    dali = run_script(as_dali_cpu(EFFICIENTNET, [('"device_id" : 0,', '"device_id" : None,')]), jpeg_root)
    assert structure(result) == structure(dali)


def test_archibox_rand_augment_pipeline_resumes_from_a_checkpoint(jpeg_root):
    result = ported(ARCHIBOX_RAND_AUGMENT, jpeg_root)
    assert [(images.shape, images.dtype) for images, _ in result["steps"]] == [((4, 3, 224, 224), np.float32)] * 3
    for (images, labels), (want_images, want_labels) in zip(result["resumed"], result["rest"], strict=True):
        assert labels == want_labels and np.array_equal(images, want_images), "the checkpoint's next batches"
    pytest.importorskip("nvidia.dali")
    dali = run_script(as_dali_cpu(ARCHIBOX_RAND_AUGMENT), jpeg_root)
    assert [(i.shape, i.dtype) for i, _ in dali["steps"]] == [(i.shape, i.dtype) for i, _ in result["steps"]]
    assert [labels for _, labels in dali["resumed"]] == [labels for _, labels in dali["rest"]]
