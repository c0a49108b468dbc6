"""Exceptions raised by raypipe, each naming the argument, file or sample at fault."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class RaypipeError(Exception):
    """Base class of every raypipe error."""


class PipelineDefinitionError(RaypipeError, ValueError):
    """The graph is malformed: wrong device order, unknown operator, bad wiring."""


class ArgumentError(RaypipeError, ValueError):
    """An operator or pipeline argument is invalid."""


class UsageError(RaypipeError, ValueError):
    """A command-line argument of the ``raypipe`` script is invalid (reported with its usage)."""


class ReaderError(RaypipeError, OSError):
    """A reader cannot list or open its data (missing file, empty folder, bad list line)."""


class SampleError(RaypipeError):
    """Processing one sample failed; the message names the sample and its source file."""

    def __init__(self, message: str, *, sample_index: int | None = None, source: str | None = None):
        super().__init__(message)
        self.sample_index = sample_index
        self.source = source

    def __reduce__(self):
        return (_rebuild_sample_error, (type(self), str(self), self.sample_index, self.source))


class DecodeError(SampleError):
    """An encoded image could not be decoded (truncated, corrupt, not an image)."""


def _rebuild_sample_error(cls, message, sample_index, source):
    return cls(message, sample_index=sample_index, source=source)


class DeviceError(RaypipeError):
    """The GPU failed a whole batch (out of memory, a sticky CUDA error, a decoder that lost its
    plugin): not a property of any sample, so ``on_error="skip"`` never skips it."""


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'a' or 'b'?"`` with the choices closest to a misspelt ``name``, or ``""``."""
    close = difflib.get_close_matches(name, sorted(set(choices)), n=3)
    return f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
