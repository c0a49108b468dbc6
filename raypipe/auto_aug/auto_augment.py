"""AutoAugment (https://arxiv.org/abs/1805.09501), as DALI's ``nvidia.dali.auto_aug.auto_augment``:
each sample goes through a sub-policy drawn uniformly from the policy, each of whose stages
applies its augmentation with its probability and magnitude bin. The policies are the paper's
for ImageNet, reduced CIFAR-10 and SVHN, and DALI's reduced ImageNet policy (no translations)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import types
from ..augment_plan import SubPolicies
from ..errors import ArgumentError
from ..graph import DataNode
from . import _apply
from . import augmentations as a
from ._suites import translations
from .core import Augmentation, Policy

#: Each policy's sub-policies as (augmentation name, probability, magnitude bin) stages, 11 bins.
_IMAGE_NET = [
    [("equalize", 0.8, None), ("shear_y", 0.8, 4)],
    [("color", 0.4, 9), ("equalize", 0.6, None)],
    [("color", 0.4, 1), ("rotate", 0.6, 8)],
    [("solarize", 0.8, 3), ("equalize", 0.4, None)],
    [("solarize", 0.4, 2), ("solarize", 0.6, 2)],
    [("color", 0.2, 0), ("equalize", 0.8, None)],
    [("equalize", 0.4, None), ("solarize_add", 0.8, 3)],
    [("shear_x", 0.2, 9), ("rotate", 0.6, 8)],
    [("color", 0.6, 1), ("equalize", 1.0, None)],
    [("invert", 0.4, None), ("rotate", 0.6, 0)],
    [("equalize", 1.0, None), ("shear_y", 0.6, 3)],
    [("color", 0.4, 7), ("equalize", 0.6, None)],
    [("posterize", 0.4, 6), ("auto_contrast", 0.4, None)],
    [("solarize", 0.6, 8), ("color", 0.6, 9)],
    [("solarize", 0.2, 4), ("rotate", 0.8, 9)],
    [("rotate", 1.0, 7), ("translate_y", 0.8, 9)],
    [("solarize", 0.8, 4)],
    [("shear_y", 0.8, 0), ("color", 0.6, 4)],
    [("color", 1.0, 0), ("rotate", 0.6, 2)],
    [("equalize", 0.8, None)],
    [("equalize", 1.0, None), ("auto_contrast", 0.6, None)],
    [("shear_y", 0.4, 7), ("solarize_add", 0.6, 7)],
    [("posterize", 0.8, 2), ("solarize", 0.6, 10)],
    [("solarize", 0.6, 8), ("equalize", 0.6, None)],
    [("color", 0.8, 6), ("rotate", 0.4, 5)],
]
_REDUCED_CIFAR10 = [
    [("invert", 0.1, None), ("contrast", 0.2, 6)],
    [("rotate", 0.7, 2), ("translate_x", 0.3, 9)],
    [("sharpness", 0.8, 1), ("sharpness", 0.9, 3)],
    [("shear_y", 0.5, 8), ("translate_y", 0.7, 9)],
    [("auto_contrast", 0.5, None), ("equalize", 0.9, None)],
    [("shear_y", 0.2, 7), ("posterize", 0.3, 7)],
    [("color", 0.4, 3), ("brightness", 0.6, 7)],
    [("sharpness", 0.3, 9), ("brightness", 0.7, 9)],
    [("equalize", 0.6, None), ("equalize", 0.5, None)],
    [("contrast", 0.6, 7), ("sharpness", 0.6, 5)],
    [("color", 0.7, 7), ("translate_x", 0.5, 8)],
    [("equalize", 0.3, None), ("auto_contrast", 0.4, None)],
    [("translate_y", 0.4, 3), ("sharpness", 0.2, 6)],
    [("brightness", 0.9, 6), ("color", 0.2, 8)],
    [("solarize", 0.5, 2)],
    [("equalize", 0.2, None), ("auto_contrast", 0.6, None)],
    [("equalize", 0.2, None), ("equalize", 0.6, None)],
    [("color", 0.9, 9), ("equalize", 0.6, None)],
    [("auto_contrast", 0.8, None), ("solarize", 0.2, 8)],
    [("brightness", 0.1, 3), ("color", 0.7, 0)],
    [("solarize", 0.4, 5), ("auto_contrast", 0.9, None)],
    [("translate_y", 0.9, 9), ("translate_y", 0.7, 9)],
    [("auto_contrast", 0.9, None), ("solarize", 0.8, 3)],
    [("equalize", 0.8, None), ("invert", 0.1, None)],
    [("translate_y", 0.7, 9), ("auto_contrast", 0.9, None)],
]
_SVHN = [
    [("shear_x", 0.9, 4), ("invert", 0.2, None)],
    [("shear_y", 0.9, 8), ("invert", 0.7, None)],
    [("equalize", 0.6, None), ("solarize", 0.6, 6)],
    [("invert", 0.9, None), ("equalize", 0.6, None)],
    [("equalize", 0.6, None), ("rotate", 0.9, 3)],
    [("shear_x", 0.9, 4), ("auto_contrast", 0.8, None)],
    [("shear_y", 0.9, 8), ("invert", 0.4, None)],
    [("shear_y", 0.9, 5), ("solarize", 0.2, 6)],
    [("invert", 0.9, None), ("auto_contrast", 0.8, None)],
    [("equalize", 0.6, None), ("rotate", 0.9, 3)],
    [("shear_x", 0.9, 4), ("solarize", 0.3, 3)],
    [("shear_y", 0.8, 8), ("invert", 0.7, None)],
    [("equalize", 0.9, None), ("translate_y", 0.6, 6)],
    [("invert", 0.9, None), ("equalize", 0.6, None)],
    [("contrast", 0.3, 3), ("rotate", 0.8, 4)],
    [("invert", 0.8, None)],
    [("shear_y", 0.7, 6), ("solarize", 0.4, 8)],
    [("invert", 0.6, None), ("rotate", 0.8, 4)],
    [("shear_y", 0.3, 7), ("translate_x", 0.9, 3)],
    [("shear_x", 0.1, 6), ("invert", 0.6, None)],
    [("solarize", 0.7, 2), ("translate_y", 0.6, 7)],
    [("shear_y", 0.8, 4), ("invert", 0.8, None)],
    [("shear_x", 0.7, 9), ("translate_y", 0.8, 3)],
    [("shear_y", 0.8, 5), ("auto_contrast", 0.7, None)],
    [("shear_x", 0.7, 2), ("invert", 0.1, None)],
]
_REDUCED_IMAGE_NET = [
    [("posterize", 0.4, 8), ("rotate", 0.6, 9)],
    [("solarize", 0.6, 5), ("auto_contrast", 0.6, None)],
    [("equalize", 0.8, None), ("equalize", 0.6, None)],
    [("posterize", 0.6, 7), ("posterize", 0.6, 6)],
    [("equalize", 0.4, None), ("solarize", 0.2, 4)],
    [("equalize", 0.4, None), ("rotate", 0.8, 8)],
    [("solarize", 0.6, 3), ("equalize", 0.6, None)],
    [("posterize", 0.8, 5), ("equalize", 1.0, None)],
    [("rotate", 0.2, 3), ("solarize", 0.6, 8)],
    [("equalize", 0.6, None), ("posterize", 0.4, 6)],
    [("rotate", 0.8, 8), ("color", 0.4, 0)],
    [("rotate", 0.4, 9), ("equalize", 0.6, None)],
    [("equalize", 0.8, None)],
    [("invert", 0.6, None), ("equalize", 1.0, None)],
    [("color", 0.6, 4), ("contrast", 1.0, 8)],
    [("rotate", 0.8, 8), ("color", 1.0, 2)],
    [("color", 0.8, 8), ("solarize", 0.8, 7)],
    [("sharpness", 0.4, 7), ("invert", 0.6, None)],
    [("shear_x", 0.6, 5), ("equalize", 1.0, None)],
    [("color", 0.4, 0), ("equalize", 0.6, None)],
    [("equalize", 0.4, None), ("solarize", 0.2, 4)],
    [("solarize", 0.6, 5), ("auto_contrast", 0.6, None)],
    [("invert", 0.6, None), ("equalize", 1.0, None)],
    [("color", 0.6, 4), ("contrast", 1.0, 8)],
    [("equalize", 0.8, None), ("equalize", 0.6, None)],
]


def _fixed_augmentations() -> dict[str, Augmentation]:
    """The policies' augmentations other than the translations, with the paper's ranges."""
    return {
        "shear_x": a.shear_x.augmentation((0, 0.3), True),
        "shear_y": a.shear_y.augmentation((0, 0.3), True),
        "rotate": a.rotate.augmentation((0, 30), True),
        "brightness": a.brightness.augmentation((0.1, 1.9), False, None),
        "color": a.color.augmentation((0.1, 1.9), False, None),
        "contrast": a.contrast.augmentation((0.1, 1.9), False, None),
        "sharpness": a.sharpness.augmentation((0.1, 1.9), False, a.sharpness_kernel_shifted),
        "posterize": a.posterize.augmentation((0, 4), False, a.poster_mask_uint8),
        "solarize": a.solarize.augmentation((0, 256), False),
        "solarize_add": a.solarize_add.augmentation((0, 110), False),
        "invert": a.invert,
        "equalize": a.equalize,
        "auto_contrast": a.auto_contrast,
    }


def _policy(
    name: str, stages: list, use_shape: bool | None, max_translate_abs: Any = None, max_translate_rel: Any = None
) -> Policy:
    by_name = _fixed_augmentations()
    if use_shape is not None:
        by_name["translate_x"], by_name["translate_y"] = translations(
            use_shape, 250, 1.0, max_translate_abs, max_translate_rel
        )
    sub_policies = [[(by_name[aug], p, b) for aug, p, b in sub] for sub in stages]
    return Policy(name, 11, sub_policies)


def get_image_net_policy(
    use_shape: bool = False, max_translate_abs: int | None = None, max_translate_rel: float | None = None
) -> Policy:
    """AutoAugment's ImageNet policy: translations up to ``max_translate_rel`` of the shape (1.0)
    with ``use_shape``, else ``max_translate_abs`` pixels (250)."""
    return _policy("ImageNetPolicy", _IMAGE_NET, use_shape, max_translate_abs, max_translate_rel)


def get_reduced_cifar10_policy(
    use_shape: bool = False, max_translate_abs: int | None = None, max_translate_rel: float | None = None
) -> Policy:
    """AutoAugment's reduced CIFAR-10 policy."""
    return _policy("ReducedCifar10Policy", _REDUCED_CIFAR10, use_shape, max_translate_abs, max_translate_rel)


def get_svhn_policy(
    use_shape: bool = False, max_translate_abs: int | None = None, max_translate_rel: float | None = None
) -> Policy:
    """AutoAugment's SVHN policy."""
    return _policy("SvhnPolicy", _SVHN, use_shape, max_translate_abs, max_translate_rel)


def get_reduced_image_net_policy() -> Policy:
    """DALI's reduced ImageNet policy: no translations, so no shape."""
    return _policy("ReducedImageNetPolicy", _REDUCED_IMAGE_NET, None)


_POLICIES: dict[str, Callable[..., Policy]] = {
    "image_net": get_image_net_policy,
    "reduced_image_net": get_reduced_image_net_policy,
    "svhn": get_svhn_policy,
    "reduced_cifar10": get_reduced_cifar10_policy,
}


def auto_augment(
    data: DataNode,
    policy_name: str = "image_net",
    shape: DataNode | tuple[int, int] | None = None,
    fill_value: int | None = 128,
    interp_type: types.DALIInterpType | None = None,
    max_translate_abs: int | None = None,
    max_translate_rel: float | None = None,
    seed: int | None = None,
) -> DataNode:
    """AutoAugment on uint8 ``HWC`` images with the policy ``policy_name`` (``image_net``,
    ``reduced_image_net``, ``svhn``, ``reduced_cifar10``)."""
    if not isinstance(policy_name, str) or policy_name not in _POLICIES:
        raise ArgumentError(f"auto_augment: policy_name must be one of {', '.join(_POLICIES)}, got {policy_name!r}")
    kwargs: dict[str, Any] = {"fill_value": fill_value, "interp_type": interp_type}
    if policy_name == "reduced_image_net":
        given = [
            n
            for n, v in (
                ("shape", shape),
                ("max_translate_abs", max_translate_abs),
                ("max_translate_rel", max_translate_rel),
            )
            if v is not None
        ]
        if given:
            raise ArgumentError(
                f"auto_augment: the reduced_image_net policy has no translations; {given[0]} does not apply"
            )
        policy = get_reduced_image_net_policy()
    else:
        policy = _POLICIES[policy_name](shape is not None, max_translate_abs, max_translate_rel)
        if shape is not None:
            kwargs["shape"] = shape
    return _auto_augment("auto_augment", policy, data, seed, True, kwargs)


def auto_augment_image_net(
    data: DataNode,
    shape: DataNode | tuple[int, int] | None = None,
    fill_value: int | None = 128,
    interp_type: types.DALIInterpType | None = None,
    max_translate_abs: int | None = None,
    max_translate_rel: float | None = None,
    seed: int | None = None,
) -> DataNode:
    """AutoAugment's ImageNet policy (:func:`auto_augment` with ``policy_name="image_net"``)."""
    return auto_augment(data, "image_net", shape, fill_value, interp_type, max_translate_abs, max_translate_rel, seed)


def apply_auto_augment(policy: Policy, data: DataNode, seed: int | None = None, **kwargs: Any) -> DataNode:
    """``policy`` applied per sample; ``kwargs`` go to the augmentations that take them."""
    return _auto_augment("apply_auto_augment", policy, data, seed, False, kwargs)


def _auto_augment(
    caller: str, policy: Policy, data: DataNode, seed: int | None, uint8: bool, kwargs: dict[str, Any]
) -> DataNode:
    if not isinstance(policy, Policy):
        raise ArgumentError(f"{caller}: policy must be a Policy, got {policy!r}")
    if not policy.sub_policies:
        raise ArgumentError(f"{caller}: the policy {policy.name!r} has no sub-policies")
    augmentations = list(policy.augmentations.values())
    index = {aug: i for i, aug in enumerate(augmentations)}
    stages = [[(index[aug], p, b or 0) for aug, p, b in sub] for sub in policy.sub_policies]
    selector = SubPolicies.of(stages, [aug.randomly_negate for aug in augmentations])
    return _apply.apply(caller, augmentations, selector, data, policy.num_magnitude_bins, kwargs, seed, uint8)
