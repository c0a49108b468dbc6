"""What DALI's readers of plain files listed by a name filter (``readers.numpy``,
``experimental.readers.fits``) share: their arguments (``file_root`` with ``file_filter``,
``file_list`` or ``files``), their listing, and the identity of the dataset it gives."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Sequence

from ..errors import ArgumentError, ReaderError
from .reader_base import ShardedReader, as_path_list, paths_hash, refuse_unexpanded_home


def list_filtered_root(op: str, file_root: str, file_filter: str) -> list[str]:
    """DALI's listing of ``file_root``: the files directly in it whose names match ``file_filter``,
    then those of each sub-folder in name order (one level down), each group sorted by name."""
    if not os.path.isdir(file_root):
        raise ReaderError(f"{op}: file_root {file_root!r} does not exist or is not a folder")
    entries = sorted(os.scandir(file_root), key=lambda e: e.name)
    paths = [e.path for e in entries if not e.is_dir() and fnmatch.fnmatchcase(e.name, file_filter)]
    for folder in (e for e in entries if e.is_dir()):
        found = sorted(os.scandir(folder.path), key=lambda e: e.name)
        paths.extend(e.path for e in found if not e.is_dir() and fnmatch.fnmatchcase(e.name, file_filter))
    if not paths:
        raise ReaderError(f"{op}: file_root {file_root!r} holds no files matching {file_filter!r}")
    return paths


def parse_path_list(op: str, file_list: str, file_root: str | None) -> list[str]:
    """The paths of ``file_list``, one a line, relative to ``file_root`` or else to the list's folder."""
    try:
        with open(file_list, encoding="utf-8") as f:
            lines = [line.strip() for line in f.read().splitlines()]
    except OSError as exc:
        raise ReaderError(f"{op}: cannot open file_list {file_list!r}: {exc.strerror}") from None
    base = file_root if file_root is not None else os.path.dirname(os.path.abspath(file_list))
    paths = [line if os.path.isabs(line) else os.path.join(base, line) for line in lines if line]
    if not paths:
        raise ReaderError(f"{op}: file_list {file_list!r} lists no files")
    return paths


class FilteredFilesReader(ShardedReader):
    """A reader of one file per sample, listed as DALI's FileLoader lists them. Subclasses call
    :meth:`configure_files` from ``configure`` and give ``read``."""

    def configure_files(
        self, file_root: str | None, file_filter: str, file_list: str | None, files: str | Sequence[str] | None
    ) -> None:
        """Validate and store the listing arguments (the files are listed by :meth:`prepare`)."""
        op = self.schema.name
        if file_list is not None and files is not None:
            raise ArgumentError(f"{op}: give file_list or files, not both")
        if file_root is None and file_list is None and files is None:
            raise ArgumentError(f"{op}: give file_root, file_list or files")
        if not isinstance(file_filter, str) or not file_filter:
            raise ArgumentError(f"{op}: file_filter must be a glob string, got {file_filter!r}")
        for name, value in (("file_root", file_root), ("file_list", file_list)):
            refuse_unexpanded_home(op, name, [] if value is None else [os.fspath(value)])
        self.file_root = None if file_root is None else os.fspath(file_root)
        self.file_filter, self.file_list = file_filter, file_list
        self._files = None if files is None else as_path_list(op, "files", files)
        self.paths: list[str] | None = None

    def prepare(self) -> None:
        """List the files; raises ReaderError naming the folder or list at fault."""
        if self.paths is not None:
            return
        op = self.schema.name
        if self._files is not None:
            root = self.file_root
            paths = [p if root is None or os.path.isabs(p) else os.path.join(root, p) for p in self._files]
        elif self.file_list is not None:
            paths = parse_path_list(op, os.fspath(self.file_list), self.file_root)
        else:
            paths = list_filtered_root(op, self.file_root, self.file_filter)
        self.check_shards(len(paths))
        self.paths = paths

    def __len__(self) -> int:
        self.prepare()
        return len(self.paths)

    def source_of(self, index: int) -> str:
        """The file behind sample ``index``."""
        return self.paths[index] if self.paths is not None and 0 <= index < len(self.paths) else f"sample {index}"

    def content_digest(self) -> str:
        """A hash of the file list relative to its common folder (survives moving the dataset)."""
        self.prepare()
        return paths_hash(self.paths).hexdigest()[:16]
