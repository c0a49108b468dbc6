"""``resize``: resize HWC images with DALI's sizing arguments and interpolations.

Linear (the default, antialiased) on the host is Pillow's ``BILINEAR`` resize (it releases the GIL),
cubic Pillow's ``BICUBIC``, Lanczos its ``LANCZOS``, nearest a gather of rows and columns equal to DALI's; the GPU stage
applies the same filters as two matrix products (:mod:`.resample`), within two grey levels of Pillow
on uint8 images. ``save_attrs=True`` adds DALI's second output: each input's height and width (int32).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image

from ..errors import ArgumentError
from ..kernels import launch
from ..operator import Operator, Schema, register
from ..types import DALIImageType, to_numpy_dtype
from .axes import per_sample
from .frames import as_frames, as_sequences
from .host_resize import backend as host_resize_backend
from .host_resize import resize as host_resize
from .host_resize import resize_linear
from .resample import (
    CUBIC,
    LANCZOS,
    LINEAR,
    NEAREST,
    RESIZE_FILTERS,
    cast_to,
    check_hwc,
    hwc_shapes,
    interp_filters,
    pillow_applies,
    resample,
    resize_nearest,
)
from .volume_resize import resize_volume, volume_axes, volume_size

MODES = ("default", "stretch", "not_smaller", "not_larger")


#: Pillow's resampling for each filter its antialiased resize computes as :mod:`.resample` does.
_PILLOW = {LINEAR: Image.Resampling.BILINEAR, CUBIC: Image.Resampling.BICUBIC, LANCZOS: Image.Resampling.LANCZOS}


def output_size(
    in_w: int,
    in_h: int,
    resize_x: float | None = None,
    resize_y: float | None = None,
    resize_shorter: float | None = None,
    resize_longer: float | None = None,
    mode: str = "default",
    max_size: tuple[float | None, float | None] = (None, None),
) -> tuple[int, int]:
    """The ``(width, height)`` DALI's resize produces for a ``in_w`` x ``in_h`` image.

    ``resize_shorter``/``resize_longer`` scale the shorter/longer side to the value
    keeping the aspect ratio. Otherwise ``"default"`` scales a missing extent by the
    given one's factor, ``"stretch"`` leaves it as it is, and ``"not_smaller"`` /
    ``"not_larger"`` keep the aspect ratio with both sides at least / at most the
    requested ones; with every size unset (0) the image keeps its size. ``max_size``
    (width, height; None: no limit) caps the result as DALI does: by lowering the
    common scale where the aspect ratio is kept, extent by extent otherwise. Sizes
    round half up and are at least 1.
    """
    sizes = output_sizes(
        np.array([in_w]), np.array([in_h]), resize_x, resize_y, resize_shorter, resize_longer, mode, max_size
    )
    return int(sizes[0, 0]), int(sizes[0, 1])


def output_sizes(
    in_w: np.ndarray,
    in_h: np.ndarray,
    resize_x: float | None = None,
    resize_y: float | None = None,
    resize_shorter: float | None = None,
    resize_longer: float | None = None,
    mode: str = "default",
    max_size: tuple[float | None, float | None] = (None, None),
) -> np.ndarray:
    """:func:`output_size` for arrays of input sizes at once: an ``(n, 2)`` int64 array of
    ``(width, height)`` (float64 arithmetic, the same as Python's on each sample)."""
    in_w, in_h = np.asarray(in_w, np.float64), np.asarray(in_h, np.float64)
    if resize_x is None and resize_y is None and resize_shorter is None and resize_longer is None:
        return _round_sizes(in_w, in_h)  # every size 0 (unset): the input's size, whatever max_size, as DALI
    limits = [limit / extent for limit, extent in zip(max_size, (in_w, in_h), strict=True) if limit is not None]
    if resize_shorter is not None or resize_longer is not None:
        if resize_shorter is not None:
            scale = resize_shorter / np.minimum(in_w, in_h)
        else:
            scale = resize_longer / np.maximum(in_w, in_h)
        scale = np.minimum.reduce([scale, *limits])
        return _round_sizes(in_w * scale, in_h * scale)
    scales = [size / extent for size, extent in ((resize_x, in_w), (resize_y, in_h)) if size is not None]
    if mode == "stretch" or (mode == "default" and len(scales) != 1):
        width = np.full_like(in_w, resize_x) if resize_x is not None else in_w
        height = np.full_like(in_h, resize_y) if resize_y is not None else in_h
    elif mode == "default":
        width, height = in_w * scales[0], in_h * scales[0]
    else:
        scale = np.minimum.reduce(scales) if mode == "not_larger" else np.maximum.reduce(scales)
        scale = np.minimum.reduce([scale, *limits])
        return _round_sizes(in_w * scale, in_h * scale)
    width, height = (np.minimum(v, limit) if limit is not None else v for v, limit in zip((width, height), max_size))
    return _round_sizes(width, height)


def _round_sizes(width: np.ndarray, height: np.ndarray) -> np.ndarray:
    """Sizes rounded half up, at least 1, as ``(n, 2)`` int64 columns."""
    return np.maximum(1, np.floor(np.stack([width, height], axis=1) + 0.5)).astype(np.int64)


def _roi_point(op: str, name: str, value: Any) -> tuple[float, float]:
    """A region's corner ``[y, x]`` as two floats."""
    values = np.asarray(value, dtype=np.float64).reshape(-1)
    if values.size != 2 or not np.isfinite(values).all():
        raise ArgumentError(f"{op}: {name} is [y, x] (images; volumes take no region here), got {value!r}")
    return float(values[0]), float(values[1])


def _either(a: tuple[bool, bool], b: tuple[bool, bool]) -> tuple[bool, bool]:
    """Two flips of the axes (y, x) in turn: an axis flipped twice is not flipped."""
    return a[0] != b[0], a[1] != b[1]


def _flipped(out: Any, flips: tuple[bool, bool]) -> Any:
    """``out`` (HWC) reversed along the flipped axes (y, x)."""
    if not any(flips):
        return out
    return out[:: -1 if flips[0] else 1, :: -1 if flips[1] else 1]


def _per_axis(op: str, name: str, value: Any) -> tuple[float | None, float | None]:
    """DALI's ``size`` / ``max_size``: one number for both extents or ``[height, width]`` (the
    layout's order); an extent of 0 or less is left unset. Returned as ``(width, height)``."""
    values = _two_values(op, name, value)
    height, width = (float(v) if v > 0 else None for v in values)
    return width, height


def _signed_size(op: str, value: Any) -> tuple[float | None, float | None, tuple[bool, bool]]:
    """DALI's ``size`` as ``(width, height)`` and the flips ``(y, x)``: a negative extent flips that
    axis, as in DALI, and sizes it by its magnitude; 0 leaves it unset."""
    height, width = _two_values(op, "size", value)
    return (abs(float(width)) or None), (abs(float(height)) or None), (height < 0, width < 0)


def _two_values(op: str, name: str, value: Any) -> list:
    values = [value, value] if not isinstance(value, (list, tuple, np.ndarray)) else list(value)
    if len(values) != 2 or any(isinstance(v, bool) or not isinstance(v, (int, float, np.number)) for v in values):
        raise ArgumentError(f"{op}: {name} must be a number or [height, width], got {value!r}")
    return values


def _volume_wanted(
    op: str, size: Any, resize_x: Any, resize_y: Any, resize_z: float | None
) -> tuple[float | None, ...]:
    """A volume's wanted ``(d, h, w)`` from ``size`` = ``[d, h, w]`` (0: unset) or ``resize_z``/``_y``/``_x``."""
    if size is not None:
        if resize_x is not None or resize_y is not None or resize_z is not None:
            raise ArgumentError(f"{op}: size cannot be combined with resize_x, resize_y or resize_z")
        return _volume_size_values(op, size)
    return resize_z, _size_arg(op, "resize_y", resize_y), _size_arg(op, "resize_x", resize_x)


def _volume_size_values(op: str, size: Any) -> tuple[float | None, ...]:
    """A volume's ``size`` (0: unset); a negative extent, a flip in DALI, is refused here."""
    values = np.asarray(size, np.float64).reshape(-1)
    if (values < 0).any():
        raise ArgumentError(f"{op}: a volume's size {values.tolist()} has a negative extent (a flip: use fn.flip)")
    return tuple(float(v) if v > 0 else None for v in values)


def _signed_size_arg(op: str, name: str, value: float | None) -> tuple[float | None, bool]:
    """``resize_x`` / ``resize_y``: a negative size flips that axis, as in DALI, and sizes it by its
    magnitude; returns the size (:func:`_size_arg`) and whether it flips."""
    negative = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool) and value < 0
    return _size_arg(op, name, -value if negative else value), negative


def _size_arg(op: str, name: str, value: float | None) -> float | None:
    """A size: None or 0 (DALI's default) is not given."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or not value >= 0:
        raise ArgumentError(f"{op}: {name} must be a positive number (0: not given), got {value!r}")
    return float(value) if value > 0 else None


def check_temp_buffer_hint(op: str, value: Any) -> int:
    """``temp_buffer_hint``: a byte count DALI sizes a scratch buffer with (no pixel changes)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ArgumentError(f"{op}: temp_buffer_hint must be a non-negative int, got {value!r}")
    return int(value)


def check_minibatch_size(op: str, value: Any) -> int:
    """``minibatch_size``: how many images DALI's GPU kernels take per launch (no pixel changes)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ArgumentError(f"{op}: minibatch_size must be a positive int, got {value!r}")
    return int(value)


def host_resample(
    image: np.ndarray,
    width: int,
    height: int,
    filters: tuple[int, int],
    antialias: bool,
    dtype: np.dtype | None,
    box: tuple[float, float, float, float] | None = None,
) -> np.ndarray:
    """Resize HWC ``image`` (its ``box``) on the host the fastest way that gives :func:`resample`'s
    result: a gather for nearest, Pillow (or torch) for antialiased uint8 linear or cubic, torch for
    uint8 linear without antialiasing (within one grey level), else the matrix products."""
    if box is not None and tuple(box) == (0, 0, image.shape[1], image.shape[0]):
        box = None
    if filters == (NEAREST, NEAREST):
        out = resize_nearest(image, width, height, box)
        return out if dtype is None else cast_to(np, out, np.dtype(dtype))
    if pillow_applies(image, dtype, antialias) and filters[0] == filters[1] and filters[0] in _PILLOW:
        if box is None and (width, height) == (image.shape[1], image.shape[0]):
            return image
        return host_resize(image, width, height, box=box, method=_PILLOW[filters[0]])
    if filters == (LINEAR, LINEAR) and box is None and image.dtype == np.uint8 and dtype in (None, np.uint8):
        out = resize_linear(image, width, height)
        if out is not None:
            return out
    return resample(np, image, width, height, box=box, antialias=antialias, dtype=dtype, filters=filters)


#: the sizes DALI also takes per sample (a DataNode)
SIZE_INPUTS = ("size", "resize_x", "resize_y", "resize_shorter", "resize_longer")


def _sample_sizes(op: str, args: dict[str, Any]) -> tuple[dict[str, float | None], dict[str, bool]]:
    """An image's per-sample sizes (``resize_x``, ``resize_y``, ``resize_shorter``,
    ``resize_longer``) from its argument inputs, 0 leaving an extent unset, and the axes (``y``,
    ``x``) that a negative ``resize_x``/``resize_y``/``size`` flips, as in DALI."""
    values: dict[str, float | None] = {}
    flips: dict[str, bool] = {}
    for name in ("resize_x", "resize_y", "resize_shorter", "resize_longer"):
        if name not in args:
            continue
        value = float(np.asarray(per_sample(args[name])).reshape(-1)[0])
        if name in ("resize_x", "resize_y"):
            flips[name[-1]] = value < 0
            value = abs(value)
        elif value < 0:
            raise ValueError(f"{op}: {name} must not be negative, got {value}")
        values[name] = value if value > 0 else None
    if "size" in args:
        given = np.asarray(per_sample(args["size"]), np.float64).reshape(-1)
        if len(given) not in (1, 2):
            raise ValueError(f"{op}: an image's size is one number or [height, width], got {given.tolist()}")
        values["resize_x"], values["resize_y"], (flips["y"], flips["x"]) = _signed_size(op, given.tolist())
    return values, flips


@register
class Resize(Operator):
    """Resize HWC images (antialiased linear by default, or ``interp_type`` / ``min_filter`` /
    ``mag_filter``); see :func:`output_size` for the sizing rules."""

    schema = Schema("resize", devices=("cpu", "gpu"), arg_inputs=(*SIZE_INPUTS, "roi_start", "roi_end"))

    def preload(self) -> None:
        host_resize_backend()

    def configure(
        self,
        resize_x: float | None = None,
        resize_y: float | None = None,
        resize_shorter: float | None = None,
        resize_longer: float | None = None,
        resize_z: float | None = None,
        mode: str = "default",
        size: float | Sequence[float] | None = None,
        max_size: float | Sequence[float] | None = None,
        antialias: bool = True,
        interp_type=None,
        min_filter=None,
        mag_filter=None,
        dtype=None,
        temp_buffer_hint: int = 0,
        minibatch_size: int = 32,
        save_attrs: bool = False,
        image_type: DALIImageType | None = None,
        roi_start: Sequence[float] | None = None,
        roi_end: Sequence[float] | None = None,
        roi_relative: bool = False,
        subpixel_scale: bool = True,
    ) -> None:
        """A region of interest (``roi_start``, ``roi_end``: ``[y, x]``, in pixels or with
        ``roi_relative`` in fractions of the image; per sample too) is what is resized, and sizes
        are computed from its extent; an end before its start flips that axis, as in DALI.
        ``subpixel_scale`` is validated and changes nothing: sizes computed from a scale always map
        the whole region onto the rounded size (DALI's ``False``; its default, ``True``, moves the
        region by the rounding's fraction of a pixel).
        ``temp_buffer_hint`` (DALI's scratch-buffer size), ``minibatch_size`` (images per launch of
        DALI's GPU kernels) and ``image_type`` (deprecated and unused in DALI) are validated and
        change nothing; ``save_attrs`` adds the second output. Volumes
        (:mod:`.volume_resize`) take ``resize_z`` or a three-value ``size`` (also per sample)."""
        op = self.schema.name
        self.resize_z = _size_arg(op, "resize_z", resize_z)
        self.volume_wanted: tuple[float | None, ...] | None = None
        if (size is not None and np.size(size) == 3) or (size is None and self.resize_z is not None):
            self.volume_wanted = _volume_wanted(op, size, resize_x, resize_y, self.resize_z)
            size, resize_x, resize_y = None, resize_x or 1, resize_y or 1
        if image_type is not None and not isinstance(image_type, DALIImageType):
            raise ArgumentError(f"{op}: image_type must be a types.DALIImageType, got {image_type!r}")
        self.resize_x, flip_x = _signed_size_arg(op, "resize_x", resize_x)
        self.resize_y, flip_y = _signed_size_arg(op, "resize_y", resize_y)
        self.resize_shorter = _size_arg(op, "resize_shorter", resize_shorter)
        self.resize_longer = _size_arg(op, "resize_longer", resize_longer)
        if size is not None:
            if resize_x is not None or resize_y is not None:
                raise ArgumentError(f"{op}: size cannot be combined with resize_x or resize_y")
            self.resize_x, self.resize_y, (flip_y, flip_x) = _signed_size(op, size)
        #: the axes (y, x) a negative size flips, as in DALI
        self.flips = (flip_y, flip_x)
        self.max_size = _per_axis(op, "max_size", max_size) if max_size is not None else (None, None)
        if mode not in MODES:
            raise ArgumentError(f"{op}: mode must be one of {MODES}, got {mode!r}")
        given = [n for n in ("resize_x", "resize_y", "resize_shorter", "resize_longer") if getattr(self, n) is not None]
        # a size given as 0 counts: with every size 0 the input keeps its size, as in DALI
        self._sized = any(v is not None for v in (resize_x, resize_y, resize_shorter, resize_longer, size))
        self._sized = self._sized or self.volume_wanted is not None
        side = [n for n in given if n in ("resize_shorter", "resize_longer")]
        if side and (len(given) > 1 or mode != "default"):
            raise ArgumentError(
                f"{op}: {side[0]} cannot be combined with other sizes or a mode (got {given}, mode={mode!r})"
            )
        self.mode = mode
        # both extents given without keeping the aspect ratio: every input gets this size
        self._fixed_size = (
            output_size(1, 1, self.resize_x, self.resize_y, mode=mode, max_size=self.max_size)
            if self.resize_x is not None and self.resize_y is not None and mode in ("default", "stretch")
            else None
        )
        self.antialias = bool(antialias)
        self.filters = interp_filters(op, RESIZE_FILTERS, interp_type, min_filter, mag_filter)
        check_temp_buffer_hint(op, temp_buffer_hint)
        check_minibatch_size(op, minibatch_size)
        for name, flag in (("roi_relative", roi_relative), ("subpixel_scale", subpixel_scale)):
            if not isinstance(flag, (bool, np.bool_)):
                raise ArgumentError(f"{op}: {name} must be a bool, got {flag!r}")
        self.roi_relative = bool(roi_relative)
        self.roi_start = _roi_point(op, "roi_start", roi_start) if roi_start is not None else None
        self.roi_end = _roi_point(op, "roi_end", roi_end) if roi_end is not None else None
        self.has_roi = roi_start is not None or roi_end is not None
        if self.has_roi and self.volume_wanted is not None:
            raise ArgumentError(f"{op}: a region of interest (roi_start, roi_end) is not supported for volumes")
        if not isinstance(save_attrs, (bool, np.bool_)):
            raise ArgumentError(f"{op}: save_attrs must be a bool, got {save_attrs!r}")
        self.save_attrs = bool(save_attrs)
        try:
            self.dtype = to_numpy_dtype(dtype) if dtype is not None else None
        except ValueError:
            raise ArgumentError(f"{op}: unknown dtype {dtype!r}") from None
        self.layout = ""

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        """The input's layout; a volume's (naming ``D``) is kept to find its axes, and a sequence's
        (``FHWC``) says that every frame of a sample is resized as an image, as DALI does."""
        given = input_layouts[0] if input_layouts else ""
        if "D" in given:
            self.layout = given
        if given == "FHWC":
            self.sequence = True
        elif given.startswith("F"):
            raise ArgumentError(f"{self.schema.name}: sequences must be FHWC, got layout {given!r}")
        return given

    #: whether the input is a sequence of frames (FHWC), as the graph reported its layout
    sequence = False

    def _frames(self, xp, frames, resize_one) -> Any:
        """Every frame of an FHWC sample through ``resize_one`` (an HWC image to its resized
        array, or with ``save_attrs`` to that and the frame's size), stacked."""
        if frames.ndim != 4 or not frames.shape[0]:
            raise ValueError(f"{self.schema.name}: expects FHWC sequences with frames, got shape {tuple(frames.shape)}")
        outs = [resize_one(frame) for frame in frames]
        if not self.save_attrs:
            return xp.stack(outs)
        return xp.stack([out for out, _ in outs]), outs[0][1]

    def _volume(self, xp, image, args) -> Any | None:
        """The resized volume, or None when ``image`` is not a volume (:func:`volume_axes`)."""
        axes = volume_axes(self.layout, image.ndim)
        if axes is None:
            return None
        if any(name in args for name in SIZE_INPUTS[1:]):
            raise ValueError(
                "resize: volumes take a per-sample size=[d, h, w], not per-sample resize_x/_y/_shorter/_longer"
            )
        if self.max_size != (None, None) or self.resize_shorter is not None or self.resize_longer is not None:
            raise ValueError("resize: max_size, resize_shorter and resize_longer are not supported for volumes")
        wanted = self.volume_wanted
        if "size" in args:
            wanted = _volume_size_values(self.schema.name, per_sample(args["size"]))
        if wanted is None or len(wanted) != 3:
            raise ValueError(f"resize: a volume of shape {tuple(image.shape)} needs size=[d, h, w] or resize_z")
        out_size, windows = volume_size([image.shape[a] for a in axes], wanted, self.mode)
        out = resize_volume(xp, image, axes, out_size, self.filters, self.antialias, self.dtype, windows)
        if not self.save_attrs:
            return out
        return out, xp.asarray(np.array([image.shape[a] for a in axes], np.int32))

    def bind_inputs(self, count, arg_inputs) -> None:
        """A size is required: a static one, or ``size`` per sample; ``roi_start`` and ``roi_end``
        come together."""
        if not self._sized and not set(SIZE_INPUTS) & set(arg_inputs):
            raise ArgumentError(
                f"{self.schema.name}: give resize_x and/or resize_y, or size, or resize_shorter, or resize_longer"
            )
        given = [n for n in ("roi_start", "roi_end") if getattr(self, n) is not None or n in arg_inputs]
        if len(given) == 1:
            raise ArgumentError(f"{self.schema.name}: roi_start and roi_end go together, got only {given[0]}")
        self.has_roi = bool(given)

    @property
    def num_outputs(self) -> int:
        """Two with ``save_attrs`` (the images and their input sizes), else one."""
        return 2 if self.save_attrs else 1

    def fixed_output_size(self) -> tuple[int, int] | None:
        """``(width, height)`` when every output has that size whatever the input and the result
        is Pillow's antialiased bilinear uint8 resize of the input alone (so a decoder may do it
        instead), else None."""
        if (
            self._fixed_size is None
            or self.has_roi
            or any(self.flips)
            or not self.antialias
            or self.save_attrs
            or self.filters != (LINEAR, LINEAR)
            or self.dtype not in (None, np.dtype(np.uint8))
        ):
            return None
        return self._fixed_size

    def target_size(self, in_w: int, in_h: int) -> tuple[int, int]:
        """The output ``(width, height)`` for an ``in_w`` x ``in_h`` input."""
        if self._fixed_size is not None:
            return self._fixed_size
        return output_size(
            in_w, in_h, self.resize_x, self.resize_y, self.resize_shorter, self.resize_longer, self.mode, self.max_size
        )

    def _sample_target(self, in_w: int, in_h: int, args: dict[str, Any]) -> tuple[int, int, tuple[bool, bool]]:
        """:meth:`target_size` with this sample's own sizes where they are given per sample, and the
        axes (y, x) its sizes flip (a negative size, this sample's where given per sample)."""
        if not args:  # no per-sample arguments: the usual case
            return (*self.target_size(in_w, in_h), self.flips)
        given, flips = _sample_sizes(self.schema.name, args)
        flipped = (flips.get("y", self.flips[0]), flips.get("x", self.flips[1]))
        if not given:
            return (*self.target_size(in_w, in_h), flipped)
        sizes = {name: getattr(self, name) for name in ("resize_x", "resize_y", "resize_shorter", "resize_longer")}
        sizes.update(given)
        if "size" in args and (sizes["resize_shorter"] is not None or sizes["resize_longer"] is not None):
            raise ValueError(f"{self.schema.name}: size cannot be combined with resize_shorter or resize_longer")
        return (*output_size(in_w, in_h, **sizes, mode=self.mode, max_size=self.max_size), flipped)

    def target_sizes(self, in_w: np.ndarray, in_h: np.ndarray) -> np.ndarray:
        """:meth:`target_size` of a whole batch: ``(n, 2)`` (width, height) for arrays of input sizes."""
        if self._fixed_size is not None:
            return np.broadcast_to(np.asarray(self._fixed_size, np.int64), (len(in_w), 2))
        return output_sizes(
            in_w, in_h, self.resize_x, self.resize_y, self.resize_shorter, self.resize_longer, self.mode, self.max_size
        )

    def compute(self, xp, inputs, args, ctx):
        image = inputs[0]
        if self.sequence:
            return self._frames(xp, image, lambda frame: self._image(xp, frame, args))
        volume = self._volume(xp, image, args)
        if volume is not None:
            return volume
        return self._image(xp, image, args)

    def run_sample(self, inputs, args, ctx):
        image = inputs[0]
        if self.sequence:
            return self._frames(np, image, lambda frame: self._host_image(frame, args))
        volume = self._volume(np, image, args)
        if volume is not None:
            return volume
        return self._host_image(image, args)

    def _image(self, xp, image, args: dict[str, Any]) -> Any:
        """One HWC image (its region of interest) resized with the array module ``xp``."""
        check_hwc(self.schema.name, image)
        box, region_flips = self._region(image, args)
        width, height, size_flips = self._sample_target(box[2] - box[0], box[3] - box[1], args)
        box = None if box == (0, 0, image.shape[1], image.shape[0]) else box
        out = resample(xp, image, width, height, box, antialias=self.antialias, dtype=self.dtype, filters=self.filters)
        return self._with_attrs(xp, _flipped(out, _either(region_flips, size_flips)), image)

    def _host_image(self, image: np.ndarray, args: dict[str, Any]) -> Any:
        """One HWC image (its region of interest) resized on the host (Pillow's filters for uint8)."""
        check_hwc(self.schema.name, image)
        box, region_flips = self._region(image, args)
        width, height, size_flips = self._sample_target(box[2] - box[0], box[3] - box[1], args)
        box = None if box == (0, 0, image.shape[1], image.shape[0]) else box
        out = host_resample(image, width, height, self.filters, self.antialias, self.dtype, box)
        return self._with_attrs(np, _flipped(out, _either(region_flips, size_flips)), image)

    def _region(self, image: Any, args: dict[str, Any]) -> tuple[tuple[float, float, float, float], tuple[bool, bool]]:
        """The box ``(x0, y0, x1, y1)`` of the image that is resized (all of it without a region of
        interest) and whether each axis (y, x) is flipped (a region's end before its start)."""
        in_h, in_w = image.shape[:2]
        start = (
            _roi_point(self.schema.name, "roi_start", per_sample(args["roi_start"]))
            if "roi_start" in args
            else self.roi_start
        )
        end = (
            _roi_point(self.schema.name, "roi_end", per_sample(args["roi_end"])) if "roi_end" in args else self.roi_end
        )
        if start is None:
            return (0, 0, in_w, in_h), (False, False)
        if self.roi_relative:
            start, end = (start[0] * in_h, start[1] * in_w), (end[0] * in_h, end[1] * in_w)
        (y0, x0), (y1, x1) = start, end
        box = (min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1))
        if box[0] < 0 or box[1] < 0 or box[2] > in_w or box[3] > in_h or box[2] == box[0] or box[3] == box[1]:
            raise ValueError(
                f"{self.schema.name}: the region of interest from {list(start)} to {list(end)} ([y, x]) is empty "
                f"or reaches outside the image of {in_h}x{in_w}"
            )
        return box, (y1 < y0, x1 < x0)

    def _with_attrs(self, xp, out: Any, image: Any) -> Any:
        """``out``, and with ``save_attrs`` the input's ``[height, width]`` as int32 (DALI's second output)."""
        if not self.save_attrs:
            return out
        return out, xp.asarray(np.array(image.shape[:2], np.int32))

    def run_batch(self, xp, inputs, args, ctxs):
        """The whole batch through the resampling kernels (:mod:`raypipe.kernels.resample`: one
        launch per separable pass) when they can take it, else sample by sample.

        Tolerance against :meth:`run_sample`: uint8 images within 2 grey levels of Pillow with a
        mean difference below 0.1 (Pillow's fixed-point weights against float32 ones: a value next
        to a rounding boundary may move one level in each pass); for other types, where
        :meth:`run_sample` is :meth:`compute`, integers within 1, float32 within 1e-5 relative plus
        1e-4 absolute (0..255 data), float16 within one float16 step (only the order of the float32
        accumulation differs).
        """
        batch = inputs[0]
        # a batch holds samples of one dimensionality (as in DALI): its first says whether they are volumes
        volumes = not self.sequence and len(batch) and volume_axes(self.layout, batch[0].ndim) is not None
        if args or self.has_roi or volumes or any(self.flips):  # per-sample sizes, regions, flips, volumes: one by one
            return super().run_batch(xp, inputs, args, ctxs)
        if self.sequence:  # the frames of every sequence through the kernels at once
            if self.save_attrs or not launch.available(xp, 2 * launch.elements(batch)):
                return super().run_batch(xp, inputs, args, ctxs)
            frames, counts = as_frames(xp, batch, "resize")
            done = self._kernels(xp, frames)
            return super().run_batch(xp, inputs, args, ctxs) if done is None else as_sequences(done[0], counts)
        done = self._kernels(xp, batch)
        if done is None:
            return super().run_batch(xp, inputs, args, ctxs)
        out, shapes = done
        if not self.save_attrs:
            return out
        return out, [xp.asarray(shape[:2].astype(np.int32)) for shape in shapes]

    def _kernels(self, xp, batch) -> tuple[Any, np.ndarray] | None:
        """HWC images through the resampling kernels, with their input shapes; None when the
        kernels cannot take the batch."""
        shapes = hwc_shapes("resize", batch)
        sizes = self.target_sizes(shapes[:, 1], shapes[:, 0])
        in_dtype = launch.uniform_dtype(batch)
        out_dtype = self.dtype if self.dtype is not None else in_dtype
        out_elements = int((sizes[:, 0] * sizes[:, 1] * shapes[:, 2]).sum())
        if (
            in_dtype is None
            or in_dtype.kind not in "iuf"
            or launch.store_rule(out_dtype) is None
            or not launch.available(xp, launch.elements(batch) + out_elements)
        ):
            return None
        from ..kernels.resample import resample_batch

        packed = launch.pack(xp, batch, "resize")
        out = resample_batch(xp, packed, sizes, antialias=self.antialias, dtype=out_dtype, filters=self.filters)
        return out, shapes
