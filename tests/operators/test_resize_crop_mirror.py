"""``resize_crop_mirror`` and ``fast_resize_crop_mirror`` against DALI 2.4's CPU operators on real
JPEGs: shapes, dtypes and layouts exactly, nearest exactly, linear and cubic within the bounds
``resize`` keeps to DALI's (:mod:`tests.operators.test_resample`); per-sample positions and mirror
masks; the ``gpu`` device gives the host's result; bad arguments raise errors naming the operator."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, types
from raypipe.backend import gpu_available
from tests.operators.test_resample import DALI_MAX_DIFF, DALI_MEAN_DIFF

# (operator, arguments): enum arguments by name, resolved against each library's ``types``. Where a
# size comes from a scale, raypipe maps the whole image onto the rounded size, as DALI's
# ``subpixel_scale=False`` (DALI's default shifts the sampled box by the rounding): DALI runs with it.
CASES = [
    ("resize_crop_mirror", {"resize_x": 224, "resize_y": 160, "crop": (100, 120)}),
    ("resize_crop_mirror", {"resize_shorter": 200, "crop": (150, 150), "crop_pos_x": 0.1, "crop_pos_y": 0.9}),
    ("resize_crop_mirror", {"resize_x": 120, "crop_h": 80, "crop_w": 100, "mirror": 3, "rounding": "truncate"}),
    ("resize_crop_mirror", {"size": [300, 400], "crop": (256, 250), "mirror": 2, "interp_type": "INTERP_NN"}),
    ("resize_crop_mirror", {"resize_x": 600, "resize_y": 500, "crop": (300, 310), "interp_type": "INTERP_CUBIC"}),
    ("resize_crop_mirror", {"resize_x": 100, "resize_y": 80, "crop": (64, 64), "antialias": False, "dtype": "FLOAT"}),
    ("resize_crop_mirror", {"resize_x": 150, "resize_y": 150, "mode": "not_smaller", "crop": (150, 150), "mirror": 1}),
    ("resize_crop_mirror", {"resize_longer": 90, "mirror": 1, "max_size": 80}),
    # windows past the resized image (not past its right edge, where DALI reads the next row)
    (
        "resize_crop_mirror",
        {"resize_x": 60, "resize_y": 50, "crop": (80, 90), "crop_pos_x": 1.0, "interp_type": "INTERP_NN"},
    ),
    ("resize_crop_mirror", {"resize_x": 60, "resize_y": 50, "crop": (70, 64), "crop_pos_x": 1.0, "mirror": 1}),
    # a negative size flips the resized image before the crop, as in DALI
    ("resize_crop_mirror", {"resize_x": -120, "resize_y": 90, "crop": (64, 70), "crop_pos_x": 0.2, "mirror": 1}),
    ("resize_crop_mirror", {"size": [-90, -120], "crop": (64, 70), "crop_pos_y": 0.1, "interp_type": "INTERP_NN"}),
    # a region of interest is what is resized (given end first, it flips), then the window is cut from it
    (
        "resize_crop_mirror",
        {"resize_x": 64, "resize_y": 48, "crop": (20, 30), "roi_start": [10, 20], "roi_end": [60, 90]},
    ),
    (
        "resize_crop_mirror",
        {
            "resize_x": 64,
            "resize_y": 48,
            "crop": (20, 30),
            "roi_start": [0.1, 0.2],
            "roi_end": [0.6, 0.9],
            "roi_relative": True,
            "crop_pos_x": 0.1,
        },
    ),  # fmt: skip
    ("resize_crop_mirror", {"resize_x": 64, "resize_y": 48, "roi_start": [10, 90], "roi_end": [60, 20], "mirror": 1}),
    ("fast_resize_crop_mirror", {"resize_x": 224, "resize_y": 224, "crop": (200, 180), "mirror": 1}),
    ("fast_resize_crop_mirror", {"resize_shorter": 128, "crop": (112, 112), "crop_pos_x": 0.3}),
    ("fast_resize_crop_mirror", {"resize_x": 90, "resize_y": 70, "crop": (48, 48), "interp_type": "INTERP_NN"}),
]


def _resolved(args: dict, lib_types) -> dict:
    """``args`` with the ``interp_type``/``dtype`` names as ``lib_types`` members."""
    names = ("interp_type", "dtype")
    return {k: getattr(lib_types, v) if k in names else v for k, v in args.items()}


def _check_close(mine, theirs, exact: bool) -> None:
    for (my_samples, my_layout), (their_samples, their_layout) in zip(mine, theirs, strict=True):
        assert my_layout == their_layout
        for my, their in zip(my_samples, their_samples, strict=True):
            assert my.shape == their.shape and my.dtype == their.dtype
            diff = np.abs(my.astype(np.float64) - their.astype(np.float64))
            if exact:
                assert diff.max() == 0
            else:
                assert diff.max() <= DALI_MAX_DIFF and diff.mean() < DALI_MEAN_DIFF, (diff.max(), diff.mean())


@pytest.mark.parametrize(("name", "args"), CASES)
def test_matches_dali(ours, dali, images, name, args):
    theirs = dali(images, lambda x, f, t: getattr(f, name)(x, subpixel_scale=False, **_resolved(args, t)), "HWC")
    mine = ours(images, lambda x: getattr(fn, name)(x, **_resolved(args, types)), "HWC")
    _check_close(mine, theirs, exact=args.get("interp_type") == "INTERP_NN")


def test_a_negative_size_is_the_mirrored_window_mirrored(ours, images):
    """Flipping the resized image, then cropping at ``crop_pos_x`` is cropping the unflipped one
    at ``1 - crop_pos_x`` and mirroring (exact where the window's offset needs no rounding)."""
    window = {"resize_y": 90, "crop": (64, 70)}
    flipped = ours(images, lambda x: fn.resize_crop_mirror(x, resize_x=-120, crop_pos_x=0.2, **window))
    mirrored = ours(images, lambda x: fn.resize_crop_mirror(x, resize_x=120, crop_pos_x=0.8, mirror=1, **window))
    _check_close(flipped, mirrored, exact=True)
    whole = ours(images, lambda x: fn.resize_crop_mirror(x, resize_x=120, resize_y=-90, mirror=2))
    _check_close(whole, ours(images, lambda x: fn.resize(x, resize_x=120, resize_y=90)), exact=True)


@pytest.mark.parametrize("flip", [False, True])
def test_a_region_is_resized_then_cropped(ours, images, flip):
    """The window of the resized region is the window of ``resize``'s result for that region (within
    ``resize``'s own bound: the fused path samples the window's box only); a region given end first
    is the same region mirrored."""
    start, end = ([30, 140], [130, 40]) if flip else ([30, 40], [130, 140])
    region = {"resize_x": 120, "resize_y": 90, "roi_start": start, "roi_end": end}
    fused = ours(images, lambda x: fn.resize_crop_mirror(x, crop=(50, 60), crop_pos_x=0.3, **region), "HWC")
    apart = ours(images, lambda x: fn.crop(fn.resize(x, **region), crop=(50, 60), crop_pos_x=0.3), "HWC")
    _check_close(fused, apart, exact=False)


@pytest.mark.parametrize("interp", [None, "INTERP_NN"])
def test_per_sample_positions_and_mirror_match_dali(ours, dali, images, interp):
    n = len(images)
    xs = [np.float32(v) for v in np.linspace(0.0, 1.0, n)]
    ys = [np.float32(v) for v in np.linspace(1.0, 0.2, n)]
    mirrors = [np.int32(m % 4) for m in range(n)]
    args = {"resize_x": 200, "resize_y": 180, "crop": (120, 130)} | ({"interp_type": interp} if interp else {})

    def build(f, t, x, px, py, m):
        return f.resize_crop_mirror(x, crop_pos_x=px, crop_pos_y=py, mirror=m, **_resolved(args, t))

    theirs = dali(images, lambda x, f, t, *extra: build(f, t, x, *extra), "HWC", per_sample=[xs, ys, mirrors])
    mine = ours(images, lambda x, *extra: build(fn, types, x, *extra), "HWC", per_sample=[xs, ys, mirrors])
    _check_close(mine, theirs, exact=interp is not None)


@pytest.mark.parametrize(("name", "args"), CASES[:4] + CASES[8:14])
def test_gpu_gives_the_cpu_result(ours, images, name, args):
    """The GPU stage's float32 matrix products against the host's Pillow resize: within ``resize``'s
    bound (two grey levels, rare); nearest and a host-only run exactly."""
    cpu = ours(images, lambda x: getattr(fn, name)(x, **_resolved(args, types)), "HWC")
    gpu = ours(images, lambda x: getattr(fn, name)(x.gpu(), **_resolved(args, types)), "HWC")
    exact = args.get("interp_type") == "INTERP_NN" or not gpu_available()
    for (cpu_samples, cpu_layout), (gpu_samples, gpu_layout) in zip(cpu, gpu, strict=True):
        assert cpu_layout == gpu_layout == "HWC"
        for a, b in zip(cpu_samples, gpu_samples, strict=True):
            assert a.shape == b.shape and a.dtype == b.dtype
            diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
            assert diff.max() <= (0 if exact else 2) and diff.mean() < 0.1


@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        ("resize_crop_mirror", {"crop": (10, 10)}, "resize_crop_mirror: give resize_x and/or resize_y"),
        ("resize_crop_mirror", {"resize_longer": -3}, "resize_crop_mirror: resize_longer must be a positive number"),
        ("resize_crop_mirror", {"resize_x": 9, "mirror": 4}, "resize_crop_mirror: mirror must be 0, 1"),
        ("resize_crop_mirror", {"resize_x": 9, "crop": (1, 2, 3)}, "resize_crop_mirror: crop must be a pair"),
        ("resize_crop_mirror", {"resize_x": 9, "crop": 4}, "resize_crop_mirror: crop must be a pair"),
        ("resize_crop_mirror", {"resize_x": 9, "crop_h": 4}, "resize_crop_mirror: give crop=.h, w., or both"),
        ("resize_crop_mirror", {"resize_x": 9, "crop": (4, 4), "crop_pos_x": 2}, "resize_crop_mirror: crop_pos_x must"),
        ("resize_crop_mirror", {"resize_x": 9, "rounding": "floor"}, "resize_crop_mirror: rounding must be one of"),
        ("resize_crop_mirror", {"resize_x": 9, "save_attrs": True}, "resize_crop_mirror: unexpected argument"),
        ("resize_crop_mirror", {"size": [2, 3, 4]}, "resize_crop_mirror: volumes"),
        ("fast_resize_crop_mirror", {"resize_x": 9, "interp_type": "gaussian"}, "fast_resize_crop_mirror: interp"),
        ("fast_resize_crop_mirror", {"resize_x": 9, "mode": "fit"}, "fast_resize_crop_mirror: mode must be"),
    ],
)
def test_bad_arguments_name_the_operator(ours, name, args, message):
    with pytest.raises(rp.ArgumentError, match=message):
        ours([np.zeros((4, 4, 3), np.uint8)], lambda x: getattr(fn, name)(x, **args), "HWC")


def test_non_image_input_names_the_operator(ours):
    with pytest.raises(rp.SampleError, match=r"resize_crop_mirror: expects a non-empty HWC image, got shape \(5,\)"):
        ours([np.zeros(5, np.uint8)], lambda x: fn.resize_crop_mirror(x, resize_x=4, crop=(2, 2)))
