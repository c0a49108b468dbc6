"""``fn.external_source`` / ``ops.ExternalSource``: data from Python enters the pipeline.

The operator holds what was fed to it, by (epoch, batch, entry): in one process the pipeline's
:class:`~raypipe.source_feed.SourceFeeder` calls the source (or takes ``feed_input`` data) batch by
batch and hands each batch here before the executor runs it, beside a reader's batch of the same
index when the pipeline has one; the CPU stage then takes sample by sample, the GPU stage
(``device="gpu"``) a batch at a time. A per-sample callable of
:class:`~raypipe.sample_info.SampleInfo` needs no feeding: asked for a sample nobody fed (the
service drives it by the indices of its plan), the operator calls the source for it, with the
sample index as ``idx_in_epoch`` and its place in an unshuffled epoch as ``idx_in_batch`` and
``iteration``, so the sample is the same whichever rank, actor or helper computes it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import Any

import numpy as np

from ..backend import to_host
from ..errors import ArgumentError, SampleError
from ..keyed_random import SampleContext
from ..operator import Operator, Schema, register
from ..sample_info import SampleInfo
from ..source_callback import CALLABLE, SourceCallback, cycle_mode
from ..tensor_list import TensorList
from ..types import DALIDataType, to_numpy_dtype

OP = "external_source"


@register
class ExternalSource(Operator):
    """DALI's external source: ``source`` (a callable, an iterable or a generator function; None to
    feed data with ``pipe.feed_input(name, data)``), ``num_outputs`` (the source gives a tuple of
    that many batches or samples), ``batch`` (False: the source is called per sample),
    ``batch_info``, ``cycle``, ``parallel`` (run the source in ``py_num_workers`` worker processes),
    ``prefetch_queue_depth`` (batches the workers compute ahead), ``dtype``, ``ndim`` and ``layout``
    (checked or set on every batch), ``device`` ("gpu" uploads the data). ``no_copy``, ``blocking``,
    ``cuda_stream`` and ``use_copy_kernel`` are accepted hints: fed data is always copied here."""

    schema = Schema(name=OP, devices=("cpu", "gpu"), min_inputs=0, max_inputs=0)
    positional_args = ("source", "num_outputs")

    def configure(
        self,
        source: Any = None,
        num_outputs: int | None = None,
        *,
        cycle: Any = None,
        layout: str | Sequence[str] | None = None,
        dtype: DALIDataType | Sequence[DALIDataType] | None = None,
        ndim: int | Sequence[int] | None = None,
        batch: bool | None = None,
        batch_info: bool | None = None,
        parallel: bool | None = None,
        prefetch_queue_depth: int | None = None,
        no_copy: bool | None = None,
        blocking: bool | None = None,
        repeat_last: bool = False,
        cuda_stream: Any = None,
        use_copy_kernel: bool | None = None,
    ) -> None:
        if num_outputs is not None and (isinstance(num_outputs, bool) or not isinstance(num_outputs, int)):
            raise ArgumentError(f"{OP}: num_outputs must be a positive int, got {num_outputs!r}")
        if num_outputs is not None and num_outputs < 1:
            raise ArgumentError(f"{OP}: num_outputs must be a positive int, got {num_outputs!r}")
        self.multi = num_outputs is not None
        self._count = num_outputs or 1
        self.parallel = bool(parallel)
        self.batch = (not self.parallel) if batch is None else bool(batch)
        self.repeat_last = bool(repeat_last)
        if source is None and (cycle is not None or self.parallel or batch_info):
            raise ArgumentError(f"{OP}: cycle, parallel and batch_info need a source")
        if source is not None and self.repeat_last:
            raise ArgumentError(f"{OP}: repeat_last is usable only without a source (data fed with feed_input)")
        if source is None and self.multi:
            raise ArgumentError(f"{OP}: num_outputs needs a source (feed_input feeds one output)")
        self.callback = (
            None
            if source is None
            else SourceCallback(OP, source, cycle=cycle_mode(OP, cycle), batch=self.batch, batch_info=bool(batch_info))
        )
        self.prefetch_queue_depth = self._check_parallel(prefetch_queue_depth, no_copy)
        self.layouts = self._per_output("layout", layout, str)
        self.dtypes = [None if d is None else to_numpy_dtype(d) for d in self._per_output("dtype", dtype, object)]
        self.ndims = self._per_output("ndim", ndim, int)
        for layout_, ndim_ in zip(self.layouts, self.ndims):
            if layout_ and ndim_ is not None and len(layout_) != ndim_:
                raise ArgumentError(f"{OP}: layout {layout_!r} does not have ndim={ndim_} dimensions")
        self.batch_size = 1  # the pipeline's, for samples asked for by index (bind_batch_size)
        self._store: dict[tuple[int, int], tuple[np.ndarray, ...]] = {}

    def _check_parallel(self, depth: int | None, no_copy: bool | None) -> int:
        """DALI's rules for ``parallel=True``; the prefetch depth of the workers (1 by default)."""
        if not self.parallel:
            if depth is not None:
                raise ArgumentError(f"{OP}: prefetch_queue_depth is valid only for parallel external sources")
            return 1
        if no_copy is False:
            raise ArgumentError(f"{OP}: no_copy cannot be False with parallel=True")
        depth = 1 if depth is None else depth
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
            raise ArgumentError(f"{OP}: prefetch_queue_depth must be a positive int, got {depth!r}")
        callback = self.callback
        if callback.kind == CALLABLE and not callback.takes_arg:
            raise ArgumentError(
                f"{OP}: a callable run with parallel=True must accept one argument: a SampleInfo with batch=False, "
                "a BatchInfo (batch_info=True) or the iteration number with batch=True; it takes none"
            )
        if callback.kind != CALLABLE and not self.batch:
            what = "an iterable" if callback.kind == "iterable" else "a generator function"
            raise ArgumentError(
                f"{OP}: a parallel external source with {what} must run in batch mode: pass batch=True and make "
                "the source return batches"
            )
        return depth

    def _per_output(self, name: str, value: Any, kind: type) -> list:
        values = list(value) if isinstance(value, (list, tuple)) else [value] * self._count
        if len(values) != self._count:
            raise ArgumentError(f"{OP}: {name} gives {len(values)} values for {self._count} outputs")
        for v in values:
            if v is not None and not isinstance(v, kind) or isinstance(v, bool):
                raise ArgumentError(f"{OP}: {name} must be a {kind.__name__} (or one per output), got {value!r}")
        return values

    @property
    def num_outputs(self) -> int:
        return self._count

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        return self.layouts[0] or ""

    def output_layouts(self) -> list[str]:
        """The layout of each output (``layout`` may give one per output)."""
        return [layout or "" for layout in self.layouts]

    def bind_batch_size(self, batch_size: int) -> None:
        """The pipeline's batch size: where a sample asked for by index sits in an unshuffled epoch."""
        self.batch_size = batch_size

    # Feeding (one process): batches are split into samples and kept until the stages take them.
    def fed_batches(self, data: Any) -> Iterator[list[list[np.ndarray]]]:
        """The batches one ``feed_input`` gives: here the one batch ``data`` (checked now)."""
        return iter([self.batch_outputs(data)])

    def batch_outputs(self, data: Any) -> list[list[np.ndarray]]:
        """What the source gave for a batch (``num_outputs`` batches, or one), as per-output lists
        of host samples, checked against ``dtype`` and ``ndim``; every output has the same size."""
        return self.checked(split_batch(data, self._count, self.multi))

    def sample_outputs(self, samples: Sequence[Any]) -> list[list[np.ndarray]]:
        """What a per-sample source gave for each sample of a batch, as per-output lists."""
        return self.checked(split_samples(samples, self._count, self.multi))

    def checked(self, outputs: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
        """Per-output lists of samples checked against ``dtype``, ``ndim`` and ``layout``."""
        return [self._checked(samples, k) for k, samples in enumerate(outputs)]

    def _checked(self, samples: list[np.ndarray], k: int) -> list[np.ndarray]:
        dtype, ndim = self.dtypes[k], self.ndims[k]
        for sample in samples:
            if dtype is not None and sample.dtype != dtype:
                raise ArgumentError(f"{OP}: output {k} was given {sample.dtype} data, dtype declares {dtype}")
            if ndim is not None and sample.ndim != ndim:
                raise ArgumentError(f"{OP}: output {k} was given {sample.ndim}-D samples, ndim declares {ndim}")
        layout = self.layouts[k]
        if layout and samples and samples[0].ndim != len(layout):
            raise ArgumentError(f"{OP}: layout {layout!r} does not fit {samples[0].ndim}-D samples")
        return samples

    def hold(self, epoch: int, batch: int, outputs: list[list[np.ndarray]]) -> None:
        """Keep a fed batch's samples as entries 0, 1, ... of batch ``batch`` of ``epoch``."""
        for slot, sample in enumerate(zip(*outputs)):
            self._store[(epoch, batch, slot)] = sample

    def drop(self) -> None:
        """Forget fed samples no batch will run (the pipeline restarted its feeding)."""
        self._store.clear()

    def _take(self, ctx: SampleContext) -> tuple[np.ndarray, ...]:
        sample = self._store.pop((ctx.epoch, ctx.batch, ctx.slot), None)
        if sample is not None:
            return sample
        index, epoch = ctx.sample_index, ctx.epoch
        callback = self.callback
        if callback is not None and callback.indexable:
            info = SampleInfo(index, index % self.batch_size, index // self.batch_size, epoch)
            try:
                data = callback.sample(info)
            except StopIteration:
                raise SampleError(
                    f"{OP}: the source raised StopIteration for sample {index} of epoch {epoch}, inside the epoch "
                    "it was found to have: a source of SampleInfo must end at the same index every time",
                    sample_index=index,
                ) from None
            return tuple(o[0] for o in self.sample_outputs([data]))
        raise SampleError(
            f"{OP}: no data was fed for entry {ctx.slot} of batch {ctx.batch} of epoch {epoch}", sample_index=index
        )

    def run_sample(self, inputs, args, ctx):
        sample = self._take(ctx)
        return sample[0] if self._count == 1 else sample

    def run_batch(self, xp: ModuleType, inputs, args, ctxs):
        """The batch's samples on the device: one upload of the stacked batch where the samples
        agree in shape and dtype, else one per sample."""
        samples = [self._take(ctx) for ctx in ctxs]
        outs = [_uploaded(xp, [s[k] for s in samples]) for k in range(self._count)]
        return outs[0] if self._count == 1 else tuple(outs)


def _uploaded(xp: ModuleType, samples: list[np.ndarray]) -> Any:
    if samples and len({(s.shape, s.dtype) for s in samples}) == 1:
        return xp.asarray(np.stack(samples))
    return [xp.asarray(s) for s in samples]


def split_batch(data: Any, count: int, multi: bool) -> list[list[np.ndarray]]:
    """What a source gave for a batch (``count`` batches when ``multi``, else one) as per-output
    lists of host samples, every output of the same size."""
    outputs = [[_host(s) for s in _samples(b)] for b in _outputs_of(data, count, multi, "batch")]
    if len({len(o) for o in outputs}) > 1:
        raise ArgumentError(f"{OP}: the outputs of one batch have different sizes {[len(o) for o in outputs]}")
    return outputs


def split_samples(samples: Sequence[Any], count: int, multi: bool) -> list[list[np.ndarray]]:
    """What a per-sample source gave for each sample of a batch, as per-output lists."""
    split = [_outputs_of(s, count, multi, "sample") for s in samples]
    return [[_host(s[k]) for s in split] for k in range(count)]


def _outputs_of(data: Any, count: int, multi: bool, what: str) -> list[Any]:
    """``data`` as the list of its outputs: itself, or the ``count`` items of a tuple/list."""
    if not multi:
        return [data]
    if not isinstance(data, (tuple, list)) or len(data) != count:
        got = f"{len(data)} items" if isinstance(data, (tuple, list)) else type(data).__name__
        raise ArgumentError(f"{OP}: with num_outputs={count} the source must return {count} {what}es, got {got}")
    return list(data)


def _samples(batch: Any) -> list[Any]:
    """The samples of a batch: a list or tuple of them, a TensorList, or an array whose outer
    dimension is the batch."""
    if isinstance(batch, TensorList):
        host = batch.as_cpu()
        return [host.at(i) for i in range(len(host))]
    if isinstance(batch, (list, tuple)):
        return list(batch)
    array = _host(batch)
    if array.ndim == 0:
        raise ArgumentError(f"{OP}: a batch must be a list of samples or an array with a batch dimension, got a scalar")
    return list(array)


def _host(value: Any) -> np.ndarray:
    """A sample as a contiguous host array (numpy, cupy, torch and DLPack producers)."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor, possibly on a GPU
        value = value.detach().cpu().numpy()
    array = to_host(value)
    return array if array.flags.c_contiguous else np.array(array, order="C")  # ascontiguousarray makes 0-d 1-d
