"""Sequences of frames (``FHWC``) through the image operators a video pipeline uses: ``resize``,
``crop_mirror_normalize``, ``flip``, ``color_twist``, ``hsv``, ``brightness_contrast``, ``rotate``
and ``random_resized_crop`` treat each frame as an image with the sample's arguments, on ``cpu``
and ``gpu``. Checked against the same operator run on each frame as an HWC image (no DALI
needed) and against DALI 2.4's CPU build."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, types
from raypipe.backend import gpu_available
from raypipe.errors import ArgumentError
from tests.video_data import frame_image

#: two sequences of different lengths and sizes, and per-sample argument values for each
SEQUENCES = [
    np.stack([frame_image(k, 36, 50) for k in range(4)]),
    np.stack([frame_image(k + 7, 30, 44) for k in range(3)]),
]
MIRROR = [np.int32(1), np.int32(0)]
POS = [np.float32(0.2), np.float32(0.9)]
ANGLE = [np.float32(17.0), np.float32(-90.0)]

#: crop_mirror_normalize cases: their output layout, the layout of one frame as an image, their arguments
CMN = {
    "cmn_fchw": (
        "FCHW",
        "CHW",
        lambda t, a: dict(crop=(20, 24), crop_pos_x=a["pos"], mean=[10.0, 20, 30], std=[2.0, 3, 4], mirror=a["mirror"]),
    ),
    "cmn_cfhw": ("CFHW", "CHW", lambda t, a: dict(crop=(16, 16), mirror=a["mirror"])),
    "cmn_fhwc_pad_u8": (
        "FHWC",
        "HWC",
        lambda t, a: dict(pad_output=True, dtype=t.UINT8, crop_pos_y=a["pos"], crop=(12, 40)),
    ),
}


def _cmn(layout: str, args):
    return lambda f, t, x, a: f.crop_mirror_normalize(x, output_layout=layout, **args(t, a))


CASES = {
    "resize": lambda f, t, x, a: f.resize(x, resize_x=20, resize_y=14),
    "resize_shorter_nn": lambda f, t, x, a: f.resize(x, resize_shorter=17, interp_type=t.INTERP_NN),
    "resize_float": lambda f, t, x, a: f.resize(f.cast(x, dtype=t.FLOAT), size=(25, 33)),
    **{name: _cmn(sequence, args) for name, (sequence, _, args) in CMN.items()},
    "flip": lambda f, t, x, a: f.flip(x, horizontal=a["mirror"], vertical=1),
    "color_twist": lambda f, t, x, a: f.color_twist(x, brightness=a["pos"], contrast=1.3, saturation=0.7, hue=25.0),
    "hsv": lambda f, t, x, a: f.hsv(x, hue=40.0, saturation=a["pos"], value=1.1),
    "brightness_contrast": lambda f, t, x, a: f.brightness_contrast(x, brightness=a["pos"], contrast=1.4),
    "rotate": lambda f, t, x, a: f.rotate(x, angle=a["angle"]),
}


def _pipeline(lib, case: str, device: str, device_id: int | None = None):
    @lib.pipeline_def(batch_size=2, num_threads=1, device_id=device_id, seed=1)
    def pipe():
        x = lib.fn.external_source(source=lambda: SEQUENCES, layout="FHWC", batch=True)
        args = {
            "mirror": lib.fn.external_source(source=lambda: MIRROR, batch=True),
            "pos": lib.fn.external_source(source=lambda: POS, batch=True),
            "angle": lib.fn.external_source(source=lambda: ANGLE, batch=True),
        }
        return CASES[case](lib.fn, lib.types, x.gpu() if device == "gpu" else x, args)

    p = pipe()
    p.build()
    (out,) = p.run()
    layout = out.layout()
    out = out.as_cpu() if hasattr(out, "as_cpu") else out
    return [np.asarray(out[i]) for i in range(2)], layout


#: each case's operator on one frame as an HWC image (a sequence layout becomes the frame's)
IMAGE_CASES = {**CASES, **{name: _cmn(image, args) for name, (_, image, args) in CMN.items()}}


def _frame_by_frame(case: str) -> list[np.ndarray]:
    """The case's operator on each frame as an HWC image, stacked (and laid out as the case asks)."""
    frames = [frame for seq in SEQUENCES for frame in seq]
    owner = [i for i, seq in enumerate(SEQUENCES) for _ in seq]

    @rp.pipeline_def(batch_size=len(frames), num_threads=1, device_id=None, seed=1)
    def pipe():
        x = fn.external_source(source=lambda: frames, layout="HWC", batch=True)
        args = {
            "mirror": fn.external_source(source=lambda: [MIRROR[i] for i in owner], batch=True),
            "pos": fn.external_source(source=lambda: [POS[i] for i in owner], batch=True),
            "angle": fn.external_source(source=lambda: [ANGLE[i] for i in owner], batch=True),
        }
        return IMAGE_CASES[case](fn, types, x, args)

    p = pipe()
    p.build()
    (out,) = p.run()
    per_frame = [np.asarray(out[i]) for i in range(len(frames))]
    stacked = [np.stack([o for o, k in zip(per_frame, owner) if k == i]) for i in range(len(SEQUENCES))]
    return [s.transpose(1, 0, 2, 3) if case == "cmn_cfhw" else s for s in stacked]


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_frame_as_an_image(case, device):
    ours, layout = _pipeline(rp, case, device)
    assert layout == {"cmn_fchw": "FCHW", "cmn_cfhw": "CFHW"}.get(case, "FHWC")
    for a, b in zip(ours, _frame_by_frame(case), strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-4 if a.dtype.kind == "f" else 1)


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("case", sorted(CASES))
def test_on_a_gpu_sequences_give_the_host_results(case):
    """On cupy (the GPU stage, sample by sample): the host's frames."""
    host, layout = _pipeline(rp, case, "cpu")
    device, device_layout = _pipeline(rp, case, "gpu", device_id=0)
    assert layout == device_layout
    for a, b in zip(host, device, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-3 if a.dtype.kind == "f" else 2)


@pytest.mark.parametrize("case", sorted(CASES))
def test_equals_dali(case):
    dali = pytest.importorskip("nvidia.dali")
    theirs, their_layout = _pipeline(dali, case, "cpu")
    ours, layout = _pipeline(rp, case, "cpu")
    assert layout == their_layout
    for a, b in zip(theirs, ours, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype
        if case.endswith("_nn"):  # DALI samples other source pixels for nearest neighbour (images alike)
            continue
        if case.startswith("resize"):  # Pillow's filters here (tests/operators/test_resize.py), DALI's there
            assert np.abs(a.astype(np.float64) - b).mean() < 2, "the same frames, resized alike"
        else:  # colour twists round within one level of DALI's, as for images
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1 if case in ("color_twist", "hsv", "rotate") else 1e-5)


def _cmn(inputs, layout: str, **kwargs) -> None:
    @rp.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        return fn.crop_mirror_normalize(
            fn.external_source(source=lambda: inputs, layout=layout, batch=True), crop=(10, 10), **kwargs
        )

    pipe().build()


def test_layouts_refused_as_dali_refuses_them():
    """A sequence needs a sequence output layout (DALI refuses its default CHW for one), an image
    an image one."""
    with pytest.raises(ArgumentError, match="the input is a sequence"):
        _cmn(SEQUENCES, "FHWC")
    with pytest.raises(ArgumentError, match="needs FHWC sequences"):
        _cmn([s[0] for s in SEQUENCES], "HWC", output_layout="FCHW")
    with pytest.raises(ArgumentError, match="sequences must be FHWC"):

        @rp.pipeline_def(batch_size=2, num_threads=1, device_id=None)
        def pipe():
            x = fn.external_source(source=lambda: [s.transpose(0, 3, 1, 2) for s in SEQUENCES], layout="FCHW")
            return fn.resize(x, resize_x=10)

        pipe().build()


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_random_resized_crop_takes_one_window_per_sequence(device):
    """Frames ``k`` of a float sequence are its first frame plus ``k``: cropped through one window
    and resized linearly, they stay the first one's output plus ``k``."""
    base = np.random.default_rng(5).uniform(0, 200, (30, 40, 3)).astype(np.float32)
    sequences = [np.stack([base + k for k in range(4)]), np.stack([base[:24] + k for k in range(2)])]

    @rp.pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=3)
    def pipe():
        x = fn.external_source(source=lambda: sequences, layout="FHWC", batch=True)
        return fn.random_resized_crop(x.gpu() if device == "gpu" else x, size=(12, 16))

    p = pipe()
    p.build()
    (out,) = p.run()
    out = out.as_cpu() if hasattr(out, "as_cpu") else out
    for i, frames in enumerate(sequences):
        got = np.asarray(out[i])
        assert got.shape == (len(frames), 12, 16, 3) and got.dtype == np.float32
        for k in range(len(frames)):
            np.testing.assert_allclose(got[k], got[0] + k, atol=1e-3)


@pytest.mark.skipif(gpu_available(), reason="runs the GPU stage in the CUDA simulator, on a machine without a GPU")
@pytest.mark.parametrize("case", ["resize", "cmn_fchw", "cmn_fhwc_pad_u8", "flip", "color_twist", "hsv"])
def test_the_kernels_take_every_frame_of_the_batch_at_once(monkeypatch, case):
    """In the GPU stage (``device_id=0``, kernels in numba's CUDA simulator) the frames of all the
    batch's sequences go through the image kernels together: the host's frames, within the
    kernels' documented tolerances."""
    monkeypatch.setenv("RAYPIPE_DEVICE", "simulator")
    host, layout = _pipeline(rp, case, "cpu")
    device, device_layout = _pipeline(rp, case, "gpu", device_id=0)
    assert layout == device_layout
    for a, b in zip(host, device, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-3 if a.dtype.kind == "f" else 2)
