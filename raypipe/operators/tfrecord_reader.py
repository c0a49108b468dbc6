"""``readers.tfrecord``: ``tf.train.Example`` records from TFRecord files through DALI's index
files, one output per requested feature (``fn.readers.tfrecord`` returns a dict by name).

Outputs follow DALI 2.4: a string feature is the bytes of its value as 1-D uint8; a
``FixedLenFeature`` has exactly its ``shape`` (``[]`` gives a 0-d array); a ``VarLenFeature``
is 1-D, or ``(n, *partial_shape)``. Where DALI yields uninitialised memory (a missing feature,
too few values) this reader fills a missing fixed-length feature with its ``default_value``, and
raises ReaderError naming the feature when it has none or the count is wrong; a missing
variable-length feature reads as empty. Every record's CRCs are checked."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ArgumentError, ReaderError
from ..formats.record_files import RecordTable
from ..formats.tfrecord_file import parse_example, read_index, unframe
from ..operator import Schema, register
from ..tfrecord import DTYPE_NAMES, Feature, float32, int64, string
from .reader_base import as_path_list
from .record_reader import RecordReader, record_output

_KIND = {int64: "int64", float32: "float", string: "bytes"}
_NUMPY = {int64: np.int64, float32: np.float32}


def feature_output(
    name: str, feature: Feature, found: tuple[str | None, Any] | None, raw: np.ndarray | None = None
) -> np.ndarray:
    """The output array of feature ``name`` from a parsed Example entry (None: missing). A string
    feature's bytes are a view of the record ``raw`` where that pins nothing more
    (:func:`~raypipe.operators.record_reader.record_output`), else a copy."""
    dtype = DTYPE_NAMES[feature.dtype]
    if found is None:
        if not feature.fixed:
            return np.zeros((0, *feature.partial_shape), _NUMPY[feature.dtype])
        if feature.default_value is None:
            raise ReaderError(f"feature {name!r} is missing and its spec has no default_value")
        if feature.dtype == string:
            value = feature.default_value
            return np.frombuffer(value.encode() if isinstance(value, str) else value, np.uint8).copy()
        return np.full(feature.shape, feature.default_value, _NUMPY[feature.dtype])
    kind, values = found
    if kind is not None and kind != _KIND[feature.dtype]:
        raise ReaderError(f"feature {name!r} holds {kind} values, the spec asks for {dtype}")
    count = len(values)
    if feature.dtype == string:
        if count != 1:
            raise ReaderError(f"feature {name!r} holds {count} byte strings, a string feature reads exactly 1")
        value = np.frombuffer(values[0], np.uint8)
        return value.copy() if raw is None else record_output(raw, value)
    array = np.asarray(values, _NUMPY[feature.dtype]) if count else np.zeros(0, _NUMPY[feature.dtype])
    if feature.fixed:
        if count != math.prod(feature.shape):
            raise ReaderError(
                f"feature {name!r} holds {count} {dtype} values, its FixedLenFeature shape {list(feature.shape)} "
                f"needs {math.prod(feature.shape)}"
            )
        return array.reshape(feature.shape)
    inner = math.prod(feature.partial_shape)
    if count % inner:
        raise ReaderError(
            f"feature {name!r} holds {count} {dtype} values, not a multiple of partial_shape "
            f"{list(feature.partial_shape)}"
        )
    return array.reshape(count // inner, *feature.partial_shape) if feature.partial_shape else array


@register
class TFRecordReader(RecordReader):
    """Reads the requested features of every record; outputs named after the features."""

    schema = Schema("readers.tfrecord", devices=("cpu",), min_inputs=0, max_inputs=0, num_outputs=1, is_reader=True)

    def configure(
        self,
        path: str | Sequence[str] | None = None,
        index_path: str | Sequence[str] | None = None,
        features: dict[str, Feature] | None = None,
        **reader_args: Any,
    ) -> None:
        op = self.schema.name
        paths = as_path_list(op, "path", path)
        if index_path is None:
            raise ArgumentError(
                f"{op}: index_path is required (one index per TFRecord file, as DALI needs): "
                f"create it with `raypipe index tfrecord FILE`, which writes FILE.idx"
            )
        index_paths = as_path_list(op, "index_path", index_path)
        if len(index_paths) != len(paths):
            raise ArgumentError(
                f"{op}: {len(paths)} path(s) but {len(index_paths)} index_path(s); give one index per file"
            )
        if not isinstance(features, dict) or not features:
            raise ArgumentError(f"{op}: features must be a non-empty dict of name: FixedLenFeature/VarLenFeature")
        for name, feature in features.items():
            if not isinstance(name, str) or not name:
                raise ArgumentError(f"{op}: feature names must be non-empty strings, got {name!r}")
            if not isinstance(feature, Feature):
                raise ArgumentError(
                    f"{op}: feature {name!r} must come from raypipe.tfrecord.FixedLenFeature or VarLenFeature, "
                    f"got {feature!r}"
                )
        self.configure_reader(**reader_args)
        self.paths, self.index_paths = paths, index_paths
        self.features = dict(features)
        self.output_names = tuple(features)

    def open_table(self) -> RecordTable:
        return RecordTable.concat(self.paths, [read_index(i, p) for p, i in zip(self.paths, self.index_paths)])

    def parse(self, index: int, raw: np.ndarray) -> tuple[np.ndarray, ...]:
        example = parse_example(unframe(raw), self.features)
        return tuple(feature_output(name, f, example.get(name), raw) for name, f in self.features.items())

    def layout_fields(self) -> bytes:
        return repr(list(self.features.items())).encode()
