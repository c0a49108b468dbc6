"""``decoders.video``: frames of encoded video streams held in memory (the bytes of a video file
read by ``readers.file`` or ``readers.webdataset``), as DALI 2.4's video decoder.

Each sample's stream is indexed (demuxed once, without decoding) and the frames asked for are
decoded (:mod:`raypipe.video_file`): every frame by default; the listed ``frames``; or from
``start_frame`` by ``stride``, ``sequence_length`` frames or up to ``end_frame`` (exclusive) or
the end. Frames past the stream's end are resolved by ``pad_mode`` (``constant`` with
``fill_value`` by default, as DALI), and with ``"none"`` a range stops at the end while a listed
frame outside the stream is an error naming the sample. ``device="mixed"`` decodes on the host,
as the CPU decoder, and the Mixed stage moves the frames to the GPU (DALI decodes with NVDEC).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ArgumentError, DecodeError, ReaderError
from ..operator import Operator, Schema, as_scalar, register
from ..video_file import decode_frames, index_video, resolve_frames
from .video_reader import PAD_MODES

OP = "decoders.video"
SELECTION = ("frames", "start_frame", "end_frame", "sequence_length", "stride")


def _nonnegative(name: str, value: Any, sample: str) -> int:
    number = as_scalar(value)
    if isinstance(number, (bool, np.bool_)) or not float(number).is_integer() or number < 0:
        raise ValueError(f"{OP}: {name} must be a non-negative int, got {number!r} for {sample}")
    return int(number)


def selected_frames(total: int, selection: dict[str, Any], sample: str) -> tuple[np.ndarray, bool]:
    """The frame numbers ``selection`` asks of a stream of ``total`` frames (outside it included),
    and whether they were listed (``frames``) rather than a range."""
    if selection.get("frames") is not None:
        frames = np.asarray(selection["frames"]).reshape(-1)
        if frames.dtype.kind not in "iu" or (frames < 0).any():
            raise ValueError(f"{OP}: frames must be non-negative ints, got {frames.tolist()} for {sample}")
        return frames.astype(np.int64), True
    start = _nonnegative("start_frame", selection.get("start_frame", 0) or 0, sample)
    stride = _nonnegative("stride", selection.get("stride", 1) or 1, sample) or 1
    if start >= total:
        raise ValueError(f"{OP}: start_frame {start} is past the {total} frames of {sample}")
    if selection.get("sequence_length") is not None:
        length = _nonnegative("sequence_length", selection["sequence_length"], sample)
        return start + stride * np.arange(length, dtype=np.int64), False
    end = total if selection.get("end_frame") is None else _nonnegative("end_frame", selection["end_frame"], sample)
    return np.arange(start, end, stride, dtype=np.int64), False


@register
class VideoDecoder(Operator):
    """Decode frames of in-memory video streams to FHWC uint8 RGB (one output)."""

    schema = Schema(OP, devices=("cpu", "mixed"), arg_inputs=SELECTION)

    def configure(
        self,
        frames: Sequence[int] | int | None = None,
        start_frame: int | None = None,
        end_frame: int | None = None,
        sequence_length: int | None = None,
        stride: int | None = None,
        pad_mode: str = "constant",
        fill_value: int | Sequence[int] = 0,
        affine: bool = True,
        build_index: bool = True,
    ) -> None:
        """``affine`` (thread pinning) and ``build_index`` (the index is always built) are DALI's
        hints, accepted and changing nothing."""
        self.selection = {
            "frames": frames,
            "start_frame": start_frame,
            "end_frame": end_frame,
            "sequence_length": sequence_length,
            "stride": stride,
        }
        self.check_selection({k for k, v in self.selection.items() if v is not None})
        if pad_mode not in PAD_MODES:
            raise ArgumentError(f"{OP}: pad_mode must be one of {sorted(PAD_MODES)}, got {pad_mode!r}")
        fill = np.asarray(fill_value).reshape(-1)
        if fill.size not in (1, 3) or fill.dtype.kind not in "iu" or not ((fill >= 0) & (fill <= 255)).all():
            raise ArgumentError(f"{OP}: fill_value must be one or 3 ints in [0, 255], got {fill_value!r}")
        self.pad_mode = PAD_MODES[pad_mode]
        self.fill_value = np.broadcast_to(fill, 3).astype(np.uint8)

    def bind_inputs(self, count: int, arg_inputs) -> None:
        self.check_selection({k for k, v in self.selection.items() if v is not None} | set(arg_inputs))

    @staticmethod
    def check_selection(given: set[str]) -> None:
        """Refuse the combinations DALI refuses: ``frames`` with a range, ``end_frame`` with
        ``sequence_length``."""
        if "frames" in given and given - {"frames"}:
            raise ArgumentError(f"{OP}: frames cannot be given with {sorted(given - {'frames'})}")
        if {"end_frame", "sequence_length"} <= given:
            raise ArgumentError(f"{OP}: end_frame and sequence_length cannot both be given")

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        return "FHWC"

    def run_sample(self, inputs, args, ctx):
        sample = f"sample {ctx.sample_index}"
        data = np.ascontiguousarray(inputs[0]).reshape(-1).view(np.uint8).tobytes()
        try:
            index = index_video(sample, data)
        except ReaderError as exc:
            raise DecodeError(f"{OP}: {exc}") from None
        total = len(index)
        frames, listed = selected_frames(total, {**self.selection, **args}, sample)
        if self.pad_mode == "none":
            inside = (frames >= 0) & (frames < total)
            if listed and not inside.all():
                raise ValueError(f"{OP}: frame {int(frames[~inside][0])} is past the {total} frames of {sample}")
            frames = frames[: int(np.argmin(inside)) if not inside.all() else len(frames)]
        else:
            frames = resolve_frames(frames, total, self.pad_mode)
        constant = frames < 0
        try:
            decoded = decode_frames(index, frames[~constant]) if (~constant).any() else None
        except ReaderError as exc:
            raise DecodeError(f"{OP}: {exc}") from None
        shape = decoded.shape[1:] if decoded is not None else (index.height, index.width, 3)
        out = np.empty((len(frames), *shape), np.uint8)
        if decoded is not None:
            out[~constant] = decoded
        out[constant] = self.fill_value
        return out
