"""Each augmentation of :mod:`raypipe.auto_aug.augmentations` against DALI 2.4's (CPU build), one at
a time with a fixed magnitude: both apply it to every sample through ``apply_rand_augment`` with
``n=1`` over a suite of that one augmentation (its sign fixed), as a DALI script would."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageFilter

import raypipe as rp
from raypipe import fn
from raypipe.auto_aug import augmentations as ours
from raypipe.auto_aug import rand_augment

RNG = np.random.default_rng(0)
NOISE = [RNG.integers(0, 256, (30 + 3 * i, 40 + i, 3), dtype=np.uint8) for i in range(4)]
SMOOTH = [
    np.asarray(Image.fromarray(im).resize((48, 36), Image.BILINEAR).filter(ImageFilter.GaussianBlur(2)))
    for im in NOISE[:2]
]
IMAGES = NOISE + SMOOTH
FLAT = [np.full((5, 7, 3), 77, np.uint8)]  # one value per channel: auto_contrast leaves it

GEOMETRIC = ["shear_x", "shear_y", "translate_x_no_shape", "translate_y_no_shape", "translate_x", "translate_y"]
COLOUR = ["brightness", "contrast", "color", "sharpness", "posterize", "solarize", "solarize_add"]
SIGNED = ["brightness", "contrast", "color", "sharpness"]  # the others' magnitudes are never negated
WITHOUT_MAGNITUDE = ["invert", "equalize", "auto_contrast", "identity"]


def _variant(module, name: str, negated: bool):
    """The augmentation ``name`` with its sign fixed: negated, or as it is."""
    aug = getattr(module, name)
    if aug.mag_range is None:
        return aug
    low, high = aug.mag_range
    return aug.augmentation(mag_range=(-low, -high) if negated else (low, high), randomly_negate=False)


def _ours(name: str, m: int, negated: bool, samples, **kwargs) -> list[np.ndarray]:
    @rp.pipeline_def(batch_size=len(samples), num_threads=1, device_id=None, enable_conditionals=True, seed=1)
    def pipe():
        images = fn.external_source(source=lambda: samples, layout="HWC", batch=True)
        return rand_augment.apply_rand_augment(
            [_variant(ours, name, negated)], images, n=1, m=m, num_magnitude_bins=11, **kwargs
        )

    with pipe() as p:
        (out,) = p.run()
    return [np.asarray(out.at(i)) for i in range(len(out))]


def _dali(name: str, m: int, negated: bool, samples, **kwargs) -> list[np.ndarray]:
    dali = pytest.importorskip("nvidia.dali")
    from nvidia.dali.auto_aug import augmentations as theirs
    from nvidia.dali.auto_aug import rand_augment as dali_rand_augment

    @dali.pipeline_def(batch_size=len(samples), num_threads=1, device_id=None, enable_conditionals=True, seed=1)
    def pipe():
        images = dali.fn.external_source(source=lambda: samples, layout="HWC", batch=True)
        aug = _variant(theirs, name, negated)
        return dali_rand_augment.apply_rand_augment([aug], images, n=1, m=m, num_magnitude_bins=11, **kwargs)

    p = pipe()
    p.build()
    (out,) = p.run()
    return [np.asarray(out[i]) for i in range(len(samples))]


def _assert_close(got: list[np.ndarray], want: list[np.ndarray], levels: int) -> None:
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype == np.uint8
        assert np.abs(g.astype(int) - w.astype(int)).max() <= levels


@pytest.mark.parametrize("name", GEOMETRIC)
@pytest.mark.parametrize("fill_value", [128, None])
@pytest.mark.parametrize(("m", "negated"), [(3, False), (10, True)])
def test_geometric_augmentations_match_dali(name, fill_value, m, negated):
    """Shears and translations, bilinear, with a fill value or the border repeated: within one
    grey level of DALI (float rounding of the sampled positions)."""
    kwargs = {"fill_value": fill_value, **({"shape": (36, 48)} if name in ("translate_x", "translate_y") else {})}
    _assert_close(_ours(name, m, negated, IMAGES, **kwargs), _dali(name, m, negated, IMAGES, **kwargs), 1)


@pytest.mark.parametrize(("m", "negated"), [(4, False), (9, True)])
def test_rotate_matches_dali_where_the_border_repeats(m, negated):
    """Without a fill value raypipe's rotate takes DALI's geometry (within one level); with one, its
    host path is Pillow's, whose placement differs from DALI's along the edges (docs/porting)."""
    want = _dali("rotate", m, negated, IMAGES, fill_value=None)
    _assert_close(_ours("rotate", m, negated, IMAGES, fill_value=None), want, 1)
    with_fill = _ours("rotate", m, negated, IMAGES, fill_value=128)
    assert [g.shape for g in with_fill] == [w.shape for w in want], "the size is kept"


@pytest.mark.parametrize(
    ("name", "m", "negated"),
    [
        (name, m, negated)
        for name in COLOUR
        for m, negated in ((2, False), (7, True), (10, False))
        if name in SIGNED or not negated
    ],
)
def test_colour_augmentations_match_dali(name, m, negated):
    _assert_close(_ours(name, m, negated, IMAGES), _dali(name, m, negated, IMAGES), 1)


@pytest.mark.parametrize("name", WITHOUT_MAGNITUDE)
def test_augmentations_without_a_magnitude_match_dali(name):
    _assert_close(_ours(name, 0, False, IMAGES), _dali(name, 0, False, IMAGES), 1)


def test_auto_contrast_leaves_a_flat_channel_and_identity_leaves_everything():
    assert np.array_equal(_ours("auto_contrast", 0, False, FLAT)[0], FLAT[0])
    for got, image in zip(_ours("identity", 0, False, IMAGES), IMAGES):
        assert np.array_equal(got, image)


def test_parameters_are_computed_once_per_bin():
    """A magnitude negated at random has a row per signed bin: ``2 * bin + sign``."""
    table = ours.brightness.parameter_table(3)
    assert table.shape == (6,)
    np.testing.assert_allclose(table, [1.0, 1.0, 1.45, 0.55, 1.9, 0.1], rtol=1e-6)
    masks = ours.posterize.augmentation((8, 0), False).parameter_table(9)
    assert masks.dtype == np.uint8 and masks[0] == 255 and masks[-1] == 128, "bin 8 -> 0 bits keeps one bit"
    assert ours.invert.parameter_table(5) is None
