"""Per-sample random streams keyed by (seed, epoch, sample index, operator instance).

The same sample in the same epoch gets the same random draws whatever thread,
process or actor computes it, and however often it is recomputed. A Philox
counter-based generator makes this cheap: the key holds (seed, operator) and the
counter's high words hold (sample index, epoch), so streams never overlap.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

_MASK64 = (1 << 64) - 1
_LOCAL = threading.local()


def sample_generator(seed: int, epoch: int, sample_index: int, op_id: int) -> np.random.Generator:
    """A generator private to one (seed, epoch, sample, operator) combination."""
    bits = np.random.Philox(
        key=np.array([seed & _MASK64, op_id & _MASK64], dtype=np.uint64),
        counter=np.array([0, 0, sample_index & _MASK64, epoch & _MASK64], dtype=np.uint64),
    )
    return np.random.Generator(bits)


def reused_generator(seed: int, epoch: int, sample_index: int, op_id: int) -> np.random.Generator:
    """The same stream as :func:`sample_generator`, from a generator this thread keeps for
    ``op_id`` and resets: valid until the thread asks for ``op_id``'s stream of another sample.

    For the per-sample hot path: a new Philox costs about 14 us, and when given a key numpy
    still draws a seed from the OS for it; resetting the state costs about 2.5 us."""
    cache = getattr(_LOCAL, "generators", None)
    if cache is None:
        cache = _LOCAL.generators = {}
    entry = cache.get(op_id)
    if entry is None:
        generator = sample_generator(seed, epoch, sample_index, op_id)
        entry = cache[op_id] = (generator, generator.bit_generator.state)
        return generator
    generator, state = entry
    key, counter = state["state"]["key"], state["state"]["counter"]
    key[0], key[1] = seed & _MASK64, op_id & _MASK64
    counter[:] = (0, 0, sample_index & _MASK64, epoch & _MASK64)
    state["buffer_pos"], state["has_uint32"], state["uinteger"] = 4, 0, 0
    generator.bit_generator.state = state
    return generator


@dataclass(frozen=True)
class SampleContext:
    """Identity of the sample being processed: where its randomness comes from."""

    seed: int
    epoch: int
    sample_index: int

    def rng(self, op_id: int) -> np.random.Generator:
        """The generator for operator instance ``op_id`` on this sample (this thread's, reset to
        the sample's stream: draw from it before asking for another sample's, see
        :func:`reused_generator`)."""
        return reused_generator(self.seed, self.epoch, self.sample_index, op_id)
