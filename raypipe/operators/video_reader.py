"""``readers.video`` and ``experimental.readers.video``: sequences of frames decoded from video
files, as DALI 2.4's two video readers.

A sample is ``sequence_length`` frames of one file, ``stride`` frames apart, starting every
``step`` frames (:func:`sequence_plan`). Files come from ``filenames`` (with ``labels`` or not),
``file_root`` (one sub-folder per class, labels by sorted folder name) or ``file_list`` (lines of
``path label [start [end]]``). Outputs, in DALI's order: the frames (``FHWC``), then the label
(``(1,)`` int32), the frame numbers and the timestamps (float64 seconds) where DALI gives them.

Decoding is FFmpeg's, on the host (:mod:`raypipe.video_file`). DALI's ``readers.video`` decodes
on the GPU only (NVDEC); here ``device="gpu"`` decodes in the CPU stage's threads and moves the
outputs to the GPU (``.gpu()``), and ``device="cpu"`` keeps them on the host. Frame ``k`` of a file
is the ``k``-th frame it shows, so variable-frame-rate files are read (DALI refuses them unless
``skip_vfr_check``).

The two readers differ as in DALI: the legacy reader's sequence spans ``(sequence_length - 1) *
stride + 1`` frames and its ``step`` defaults to ``sequence_length * stride``; it pads with
``pad_sequences`` (zero frames, frame numbers and timestamps -1), has ``dtype``/``normalized``,
and gives frame numbers and timestamps only with ``file_list`` or ``filenames`` with ``labels``.
The experimental reader's sequence needs ``sequence_length * stride`` frames, it pads with
``pad_mode`` (``constant`` with ``fill_value``, ``edge``, ``reflect_1001``, ``reflect_101``), and
reads ``file_list`` ranges as frames or timestamps (``file_list_format``).
"""

from __future__ import annotations

import hashlib
import math
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from tqdm import tqdm

from ..errors import ArgumentError, ReaderError
from ..operator import Schema, register
from ..storage import files
from ..types import DALIDataType, DALIImageType
from ..video_file import VideoIndex, decode_frames, index_video, resolve_frames
from .reader_base import ShardedReader, refuse_unexpanded_home
from .readers import list_file_root
from .resize import Resize, host_resample

LEGACY = "readers.video"
EXPERIMENTAL = "experimental.readers.video"
PAD_MODES = {
    "none": "none",
    "constant": "constant",
    "edge": "edge",
    "repeat": "edge",
    "reflect_1001": "reflect_1001",
    "symmetric": "reflect_1001",
    "reflect_101": "reflect_101",
    "reflect": "reflect_101",
}
ROUNDINGS = ("start_down_end_up", "start_up_end_down", "all_up", "all_down")
# DALI arguments that only tune NVDEC or buffering: accepted, changing nothing here
HINTS = ("additional_decode_surfaces", "skip_vfr_check")


@dataclass(frozen=True)
class VideoEntry:
    """One listed file: its label and the range of its frames to read (the whole file when None)."""

    path: str
    label: int
    start: float | None = None
    end: float | None = None


def sequence_plan(
    begin: int, end: int, length: int, step: int, stride: int, span: int, tails: str = "none"
) -> tuple[np.ndarray, np.ndarray]:
    """The first frames of the sequences of frames ``[begin, end)``, and how many of each
    sequence's frames lie inside. Full sequences start every ``step`` frames while ``span`` frames
    fit; then ``tails`` says which partial ones follow while their first frame is inside: "none",
    "one" (the experimental reader's padded tail) or "all" (the legacy reader's ``pad_sequences``)."""
    last_full = end - span
    full = np.arange(begin, last_full + 1, step, dtype=np.int64) if last_full >= begin else np.zeros(0, np.int64)
    counts = np.full(len(full), length, np.int64)
    if tails == "none":
        return full, counts
    after = full[-1] + step if len(full) else begin
    partial = np.arange(after, end, step, dtype=np.int64)[: 1 if tails == "one" else None]
    inside = np.minimum(length, 1 + (end - 1 - partial) // stride)
    return np.concatenate([full, partial]), np.concatenate([counts, inside])


def list_video_root(file_root: str) -> list[VideoEntry]:
    """The files in each class folder of ``file_root`` (a local folder or an object-store URL),
    labelled by the folder's index in sorted order, as DALI's video readers list them."""
    paths, labels = list_file_root(file_root, ("*",))
    if not len(paths):
        raise ReaderError(f"{LEGACY}: file_root {file_root!r} holds no class folders with files")
    return [VideoEntry(path, int(label)) for path, label in zip(paths, labels)]


def parse_video_list(file_list: str) -> list[VideoEntry]:
    """The lines ``path label [start [end]]`` of ``file_list``; a line whose start equals its end
    is left out with a warning, as in DALI."""
    try:
        with files.open_binary(file_list) as f:
            lines = f.read().decode().splitlines()
    except OSError as exc:
        raise ReaderError(f"{LEGACY}: cannot read file_list {file_list!r}: {exc.strerror or exc}") from None
    entries = []
    for number, line in enumerate(lines, 1):
        fields = line.split()
        if not fields:
            continue
        try:
            label = int(fields[1])
            bounds = [float(v) for v in fields[2:4]]
        except (IndexError, ValueError):
            raise ReaderError(
                f"{LEGACY}: file_list {file_list!r} line {number}: expected 'path label [start [end]]', got {line!r}"
            ) from None
        if label < 0 or len(fields) > 4:
            raise ReaderError(f"{LEGACY}: file_list {file_list!r} line {number}: bad line {line!r}")
        if len(bounds) == 2 and bounds[0] == bounds[1]:
            warnings.warn(
                f"{file_list} line {number}: start equals end, the file is left out (as in DALI)", stacklevel=2
            )
            continue
        entries.append(VideoEntry(fields[0], label, *bounds))
    if not entries:
        raise ReaderError(f"{LEGACY}: file_list {file_list!r} lists no files")
    return entries


def _positive(op: str, name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ArgumentError(f"{op}: {name} must be a positive int, got {value!r}")
    return int(value)


def _frame_num_policy(op: str, value: Any) -> str:
    policy = {None: "none", False: "none", True: "scalar"}[value] if value in (None, False, True) else value
    if policy not in ("none", "scalar", "sequence"):
        raise ArgumentError(
            f"{op}: enable_frame_num must be True, False, 'none', 'scalar' or 'sequence', got {value!r}"
        )
    return policy


@register
class VideoReader(ShardedReader):
    """DALI's ``readers.video``: sequences of frames of video files, decoded with FFmpeg."""

    schema = Schema(LEGACY, devices=("cpu", "gpu"), min_inputs=0, max_inputs=0, num_outputs=4, is_reader=True)
    SHUFFLES_LISTING = True
    experimental = False
    reads_on_host = True  # device="gpu": read and decode in the CPU stage, then move the outputs
    float_output = normalized = False  # the legacy reader's dtype=FLOAT and normalized

    def configure(
        self,
        sequence_length: int | None = None,
        filenames: str | Sequence[str] | None = None,
        labels: Sequence[int] | None = None,
        file_root: str | None = None,
        file_list: str | None = None,
        step: int = -1,
        stride: int = 1,
        enable_frame_num: bool | str = False,
        enable_timestamps: bool = False,
        image_type: DALIImageType = DALIImageType.RGB,
        **args: Any,
    ) -> None:
        op = self.schema.name
        if sequence_length is None:
            raise ArgumentError(f"{op}: sequence_length is required")
        self.sequence_length = _positive(op, "sequence_length", sequence_length)
        self.stride = _positive(op, "stride", stride)
        if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step == 0:
            raise ArgumentError(f"{op}: step must be a positive int (or negative for the default), got {step!r}")
        self.step = int(step) if step > 0 else self.sequence_length * self.stride
        if isinstance(filenames, (str, os.PathLike)):
            filenames = [filenames]
        given = [n for n, v in (("filenames", filenames), ("file_root", file_root), ("file_list", file_list)) if v]
        if len(given) != 1:
            raise ArgumentError(f"{op}: give exactly one of filenames, file_root, file_list (got {given or 'none'})")
        if labels is not None and not filenames:
            raise ArgumentError(f"{op}: labels can only be given with filenames (as in DALI)")
        # labels=[] labels each file by its index in the legacy reader only, as in DALI
        if labels is not None and len(labels) not in ((len(filenames),) if self.experimental else (0, len(filenames))):
            raise ArgumentError(f"{op}: {len(labels)} labels for {len(filenames)} files")
        for name, value in (("file_root", file_root), ("file_list", file_list)):
            if value:
                refuse_unexpanded_home(op, name, [os.fspath(value)])
        if filenames:
            filenames = [os.fspath(f) for f in filenames]
            refuse_unexpanded_home(op, "filenames", filenames)
        if image_type not in (DALIImageType.RGB, DALIImageType.YCbCr):
            raise ArgumentError(f"{op}: image_type must be types.RGB or types.YCbCr, got {image_type!r}")
        self.filenames, self.labels = filenames, None if labels is None else [int(v) for v in labels]
        self.file_root = os.fspath(file_root) if file_root else None
        self.file_list = os.fspath(file_list) if file_list else None
        self.frame_num = _frame_num_policy(op, enable_frame_num)
        self.timestamps = bool(enable_timestamps)
        self.image_type = image_type
        self.with_labels = labels is not None or bool(file_root) or bool(file_list)
        reader_args = self.configure_variant(**args)
        for hint in HINTS:
            reader_args.pop(hint, None)
        self.configure_reader(**reader_args)
        self.entries: list[VideoEntry] | None = None
        self.indexes: list[VideoIndex] = []
        self._file_of = self._start_of = self._count_of = np.zeros(0, np.int64)

    def configure_variant(
        self,
        dtype: DALIDataType = DALIDataType.UINT8,
        normalized: bool = False,
        channels: int = 3,
        pad_sequences: bool = False,
        file_list_frame_num: bool = False,
        file_list_include_preceding_frame: bool = False,
        **reader_args: Any,
    ) -> dict[str, Any]:
        """The legacy reader's own arguments; returns the common reader arguments."""
        op = self.schema.name
        if dtype not in (DALIDataType.UINT8, DALIDataType.FLOAT):
            raise ArgumentError(f"{op}: dtype must be types.UINT8 or types.FLOAT, got {dtype!r}")
        if channels != 3:
            raise ArgumentError(f"{op}: channels must be 3, got {channels!r}")
        extras = self.frame_num != "none" or self.timestamps
        if extras and not (self.file_list or (self.filenames and self.labels is not None)):
            raise ArgumentError(
                f"{op}: frame numbers and timestamps can be enabled only with file_list, or filenames with labels "
                "(as in DALI)"
            )
        self.float_output = dtype == DALIDataType.FLOAT
        self.normalized = bool(normalized)
        self.pad_mode, self.tails = ("constant" if pad_sequences else "none"), "all"
        self.uniform = False
        self.fill_value = np.zeros(3, np.uint8)
        self.span = (self.sequence_length - 1) * self.stride + 1
        self.list_in_frames = bool(file_list_frame_num)
        self.include_preceding = bool(file_list_include_preceding_frame)
        return reader_args

    def outputs_given(self) -> list[str]:
        """Which of video, labels, frame_num, timestamps this reader gives, in order."""
        names = ["video"]
        if self.with_labels:
            names.append("labels")
        extras_allowed = self.experimental or self.file_list or (self.filenames and self.labels is not None)
        if extras_allowed and self.frame_num != "none":
            names.append("frame_num")
        if extras_allowed and self.timestamps:
            names.append("timestamps")
        return names

    @property
    def num_outputs(self) -> int:
        return len(self.outputs_given())

    def output_layouts(self) -> list[str]:
        return ["FHWC"] + [""] * (self.num_outputs - 1)

    def output_layout(self, input_layouts: Any) -> str:
        return "FHWC"

    def prepare(self) -> None:
        """List and index the files (once), and plan their sequences; ReaderError naming the file
        or list at fault, or saying that no sequence fits."""
        if self.entries is not None:
            return
        op = self.schema.name
        if self.file_root:
            entries = list_video_root(self.file_root)
        elif self.file_list:
            entries = parse_video_list(self.file_list)
        else:  # labels=[]: each file's index, as DALI
            labels = [0] * len(self.filenames) if self.labels is None else self.labels or range(len(self.filenames))
            entries = [VideoEntry(p, int(label)) for p, label in zip(self.filenames, labels)]
        indexes = []
        for entry in tqdm(entries, desc=f"{op}: indexing", unit="file", disable=None if len(entries) > 50 else True):
            try:
                indexes.append(index_video(entry.path))
            except ReaderError as exc:
                raise ReaderError(f"{op}: {exc}") from None
        files, starts, counts, ends = [], [], [], []
        tails = "none" if self.pad_mode == "none" else self.tails
        for k, (entry, index) in enumerate(zip(entries, indexes)):
            begin, end = self.frame_range(entry, index)
            if self.uniform:  # one sequence spread over the whole range
                first, inside = (
                    np.arange(begin, min(begin + 1, end), dtype=np.int64),
                    np.full(int(end > begin), self.sequence_length),
                )
            else:
                first, inside = sequence_plan(
                    begin, end, self.sequence_length, self.step, self.stride, self.span, tails
                )
            files.append(np.full(len(first), k, np.int64))
            starts.append(first)
            counts.append(inside)
            ends.append(end)
        self._file_of = np.concatenate(files)
        self._start_of = np.concatenate(starts)
        self._count_of = np.concatenate(counts)
        self._end_of = np.asarray(ends, np.int64)
        if not len(self._start_of):
            raise ReaderError(
                f"{op}: no sequence of {self.sequence_length} frames {self.stride} apart fits in the "
                f"{len(entries)} file(s) (the longest has {max(len(i) for i in indexes)} frames)"
            )
        self.check_shards(len(self._start_of))
        self.indexes, self.entries = indexes, entries

    def frame_range(self, entry: VideoEntry, index: VideoIndex) -> tuple[int, int]:
        """The frames ``[begin, end)`` of ``entry`` to read: the whole file, or its list line's
        range as the legacy reader reads it (frames with ``file_list_frame_num``, else seconds);
        ReaderError naming the file when the range is outside it, as DALI's."""
        total = len(index)
        start, end = entry.start or 0.0, entry.end or 0.0
        if start == 0 and end == 0:
            return 0, total
        if self.list_in_frames:
            begin = int(start) if start >= 0 else total + int(start)
            last = int(end) if end > 0 else total + int(end)
        else:
            rate = float(index.frame_rate)
            down_start, up_end = (math.floor, math.ceil) if self.include_preceding else (math.ceil, math.floor)
            begin = down_start(start * rate) if start >= 0 else total + down_start(start * rate)
            last = up_end(end * rate) if end > 0 else total + up_end(end * rate)
        if not begin <= last <= total:
            raise ReaderError(
                f"{self.schema.name}: the range [{entry.start}, {entry.end}] of {entry.path!r} is frames "
                f"[{begin}, {last}), outside its {total} frames or empty"
            )
        return begin, last

    def __len__(self) -> int:
        self.prepare()
        return len(self._start_of)

    def source_of(self, index: int) -> str:
        if self.entries is None or not 0 <= index < len(self._start_of):
            return f"sample {index}"
        start = int(self._start_of[index])
        return f"{self.entries[int(self._file_of[index])].path} frame {start}"

    def content_digest(self) -> str:
        """A hash of the files' names, labels and frame counts and of the sequences."""
        self.prepare()
        h = hashlib.sha256()
        for entry, index in zip(self.entries, self.indexes):
            h.update(os.fsencode(os.path.basename(entry.path)) + f"\0{entry.label}\0{len(index)}\0".encode())
        for values in (self._file_of, self._start_of, self._count_of):
            h.update(values.tobytes())
        return h.hexdigest()[:16]

    def frames_of(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """Sample ``index``'s frame numbers in its file, and which of them are a constant frame
        (numbered -1). Past the end, the legacy reader's ``pad_sequences`` frames are constant; the
        experimental reader's ``pad_mode`` resolves them against the whole file, as DALI's."""
        start, count = int(self._start_of[index]), int(self._count_of[index])
        total = len(self.indexes[int(self._file_of[index])])
        if self.uniform:  # as DALI: frame begin + round(i / (length - 1) * (frames - 1))
            end = int(self._end_of[int(self._file_of[index])])
            spread = np.arange(self.sequence_length) / max(self.sequence_length - 1, 1)
            frames = start + np.floor(spread * (end - start - 1) + 0.5).astype(np.int64)
        else:
            frames = start + np.arange(self.sequence_length, dtype=np.int64) * self.stride
        if self.tails == "all":
            frames = np.where(np.arange(self.sequence_length) < count, frames, -1)
        elif self.pad_mode != "none":
            frames = resolve_frames(frames, total, self.pad_mode)
        return frames, frames < 0

    def read(self, index: int) -> tuple[np.ndarray, ...]:
        """Random access: sample ``index``'s outputs; ReaderError naming the file and frame that
        cannot be decoded."""
        self.prepare()
        if not 0 <= index < len(self._start_of):
            raise IndexError(f"{self.schema.name}: sample index {index} outside [0, {len(self._start_of)})")
        entry, video = self.entries[int(self._file_of[index])], self.indexes[int(self._file_of[index])]
        frames, padded = self.frames_of(index)
        try:
            decoded = decode_frames(video, frames[~padded], ycbcr=self.image_type == DALIImageType.YCbCr)
        except ReaderError as exc:
            raise ReaderError(f"{self.schema.name}: {exc}") from None
        clip = np.empty((self.sequence_length, *decoded.shape[1:]), np.uint8)
        clip[~padded] = decoded
        clip[padded] = self.fill_value
        outputs: list[np.ndarray] = [self._as_output(clip)]
        names = self.outputs_given()
        if "labels" in names:
            outputs.append(np.asarray([entry.label], np.int32))
        if "frame_num" in names:
            scalar = self.frame_num == "scalar"
            outputs.append(np.asarray(frames[:1] if scalar else frames, np.int32))
        if "timestamps" in names:
            seconds = video.seconds(np.maximum(frames, 0))
            outputs.append(np.where(padded, -1.0, seconds))
        return tuple(outputs)

    def _as_output(self, clip: np.ndarray) -> np.ndarray:
        """The frames as ``dtype``: uint8, or float32 in [0, 255] (in [0, 1] when ``normalized``)."""
        if not self.float_output:
            return clip
        out = clip.astype(np.float32)
        return out / np.float32(255) if self.normalized else out


@register
class ExperimentalVideoReader(VideoReader):
    """DALI's ``experimental.readers.video``: the CPU-capable reader, with ``pad_mode`` and
    ``file_list_format``."""

    schema = Schema(EXPERIMENTAL, devices=("cpu", "gpu"), min_inputs=0, max_inputs=0, num_outputs=4, is_reader=True)
    experimental = True

    def configure_variant(
        self,
        pad_mode: str = "none",
        fill_value: int | Sequence[int] = 0,
        file_list_format: str = "timestamps",
        file_list_include_end: bool = True,
        file_list_rounding: str = "start_down_end_up",
        uniform_sample: bool = False,
        **reader_args: Any,
    ) -> dict[str, Any]:
        """The experimental reader's own arguments; returns the common reader arguments.
        ``uniform_sample`` takes one sequence per file, its frames spread evenly over the file."""
        op = self.schema.name
        if pad_mode not in PAD_MODES:
            raise ArgumentError(f"{op}: pad_mode must be one of {sorted(PAD_MODES)}, got {pad_mode!r}")
        fill = np.asarray(fill_value).reshape(-1)
        if fill.size not in (1, 3) or fill.dtype.kind not in "iu" or not ((fill >= 0) & (fill <= 255)).all():
            raise ArgumentError(f"{op}: fill_value must be one or 3 ints in [0, 255], got {fill_value!r}")
        if file_list_format not in ("frames", "timestamps"):
            raise ArgumentError(f"{op}: file_list_format must be 'frames' or 'timestamps', got {file_list_format!r}")
        if file_list_rounding not in ROUNDINGS:
            raise ArgumentError(f"{op}: file_list_rounding must be one of {ROUNDINGS}, got {file_list_rounding!r}")
        self.pad_mode, self.tails = PAD_MODES[pad_mode], "one"
        self.uniform = bool(uniform_sample)
        self.fill_value = np.broadcast_to(fill, 3).astype(np.uint8)
        self.span = self.sequence_length * self.stride
        self.list_in_frames = file_list_format == "frames"
        self.rounding = file_list_rounding
        self.include_end = bool(file_list_include_end)
        return reader_args

    def frame_range(self, entry: VideoEntry, index: VideoIndex) -> tuple[int, int]:
        """The frames ``[begin, end)`` of ``entry`` to read, as the experimental reader reads a
        list line's range: frame numbers or seconds rounded as ``file_list_rounding`` says (seconds
        to the frame shown at or before, or at or after, that time), the end clamped to the file
        with ``file_list_include_end``; an empty range leaves the file out with a warning."""
        total = len(index)
        start, end = entry.start or 0.0, entry.end or 0.0
        if start == 0 and end == 0:
            return 0, total
        down_start = self.rounding in ("start_down_end_up", "all_down")
        down_end = self.rounding in ("start_up_end_down", "all_down")
        if self.list_in_frames:
            start, end = (total + start if start < 0 else start), (total + end if end < 0 else end)
            begin = math.floor(start) if down_start else math.ceil(start)
            last = math.floor(end) if down_end else math.ceil(end)
        else:
            begin, last = index.frame_at(start, down_start), index.frame_at(end, down_end)
        if self.include_end:
            last = min(last, total)
        if begin >= last:
            warnings.warn(f"{self.schema.name}: empty frame range [{begin}, {last}) for {entry.path!r}, left out",
                          stacklevel=2)  # fmt: skip
        return begin, max(begin, last)


#: ``readers.video_resize``'s resize arguments (``resize``'s, with DALI's 0 for "not given")
RESIZE_ARGS = ("resize_x", "resize_y", "resize_z", "resize_shorter", "resize_longer", "size", "max_size", "mode",
               "antialias", "interp_type", "min_filter", "mag_filter", "temp_buffer_hint")  # fmt: skip


@register
class VideoResizeReader(VideoReader):
    """DALI's ``readers.video_resize``: ``readers.video`` whose frames are resized as ``resize``
    resizes images (every frame of a sequence to one size)."""

    schema = Schema(
        "readers.video_resize", devices=("cpu", "gpu"), min_inputs=0, max_inputs=0, num_outputs=4, is_reader=True
    )

    def configure(self, **args: Any) -> None:
        """The legacy reader's arguments and ``resize``'s size, mode and filter arguments;
        ``minibatch_size`` and ``subpixel_scale`` are accepted as hints, a region of interest is
        refused."""
        op = self.schema.name
        refused = sorted({"roi_start", "roi_end", "roi_relative"} & set(args))
        if refused:
            raise ArgumentError(f"{op}: a region of interest ({', '.join(refused)}) is not supported")
        for hint in ("minibatch_size", "subpixel_scale"):
            args.pop(hint, None)
        resize = {k: args.pop(k) for k in RESIZE_ARGS if k in args and not (k.startswith("resize_") and args[k] == 0)}
        for k in RESIZE_ARGS:
            args.pop(k, None)
        try:
            self.resizer = Resize(device="cpu", op_id=self.op_id, **resize)
        except ArgumentError as exc:
            raise ArgumentError(str(exc).replace("resize:", f"{op}:", 1)) from None
        super().configure(**args)

    def read(self, index: int) -> tuple[np.ndarray, ...]:
        video, *rest = super().read(index)
        width, height = self.resizer.target_size(video.shape[2], video.shape[1])
        resizer = self.resizer
        frames = [host_resample(f, width, height, resizer.filters, resizer.antialias, None) for f in video]
        return (np.stack(frames), *rest)
