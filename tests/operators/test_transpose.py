"""transpose: exact axis permutation into a contiguous array, with the layout permuted alongside."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, types


def run(files, build, batch_size=4):
    """Decode JPEGs, apply ``build(images)``; return the output TensorList (on the host) and the images."""

    @rp.pipeline_def(batch_size=batch_size, num_threads=2, seed=0)
    def pipe():
        jpegs, _ = fn.readers.file(files=files[:batch_size])
        images = fn.decoders.image(jpegs)
        return build(images), images

    with pipe() as p:
        out, images = p.run()
    return out, [images.at(i) for i in range(len(images))]


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize(("perm", "layout"), [((2, 0, 1), "CHW"), ((1, 0, 2), "WHC"), ((0, 1, 2), "HWC")])
def test_permutes_axes_and_layout(jpeg_files, device, perm, layout):
    out, images = run(jpeg_files, lambda images: fn.transpose(images, device=device, perm=perm))
    assert out.layout() == layout
    host = out.as_cpu()
    for i, image in enumerate(images):
        got = host.at(i)
        assert got.flags.c_contiguous
        np.testing.assert_array_equal(got, np.transpose(image, perm))


def test_explicit_output_layout_wins(jpeg_files):
    out, images = run(jpeg_files, lambda images: fn.transpose(images, perm=[2, 0, 1], output_layout="CYX"))
    assert out.layout() == "CYX"
    np.testing.assert_array_equal(out.at(0), images[0].transpose(2, 0, 1))


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_transpose_layout_false_keeps_the_input_layout_as_in_dali(jpeg_files, device):
    out, images = run(jpeg_files, lambda im: fn.transpose(im, device=device, perm=[2, 0, 1], transpose_layout=False))
    assert out.layout() == "HWC"
    np.testing.assert_array_equal(out.as_cpu().at(0), images[0].transpose(2, 0, 1))
    named, _ = run(jpeg_files, lambda im: fn.transpose(im, perm=[2, 0, 1], transpose_layout=False, output_layout="CYX"))
    assert named.layout() == "CYX", "output_layout wins"


def test_layout_left_empty_when_the_input_has_none(jpeg_files):
    """cast keeps the decoder's HWC, which transpose permutes; the reader's labels have no layout."""

    @rp.pipeline_def(batch_size=2, num_threads=1, seed=0)
    def pipe():
        jpegs, labels = fn.readers.file(files=jpeg_files[:2])
        images = fn.cast(fn.decoders.image(jpegs), dtype=types.FLOAT)
        return fn.transpose(images, perm=[2, 0, 1]), fn.transpose(labels, perm=[0])

    with pipe() as p:
        planar, labels = p.run()
    assert planar.layout() == "CHW"
    assert planar.at(0).dtype == np.float32 and planar.at(0).shape[0] == 3
    assert labels.layout() == ""
    np.testing.assert_array_equal(np.asarray(labels), [[0], [1]])


def test_transposed_batch_stacks_densely_after_a_crop(jpeg_files):
    def build(images):
        crops = fn.crop_mirror_normalize(images, crop=(32, 48), dtype=types.UINT8, output_layout="HWC")
        return fn.transpose(crops, device="gpu", perm=[2, 0, 1])

    out, images = run(jpeg_files, build)
    dense = np.asarray(out.as_cpu())
    assert dense.shape == (4, 3, 32, 48)
    for i, image in enumerate(images):
        h, w = image.shape[:2]
        y0, x0 = int(np.floor(0.5 * (h - 32) + 0.5)), int(np.floor(0.5 * (w - 48) + 0.5))
        np.testing.assert_array_equal(dense[i], image[y0 : y0 + 32, x0 : x0 + 48].transpose(2, 0, 1))


def test_rank_mismatch_fails_naming_the_operator(jpeg_files):
    @rp.pipeline_def(batch_size=1, num_threads=1, seed=0)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:1])
        return fn.transpose(fn.decoders.image(jpegs), perm=[1, 0])

    with pipe() as p:
        with pytest.raises(rp.SampleError, match=r"transpose: perm \[1, 0\] needs 2-D samples, got shape"):
            p.run()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({}, "perm is required"),
        ({"perm": 3}, "perm must be a sequence of ints"),
        ({"perm": [0, 0, 1]}, "perm must be a permutation of 0..n-1"),
        ({"perm": [1, 2, 3]}, "perm must be a permutation of 0..n-1"),
        ({"perm": [2, 0, 1.0]}, "perm must be a permutation of 0..n-1"),
        ({"perm": []}, "perm must be a permutation of 0..n-1"),
        ({"perm": [2, 0, 1], "output_layout": "CH"}, "output_layout must be a string of 3 axis names"),
        ({"perm": [2, 0, 1], "axes": [0]}, "unexpected keyword argument 'axes'"),
        ({"perm": [2, 0, 1], "transpose_layout": "no"}, "transpose_layout must be a bool"),
    ],
)
def test_argument_errors(jpeg_files, kwargs, match):
    @rp.pipeline_def(batch_size=1, num_threads=1)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:1])
        return fn.transpose(fn.decoders.image(jpegs), **kwargs)

    with pipe() as p:
        with pytest.raises(rp.ArgumentError, match=f"transpose: .*{match}"):
            p.build()
