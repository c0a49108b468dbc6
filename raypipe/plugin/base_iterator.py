"""DALI's ``_DaliBaseIterator`` over raypipe pipelines: the epoch, ``len()``, ``reset()`` and the
last-batch policies shared by ``raypipe.plugin.pytorch`` and ``raypipe.plugin.numpy``.

Arguments, their checks and their meaning follow ``nvidia.dali.plugin.base_iterator``. Every
step runs each pipeline once (one pipeline per GPU in DALI; they stay in step) and yields a
list with one ``{name: batch}`` dict per pipeline. Where an epoch ends:

* ``reader_name`` given (or ``size=-1`` on one pipeline with a reader): at the reader's epoch
  end. Every pipeline yields the reader's batches per epoch (``FILL``: full batches, padding
  included; ``PARTIAL``: the padding trimmed off, so a batch may hold fewer rows, even none)
  or, with ``DROP``, as many full batches as the smallest shard holds,
  ``(epoch_size // num_shards) // batch_size``, the same on every shard.
* ``size`` > 0: the pipelines are one stream and each epoch takes ``size`` samples of it, all
  pipelines together, counted as DALI counts them: ``FILL`` rounds up to whole steps, ``DROP``
  rounds down (reading the incomplete step and dropping it), ``PARTIAL`` trims the last step
  to exactly ``size`` samples, leaving out later pipelines' dicts where it must.

The one difference from DALI is the reader's: with ``pad_last_batch=False`` a DALI reader
reads on into the next epoch to fill the last batch and that epoch goes on after those
samples (DALI's iterator then shortens it; with ``PARTIAL`` or ``DROP`` samples are missed).
raypipe's readers never share a batch between epochs: the filler wraps around to the start
of the shard and is reported as padding, and every epoch starts at the start of its shard.
So ``last_batch_padded`` changes no count here, and where a shard does not split into whole
batches, epochs after the first start where DALI's would not. With ``pad_last_batch=True``
both yield the same batches.

Beyond DALI: ``state_dict()`` / ``load_state_dict()`` (the position contract of
:mod:`raypipe.position`), ``last_batch_info`` (the :class:`BatchInfo` of each dict last
yielded, trimmed with it), ``epoch``, ``size=-1`` ending at the reader's epoch end with the
policy applied (DALI reads on until the pipeline stops, always with ``FILL``), policies given
by name, and a clear error for outputs whose samples differ in shape.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import ArgumentError, PipelineDefinitionError
from ..last_batch import LastBatchPolicy
from ..pipeline import BatchInfo, Pipeline
from ..position import make_state, read_state
from ..tensor_list import TensorList

__all__ = ["LastBatchPolicy"]

Batch = dict[str, Any]
Step = tuple[list[Batch], list[BatchInfo]]


def dense(tensor_list: TensorList, name: str) -> Any:
    """The batch as one array on its device; ragged batches have no framework tensor form."""
    if not tensor_list.is_dense_tensor():
        shapes = sorted(set(tensor_list.shape()))
        raise PipelineDefinitionError(
            f"pipeline output {name!r} holds samples of different shapes or dtypes "
            f"({', '.join(map(str, shapes[:3]))}{', ...' if len(shapes) > 3 else ''}): "
            "resize or crop them to one size in the pipeline (fn.resize, fn.crop) "
            "before feeding a framework iterator"
        )
    return tensor_list.dense_array()


class _DaliBaseIterator:
    """The iteration protocol of every framework iterator; subclasses set ``_convert``.

    ``len()`` is DALI's: ``ceil(size / step)`` (``DROP``: ``size // step``), where a step is
    ``batch_size`` samples with ``reader_name`` and ``batch_size`` times the number of pipelines
    with ``size``; with neither it raises TypeError. The ``size`` property is DALI's too: with
    ``reader_name`` the samples per shard it counts with (``DROP``: ``epoch_size // num_shards``;
    padded readers: ``ceil(epoch_size / num_shards)``; otherwise that rounded up to whole batches).

    A batch whose samples were all dropped by ``on_error="skip"`` has nothing to yield: its step
    is passed over (every pipeline's part of it), and ``len()`` then overstates by one.
    """

    _convert: Callable[[TensorList, str], Any]

    def __init__(
        self,
        pipelines: Pipeline | Sequence[Pipeline],
        output_map: Sequence[str],
        size: int = -1,
        reader_name: str | None = None,
        auto_reset: bool | str | None = False,
        fill_last_batch: bool | None = None,
        last_batch_padded: bool = False,
        last_batch_policy: LastBatchPolicy | str = LastBatchPolicy.FILL,
        prepare_first_batch: bool = True,
    ):
        owner = self._owner = type(self).__name__
        self._pipes = _pipelines(owner, pipelines)
        self.output_map = _output_map(owner, output_map)
        self.batch_size = self._pipes[0].batch_size
        size = _size(owner, size)
        if reader_name and not isinstance(reader_name, str):  # a false value is none, as DALI reads it
            raise ArgumentError(f"{owner}: reader_name must be the name of a reader, got {reader_name!r}")
        reader_name = reader_name or None
        for name, value in (("last_batch_padded", last_batch_padded), ("prepare_first_batch", prepare_first_batch)):
            if not isinstance(value, bool):
                raise ArgumentError(f"{owner}: {name} must be True or False, got {value!r}")
        if size < 0 and len(self._pipes) > 1 and reader_name is None:
            raise ArgumentError(
                f"{owner}: size=-1 (to the end of the reader's epoch) takes one pipeline; "
                f"with {len(self._pipes)} pass reader_name or size"
            )
        if reader_name is not None and size > 0:
            raise ArgumentError(f"{owner}: pass size or reader_name, not both (the reader sets the size)")
        if reader_name is not None and last_batch_padded:
            raise ArgumentError(
                f"{owner}: pass last_batch_padded or reader_name, not both (the reader's pad_last_batch sets it)"
            )
        self._auto_reset = _auto_reset(owner, auto_reset)
        self._policy = _policy(fill_last_batch, last_batch_policy)
        self._reader_name = reader_name
        self._per_step = self.batch_size if reader_name is not None else len(self._pipes) * self.batch_size
        meta = self._reader_meta(size)
        self._by_reader = meta is not None
        #: pipelines fed only by external sources: a size-counted epoch starts them again, as DALI's reset
        self._fed = [not _has_reader(p) for p in self._pipes] if meta is None and size > 0 else []
        self._drop_after: int | None = None
        if meta is not None and self._policy is LastBatchPolicy.DROP:
            self._drop_after = meta["epoch_size"] // meta["number_of_shards"] // self.batch_size
            if self._drop_after == 0:
                raise ArgumentError(
                    f"{owner}: last_batch_policy=DROP leaves no batch: batch_size {self.batch_size} is larger "
                    f"than the smallest shard ({meta['epoch_size']} samples in {meta['number_of_shards']} shards)"
                )
        self._size = _dali_size(meta, self.batch_size, self._policy) if reader_name is not None else size
        # DALI's private names for the same facts, which public iterator subclasses read (solo-learn's
        # __len__, for one): the policy, the pipelines, and the reader's unpadded size and sharding.
        self._last_batch_policy = self._policy
        self._devices = len(self._pipes)
        self._size_no_pad = meta["epoch_size"] if meta is not None else size
        self._shards_num = meta["number_of_shards"] if meta is not None else 1
        self._shard_id = meta["shard_id"] if meta is not None else 0
        if size > 0:
            if self._policy is LastBatchPolicy.DROP and size < self._per_step:
                raise ArgumentError(
                    f"{owner}: last_batch_policy=DROP leaves no batch: size {size} is less than one step "
                    f"({len(self._pipes)} pipeline(s) x batch_size {self.batch_size})"
                )
            warnings.warn(
                "Please set `reader_name` and don't set last_batch_padded and size manually whenever possible. "
                "This may lead, in some situations, to missing some samples or returning duplicated ones. "
                "Check the Sharding section of the documentation for more details.",
                Warning,
                stacklevel=3,
            )
        epochs = {p.epoch for p in self._pipes}
        if len(epochs) > 1:
            raise ArgumentError(f"{owner}: the pipelines are at epochs {sorted(epochs)}; they must be in step")
        self._epoch = epochs.pop()
        self._counter = 0  # DALI's: samples read in this epoch (per pipeline with reader_name, else in all)
        restored = self._pipes[0].restored_state
        if restored is not None:  # made from checkpoints(): the epoch goes on where it stopped
            self._counter = self._restored_counter(restored)
        self._over = False  # reader epochs: the epoch's last batch was read
        self._yielded = False  # a batch of this epoch was yielded
        self._ever_consumed = False
        self._fetched: list[BatchInfo] = []  # the pipelines' infos of the last read
        self._pending: Step | None = None  # the batch read ahead by prepare_first_batch
        self._pending_at: list[tuple[int, int]] = []
        self.last_batch_info: list[BatchInfo] | None = None
        if prepare_first_batch:
            try:
                self._pending = self._step()
            except StopIteration:
                return
            self._pending_at = [(info.epoch, info.index) for info in self._fetched]

    @property
    def _first_batch(self) -> list[Batch] | None:
        """DALI's name for the batch read ahead by ``prepare_first_batch``, which public iterator
        subclasses take in their own ``__next__`` (and then set to None)."""
        return None if self._pending is None else self._pending[0]

    @_first_batch.setter
    def _first_batch(self, value: list[Batch] | None) -> None:
        if value is not None:
            raise ArgumentError(f"{self._owner}: _first_batch can only be set to None (taken)")
        if self._pending is not None:
            self.last_batch_info = self._pending[1]
            self._pending = None
            self._ever_consumed = self._yielded = True

    @property
    def size(self) -> int:
        """DALI's ``size``: samples per epoch it counts with (-1: until the reader's epoch ends)."""
        return self._size

    @property
    def epoch(self) -> int:
        """The reader's epoch of the batches being read (with reader epochs, the next one once
        :meth:`reset` follows the end of one)."""
        return self._epoch

    def __len__(self) -> int:
        if self._size < 0:
            raise TypeError(
                f"len() of a {self._owner} needs reader_name=<name of the pipeline's reader> (or size=<samples>)"
            )
        if self._policy is LastBatchPolicy.DROP:
            return self._size // self._per_step
        return math.ceil(self._size / self._per_step)

    def __iter__(self) -> _DaliBaseIterator:
        if self._counter != 0 and self._ever_consumed:
            self.reset()
        return self

    def __next__(self) -> list[Batch]:
        self._ever_consumed = True
        if self._pending is not None:
            step, self._pending = self._pending, None
        else:
            step = self._step()
        batches, self.last_batch_info = step
        self._yielded = True
        return batches

    def next(self) -> list[Batch]:
        """The next step's batches (DALI's spelling of ``next(iterator)``)."""
        return self.__next__()

    def reset(self) -> None:
        """Start the next epoch once this one is over. As in DALI, a reset before the end of the
        epoch is ignored with a warning; with ``size=-1`` it moves on to the next epoch at once
        (before the epoch's first batch is yielded it does nothing)."""
        if self._size < 0 and self._reader_name is None:
            if self._pending is None and (self._over or self._yielded):
                self._next_epoch()
            return
        if self._pending is None and self._by_reader and self._over:
            self._next_epoch()
            return
        if self._pending is None and not self._by_reader:
            if self._policy is LastBatchPolicy.DROP and self._counter < self._size < self._counter + self._per_step:
                self._fetch()  # the incomplete step is read and dropped, as DALI does
            if self._counter >= self._size:
                self._counter = 0
                self._yielded = False
                for pipe, fed in zip(self._pipes, self._fed):
                    if fed:  # its sources start over (an iter_setup that rewound, a callable's new epoch)
                        pipe.reset()
                return
        warnings.warn(
            f"{self._owner}.reset(): the epoch is not finished; as in DALI, resetting mid-epoch is ignored",
            stacklevel=2,
        )

    def state_dict(self) -> dict[str, Any]:
        """The position of the next batch: the pipeline's state (:meth:`Pipeline.state_dict`); with
        several pipelines, theirs under ``"pipelines"``; with ``size``, also the samples of the
        epoch already read (``"samples_in_epoch"``)."""
        states = [p.state_dict() for p in self._pipes]
        counter = self._counter
        if self._pending is not None:  # the batch read ahead is the next one
            states = [
                {**state, "epoch": epoch, "offset": index * self.batch_size}
                for state, (epoch, index) in zip(states, self._pending_at, strict=True)
            ]
            counter -= self._per_step
        if len(states) == 1:
            state = states[0]
        else:
            order = {"pipeline_fingerprints": [s["fingerprint"] for s in states]}
            state = make_state(order, states[0]["epoch"], states[0]["offset"], pipelines=states)
        if not self._by_reader and self._size > 0:
            state["samples_in_epoch"] = counter
        return state

    def checkpoints(self) -> list[bytes]:
        """DALI's checkpoints of the iterator: one per pipeline, each that pipeline's checkpoint at the
        iterator's next batch (the batch read ahead counts as not read) with the iterator's own
        position in the epoch; a pipeline made with ``checkpoint=`` it, and an iterator made over those
        pipelines as this one was, go on with the next batch. Needs ``enable_checkpointing=True``."""
        if not all(p.enable_checkpointing for p in self._pipes):
            raise ArgumentError(f"{self._owner}: cannot access checkpoints with checkpointing disabled")
        state = self.state_dict()
        states = state["pipelines"] if len(self._pipes) > 1 else [state]
        extra = {"samples_in_epoch": state["samples_in_epoch"]} if "samples_in_epoch" in state else {}
        return [json.dumps({**s, **extra}, sort_keys=True).encode() for s in states]

    def _restored_counter(self, restored: dict[str, Any]) -> int:
        """DALI's ``_counter`` for pipelines restored from :meth:`checkpoints`: the samples of the epoch
        they had read."""
        if self._by_reader or self._size < 0:
            state = self._pipes[0].state_dict()
            return state["offset"] if state["epoch"] == self._epoch else 0
        counter = restored.get("samples_in_epoch", 0)
        if isinstance(counter, bool) or not isinstance(counter, int) or counter < 0:
            raise ArgumentError(f"{self._owner}: samples_in_epoch must be a non-negative int, got {counter!r}")
        return counter

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None:
        """Continue at ``state``'s position (see :meth:`Pipeline.load_state_dict`); a state from
        another dataset, seed, batching or number of pipelines is an error unless ``strict=False``."""
        if len(self._pipes) == 1:
            self._pipes[0].load_state_dict(state, strict=strict)
        else:
            order = {"pipeline_fingerprints": [p.state_dict()["fingerprint"] for p in self._pipes]}
            read_state(state, order, owner=self._owner, strict=strict)
            states = state.get("pipelines")
            if not isinstance(states, list) or len(states) != len(self._pipes):
                raise ArgumentError(f"{self._owner}: the state does not hold {len(self._pipes)} pipelines' states")
            for pipe, pipe_state in zip(self._pipes, states, strict=True):
                pipe.load_state_dict(pipe_state, strict=strict)
        self._epoch = self._pipes[0].epoch
        if self._by_reader or self._size < 0:
            self._counter = state["offset"] if self._epoch == state["epoch"] else 0
        else:
            counter = state.get("samples_in_epoch", 0)
            if isinstance(counter, bool) or not isinstance(counter, int) or counter < 0:
                raise ArgumentError(f"{self._owner}: samples_in_epoch must be a non-negative int, got {counter!r}")
            self._counter = counter
        self._over = self._yielded = False
        self._pending = None
        self.last_batch_info = None

    def _reader_meta(self, size: int) -> dict[str, Any] | None:
        """The reader metadata that sets the epoch: the named reader's (checked equal in every
        pipeline), the only reader's with ``size=-1``, None when ``size`` counts the epoch."""
        for pipe in self._pipes:
            pipe.build()
        if self._reader_name is not None:
            metas = [p.reader_meta(self._reader_name) for p in self._pipes]
            for key, what in (
                ("epoch_size", "size value"),
                ("number_of_shards", "num_shards argument"),
                ("pad_last_batch", "pad_last_batch argument"),
                ("stick_to_shard", "stick_to_shard argument"),
            ):
                values = [m[key] for m in metas]
                if len(set(values)) > 1:
                    raise ArgumentError(
                        f"{self._owner}: reader {self._reader_name!r} must have the same {what} in every pipeline, "
                        f"got {values}"
                    )
            return metas[0]
        if size > 0:
            return None
        try:
            return self._pipes[0].reader_meta()
        except PipelineDefinitionError:  # no reader: the pipeline runs until it stops
            return None

    def _step(self) -> Step:
        """The next step to yield, reading past steps that have nothing to yield."""
        while True:
            if self._over or (not self._by_reader and 0 < self._size <= self._counter):
                if self._auto_reset:
                    self.reset()
                raise StopIteration
            outputs = self._fetch()
            infos = self._fetched
            if self._by_reader and not self._advance(infos[0]):
                continue
            if not self._by_reader and self._policy is LastBatchPolicy.DROP and self._counter > self._size > 0:
                continue  # DALI reads the incomplete step and drops it
            if any(len(info.is_pad) == 0 for info in infos):
                continue  # every sample of a batch was skipped
            return self._select(outputs, infos)

    def _fetch(self) -> list[tuple[TensorList, ...]]:
        """Run every pipeline once; their infos go to ``_fetched``."""
        try:
            outputs = [p.run() for p in self._pipes]
        except StopIteration:  # a driven pipeline ran out of batches
            if self._size < 0 and self._auto_reset:
                self.reset()
            raise
        infos = [p.last_batch_info for p in self._pipes]
        self._fetched = infos
        self._counter += self._per_step
        self._epoch = infos[0].epoch
        if self._by_reader:
            for i, info in enumerate(infos[1:], start=1):
                if (info.epoch, info.index) != (infos[0].epoch, infos[0].index):
                    raise ArgumentError(
                        f"{self._owner}: the pipelines are not in step: pipeline {i} read epoch {info.epoch} "
                        f"batch {info.index}, pipeline 0 epoch {infos[0].epoch} batch {infos[0].index}; "
                        "give them the same position before wrapping them"
                    )
        return outputs

    def _advance(self, info: BatchInfo) -> bool:
        """Note where the reader's epoch stands after ``info``'s batch; False to drop that batch."""
        drop_after = self._drop_after
        if drop_after is not None and info.index >= drop_after:
            self._over = True  # DROP: read, not yielded
            return False
        self._over = info.last_in_epoch or (drop_after is not None and info.index + 1 >= drop_after)
        return True

    def _select(self, outputs: list[tuple[TensorList, ...]], infos: list[BatchInfo]) -> Step:
        """Every pipeline's batch under the policy: PARTIAL trims padding (reader epochs) or the
        samples beyond ``size`` (DALI's count)."""
        batches = [self._batch(o) for o in outputs]
        if self._policy is not LastBatchPolicy.PARTIAL:
            return batches, infos
        if self._by_reader:
            keeps = [len(info.is_pad) - info.num_pad for info in infos]  # padding always comes last
        elif self._counter > self._size > 0:
            wanted = self._per_step - (self._counter - self._size)
            pipes, last = math.ceil(wanted / self.batch_size), wanted % self.batch_size or self.batch_size
            batches, infos = batches[:pipes], infos[:pipes]
            keeps = [len(info.is_pad) for info in infos[:-1]] + [last]
        else:
            return batches, infos
        trimmed = [_trim(b, i, k) for b, i, k in zip(batches, infos, keeps, strict=True)]
        return [b for b, _ in trimmed], [i for _, i in trimmed]

    def _batch(self, outputs: tuple[TensorList, ...]) -> Batch:
        if len(outputs) != len(self.output_map):
            raise ArgumentError(
                f"{self._owner}: output_map has {len(self.output_map)} names "
                f"but the pipeline has {len(outputs)} outputs"
            )
        return {name: self._convert(tl, name) for name, tl in zip(self.output_map, outputs, strict=True)}

    def _next_epoch(self) -> None:
        """Reader epochs: move every pipeline to the start of the next epoch."""
        following = self._epoch + 1
        for pipe in self._pipes:
            if pipe.epoch != following:  # DROP stopped early, or a reset with size=-1 mid-epoch
                pipe.reset(epoch=following)
        self._epoch = following
        self._counter = 0
        self._over = self._yielded = False


def _trim(batch: Batch, info: BatchInfo, keep: int) -> tuple[Batch, BatchInfo]:
    if keep >= len(info.is_pad):
        return batch, info
    return {name: _head(value, keep) for name, value in batch.items()}, dataclasses.replace(
        info, sample_indices=info.sample_indices[:keep], is_pad=info.is_pad[:keep]
    )


def _head(value: Any, keep: int) -> Any:
    """The first ``keep`` samples of an output: a slice, or for a sparse tensor (which has no
    slicing) its rows copied."""
    if getattr(value, "is_sparse", False):
        return value.narrow_copy(0, 0, keep)
    return value[:keep]


def _dali_size(meta: dict[str, Any], batch_size: int, policy: LastBatchPolicy) -> int:
    """DALI's per-shard ``size`` for a named reader."""
    samples, shards = meta["epoch_size"], meta["number_of_shards"]
    if policy is LastBatchPolicy.DROP:
        return samples // shards
    if meta["pad_last_batch"]:
        return math.ceil(samples / shards)
    return math.ceil(math.ceil(samples / shards) / batch_size) * batch_size


def _pipelines(owner: str, pipelines: Pipeline | Sequence[Pipeline]) -> list[Pipeline]:
    pipes = list(pipelines) if isinstance(pipelines, (list, tuple)) else [pipelines]
    if not pipes:
        raise ArgumentError(f"{owner}: pipelines is empty; pass a pipeline or a list of them")
    for pipe in pipes:
        if not isinstance(pipe, Pipeline):
            raise ArgumentError(f"{owner}: pipelines must be raypipe Pipelines, got {type(pipe).__name__}")
    sizes = [p.batch_size for p in pipes]
    if len(set(sizes)) > 1:
        raise ArgumentError(f"{owner}: every pipeline must have the same batch_size, got {sizes}")
    return pipes


def _output_map(owner: str, output_map: Sequence[str]) -> list[str]:
    if (
        isinstance(output_map, str)
        or not isinstance(output_map, Sequence)
        or not all(isinstance(n, str) for n in output_map)
    ):
        raise ArgumentError(f"{owner}: output_map must be a list of names, got {output_map!r}")
    names = list(output_map)
    if len(set(names)) != len(names):
        raise ArgumentError(f"{owner}: output_map names must be distinct, got {names}")
    return names


def _size(owner: str, size: Any) -> int:
    if isinstance(size, bool) or not isinstance(size, numbers.Real) or not math.isfinite(size):
        raise ArgumentError(f"{owner}: size must be a number of samples (or -1), got {size!r}")
    if int(size) == 0:
        raise ArgumentError(f"{owner}: size cannot be 0")
    return int(size)


def _auto_reset(owner: str, value: Any) -> bool:
    if value is False or value is None or (isinstance(value, str) and value == "no"):
        return False
    if value is True or (isinstance(value, str) and value == "yes"):
        return True
    raise ArgumentError(f"{owner}: auto_reset must be True, False, None, 'yes' or 'no', got {value!r}")


def _policy(fill_last_batch: bool | None, last_batch_policy: Any) -> LastBatchPolicy:
    if fill_last_batch is None:
        return LastBatchPolicy.parse(last_batch_policy, "last_batch_policy")
    warnings.warn("Please do not use `fill_last_batch` and use `last_batch_policy` instead.", Warning, stacklevel=4)
    return LastBatchPolicy.FILL if fill_last_batch else LastBatchPolicy.PARTIAL


def _has_reader(pipe: Any) -> bool:
    """Whether ``pipe`` reads a dataset (else external sources feed it)."""
    try:
        pipe.reader_meta()
    except PipelineDefinitionError:
        return False
    return True
