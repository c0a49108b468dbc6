"""The file listings of DALI's readers of plain files by name filter (``readers.numpy``,
``experimental.readers.fits``): the files of ``file_root`` matching ``file_filter``, or the paths
of a ``file_list``."""

from __future__ import annotations

import fnmatch
import os

from ..errors import ReaderError


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
