"""DALI's PyTorch iterators (``nvidia.dali.plugin.pytorch``) over raypipe pipelines.

Each step yields a list with one ``{name: torch.Tensor}`` dict per pipeline (with
:class:`DALIRaggedIterator`, an output whose samples differ in shape as a list of tensors or a
sparse COO tensor). On the host the
tensors share memory with the pipeline's batch (``torch.from_numpy``); on the GPU they are copies
in memory torch allocated, queued on torch's current stream (:mod:`.device_copy`: a view of the
pipeline's pool could be overwritten by the next batch under the training step's kernels).
Arguments and epochs: see :mod:`raypipe.plugin.base_iterator`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from ...backend import is_device_array
from ...errors import ArgumentError
from ...pipeline import Pipeline
from ...tensor_list import TensorList
from ...types import DALIDataType
from ..base_iterator import LastBatchPolicy, _DaliBaseIterator, dense
from ..device_copy import copy_into, cupy_to_torch, torch_dtype
from . import fn  # noqa: F401  (DALI's plugin.pytorch.fn: torch_python_function)
from .torch_function import TorchPythonFunction

__all__ = [
    "DALIClassificationIterator",
    "DALIGenericIterator",
    "DALIRaggedIterator",
    "LastBatchPolicy",
    "TorchPythonFunction",
    "feed_ndarray",
    "to_torch",
    "to_torch_type",
]

#: DALI's ``to_torch_type``: the torch dtype of each ``types.DALIDataType`` DALI maps (what
#: ``TensorList.dtype`` gives), for allocating the tensor ``feed_ndarray`` fills. Also keyed by the
#: numpy dtype, because where DALI hands out a ``Tensor`` (whose ``dtype`` is a DALIDataType)
#: raypipe hands out an array (a ``TensorCPU`` keeps numpy's ``dtype``).
to_torch_type: dict[Any, torch.dtype] = {
    key: torch_dtype(member.numpy)
    for member in (
        DALIDataType.FLOAT,
        DALIDataType.FLOAT64,
        DALIDataType.FLOAT16,
        DALIDataType.UINT8,
        DALIDataType.INT8,
        DALIDataType.BOOL,
        DALIDataType.INT16,
        DALIDataType.INT32,
        DALIDataType.INT64,
    )
    for key in (member, member.numpy)
}


def to_torch(tensor_list: TensorList, name: str = "output") -> torch.Tensor:
    """A dense batch as a torch tensor: on the host sharing its memory (a read-only host batch is
    copied once, because torch tensors are writable and must not alias read-only memory); on the
    GPU a copy torch owns, queued on torch's current stream (see :mod:`.device_copy`)."""
    array = dense(tensor_list, name)
    if is_device_array(array):
        return cupy_to_torch(array)
    array = np.asarray(array)
    if not array.flags.writeable:
        array = array.copy()
    return torch.from_numpy(array)


def feed_ndarray(
    tensor_list: TensorList | Any, arr: torch.Tensor, cuda_stream: torch.cuda.Stream | int | None = None
) -> torch.Tensor:
    """Copy a dense batch into ``arr`` (same dtype and shape) and return ``arr``; on the GPU the
    copy is queued on ``cuda_stream`` (a torch stream or a raw ``cudaStream_t``; default torch's
    current stream) straight from the pipeline's batch, which is held until the copy has run.
    ``tensor_list`` may also be an array where DALI takes a ``Tensor`` (``tl.as_tensor()``,
    ``tl[i]``: a ``TensorCPU`` on the host, the cupy array on the GPU)."""
    array = dense(tensor_list, "output") if isinstance(tensor_list, TensorList) else tensor_list
    dtype = torch_dtype(array.dtype)
    if dtype != arr.dtype:
        raise ArgumentError(f"feed_ndarray: the batch holds {dtype} but arr is {arr.dtype}")
    if tuple(array.shape) != tuple(arr.shape):
        raise ArgumentError(f"feed_ndarray: the batch has shape {tuple(array.shape)} but arr {tuple(arr.shape)}")
    if not is_device_array(array):
        return arr.copy_(torch.from_numpy(np.ascontiguousarray(array)))
    if cuda_stream is None:
        stream = torch.cuda.current_stream(arr.device).cuda_stream
    else:
        stream = cuda_stream if isinstance(cuda_stream, int) else cuda_stream.cuda_stream
    if arr.is_contiguous():
        return copy_into(array, arr, stream)
    with torch.cuda.stream(torch.cuda.ExternalStream(stream)):
        return arr.copy_(cupy_to_torch(array), non_blocking=True)


class DALIGenericIterator(_DaliBaseIterator):
    """Yields ``[{name: torch.Tensor}, ...]``, one dict per pipeline, names from ``output_map``.

    ``pipelines``: a :class:`Pipeline` or a list of them (same batch size, read in step).
    ``size``: samples per epoch, the pipelines' shards together (mutually exclusive with
    ``reader_name``; -1: until the reader's epoch ends). ``reader_name``: the reader whose epoch
    and shards set the epoch (``len()`` needs it or ``size``). ``auto_reset``: True/``"yes"``
    starts the next epoch by itself after StopIteration; False/None/``"no"``: call
    :meth:`reset` (or ``iter()`` again). ``fill_last_batch``: deprecated, True is ``FILL`` and
    False ``PARTIAL``. ``dynamic_shape``: accepted and unused, as in DALI.
    ``last_batch_padded``: as in DALI, whether the reader pads rather than reading on (it
    changes no count here: see :mod:`raypipe.plugin.base_iterator`). ``last_batch_policy``:
    a :class:`LastBatchPolicy` or its name. ``prepare_first_batch``: read the first batch
    while constructing.
    """

    _convert = staticmethod(to_torch)

    def __init__(
        self,
        pipelines: Pipeline | Sequence[Pipeline],
        output_map: Sequence[str],
        size: int = -1,
        reader_name: str | None = None,
        auto_reset: bool | str | None = False,
        fill_last_batch: bool | None = None,
        dynamic_shape: Any = False,
        last_batch_padded: bool = False,
        last_batch_policy: LastBatchPolicy | str = LastBatchPolicy.FILL,
        prepare_first_batch: bool = True,
    ) -> None:
        super().__init__(
            pipelines,
            output_map,
            size,
            reader_name,
            auto_reset,
            fill_last_batch,
            last_batch_padded,
            last_batch_policy,
            prepare_first_batch,
        )


class DALIClassificationIterator(DALIGenericIterator):
    """:class:`DALIGenericIterator` with ``output_map=["data", "label"]``."""

    def __init__(
        self,
        pipelines: Pipeline | Sequence[Pipeline],
        size: int = -1,
        reader_name: str | None = None,
        auto_reset: bool | str | None = False,
        fill_last_batch: bool | None = None,
        dynamic_shape: Any = False,
        last_batch_padded: bool = False,
        last_batch_policy: LastBatchPolicy | str = LastBatchPolicy.FILL,
        prepare_first_batch: bool = True,
    ) -> None:
        super().__init__(
            pipelines,
            ["data", "label"],
            size,
            reader_name=reader_name,
            auto_reset=auto_reset,
            fill_last_batch=fill_last_batch,
            dynamic_shape=dynamic_shape,
            last_batch_padded=last_batch_padded,
            last_batch_policy=last_batch_policy,
            prepare_first_batch=prepare_first_batch,
        )


def to_torch_list(tensor_list: TensorList) -> list[torch.Tensor]:
    """Each sample of a batch as a torch tensor (host samples share memory with the batch; read-only
    ones are copied once, GPU samples are copied as :func:`to_torch` copies them)."""
    out = []
    for i in range(len(tensor_list)):
        sample = tensor_list.at(i)
        if is_device_array(sample):
            out.append(cupy_to_torch(sample))
            continue
        sample = np.asarray(sample)
        out.append(torch.from_numpy(sample if sample.flags.writeable else sample.copy()))
    return out


def to_sparse_coo(samples: list[torch.Tensor], name: str) -> torch.Tensor:
    """1-D samples of different lengths as one ``(batch, longest)`` sparse COO tensor, as DALI's."""
    if any(s.ndim != 1 for s in samples):
        raise ArgumentError(f"DALIRaggedIterator: output {name!r} tagged sparse_coo must hold 1-D samples")
    values = torch.hstack(samples) if samples else torch.zeros(0)
    rows = torch.repeat_interleave(torch.arange(len(samples)), torch.tensor([len(s) for s in samples]))
    cols = torch.cat([torch.arange(len(s)) for s in samples]) if samples else torch.zeros(0, dtype=torch.long)
    return torch.sparse_coo_tensor(torch.stack([rows, cols]).to(values.device), values)


class DALIRaggedIterator(_DaliBaseIterator):
    """DALI's iterator for outputs whose samples differ in shape: yields ``[{name: value}, ...]``,
    where ``output_types`` tags each output: :attr:`DENSE_TAG` (one tensor, as
    :class:`DALIGenericIterator`; the default for every output), :attr:`SPARSE_LIST_TAG` (a list
    of per-sample tensors) or :attr:`SPARSE_COO_TAG` (1-D samples as one sparse COO tensor of
    ``(batch, longest)``). The other arguments are :class:`DALIGenericIterator`'s."""

    DENSE_TAG: str = "dense"
    SPARSE_LIST_TAG: str = "sparse_list"
    SPARSE_COO_TAG: str = "sparse_coo"

    def __init__(
        self,
        pipelines: Pipeline | Sequence[Pipeline],
        output_map: Sequence[str],
        size: int = -1,
        reader_name: str | None = None,
        output_types: Sequence[str] | None = None,
        auto_reset: bool | str | None = False,
        fill_last_batch: bool | None = None,
        dynamic_shape: Any = False,
        last_batch_padded: bool = False,
        last_batch_policy: LastBatchPolicy | str = LastBatchPolicy.FILL,
        prepare_first_batch: bool = True,
    ) -> None:
        tags = (self.DENSE_TAG, self.SPARSE_LIST_TAG, self.SPARSE_COO_TAG)
        types = [self.DENSE_TAG] * len(output_map) if output_types is None else list(output_types)
        if len(types) != len(output_map) or any(t not in tags for t in types):
            raise ArgumentError(
                f"DALIRaggedIterator: output_types must give one of {tags} per output, got {output_types!r}"
            )
        self._types = dict(zip(output_map, types))
        super().__init__(
            pipelines,
            output_map,
            size,
            reader_name,
            auto_reset,
            fill_last_batch,
            last_batch_padded,
            last_batch_policy,
            prepare_first_batch,
        )

    def _convert(self, tensor_list: TensorList, name: str) -> Any:
        tag = self._types[name]
        if tag == self.DENSE_TAG:
            return to_torch(tensor_list, name)
        samples = to_torch_list(tensor_list)
        return samples if tag == self.SPARSE_LIST_TAG else to_sparse_coo(samples, name)
