"""pad: DALI's documented examples and DALI's results on ragged batches (real JPEGs and small
arrays), per-sample arguments, the batch's largest extent in the GPU stage (with or without a GPU)
and, on device="cpu", in a host batch step after the CPU stage."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, types
from raypipe.operators.pad import Pad
from raypipe.sample_contexts import SampleContexts

RAGGED = [np.array([3, 4, 2, 5, 4], np.int32), np.array([2, 2], np.int32), np.array([3, 199, 5], np.int32)]


# (id, samples, layout, build): DALI's on the CPU, raypipe's on device="gpu", the batch step
CASES = [
    ("1d-largest", RAGGED, "", lambda x, fn, types, device: fn.pad(x, fill_value=-1, device=device)),
    ("1d-shape", RAGGED, "", lambda x, fn, types, device: fn.pad(x, fill_value=-1, shape=[7], device=device)),
    ("1d-align", RAGGED, "", lambda x, fn, types, device: fn.pad(x, fill_value=-1, align=[4], device=device)),
    (
        "1d-align-only",
        RAGGED,
        "",
        lambda x, fn, types, device: fn.pad(x, fill_value=-1, shape=[1], align=2, device=device),
    ),
    (
        "2d-mixed",
        [np.arange(1, 7, dtype=np.int32).reshape(2, 3), np.arange(1, 7, dtype=np.int32).reshape(3, 2)],
        "",
        lambda x, fn, types, device: fn.pad(x, axes=(0, 1), align=(1, 2), shape=(4, -1), device=device),
    ),
    ("images-width", None, "HWC", lambda x, fn, types, device: fn.pad(x, axis_names="W", fill_value=42, device=device)),
    ("images-all-aligned", None, "HWC", lambda x, fn, types, device: fn.pad(x, axes=[0, 1], align=16, device=device)),
    (
        "uint8-negative-fill",
        None,
        "HWC",
        lambda x, fn, types, device: fn.pad(x, axes=[-3], fill_value=-5, device=device),
    ),
]


@pytest.mark.parametrize("case, samples, layout, build", CASES, ids=[c[0] for c in CASES])
def test_against_dali(ours, dali, images, case, samples, layout, build):
    samples = images if samples is None else samples
    theirs = dali(samples, lambda x, fn, types: build(x, fn, types, "cpu"), layout)
    mine = ours(samples, lambda x: build(x.gpu(), fn, types, "gpu"), layout)
    for (their_samples, their_layout), (my_samples, my_layout) in zip(theirs, mine, strict=True):
        assert my_layout == their_layout
        for their, my in zip(their_samples, my_samples, strict=True):
            assert my.dtype == their.dtype
            np.testing.assert_array_equal(my, their)


def test_dalis_documented_examples_without_dali(ours):
    (largest,), (minimum,), (aligned,) = (
        ours(RAGGED, lambda x: fn.pad(x.gpu(), fill_value=-1, device="gpu")),
        ours(RAGGED + [np.arange(1, 9, dtype=np.int32)], lambda x: fn.pad(x, fill_value=-1, shape=[7])),
        ours(RAGGED, lambda x: fn.pad(x, fill_value=-1, shape=[1], align=[2])),
    )
    assert [s.tolist() for s in largest[0]] == [[3, 4, 2, 5, 4], [2, 2, -1, -1, -1], [3, 199, 5, -1, -1]]
    assert [s.tolist() for s in minimum[0]] == [
        [3, 4, 2, 5, 4, -1, -1],
        [2, 2, -1, -1, -1, -1, -1],
        [3, 199, 5, -1, -1, -1, -1],
        [1, 2, 3, 4, 5, 6, 7, 8],
    ]
    assert [s.tolist() for s in aligned[0]] == [[3, 4, 2, 5, 4, -1], [2, 2], [3, 199, 5, -1]]
    two_d = [np.arange(1, 7, dtype=np.int32).reshape(2, 3), np.array([[1, 2], [4, 5], [6, 7]], np.int32)]
    ((padded, _),) = ours(two_d, lambda x: fn.pad(x.gpu(), axes=(0, 1), align=(1, 2), shape=(4, -1), device="gpu"))
    assert padded[1].tolist() == [[1, 2, 0, 0], [4, 5, 0, 0], [6, 7, 0, 0], [0, 0, 0, 0]]


def test_per_sample_arguments(ours):
    """``fill_value`` and ``shape`` as argument inputs: each sample its own."""

    def build(x):
        fill = fn.python_function(x, function=lambda s: np.float32(len(s) * 10))
        shape = fn.python_function(x, function=lambda s: np.array([len(s) + 1], np.int32))
        return fn.pad(x, fill_value=fill, shape=shape)

    ((padded, _),) = ours(RAGGED, build)
    assert [s.tolist() for s in padded] == [[3, 4, 2, 5, 4, 50], [2, 2, 20], [3, 199, 5, 30]]


@pytest.mark.parametrize("case, samples, layout, build", CASES, ids=[c[0] for c in CASES])
def test_cpu_against_dali(ours, dali, images, case, samples, layout, build):
    """``device="cpu"`` gives DALI's CPU results, the batch's largest extent included (a host batch step)."""
    samples = images if samples is None else samples
    theirs = dali(samples, lambda x, fn, types: build(x, fn, types, "cpu"), layout)
    mine = ours(samples, lambda x: build(x, fn, types, "cpu"), layout)
    for (their_samples, their_layout), (my_samples, my_layout) in zip(theirs, mine, strict=True):
        assert my_layout == their_layout
        for their, my in zip(their_samples, my_samples, strict=True):
            assert my.dtype == their.dtype
            np.testing.assert_array_equal(my, their)


def test_cpu_pads_to_the_batchs_largest_extent_as_a_batch_step(ours):
    """On the CPU, pad without ``shape`` runs once per batch on the gathered samples; what consumes
    it (a CPU operator, a GPU operator without a GPU) runs batch by batch after it."""
    ((padded, _),) = ours(RAGGED, lambda x: fn.pad(x, fill_value=-1))
    assert [s.tolist() for s in padded] == [[3, 4, 2, 5, 4], [2, 2, -1, -1, -1], [3, 199, 5, -1, -1]]
    (shapes, _), (doubled, _) = ours(RAGGED, lambda x: (fn.shapes(fn.pad(x, fill_value=-1)), fn.pad(x).gpu() * 2))
    assert [s.tolist() for s in shapes] == [[5], [5], [5]]
    assert [s.tolist() for s in doubled] == [[6, 8, 4, 10, 8], [4, 4, 0, 0, 0], [6, 398, 10, 0, 0]]


def test_an_argument_input_from_a_cpu_batch_step(ours):
    """A per-sample argument computed from a padded batch: its consumer (a pad to a static shape,
    which alone would run per sample in the CPU stage) runs after the batch step."""

    def build(x):
        longest = fn.shapes(fn.pad(x, fill_value=-1), dtype=types.INT32)[0]
        return fn.pad(x, shape=[6], fill_value=fn.cast(longest, dtype=types.FLOAT))

    ((padded, _),) = ours(RAGGED, build)
    assert [s.tolist() for s in padded] == [[3, 4, 2, 5, 4, 5], [2, 2, 5, 5, 5, 5], [3, 199, 5, 5, 5, 5]]


def test_cpu_batch_step_places_per_sample_pad_in_the_cpu_stage(jpeg_files):
    """Only pads that need the batch leave the CPU stage: a static ``shape`` pads per sample."""
    from raypipe.graph import Graph, defining, stage

    graph = Graph()
    with defining(graph):
        _, labels = fn.readers.file(files=jpeg_files[:2])
        fixed, largest = fn.pad(labels, shape=[4]), fn.pad(labels)
    staged = stage(graph, [fixed, largest], on_gpu=False)
    assert fixed.producer in staged.host_nodes
    assert largest.producer in staged.gpu_nodes
    assert labels in staged.host_results


def test_the_device_report_says_a_cpu_batch_step_runs_on_the_host(jpeg_files):
    @rp.pipeline_def(batch_size=2, num_threads=1)
    def pipe():
        _, labels = fn.readers.file(files=jpeg_files[:2], labels=[1, 2])
        return fn.pad(labels, name="padded")

    with pipe() as p:
        report = p.device_report()
    assert report["operators"] == {"'padded'": "host"} and report["kernels"]["path"] != "gpu"


def test_a_mixed_operator_cannot_consume_a_cpu_batch_step(jpeg_files):
    @rp.pipeline_def(batch_size=2, num_threads=1)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:2])
        return fn.decoders.image(fn.pad(jpegs), device="mixed")

    with pytest.raises(rp.PipelineDefinitionError, match="cannot consume .*'pad'.*needs the whole batch"):
        pipe().build()


def test_batch_step_on_numpy():
    ctxs = SampleContexts(0, 0, np.arange(3))
    out = Pad("gpu", 0, fill_value=9, align=[2]).run_batch(np, [RAGGED], {"fill_value": [1, 2, 3]}, ctxs)
    assert [s.tolist() for s in out] == [[3, 4, 2, 5, 4, 1], [2, 2, 2, 2, 2, 2], [3, 199, 5, 3, 3, 3]]
    batch = np.arange(6, dtype=np.uint8).reshape(3, 2)
    dense = Pad("gpu", 1, fill_value=-1, axes=[0], shape=[3]).run_batch(np, [batch], {}, ctxs)
    assert isinstance(dense, np.ndarray) and dense.tolist() == [[0, 1, 255], [2, 3, 255], [4, 5, 255]]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"axes": [0], "axis_names": "H"}, "axes and axis_names are mutually exclusive"),
        ({"shape": [0]}, "shape must hold positive extents or -1"),
        ({"align": [0]}, "align must hold positive ints"),
        ({"axes": [0, 1], "shape": [4, 4, 4]}, "shape \\[4, 4, 4\\] must give one value per padded axis"),
        ({"fill_value": "x"}, "fill_value must be a number"),
        ({"axis_names": "Q", "shape": [600]}, "names axes not in the input layout"),
    ],
)
def test_argument_errors_before_anything_runs(jpeg_files, kwargs, match):
    @rp.pipeline_def(batch_size=1, num_threads=1)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:1])
        return fn.pad(fn.decoders.image(jpegs), **kwargs)

    with pytest.raises(rp.ArgumentError, match=f"pad: .*{match}"):
        pipe().build()
