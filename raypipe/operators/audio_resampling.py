"""Band-limited resampling of audio with a Hann-windowed sinc, as DALI's audio decoder resamples.

The filter is DALI's: ``lobes`` zero crossings on each side (from ``quality``: 3 at 0, 16 at 50, 64
at 100), tabulated at ``64 * lobes + 1`` points and interpolated linearly; output sample ``k`` sits
at input position ``k * in_rate / out_rate``, advanced in float32 within blocks of 256 outputs from
a float64 start, so the taps are DALI's. The filter is not widened when downsampling (DALI's is
not either). The sums are matrix products (:func:`resample`): per kind of block, of its blocks'
input spans with a dense matrix of taps, where a rate pair has few kinds (22.05 and 44.1 kHz to
16 kHz: five; 3.3 ms for 3 s of 22.05 kHz audio becomes 0.7 ms), else of the outputs' taps with
the table's rows, grouped by phase. float32, within about 1e-6 of full scale of DALI's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

#: outputs whose positions DALI advances from one float64 start
_BLOCK = 256
#: outputs gathered at once (bounds the copy of their taps)
_CHUNK = 8192
#: entries of DALI's window table per input sample (its ``64 * lobes`` entries span ``2 * lobes`` samples)
_PER_SAMPLE = 32
#: at most this many kinds of block (start fractions) are resampled as one matrix each
_MAX_BLOCK_KINDS = 32


def lobes_for(quality: float) -> int:
    """DALI's number of sinc lobes for a ``quality`` in [0, 100]."""
    return int(round(0.007 * quality * quality - 0.09 * quality + 3))


def resampled_length(length: int, in_rate: float, out_rate: float) -> int:
    """Samples after resampling ``length`` samples from ``in_rate`` to ``out_rate`` (rounded up)."""
    return int(math.ceil(length * out_rate / in_rate))


@dataclass(frozen=True)
class SincWindow:
    """A tabulated Hann-windowed sinc with ``lobes`` lobes: ``lookup`` has a zero at each end; DALI
    evaluates it at ``x`` input samples from the centre as ``lookup`` at ``x * scale + center``,
    interpolated linearly."""

    lobes: int
    lookup: np.ndarray
    slopes: np.ndarray  # lookup[i + 1] - lookup[i]
    scale: np.float32
    center: np.float32

    def polyphase(self, taps: int) -> tuple[np.ndarray, np.ndarray]:
        """Table entries ``k, k + 32, k + 64, ...`` (one input sample apart) for ``taps`` taps, and
        their slopes, as rows ``k`` = 0 .. 33 (zero past the table)."""
        index = np.arange(34)[:, None] + _PER_SAMPLE * np.arange(taps)[None, :]
        inside = index < len(self.lookup)
        index = np.where(inside, index, 0)
        return np.where(inside, self.lookup[index], 0), np.where(inside, self.slopes[index], 0)


@lru_cache(maxsize=8)
def sinc_window(lobes: int) -> SincWindow:
    """DALI's table for ``lobes`` lobes (``64 * lobes + 1`` coefficients)."""
    coeffs = 64 * lobes + 1
    scale = np.float32(2.0 * lobes / (coeffs - 1))
    scale_envelope = np.float32(2.0 / coeffs)
    center = int((coeffs - 1) * 0.5)
    offsets = np.arange(coeffs, dtype=np.float32) - np.float32(center)
    x = (offsets * scale).astype(np.float64)
    y = (offsets * scale_envelope).astype(np.float64)
    lookup = np.zeros(coeffs + 2, np.float32)
    lookup[1 : coeffs + 1] = (np.sinc(x) * 0.5 * (1 + np.cos(y * np.pi))).astype(np.float32)
    slopes = np.append(np.diff(lookup), np.float32(0)).astype(np.float32)
    return SincWindow(lobes, lookup, slopes, np.float32(1 / scale), np.float32(center + 1))


def _positions(count: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Each output's input block start (int64) and float32 position within it, as DALI computes them."""
    blocks = -(-count // _BLOCK)
    starts = np.arange(blocks, dtype=np.float64) * _BLOCK * scale
    base = np.floor(starts)
    steps = np.full((blocks, _BLOCK), np.float32(scale), np.float32)
    steps[:, 0] = (starts - base).astype(np.float32)
    within = np.cumsum(steps, axis=1, dtype=np.float32)  # sequential float32 sums, as DALI's loop
    return np.repeat(base.astype(np.int64), _BLOCK)[:count], within.reshape(-1)[:count]


def resample(signal: np.ndarray, in_rate: float, out_rate: float, lobes: int) -> np.ndarray:
    """``signal`` (float32, ``(length,)`` or ``(length, channels)``) resampled to ``out_rate``.

    DALI places each block of 256 outputs from its own float64 start and the outputs within it by
    float32 steps from that start's fraction, so two blocks whose starts have the same fraction
    weigh their inputs alike. For the usual rate pairs (22.05 or 44.1 kHz to 16 kHz: five
    fractions) each such fraction's block is one dense matrix of taps, made once per rate pair,
    and all its blocks are one matrix product with their input spans (:func:`_by_block`); other
    pairs, whose fractions hardly repeat, group outputs by table phase (:func:`_by_phase`)."""
    frames = signal.reshape(signal.shape[0], -1)
    count = resampled_length(frames.shape[0], in_rate, out_rate)
    blocks = -(-count // _BLOCK)
    fractions = _block_fractions(blocks, in_rate / out_rate)
    if np.unique(fractions).size <= min(_MAX_BLOCK_KINDS, max(1, blocks // 4)):
        out = _by_block(frames, count, in_rate / out_rate, lobes, fractions)
    else:
        out = _by_phase(frames, count, in_rate / out_rate, lobes)
    return out.reshape((count,) + signal.shape[1:])


def _block_fractions(blocks: int, scale: float) -> np.ndarray:
    """Each block's float32 start fraction, as :func:`_positions` computes it."""
    starts = np.arange(blocks, dtype=np.float64) * _BLOCK * scale
    return (starts - np.floor(starts)).astype(np.float32)


@lru_cache(maxsize=64)
def _block_matrix(fraction: np.float32, scale: float, lobes: int) -> tuple[np.ndarray, int]:
    """The ``(span, 256)`` float32 weights of one block's inputs for its outputs, the block's start
    having float32 ``fraction``, and the offset of the span's first input from the block's base."""
    steps = np.full(_BLOCK, np.float32(scale), np.float32)
    steps[0] = fraction
    pos = np.cumsum(steps, dtype=np.float32)
    window = sinc_window(lobes)
    taps = 2 * lobes + 1
    ceil = np.ceil(pos)
    first = ceil.astype(np.int64) - lobes  # each output's first tap, from the block's base
    at = ((ceil - lobes).astype(np.float32) - pos) * window.scale + window.center
    phase = at.astype(np.int16)
    fraction_of = (at - phase.astype(np.float32))[:, None]
    values, slopes = window.polyphase(taps)
    weights = values[phase] + fraction_of * slopes[phase]  # (256, taps)
    weights[np.floor(pos) != ceil, -1] = 0  # DALI's last tap only at whole positions
    lowest = int(first.min())
    span = int(first.max()) - lowest + taps
    matrix = np.zeros((span, _BLOCK), np.float32)
    rows = (first - lowest)[:, None] + np.arange(taps)[None, :]
    matrix[rows, np.arange(_BLOCK)[:, None]] = weights
    return matrix, lowest


def _by_block(frames: np.ndarray, count: int, scale: float, lobes: int, fractions: np.ndarray) -> np.ndarray:
    """:func:`resample` as one matrix product per kind of block (see there)."""
    length, channels = frames.shape
    blocks = fractions.size
    bases = np.floor(np.arange(blocks, dtype=np.float64) * _BLOCK * scale).astype(np.int64)
    matrices = {f: _block_matrix(f, scale, lobes) for f in np.unique(fractions).tolist()}
    lowest = min(offset for _, offset in matrices.values())
    longest = max(m.shape[0] + offset - lowest for m, offset in matrices.values())
    pad = max(0, -int(bases[0]) - lowest)
    after = max(0, int(bases[-1]) + lowest + longest - length)
    padded = np.zeros((pad + length + after, channels), np.float32)
    padded[pad : pad + length] = frames
    out = np.empty((blocks, _BLOCK, channels), np.float32)
    for fraction, (matrix, offset) in matrices.items():
        which = np.flatnonzero(fractions == np.float32(fraction))
        for c in range(channels):
            spans = np.lib.stride_tricks.sliding_window_view(padded[:, c], matrix.shape[0])
            out[which, :, c] = spans[bases[which] + offset + pad] @ matrix
    return out.reshape(-1, channels)[:count]


def _by_phase(frames: np.ndarray, count: int, scale: float, lobes: int) -> np.ndarray:
    """:func:`resample` grouping outputs by table phase.

    One input sample spans 32 entries of the window's table, so the taps of an output whose first
    tap falls at table position ``k + f`` (``k`` an integer, ``0 <= f < 1``) weigh the entries
    ``k, k + 32, k + 64, ...`` interpolated by ``f``: outputs are grouped by ``k`` (and by whether
    their position is a whole sample, which adds DALI's last tap) and each group is two products of
    its taps with the rows ``k`` of the table and of its slopes (numpy's einsum, without BLAS
    threads, which would contend with the CPU stage's). DALI rounds each tap's
    table position in float32 where this takes the first tap's fraction for all: the results differ
    by about 1e-6 of full scale."""
    window = sinc_window(lobes)
    length, channels = frames.shape
    base, pos = _positions(count, scale)
    taps = 2 * lobes + 1
    pad = lobes + 2  # zeros around the signal: taps outside it read zeros
    padded = np.zeros((length + 2 * pad + taps, channels), np.float32)
    padded[pad : pad + length] = frames
    rows = np.lib.stride_tricks.sliding_window_view(padded, taps, axis=0)  # (positions, channels, taps)
    ceil = np.ceil(pos)
    first = base + ceil.astype(np.int64) - lobes + pad  # row of each output's first tap
    at = ((ceil - lobes).astype(np.float32) - pos) * window.scale + window.center  # first tap's table position
    phase = at.astype(np.int16)
    fraction = (at - phase.astype(np.float32))[:, None]
    whole = np.floor(pos) == ceil  # an integral position has one tap more (DALI's input range)
    values, slopes = window.polyphase(taps)
    key = (phase * 2 + whole).astype(np.int16)
    order = np.argsort(key, kind="stable")  # a radix sort of small keys
    bounds = np.flatnonzero(np.diff(key[order])) + 1
    out = np.empty((count, channels), np.float32)
    for group in np.split(order, bounds):
        k, extra = divmod(int(key[group[0]]), 2)
        value, slope = values[k].copy(), slopes[k].copy()
        if not extra:
            value[-1] = slope[-1] = 0
        for lo in range(0, group.size, _CHUNK):
            chunk = group[lo : lo + _CHUNK]
            taken = rows[first[chunk]]
            out[chunk] = np.einsum("oct,t->oc", taken, value) + fraction[chunk] * np.einsum("oct,t->oc", taken, slope)
    return out
