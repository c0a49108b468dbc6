"""A pipeline whose data comes from an external source, as the service takes it.

The service decides which sample indices each rank reads, in which order, and resumes at any
position: it can drive a source only if any sample can be asked for by its index, alone, any
number of times. A per-sample callable of :class:`~raypipe.sample_info.SampleInfo`
(``batch=False``) is such a source: it replaces the reader, and each sample is the source called
with ``idx_in_epoch`` = the index the service's plan gives. Iterables, generators, batch callables
and ``feed_input`` are refused before anything starts, saying why and what to write instead.

The epoch's length is found as DALI finds it, by the source raising StopIteration at the first
index past the end, without reading the epoch: the source is called at indices 1, 2, 4, ... until
one raises, then at the midpoints of the last gap (about 2 log2(n) calls, each one sample).

The service checks that every actor and helper sees the dataset it was started on, by length and
digest. A reader's digest hashes its sample list; an external source's samples cannot be listed
without computing the epoch, so its digest hashes the probed length and the source's qualified
name (module and name of the function, or of the callable's class): another function, or the
same function seeing more or less data on another node, is caught; a change inside the function
that keeps its name and length is not.
"""

from __future__ import annotations

import hashlib
from typing import Any

from .aligned_readers import combined_digest
from .errors import ArgumentError
from .graph import OpNode, StagedGraph
from .operators.external_source import ExternalSource
from .sample_info import SampleInfo
from .source_callback import CALLABLE

#: The largest epoch a probe looks for: a source that never raises StopIteration is refused.
MAX_PROBED = 1 << 40

_INSTEAD = (
    "write a per-sample source instead: fn.external_source(source=sample, batch=False) with "
    "def sample(sample_info): return the sample number sample_info.idx_in_epoch, and raise StopIteration "
    "when it is past the last sample"
)


def external_sources(staged: StagedGraph) -> list[OpNode]:
    """The external sources of a staged graph."""
    return [n for n in (*staged.host_nodes, *staged.gpu_nodes) if isinstance(n.op, ExternalSource)]


def check_servable(node: OpNode) -> None:
    """Raise, saying why and what to write instead, unless the service can drive ``node``."""
    callback = node.op.callback
    if callback is not None and callback.indexable:
        return
    if callback is None:
        what = "is fed with feed_input: only the process that feeds it has its data"
    elif callback.kind != CALLABLE:
        what = (
            f"is {'an iterable' if callback.kind == 'iterable' else 'a generator function'}: each batch depends on "
            "the ones it returned before"
        )
    elif callback.batch:
        what = "returns whole batches (batch=True): the service picks samples, not the source's batches"
    else:
        what = "is a per-sample callable without a SampleInfo argument: it cannot be asked for a given sample"
    raise ArgumentError(
        f"serve: external source {node.label} {what}, so the service cannot give each rank its own samples, "
        f"reshuffle them every epoch or resume at a position; {_INSTEAD}"
    )


def probe_length(op: ExternalSource, batch_size: int) -> int:
    """The number of samples of a per-sample source's epoch 0: the first index at which it raises
    StopIteration, found by exponential then binary search (the source's result is discarded)."""

    def has(index: int) -> bool:
        try:
            op.callback.sample(SampleInfo(index, index % batch_size, index // batch_size, 0))
        except StopIteration:
            return False
        return True

    if not has(0):
        raise ArgumentError(f"serve: external source {op.schema.name} raised StopIteration for sample 0: no data")
    low, high = 0, 1  # has(low); has(high) unknown
    while has(high):
        low, high = high, high * 2
        if high > MAX_PROBED:
            raise ArgumentError(
                f"serve: the external source never raises StopIteration (sample {low} exists): the service needs "
                "a finite epoch; raise StopIteration past the last sample"
            )
    while high - low > 1:  # has(low), not has(high)
        middle = (low + high) // 2
        low, high = (middle, high) if has(middle) else (low, middle)
    return high


def qualified_name(source: Any) -> str:
    """``module.name`` of a function, or of a callable object's class."""
    target = source if hasattr(source, "__qualname__") else type(source)
    return f"{getattr(target, '__module__', '')}.{target.__qualname__}"


def served_dataset(pipe: Any) -> tuple[int, str]:
    """(length, digest) of what the service will drive in ``pipe``: its readers (of one length, the
    digest covering every one), or its per-sample external sources (refused, with the reason, when
    the service cannot drive them)."""
    staged = pipe.engine.staged
    sources = external_sources(staged)
    if not sources:
        if staged.reader is None:
            raise ArgumentError(
                "serve: the pipeline needs a reader (fn.readers.*) or a per-sample external source for the service "
                f"to drive; {_INSTEAD}"
            )
        return pipe.reader_meta()["epoch_size"], combined_digest(staged.readers)
    if staged.reader is not None:
        raise ArgumentError(
            f"serve: external source {sources[0].label} beside reader {staged.reader.label} runs in one process only "
            "(its batches follow the caller's run() calls, which no rank of the service makes); give the "
            f"per-sample values by the reader's sample instead (fn.random.*, or a per-sample source), or {_INSTEAD}"
        )
    for node in sources:
        check_servable(node)
    lengths = {node.label: probe_length(node.op, pipe.batch_size) for node in sources}
    if len(set(lengths.values())) > 1:
        raise ArgumentError(f"serve: the external sources have epochs of different lengths {lengths}")
    length = lengths[sources[0].label]
    names = ",".join(qualified_name(node.op.callback.source) for node in sources)
    return length, hashlib.sha256(f"{length}|{names}".encode()).hexdigest()[:16]
