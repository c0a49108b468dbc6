"""``flip``: static and per-sample flags, HWC/CHW layouts, argument errors."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, types
from raypipe.keyed_random import SampleContext
from raypipe.operators.flip import Flip


def _samples(tl) -> list[np.ndarray]:
    tl = tl.as_cpu()
    return [np.asarray(tl.at(i)) for i in range(len(tl))]


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize(("horizontal", "vertical"), [(1, 0), (0, 1), (1, 1), (0, 0)])
def test_static_flags(jpeg_files, device, horizontal, vertical):
    @rp.pipeline_def(batch_size=3, num_threads=2, seed=1)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:3])
        images = fn.decoders.image(jpegs)
        return fn.flip(images, device=device, horizontal=horizontal, vertical=vertical), images

    with pipe() as p:
        out, src = p.run()
    assert out.layout() == "HWC"
    for got, image in zip(_samples(out), _samples(src)):
        expected = image[::-1] if vertical else image
        expected = expected[:, ::-1] if horizontal else expected
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_per_sample_coin_flips(jpeg_files, device):
    @rp.pipeline_def(batch_size=8, num_threads=2, seed=2)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:8])
        images = fn.decoders.image(jpegs)
        h, v = fn.random.coin_flip(), fn.random.coin_flip()
        return fn.flip(images, device=device, horizontal=h, vertical=v), images, h, v

    with pipe() as p:
        out, src, hs, vs = (_samples(tl) for tl in p.run())
    assert len({(int(h), int(v)) for h, v in zip(hs, vs)}) > 1
    for got, image, h, v in zip(out, src, hs, vs):
        expected = image[::-1] if v else image
        expected = expected[:, ::-1] if h else expected
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_explicit_chw_layout(jpeg_files, device):
    @rp.pipeline_def(batch_size=2, num_threads=1, seed=1)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:2])
        images = fn.decoders.image(jpegs)
        planar = fn.python_function(images, function=lambda a: np.ascontiguousarray(a.transpose(2, 0, 1)))
        return fn.flip(planar, device=device, horizontal=1, vertical=1, layout="CHW"), images

    with pipe() as p:
        out, src = p.run()
    assert out.layout() == "CHW"
    for got, image in zip(_samples(out), _samples(src)):
        np.testing.assert_array_equal(got, image[::-1, ::-1].transpose(2, 0, 1))


def test_layout_defaults_to_the_inputs():
    op = Flip(device="cpu", op_id=0, horizontal=1)
    assert op.output_layout(["CHW"]) == "CHW"
    planes = np.arange(2 * 3 * 4).reshape(2, 3, 4)
    np.testing.assert_array_equal(op.run_sample([planes], {}, SampleContext(0, 0, 0)), planes[:, :, ::-1])
    with pytest.raises(rp.ArgumentError, match="flip: cannot tell the image axes of layout 'NFHWC'"):
        Flip(device="cpu", op_id=0).output_layout(["NFHWC"])


def test_wrong_rank_names_the_shape(jpeg_files):
    @rp.pipeline_def(batch_size=1, num_threads=1, seed=0)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:1])
        return fn.flip(jpegs)

    with pipe() as p, pytest.raises(rp.SampleError, match=r"flip: expects HWC data, got shape \(\d+,\)"):
        p.run()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"horizontal": 2}, "horizontal must be 0 or 1, got 2"),
        ({"vertical": "yes"}, "vertical must be 0 or 1, got 'yes'"),
        ({"layout": "NHWC"}, "layout must be one of"),
        ({"depthwise": 2}, "depthwise must be 0 or 1, got 2"),
    ],
)
def test_invalid_arguments_are_named(jpeg_files, args, message):
    @rp.pipeline_def(batch_size=1, num_threads=1, seed=0)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:1])
        return fn.flip(fn.decoders.image(jpegs), **args)

    p = pipe()
    with pytest.raises(rp.ArgumentError, match=message):
        p.build()
    p.close()


VOLUME_DHWC = np.arange(4 * 5 * 6 * 2, dtype=np.uint8).reshape(4, 5, 6, 2)


@pytest.mark.parametrize("layout", ["DHWC", "CDHW"])
@pytest.mark.parametrize("flags", [{"depthwise": 1}, {"depthwise": 1, "horizontal": 0, "vertical": 1}, {}])
def test_volumes_flip_depthwise_as_dali(ours, dali, layout, flags):
    volume = VOLUME_DHWC if layout == "DHWC" else np.ascontiguousarray(VOLUME_DHWC.transpose(3, 0, 1, 2))

    def build(x, fn, types):
        return fn.flip(x, **flags)

    theirs = dali([volume], build, layout)
    mine = ours([volume], lambda x: build(x, fn, types), layout)
    np.testing.assert_array_equal(mine[0][0][0], theirs[0][0][0])
    assert mine[0][1] == theirs[0][1] == layout


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_per_sample_depthwise_flags(ours, device):
    volumes = [VOLUME_DHWC + k for k in range(6)]

    def build(x):
        coin = fn.random.coin_flip(probability=0.5, seed=4)
        data = x.gpu() if device == "gpu" else x
        return fn.flip(data, depthwise=coin, horizontal=0), coin

    flipped, coins = ours(volumes, build, "DHWC")
    assert {int(c) for c in coins[0]} == {0, 1}
    for got, volume, coin in zip(flipped[0], volumes, coins[0], strict=True):
        np.testing.assert_array_equal(got, volume[::-1] if int(coin) else volume)
