"""A public DALI training pipeline that branches on pipeline data (``enable_conditionals=True``),
run unchanged after renaming ``nvidia.dali`` to ``raypipe`` and compared with DALI 2.4's CPU build,
as the port tests of :mod:`tests.test_porting_scripts`. The branches are taken at random, so the
comparison is of steps, shapes, dtypes and labels (the values of branches on pipeline data are
compared with DALI's in :mod:`tests.test_conditionals`)."""

from __future__ import annotations

import pytest

from tests.script_harness import as_dali_cpu, ported, run_script, structure
from tests.test_porting_scripts import _SOLO_BUILDERS, EVERY_LABEL, SOLO_LEARN

# vturrisi/solo-learn, solo/data/dali_dataloader.py (commit 31cbf56e9a0b24164beaab1f8d371b133d155cd6):
# the current augmentations, which choose per sample with `if` on a coin flip
# (fn.random.coin_flip(probability=, dtype=types.DALIDataType.BOOL)) instead of the older Mux, inside
# the `__call__` of callable objects that a wrapper object calls in a loop, and solarisation from
# types.Constant(255, dtype=types.UINT8); PretrainPipelineBuilder.pipeline is a method decorated with
# @pipeline_def(enable_conditionals=True). Everything else is the older commit's script of
# tests/test_porting_scripts.py, with its changes; here the augmentations keep their probability
# (`self.prob`) and their `__call__` is the new commit's.
_CURRENT_CALLS = {
    "RandomGrayScaleConversion": """
    def __call__(self, images):
        do_op = fn.random.coin_flip(probability=self.prob, dtype=types.DALIDataType.BOOL)
        if do_op:
            out = self.grayscale(images)
            out = fn.cat(out, out, out, axis=2)
        else:
            out = images
        return out
""",
    "RandomColorJitter": """
    def __call__(self, images):
        do_op = fn.random.coin_flip(probability=self.prob, dtype=types.DALIDataType.BOOL)
        if do_op:
            out = self.color(
                images,
                brightness=self.brightness() if callable(self.brightness) else self.brightness,
                contrast=self.contrast() if callable(self.contrast) else self.contrast,
                saturation=self.saturation() if callable(self.saturation) else self.saturation,
                hue=self.hue() if callable(self.hue) else self.hue,
            )
        else:
            out = images
        return out
""",
    "RandomGaussianBlur": """
    def __call__(self, images):
        do_op = fn.random.coin_flip(probability=self.prob, dtype=types.DALIDataType.BOOL)
        if do_op:
            sigma = self.sigma() * 1.9 + 0.1
            out = self.gaussian_blur(images, sigma=sigma)
        else:
            out = images
        return out
""",
    "RandomSolarize": """
    def __call__(self, images):
        do_op = fn.random.coin_flip(probability=self.prob, dtype=types.DALIDataType.BOOL)
        if do_op:
            inverted_img = types.Constant(255, dtype=types.UINT8) - images
            mask = images >= self.threshold
            out = mask * inverted_img + (True ^ mask) * images
        else:
            out = images
        return out
""",
}


def _current(script: str) -> str:
    """The older commit's script with the current augmentations (each keeps its probability where it
    kept a Mux, and its ``__call__`` is the current one) and the conditional pipeline."""
    start, end = script.index("class Mux:"), script.index("class RandomGrayScaleConversion:")
    script = script[:start] + script[end:]
    script = script.replace("self.mux = Mux(prob=prob)", "self.prob = prob")
    for name, call in _CURRENT_CALLS.items():
        begin = script.index("    def __call__(self, images):", script.index(f"class {name}:"))
        stop = script.index("\n\n\nclass ", begin)
        script = script[:begin] + call.strip("\n") + script[stop:]
    pretrain = script.index("class PretrainPipelineBuilder:")
    decorator = script.index("    @pipeline_def\n", pretrain)
    return script[:decorator] + "    @pipeline_def(enable_conditionals=True)\n" + script[decorator + 18 :]


SOLO_LEARN_CURRENT = _current(SOLO_LEARN)


def test_solo_learns_conditional_augmentations_run_as_in_dali(jpeg_root):
    assert "Mux" not in SOLO_LEARN_CURRENT and SOLO_LEARN_CURRENT.count("if do_op:") == 4
    result = ported(SOLO_LEARN_CURRENT, jpeg_root)
    assert result["len"] == [3, 3, 3]
    pretrain = result["epochs"][:2]
    for steps in pretrain:
        assert [(s, d) for s, d, _ in steps] == [([(8, 3, 32, 32)] * 2, ["torch.float32"] * 2)] * 3
        assert sorted(label for *_, ls in steps for label in ls) == EVERY_LABEL
    pytest.importorskip("nvidia.dali")
    edits = [(f"device_id={builder}.device_id", "device_id=None") for builder in _SOLO_BUILDERS]
    dali = run_script(as_dali_cpu(SOLO_LEARN_CURRENT, edits), jpeg_root)
    assert structure(result) == structure(dali)
    assert result["epochs"][4:] == dali["epochs"][4:], "validation: the same labels in the same order"


# NVIDIA/DALI, docs/examples/general/conditionals.ipynb (commit 00afcee27a3eee6665181ffb5b9ebbdb04c0f2d5):
# the tutorial's first pipeline, which rotates a quarter of the images (an `if` on
# fn.random.coin_flip(probability=0.25, dtype=DALIDataType.BOOL), fn.rotate with fill_value=0 on
# images decoded on device "mixed") and resizes every image to 400x400. Changed: file_root is the
# fixture; the display cells are left out; the loop runs 3 batches and records each sample's corner.
ROTATE_TUTORIAL = """
from nvidia.dali import pipeline_def
from nvidia.dali.types import DALIDataType
from nvidia.dali import fn
import numpy as np


@pipeline_def(enable_conditionals=True, batch_size=4, num_threads=4, device_id=0, seed=42)
def rotate_pipe():
    jpegs, _ = fn.readers.file(device="cpu", file_root=DATA)
    images = fn.decoders.image(jpegs, device="mixed")
    do_rotate = fn.random.coin_flip(probability=0.25, dtype=DALIDataType.BOOL)
    angle = fn.random.uniform(range=(10, 30))

    if do_rotate:
        result = fn.rotate(images, angle=angle, fill_value=0)
    else:
        result = images

    resized = fn.resize(result, resize_x=400, resize_y=400)
    return resized


pipe = rotate_pipe()
pipe.build()
RESULT = {"shapes": [], "corners": []}
for _ in range(6):
    (out,) = pipe.run()
    out = out.as_cpu()
    for i in range(len(out)):
        image = np.array(out.at(i))
        RESULT["shapes"].append(image.shape)
        RESULT["corners"].append(int(image[:3, :3].max()))
"""


def test_dalis_conditionals_tutorial_rotates_a_quarter_of_the_images(jpeg_root):
    result = ported(ROTATE_TUTORIAL, jpeg_root)
    assert result["shapes"] == [(400, 400, 3)] * 24
    rotated = sum(corner == 0 for corner in result["corners"])
    assert 0 < rotated < 24, "the rotated images have a black corner (fill_value=0), the others not"
    pytest.importorskip("nvidia.dali")
    dali = run_script(as_dali_cpu(ROTATE_TUTORIAL), jpeg_root)
    assert dali["shapes"] == result["shapes"]
