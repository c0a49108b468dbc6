"""``readers.caffe`` and ``readers.caffe2``: samples from Caffe (``Datum``) and Caffe2
(``TensorProtos``) LMDBs, in key order across the given databases, with DALI's outputs.

Differences from DALI 2.4, whose Caffe2 reader fails on some of its own layouts (checked by
running it): label types 1 and 3 give one dense label output (DALI declares two and fails at
run time), the weights of label type 3 are not taken for a bounding box, and ``bbox`` is read
only when asked for (DALI reads the proto after the additional ones whenever there is one)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

import lmdb
import numpy as np

from ..errors import ArgumentError, ReaderError
from ..formats.caffe import DataType, Tensor, parse_datum, parse_tensor_protos
from ..formats.lmdb_store import LmdbStore
from ..formats.protowire import WireError
from ..operator import Schema, register
from .reader_base import ShardedReader, as_path_list

SINGLE_LABEL, MULTI_LABEL_SPARSE, MULTI_LABEL_DENSE, MULTI_LABEL_WEIGHTED_SPARSE, NO_LABEL = range(5)


class LmdbReader(ShardedReader):
    """The samples of one or more LMDBs in key order; subclasses parse a value into outputs."""

    stores: list[LmdbStore] | None = None

    def configure_lmdb(self, path: str | Sequence[str], reader_args: dict[str, Any]) -> None:
        self.paths = as_path_list(self.schema.name, "path", path)
        self.configure_reader(**reader_args)

    def parse(self, value: memoryview, view: Callable[[memoryview], np.ndarray]) -> tuple[np.ndarray, ...]:
        """The outputs of one value (a buffer into the map, valid only during the call): encoded
        images as arrays made by ``view`` (read-only, keeping the map, no copy: a decoder only
        reads them), the rest copied out of it; raise ReaderError or WireError."""
        raise NotImplementedError

    def layout_fields(self) -> bytes:
        """Arguments that change what a value yields, folded into :meth:`digest`."""
        return b""

    @property
    def num_outputs(self) -> int:
        return self._num_outputs

    def prepare(self) -> None:
        if self.stores is not None:
            return
        stores = [LmdbStore(p) for p in self.paths]
        try:
            self._offsets = np.cumsum([0] + [len(s) for s in stores])
        except ReaderError as exc:
            raise ReaderError(f"{self.schema.name}: {exc}") from None
        self.check_shards(int(self._offsets[-1]))
        self.stores = stores

    def __len__(self) -> int:
        self.prepare()
        return int(self._offsets[-1])

    def _locate(self, index: int) -> tuple[LmdbStore, int]:
        if len(self.stores) == 1:
            return self.stores[0], index
        k = int(np.searchsorted(self._offsets, index, side="right")) - 1
        return self.stores[k], index - int(self._offsets[k])

    def source_of(self, index: int) -> str:
        """``PATH key KEY`` of sample ``index``."""
        if self.stores is None or not 0 <= index < len(self):
            return f"sample {index}"
        store, local = self._locate(index)
        return f"{store.path} key {store.keys[local].decode('utf-8', 'backslashreplace')}"

    def content_digest(self) -> str:
        """A hash of every database's key list and of the arguments that shape the outputs."""
        self.prepare()
        h = hashlib.sha256(self.layout_fields())
        for store in self.stores:
            h.update(store.digest().encode())
        return h.hexdigest()[:16]

    def read(self, index: int) -> tuple[np.ndarray, ...]:
        self.prepare()
        if not 0 <= index < len(self):
            raise IndexError(f"{self.schema.name}: sample index {index} outside [0, {len(self)})")
        store, local = self._locate(index)
        try:
            return store.apply(local, self.parse)
        except (ReaderError, WireError, lmdb.Error) as exc:
            raise ReaderError(f"{self.schema.name}: {self.source_of(index)} (sample {index}): {exc}") from None

    def close(self) -> None:
        for store in self.stores or ():
            store.close()


def _flag(op: str, name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ArgumentError(f"{op}: {name} must be a bool, got {value!r}")
    return bool(value)


def _count(op: str, name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ArgumentError(f"{op}: {name} must be an int >= {low}, got {value!r}")
    return int(value)


@register
class CaffeReader(LmdbReader):
    """Caffe ``Datum`` values: the image (encoded bytes as 1-D uint8, a read-only view into the
    database's map; unencoded pixels as (height, width, channels) uint8 holding the stored bytes
    unchanged, as DALI does) and the label as int32 of shape (1,). A value without data or label
    gives an empty array, as in DALI."""

    schema = Schema("readers.caffe", devices=("cpu",), min_inputs=0, max_inputs=0, num_outputs=2, is_reader=True)

    def configure(
        self,
        path: str | Sequence[str] | None = None,
        image_available: bool = True,
        label_available: bool = True,
        **reader_args: Any,
    ) -> None:
        op = self.schema.name
        self.image_available = _flag(op, "image_available", image_available)
        self.label_available = _flag(op, "label_available", label_available)
        self._num_outputs = self.image_available + self.label_available
        if not self._num_outputs:
            raise ArgumentError(f"{op}: image_available and label_available are both False: nothing to read")
        self.configure_lmdb(path, reader_args)

    def layout_fields(self) -> bytes:
        return bytes([self.image_available, self.label_available])

    def parse(self, value: memoryview, view: Callable[[memoryview], np.ndarray]) -> tuple[np.ndarray, ...]:
        d = parse_datum(value)
        out = []
        if self.image_available:
            if d.data is None:
                out.append(np.empty(0, np.uint8))
            elif d.encoded is False:
                shape = (d.height, d.width, d.channels)
                if min(shape) < 0 or shape[0] * shape[1] * shape[2] != len(d.data):
                    raise ReaderError(f"unencoded Datum of height x width x channels {shape} holds {len(d.data)} bytes")
                out.append(np.frombuffer(d.data, np.uint8).reshape(shape).copy())
            else:
                out.append(view(d.data))
        if self.label_available:
            out.append(np.array([d.label], np.int32) if d.label is not None else np.empty(0, np.int32))
        return tuple(out)


@register
class Caffe2Reader(LmdbReader):
    """Caffe2 ``TensorProtos`` values, tensors in order: the image (STRING: encoded bytes as 1-D
    uint8; BYTE: pixels as (H, W, C) uint8 from its dims), the label by ``label_type`` (0: one
    value, shape (1,); 1: indices to a 0/1 vector of ``num_labels``; 2: all values; 3: indices
    and a FLOAT weights tensor to a float32 vector of ``num_labels``; 4: none), labels int32 or
    float32 as stored, then ``additional_inputs`` tensors (FLOAT, INT32 or INT64, 1-D) and, with
    ``bbox``, an INT32 tensor of 4 values."""

    schema = Schema("readers.caffe2", devices=("cpu",), min_inputs=0, max_inputs=0, num_outputs=2, is_reader=True)

    def configure(
        self,
        path: str | Sequence[str] | None = None,
        label_type: int = SINGLE_LABEL,
        num_labels: int = 1,
        image_available: bool = True,
        additional_inputs: int = 0,
        bbox: bool = False,
        **reader_args: Any,
    ) -> None:
        op = self.schema.name
        if isinstance(label_type, bool) or not isinstance(label_type, (int, np.integer)) or not 0 <= label_type <= 4:
            raise ArgumentError(
                f"{op}: label_type must be 0 (SINGLE_LABEL), 1 (MULTI_LABEL_SPARSE), 2 (MULTI_LABEL_DENSE), "
                f"3 (MULTI_LABEL_WEIGHTED_SPARSE) or 4 (NO_LABEL), got {label_type!r}"
            )
        self.label_type = int(label_type)
        self.num_labels = _count(op, "num_labels", num_labels, 1)
        self.image_available = _flag(op, "image_available", image_available)
        self.additional_inputs = _count(op, "additional_inputs", additional_inputs, 0)
        self.bbox = _flag(op, "bbox", bbox)
        self._num_outputs = self.image_available + (self.label_type != NO_LABEL) + self.additional_inputs + self.bbox
        if not self._num_outputs:
            raise ArgumentError(f"{op}: no image, no label, no additional inputs and no bbox: nothing to read")
        self.configure_lmdb(path, reader_args)

    def layout_fields(self) -> bytes:
        fields = (self.label_type, self.num_labels, self.image_available, self.additional_inputs, self.bbox)
        return np.array(fields, np.int64).tobytes()

    def parse(self, value: memoryview, view: Callable[[memoryview], np.ndarray]) -> tuple[np.ndarray, ...]:
        tensors = parse_tensor_protos(value)
        out = []
        k = 0
        if self.image_available:
            out.append(_image(_tensor(tensors, k, "image"), view))
            k += 1
        if self.label_type != NO_LABEL:
            label, used = self._label(tensors, k)
            out.append(label)
            k += used
        for j in range(self.additional_inputs):
            t = _tensor(tensors, k, f"additional input {j}")
            values = {DataType.FLOAT: t.float_data, DataType.INT32: t.int32_data, DataType.INT64: t.int64_data}
            if t.data_type not in values:
                raise ReaderError(
                    f"additional input {j} (tensor {k}) is {_type_name(t)}; expected FLOAT, INT32 or INT64"
                )
            out.append(values[t.data_type].copy())
            k += 1
        if self.bbox:
            t = _tensor(tensors, k, "bbox")
            if t.data_type != DataType.INT32 or len(t.int32_data) != 4:
                raise ReaderError(
                    f"bbox (tensor {k}) must be INT32 with 4 values, got {_type_name(t)} with {_size(t)} values"
                )
            out.append(t.int32_data.copy())
        return tuple(out)

    def _label(self, tensors: list[Tensor], k: int) -> tuple[np.ndarray, int]:
        """The label output and how many tensors it used."""
        t = _tensor(tensors, k, "label")
        if t.data_type == DataType.INT32:
            values = t.int32_data
        elif t.data_type == DataType.FLOAT:
            values = t.float_data
        else:
            raise ReaderError(f"label (tensor {k}) is {_type_name(t)}; expected INT32 or FLOAT")
        if self.label_type == SINGLE_LABEL:
            if len(values) != 1:
                raise ReaderError(f"label (tensor {k}) holds {len(values)} values; label_type 0 needs one")
            return values.copy(), 1
        if self.label_type == MULTI_LABEL_DENSE:
            return values.copy(), 1
        indices = values.astype(np.int64)
        if len(indices) and (indices.min() < 0 or indices.max() >= self.num_labels or np.any(indices != values)):
            raise ReaderError(f"label indices {values.tolist()} (tensor {k}) are not all in [0, {self.num_labels})")
        if self.label_type == MULTI_LABEL_SPARSE:
            dense = np.zeros(self.num_labels, values.dtype)
            dense[indices] = 1
            return dense, 1
        w = _tensor(tensors, k + 1, "label weights")
        if w.data_type != DataType.FLOAT or len(w.float_data) != len(indices):
            raise ReaderError(
                f"label weights (tensor {k + 1}) must be FLOAT with one value per index ({len(indices)}), "
                f"got {_type_name(w)} with {_size(w)} values"
            )
        dense = np.zeros(self.num_labels, np.float32)
        dense[indices] = w.float_data
        return dense, 2


def _tensor(tensors: list[Tensor], k: int, what: str) -> Tensor:
    if k >= len(tensors):
        raise ReaderError(f"the value holds {len(tensors)} tensors; the {what} would be tensor {k}")
    return tensors[k]


def _image(t: Tensor, view: Callable[[memoryview], np.ndarray]) -> np.ndarray:
    """The image of tensor ``t``: encoded bytes as a ``view`` into the map (no copy), pixels copied."""
    if t.data_type == DataType.STRING:
        if not t.string_data:
            raise ReaderError("image tensor (STRING) holds no string")
        return view(t.string_data[0])
    if t.data_type == DataType.BYTE:
        if len(t.dims) not in (2, 3) or min(t.dims) < 0:
            raise ReaderError(f"image tensor (BYTE) has dims {t.dims}; expected [H, W] or [H, W, C]")
        shape = (t.dims[0], t.dims[1], t.dims[2] if len(t.dims) == 3 else 1)
        size = len(t.byte_data) if t.byte_data is not None else 0
        if shape[0] * shape[1] * shape[2] != size:
            raise ReaderError(f"image tensor (BYTE) of dims {t.dims} holds {size} bytes")
        return np.frombuffer(t.byte_data, np.uint8).reshape(shape).copy()
    raise ReaderError(f"image tensor is {_type_name(t)}; expected STRING (encoded) or BYTE (pixels)")


def _type_name(t: Tensor) -> str:
    try:
        return DataType(t.data_type).name
    except ValueError:
        return f"data type {t.data_type}"


def _size(t: Tensor) -> int:
    return max(len(t.float_data), len(t.int32_data), len(t.int64_data), len(t.double_data), len(t.string_data))
