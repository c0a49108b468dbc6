"""Random crop windows: the vectorised function gives exactly the per-image function's windows on
the same draws; windows lie inside the image, with area and aspect ratio in range unless no
attempt fits, and then are the centred fallback."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from raypipe.keyed_random import keyed_uniforms
from raypipe.operators.crop_window import DRAWS, random_crop_window, random_crop_windows

unit = st.floats(0.0, 1.0, exclude_max=True)
area_ranges = st.tuples(st.floats(0.0, 1.0), st.floats(0.0, 1.0)).map(sorted).filter(lambda r: r[1] > 0)
ratio_ranges = st.tuples(st.floats(0.05, 20.0), st.floats(0.05, 20.0)).map(sorted)


def _each(sizes: np.ndarray, area, ratio, draws: np.ndarray) -> np.ndarray:
    return np.array(
        [random_crop_window(int(w), int(h), area, ratio, draws[:, :, i]) for i, (w, h) in enumerate(sizes.T)]
    ).reshape(-1, 4)


@settings(max_examples=200, deadline=None)
@given(
    data=st.data(),
    images=st.integers(1, 12),
    attempts=st.integers(1, 12),
    area=area_ranges,
    ratio=ratio_ranges,
)
def test_vectorised_windows_equal_the_per_image_function(data, images, attempts, area, ratio):
    sizes = np.array(
        data.draw(st.lists(st.tuples(st.integers(1, 5000), st.integers(1, 5000)), min_size=images, max_size=images))
    ).T
    draws = np.array(data.draw(st.lists(unit, min_size=DRAWS * attempts * images, max_size=DRAWS * attempts * images)))
    draws = draws.reshape(DRAWS, attempts, images)
    np.testing.assert_array_equal(
        random_crop_windows(sizes, tuple(area), tuple(ratio), draws), _each(sizes, tuple(area), tuple(ratio), draws)
    )


def test_many_keyed_windows_equal_the_per_image_function():
    rng = np.random.default_rng(0)
    sizes = rng.integers(1, 1200, (2, 5000))
    for area, ratio in [((0.08, 1.0), (3 / 4, 4 / 3)), ((0.5, 1.0), (0.2, 5.0)), ((0.9, 1.0), (3.0, 4.0))]:
        draws = keyed_uniforms(3, 1, 0, range(5000), DRAWS * 10).reshape(DRAWS, 10, 5000)
        np.testing.assert_array_equal(random_crop_windows(sizes, area, ratio, draws), _each(sizes, area, ratio, draws))


def _fits(width: int, height: int, area, ratio, draws: np.ndarray) -> bool:
    """Whether some attempt of ``draws`` fits (the same arithmetic as the function's)."""
    log_lo, log_hi = math.log(ratio[0]), math.log(ratio[1])
    for a, r in zip(draws[0], np.exp(log_lo + (log_hi - log_lo) * draws[1])):
        target = width * height * (area[0] + (area[1] - area[0]) * a)
        w, h = round(math.sqrt(target * r)), round(math.sqrt(target / r))
        if 0 < w <= width and 0 < h <= height:
            return True
    return False


@settings(max_examples=300, deadline=None)
@given(
    width=st.integers(1, 4000),
    height=st.integers(1, 4000),
    area=area_ranges,
    ratio=ratio_ranges,
    index=st.integers(0, 10**9),
)
def test_windows_lie_inside_with_area_and_ratio_in_range(width, height, area, ratio, index):
    area, ratio = tuple(area), tuple(ratio)
    draws = keyed_uniforms(0, 2, 0, [index], DRAWS * 10).reshape(DRAWS, 10)
    x, y, w, h = random_crop_window(width, height, area, ratio, draws)
    assert 0 <= x and 0 <= y and 0 < w and 0 < h and x + w <= width and y + h <= height
    if _fits(width, height, area, ratio, draws):
        # rounding each side to whole pixels moves the area by at most about a side, the ratio by a pixel's share
        slack = (w + h + 1) / (width * height)
        assert area[0] - slack <= w * h / (width * height) <= area[1] + slack
        assert ratio[0] * (1 - 1 / h) - 1 / h <= w / h <= ratio[1] * (1 + 1 / h) + 1 / h
    else:  # the largest centred window with its ratio in range
        assert (x, y) == ((width - w) // 2, (height - h) // 2)
        assert w == width or h == height


def test_no_fitting_attempt_gives_the_centred_fallback():
    draws = np.full((DRAWS, 3), 0.999)  # nearly all of the area, at the top of the ratio range
    cases = [  # (width, height), ratio range, the largest centred window with its ratio in range
        ((100, 100), (9.0, 10.0), (0, 44, 100, 11)),  # too square: full width
        ((100, 10), (0.2, 0.25), (49, 0, 2, 10)),  # too wide: full height
        ((10, 100), (1.0, 1.0), (0, 45, 10, 10)),
    ]
    for size, ratio, expected in cases:
        assert random_crop_window(*size, (0.9, 1.0), ratio, draws) == expected
        sizes = np.array(size).reshape(2, 1)
        assert random_crop_windows(sizes, (0.9, 1.0), ratio, draws[:, :, None]).tolist() == [list(expected)]
