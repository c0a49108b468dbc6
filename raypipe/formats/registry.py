"""The container formats by name, for the ``convert`` and ``index`` commands: where each
one's writer and index tools live, and how its files are named."""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from ..errors import UsageError


@dataclass(frozen=True)
class Format:
    """One container format: its module, writer class, reader and file naming."""

    name: str
    module: str
    writer: str
    reader: str
    sharded: bool  # many data files (shards) rather than one database
    index_suffix: str | None  # the DALI index file of a data file: its name with this suffix

    def load(self) -> ModuleType:
        return importlib.import_module(f"raypipe.formats.{self.module}")

    def writer_class(self) -> Any:
        return getattr(self.load(), self.writer)

    def index_path(self, data_path: str) -> str:
        """Where DALI's tools put the index of ``data_path``."""
        if self.index_suffix is None:
            raise UsageError(f"{self.name} has no index files")
        stem = os.path.splitext(data_path)[0] if self.name == "recordio" else data_path
        return stem + self.index_suffix

    def write_index(self, data_path: str, index_path: str) -> int:
        """Scan ``data_path``, check it and write its index; the record count."""
        return self.load().write_index(data_path, index_path)


FORMATS = {
    f.name: f
    for f in (
        Format("caffe", "caffe", "CaffeWriter", "caffe", False, None),
        Format("caffe2", "caffe", "Caffe2Writer", "caffe2", False, None),
        Format("tfrecord", "tfrecord_file", "TFRecordWriter", "tfrecord", True, ".idx"),
        Format("webdataset", "webdataset", "WebDatasetWriter", "webdataset", True, ".idx"),
        Format("recordio", "recordio", "RecordIOWriter", "mxnet", True, ".idx"),
    )
}
#: The folder inside a conversion's destination where ``raypipe convert`` keeps its state, and its
#: manifest there (the format, the source's digest, the sample count).
STATE = ".raypipe-convert"
MANIFEST = f"{STATE}/manifest.json"
#: The class names of a conversion of class folders, one ``label name`` line each, in its destination.
CLASSES = "classes.txt"
INDEXED = {"tfrecord": "tfrecord", "webdataset": "webdataset", "mxnet": "recordio", "recordio": "recordio"}


def get(name: str) -> Format:
    """The format called ``name``; UsageError listing the known ones otherwise."""
    try:
        return FORMATS[name]
    except KeyError:
        raise UsageError(f"unknown format {name!r} (choose from {', '.join(FORMATS)})") from None


def converted_format(dst: str) -> Format | None:
    """The format ``raypipe convert`` wrote into the folder or URL ``dst``; None when it holds no
    conversion (no manifest)."""
    import json

    from ..storage import files, urls

    try:
        with files.open_binary(urls.join(dst, MANIFEST)) as f:
            return get(json.loads(f.read())["format"])
    except OSError:
        return None


def read_converted(dst: str, **reader_args: Any) -> tuple[Any, Any]:
    """Inside a pipeline definition: ``(encoded images, labels)`` read from what ``raypipe
    convert`` wrote into ``dst``, with the format's own DALI reader (``reader_args`` go to it:
    ``random_shuffle``, ``shard_id``, ``name``...). Labels come out as int32 ``(1,)`` in every
    format, as ``readers.file`` gives them."""
    from .. import fn
    from ..storage import urls

    fmt = converted_format(dst)
    if fmt is None:
        raise UsageError(f"{dst!r} holds no conversion by raypipe convert (no {urls.join(dst, MANIFEST)})")
    if not fmt.sharded:
        return getattr(fn.readers, fmt.reader)(path=dst, **reader_args)
    suffix = fmt.writer_class().suffix
    data = sorted(urls.join(dst, f) for f in _names(dst) if f.startswith("shard-") and f.endswith(suffix))
    indexes = [fmt.index_path(p) for p in data]
    if fmt.name == "tfrecord":
        from .. import tfrecord

        features = {
            "image/encoded": tfrecord.FixedLenFeature((), tfrecord.string, ""),
            "image/class/label": tfrecord.FixedLenFeature([1], tfrecord.int64, -1),
        }
        out = fn.readers.tfrecord(path=data, index_path=indexes, features=features, **reader_args)
        return out["image/encoded"], fn.cast(out["image/class/label"], dtype=_int32())
    if fmt.name == "webdataset":
        images, labels = fn.readers.webdataset(paths=data, index_paths=indexes, ext=["jpg;png", "cls"], **reader_args)
        return images, fn.python_function(labels, function=_ascii_label)
    images, labels = fn.readers.mxnet(path=data, index_path=indexes, **reader_args)
    return images, fn.cast(labels, dtype=_int32())


def _names(folder: str) -> list[str]:
    """The names in a local folder, or of the objects directly under a URL."""
    from ..storage import store, urls

    if not urls.is_url(folder):
        return os.listdir(folder)
    return [url.rsplit("/", 1)[1] for url, _ in store.list_folder(folder)[1]]


def _int32() -> Any:
    from .. import types

    return types.INT32


def _ascii_label(text: Any) -> Any:
    import numpy as np

    return np.array([int(bytes(np.asarray(text)).decode("ascii"))], np.int32)
