"""``readers.nemo_asr``: speech and transcripts listed in NVIDIA NeMo manifests, as DALI's reader.

A manifest holds one JSON object per line with ``audio_filepath`` (a relative path is relative to
the working directory, as in DALI), and optionally ``duration`` (seconds) and ``text``. Entries whose duration
is under ``min_duration`` or over ``max_duration`` (each when > 0) are left out, as in DALI; like
DALI's, the reader decodes each whole file (``offset`` is not applied). Outputs, in DALI's order
and types: the decoded audio (:func:`~.audio_decoder.decode_audio`: ``sample_rate``, ``downmix``
on by default, ``dtype``, ``quality``), then, each where asked, the file's own sample rate (float32
scalar), the transcript as UTF-8 bytes (uint8) and the entry's index among those kept of its
manifest (int64, shape ``(1,)``). Sharded and shuffled as every reader, by sample index.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ArgumentError, DecodeError, ReaderError
from ..operator import Schema, check_number, register
from ..types import DALIDataType
from .audio_decoder import audio_options, decode_audio
from .reader_base import ShardedReader, as_path_list
from .readers import read_file

_OP = "readers.nemo_asr"


@dataclass(frozen=True)
class ManifestEntry:
    """One kept line of a manifest."""

    path: str
    text: str
    duration: float | None
    index: int  # among the kept entries of its manifest (DALI's ``read_idxs`` output)


def parse_manifest(manifest: str, min_duration: float, max_duration: float) -> list[ManifestEntry]:
    """The entries of one manifest file within the duration bounds; ReaderError naming a bad line."""
    try:
        with open(manifest, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise ReaderError(f"{_OP}: cannot open manifest {manifest!r}: {exc.strerror or exc}") from None
    entries = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            path = record["audio_filepath"]
        except (json.JSONDecodeError, KeyError, TypeError):
            raise ReaderError(f"{_OP}: {manifest}:{lineno}: expected a JSON object with audio_filepath") from None
        duration = record.get("duration")
        duration = None if duration is None else float(duration)
        if duration is not None and (
            (min_duration > 0 and duration < min_duration) or (max_duration > 0 and duration > max_duration)
        ):
            continue
        entries.append(ManifestEntry(str(path), str(record.get("text", "")), duration, len(entries)))
    return entries


@register
class NemoAsrReader(ShardedReader):
    """Audio (and its sample rate, transcript and manifest index) from NeMo manifests."""

    schema = Schema(_OP, devices=("cpu",), min_inputs=0, max_inputs=0, num_outputs=4, is_reader=True)
    SHUFFLES_LISTING = True

    def configure(
        self,
        manifest_filepaths: str | Sequence[str] | None = None,
        read_sample_rate: bool = True,
        read_text: bool = True,
        read_idxs: bool = False,
        sample_rate: float = -1.0,
        downmix: bool = True,
        dtype: DALIDataType | np.dtype | str = DALIDataType.FLOAT,
        quality: float = 50.0,
        min_duration: float = 0.0,
        max_duration: float = 0.0,
        normalize_text: bool | None = None,
        **reader_args: Any,
    ) -> None:
        self.manifests = as_path_list(_OP, "manifest_filepaths", manifest_filepaths)
        self.options = audio_options(_OP, max(float(sample_rate), 0.0), downmix, dtype, quality)
        self.min_duration = check_number(_OP, "min_duration", min_duration)
        self.max_duration = check_number(_OP, "max_duration", max_duration)
        if 0 < self.max_duration < self.min_duration:
            raise ArgumentError(f"{_OP}: max_duration {max_duration} is below min_duration {min_duration}")
        self.read_sample_rate, self.read_text, self.read_idxs = bool(read_sample_rate), bool(read_text), bool(read_idxs)
        self.configure_reader(**reader_args)
        self.entries: list[ManifestEntry] | None = None

    @property
    def num_outputs(self) -> int:
        """The audio, then one output per ``read_sample_rate``, ``read_text`` and ``read_idxs`` set."""
        return 1 + self.read_sample_rate + self.read_text + self.read_idxs

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        return ""

    def prepare(self) -> None:
        """Read the manifests (once); ReaderError naming the manifest or line at fault."""
        if self.entries is not None:
            return
        entries = [e for m in self.manifests for e in parse_manifest(m, self.min_duration, self.max_duration)]
        if not entries:
            raise ReaderError(f"{_OP}: the manifests {', '.join(self.manifests)} list no audio within the durations")
        self.check_shards(len(entries))
        self.entries = entries

    def __len__(self) -> int:
        self.prepare()
        return len(self.entries)

    def source_of(self, index: int) -> str:
        """The audio file behind sample ``index``."""
        if self.entries is not None and 0 <= index < len(self.entries):
            return self.entries[index].path
        return f"sample {index}"

    def content_digest(self) -> str:
        """A hash of the kept entries (file names, transcripts): the dataset's identity in position states."""
        self.prepare()
        h = hashlib.sha256()
        for entry in self.entries:
            h.update(os.path.basename(entry.path).encode() + b"\0" + entry.text.encode() + b"\0")
        return h.hexdigest()[:16]

    def read(self, index: int) -> tuple[np.ndarray, ...]:
        """Sample ``index``'s decoded audio and the outputs asked for."""
        self.prepare()
        if not 0 <= index < len(self.entries):
            raise IndexError(f"{_OP}: sample index {index} outside [0, {len(self.entries)})")
        entry = self.entries[index]
        try:
            audio, rate = decode_audio(read_file(entry.path), self.options, entry.path)
        except OSError as exc:
            raise ReaderError(f"{_OP}: cannot read {entry.path!r}: {exc.strerror or exc}") from None
        except DecodeError as exc:
            raise ReaderError(str(exc)) from None
        outputs = [audio]
        if self.read_sample_rate:
            outputs.append(np.asarray(rate, np.float32))
        if self.read_text:
            outputs.append(np.frombuffer(entry.text.encode("utf-8"), np.uint8).copy())
        if self.read_idxs:
            outputs.append(np.array([entry.index], np.int64))
        return tuple(outputs)
