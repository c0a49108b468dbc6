"""Helpers of the suites: their translations (relative to the image shape, or in pixels) and exclusions."""

from __future__ import annotations

from typing import Any

from ..errors import ArgumentError
from . import augmentations as a
from .core import Augmentation


def _height_width(limit: Any) -> tuple[Any, Any]:
    if isinstance(limit, (tuple, list)):
        if len(limit) != 2:
            raise ArgumentError(f"a translation limit is one number or (height, width), got {limit!r}")
        return limit[0], limit[1]
    return limit, limit


def translations(
    use_shape: bool,
    default_abs: float,
    default_rel: float,
    max_translate_abs: Any = None,
    max_translate_rel: Any = None,
) -> list[Augmentation]:
    """``[translate_x, translate_y]`` up to ``max_translate_rel`` of the shape (``use_shape``) or
    ``max_translate_abs`` pixels; a limit is one number or ``(height, width)``."""
    if not isinstance(use_shape, bool):
        raise ArgumentError(f"use_shape must be True or False, got {use_shape!r}")
    if use_shape:
        if max_translate_abs is not None:
            raise ArgumentError("max_translate_abs is for translations in pixels, without shape: use max_translate_rel")
        height, width = _height_width(default_rel if max_translate_rel is None else max_translate_rel)
        return [a.translate_x.augmentation((0, width), True), a.translate_y.augmentation((0, height), True)]
    if max_translate_rel is not None:
        raise ArgumentError(
            "max_translate_rel is for translations relative to the shape: give shape, or use max_translate_abs"
        )
    height, width = _height_width(default_abs if max_translate_abs is None else max_translate_abs)
    return [
        a.translate_x_no_shape.augmentation((0, width), True),
        a.translate_y_no_shape.augmentation((0, height), True),
    ]


def excluding(suite: list[Augmentation], excluded: list[str] | None, suite_name: str) -> list[Augmentation]:
    """``suite`` without the augmentations named in ``excluded`` (each must be in it)."""
    names = [aug.name for aug in suite]
    for name in excluded or []:
        if name not in names:
            raise ArgumentError(
                f"excluded names {name!r}, which the {suite_name} suite does not have: {', '.join(names)}"
            )
    return [aug for aug in suite if aug.name not in (excluded or [])]
