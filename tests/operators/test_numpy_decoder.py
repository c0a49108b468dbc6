"""``decoders.numpy`` against DALI 2.4's CPU build where installed: arrays of every type, ranks 0
to 4, ``dtype`` conversions; beyond DALI, Fortran order, format versions 2 and 3 and big-endian
arrays; bytes from a real reader (a tar's ``.npy`` members); errors that name the operator."""

from __future__ import annotations

import io
import tarfile

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, types
from raypipe.errors import ArgumentError, SampleError
from tests.operators.outputs import assert_same

RNG = np.random.default_rng(5)


def _npy(array: np.ndarray, version=None) -> np.ndarray:
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, array, version=version)
    return np.frombuffer(buffer.getvalue(), np.uint8)


ARRAYS = {
    "float32": [(RNG.standard_normal((2, 3)) * 150).astype(np.float32), np.ones((4, 1), np.float32)],
    "uint8": [RNG.integers(0, 256, (5, 6, 3), dtype=np.uint8), np.zeros((1, 2, 3), np.uint8)],
    "int64": [RNG.integers(-(2**40), 2**40, (7,), dtype=np.int64), np.arange(3, dtype=np.int64)],
    "float64": [RNG.standard_normal((2, 2, 2, 2)), np.zeros((1, 1, 1, 3))],
    "int16-scalar": [np.array(-7, np.int16), np.array(300, np.int16)],
    "bool": [np.array([True, False, True]), np.array([False])],
}


@pytest.mark.parametrize("case", list(ARRAYS))
def test_arrays_are_dalis(ours, dali, case):
    samples = [_npy(a) for a in ARRAYS[case]]
    mine = ours(samples, lambda x: fn.decoders.numpy(x))
    assert_same(mine, dali(samples, lambda x, f, t: f.decoders.numpy(x)), layout="")
    for decoded, array in zip(mine[0][0], ARRAYS[case], strict=True):
        np.testing.assert_array_equal(decoded, array)


@pytest.mark.parametrize("dtype", ["INT8", "UINT8", "INT32", "FLOAT16", "FLOAT"])
def test_conversions_are_dalis(ours, dali, dtype):
    samples = [_npy(a) for a in ARRAYS["float32"]]
    mine = ours(samples, lambda x: fn.decoders.numpy(x, dtype=getattr(types, dtype)))
    assert_same(mine, dali(samples, lambda x, f, t: f.decoders.numpy(x, dtype=getattr(t, dtype))))


@pytest.mark.parametrize(
    "array",
    [
        np.asfortranarray(RNG.standard_normal((3, 4, 2)).astype(np.float32)),
        RNG.standard_normal((3, 2)).astype(">f4"),
        RNG.integers(0, 2**20, (4, 3)).astype(">i4"),
    ],
    ids=["fortran", "big-endian float", "big-endian int"],
)
@pytest.mark.parametrize("version", [None, (2, 0), (3, 0)])
def test_beyond_dali_fortran_order_newer_versions_and_big_endian_decode(ours, array, version):
    ((samples, _),) = ours([_npy(array, version)], lambda x: fn.decoders.numpy(x))
    assert samples[0].flags.c_contiguous and samples[0].dtype == array.dtype.newbyteorder("=")
    np.testing.assert_array_equal(samples[0], array)


def test_the_members_of_a_tar_decode_to_their_arrays(tmp_path):
    arrays = [RNG.standard_normal((2, k + 1)).astype(np.float32) for k in range(4)]
    with tarfile.open(tmp_path / "shard.tar", "w") as tar:
        for k, array in enumerate(arrays):
            data = _npy(array).tobytes()
            info = tarfile.TarInfo(f"{k:04d}.npy")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))

    @rp.pipeline_def(batch_size=4, num_threads=2)
    def pipe():
        data = fn.readers.webdataset(paths=[str(tmp_path / "shard.tar")], ext=["npy"])
        return fn.decoders.numpy(data)

    with pipe() as p:
        (out,) = p.run()
    for k, array in enumerate(arrays):
        np.testing.assert_array_equal(np.asarray(out.at(k)), array)


@pytest.mark.parametrize(
    ("sample", "message"),
    [
        (np.frombuffer(b"hello world, not an array", np.uint8), "is not a .npy file"),
        (_npy(np.zeros((10, 10), np.float32))[:100], "cut short"),
        (_npy(np.zeros((10, 10), np.float32))[:30], "header is cut short"),
        (np.zeros((2, 8), np.uint8), "needs the bytes of an .npy file"),
        (np.zeros(8, np.int32), "needs the bytes of an .npy file"),
    ],
    ids=["not-npy", "data-cut", "header-cut", "2-D", "int32"],
)
def test_bad_bytes_fail_naming_the_operator_and_sample(ours, sample, message):
    with pytest.raises(SampleError, match=f"sample 0.*decoders.numpy.*{message}"):
        ours([sample], lambda x: fn.decoders.numpy(x))


def test_a_bad_dtype_fails_when_the_pipeline_is_built(ours):
    with pytest.raises(ArgumentError, match="decoders.numpy"):
        ours([_npy(np.zeros(2))], lambda x: fn.decoders.numpy(x, dtype="not a type"))
