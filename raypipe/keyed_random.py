"""Per-sample random streams keyed by (seed, epoch, sample index, operator instance).

The same sample in the same epoch gets the same random draws whatever thread,
process or actor computes it, and however often it is recomputed. Two forms:

- :func:`sample_generator`: a numpy Generator per sample, for operators that need any
  distribution. A Philox counter-based generator makes this cheap: the key holds (seed,
  operator) and the counter's high words hold (sample index, epoch), so streams never overlap.
- :func:`keyed_uniforms`: uniform floats for many samples in one numpy evaluation, for the
  hot per-sample draws (crop windows, coin flips). Draw ``j`` of a sample is a hash of the
  key and ``j`` (a SplitMix64 stream whose start is a hash of the key), so it is the same
  whichever samples it is computed with, in whatever order, chunk or thread.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, lru_cache

import numpy as np

_MASK64 = (1 << 64) - 1
_LOCAL = threading.local()
# SplitMix64: the Weyl increment and the finaliser's multipliers and shifts
_GAMMA = 0x9E3779B97F4A7C15
_MUL1, _MUL2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
_M1, _M2 = np.uint64(_MUL1), np.uint64(_MUL2)
_S30, _S27, _S31, _S11 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11)
_UNIT = 2.0**-53  # a 53-bit integer times this is a float in [0, 1)
_FEW = 4  # draws of one sample that Python ints give faster than numpy


def _mix_int(z: int) -> int:
    """SplitMix64's finaliser (a bijection of 64-bit words) on a Python int."""
    z &= _MASK64
    z = ((z ^ (z >> 30)) * _MUL1) & _MASK64
    z = ((z ^ (z >> 27)) * _MUL2) & _MASK64
    return z ^ (z >> 31)


def _mix(z: np.ndarray) -> np.ndarray:
    """:func:`_mix_int` on a uint64 array (array arithmetic wraps modulo 2**64). New arrays, not
    in place: numpy's overlap checks make in-place operations slower on arrays this small."""
    z = z ^ (z >> _S30)
    z = z * _M1
    z = z ^ (z >> _S27)
    z = z * _M2
    return z ^ (z >> _S31)


@cache
def _weyl(count: int) -> np.ndarray:
    """The stream offsets ``(j + 1) * gamma`` of draws ``j < count``, as a column."""
    offsets = (np.arange(1, count + 1, dtype=np.uint64) * np.uint64(_GAMMA))[:, None]
    offsets.flags.writeable = False  # shared by every call
    return offsets


@lru_cache(maxsize=1024)
def _prefix(seed: int, stream: int, epoch: int) -> int:
    """The hash of the key's parts common to a chunk's samples."""
    return _mix_int(_mix_int(_mix_int(seed) ^ (stream & _MASK64)) ^ (epoch & _MASK64))


def keyed_uniforms(seed: int, stream: int, epoch: int, sample_indices: Sequence[int], count: int) -> np.ndarray:
    """``count`` floats in [0, 1) for each of ``sample_indices``, keyed by (``seed``, ``stream``,
    ``epoch``, sample index): shape ``(count, len(sample_indices))``, a column per sample (the
    layout its users compute in), the same whichever other samples are drawn with it.
    ``stream`` tells operators apart (an operator id).

    A single sample (the per-sample paths) gets its stream's start, and a few draws, from Python
    ints: the same arithmetic, a tenth of numpy's per-call cost at that size."""
    prefix = _prefix(seed, stream, epoch)
    if len(sample_indices) == 1:
        start = _mix_int(prefix ^ int(sample_indices[0]))
        if count <= _FEW:
            return np.array([[(_mix_int(start + j * _GAMMA) >> 11) * _UNIT] for j in range(1, count + 1)])
        z = np.uint64(start) + _weyl(count)
    else:
        z = _mix(np.array(sample_indices, dtype=np.uint64) ^ np.uint64(prefix)) + _weyl(count)
    return (_mix(z) >> _S11) * _UNIT


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
    """Identity of the sample being processed: where its randomness comes from, and, for external
    sources fed batch by batch, where it sits: entry ``slot`` of batch ``batch`` (-1: not known)."""

    seed: int
    epoch: int
    sample_index: int
    batch: int = -1
    slot: int = -1

    def rng(self, op_id: int) -> np.random.Generator:
        """The generator for operator instance ``op_id`` on this sample (this thread's, reset to
        the sample's stream: draw from it before asking for another sample's, see
        :func:`reused_generator`)."""
        return reused_generator(self.seed, self.epoch, self.sample_index, op_id)
