"""``crop_mirror_normalize``: crop, flip, normalize, convert and lay out HWC images in one pass.

``out = (in - mean) / std * scale + shift``, converted to ``dtype`` (rounded and
saturated for integer types) and written as ``output_layout`` ("CHW", DALI's default,
or "HWC"). Sequences of frames (``FHWC``) take one window and one mirror flag per sample for all
their frames and are written as "FCHW", "FHWC" or "CFHW", as DALI's. Volumes (``DHWC``) are cut
along depth too (``crop_d``, ``crop_pos_z``), then go as sequences of their depth slices, written
as "DHWC", "CDHW" or "DCHW". This is the last step of
every ImageNet training pipeline, so the host path reads the input exactly once: crop and mirror
are slicing views, the layout change is a transposed view, and ``np.subtract`` writes the float32
result straight into the output buffer, which is then scaled in place (about 8x faster than the
naive expression with its temporaries).
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from ..batch_buffers import Allocate
from ..errors import ArgumentError
from ..kernels import launch
from ..operator import Operator, Schema, as_scalar, check_number, register
from ..types import FLOAT, DALIDataType, DALIImageType
from .batch_args import batch_values
from .cast import parse_dtype, saturate_cast
from .crop import anchor, check_position, check_rounding, crop_anchors, crop_window
from .frames import as_frames, as_sequences, per_frame

_OP = "crop_mirror_normalize"
_POLICIES = ("error", "pad", "trim_to_shape")
_LAYOUTS = ("CHW", "HWC")
#: the output layouts of a sequence (``FHWC`` input), each with the layout of its frames
_SEQUENCE_LAYOUTS = {"FCHW": "CHW", "FHWC": "HWC", "CFHW": "CHW"}
#: the output layouts of a volume (``DHWC`` input), each with the sequence layout it is made as
_VOLUME_LAYOUTS = {"DCHW": "FCHW", "DHWC": "FHWC", "CDHW": "CFHW"}


def _uniform_rank(batch: Any) -> bool:
    """Whether every sample has the same number of dimensions (always, for a packed batch or an array)."""
    if isinstance(batch, launch.Packed) or hasattr(batch, "ndim"):
        return True
    return len({sample.ndim for sample in batch}) == 1


def _crop_size(crop: Any) -> tuple[int, ...]:
    """``(height, width)`` or ``(depth, height, width)`` from two or three sizes, fractional ones
    truncated, as DALI's."""
    if (
        not isinstance(crop, Sequence)
        or len(crop) not in (2, 3)
        or not all(
            isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) and v >= 1 for v in crop
        )
    ):
        raise ArgumentError(
            f"{_OP}: crop must be two positive ints (height, width) or three (depth, height, width), got {crop!r}"
        )
    return tuple(int(v) for v in crop)


def channel_values(name: str, value: Any, op: str = _OP) -> np.ndarray:
    """A scalar or per-channel list (``mean``, ``std``) as a 1-D float32 array of finite numbers;
    ArgumentError naming ``op`` and the argument otherwise."""
    try:
        values = np.asarray(value, dtype=np.float32).reshape(-1)
    except (TypeError, ValueError):
        raise ArgumentError(f"{op}: {name} must be a number or a list of per-channel numbers, got {value!r}") from None
    if values.size == 0 or not np.all(np.isfinite(values)):
        raise ArgumentError(f"{op}: {name} must hold one or more finite numbers, got {value!r}")
    return values


def _padded_channels(channels: int) -> int:
    """The next power of two (3 -> 4), as DALI's ``pad_output``."""
    return 1 << (channels - 1).bit_length()


def _padded_channels_of(channels: np.ndarray) -> np.ndarray:
    """:func:`_padded_channels` of an int array."""
    return np.left_shift(1, np.ceil(np.log2(channels)).astype(np.int64))


@register
class CropMirrorNormalize(Operator):
    """Crop to ``crop`` (h, w) at ``crop_pos_x``/``crop_pos_y``, flip horizontally when
    ``mirror``, compute ``(in - mean) / std * scale + shift`` and write ``dtype`` in
    ``output_layout``; ``pad_output`` pads the channels with zeros to a power of two. A volume's
    window is ``crop_d`` deep at ``crop_pos_z`` (images ignore both, as DALI's)."""

    schema = Schema(_OP, devices=("cpu", "gpu"), arg_inputs=("mirror", "crop_pos_x", "crop_pos_y", "crop_pos_z"))

    def configure(
        self,
        crop: Sequence[int] | None = None,
        crop_h: int | None = None,
        crop_w: int | None = None,
        crop_pos_x: float = 0.5,
        crop_pos_y: float = 0.5,
        crop_d: int | None = None,
        crop_pos_z: float = 0.5,
        mirror: int = 0,
        mean: float | Sequence[float] = 0.0,
        std: float | Sequence[float] = 1.0,
        scale: float = 1.0,
        shift: float = 0.0,
        dtype: DALIDataType | np.dtype | str | None = None,
        output_layout: str = "CHW",
        pad_output: bool = False,
        output_dtype: DALIDataType | np.dtype | str | None = None,
        image_type: DALIImageType | None = None,
        out_of_bounds_policy: str = "error",
        fill_values: float | Sequence[float] = 0.0,
        rounding: str = "round",
    ) -> None:
        """``output_dtype`` is DALI's deprecated alias of ``dtype`` (default ``types.FLOAT``);
        ``rounding`` rounds the window's anchor (:func:`.crop.anchor`);
        ``image_type``, deprecated and unused in DALI, is validated and changes nothing.
        ``out_of_bounds_policy``: a window reaching outside the image is an error (``"error"``),
        filled with ``fill_values`` (``"pad"``: output values, one for all output channels or one
        per output channel), or cut to the image (``"trim_to_shape"``), as DALI's."""
        if dtype is not None and output_dtype is not None:
            raise ArgumentError(f"{_OP}: dtype and its deprecated alias output_dtype cannot be used together")
        if image_type is not None and not isinstance(image_type, DALIImageType):
            raise ArgumentError(f"{_OP}: image_type must be a types.DALIImageType, got {image_type!r}")
        dtype = dtype if dtype is not None else output_dtype if output_dtype is not None else FLOAT
        crop_d = None if crop_d is None or (not isinstance(crop_d, bool) and crop_d == 0) else crop_d  # 0: not set
        if crop_h is not None or crop_w is not None:
            if crop is not None or crop_h is None or crop_w is None:
                raise ArgumentError(f"{_OP}: give crop=(h, w) or both crop_h and crop_w, not a mix")
            crop = (crop_h, crop_w) if crop_d is None else (crop_d, crop_h, crop_w)
        elif crop_d is not None:
            raise ArgumentError(f"{_OP}: crop_d needs crop_h and crop_w (or crop=(d, h, w))")
        sizes = None if crop is None else _crop_size(crop)
        self.crop = None if sizes is None else sizes[-2:]
        self.crop_d = sizes[0] if sizes is not None and len(sizes) == 3 else None
        self.rounding = check_rounding(_OP, rounding)
        self.crop_pos_x = check_position(_OP, "crop_pos_x", crop_pos_x)
        self.crop_pos_y = check_position(_OP, "crop_pos_y", crop_pos_y)
        self.crop_pos_z = check_position(_OP, "crop_pos_z", crop_pos_z)
        if mirror not in (0, 1):
            raise ArgumentError(f"{_OP}: mirror must be 0 or 1, got {mirror!r}")
        self.mirror = bool(mirror)
        mean = channel_values("mean", mean)
        std = channel_values("std", std)
        if np.any(std == 0):
            raise ArgumentError(f"{_OP}: std must not contain zeros, got {list(std)}")
        if mean.size != std.size and 1 not in (mean.size, std.size):
            raise ArgumentError(f"{_OP}: mean has {mean.size} values but std has {std.size}")
        self.shift = check_number(_OP, "shift", shift)
        self.dtype = parse_dtype(_OP, "dtype", dtype)
        if output_layout not in (*_LAYOUTS, *_SEQUENCE_LAYOUTS, *_VOLUME_LAYOUTS):
            raise ArgumentError(
                f"{_OP}: output_layout must be one of {(*_LAYOUTS, *_SEQUENCE_LAYOUTS, *_VOLUME_LAYOUTS)}, "
                f"got {output_layout!r}"
            )
        self.declared_layout = output_layout
        self.volume = output_layout in _VOLUME_LAYOUTS  # made as a sequence of its depth slices
        self.channels_first = False  # a CDHW volume input (output_layout decides, seeing the input's layout)
        self.layout = _VOLUME_LAYOUTS.get(output_layout, output_layout)
        self.frame_layout = _SEQUENCE_LAYOUTS.get(self.layout, self.layout)  # what _normalize writes per image
        self.sequence = self.layout in _SEQUENCE_LAYOUTS
        channel_shape = (-1, 1, 1) if self.frame_layout == "CHW" else (-1,)
        self.mean = mean.reshape(channel_shape)
        self.inv_std = (np.float64(check_number(_OP, "scale", scale)) / std).astype(np.float32).reshape(channel_shape)
        self.pad_output = bool(pad_output)
        if out_of_bounds_policy not in _POLICIES:
            raise ArgumentError(f"{_OP}: out_of_bounds_policy must be one of {_POLICIES}, got {out_of_bounds_policy!r}")
        self.policy = out_of_bounds_policy
        self.fill_values = channel_values("fill_values", fill_values)
        self._identity = not self.shift and not np.any(self.mean) and bool(np.all(self.inv_std == 1))

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        """``output_layout``; a sequence (``FHWC``) needs one with ``F``, a volume (``DHWC``) one
        with ``D``, an image one without, as DALI."""
        given = input_layouts[0] if input_layouts else ""
        self.channels_first = self.volume and given == "CDHW"  # read as DHWC (a transposed view)
        for kind, layout, allowed, ours in (
            ("sequences", "FHWC", _SEQUENCE_LAYOUTS, self.sequence and not self.volume),
            ("volumes", "DHWC", _VOLUME_LAYOUTS, self.volume),
        ):
            if given in (layout, "CDHW" if layout == "DHWC" else layout) and not ours:
                raise ArgumentError(
                    f"{_OP}: the input is a {kind[:-1]} ({given}): output_layout must be one of {tuple(allowed)}, "
                    f"got {self.declared_layout!r}"
                )
            if given and given != layout and ours and not self.channels_first:
                raise ArgumentError(
                    f"{_OP}: output_layout {self.declared_layout!r} needs {layout} {kind}, got layout {given!r}"
                )
        if given.startswith("F") and not self.sequence:
            raise ArgumentError(
                f"{_OP}: the input is a sequence ({given}): output_layout must be one of {tuple(_SEQUENCE_LAYOUTS)}, "
                f"got {self.declared_layout!r}"
            )
        return self.declared_layout

    def compute(self, xp: ModuleType, inputs, args, ctx) -> Any:
        if self.volume:
            return self._volume(xp, inputs[0], args)
        if self.policy != "error" and not self._fits(inputs[0], args):
            return self._out_of_bounds(xp, inputs[0], args)
        if self.sequence:
            return self._sequence(xp, inputs[0], args)
        return self._normalize(xp, self._crop(inputs[0], args)[None], 0 if self._mirrored(args) else 1)[0]

    def run_sample(self, inputs, args, ctx) -> np.ndarray:
        if self.volume:
            return self._volume(np, inputs[0], args)
        if self.policy != "error" and not self._fits(inputs[0], args):
            return self._out_of_bounds(np, inputs[0], args)
        if self.sequence:
            return self._sequence(np, inputs[0], args)
        return self.run_sample_into(inputs, args, ctx, lambda shape, dtype: None)

    def _volume(self, xp: ModuleType, volume: Any, args: dict[str, Any]) -> Any:
        """One ``DHWC`` sample: its depth window's slices as a sequence (:meth:`_sequence`, or
        :meth:`_out_of_bounds` for a window outside them across), with ``"pad"``'s fill slices
        before and after where the window is deeper than the volume."""
        if volume.ndim != 4 or not volume.shape[0]:
            raise ValueError(f"{_OP}: expects DHWC volumes, got a sample of shape {tuple(volume.shape)}")
        if self.channels_first:
            volume = volume.transpose(1, 2, 3, 0)
        depth = volume.shape[0]
        z0, deep = 0, depth
        if self.crop_d is not None:
            deep = self.crop_d
            pos_z = check_position(_OP, "crop_pos_z", as_scalar(args.get("crop_pos_z", self.crop_pos_z)))
            z0 = anchor(pos_z, depth - deep, self.rounding)
            if deep > depth and self.policy == "error":
                raise ValueError(
                    f"{_OP}: crop depth {deep} exceeds the volume's {depth} (out_of_bounds_policy='pad' or "
                    "'trim_to_shape' take it)"
                )
        front, back = max(z0, 0), min(z0 + deep, depth)
        inside = volume[front:back]
        if self.policy != "error" and not self._fits(inside, args):
            out = self._out_of_bounds(xp, inside, args)
        else:
            out = self._sequence(xp, inside, args)
        if self.policy != "pad" or (front - z0, z0 + deep - back) == (0, 0):
            return out
        axis = 1 if self.layout == "CFHW" else 0  # where the depth slices lie in the output
        channel_axis = self.layout.index("C")
        fill = xp.asarray(
            self._fill(out.shape[channel_axis]).reshape([-1 if a == channel_axis else 1 for a in range(4)])
        )
        pads = []
        for count in (front - z0, z0 + deep - back):
            shape = list(out.shape)
            shape[axis] = count
            pads.append(xp.broadcast_to(fill, shape))
        return xp.concatenate([pads[0], out, pads[1]], axis=axis)

    def _sequence(self, xp: ModuleType, frames: Any, args: dict[str, Any]) -> Any:
        """One ``FHWC`` sample: every frame through the sample's window and mirror flag."""
        if frames.ndim != 4 or not frames.shape[0]:
            raise ValueError(f"{_OP}: expects FHWC sequences with frames, got a sample of shape {tuple(frames.shape)}")
        y0, x0, h, w = self._window(frames[0], args)
        out = self._normalize(xp, frames[:, y0 : y0 + h, x0 : x0 + w], 0 if self._mirrored(args) else len(frames))
        return xp.ascontiguousarray(out.transpose(1, 0, 2, 3)) if self.layout == "CFHW" else out

    def run_sample_into(self, inputs, args, ctx, allocate: Allocate) -> np.ndarray:
        """One sample on the host in a single pass, written into ``allocate(shape, dtype)`` (a row of
        the batch array) when that gives an array, else into a new one. Gives :meth:`compute`'s values."""
        if self.sequence or (self.policy != "error" and not self._fits(inputs[0], args)):
            return self.run_sample(inputs, args, ctx)
        image = self._crop(inputs[0], args)
        if self._mirrored(args):
            image = image[:, ::-1]
        height, width, channels = image.shape
        self._check_channels(channels)
        out_channels = _padded_channels(channels) if self.pad_output else channels
        shape = (out_channels, height, width) if self.layout == "CHW" else (height, width, out_channels)
        out = allocate(shape, self.dtype)
        if out is None:
            out = np.empty(shape, self.dtype)
        if self.layout == "CHW":
            main, pad, source = out[:channels], out[channels:], image.transpose(2, 0, 1)
        else:
            main, pad, source = out[..., :channels], out[..., channels:], image
        if self._identity and (image.dtype == self.dtype or self.dtype.kind == "f"):
            main[...] = source  # only a layout change (and a cast to float): uint8 CHW output
        elif self.dtype == np.float32:
            # a compact copy first: the float pass then reads contiguous rows, not every third byte
            self._normalize_into(np.ascontiguousarray(source) if source.itemsize == 1 else source, main)
        else:
            scratch = np.empty(main.shape, np.float32)
            self._normalize_into(source, scratch)
            main[...] = saturate_cast(np, scratch, self.dtype, overwrite=True)
        pad[...] = 0
        return out

    def _normalize_into(self, source: np.ndarray, out: np.ndarray) -> None:
        """``(source - mean) * inv_std + shift`` written into float32 ``out``, as :meth:`_normalize`."""
        np.subtract(source, self.mean, out=out)
        out *= self.inv_std
        if self.shift:
            out += np.float32(self.shift)

    def run_batch(self, xp: ModuleType, inputs, args, ctxs) -> Any:
        """The whole batch in one fused kernel launch (:mod:`raypipe.kernels.crop_mirror_normalize`)
        writing the final layout and type when the kernels can take it, else :meth:`_run_batch_host`.

        Tolerance against :meth:`run_sample`: float32 outputs within 1e-5 relative and 1e-5 absolute
        (on a GPU the multiply and the ``shift`` may fuse into one rounding), float16 within one
        float16 step, integers within 1 (a result next to a rounding tie); windows, mirroring,
        layout and padding exactly. Sequences go sample by sample.
        """
        if self.policy != "error" and not self._all_fit(inputs[0], args):
            return Operator.run_batch(self, xp, inputs, args, ctxs)
        if self.volume:
            return self._volume_batch(xp, inputs, args, ctxs)
        if self.sequence:
            return self._sequence_batch(xp, inputs, args, ctxs)
        batch = inputs[0]
        shapes = launch.shapes_of(batch) if _uniform_rank(batch) else None
        if shapes is None or shapes.shape[1] != 3:
            bad = next(s for s in batch if s.ndim != 3) if shapes is None else batch[0]
            raise ValueError(f"{_OP}: expects HWC images, got a sample of shape {tuple(bad.shape)}")
        for c in np.unique(shapes[:, 2]).tolist():
            self._check_channels(c)
        windows = self._windows(shapes, args)
        mirrored = self._mirrored_batch(args, len(shapes))
        out_channels = _padded_channels_of(shapes[:, 2]) if self.pad_output else shapes[:, 2]
        out_elements = int((windows[:, 2] * windows[:, 3] * out_channels).sum())
        dtype = launch.uniform_dtype(batch)
        if (
            dtype is None
            or dtype.kind not in "iuf"
            or launch.store_rule(self.dtype) is None
            or not launch.available(xp, launch.elements(batch) + out_elements)
        ):
            images = batch if not isinstance(batch, launch.Packed) else batch.samples()
            crops = [image[y0 : y0 + h, x0 : x0 + w] for image, (y0, x0, h, w) in zip(images, windows.tolist())]
            return self._run_batch_host(xp, crops, mirrored.tolist())
        from ..kernels.crop_mirror_normalize import crop_mirror_normalize_batch

        return crop_mirror_normalize_batch(
            xp,
            launch.pack(xp, batch, _OP),
            windows,
            mirrored,
            self.mean,
            self.inv_std,
            self.shift,
            self.dtype,
            self.layout == "CHW",
            out_channels,
        )

    def _volume_batch(self, xp: ModuleType, inputs, args, ctxs) -> Any:
        """DHWC volumes: each one's depth window (a view), then all their slices as sequences
        through the fused kernel at once where it takes them (:meth:`_sequence_batch`), else sample
        by sample (also where a window is deeper than its volume)."""
        batch = inputs[0]
        if self.channels_first or not self._frames_fuse(xp, batch):
            return Operator.run_batch(self, xp, inputs, args, ctxs)
        volumes = batch.samples() if isinstance(batch, launch.Packed) else list(batch)
        depths = launch.shapes_of(batch)[:, 0]
        if self.crop_d is None:
            starts, deep = np.zeros_like(depths), depths
        else:
            if (depths < self.crop_d).any():
                return Operator.run_batch(self, xp, inputs, args, ctxs)
            pos_z = self._positions(args, "crop_pos_z", self.crop_pos_z, len(depths))
            # the depth axis as crop_anchors' rows (one computation for the batch); its columns unused
            starts = crop_anchors(depths, depths, self.crop_d, self.crop_d, pos_z, pos_z, self.rounding)[0]
            deep = np.full_like(depths, self.crop_d)
        windows = [v[z : z + d] for v, z, d in zip(volumes, starts.tolist(), deep.tolist())]
        return self._sequence_batch(xp, [windows, *inputs[1:]], args, ctxs)

    def _frames_fuse(self, xp: ModuleType, batch: Any) -> bool:
        """Whether the fused kernel takes ``batch``'s samples as sequences of frames."""
        shapes = launch.shapes_of(batch) if _uniform_rank(batch) else None
        dtype = launch.uniform_dtype(batch)
        return not (
            self.layout == "CFHW"
            or shapes is None
            or shapes.shape[1] != 4
            or not shapes[:, 0].all()
            or dtype is None
            or dtype.kind not in "iuf"
            or launch.store_rule(self.dtype) is None
            or not launch.available(xp, 2 * launch.elements(batch))
        )

    def _sequence_batch(self, xp: ModuleType, inputs, args, ctxs) -> Any:
        """FHWC sequences: every frame of the batch through the fused kernel at once, each with its
        sample's window and mirror flag (FCHW and FHWC outputs), else sample by sample."""
        batch = inputs[0]
        if not self._frames_fuse(xp, batch):
            return super().run_batch(xp, inputs, args, ctxs)
        shapes = launch.shapes_of(batch)
        for c in np.unique(shapes[:, 3]).tolist():
            self._check_channels(c)
        frames, counts = as_frames(xp, batch, _OP)
        windows = per_frame(self._windows(shapes[:, 1:], args), counts)
        mirrored = per_frame(self._mirrored_batch(args, len(shapes)), counts)
        channels = frames.shapes[:, 2]
        out_channels = _padded_channels_of(channels) if self.pad_output else channels
        from ..kernels.crop_mirror_normalize import crop_mirror_normalize_batch

        out = crop_mirror_normalize_batch(
            xp, frames, windows, mirrored, self.mean, self.inv_std, self.shift, self.dtype,
            self.frame_layout == "CHW", out_channels,
        )  # fmt: skip
        return as_sequences(out, counts)

    def _windows(self, shapes: np.ndarray, args: dict[str, list[Any]]) -> np.ndarray:
        """``(y0, x0, height, width)`` of every sample's crop window, ``(n, 4)``, as :meth:`_window`."""
        heights, widths = shapes[:, 0], shapes[:, 1]
        if self.crop is None:
            return np.stack([np.zeros_like(heights), np.zeros_like(widths), heights, widths], axis=1)
        crop_h, crop_w = self.crop
        small = np.flatnonzero((heights < crop_h) | (widths < crop_w))
        if len(small):
            i = small[0]
            raise ValueError(f"{_OP}: crop {crop_h}x{crop_w} exceeds the {heights[i]}x{widths[i]} image")
        pos_x = self._positions(args, "crop_pos_x", self.crop_pos_x, len(shapes))
        pos_y = self._positions(args, "crop_pos_y", self.crop_pos_y, len(shapes))
        y0, x0 = crop_anchors(heights, widths, crop_h, crop_w, pos_x, pos_y, self.rounding)
        return np.stack([y0, x0, np.full_like(y0, crop_h), np.full_like(x0, crop_w)], axis=1)

    def _positions(self, args: dict[str, list[Any]], name: str, default: float, n: int) -> np.ndarray:
        """A per-sample crop position argument as a float64 array, checked to lie in [0, 1]."""
        values = batch_values(args, name, default, n, np.dtype(np.float64))
        bad = np.flatnonzero(~((values >= 0.0) & (values <= 1.0)))
        if len(bad):
            raise ArgumentError(f"{_OP}: {name} must be in [0, 1], got {values[bad[0]]!r}")
        return values

    def _mirrored_batch(self, args: dict[str, list[Any]], n: int) -> np.ndarray:
        """Every sample's mirror flag as a bool array (one conversion of the per-sample values)."""
        return batch_values(args, "mirror", self.mirror, n, np.dtype(bool))

    def _run_batch_host(self, xp: ModuleType, windows: list[Any], mirrored: list[bool]) -> Any:
        """Stack the crop windows once, plain ones first and mirrored ones after, and normalize
        the batch with one pass per group (the flip is a view folded into that pass); per sample
        when window shapes differ. cupy stacks many small strided views in a single kernel."""
        first = windows[0]
        if any(w.shape != first.shape or w.dtype != first.dtype for w in windows):
            return [self._normalize(xp, w[None], 0 if m else 1)[0] for w, m in zip(windows, mirrored, strict=True)]
        order = sorted(range(len(windows)), key=mirrored.__getitem__)
        out = self._normalize(xp, xp.stack([windows[i] for i in order]), mirrored.count(False))
        if order == sorted(order):
            return out
        return out[xp.asarray(np.argsort(order))]

    def _mirrored(self, args: dict[str, Any]) -> bool:
        return bool(as_scalar(args.get("mirror", self.mirror)))

    def _crop(self, image: Any, args: dict[str, Any]) -> Any:
        """The crop window of the HWC ``image`` (a view) for this sample's arguments."""
        y0, x0, h, w = self._window(image, args)
        return image[y0 : y0 + h, x0 : x0 + w]

    def _window(self, image: Any, args: dict[str, Any]) -> tuple[int, int, int, int]:
        """``(y0, x0, height, width)`` of the crop window of the HWC ``image`` for this sample."""
        if image.ndim != 3:
            raise ValueError(f"{_OP}: expects HWC images, got a sample of shape {tuple(image.shape)}")
        height, width = image.shape[:2]
        if self.crop is None:
            return 0, 0, height, width
        crop_h, crop_w = self.crop
        if crop_h > height or crop_w > width:
            raise ValueError(f"{_OP}: crop {crop_h}x{crop_w} exceeds the {height}x{width} image")
        pos_x = check_position(_OP, "crop_pos_x", as_scalar(args.get("crop_pos_x", self.crop_pos_x)))
        pos_y = check_position(_OP, "crop_pos_y", as_scalar(args.get("crop_pos_y", self.crop_pos_y)))
        y0, x0 = crop_window(height, width, crop_h, crop_w, pos_x, pos_y, self.rounding)
        return y0, x0, crop_h, crop_w

    def _fits(self, sample: Any, args: dict[str, Any]) -> bool:
        """Whether this sample's window lies inside it (a sequence's frames share one) and the
        usual path gives its output (not with ``"pad"`` and ``pad_output``: the fill value then
        goes into the added channels)."""
        if self.policy == "pad" and self.pad_output:
            return False
        if self.crop is None or sample.ndim < 3:
            return True
        height, width = sample.shape[-3:-1]
        pos_x = check_position(_OP, "crop_pos_x", as_scalar(args.get("crop_pos_x", self.crop_pos_x)))
        pos_y = check_position(_OP, "crop_pos_y", as_scalar(args.get("crop_pos_y", self.crop_pos_y)))
        y0, x0 = crop_window(height, width, *self.crop, pos_x, pos_y, self.rounding)
        return y0 >= 0 and x0 >= 0 and y0 + self.crop[0] <= height and x0 + self.crop[1] <= width

    def _all_fit(self, batch: Any, args: dict[str, list[Any]]) -> bool:
        """:meth:`_fits` of every sample of a batch (one computation on the batch's shapes)."""
        if self.policy == "pad" and self.pad_output:
            return False
        if self.crop is None:
            return True
        shapes = launch.shapes_of(batch) if _uniform_rank(batch) else None
        if shapes is None or shapes.shape[1] not in (3, 4):
            return True  # the batched paths name the bad sample
        heights, widths = shapes[:, -3], shapes[:, -2]
        pos_x = self._positions(args, "crop_pos_x", self.crop_pos_x, len(shapes))
        pos_y = self._positions(args, "crop_pos_y", self.crop_pos_y, len(shapes))
        y0, x0 = crop_anchors(heights, widths, *self.crop, pos_x, pos_y, self.rounding)
        return bool(((y0 >= 0) & (x0 >= 0) & (y0 + self.crop[0] <= heights) & (x0 + self.crop[1] <= widths)).all())

    def _out_of_bounds(self, xp: ModuleType, sample: Any, args: dict[str, Any]) -> Any:
        """A window reaching outside the image (or a sequence's frames): the part inside normalized
        and, with ``"pad"``, placed in an output of the window's size filled with ``fill_values``
        (the whole window flipped when mirrored), or alone with ``"trim_to_shape"``."""
        frames = sample[None] if sample.ndim == 3 else sample
        if frames.ndim != 4 or not len(frames):
            raise ValueError(f"{_OP}: expects HWC images or FHWC sequences, got shape {tuple(sample.shape)}")
        height, width, channels = frames.shape[1:]
        crop_h, crop_w = self.crop or (height, width)
        pos_x = check_position(_OP, "crop_pos_x", as_scalar(args.get("crop_pos_x", self.crop_pos_x)))
        pos_y = check_position(_OP, "crop_pos_y", as_scalar(args.get("crop_pos_y", self.crop_pos_y)))
        y0, x0 = crop_window(height, width, crop_h, crop_w, pos_x, pos_y, self.rounding)
        top, left = max(y0, 0), max(x0, 0)
        bottom, right = max(min(y0 + crop_h, height), top), max(min(x0 + crop_w, width), left)
        mirrored = self._mirrored(args)
        inner = self._normalize(xp, frames[:, top:bottom, left:right], 0 if mirrored else len(frames))
        if self.policy == "trim_to_shape":
            out = inner
        else:
            chw = self.frame_layout == "CHW"
            out_channels = inner.shape[1] if chw else inner.shape[3]
            fill = self._fill(out_channels)
            shape = (len(frames), out_channels, crop_h, crop_w) if chw else (len(frames), crop_h, crop_w, out_channels)
            out = xp.empty(shape, self.dtype)
            out[...] = xp.asarray(fill.reshape((-1, 1, 1) if chw else (-1,)))
            dy = top - y0
            dx = (x0 + crop_w - right) if mirrored else (left - x0)  # a flipped window flips its padding too
            rows, cols = slice(dy, dy + bottom - top), slice(dx, dx + right - left)
            out[(slice(None), slice(None), rows, cols) if chw else (slice(None), rows, cols)] = inner
            if out_channels > channels:  # pad_output's channels take the fill value too, as DALI's
                extra = xp.asarray(fill[channels:].reshape((-1, 1, 1) if chw else (-1,)))
                out[(slice(None), slice(channels, None)) if chw else (Ellipsis, slice(channels, None))] = extra
        if sample.ndim == 3:
            return out[0]
        return xp.ascontiguousarray(out.transpose(1, 0, 2, 3)) if self.layout == "CFHW" else out

    def _fill(self, out_channels: int) -> np.ndarray:
        """``fill_values`` for each of ``out_channels`` output channels in the output type; ValueError
        unless there is one value or one per channel."""
        if self.fill_values.size not in (1, out_channels):
            raise ValueError(
                f"{_OP}: fill_values has {self.fill_values.size} values for an output of {out_channels} channels "
                "(one, or one per output channel: pad_output's added ones too)"
            )
        return saturate_cast(np, np.broadcast_to(self.fill_values, (out_channels,)).copy(), self.dtype)

    def _check_channels(self, channels: int) -> None:
        """Raise a ValueError unless ``mean`` and ``std`` fit an image of ``channels`` channels."""
        if self.mean.size not in (1, channels) or self.inv_std.size not in (1, channels):
            sizes = f"{self.mean.size}/{self.inv_std.size}"
            raise ValueError(f"{_OP}: mean/std have {sizes} values but the image has {channels} channels")

    def _normalize(self, xp: ModuleType, images: Any, flip_from: int) -> Any:
        """Normalize an NHWC batch (views allowed), flipping samples ``flip_from:`` horizontally,
        into a new N-by-``output_layout`` array."""
        n, height, width, channels = images.shape
        self._check_channels(channels)
        mean, inv_std = self.mean, self.inv_std
        out_channels = _padded_channels(channels) if self.pad_output else channels
        chw = self.frame_layout == "CHW"
        if chw:
            out = xp.empty((n, out_channels, height, width), dtype=np.float32)
            dst, pad = out[:, :channels], out[:, channels:]
        else:
            out = xp.empty((n, height, width, out_channels), dtype=np.float32)
            dst, pad = out[..., :channels], out[..., channels:]
        mean = xp.asarray(mean)
        for rows, part in (
            (slice(0, flip_from), images[:flip_from]),
            (slice(flip_from, n), images[flip_from:, :, ::-1]),
        ):
            if len(part):
                xp.subtract(part.transpose(0, 3, 1, 2) if chw else part, mean, out=dst[rows])
        dst *= xp.asarray(inv_std)
        if self.shift:
            dst += np.float32(self.shift)
        pad[...] = 0
        return saturate_cast(xp, out, self.dtype, overwrite=True)
