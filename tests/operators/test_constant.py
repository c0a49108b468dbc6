"""constant and types.Constant: DALI's values, shapes, dtypes and layouts; scalar constants with a
type as operands of arithmetic on pipeline data; errors before anything runs."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, ops, types
from raypipe.operators.constant import Constant
from raypipe.sample_contexts import SampleContexts

IMAGE = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)

CASES = [
    ("fdata-shape", lambda x, fn, types: fn.constant(fdata=[1.5, 2, 3, 4], shape=[2, 2])),
    ("idata-broadcast-layout", lambda x, fn, types: fn.constant(idata=7, shape=[2, 3], layout="AB")),
    ("idata-default-1d", lambda x, fn, types: fn.constant(idata=[1, 2])),
    ("fdata-to-uint8", lambda x, fn, types: fn.constant(fdata=[1.4, 300, -2], dtype=types.UINT8)),
    ("idata-to-float", lambda x, fn, types: fn.constant(idata=[1, 2], dtype=types.FLOAT)),
    ("idata-saturates", lambda x, fn, types: fn.constant(idata=[300, -1], dtype=types.UINT8)),
    ("idata-bool", lambda x, fn, types: fn.constant(idata=[1, 0, 2], dtype=types.BOOL)),
    ("Constant-typed-scalar", lambda x, fn, types: x + types.Constant(1, dtype=types.UINT8)),
    ("Constant-float", lambda x, fn, types: x * types.Constant(1.5)),
    ("Constant-reflected", lambda x, fn, types: types.Constant(2, dtype=types.INT16) - x),
    ("Constant-int64-array", lambda x, fn, types: types.Constant(np.array([[1, 2], [3, 4]], np.int64))),
    ("Constant-float64-array", lambda x, fn, types: types.Constant(np.array([1.5, 2.0]), layout="A")),
    ("Constant-device", lambda x, fn, types: types.Constant(3, device="cpu")),
    ("Constant-list", lambda x, fn, types: types.Constant([1, 2.5])),
    ("Constant-shape", lambda x, fn, types: types.Constant(2, shape=[2, 2], dtype=types.INT16)),
    ("Constant-operand-node", lambda x, fn, types: x * types.Constant([1, 2, 3, 4])),
    ("bool-as-input", lambda x, fn, types: fn.cast(True, dtype=types.INT16)),
    ("float-as-input", lambda x, fn, types: fn.cast(2.5, dtype=types.FLOAT)),
    ("int-as-input", lambda x, fn, types: fn.cast(300, dtype=types.UINT8)),
]


@pytest.mark.parametrize("case, build", CASES, ids=[c[0] for c in CASES])
def test_against_dali(ours, dali, case, build):
    theirs = dali([IMAGE, IMAGE[:1].copy()], build)
    mine = ours([IMAGE, IMAGE[:1].copy()], lambda x: build(x, fn, types))
    for (their_samples, their_layout), (my_samples, my_layout) in zip(theirs, mine, strict=True):
        assert my_layout == their_layout
        for their, my in zip(their_samples, my_samples, strict=True):
            assert my.dtype == their.dtype and my.shape == their.shape
            np.testing.assert_array_equal(my, their)


def test_reference_values_without_dali(ours):
    (grid,), (bools,), (typed,), (scaled,) = (
        ours([IMAGE], lambda x: fn.constant(fdata=[0.5, 1.5], shape=[2], dtype=types.FLOAT16, layout="A")),
        ours([IMAGE], lambda x: types.Constant([True, False])),
        ours([IMAGE], lambda x: x + types.Constant(250, dtype=types.UINT8)),
        ours([IMAGE], lambda x: x * types.Constant(np.float32(0.5))),
    )
    assert grid[1] == "A" and grid[0][0].dtype == np.float16 and grid[0][0].tolist() == [0.5, 1.5]
    assert bools[0][0].dtype == np.bool_ and bools[0][0].tolist() == [True, False]
    assert typed[0][0].dtype == np.uint8 and typed[0][0].ravel()[:8].tolist() == [250, 251, 252, 253, 254, 255, 0, 1]
    assert scaled[0][0].dtype == np.float32 and scaled[0][0].ravel()[3] == 1.5


def test_scalar_constant_is_dalis():
    value = types.Constant(3, dtype=types.UINT8)
    assert isinstance(value, types.ScalarConstant) and value.value == 3 and value.dtype is types.UINT8
    assert types.Constant(2.0).dtype is types.FLOAT and types.Constant(True).dtype is types.BOOL
    assert types.Constant(np.int16(4)).dtype is types.INT16
    with pytest.raises(TypeError, match="a scalar must be a bool, int or float"):
        types.ScalarConstant("x")


def test_gpu_device_and_batch_path(ours):
    ((samples, _),) = ours([IMAGE, IMAGE], lambda x: fn.constant(fdata=[1, 2], device="gpu"))
    assert [s.tolist() for s in samples] == [[1.0, 2.0]] * 2
    batch = Constant("gpu", 0, idata=[4, 5, 6], shape=[3, 1]).run_batch(np, [], {}, SampleContexts(0, 0, np.arange(2)))
    assert batch.shape == (2, 3, 1) and batch.dtype == np.int32 and batch[1].ravel().tolist() == [4, 5, 6]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"shape": [2]}, "exactly one of fdata and idata"),
        ({"fdata": [1.0], "idata": [1]}, "exactly one of fdata and idata"),
        ({"fdata": [1.0, 2, 3], "shape": [2]}, "3 values do not fill the shape"),
        ({"fdata": [1.0, 2], "layout": "AB"}, "layout 'AB' does not match the 1-D shape"),
        ({"idata": [1.5]}, "idata must be an int or a list of ints"),
        ({"fdata": 1.0, "dtype": np.complex64}, "dtype must be a numeric or bool type"),
    ],
)
def test_argument_errors_before_anything_runs(kwargs, match):
    @rp.pipeline_def(batch_size=1, num_threads=1)
    def pipe():
        return fn.constant(**kwargs)

    with pytest.raises(rp.ArgumentError, match=f"constant: .*{match}"):
        pipe().build()


def _constants_made_in_init(module):
    """A class-style pipeline keeping its constants in ``__init__``, as NVIDIA's nnU-Net loader."""

    class Pipe(module.pipeline.Pipeline):
        def __init__(self):
            super().__init__(batch_size=2, num_threads=1, device_id=None, seed=0)
            self.shape = module.types.Constant([4, 5], dtype=module.types.INT64)
            self.scale = module.types.Constant(np.float32([2.0, 3.0]))
            self.mask = module.types.Constant(np.zeros((2, 2), np.uint8), layout="HW")
            self.source = module.ops.ExternalSource(source=lambda: [np.ones((2, 2), np.float32)] * 2)

        def define_graph(self):
            x = self.source()
            return (
                self.shape,
                x * self.scale,
                self.scale + x,
                module.fn.cat(self.shape, self.shape),
                self.mask,
                module.math.clamp(self.scale, 0, 2.5),
                module.fn.reshape(x, shape=self.shape // 2),
            )

    pipe = Pipe()
    pipe.build()
    return pipe, [[(np.asarray(out.at(i)), out.layout()) for i in range(2)] for out in pipe.run()]


def test_constants_made_outside_a_definition_are_placed_where_used():
    import raypipe.math  # noqa: F401  (module.math below)

    pipe, outputs = _constants_made_in_init(rp)
    assert [o[0][0].tolist() for o in outputs] == [
        [4, 5], [[2.0, 3.0], [2.0, 3.0]], [[3.0, 4.0], [3.0, 4.0]], [4, 5, 4, 5], [[0, 0], [0, 0]], [2.0, 2.5],
        [[1.0, 1.0], [1.0, 1.0]],
    ]  # fmt: skip
    assert outputs[0][0][0].dtype == np.int64 and outputs[4][0][1] == "HW"
    again = pickle.loads(pickle.dumps(pipe.shape))
    assert repr(again) == "types.Constant(shape=[2], dtype=DALIDataType.INT64)"
    with pytest.raises(rp.PipelineDefinitionError, match=r"types.Constant\(shape=\[2\].*outside a pipeline definition"):
        again.gpu()
    second = pipe.run()  # the definition runs again where the pipeline runs: the constants follow
    assert np.asarray(second[0].at(1)).tolist() == [4, 5]


def test_constants_made_outside_a_definition_against_dali():
    dali = pytest.importorskip("nvidia.dali")
    import nvidia.dali.math  # noqa: F401

    _, theirs = _constants_made_in_init(dali)
    _, mine = _constants_made_in_init(rp)
    for their_samples, my_samples in zip(theirs, mine, strict=True):
        for (their, their_layout), (my, my_layout) in zip(their_samples, my_samples, strict=True):
            assert my.dtype == their.dtype and my_layout == their_layout
            np.testing.assert_array_equal(my, their)


def test_ops_called_in_init_are_placed_where_used():
    """``self.flip = ops.Flip(horizontal=self.coin())`` in ``__init__``, as older DALI scripts write
    it: the coin's node is placed in the graph that uses it; an operator of several outputs called
    there fails naming it when used."""
    image = np.arange(12, dtype=np.uint8).reshape(2, 2, 3)

    class Pipe(rp.pipeline.Pipeline):
        def __init__(self, several: bool = False):
            super().__init__(batch_size=2, num_threads=1, device_id=None, seed=0)
            self.source = ops.ExternalSource(source=lambda: [image, image], layout="HWC")
            self.coin = ops.random.CoinFlip(probability=1.0)
            self.flip = ops.Flip(horizontal=self.coin(), vertical=0)
            self.boxes = ops.RandomBBoxCrop()(types.Constant(np.float32([[0.1, 0.1, 0.5, 0.5]]))) if several else None

        def define_graph(self):
            return self.flip(self.source()) if self.boxes is None else self.boxes

    with Pipe() as pipe:
        (flipped,) = pipe.run()
        assert all(np.array_equal(np.asarray(flipped.at(i)), image[:, ::-1]) for i in range(2))
        assert pickle.loads(pickle.dumps(pipe.coin())) is not None
    with pytest.raises(rp.PipelineDefinitionError, match=r"ops.RandomBBoxCrop\(\) gives several outputs"):
        Pipe(several=True).build()
