"""Video files through FFmpeg (PyAV, the ``video`` extra): a file's frame index, and its frames at
given indices decoded to RGB or YCbCr.

The index lists the presentation times of the best video stream's packets in display order (frame
``k`` is the ``k``-th), which are the key frames, and the frame rate, by demuxing the file once
without decoding it. Decoding seeks to the last key frame at or before the first frame wanted and
decodes forward to the last one wanted, so a sequence costs its own group of pictures, not the
file; a stream that does not land where its index says is decoded from its start instead.
"""

from __future__ import annotations

import bisect
import contextlib
import io
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from .errors import ReaderError
from .storage import files, urls


def _av() -> Any:
    try:
        import av
    except ImportError:
        raise ImportError("reading video needs PyAV (FFmpeg): pip install 'raypipe[video]'") from None
    av.logging.set_level(av.logging.ERROR)
    return av


@dataclass(frozen=True)
class VideoIndex:
    """One file's video stream: frame ``k`` is shown at ``pts[k]`` (in ``time_base`` units)."""

    path: str  # the file, or what names the in-memory stream in errors
    width: int
    height: int
    codec: str
    frame_rate: Fraction
    time_base: Fraction
    pts: np.ndarray  # int64, one per frame, in display order
    key_pts: np.ndarray  # int64, the key frames' pts, increasing
    data: bytes | None = field(default=None, repr=False)  # the encoded stream when it is in memory

    def __len__(self) -> int:
        return len(self.pts)

    def frame_at(self, seconds: float, down: bool) -> int:
        """The frame shown at or before (``down``) or at or after ``seconds`` from the stream's
        first frame (``len(self)`` when none is after)."""
        pts = self.pts[0] + round(seconds / self.time_base)
        at = int(np.searchsorted(self.pts, pts, side="right" if down else "left"))
        return max(at - 1, 0) if down else at

    def seconds(self, frames: np.ndarray) -> np.ndarray:
        """The display times of ``frames`` in seconds from the stream's first frame (float64)."""
        start = self.pts[0] if len(self.pts) else 0
        return (self.pts[frames] - start).astype(np.float64) * float(self.time_base)


@contextlib.contextmanager
def _open(av, path: str, data: bytes | None) -> Iterator[Any]:
    """``path`` (a local file, or an object-store URL read by ranged requests) or the in-memory
    stream ``data``, opened by FFmpeg."""
    if data is not None:
        source = io.BytesIO(data)
    elif urls.is_url(path):
        source = files.open_binary(path)
    else:
        source = None
    try:
        with av.open(path if source is None else source) as container:
            yield container
    finally:
        if source is not None:
            source.close()


def index_video(path: str, data: bytes | None = None) -> VideoIndex:
    """Demux the file ``path`` (or the encoded stream ``data``, named ``path`` in errors) once, without
    decoding, and index its best video stream; ReaderError naming it when it cannot be opened, has no
    video stream or no frame."""
    av = _av()
    try:
        with _open(av, path, data) as container:
            if not container.streams.video:
                raise ReaderError(f"{path!r} has no video stream")
            stream = container.streams.video[0]
            pts, keys = [], []
            for packet in container.demux(stream):
                shown = packet.pts if packet.pts is not None else packet.dts
                if shown is None or shown < 0 or packet.size == 0:  # as DALI: no time, or before the start
                    continue
                pts.append(shown)
                if packet.is_keyframe:
                    keys.append(shown)
            rate = stream.average_rate or stream.guessed_rate or stream.base_rate
            index = VideoIndex(
                path=path,
                width=stream.codec_context.width,
                height=stream.codec_context.height,
                codec=stream.codec_context.name,
                frame_rate=Fraction(rate) if rate else Fraction(0),
                time_base=Fraction(stream.time_base),
                pts=np.sort(np.asarray(pts, np.int64)),
                key_pts=np.sort(np.asarray(keys, np.int64)),
                data=data,
            )
    except ReaderError:
        raise
    except (OSError, av.FFmpegError) as exc:
        raise ReaderError(f"cannot open video file {path!r}: {exc}") from None
    if not len(index.pts):
        raise ReaderError(f"video file {path!r} holds no frames")
    return index


def resolve_frames(frames: np.ndarray, total: int, pad_mode: str) -> np.ndarray:
    """Frame numbers outside ``[0, total)`` resolved as ``pad_mode`` says, as DALI's video operators
    do: -1 (a constant frame) for "constant", the nearest frame for "edge", mirrored about the ends
    for "reflect_1001" (the end frame repeated) and "reflect_101" (not repeated); "none" leaves them."""
    out = np.asarray(frames, np.int64)
    if pad_mode == "constant":
        return np.where((out < 0) | (out >= total), -1, out)
    if pad_mode == "edge":
        return np.clip(out, 0, total - 1)
    if pad_mode == "reflect_1001":
        folded = np.mod(out, 2 * total)
        return np.where(folded >= total, 2 * total - 1 - folded, folded)
    if pad_mode == "reflect_101":
        if total == 1:
            return np.zeros_like(out)
        folded = np.mod(out, 2 * (total - 1))
        return np.where(folded >= total, 2 * (total - 1) - folded, folded)
    return out


def decode_frames(index: VideoIndex, frames: np.ndarray, ycbcr: bool = False) -> np.ndarray:
    """The frames of ``index`` at ``frames`` (indices in display order, any order and repeats),
    decoded to ``(len(frames), H, W, 3)`` uint8 RGB (or YCbCr); ReaderError naming the file and the
    frame that could not be decoded."""
    av = _av()
    wanted = np.unique(frames)
    fmt = "yuv444p" if ycbcr else "rgb24"
    got: dict[int, np.ndarray] = {}
    try:
        with _open(av, index.path, index.data) as container:
            stream = container.streams.video[0]
            stream.thread_count = 1  # the CPU stage's threads decode samples side by side
            key = _key_before(index, int(index.pts[wanted[0]]))
            for start in (key, None) if key != index.key_pts[0] else (None,):
                got = _decode_from(container, stream, index, wanted, start, fmt)
                if len(got) == len(wanted):
                    break
    except av.FFmpegError as exc:
        raise ReaderError(f"cannot decode video file {index.path!r}: {exc}") from None
    missing = [int(k) for k in wanted if int(k) not in got]
    if missing:
        raise ReaderError(f"cannot decode frame {missing[0]} of video file {index.path!r} (truncated or corrupt?)")
    first = got[int(wanted[0])]
    if any(image.shape != first.shape for image in got.values()):
        raise ReaderError(f"the frames of video file {index.path!r} change size within a sequence")
    out = np.empty((len(frames), *first.shape), np.uint8)
    for k, frame in enumerate(frames):
        out[k] = got[int(frame)]
    return out


def _key_before(index: VideoIndex, pts: int) -> int:
    """The last key frame shown at or before ``pts`` (the first key frame when none is)."""
    at = bisect.bisect_right(index.key_pts.tolist(), pts) - 1
    return int(index.key_pts[max(at, 0)]) if len(index.key_pts) else int(index.pts[0])


def _decode_from(container, stream, index: VideoIndex, wanted: np.ndarray, start: int | None, fmt: str):
    """Decode from the key frame at ``start`` (the file's start when None) until every frame of
    ``wanted`` is seen; the frames found, by index."""
    if start is None:
        container.seek(0, backward=True, any_frame=False, stream=stream)
    else:
        container.seek(start, backward=True, any_frame=False, stream=stream)
    wanted_set = {int(k) for k in wanted}
    last = int(wanted[-1])
    got: dict[int, np.ndarray] = {}
    for frame in container.decode(stream):
        if frame.pts is None:
            continue
        k = int(np.searchsorted(index.pts, frame.pts))
        if k == len(index.pts) or index.pts[k] != frame.pts:
            continue
        if k in wanted_set:
            got[k] = _planes(frame, fmt)
            if len(got) == len(wanted_set):
                break
        if k > last:
            break
    return got


def _planes(frame, fmt: str) -> np.ndarray:
    """``frame`` as an HWC uint8 array: packed RGB, or the three planes of 4:4:4 YCbCr stacked.
    The conversion is swscale's with bilinear chroma, full chroma interpolation and accurate
    rounding: DALI's CPU video decoder's pixels exactly."""
    from av.video.reformatter import Interpolation

    flags = Interpolation.BILINEAR | Interpolation.ACCURATE_RND | Interpolation.FULL_CHR_H_INT
    converted = frame.reformat(format=fmt, interpolation=flags, threads=1).to_ndarray()
    return converted if fmt == "rgb24" else np.ascontiguousarray(np.moveaxis(converted, 0, -1))
