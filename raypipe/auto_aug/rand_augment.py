"""RandAugment (https://arxiv.org/abs/1909.13719), as DALI's ``nvidia.dali.auto_aug.rand_augment``:
each sample goes through ``n`` augmentations drawn uniformly from the suite, all with magnitude bin
``m`` (each magnitude negated at random where the augmentation says so)."""

from __future__ import annotations

import warnings
from typing import Any

from .. import types
from ..augment_plan import RandAugment
from ..errors import ArgumentError
from ..graph import DataNode
from . import _apply
from . import augmentations as a
from ._suites import excluding, translations
from .core import Augmentation


def rand_augment(
    data: DataNode,
    n: int,
    m: int,
    num_magnitude_bins: int = 31,
    shape: DataNode | tuple[int, int] | None = None,
    fill_value: int | None = 128,
    interp_type: types.DALIInterpType | None = None,
    max_translate_abs: int | None = None,
    max_translate_rel: float | None = None,
    seed: int | None = None,
    monotonic_mag: bool = True,
    excluded: list[str] | None = None,
) -> DataNode:
    """RandAugment on uint8 ``HWC`` images: ``n`` operations of strength ``m`` (a bin of
    ``num_magnitude_bins``). With ``shape`` (``(H, W)`` or ``fn.peek_image_shape(...)``) the
    translations go up to ``max_translate_rel`` of it (100/224 by default), else up to
    ``max_translate_abs`` pixels (100). ``monotonic_mag=False`` takes the ranges in which some
    colour operations weaken as ``m`` grows (:func:`get_rand_augment_non_monotonic_suite`)."""
    kwargs: dict[str, Any] = {"fill_value": fill_value, "interp_type": interp_type}
    if shape is not None:
        kwargs["shape"] = shape
    suite = get_rand_augment_suite if monotonic_mag else get_rand_augment_non_monotonic_suite
    augmentations = excluding(suite(shape is not None, max_translate_abs, max_translate_rel), excluded, "RandAugment")
    return _rand_augment("rand_augment", augmentations, data, n, m, num_magnitude_bins, seed, True, kwargs)


def apply_rand_augment(
    augmentations: list[Augmentation],
    data: DataNode,
    n: int,
    m: int,
    num_magnitude_bins: int = 31,
    seed: int | None = None,
    **kwargs: Any,
) -> DataNode:
    """``augmentations`` applied RandAugment's way; ``kwargs`` go to the augmentations that take them."""
    return _rand_augment("apply_rand_augment", augmentations, data, n, m, num_magnitude_bins, seed, False, kwargs)


def _rand_augment(
    caller: str,
    augmentations: list[Augmentation],
    data: DataNode,
    n: int,
    m: int,
    num_magnitude_bins: int,
    seed: int | None,
    uint8: bool,
    kwargs: dict[str, Any],
) -> DataNode:
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ArgumentError(f"{caller}: n (operations per sample) must be a non-negative int, got {n!r}")
    bins = _apply.check_positive(caller, "num_magnitude_bins", num_magnitude_bins)
    if isinstance(m, bool) or not isinstance(m, int) or not 0 <= m < bins:
        raise ArgumentError(f"{caller}: m (the magnitude bin) must be an int in [0, {bins - 1}], got {m!r}")
    if n == 0:
        warnings.warn(f"{caller}: n=0, no augmentation is applied", stacklevel=3)
        return data
    selector = RandAugment(n, m, tuple(aug.randomly_negate for aug in augmentations))
    return _apply.apply(caller, augmentations, selector, data, bins, kwargs, seed, uint8)


def get_rand_augment_suite(
    use_shape: bool = False, max_translate_abs: int | None = None, max_translate_rel: float | None = None
) -> list[Augmentation]:
    """RandAugment's augmentations, each stronger as the bin grows."""
    colour = [
        a.brightness.augmentation((0, 0.9), True, a.shift_enhance_range),
        a.contrast.augmentation((0, 0.9), True, a.shift_enhance_range),
        a.color.augmentation((0, 0.9), True, a.shift_enhance_range),
        a.sharpness.augmentation((0, 0.9), True, a.sharpness_kernel),
        a.posterize.augmentation((8, 4), False, a.poster_mask_uint8),
        a.solarize.augmentation((256, 0)),
    ]
    return _suite(use_shape, max_translate_abs, max_translate_rel, colour)


def get_rand_augment_non_monotonic_suite(
    use_shape: bool = False, max_translate_abs: int | None = None, max_translate_rel: float | None = None
) -> list[Augmentation]:
    """RandAugment's augmentations with AutoAugment's colour ranges, some of which weaken as the bin grows."""
    colour = [
        a.brightness.augmentation((0.1, 1.9), False, None),
        a.contrast.augmentation((0.1, 1.9), False, None),
        a.color.augmentation((0.1, 1.9), False, None),
        a.sharpness.augmentation((0.1, 1.9), False, a.sharpness_kernel_shifted),
        a.posterize.augmentation((0, 4), False, a.poster_mask_uint8),
        a.solarize.augmentation((0, 256), False, None),
    ]
    return _suite(use_shape, max_translate_abs, max_translate_rel, colour)


def _suite(use_shape: bool, max_translate_abs: Any, max_translate_rel: Any, colour: list[Augmentation]) -> list:
    """Both suites: the geometric augmentations, ``colour``, then those without a magnitude, in DALI's order."""
    return [
        *translations(use_shape, 100, 100 / 224, max_translate_abs, max_translate_rel),
        a.shear_x.augmentation((0, 0.3), True),
        a.shear_y.augmentation((0, 0.3), True),
        a.rotate.augmentation((0, 30), True),
        *colour,
        a.equalize,
        a.auto_contrast,
        a.identity,
    ]
