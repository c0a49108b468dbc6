"""nnU-Net's DALI loader (a public 3-D segmentation training pipeline) run unchanged after renaming
``nvidia.dali`` to ``raypipe``, and its CPU-only variant under DALI 2.4 where installed: the same
steps, shapes, dtypes and layouts, and the same values where the pipeline is deterministic (the
evaluation and benchmark pipelines). The volumes are ``.npy`` files the test writes."""

from __future__ import annotations

import numpy as np
import pytest

from tests.script_harness import as_dali_cpu, ported, run_script

# NVIDIA/DeepLearningExamples, PyTorch/Segmentation/nnUNet/data_loading/dali_loader.py (commit
# 0053e6de191b322595646735e15ce3ad88ce47bf): random_augmentation, GenericPipeline, TrainPipeline,
# EvalPipeline and BenchmarkPipeline kept operator for operator, argument for argument.
# Changed: the DALIGenericIterator wrapper, TestPipeline / TritonPipeline and
# fetch_dali_loader's command-line options are left out: the driver builds each pipeline as
# fetch_dali_loader does (device_id = rank 0, seed, one shard) and runs two epochs of pipe.run()
# over the reader's epoch size.
NNUNET = """
import numpy as np
import nvidia.dali.fn as fn
import nvidia.dali.math as math
import nvidia.dali.ops as ops
import nvidia.dali.types as types
from nvidia.dali.pipeline import Pipeline


def random_augmentation(probability, augmented, original):
    condition = fn.cast(fn.random.coin_flip(probability=probability), dtype=types.DALIDataType.BOOL)
    neg_condition = condition ^ True
    return condition * augmented + neg_condition * original


class GenericPipeline(Pipeline):
    def __init__(self, batch_size, num_threads, device_id, **kwargs):
        super().__init__(batch_size, num_threads, device_id)
        self.kwargs = kwargs
        self.dim = kwargs["dim"]
        self.device = device_id
        self.patch_size = kwargs["patch_size"]
        self.load_to_gpu = kwargs["load_to_gpu"]
        self.input_x = self.get_reader(kwargs["imgs"])
        self.input_y = self.get_reader(kwargs["lbls"]) if kwargs["lbls"] is not None else None

    def get_reader(self, data):
        return ops.readers.Numpy(
            files=data,
            device="cpu",
            read_ahead=True,
            dont_use_mmap=True,
            pad_last_batch=True,
            shard_id=self.device,
            seed=self.kwargs["seed"],
            num_shards=self.kwargs["gpus"],
            shuffle_after_epoch=self.kwargs["shuffle"],
        )

    def load_data(self):
        img = self.input_x(name="ReaderX")
        if self.load_to_gpu:
            img = img.gpu()
        img = fn.reshape(img, layout="CDHW")
        if self.input_y is not None:
            lbl = self.input_y(name="ReaderY")
            if self.load_to_gpu:
                lbl = lbl.gpu()
            lbl = fn.reshape(lbl, layout="CDHW")
            return img, lbl
        return img

    def crop(self, data):
        return fn.crop(data, crop=self.patch_size, out_of_bounds_policy="pad")

    def crop_fn(self, img, lbl):
        img, lbl = self.crop(img), self.crop(lbl)
        return img, lbl

    def transpose_fn(self, img, lbl):
        img, lbl = fn.transpose(img, perm=(1, 0, 2, 3)), fn.transpose(lbl, perm=(1, 0, 2, 3))
        return img, lbl


class TrainPipeline(GenericPipeline):
    def __init__(self, batch_size, num_threads, device_id, **kwargs):
        super().__init__(batch_size, num_threads, device_id, **kwargs)
        self.oversampling = kwargs["oversampling"]
        self.crop_shape = types.Constant(np.array(self.patch_size), dtype=types.INT64)
        self.crop_shape_float = types.Constant(np.array(self.patch_size), dtype=types.FLOAT)

    @staticmethod
    def slice_fn(img):
        return fn.slice(img, 1, 3, axes=[0])

    def resize(self, data, interp_type):
        return fn.resize(data, interp_type=interp_type, size=self.crop_shape_float)

    def biased_crop_fn(self, img, label):
        roi_start, roi_end = fn.segmentation.random_object_bbox(
            label,
            device="cpu",
            background=0,
            format="start_end",
            cache_objects=True,
            foreground_prob=self.oversampling,
        )
        anchor = fn.roi_random_crop(label, roi_start=roi_start, roi_end=roi_end, crop_shape=[1, *self.patch_size])
        anchor = fn.slice(anchor, 1, 3, axes=[0])  # drop channels from anchor
        img, label = fn.slice(
            [img, label], anchor, self.crop_shape, axis_names="DHW", out_of_bounds_policy="pad", device="cpu"
        )
        return img.gpu(), label.gpu()

    def zoom_fn(self, img, lbl):
        scale = random_augmentation(0.15, fn.random.uniform(range=(0.7, 1.0)), 1.0)
        d, h, w = [scale * x for x in self.patch_size]
        if self.dim == 2:
            d = self.patch_size[0]
        img, lbl = fn.crop(img, crop_h=h, crop_w=w, crop_d=d), fn.crop(lbl, crop_h=h, crop_w=w, crop_d=d)
        img, lbl = self.resize(img, types.DALIInterpType.INTERP_CUBIC), self.resize(lbl, types.DALIInterpType.INTERP_NN)
        return img, lbl

    def noise_fn(self, img):
        img_noised = img + fn.random.normal(img, stddev=fn.random.uniform(range=(0.0, 0.33)))
        return random_augmentation(0.15, img_noised, img)

    def blur_fn(self, img):
        img_blurred = fn.gaussian_blur(img, sigma=fn.random.uniform(range=(0.5, 1.5)))
        return random_augmentation(0.15, img_blurred, img)

    def brightness_fn(self, img):
        brightness_scale = random_augmentation(0.15, fn.random.uniform(range=(0.7, 1.3)), 1.0)
        return img * brightness_scale

    def contrast_fn(self, img):
        scale = random_augmentation(0.15, fn.random.uniform(range=(0.65, 1.5)), 1.0)
        return math.clamp(img * scale, fn.reductions.min(img), fn.reductions.max(img))

    def flips_fn(self, img, lbl):
        kwargs = {
            "horizontal": fn.random.coin_flip(probability=0.5),
            "vertical": fn.random.coin_flip(probability=0.5),
        }
        if self.dim == 3:
            kwargs.update({"depthwise": fn.random.coin_flip(probability=0.5)})
        return fn.flip(img, **kwargs), fn.flip(lbl, **kwargs)

    def define_graph(self):
        img, lbl = self.load_data()
        img, lbl = self.biased_crop_fn(img, lbl)
        img, lbl = self.zoom_fn(img, lbl)
        img, lbl = self.flips_fn(img, lbl)
        img = self.noise_fn(img)
        img = self.blur_fn(img)
        img = self.brightness_fn(img)
        img = self.contrast_fn(img)
        if self.dim == 2:
            img, lbl = self.transpose_fn(img, lbl)
        return img, lbl


class EvalPipeline(GenericPipeline):
    def __init__(self, batch_size, num_threads, device_id, **kwargs):
        super().__init__(batch_size, num_threads, device_id, **kwargs)
        self.invert_resampled_y = kwargs["invert_resampled_y"]
        if self.invert_resampled_y:
            self.input_meta = self.get_reader(kwargs["meta"])
            self.input_orig_y = self.get_reader(kwargs["orig_lbl"])

    def define_graph(self):
        img, lbl = self.load_data()
        if self.invert_resampled_y:
            meta = self.input_meta(name="ReaderM")
            orig_lbl = self.input_orig_y(name="ReaderO")
            return img, lbl, meta, orig_lbl
        return img, lbl


class BenchmarkPipeline(GenericPipeline):
    def __init__(self, batch_size, num_threads, device_id, **kwargs):
        super().__init__(batch_size, num_threads, device_id, **kwargs)

    def define_graph(self):
        img, lbl = self.load_data()
        img, lbl = self.crop_fn(img, lbl)
        if self.dim == 2:
            img, lbl = self.transpose_fn(img, lbl)
        return img, lbl


PIPELINES = {"train": TrainPipeline, "eval": EvalPipeline, "benchmark": BenchmarkPipeline}
RESULT = {}
for mode in PIPELINES:
    shuffle = True if mode == "train" else False
    load_to_gpu = True if mode in ["eval", "test", "benchmark"] else False
    pipe_kwargs = {"imgs": DATA["imgs"], "lbls": DATA["lbls"], "load_to_gpu": load_to_gpu, "shuffle": shuffle,
                   "dim": 3, "patch_size": [8, 12, 12], "seed": 12, "gpus": 1, "oversampling": 0.4,
                   "invert_resampled_y": False}
    rank = 0
    pipe = PIPELINES[mode](2, 2, rank, **pipe_kwargs)
    pipe.build()
    steps = []
    for epoch in range(2):
        for _ in range(pipe.epoch_size("ReaderX") // 2):
            outs = pipe.run()
            steps.append([(out.layout(), [np.array(out.as_cpu().at(i)) for i in range(len(out))]) for out in outs])
    RESULT[mode] = steps
"""


@pytest.fixture
def nnunet_data(tmp_path) -> dict[str, list[str]]:
    """Six preprocessed cases as nnU-Net writes them: a float32 CDHW image (one channel, normalised)
    and a uint8 CDHW label with two classes, volumes of a few sizes."""
    rng = np.random.default_rng(5)
    imgs, lbls = [], []
    for case, shape in enumerate([(10, 14, 16), (9, 12, 13), (12, 16, 14), (8, 13, 12), (11, 12, 15), (10, 13, 18)]):
        image = np.clip(rng.normal(size=(1, *shape)), -4, 4).astype(np.float32)
        label = np.zeros((1, *shape), np.uint8)
        d, h, w = (s // 3 for s in shape)
        label[0, d : 2 * d, h : 2 * h, w : 2 * w] = 1
        label[0, :2, :3, :3] = 2
        for path, array, kind in (
            (tmp_path / f"case{case}_x.npy", image, imgs),
            (tmp_path / f"case{case}_y.npy", label, lbls),
        ):
            np.save(path, array)
            kind.append(str(path))
    return {"imgs": imgs, "lbls": lbls}


def _structure(result: dict) -> dict:
    return {
        mode: [[(layout, [(a.shape, a.dtype.name) for a in arrays]) for layout, arrays in step] for step in steps]
        for mode, steps in result.items()
    }


# The largest |value| the training augmentations can give the test data (|x| <= 4): cubic zoom
# (kernel weights summing to at most 1.25 in absolute value, per axis of 3), noise of stddev at
# most 0.33 times a normal value from float32 uniforms (at most 5.8), brightness at most 1.3;
# blur and the clamped contrast stay within their input's range.
TRAIN_BOUND = 1.3 * (4 * 1.25**3 + 0.33 * 5.8)


def test_nnunet_dali_loader(nnunet_data):
    result = ported(NNUNET, nnunet_data)
    assert len(result["train"]) == 6
    for step in result["train"]:
        (img_layout, imgs), (lbl_layout, lbls) = step
        assert img_layout == lbl_layout == "CDHW"
        for img, lbl in zip(imgs, lbls):
            assert img.shape == lbl.shape == (1, 8, 12, 12)
            assert img.dtype == np.float32 and lbl.dtype == np.uint8
            assert set(np.unique(lbl)) <= {0, 1, 2}
            assert np.isfinite(img).all() and np.abs(img).max() <= TRAIN_BOUND
    for step in result["benchmark"]:
        assert [layout for layout, _ in step] == ["CDHW", "CDHW"]
        assert [a.shape for _, arrays in step for a in arrays] == [(1, 8, 12, 12)] * 4
    pytest.importorskip("nvidia.dali")
    dali = run_script(
        as_dali_cpu(NNUNET, [("rank = 0", "rank = None"), ("shard_id=self.device", "shard_id=0")]), nnunet_data
    )
    assert _structure(result) == _structure(dali)
    for mode in ("eval", "benchmark"):  # deterministic: the same values
        for ours, theirs in zip(result[mode], dali[mode]):
            for (_, a), (_, b) in zip(ours, theirs):
                for x, y in zip(a, b):
                    np.testing.assert_array_equal(x, y)
