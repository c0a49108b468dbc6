"""``readers.webdataset``: samples of WebDataset tar shards, one output per ``ext`` entry, as
DALI's ``fn.readers.webdataset`` (a list of outputs; one node when ``ext`` has one entry).

Each sample is one record spanning its wanted members, from the first one's data to the last
one's end (the tar headers between them included), so that a sample is one ``pread`` and
consecutive samples are consecutive byte ranges: the extent read-ahead of
:class:`~raypipe.formats.record_files.RecordFiles` then reads a shard sequentially. One record table per
``ext`` entry would read every extent once per entry and cost one ``pread`` per member.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ArgumentError, ReaderError
from ..formats.record_files import RecordTable
from ..formats.webdataset import TarIndex, index_of, read_index, scan
from ..operator import Schema, register
from ..types import to_numpy_dtype
from .reader_base import as_path_list
from .record_reader import RecordReader, record_output

OP = "readers.webdataset"
MISSING = {"": "empty", "empty": "empty", "skip": "skip", "error": "error"}
DTYPES = tuple(
    np.dtype(t)
    for t in ("uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64", "float16", "float32", "float64")
)


@register
class WebDatasetReader(RecordReader):
    """Reads the members of WebDataset samples as 1-D arrays (uint8 bytes unless ``dtypes``)."""

    schema = Schema(OP, devices=("cpu",), min_inputs=0, max_inputs=0, num_outputs=1, is_reader=True)

    def configure(
        self,
        paths: str | Sequence[str] | None = None,
        index_paths: str | Sequence[str] | None = None,
        ext: str | Sequence[str] | None = None,
        missing_component_behavior: str = "",
        dtypes: Any = None,
        case_sensitive_extensions: bool = True,
        **reader_args: Any,
    ) -> None:
        self.paths = as_path_list(OP, "paths", paths)
        self.index_paths = as_path_list(OP, "index_paths", index_paths, required=False)
        if self.index_paths and len(self.index_paths) != len(self.paths):
            raise ArgumentError(f"{OP}: {len(self.paths)} paths but {len(self.index_paths)} index_paths")
        self.case_sensitive = bool(case_sensitive_extensions)
        self.ext = _ext_sets(ext, self.case_sensitive)
        if not isinstance(missing_component_behavior, str) or missing_component_behavior.lower() not in MISSING:
            raise ArgumentError(
                f"{OP}: missing_component_behavior must be 'empty', 'skip' or 'error', "
                f"got {missing_component_behavior!r}"
            )
        self.missing = MISSING[missing_component_behavior.lower()]
        self.dtypes = _dtypes(dtypes, len(self.ext))
        self.configure_reader(**reader_args)

    @property
    def num_outputs(self) -> int:
        return len(self.ext)

    def open_table(self) -> RecordTable:
        spans, offsets, sizes, keys = [], [], [], []
        for f, path in enumerate(self.paths):
            index = read_index(self.index_paths[f], path) if self.index_paths else index_of(scan(path))
            span, rel, size, key = self._samples(f, index)
            spans.append(span)
            offsets.append(rel)
            sizes.append(size)
            keys.extend(key)
        table = RecordTable.concat(self.paths, spans)
        if len(table) == 0:
            raise ReaderError(f"{OP}: no sample of {', '.join(self.paths)} has members for ext {self._ext_names()}")
        self._offsets = np.concatenate(offsets)
        self._sizes = np.concatenate(sizes)
        encoded = [k.encode("utf-8", "surrogateescape") for k in keys]
        self._keys = b"".join(encoded)
        self._key_starts = np.concatenate([[0], np.cumsum([len(k) for k in encoded], dtype=np.int64)])
        return table

    def _samples(self, f: int, index: TarIndex) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray, np.ndarray, list]:
        """This tar's samples after ``missing_component_behavior``: their spans, the members'
        offsets in the span and sizes per output (-1: missing), and their keys."""
        n, k = len(index), len(self.ext)
        offsets = np.zeros((n, k), np.int64)
        sizes = np.full((n, k), -1, np.int64)
        exts = index.exts if self.case_sensitive else np.char.lower(index.exts)
        sample_of = np.repeat(np.arange(n), np.diff(index.starts))
        first_member = np.full((n, k), -1, np.int64)
        for out, wanted in enumerate(self.ext):
            members = np.flatnonzero(np.isin(exts, sorted(wanted)))
            samples, first = np.unique(sample_of[members], return_index=True)
            first_member[samples, out] = members[first]
        present = first_member >= 0
        offsets[present] = index.offsets[first_member[present]]
        sizes[present] = index.sizes[first_member[present]]
        missing = ~present.all(axis=1)
        if missing.any() and self.missing == "error":
            i = int(np.argmax(missing))
            out = int(np.argmax(~present[i]))
            raise ReaderError(
                f"{OP}: {self._where(f, index, i)} has no member with extension {self._ext_names(out)} "
                f"(missing_component_behavior='error')"
            )
        self._check_dtypes(f, index, first_member)
        keep = ~missing if self.missing == "skip" else np.ones(n, bool)
        offsets, sizes, present = offsets[keep], sizes[keep], present[keep]
        start = np.where(present, offsets, np.iinfo(np.int64).max).min(axis=1, initial=np.iinfo(np.int64).max)
        end = np.where(present, offsets + sizes, -1).max(axis=1, initial=-1)
        empty = ~present.any(axis=1)
        start[empty] = index.offsets[index.starts[:-1][keep][empty]]
        end[empty] = start[empty]
        keys = [self._key(index, int(i)) for i in np.flatnonzero(keep)]
        return (start, end - start), np.where(present, offsets - start[:, None], 0), sizes, keys

    def _check_dtypes(self, f: int, index: TarIndex, first_member: np.ndarray) -> None:
        """DALI's check: a member's size must be a whole number of its output's elements."""
        for out, dtype in enumerate(self.dtypes):
            chosen = first_member[:, out]
            chosen = chosen[chosen >= 0]
            bad = chosen[index.sizes[chosen] % dtype.itemsize != 0]
            if len(bad):
                m = int(bad[0])
                name = str(index.names[m]) if index.names is not None else f"member at offset {index.offsets[m]}"
                raise ReaderError(
                    f"{OP}: {self.paths[f]}: member {name!r} has {int(index.sizes[m])} bytes, "
                    f"not a whole number of {dtype.name} elements (dtypes[{out}])"
                )

    def _where(self, f: int, index: TarIndex, sample: int) -> str:
        where = f"{self.paths[f]}: sample {self._key(index, sample)!r}"
        if self.index_paths:
            where += f" ({self.index_paths[f]} line {sample + 2})"
        return where

    @staticmethod
    def _key(index: TarIndex, sample: int) -> str:
        return str(index.keys[sample]) if index.keys is not None else f"#{sample}"

    def _ext_names(self, out: int | None = None) -> str:
        sets = self.ext if out is None else [self.ext[out]]
        return ", ".join(repr(";".join(sorted(s))) for s in sets)

    def layout_fields(self) -> bytes:
        spec = repr(([sorted(s) for s in self.ext], [d.str for d in self.dtypes], self.missing)).encode()
        return spec + hashlib.sha256(self._offsets.tobytes() + self._sizes.tobytes() + self._keys).digest()

    def source_of(self, index: int) -> str:
        if self.table is None or not 0 <= index < len(self.table):
            return f"sample {index}"
        key = self._keys[self._key_starts[index] : self._key_starts[index + 1]].decode("utf-8", "surrogateescape")
        return f"{self.table.where(index)}, sample key {key!r}"

    def parse(self, index: int, raw: np.ndarray) -> tuple[np.ndarray, ...]:
        outputs = []
        for out, dtype in enumerate(self.dtypes):
            size = int(self._sizes[index, out])
            if size < 0:
                outputs.append(np.zeros(0, dtype))
                continue
            start = int(self._offsets[index, out])
            piece = record_output(raw, raw[start : start + size])
            if start % dtype.itemsize and piece.base is not None:
                piece = piece.copy()
            outputs.append(piece.view(dtype))
        return tuple(outputs)


def _ext_sets(ext: str | Sequence[str] | None, case_sensitive: bool) -> list[frozenset[str]]:
    """One set of accepted extensions per output (``"jpg;jpeg"`` accepts either)."""
    if ext is None:
        raise ArgumentError(f"{OP}: ext is required (one extension, or 'a;b' alternatives, per output)")
    entries = [ext] if isinstance(ext, str) else list(ext)
    if not entries:
        raise ArgumentError(f"{OP}: ext is empty")
    sets = []
    for entry in entries:
        if not isinstance(entry, str):
            raise ArgumentError(f"{OP}: ext entries must be strings, got {entry!r}")
        alternatives = frozenset(e if case_sensitive else e.lower() for e in entry.split(";") if e)
        if not alternatives:
            raise ArgumentError(f"{OP}: ext entry {entry!r} names no extension")
        sets.append(alternatives)
    return sets


def _dtypes(dtypes: Any, count: int) -> list[np.dtype]:
    """One numpy dtype per output (uint8 by default), among the types DALI's reader supports."""
    if dtypes is None:
        return [np.dtype(np.uint8)] * count
    items = list(dtypes) if isinstance(dtypes, (list, tuple)) else [dtypes]
    if len(items) != count:
        raise ArgumentError(f"{OP}: {len(items)} dtypes for {count} ext entries")
    result = []
    for item in items:
        try:
            dtype = to_numpy_dtype(item)
        except ValueError:
            dtype = None
        if dtype is None or dtype not in DTYPES:
            names = ", ".join(d.name for d in DTYPES)
            raise ArgumentError(f"{OP}: dtype {item!r} is not supported (supported: {names})")
        result.append(dtype)
    return result
