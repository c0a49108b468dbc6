"""TrivialAugment Wide (https://arxiv.org/abs/2103.10158), as DALI's
``nvidia.dali.auto_aug.trivial_augment``: each sample goes through one augmentation drawn
uniformly from the suite, with a magnitude bin drawn uniformly."""

from __future__ import annotations

from typing import Any

from .. import types
from ..augment_plan import TrivialAugment
from ..graph import DataNode
from . import _apply
from . import augmentations as a
from ._suites import excluding, translations
from .core import Augmentation


def trivial_augment_wide(
    data: DataNode,
    num_magnitude_bins: int = 31,
    shape: DataNode | tuple[int, int] | None = None,
    fill_value: int | None = 128,
    interp_type: types.DALIInterpType | None = None,
    max_translate_abs: int | None = None,
    max_translate_rel: float | None = None,
    seed: int | None = None,
    excluded: list[str] | None = None,
) -> DataNode:
    """TrivialAugment Wide on uint8 ``HWC`` images. With ``shape`` the translations go up to
    ``max_translate_rel`` of it (the whole image by default), else up to ``max_translate_abs``
    pixels (32)."""
    kwargs: dict[str, Any] = {"fill_value": fill_value, "interp_type": interp_type}
    if shape is not None:
        kwargs["shape"] = shape
    augmentations = excluding(
        get_trivial_augment_wide_suite(shape is not None, max_translate_abs, max_translate_rel),
        excluded,
        "TrivialAugmentWide",
    )
    return _trivial_augment("trivial_augment_wide", augmentations, data, num_magnitude_bins, seed, True, kwargs)


def apply_trivial_augment(
    augmentations: list[Augmentation],
    data: DataNode,
    num_magnitude_bins: int = 31,
    seed: int | None = None,
    **kwargs: Any,
) -> DataNode:
    """``augmentations`` applied TrivialAugment's way; ``kwargs`` go to the augmentations that take them."""
    return _trivial_augment("apply_trivial_augment", augmentations, data, num_magnitude_bins, seed, False, kwargs)


def _trivial_augment(
    caller: str,
    augmentations: list[Augmentation],
    data: DataNode,
    num_magnitude_bins: int,
    seed: int | None,
    uint8: bool,
    kwargs: dict[str, Any],
) -> DataNode:
    bins = _apply.check_positive(caller, "num_magnitude_bins", num_magnitude_bins)
    selector = TrivialAugment(bins, tuple(aug.randomly_negate for aug in augmentations))
    return _apply.apply(caller, augmentations, selector, data, bins, kwargs, seed, uint8)


def get_trivial_augment_wide_suite(
    use_shape: bool = False, max_translate_abs: int | None = None, max_translate_rel: float | None = None
) -> list[Augmentation]:
    """TrivialAugment Wide's augmentations and ranges."""
    return [
        *translations(use_shape, 32, 1.0, max_translate_abs, max_translate_rel),
        a.shear_x.augmentation((0, 0.99), True),
        a.shear_y.augmentation((0, 0.99), True),
        a.rotate.augmentation((0, 135), True),
        a.brightness.augmentation((0.01, 0.99), True, a.shift_enhance_range),
        a.contrast.augmentation((0.01, 0.99), True, a.shift_enhance_range),
        a.color.augmentation((0.01, 0.99), True, a.shift_enhance_range),
        a.sharpness.augmentation((0.01, 0.99), True, a.sharpness_kernel),
        a.posterize.augmentation((8, 2), False, a.poster_mask_uint8),
        a.solarize.augmentation((256, 0)),
        a.equalize,
        a.auto_contrast,
        a.identity,
    ]
