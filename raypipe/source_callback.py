"""An external source's ``source`` as DALI classifies and calls it: a callable (of nothing, of the
iteration number, of a :class:`~raypipe.sample_info.BatchInfo` with ``batch_info=True``, or of a
:class:`~raypipe.sample_info.SampleInfo` per sample with ``batch=False``), an iterable, or a
generator function; ``cycle`` rewinds the last two at their end ("quiet"/True silently, "raise"
after ending the epoch with StopIteration). The end of the data is a StopIteration, as in DALI."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any

from .errors import ArgumentError
from .sample_info import BatchInfo, SampleInfo

CALLABLE, ITERABLE, GENERATOR_FUNCTION = "callable", "iterable", "generator function"


def cycle_mode(op: str, cycle: Any) -> str:
    """DALI's ``cycle`` values as "no", "quiet" or "raise"."""
    if cycle is None or cycle is False or cycle == "no":
        return "no"
    if cycle is True or cycle == "quiet":
        return "quiet"
    if cycle == "raise":
        return "raise"
    raise ArgumentError(f"{op}: cycle must be False/'no', True/'quiet' or 'raise', got {cycle!r}")


def is_generator_function(source: Any) -> bool:
    """True for a generator function, a partial of one, or an object whose ``__call__`` is one."""
    if inspect.isgeneratorfunction(source):
        return True
    if isinstance(source, functools.partial):
        return is_generator_function(source.func)
    if source is None or inspect.isfunction(source) or inspect.ismethod(source):
        return False
    call = getattr(source, "__call__", None)  # noqa: B004  (an object's __call__, as DALI inspects it)
    return call is not None and call is not source and is_generator_function(call)


def accepted_args(op: str, source: Callable) -> int:
    """How many positional arguments a callable source takes: 0 or 1 (as DALI requires)."""
    try:
        signature = inspect.signature(source)
    except (TypeError, ValueError):
        return 0
    count = 0
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.KEYWORD_ONLY):
            raise ArgumentError(
                f"{op}: the source callable must accept 0 or 1 positional arguments; found {param.kind.description} "
                f"argument {param.name!r}"
            )
        if param.default is param.empty:
            count += 1
    if count > 1:
        raise ArgumentError(f"{op}: the source callable must accept 0 or 1 positional arguments, it takes {count}")
    return count


def kind_of(op: str, source: Any, cycle: str) -> str:
    """Which of DALI's source kinds ``source`` is; TypeError-free checks with DALI's rules."""
    if is_generator_function(source):
        return GENERATOR_FUNCTION
    if inspect.isgenerator(source) and cycle != "no":
        raise ArgumentError(
            f"{op}: cannot cycle through a generator; pass the generator function that makes it as source instead"
        )
    if hasattr(source, "__iter__") and not isinstance(source, (str, bytes)):
        return ITERABLE
    if callable(source):
        if cycle != "no":
            raise ArgumentError(f"{op}: cycle can only be given for an iterable source or a generator function")
        return CALLABLE
    raise ArgumentError(f"{op}: source must be a callable, an iterable or a generator function, got {source!r}")


class SourceCallback:
    """Calls one source for its next batch, or for one sample, as DALI does.

    A callable is called for every batch (``batch=True``: with nothing, the iteration number or a
    BatchInfo) or every sample (``batch=False``: with nothing or a SampleInfo); an iterable is
    iterated and a generator function called for an iterator, once (``cycle="no"``: an exhausted
    source stays exhausted) or again at every end (``cycle``)."""

    def __init__(self, op: str, source: Any, *, cycle: str, batch: bool, batch_info: bool):
        self.op = op
        self.source = source
        self.cycle = cycle
        self.batch = batch
        self.batch_info = batch_info
        self.kind = kind_of(op, source, cycle)
        self.takes_arg = self.kind == CALLABLE and accepted_args(op, source) == 1
        self._iterator: Iterator | None = None
        if self.kind != CALLABLE and cycle == "no":
            self._iterator = self._fresh_iterator()

    @property
    def indexable(self) -> bool:
        """A per-sample callable of SampleInfo: what it returns depends only on the sample's indices,
        so any sample can be asked for in any order, by any process."""
        return self.kind == CALLABLE and not self.batch and self.takes_arg

    @property
    def stateful(self) -> bool:
        """An iterable or generator: its batches depend on how often it was asked before."""
        return self.kind != CALLABLE

    def _fresh_iterator(self) -> Iterator:
        return iter(self.source() if self.kind == GENERATOR_FUNCTION else self.source)

    def next_batch(self, iteration: int, epoch: int) -> Any:
        """The source's batch ``iteration`` of ``epoch`` (batch mode); StopIteration at the end."""
        if self.kind == CALLABLE:
            if not self.takes_arg:
                return self.source()
            return self.source(BatchInfo(iteration, epoch) if self.batch_info else iteration)
        return self._next_item()

    def _next_item(self) -> Any:
        """The iterable's or generator's next item, started again at its end as ``cycle`` says."""
        if self._iterator is None:
            self._iterator = self._fresh_iterator()
        try:
            return next(self._iterator)
        except StopIteration:
            if self.cycle == "no":
                raise
            self._iterator = self._fresh_iterator()
            if self.cycle == "raise":
                raise
            return next(self._iterator)

    def sample(self, info: SampleInfo) -> Any:
        """One sample (per-sample mode): the callable's for ``info``, or an iterable's or
        generator's next item, as DALI takes them; StopIteration past the end."""
        if self.kind != CALLABLE:
            return self._next_item()
        return self.source(info) if self.takes_arg else self.source()
