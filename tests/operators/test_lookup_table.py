"""``lookup_table`` against DALI 2.4's CPU operator where installed: DALI's documented example,
repeated keys, values outside the table, every output type's conversion, several input types and
the ``gpu`` device; bad arguments fail when the pipeline is built, non-integer samples naming the
sample."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, types
from raypipe.errors import ArgumentError, SampleError

UINT8 = [np.array([[0, 1, 2, 3, 4, 5, 6, 100, 255]], np.uint8), np.array([[5, 4], [3, 2]], np.uint8)]
INT32 = [np.array([[-1, 0, 1, 2, 65535, 65536, 70000]], np.int32), np.array([[2]], np.int32)]
INT16 = [np.array([[3, 200, -5]], np.int16), np.array([[0]], np.int16)]

#: DALI's documentation's example
DOC = {"keys": [0, 2, 3, 4, 5, 3], "values": [0.2, 0.4, 0.5, 0.6, 0.7, 0.10], "default_value": 0.99}
ROUNDING = {"keys": [0, 1, 2, 3, 4], "values": [1.5, 2.5, -1.7, 300.2, -2.5]}
CASES = [
    ("documented example", UINT8, DOC),
    ("documented example, int32 input", INT32, DOC),
    ("to uint8: rounded ties away, saturated", UINT8, dict(ROUNDING, dtype=types.UINT8, default_value=7.6)),
    ("to int32", UINT8, dict(ROUNDING, dtype=types.INT32, default_value=-7.5)),
    (
        "to int8 with a rounded default",
        INT16,
        {"keys": [3], "values": [1.0], "default_value": 0.5, "dtype": types.INT8},
    ),
    ("to bool", UINT8, {"keys": [0, 1], "values": [1.5, 2.5], "dtype": types.BOOL}),
    ("to float16", UINT8, {"keys": [0, 1], "values": [1.5, 2.5], "dtype": types.FLOAT16}),
    ("to float64", INT32, {"keys": [0, 65535], "values": [1.5, 2.5], "dtype": types.FLOAT64}),
    ("output_dtype, the deprecated alias", UINT8, {"keys": [4], "values": [9], "output_dtype": types.INT16}),
]


@pytest.mark.parametrize(("name", "samples", "args"), CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_lookup_table_matches_dali(ours, dali, name, samples, args, device):
    def build(x, f, t):
        typed = {k: getattr(t, v.name) if k.endswith("dtype") else v for k, v in args.items()}
        return f.lookup_table(x.gpu() if device == "gpu" and f is fn else x, **typed)

    mine = ours(samples, lambda x: build(x, fn, types), layout="HW")
    assert mine[0][1] == "HW"
    theirs = dali(samples, build, layout="HW")
    for a, b in zip(mine[0][0], theirs[0][0], strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


def test_the_table_as_documented(ours):
    """DALI's documented example, where DALI is absent: the last of a repeated key wins, keys not
    given and values outside the table give the default."""
    ((out, _),) = ours(UINT8, lambda x: fn.lookup_table(x, **DOC))
    want = np.array([0.2, 0.99, 0.4, 0.1, 0.6, 0.7, 0.99, 0.99, 0.99], np.float32)
    np.testing.assert_array_equal(out[0], [want])
    ((rounded, _),) = ours(UINT8, lambda x: fn.lookup_table(x, dtype=types.UINT8, default_value=7.6, **ROUNDING))
    assert rounded[0].tolist() == [[2, 3, 0, 255, 0, 8, 8, 8, 8]]


def test_without_keys_every_value_is_the_default(ours):
    """DALI 2.4 crashes here; raypipe gives the default."""
    ((out, _),) = ours(UINT8, lambda x: fn.lookup_table(x, default_value=2.5, dtype=types.INT32))
    assert [o.tolist() for o in out] == [[[3] * 9], [[3, 3], [3, 3]]]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"keys": [0, -1], "values": [1.5, 3]}, r"keys must be in \[0, 65535\], got \[-1\]"),
        ({"keys": [0, 70000], "values": [1.5, 2.5]}, r"got \[70000\]"),
        ({"keys": [0, 1], "values": [1.5]}, "2 keys and 1 values"),
        ({"keys": [0], "values": [1], "dtype": types.INT8, "output_dtype": types.INT8}, "exclude each other"),
        ({"keys": [0], "values": [1], "default_value": "x"}, "default_value must be a number"),
    ],
)
def test_bad_arguments_fail_when_the_pipeline_is_built(args, message):
    pipe = rp.pipeline_def(lambda: fn.lookup_table(fn.zeros(shape=[2]), **args), batch_size=2, device_id=None)()
    with pytest.raises(ArgumentError, match=f"lookup_table: .*{message}"):
        pipe.build()


@pytest.mark.parametrize("samples", [[np.array([0.0, 1.0], np.float32)], [np.array([True, False])]])
def test_samples_of_other_types_fail_naming_the_sample(ours, samples):
    with pytest.raises(SampleError, match="lookup_table: the input must be of an integer type") as failed:
        ours(samples, lambda x: fn.lookup_table(x, keys=[0, 1], values=[1.5, 2.5]))
    assert "sample 0" in str(failed.value)


def test_the_gpu_stage_looks_up_a_whole_batch_at_once():
    """A batch array, and a ragged batch packed in one buffer, take one lookup each (no per-sample
    work on a GPU), with the values of the per-sample path."""
    from raypipe.kernels import launch
    from raypipe.operators.lookup_table import LookupTable

    op = LookupTable("gpu", 0, keys=[0, 2], values=[5, 7], dtype=types.INT16)
    ragged = [np.array([[0, 1, 2]], np.uint8), np.array([[2, 9]], np.uint8)]
    packed = op.run_batch(np, [launch.pack(np, ragged, "lookup_table")], {}, [])
    assert isinstance(packed, launch.Packed) and [s.tolist() for s in packed] == [[[5, 0, 7]], [[7, 0]]]
    whole = op.run_batch(np, [np.array([[[0, 2]], [[2, 3]]], np.uint8)], {}, [])
    assert whole.dtype == np.int16 and whole.tolist() == [[[5, 7]], [[7, 0]]]
