"""Base of the readers whose samples are records in container files (TFRecord, RecordIO,
WebDataset tar shards): the index gives every record's place, :class:`~raypipe.formats.record_files.RecordFiles`
reads it (one ``pread`` per record under a global shuffle, whole extents read ahead when the
pipeline reads in order or ``read_ahead=True``), the subclass parses it."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ReaderError
from ..formats.record_files import RecordFiles, RecordTable
from .reader_base import ShardedReader


def record_output(raw: np.ndarray, piece: np.ndarray) -> np.ndarray:
    """``piece`` of the record ``raw`` as an output that holds no more memory than its record:
    itself when ``raw`` is that record's own array (read alone) or ``piece`` owns its memory, a copy
    when ``raw`` is a view into a cached extent, which the output would otherwise keep alive."""
    return piece if raw.base is None or piece.base is None else piece.copy()


class RecordReader(ShardedReader):
    """Subclasses give :meth:`open_table` (read or build the index, checked against the data
    files) and :meth:`parse` (a record's bytes to the reader's outputs)."""

    table: RecordTable | None = None
    _files: RecordFiles | None = None

    def open_table(self) -> RecordTable:
        """Where every record lies; raise ReaderError naming the file at fault."""
        raise NotImplementedError

    def parse(self, index: int, raw: np.ndarray) -> tuple[np.ndarray, ...]:
        """The outputs of record ``index`` from its bytes; raise ReaderError (the caller adds
        which file and record)."""
        raise NotImplementedError

    def layout_fields(self) -> bytes:
        """Arguments that change what a record yields, folded into :meth:`digest`."""
        return b""

    def prepare(self) -> None:
        if self.table is not None:
            return
        table = self.open_table()
        self.check_shards(len(table))
        self.table = table
        self._files = RecordFiles(table)

    def __len__(self) -> int:
        self.prepare()
        return len(self.table)

    def content_digest(self) -> str:
        import hashlib

        self.prepare()
        return hashlib.sha256(self.table.digest().encode() + self.layout_fields()).hexdigest()[:16]

    def source_of(self, index: int) -> str:
        if self.table is not None and 0 <= index < len(self.table):
            return self.table.where(index)
        return f"sample {index}"

    def read(self, index: int) -> tuple[np.ndarray, ...]:
        self.prepare()
        if not 0 <= index < len(self.table):
            raise IndexError(f"{self.schema.name}: sample index {index} outside [0, {len(self.table)})")
        raw = self._files.read(index)
        try:
            return self.parse(index, raw)
        except ReaderError as exc:
            raise ReaderError(f"{self.schema.name}: {self.table.where(index)}: {exc}") from None

    def will_read(self, indices: Any, sequential: bool = False) -> None:
        """Whole extents ahead when reading in order; on an object store, each record ahead otherwise."""
        if self._files is None:
            return
        if sequential or self.read_ahead:
            self._files.will_read(indices)
        elif self._files.remote:
            self._files.will_read_records(indices)

    def run_chunk(self, inputs, args, ctxs):
        """The chunk's records read together (:meth:`RecordFiles.records`); on an object store,
        fetched together first (a CPU helper reads chunks it was not told of ahead). A sample
        outside the table, or a record that fails, raises: the CPU stage then reads the chunk
        sample by sample, which names or skips it."""
        self.prepare()
        indices = [ctx.sample_index for ctx in ctxs]
        if not indices:
            return []
        if self._files.remote:
            self._files.will_read_records(indices)
        if min(indices) < 0 or max(indices) >= len(self.table):
            raise IndexError(f"{self.schema.name}: a sample index of the chunk is outside [0, {len(self.table)})")
        outs = [self.parse(i, raw) for i, raw in zip(indices, self._files.records(indices))]
        return [out[0] for out in outs] if self.num_outputs == 1 else outs

    def close(self) -> None:
        if self._files is not None:
            self._files.close()

    def io_stats(self) -> dict[str, int]:
        """Reads so far: direct ``pread`` calls (ranged requests on an object store), extents read
        ahead, their bytes, and hits; on an object store also the records' requests in flight and
        bytes held now, and their peaks."""
        return {**self._files.stats, **self._files.in_flight()} if self._files is not None else {}
