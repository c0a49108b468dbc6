"""The batched flip kernel against the operator's host path: equal, for every layout and flag."""

from __future__ import annotations

import numpy as np
import pytest

from raypipe.kernels import launch
from raypipe.operators.flip import Flip
from tests.kernels.helpers import contexts, host_samples, on_device, per_sample

FLAGS = {
    "horizontal": [np.array(1), np.array(0), np.array(1)],
    "vertical": [np.array(0), np.array(1), np.array(1)],
}


def _check(xp, op, images, args) -> list[np.ndarray]:
    ctxs = contexts(len(images))
    out = op.run_batch(xp, [on_device(xp, images)], args, ctxs)
    got = host_samples(out)
    for i, (sample, image) in enumerate(zip(got, images, strict=True)):
        ref = op.run_sample([image], per_sample(args, i), ctxs[i])
        assert sample.dtype == ref.dtype
        np.testing.assert_array_equal(sample, ref)
    return got


@pytest.mark.parametrize("layout", ["HWC", "CHW", "HW"])
@pytest.mark.parametrize("dtype", [np.uint8, np.float16, np.float32, np.bool_])
def test_per_sample_flags_on_ragged_batches(xp, ragged, layout, dtype):
    images = [i[..., 0] if layout == "HW" else i for i in ragged(dtype=np.float32, seed=1)]
    if layout == "CHW":
        images = [np.ascontiguousarray(i.transpose(2, 0, 1)) for i in images]
    images = [(i > 127) if dtype == np.bool_ else i.astype(dtype) for i in images]
    assert launch.available(xp, 2 * sum(i.size for i in images))
    got = _check(xp, Flip("gpu", 0, layout=layout), images, FLAGS)
    assert [g.shape for g in got] == [i.shape for i in images]


@pytest.mark.parametrize(("horizontal", "vertical"), [(1, 0), (0, 1), (1, 1), (0, 0)])
def test_static_flags_on_a_batch_array(xp, ragged, horizontal, vertical):
    images = ragged(sizes=[(5, 7)] * 3, seed=2)
    op = Flip("gpu", 0, horizontal=horizontal, vertical=vertical)
    out = op.run_batch(xp, [xp.asarray(np.stack(images))], {}, contexts(3))
    assert isinstance(out, xp.ndarray)
    expected = np.stack(images)[:, ::-1] if vertical else np.stack(images)
    np.testing.assert_array_equal(host_samples(out), expected[:, :, ::-1] if horizontal else expected)


def test_wrong_rank_is_an_error(xp):
    with pytest.raises(ValueError, match=r"flip: expects CHW data, got shape \(4, 5\)"):
        Flip("gpu", 0, layout="CHW").run_batch(xp, [[xp.zeros((4, 5), np.uint8)]], {}, contexts(1))


@pytest.mark.gpu
def test_jpegs_on_the_gpu_match_the_host(cp, jpeg_images):
    args = {"horizontal": [np.array(i % 2) for i in range(4)], "vertical": [np.array(i // 2) for i in range(4)]}
    _check(cp, Flip("gpu", 0), jpeg_images, args)
