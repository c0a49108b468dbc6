"""DALI's input sets: an operator called on lists of nodes runs once per element with the other
inputs and arguments shared and one random stream, so a random window or flip is the same for
every set of a sample; results against DALI 2.4's CPU build where installed."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn


def _images():
    rng = np.random.default_rng(4)
    return [rng.integers(0, 255, (20 + 3 * i, 30 - i, 3)).astype(np.uint8) for i in range(4)]


def _build(f, x):
    twins = f.random_resized_crop([x, x], size=[8, 8], seed=3)
    sliced = f.slice([x, f.flip(x, horizontal=1)], [1, 2], [5, 6], axes=[0, 1])
    return (*twins, *sliced)


def test_input_sets_share_their_random_stream_and_arguments():
    images = _images()

    @rp.pipeline_def(batch_size=4, num_threads=1, seed=1)
    def pipe():
        x = fn.external_source(source=lambda: images, batch=True, layout="HWC")
        a, b = fn.random_resized_crop([x, x], size=[8, 8])
        return a, b, *fn.slice([x, fn.flip(x, horizontal=1)], [1, 2], [5, 6], axes=[0, 1])

    with pipe() as p:
        a, b, s1, s2 = (out.as_cpu() for out in p.run())
    for i, image in enumerate(images):
        np.testing.assert_array_equal(np.asarray(a.at(i)), np.asarray(b.at(i)))
        np.testing.assert_array_equal(np.asarray(s1.at(i)), image[1:6, 2:8])
        np.testing.assert_array_equal(np.asarray(s2.at(i)), image[:, ::-1][1:6, 2:8])


def test_input_sets_of_different_lengths_are_refused():
    @rp.pipeline_def(batch_size=1, num_threads=1)
    def pipe():
        x = fn.external_source(source=lambda: [np.zeros((2, 2, 3), np.uint8)], batch=True)
        return fn.cat([x, x], [x])

    with pytest.raises(rp.ArgumentError, match="different lengths"):
        pipe().build()


def test_input_sets_match_dali():
    pytest.importorskip("nvidia.dali")
    from nvidia.dali import fn as dali_fn
    from nvidia.dali import pipeline_def

    images = _images()

    @pipeline_def(batch_size=4, num_threads=1, device_id=None, seed=1)
    def theirs():
        return _build(dali_fn, dali_fn.external_source(source=lambda: images, batch=True, layout="HWC"))

    @rp.pipeline_def(batch_size=4, num_threads=1, seed=1)
    def ours():
        return _build(fn, fn.external_source(source=lambda: images, batch=True, layout="HWC"))

    d = theirs()
    d.build()
    dali_out = d.run()
    with ours() as p:
        our_out = [out.as_cpu() for out in p.run()]
    for mine, other in zip(our_out, dali_out, strict=True):
        assert mine.layout() == other.layout()
        for i in range(4):
            assert np.asarray(mine.at(i)).shape == np.asarray(other[i]).shape
    for i in range(4):  # DALI too crops both sets of a sample alike
        np.testing.assert_array_equal(np.asarray(dali_out[0][i]), np.asarray(dali_out[1][i]))
        np.testing.assert_array_equal(np.asarray(our_out[2].at(i)), np.asarray(dali_out[2][i]))
        np.testing.assert_array_equal(np.asarray(our_out[3].at(i)), np.asarray(dali_out[3][i]))
