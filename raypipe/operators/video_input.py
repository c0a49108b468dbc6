"""``experimental.inputs.video``: a long video fed in memory, given as batches of frame sequences
decoded a batch at a time, as DALI 2.4's video input operator.

``pipe.feed_input(name, [encoded])`` queues one encoded video (the bytes of a video file as a
1-D uint8 array); each ``run()`` then gives the next ``max_batch_size`` sequences of
``sequence_length`` consecutive frames (FHWC uint8 RGB) of the video at the head of the queue,
and the video's last batch has the sequences left (maybe fewer). A last sequence shorter than
``sequence_length`` stays short (``last_sequence_policy="partial"``) or is filled with zero frames
(``"pad"``). When a video is used up the next one queued starts a new batch; running with none
queued is an error. Only one batch of frames is decoded at a time (from the key frame before it),
so a video far larger than memory once decoded can be fed whole. The video is demuxed (not
decoded) when fed, so a stream FFmpeg cannot open is an error of that ``feed_input``.

Differences from DALI: a ``feed_input`` of several videos is refused (DALI reads the first and
drops the others without a word); ``device="mixed"`` decodes on the host and moves the frames to
the GPU (DALI decodes with NVDEC).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..errors import ArgumentError, ReaderError
from ..operator import Schema, register
from ..video_file import decode_frames, index_video
from .external_source import ExternalSource, split_batch

OP = "experimental.inputs.video"
POLICIES = ("partial", "pad")


@register
class VideoInput(ExternalSource):
    """Batches of frame sequences of the videos fed with ``feed_input``, one video at a time."""

    schema = Schema(name=OP, devices=("cpu", "mixed"), min_inputs=0, max_inputs=0)
    positional_args = ()
    reads_on_host = True  # device="mixed": decode on the host, then move the frames to the GPU

    def configure(
        self,
        sequence_length: int | None = None,
        last_sequence_policy: str = "partial",
        blocking: bool = False,
        no_copy: bool = False,
        affine: bool = True,
    ) -> None:
        """``no_copy`` and ``affine`` (thread pinning) are DALI's hints, accepted and changing nothing:
        a fed video is always copied. ``blocking=True`` (wait for data) is refused: ``run()`` is called
        by the thread that feeds, so it would wait for ever."""
        if isinstance(sequence_length, bool) or not isinstance(sequence_length, (int, np.integer)):
            raise ArgumentError(f"{OP}: sequence_length (a positive int) is required, got {sequence_length!r}")
        if sequence_length < 1:
            raise ArgumentError(f"{OP}: sequence_length must be a positive int, got {sequence_length!r}")
        if last_sequence_policy not in POLICIES:
            raise ArgumentError(f"{OP}: last_sequence_policy must be one of {POLICIES}, got {last_sequence_policy!r}")
        if blocking:
            raise ArgumentError(
                f"{OP}: blocking=True is not supported: feed_input and run() are called by one thread here, "
                "so a run waiting for data would wait for ever; feed the video before run()"
            )
        self.sequence_length = int(sequence_length)
        self.pad = last_sequence_policy == "pad"
        # what the external source's feeding and sample handling read
        self.multi, self._count, self.parallel, self.batch, self.repeat_last = False, 1, False, True, False
        self.callback = None
        self.prefetch_queue_depth = 1
        self.layouts, self.dtypes, self.ndims = ["FHWC"], [np.dtype(np.uint8)], [4]
        self.batch_size = 1
        self._store = {}
        self._fed = itertools.count()

    def fed_batches(self, data: Any) -> Iterator[list[list[np.ndarray]]]:
        """The batches of sequences of one fed video, decoded as they are asked for; the video is
        checked and demuxed now."""
        (samples,) = split_batch(data, 1, False)
        if len(samples) != 1:
            raise ArgumentError(
                f"{OP}: feed_input takes one encoded video per call (a batch of 1 sample), got {len(samples)}: "
                "feed each video in a call of its own"
            )
        (encoded,) = samples
        if encoded.ndim != 1 or encoded.dtype != np.uint8:
            raise ArgumentError(
                f"{OP}: a fed video is the bytes of a video file as a 1-D uint8 array, got a {encoded.ndim}-D "
                f"{encoded.dtype} array"
            )
        name = f"video {next(self._fed)} fed to {OP}"
        try:
            index = index_video(name, encoded.tobytes())
        except ReaderError as exc:
            raise ReaderError(f"{OP}: {exc}") from None
        return self._sequences(index)

    def _sequences(self, index) -> Iterator[list[list[np.ndarray]]]:
        total, length = len(index), self.sequence_length
        starts = np.arange(0, total, length)
        for first in range(0, len(starts), self.batch_size):
            batch = starts[first : first + self.batch_size]
            frames = decode_frames(index, np.arange(batch[0], min(total, batch[-1] + length)))
            sequences = [frames[s - batch[0] : s - batch[0] + length] for s in batch]
            if self.pad and len(sequences[-1]) < length:
                short = sequences[-1]
                sequences[-1] = np.concatenate([short, np.zeros((length - len(short), *short.shape[1:]), np.uint8)])
            yield [sequences]
