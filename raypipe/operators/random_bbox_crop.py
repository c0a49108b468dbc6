"""``random_bbox_crop``: a random crop window that keeps bounding boxes, as DALI's operator (SSD's
"zoom in" augmentation). The window's anchor and shape feed ``slice`` or ``decoders.image_slice``;
the boxes come back relative to the window.

Per sample, one of ``thresholds`` (or, with ``allow_no_crop``, "no crop") is picked; windows are
drawn (extents in ``scaling`` with their ratios in ``aspect_ratio``, or a fixed ``crop_shape`` of
an ``input_shape``) until one overlaps the boxes as the threshold asks (IoU, or the fraction of
each box inside with ``threshold_type="overlap"``; every box, or any with
``all_boxes_above_threshold=False``) and keeps at least one box; after ``num_attempts`` draws the
threshold is picked again, and after ``total_num_attempts`` draws the best window so far is taken.
Kept boxes are those whose centre lies in the window (or, with ``bbox_prune_threshold``, those with
at least that fraction of their area inside it), cut to it. The draws come from the sample's keyed
random stream, so any process computes the same window for the same sample.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, register
from .bbox_layout import check_layout, default_layout, intersections, ious, read_boxes, volumes, write_boxes

OP = "random_bbox_crop"
#: draws beyond which a search with no ``total_num_attempts`` stops with an error (DALI loops forever)
SEARCH_LIMIT = 100_000


def _pairs(name: str, values: Sequence[float], counts: tuple[int, ...]) -> list[tuple[float, float]]:
    flat = [float(v) for v in np.asarray(values, dtype=np.float64).reshape(-1)]
    if len(flat) not in counts:
        raise ArgumentError(f"{OP}: {name} must hold {' or '.join(map(str, counts))} values, got {len(flat)}")
    pairs = list(zip(flat[0::2], flat[1::2]))
    for lo, hi in pairs:
        if lo < 0 or lo > hi:
            raise ArgumentError(f"{OP}: {name} ranges must satisfy 0 <= min <= max, got {values!r}")
    return pairs


@register
class RandomBBoxCrop(Operator):
    """Inputs: boxes (float32 ``(boxes, 4)`` or ``(boxes, 6)`` for 3-D, relative coordinates in
    ``bbox_layout``) and optionally their labels. Outputs: the window's anchor and shape (float32,
    ``[x, y(, z)]`` and ``[w, h(, d)]``, relative; absolute with ``crop_shape``), the kept boxes (same
    layout, relative to the window), their labels when given, and their indices in the input with
    ``output_bbox_indices`` (int32). See the module docstring for the search."""

    schema = Schema(OP, devices=("cpu",), min_inputs=1, max_inputs=2, num_outputs=3,
                    arg_inputs=("crop_shape", "input_shape"))  # fmt: skip

    def configure(
        self,
        thresholds: Sequence[float] = (0.0,),
        aspect_ratio: Sequence[float] = (1.0, 1.0),
        scaling: Sequence[float] = (1.0, 1.0),
        ltrb: bool = True,
        num_attempts: int = 1,
        allow_no_crop: bool | None = None,
        crop_shape: Sequence[int] | None = None,
        input_shape: Sequence[int] | None = None,
        bbox_layout: str | None = None,
        shape_layout: str | None = None,
        output_bbox_indices: bool = False,
        threshold_type: str = "iou",
        all_boxes_above_threshold: bool = True,
        total_num_attempts: int = -1,
        bbox_prune_threshold: float | None = None,
        quiet: bool = False,
    ) -> None:
        self.thresholds = [float(t) for t in np.asarray(thresholds, dtype=np.float64).reshape(-1)]
        if not self.thresholds or any(not 0.0 <= t <= 1.0 for t in self.thresholds):
            raise ArgumentError(f"{OP}: thresholds must be values in [0, 1], got {thresholds!r}")
        self.aspect_ratios = _pairs("aspect_ratio", aspect_ratio, (2, 6))
        self.scaling = _pairs("scaling", scaling, (2,))[0]
        if isinstance(num_attempts, bool) or not isinstance(num_attempts, int) or num_attempts < 1:
            raise ArgumentError(f"{OP}: num_attempts must be a positive int, got {num_attempts!r}")
        self.num_attempts = num_attempts
        if total_num_attempts != -1 and (not isinstance(total_num_attempts, int) or total_num_attempts < 1):
            raise ArgumentError(f"{OP}: total_num_attempts must be a positive int (or -1), got {total_num_attempts!r}")
        self.total_num_attempts = total_num_attempts
        self.fixed = crop_shape is not None or input_shape is not None
        if self.fixed:
            if allow_no_crop:
                raise ArgumentError(f"{OP}: allow_no_crop is incompatible with providing the crop shape explicitly")
            if tuple(aspect_ratio) != (1.0, 1.0) or tuple(scaling) != (1.0, 1.0):
                raise ArgumentError(f"{OP}: aspect_ratio and scaling are incompatible with crop_shape")
        self.allow_no_crop = (not self.fixed) if allow_no_crop is None else bool(allow_no_crop)
        self.crop_shape, self.input_shape = crop_shape, input_shape
        self.ltrb = bool(ltrb)
        self.bbox_layout = bbox_layout or None
        self.shape_layout = shape_layout or None
        self.output_bbox_indices = bool(output_bbox_indices)
        if threshold_type not in ("iou", "overlap"):
            raise ArgumentError(f"{OP}: threshold_type must be 'iou' or 'overlap', got {threshold_type!r}")
        self.threshold_type = threshold_type
        self.all_boxes = bool(all_boxes_above_threshold)
        if bbox_prune_threshold is not None and not 0.0 <= float(bbox_prune_threshold) <= 1.0:
            raise ArgumentError(f"{OP}: bbox_prune_threshold must be in [0, 1], got {bbox_prune_threshold!r}")
        self.prune = None if bbox_prune_threshold is None else np.float32(bbox_prune_threshold)
        self.quiet = bool(quiet)
        self.has_labels = False

    def bind_inputs(self, count, arg_inputs) -> None:
        self.has_labels = count > 1

    @property
    def num_outputs(self) -> int:
        return 3 + self.has_labels + self.output_bbox_indices

    def output_layout(self, input_layouts):
        return ""

    def _shapes(self, args: dict[str, Any], ndim: int) -> tuple[np.ndarray, np.ndarray]:
        """This sample's ``(input_shape, crop_shape)`` as ``[w, h(, d)]`` ints."""
        order = self.shape_layout or "WHD"[:ndim]
        if sorted(order) != sorted("WHD"[:ndim]):
            raise ValueError(f"{OP}: shape_layout must be a permutation of {'WHD'[:ndim]!r}, got {order!r}")
        values = []
        for name in ("input_shape", "crop_shape"):
            given = np.asarray(args.get(name, getattr(self, name))).reshape(-1).astype(np.int64)
            if len(given) != ndim:
                raise ValueError(f"{OP}: {name} must hold {ndim} extents, got {given.tolist()}")
            values.append(np.array([given[order.index(a)] for a in "WHD"[:ndim]], np.int64))
        return values[0], values[1]

    def _fixed_ratios(self, shape: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Extents made to follow the aspect ratios that are fixed (min == max), in a random order,
        then scaled so that the largest extent is kept (DALI's FixAspectRatios)."""
        ndim = len(shape)
        fixed = np.zeros((ndim, ndim), np.float32)
        k = 0
        for d0 in range(ndim):
            for d1 in range(d0 + 1, ndim):
                lo, hi = self.aspect_ratios[k]
                if lo == hi:
                    fixed[d0, d1], fixed[d1, d0] = np.float32(lo), np.float32(1.0 / lo)
                k = (k + 1) % len(self.aspect_ratios)
        if not fixed.any():
            return shape
        order = rng.permutation(ndim)
        largest = shape.max()
        for i0 in range(ndim):
            for i1 in range(i0 + 1, ndim):
                d0, d1 = order[i0], order[i1]
                if fixed[d1, d0] > 0:
                    shape[d1] = shape[d0] * fixed[d1, d0]
        return (largest * shape / shape.max()).astype(np.float32)

    def _valid_ratio(self, shape: np.ndarray) -> bool:
        k = 0
        for i in range(len(shape)):
            for j in range(i + 1, len(shape)):
                lo, hi = self.aspect_ratios[k]
                ratio = np.float32(shape[i] / shape[j])
                if not np.float32(lo) <= ratio <= np.float32(hi):
                    return False
                k = (k + 1) % len(self.aspect_ratios)
        return True

    def _metric(self, lo, hi, crop_lo, crop_hi) -> tuple[float, float]:
        """The smallest and largest overlap of the boxes with the window (0, 0 without boxes)."""
        if not len(lo):
            return 0.0, 0.0
        if self.threshold_type == "iou":
            values = ious(crop_lo[None], crop_hi[None], lo, hi)[0]
        else:
            values = intersections(crop_lo[None], crop_hi[None], lo, hi)[0] / volumes(lo, hi)
        return float(values.min()), float(values.max())

    def _kept(self, lo, hi, crop_lo, crop_hi) -> np.ndarray:
        """The indices of the boxes the window keeps."""
        if self.prune is None:
            centers = (lo + hi) * np.float32(0.5)
            inside = ((centers >= crop_lo) & (centers <= crop_hi)).all(axis=1)
        else:
            inter = intersections(lo, hi, crop_lo[None], crop_hi[None])[:, 0]
            inside = (inter > 0) & (inter / volumes(lo, hi) >= self.prune)
        return np.nonzero(inside)[0]

    def _window(self, rng, ndim, sizes) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """One drawn window: relative ``(lo, hi)`` and output ``(lo, hi)``; None when its extents
        break the aspect ratios."""
        if sizes is not None:
            full, crop = sizes
            # a window larger than the input reaches outside it (a negative anchor), as DALI's: scripts
            # pad it afterwards (slice with out_of_bounds_policy="pad")
            anchor = np.array(
                [rng.integers(min(0, f - c), max(0, f - c) + 1) if f != c else 0 for f, c in zip(full, crop)],
                dtype=np.float32,
            )
            out_lo, out_hi = anchor, anchor + crop.astype(np.float32)
            return anchor / full.astype(np.float32), out_hi / full.astype(np.float32), out_lo, out_hi
        shape = rng.uniform(self.scaling[0], self.scaling[1], ndim).astype(np.float32)
        shape = self._fixed_ratios(shape, rng)
        if not self._valid_ratio(shape):
            return None
        anchor = (rng.uniform(0.0, 1.0, ndim) * (np.float32(1) - shape)).astype(np.float32)
        return anchor, anchor + shape, anchor, anchor + shape

    def compute(self, xp, inputs, args, ctx):
        boxes = np.asarray(inputs[0], dtype=np.float32)
        if boxes.ndim != 2 or boxes.shape[1] not in (4, 6):
            raise ValueError(f"{OP}: expects boxes of shape (boxes, 4) or (boxes, 6), got {boxes.shape}")
        ndim = boxes.shape[1] // 2
        layout = check_layout(OP, self.bbox_layout or default_layout(ndim, self.ltrb), ndim)
        lo, hi = read_boxes(boxes, layout)
        labels = np.asarray(inputs[1]) if self.has_labels else None
        if labels is not None and len(labels) != len(boxes):
            raise ValueError(f"{OP}: {len(boxes)} boxes but {len(labels)} labels")
        sizes = self._shapes(args, ndim) if self.fixed else None
        crop, kept = self._search(self.rng(ctx), lo, hi, ndim, sizes, ctx)
        crop_lo, crop_hi, out_lo, out_hi = crop
        extent = crop_hi - crop_lo
        new_lo = np.clip((lo[kept] - crop_lo) / extent, 0, 1).astype(np.float32)
        new_hi = np.clip((hi[kept] - crop_lo) / extent, 0, 1).astype(np.float32)
        outs = [out_lo.astype(np.float32), (out_hi - out_lo).astype(np.float32), write_boxes(new_lo, new_hi, layout)]
        if labels is not None:
            outs.append(labels[kept].copy())
        if self.output_bbox_indices:
            outs.append(kept.astype(np.int32))
        return tuple(outs)

    def _search(self, rng, lo, hi, ndim, sizes, ctx):
        """The chosen window and the indices of the boxes it keeps (DALI's FindProspectiveCrop)."""
        options = [*self.thresholds, *([None] if self.allow_no_crop else [])]
        count, best_metric, best = 0, -1.0, None
        limit = self.total_num_attempts if self.total_num_attempts > 0 else SEARCH_LIMIT
        while count < limit:
            threshold = options[int(rng.integers(0, len(options)))]
            if threshold is None:
                zero, one = np.zeros(ndim, np.float32), np.ones(ndim, np.float32)
                out_hi = one if sizes is None else sizes[0].astype(np.float32)
                return (zero, one, zero, out_hi), np.arange(len(lo))
            for _ in range(self.num_attempts):
                count += 1
                window = self._window(rng, ndim, sizes)
                if window is None:
                    continue
                worst, most = self._metric(lo, hi, window[0], window[1])
                metric = worst if self.all_boxes else most
                valid = metric >= threshold
                if metric <= best_metric and not valid:
                    continue
                best_metric = metric
                kept = self._kept(lo, hi, window[0], window[1])
                best = (window, kept)
                if valid and len(kept):
                    return best
        if best is None or self.total_num_attempts <= 0:
            raise ValueError(
                f"{OP}: sample {ctx.sample_index}: no crop window satisfies the arguments after {count} attempts "
                "(give total_num_attempts, allow_no_crop=True or a threshold of 0)"
            )
        if not self.quiet:
            warnings.warn(
                f"{OP}: could not find a valid cropping window in {count} attempts; "
                f"using the best one so far (best_metric={best_metric})",
                stacklevel=2,
            )
        return best
