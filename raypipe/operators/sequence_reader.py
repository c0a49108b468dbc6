"""``readers.sequence``: sequences of image frames from folders of extracted video streams, as
DALI 2.4's (deprecated) sequence reader.

Each sub-folder of ``file_root`` is a stream, one image file per frame. A sample is
``sequence_length`` frames of one stream, ``stride`` frames apart, and a stream gives a sequence
starting at every ``step``-th frame while the whole sequence fits in it (sequences never cross a
stream and are never padded). The frames are decoded on the host (:mod:`.host_decode`:
libjpeg-turbo as DALI's CPU decoder, so the pixels are DALI's; grey JPEG frames are the decoded
luma, as DALI's) to ``image_type`` (RGB, BGR or GRAY) and stacked as FHWC uint8.

The listing is DALI's, learned against DALI 2.4: DALI globs ``file_root/*/*``, so hidden entries
(a name starting with ``.``) are left out, streams are the folders (symbolic links to folders too)
directly in ``file_root``, files beside them are not read, and the entries of a stream are taken in
byte order of their whole path (so the streams ``a.b`` and ``a-b`` come before ``a``). Only
entries whose extension is an image extension (case-insensitive, :data:`IMAGE_EXTENSIONS`) are
frames; as in DALI a sub-folder with such a name is listed too and fails when read.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

import numpy as np

from ..errors import ArgumentError, DecodeError, ReaderError
from ..operator import Schema, register
from ..types import DALIImageType
from .host_decode import decode, open_source
from .reader_base import ShardedReader, refuse_unexpanded_home
from .readers import read_file

OP = "readers.sequence"

#: The extensions DALI's sequence reader takes as frames (compared lower-cased).
IMAGE_EXTENSIONS = frozenset(
    (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".pnm", ".ppm", ".pgm", ".pbm", ".jp2", ".webp")
)

IMAGE_TYPES = (DALIImageType.RGB, DALIImageType.BGR, DALIImageType.GRAY)


def _is_frame(name: str) -> bool:
    dot = name.rfind(".")
    return dot >= 0 and name[dot:].lower() in IMAGE_EXTENSIONS


def list_streams(file_root: str) -> list[tuple[str, list[str]]]:
    """``(stream folder, frame paths)`` for each stream of ``file_root`` in DALI's order (see the
    module's docstring); a stream without frames is listed with none. ReaderError when
    ``file_root`` is not a folder or holds no stream with any entry (where DALI's glob fails)."""
    if not os.path.isdir(file_root):
        raise ReaderError(f"{OP}: file_root {file_root!r} does not exist or is not a folder")
    streams = []
    with os.scandir(file_root) as entries:
        folders = [e for e in entries if not e.name.startswith(".") and e.is_dir()]
    for folder in sorted(folders, key=lambda e: os.fsencode(e.name + "/")):
        try:
            with os.scandir(folder.path) as entries:
                names = [e.name for e in entries if not e.name.startswith(".")]
        except OSError:  # an unreadable folder: glob passes over it
            continue
        if names:
            names.sort(key=os.fsencode)
            streams.append((folder.path, [os.path.join(folder.path, n) for n in names if _is_frame(n)]))
    if not streams:
        raise ReaderError(
            f"{OP}: file_root {file_root!r} holds no stream folders with files "
            "(expected one sub-folder per stream, one image file per frame)"
        )
    return streams


def sequence_starts(frames: int, sequence_length: int, step: int, stride: int) -> range:
    """The first frames of a stream of ``frames`` frames' sequences, as DALI counts them."""
    span = (sequence_length - 1) * stride
    return range(0, max(0, frames - span), step)


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ArgumentError(f"{OP}: {name} must be a positive int, got {value!r}")
    return int(value)


@register
class SequenceReader(ShardedReader):
    """Reads sequences of frames from stream folders, decoded to FHWC uint8 (one output)."""

    schema = Schema(OP, devices=("cpu",), min_inputs=0, max_inputs=0, num_outputs=1, is_reader=True)
    SHUFFLES_LISTING = True

    def configure(
        self,
        file_root: str | os.PathLike | None = None,
        sequence_length: int | None = None,
        step: int = 1,
        stride: int = 1,
        image_type: DALIImageType = DALIImageType.RGB,
        **reader_args: Any,
    ) -> None:
        """``file_root`` and ``sequence_length`` are required, as in DALI; ``step`` and ``stride``
        are positive; ``image_type`` is RGB, BGR or GRAY (DALI refuses YCbCr and its ANY_DATA
        breaks on frames that are not 3-channel, so it is refused here)."""
        if file_root is None:
            raise ArgumentError(f"{OP}: file_root is required")
        if not isinstance(file_root, (str, os.PathLike)):
            raise ArgumentError(f"{OP}: file_root must be a path, got {file_root!r}")
        if sequence_length is None:
            raise ArgumentError(f"{OP}: sequence_length is required")
        self.sequence_length = _positive_int("sequence_length", sequence_length)
        self.step = _positive_int("step", step)
        self.stride = _positive_int("stride", stride)
        if image_type not in IMAGE_TYPES:
            raise ArgumentError(f"{OP}: image_type must be types.RGB, BGR or GRAY, got {image_type!r}")
        refuse_unexpanded_home(OP, "file_root", [os.fspath(file_root)])
        self.configure_reader(**reader_args)
        self.file_root = os.fspath(file_root)
        self.image_type = image_type
        self.streams: list[tuple[str, list[str]]] | None = None
        self._stream_of: np.ndarray = np.zeros(0, np.int64)
        self._start_of: np.ndarray = np.zeros(0, np.int64)

    def output_layout(self, input_layouts: Any) -> str:
        return "FHWC"

    def prepare(self) -> None:
        """List the streams and their sequences (once); ReaderError naming ``file_root`` when it
        gives no sequence or fewer than ``num_shards``."""
        if self.streams is not None:
            return
        streams = list_streams(self.file_root)
        stream_of, start_of = [], []
        for k, (_, frames) in enumerate(streams):
            starts = sequence_starts(len(frames), self.sequence_length, self.step, self.stride)
            stream_of.extend([k] * len(starts))
            start_of.extend(starts)
        if not start_of:
            longest = max(len(frames) for _, frames in streams)
            raise ReaderError(
                f"{OP}: file_root {self.file_root!r} gives no sequence of {self.sequence_length} frames "
                f"{self.stride} apart: its {len(streams)} stream(s) hold at most {longest} image file(s)"
            )
        if len(start_of) < self.num_shards:
            raise ReaderError(
                f"{OP}: {len(start_of)} sequences in {self.file_root!r} cannot fill {self.num_shards} shards"
            )
        self._stream_of = np.asarray(stream_of, np.int64)
        self._start_of = np.asarray(start_of, np.int64)
        self.streams = streams

    def __len__(self) -> int:
        self.prepare()
        return len(self._start_of)

    def frames_of(self, index: int) -> list[str]:
        """The frame files of sample ``index``, in order."""
        self.prepare()
        if not 0 <= index < len(self._start_of):
            raise IndexError(f"{OP}: sample index {index} outside [0, {len(self._start_of)})")
        frames = self.streams[int(self._stream_of[index])][1]
        start = int(self._start_of[index])
        return frames[start : start + (self.sequence_length - 1) * self.stride + 1 : self.stride]

    def source_of(self, index: int) -> str:
        """The stream folder and the frames of sample ``index``."""
        if self.streams is None or not 0 <= index < len(self._start_of):
            return f"sample {index}"
        frames = self.frames_of(index)
        folder = self.streams[int(self._stream_of[index])][0]
        return f"{folder} frames {os.path.basename(frames[0])} to {os.path.basename(frames[-1])}"

    def content_digest(self) -> str:
        """A hash of the frame names relative to ``file_root`` and of the sequences: it survives
        moving the dataset elsewhere."""
        self.prepare()
        h = hashlib.sha256()
        for folder, frames in self.streams:
            h.update(os.fsencode(os.path.basename(folder)) + b"/\0")
            for path in frames:
                h.update(os.fsencode(os.path.basename(path)) + b"\0")
        h.update(np.asarray([self.sequence_length, self.step, self.stride], np.int64).tobytes())
        return h.hexdigest()[:16]

    def read(self, index: int) -> tuple[np.ndarray]:
        """Random access: sample ``index``'s frames decoded and stacked (FHWC uint8); ReaderError
        naming the frame that cannot be read or decoded, or whose shape differs from the first's."""
        frames = self.frames_of(index)
        out: np.ndarray | None = None
        for f, path in enumerate(frames):
            image = self._decode(path)
            if out is None:
                out = np.empty((len(frames), *image.shape), np.uint8)
            elif image.shape != out.shape[1:]:
                raise ReaderError(
                    f"{OP}: frame {path!r} is {image.shape[:2]} (height, width), the sequence's first "
                    f"frame {frames[0]!r} {out.shape[1:3]}: all frames of a sequence must have one shape"
                )
            out[f] = image
        return (out,)

    def _decode(self, path: str) -> np.ndarray:
        if os.path.isdir(path):  # a sub-folder with an image's name: DALI lists it too, and fails reading it
            raise ReaderError(f"{OP}: cannot read {path!r}: it is a folder")
        try:
            data = read_file(path)
        except OSError as exc:
            raise ReaderError(f"{OP}: cannot read {path!r}: {exc.strerror or exc}") from None
        try:
            return decode(open_source(data, self.image_type), self.image_type)
        except DecodeError as exc:
            raise ReaderError(f"{OP}: cannot decode {path!r}: {exc}") from None
