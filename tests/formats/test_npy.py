"""``.npy`` headers and region reads (:mod:`raypipe.formats.npy`): every region of arrays of several
shapes, types and both orders equals NumPy's slice, reads no more than its slabs, and headers of
format versions 1 to 3 are read; a file that is not ``.npy`` is refused by name."""

from __future__ import annotations

import math
import os
import zlib

import numpy as np
import pytest

from raypipe.formats.npy import read_header, read_plan, read_region


def _open(path):
    return os.open(path, os.O_RDONLY)


@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)])
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dtype", ["uint8", ">i4", "float64", "complex64"])
def test_random_regions_equal_numpys_slices(tmp_path, version, order, dtype):
    rng = np.random.default_rng(zlib.crc32(repr((version, order, dtype)).encode()))
    array = np.asarray(rng.integers(0, 1000, size=(5, 7, 6, 3)).astype(dtype), order=order)
    path = str(tmp_path / "a.npy")
    with open(path, "wb") as f:
        np.lib.format.write_array(f, array, version=version)
    fd = _open(path)
    try:
        header = read_header(fd, path)
        assert header.shape == array.shape and header.dtype == array.dtype and header.fortran_order == (order == "F")
        for _ in range(20):
            start = [int(rng.integers(0, n)) for n in array.shape]
            stop = [int(rng.integers(a + 1, n + 1)) for a, n in zip(start, array.shape)]
            region, count = read_region(fd, header, tuple(start), tuple(stop), path)
            np.testing.assert_array_equal(region, array[tuple(slice(a, b) for a, b in zip(start, stop))])
            assert region.flags.c_contiguous and region.dtype == array.dtype
            assert count <= array.nbytes
    finally:
        os.close(fd)


def test_the_plan_reads_few_bytes_in_few_calls():
    shape, itemsize = (128, 128, 128), 4
    k = read_plan(shape, (10, 10, 10), (12, 12, 12), itemsize)
    extents = (2, 2, 2)
    read = math.prod(extents[:k]) * extents[k] * math.prod(shape[k + 1 :]) * itemsize
    assert read <= 2 * 128 * 128 * itemsize and math.prod(extents[:k]) <= 4
    assert read_plan(shape, (0, 0, 0), shape, itemsize) == 0, "the whole array: one call"


def test_a_file_that_is_not_npy_is_refused_by_name(tmp_path):
    path = tmp_path / "x.npy"
    path.write_bytes(b"not a numpy file at all")
    fd = _open(str(path))
    try:
        with pytest.raises(ValueError, match="x.npy.*not a .npy file"):
            read_header(fd, str(path))
    finally:
        os.close(fd)
