"""``readers.mxnet``: encoded images and float32 labels from MXNet RecordIO files (``.rec``)
through their ``.idx`` index, as DALI's reader gives them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ArgumentError, ReaderError
from ..formats import recordio
from ..formats.record_files import RecordTable
from ..operator import Schema, register
from .reader_base import as_path_list
from .record_reader import RecordReader, record_output


@register
class MXNetReader(RecordReader):
    """Outputs the image bytes (1-D uint8) and the labels (float32: shape (1,) for a record
    with IRHeader flag 0, else (flag,)). ``index_path`` is one index whose offsets count over
    all the ``path`` files laid end to end (DALI's form), or one index per file."""

    schema = Schema("readers.mxnet", devices=("cpu",), min_inputs=0, max_inputs=0, num_outputs=2, is_reader=True)

    def configure(
        self,
        path: str | Sequence[str] | None = None,
        index_path: str | Sequence[str] | None = None,
        **reader_args: Any,
    ) -> None:
        op = self.schema.name
        self.paths = as_path_list(op, "path", path)
        if index_path is None:
            raise ArgumentError(
                f"{op}: index_path is required (the .idx file next to each .rec); "
                f"write one with `raypipe index mxnet {self.paths[0]}`"
            )
        self.index_paths = as_path_list(op, "index_path", index_path)
        if len(self.index_paths) not in (1, len(self.paths)):
            raise ArgumentError(
                f"{op}: give one index_path for all {len(self.paths)} files or one per file, "
                f"got {len(self.index_paths)}"
            )
        self.configure_reader(**reader_args)

    def open_table(self) -> RecordTable:
        if len(self.index_paths) == 1:
            per_file = recordio.read_shared_index(self.index_paths[0], self.paths)
        else:
            per_file = [recordio.read_index(i, p) for i, p in zip(self.index_paths, self.paths)]
        return RecordTable.concat(self.paths, per_file)

    def parse(self, index: int, raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        try:
            payload = recordio.record_payload(raw, base=int(self.table.offsets[index]))
        except ReaderError as exc:
            f = int(self.table.file_index[index])
            index_path = self.index_paths[f if len(self.index_paths) > 1 else 0]
            raise ReaderError(
                f"{exc} (a corrupt file, or an index {index_path} that does not match it: "
                f"rebuild it with `raypipe index mxnet {self.paths[f]}`)"
            ) from None
        labels, image = recordio.unpack_irheader(payload)
        return record_output(raw, image), labels
