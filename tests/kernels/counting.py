"""Counting a step's host work: kernel launches and the Python function calls made around them.

Under numba's CUDA simulator a launch runs every GPU thread in Python, so the calls a launch makes
are not counted, only the launch itself; everything else the profiled thread calls (Python
functions and C functions called from Python) is. A step whose host work does not grow with the
batch gives the same counts for batch 4 and batch 32.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from raypipe.kernels import launch


@dataclass
class Counts:
    """What a :func:`counting` block did: kernel launches and calls outside them."""

    launches: int = 0
    calls: int = 0
    _inside: FrameType | None = field(default=None, repr=False)

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        """A ``sys.setprofile`` hook: count calls, skipping everything under a launch."""
        if self._inside is not None:
            if event == "return" and frame is self._inside:
                self._inside = None
            return
        if event == "call" and frame.f_code is launch.launch.__code__:
            self.launches += 1
            self._inside = frame
        if event in ("call", "c_call"):
            self.calls += 1

    def pair(self) -> tuple[int, int]:
        """``(launches, calls)``."""
        return self.launches, self.calls


@contextmanager
def counting() -> Iterator[Counts]:
    """Count the launches and calls of the current thread inside the block (its profile hook is
    restored afterwards)."""
    counts = Counts()
    previous = sys.getprofile()
    sys.setprofile(counts.profile)
    try:
        yield counts
    finally:
        sys.setprofile(previous)
