"""The resampling filters the host path (:mod:`raypipe.operators.resample`) and the kernels
(:mod:`.resample`) share: their numbering, reach and the choice of filter per axis."""

from __future__ import annotations

#: Filter kinds, as the resampling kernels number them.
NEAREST, LINEAR, CUBIC, LANCZOS = 0, 1, 2, 3
#: The reach of each filter at unit scale, in input pixels (nearest reads one pixel).
REACH = {NEAREST: 0.5, LINEAR: 1.0, CUBIC: 2.0, LANCZOS: 3.0}
#: Keys' cubic parameter, as Pillow's BICUBIC.
CUBIC_A = -0.5


def axis_kind(filters: tuple[int, int], in_extent: float, out_size: int) -> int:
    """The filter of an axis resampled from ``in_extent`` to ``out_size``: ``filters`` = (min, mag),
    the min filter where the axis shrinks, as DALI picks it."""
    return filters[0] if out_size < in_extent else filters[1]
