"""Framework iterators: one pipeline's batches, epoch by epoch, as dicts of torch tensors or numpy arrays.

These are DALI's single-process iterators (``DALIGenericIterator`` for one GPU). Two
differences: every step yields the ``{name: batch}`` dict itself, not a list with one
dict per GPU, and only one pipeline is accepted; feeding several GPUs or nodes is the
job of the distributed service (``rp.serve`` / ``rp.loader``).

An epoch ends with the reader's last batch (``last_in_epoch``). The reader tops that
batch up with padding entries (repeated or wrapped-around samples) so that every shard
yields the same number of batches; ``last_batch_policy`` says what happens to them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import reader_order
from .backend import is_device_array, to_host
from .errors import ArgumentError, PipelineDefinitionError
from .last_batch import LastBatchPolicy, num_batches
from .pipeline import BatchInfo, Pipeline
from .tensor_list import TensorList

__all__ = ["LastBatchPolicy", "NumpyIterator", "TorchIterator", "to_numpy", "to_torch"]


def to_numpy(tensor_list: TensorList, name: str = "output") -> np.ndarray:
    """A dense batch as a host ``(batch, ...)`` array (GPU batches are copied to the host)."""
    return to_host(_dense(tensor_list, name))


def to_torch(tensor_list: TensorList, name: str = "output") -> Any:
    """A dense batch as a torch tensor sharing its memory: ``torch.from_numpy`` on the host,
    ``torch.from_dlpack`` on the GPU. A read-only host batch is copied once, because torch
    tensors are writable and must not alias read-only memory."""
    import torch

    dense = _dense(tensor_list, name)
    if is_device_array(dense):
        return torch.from_dlpack(dense)
    array = np.asarray(dense)
    if not array.flags.writeable:
        array = array.copy()
    return torch.from_numpy(array)


def _dense(tensor_list: TensorList, name: str) -> Any:
    """The batch as one array on its device; ragged batches have no framework tensor form."""
    if not tensor_list.is_dense_tensor():
        shapes = sorted(set(tensor_list.shape()))
        raise PipelineDefinitionError(
            f"pipeline output {name!r} holds samples of different shapes or dtypes "
            f"({', '.join(map(str, shapes[:3]))}{', ...' if len(shapes) > 3 else ''}): "
            "resize or crop them to one size in the pipeline (fn.resize, fn.crop) "
            "before feeding a framework iterator"
        )
    return tensor_list.as_tensor()


class _PipelineIterator:
    """The iteration protocol shared by every framework iterator; subclasses set ``_convert``.

    ``len()`` needs ``reader_name``; it is the number of batches the current epoch yields:
    the reader's ``batches_per_epoch`` for ``FILL`` and ``PARTIAL`` (equal on every shard;
    on a shard a whole batch smaller than the largest, ``PARTIAL`` trims one batch down to
    zero samples), and for ``DROP`` the batches without padding, i.e. ``shard size //
    batch_size`` of the shard read in this epoch (shards move on each epoch unless
    ``stick_to_shard``, so this can change from epoch to epoch and differ between shards).
    A batch whose samples were all dropped by ``on_error="skip"`` has nothing to yield and
    is passed over, so ``len()`` then overstates by one.

    ``last_batch_info`` is the pipeline's :class:`BatchInfo` for the rows last yielded
    (under ``PARTIAL`` its ``sample_indices`` and ``is_pad`` are trimmed with them).
    """

    _convert: Any  # (TensorList, name) -> framework batch

    def __init__(
        self,
        pipelines: Pipeline | Sequence[Pipeline],
        output_map: Sequence[str] | None = None,
        reader_name: str | None = None,
        last_batch_policy: LastBatchPolicy | str = LastBatchPolicy.FILL,
        auto_reset: bool = False,
    ):
        self._pipe = _single_pipeline(type(self).__name__, pipelines)
        self._names = _output_map(output_map)
        self._policy = _policy(last_batch_policy)
        if not isinstance(auto_reset, bool):
            raise ArgumentError(f"auto_reset must be True or False, got {auto_reset!r}")
        self._auto_reset = auto_reset
        self._pipe.build()
        self._meta = self._pipe.reader_meta(reader_name) if reader_name is not None else None
        self.last_batch_info: BatchInfo | None = None
        self._started = False  # a batch of the current epoch was taken from the pipeline
        self._done = False  # the current epoch's last batch was taken
        info = self._pipe.last_batch_info
        if info is not None and not info.last_in_epoch:
            self._pipe.reset()  # a pipeline left mid-epoch starts at the next epoch

    @property
    def epoch(self) -> int:
        """The epoch being yielded (the next one once :meth:`reset` follows its end)."""
        return self._pipe.epoch - 1 if self._done else self._pipe.epoch

    def __len__(self) -> int:
        meta = self._meta
        if meta is None:
            raise TypeError(f"len() of a {type(self).__name__} needs reader_name=<name of the pipeline's reader>")
        if self._policy is not LastBatchPolicy.DROP:
            return meta["batches_per_epoch"]
        shards = meta["number_of_shards"]
        shard = reader_order.epoch_shard(meta["shard_id"], shards, self.epoch, meta["stick_to_shard"])
        start, end = reader_order.shard_bounds(meta["epoch_size"], shard, shards)
        return num_batches(end - start, self._pipe.batch_size, LastBatchPolicy.DROP)

    def __iter__(self) -> _PipelineIterator:
        return self

    def __next__(self) -> dict[str, Any]:
        while not self._done:
            outputs, info = self._take()
            self._done = info.last_in_epoch
            batch = self._select(outputs, info)
            if batch is not None:
                return batch
        if self._auto_reset:
            self.reset()
        raise StopIteration

    def reset(self) -> None:
        """Move on to the next epoch. Called mid-epoch, the rest of the current one is skipped;
        called before the epoch's first batch, it does nothing."""
        if not self._started:
            return
        if not self._done:
            self._pipe.reset()
        self._started = self._done = False

    def state_dict(self) -> dict[str, Any]:
        """The position of the next batch (the pipeline's: see :meth:`Pipeline.state_dict`)."""
        return self._pipe.state_dict()

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None:
        """Continue at ``state``'s position (see :meth:`Pipeline.load_state_dict`)."""
        self._pipe.load_state_dict(state, strict=strict)
        self._started = self._done = False
        self.last_batch_info = None

    def _take(self) -> tuple[tuple[TensorList, ...], BatchInfo]:
        outputs = self._pipe.run()
        self._started = True
        return outputs, self._pipe.last_batch_info

    def _select(self, outputs: tuple[TensorList, ...], info: BatchInfo) -> dict[str, Any] | None:
        """The batch to yield under the policy, or None to pass this one over."""
        names = self._output_names(len(outputs))
        size = len(info.is_pad)
        if size == 0 or (self._policy is LastBatchPolicy.DROP and info.num_pad):
            return None
        batch = {name: self._convert(tl, name) for name, tl in zip(names, outputs, strict=True)}
        if self._policy is LastBatchPolicy.PARTIAL and info.num_pad:
            keep = size - info.num_pad  # padding entries always come last
            batch = {name: value[:keep] for name, value in batch.items()}
            info = dataclasses.replace(info, sample_indices=info.sample_indices[:keep], is_pad=info.is_pad[:keep])
        self.last_batch_info = info
        return batch

    def _output_names(self, count: int) -> list[str]:
        if self._names is None:
            return [f"data{i}" for i in range(count)]
        if len(self._names) != count:
            raise ArgumentError(f"output_map has {len(self._names)} names but the pipeline has {count} outputs")
        return self._names


class TorchIterator(_PipelineIterator):
    """Yields ``{name: torch.Tensor}`` per batch, sharing memory with the pipeline's batch
    (no copy: ``torch.from_numpy`` for host outputs, ``torch.from_dlpack`` for GPU ones).

    ``pipelines``: one :class:`Pipeline` (or a list of one). ``output_map``: a name per
    output (default ``data0``, ``data1``, ...). ``last_batch_policy``: a
    :class:`LastBatchPolicy` or its name. ``auto_reset``: start the next epoch by itself
    after raising StopIteration; otherwise call :meth:`reset`, and until then every
    ``next()`` raises StopIteration again.
    """

    _convert = staticmethod(to_torch)

    def __init__(self, *args: Any, **kwargs: Any):
        import torch  # noqa: F401  (imported up front: its first import leaves cycles only gc frees)

        super().__init__(*args, **kwargs)


class NumpyIterator(_PipelineIterator):
    """Yields ``{name: numpy.ndarray}`` per batch; host batches are not copied, GPU batches
    are copied to the host. Arguments as for :class:`TorchIterator`."""

    _convert = staticmethod(to_numpy)


def _single_pipeline(owner: str, pipelines: Pipeline | Sequence[Pipeline]) -> Pipeline:
    if isinstance(pipelines, (list, tuple)):
        if len(pipelines) != 1:
            raise ArgumentError(
                f"{owner} takes one pipeline, got {len(pipelines)}: feeding several GPUs "
                "is the distributed service's job (rp.serve / rp.loader)"
            )
        (pipelines,) = pipelines
    if not isinstance(pipelines, Pipeline):
        raise ArgumentError(f"{owner} needs a raypipe Pipeline, got {type(pipelines).__name__}")
    return pipelines


def _output_map(output_map: Sequence[str] | None) -> list[str] | None:
    if output_map is None:
        return None
    if (
        isinstance(output_map, str)
        or not isinstance(output_map, Sequence)
        or not all(isinstance(n, str) for n in output_map)
    ):
        raise ArgumentError(f"output_map must be a list of names, got {output_map!r}")
    names = list(output_map)
    if len(set(names)) != len(names):
        raise ArgumentError(f"output_map names must be unique, got {names}")
    return names


def _policy(value: LastBatchPolicy | str) -> LastBatchPolicy:
    return LastBatchPolicy.parse(value, "last_batch_policy")
