"""The augmentations of AutoAugment, RandAugment and TrivialAugment, as DALI's
``nvidia.dali.auto_aug.augmentations`` defines them, written with raypipe's operators.

Each takes a batch of uint8 ``HWC`` images and a parameter computed from its magnitude (see
:class:`~raypipe.auto_aug.core.Augmentation`); the settings given here are DALI's defaults, and
``aug.augmentation(mag_range=...)`` makes a variant. The geometric ones (shears, translations,
rotation) warp with ``fill_value`` (None: the border pixel repeated) and ``interp_type``
(bilinear by default); the translations come relative to the image ``shape`` (``translate_x``,
``translate_y``) or in pixels (``translate_x_no_shape``, ``translate_y_no_shape``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import fn, types
from .core import augmentation


def warp_x_param(magnitude: float) -> list[float]:
    """A magnitude as an ``[x, y]`` pair along x."""
    return [magnitude, 0]


def warp_y_param(magnitude: float) -> list[float]:
    """A magnitude as an ``[x, y]`` pair along y."""
    return [0, magnitude]


def _warp(data, matrix, fill_value, interp_type):
    kwargs: dict[str, Any] = {"matrix": matrix, "fill_value": fill_value, "inverse_map": False}
    if interp_type is not None:
        kwargs["interp_type"] = interp_type
    return fn.warp_affine(data, **kwargs)


@augmentation(mag_range=(0, 0.3), randomly_negate=True, mag_to_param=warp_x_param)
def shear_x(data, shear, fill_value=128, interp_type=None):
    """Shear along x by ``shear`` (a tangent)."""
    return _warp(data, fn.transforms.shear(shear=shear), fill_value, interp_type)


@augmentation(mag_range=(0, 0.3), randomly_negate=True, mag_to_param=warp_y_param)
def shear_y(data, shear, fill_value=128, interp_type=None):
    """Shear along y by ``shear`` (a tangent)."""
    return _warp(data, fn.transforms.shear(shear=shear), fill_value, interp_type)


@augmentation(mag_range=(0.0, 1.0), randomly_negate=True, mag_to_param=warp_x_param)
def translate_x(data, rel_offset, shape, fill_value=128, interp_type=None):
    """Shift along x by ``rel_offset`` times the width (``shape`` is ``(H, W)``)."""
    return _warp(data, fn.transforms.translation(offset=rel_offset * shape[1]), fill_value, interp_type)


@augmentation(mag_range=(0, 250), randomly_negate=True, mag_to_param=warp_x_param, name="translate_x")
def translate_x_no_shape(data, offset, fill_value=128, interp_type=None):
    """Shift along x by ``offset`` pixels."""
    return _warp(data, fn.transforms.translation(offset=offset), fill_value, interp_type)


@augmentation(mag_range=(0.0, 1.0), randomly_negate=True, mag_to_param=warp_y_param)
def translate_y(data, rel_offset, shape, fill_value=128, interp_type=None):
    """Shift along y by ``rel_offset`` times the height (``shape`` is ``(H, W)``)."""
    return _warp(data, fn.transforms.translation(offset=rel_offset * shape[0]), fill_value, interp_type)


@augmentation(mag_range=(0, 250), randomly_negate=True, mag_to_param=warp_y_param, name="translate_y")
def translate_y_no_shape(data, offset, fill_value=128, interp_type=None):
    """Shift along y by ``offset`` pixels."""
    return _warp(data, fn.transforms.translation(offset=offset), fill_value, interp_type)


@augmentation(mag_range=(0, 30), randomly_negate=True)
def rotate(data, angle, fill_value=128, interp_type=None, rotate_keep_size=True):
    """Rotate by ``angle`` degrees, keeping the size unless ``rotate_keep_size=False``."""
    return fn.rotate(data, angle=angle, fill_value=fill_value, interp_type=interp_type, keep_size=rotate_keep_size)


def shift_enhance_range(magnitude: float) -> float:
    """PIL's enhance factors are neutral at 1: a magnitude in [-1, 1] shifted by 1."""
    return 1 + magnitude


@augmentation(mag_range=(0, 0.9), randomly_negate=True, mag_to_param=shift_enhance_range)
def brightness(data, parameter):
    """Scale the values by ``parameter``."""
    return fn.brightness(data, brightness=parameter)


@augmentation(mag_range=(0, 0.9), randomly_negate=True, mag_to_param=shift_enhance_range)
def contrast(data, parameter):
    """PIL's contrast: blend with the image's grey mean (channel means weighted 0.299, 0.587, 0.114)."""
    mean = fn.reductions.mean(data, axis_names="HW", keep_dims=True)
    weights = types.Constant(np.array([0.299, 0.587, 0.114], dtype=np.float32))
    center = fn.reductions.sum(mean * weights, axis_names="C", keep_dims=True)
    return fn.cast_like(center + (data - center) * parameter, data)


@augmentation(mag_range=(0, 0.9), randomly_negate=True, mag_to_param=shift_enhance_range)
def color(data, parameter):
    """Scale the saturation by ``parameter``."""
    return fn.saturation(data, saturation=parameter)


def sharpness_kernel(magnitude: float) -> np.ndarray:
    """PIL's sharpness for a magnitude in [-1, 1]: a blend of its smoothing kernel and identity."""
    blur = np.array([[1, 1, 1], [1, 5, 1], [1, 1, 1]], dtype=np.float32) / 13
    identity = np.zeros((3, 3), dtype=np.float32)
    identity[1, 1] = 1
    return -magnitude * blur + (1 + magnitude) * identity


def sharpness_kernel_shifted(magnitude: float) -> np.ndarray:
    """:func:`sharpness_kernel` for a magnitude in [0, 2] (neutral at 1)."""
    return sharpness_kernel(magnitude - 1)


@augmentation(mag_range=(0, 0.9), randomly_negate=True, mag_to_param=sharpness_kernel, param_device="auto")
def sharpness(data, kernel):
    """Convolve with ``kernel`` (PIL's sharpness, except the 1-pixel border, which PIL leaves as it was)."""
    return fn.filter(data, kernel)


def poster_mask_uint8(magnitude: float) -> np.ndarray:
    """The mask keeping ``round(magnitude)`` high bits (1 to 8: none kept would blank the image)."""
    bits = int(np.clip(np.round(magnitude), 1, 8))
    return np.array(np.uint8(255) ^ np.uint8(2 ** (8 - bits) - 1), dtype=np.uint8)


@augmentation(mag_range=(0, 4), mag_to_param=poster_mask_uint8, param_device="auto")
def posterize(data, mask):
    """Keep the bits of ``mask``."""
    return data & mask


@augmentation(mag_range=(256, 0), param_device="auto")
def solarize(data, threshold):
    """Invert the values at or above ``threshold``."""
    inverted = types.Constant(255, dtype=types.UINT8) - data
    below = data < threshold
    return below * data + (below ^ True) * inverted


def solarize_add_shift(shift: float) -> np.ndarray:
    """The shift as uint8 (below 128, so that shifted values stay below 256)."""
    if shift >= 128:
        raise ValueError(f"solarize_add shifts by less than 128, got {shift}")
    return np.uint8(shift)


@augmentation(mag_range=(0, 110), param_device="auto", mag_to_param=solarize_add_shift)
def solarize_add(data, shift):
    """Add ``shift`` to the values below 128."""
    below = data < types.Constant(128, dtype=types.UINT8)
    return below * (data + shift) + (below ^ True) * data


@augmentation
def invert(data, _):
    """255 minus each value."""
    return types.Constant(255, dtype=types.UINT8) - data


@augmentation
def equalize(data, _):
    """Histogram equalization per channel (OpenCV's rule, as DALI's)."""
    return fn.equalize(data)


@augmentation
def auto_contrast(data, _):
    """Stretch each channel's values to [0, 255] (a channel of one value is left as it is)."""
    low = fn.reductions.min(data, axis_names="HW", keep_dims=True)
    high = fn.reductions.max(data, axis_names="HW", keep_dims=True)
    spread = high - low
    stretched = spread > 0
    divisor = spread * stretched + types.Constant(255, dtype=types.UINT8) * (stretched ^ True)
    return fn.cast_like((data - low * stretched) * (255 / divisor), data)


@augmentation
def identity(data, _):
    """The image as it is."""
    return data
