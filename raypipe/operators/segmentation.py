"""``segmentation.random_object_bbox`` and ``segmentation.random_mask_pixel``: random picks from a
label map or mask, as DALI's, for crops biased towards objects (nnU-Net, UNet3D).

``random_object_bbox`` labels the connected objects of the input (:mod:`raypipe.connected_components`),
keeps those at least ``threshold`` long on every axis, picks a class (among ``classes``, or every
value present but ``background``; weighted by ``class_weights``) that has one, then one of its
objects (among the ``k_largest`` when given), and gives the object's box as ``format`` says. With
probability ``1 - foreground_prob``, or when no object qualifies, the box is the whole input and
the class ``background``. Every draw is keyed per sample.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..connected_components import label_components
from ..errors import ArgumentError
from ..operator import Operator, Schema, as_scalar, register
from .axes import per_sample

FORMATS = ("anchor_shape", "start_end", "box")
_OBJ = "segmentation.random_object_bbox"


@register
class RandomObjectBBox(Operator):
    """A random object's bounding box (int32) and, with ``output_class``, its class (int32)."""

    schema = Schema(
        "segmentation.random_object_bbox",
        devices=("cpu",),
        num_outputs=2,
        arg_inputs=("classes", "class_weights", "foreground_prob", "threshold", "background"),
    )

    def configure(
        self,
        format: str = "anchor_shape",
        background: int = 0,
        classes=None,
        class_weights=None,
        foreground_prob: float = 1.0,
        ignore_class: bool = False,
        k_largest: int | None = None,
        threshold=None,
        output_class: bool = False,
        cache_objects: bool = False,
    ) -> None:
        """``cache_objects`` (DALI keeps the objects of inputs it has seen) is a hint: labelling is
        recomputed, with the same result."""
        if format not in FORMATS:
            raise ArgumentError(f"segmentation.random_object_bbox: format must be one of {FORMATS}, got {format!r}")
        if ignore_class and (classes is not None or class_weights is not None or output_class):
            raise ArgumentError(
                "segmentation.random_object_bbox: classes, class_weights and output_class cannot be used with "
                "ignore_class=True (as in DALI)"
            )
        if k_largest is not None and (isinstance(k_largest, bool) or int(k_largest) < 1):
            raise ArgumentError(f"segmentation.random_object_bbox: k_largest must be at least 1, got {k_largest!r}")
        if not 0.0 <= float(foreground_prob) <= 1.0:
            raise ArgumentError(f"{_OBJ}: foreground_prob must be in [0, 1], got {foreground_prob}")
        self.format, self.background, self.foreground_prob = format, int(background), float(foreground_prob)
        self.classes = None if classes is None else tuple(int(c) for c in np.atleast_1d(classes))
        self.class_weights = None if class_weights is None else tuple(float(w) for w in np.atleast_1d(class_weights))
        self.ignore_class, self.output_class = bool(ignore_class), bool(output_class)
        self.k_largest = None if k_largest is None else int(k_largest)
        self.threshold = None if threshold is None else tuple(int(t) for t in np.atleast_1d(threshold))

    @property
    def num_outputs(self) -> int:
        """One output (``box``) or two (anchor and shape, or start and end), and the class."""
        return (1 if self.format == "box" else 2) + int(self.output_class)

    def output_layout(self, input_layouts):
        return ""

    def _arg(self, args: dict[str, Any], name: str) -> Any:
        if name not in args:
            return getattr(self, name)
        if name in ("foreground_prob", "background"):
            return as_scalar(args[name])
        return per_sample(args[name])

    def run_sample(self, inputs, args, ctx):
        labels = np.asarray(inputs[0])
        rng = self.rng(ctx)
        start, end, chosen = self.pick(labels, args, rng)
        start, end = np.asarray(start, np.int32), np.asarray(end, np.int32)
        outs: list[np.ndarray] = {
            "anchor_shape": [start, end - start],
            "start_end": [start, end],
            "box": [np.concatenate([start, end])],
        }[self.format]
        if self.output_class:
            outs.append(np.array(chosen, np.int32))
        return tuple(outs) if len(outs) > 1 else outs[0]

    def pick(self, labels: np.ndarray, args: dict[str, Any], rng: np.random.Generator) -> tuple[Any, Any, int]:
        """The chosen box's ``(start, end)`` and class for one sample."""
        background = int(self._arg(args, "background"))
        whole = ([0] * labels.ndim, list(labels.shape), background)
        if rng.random() >= float(self._arg(args, "foreground_prob")):
            return whole
        objects = label_components(labels, background, self.ignore_class)
        keep = np.ones(len(objects.sizes), bool)
        threshold = self._arg(args, "threshold")
        if threshold is not None:
            limit = np.broadcast_to(np.asarray(threshold, np.int64), (labels.ndim,))
            keep &= ((objects.ends - objects.starts) >= limit).all(axis=1)
        if self.ignore_class:
            candidates, weights = [None], np.ones(1)
        else:
            classes = self._arg(args, "classes")
            present = np.unique(objects.classes[keep])
            wanted = present if classes is None else np.asarray(classes, np.int64)
            given = self._arg(args, "class_weights")
            weights = np.ones(len(wanted)) if given is None else np.asarray(given, np.float64)
            if len(weights) != len(wanted):
                raise ValueError(f"{_OBJ}: {len(weights)} class_weights for {len(wanted)} classes")
            has = np.isin(wanted, present)
            candidates, weights = list(wanted[has]), weights[has]
        if not len(candidates) or weights.sum() <= 0:
            return whole
        chosen = candidates[rng.choice(len(candidates), p=weights / weights.sum())]
        mine = np.flatnonzero(keep if chosen is None else keep & (objects.classes == chosen))
        if self.k_largest is not None:
            mine = mine[np.argsort(-objects.sizes[mine], kind="stable")[: self.k_largest]]
        if not len(mine):
            return whole
        at = mine[rng.integers(len(mine))]
        return objects.starts[at], objects.ends[at], background if chosen is None else int(chosen)


@register
class RandomMaskPixel(Operator):
    """A random position (int64 coordinates) of the input: with ``foreground`` 1 one where the mask
    is above ``threshold`` (or equal to ``value``), any position otherwise or where there is none."""

    schema = Schema("segmentation.random_mask_pixel", devices=("cpu",), arg_inputs=("foreground",))

    def configure(self, foreground: int = 0, threshold: float = 0.0, value: float | None = None) -> None:
        self.foreground, self.threshold = int(foreground), float(threshold)
        self.value = None if value is None else float(value)

    def output_layout(self, input_layouts):
        return ""

    def run_sample(self, inputs, args, ctx):
        mask = np.asarray(inputs[0])
        rng = self.rng(ctx)
        foreground = int(as_scalar(args["foreground"])) if "foreground" in args else self.foreground
        if foreground:
            hits = np.flatnonzero(mask == self.value if self.value is not None else mask > self.threshold)
            if len(hits):
                return np.array(np.unravel_index(hits[rng.integers(len(hits))], mask.shape), np.int64)
        if mask.size == 0:
            return np.zeros(mask.ndim, np.int64)
        return np.array(np.unravel_index(rng.integers(mask.size), mask.shape), np.int64)
