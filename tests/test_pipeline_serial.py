"""``Pipeline.serialize`` and ``Pipeline.deserialize`` (:mod:`raypipe.pipeline_serial`): a pipeline's
definition as data gives the same batches in this process and in another that never saw the code
defining it; arguments replace the serialized ones; code arguments and foreign data are refused by
name."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, math, pipeline_serial, tfrecord, types
from raypipe.pipeline import Pipeline


def training(files):
    """A ResNet-style graph using most kinds of values a definition holds."""
    jpegs, labels = fn.readers.file(files=files, random_shuffle=True, initial_fill=8, name="Reader")
    images = fn.decoders.image_random_crop(jpegs, random_area=[0.3, 1.0], dtype=types.UINT8)
    images = fn.resize(images, resize_x=24, resize_y=16, interp_type=types.INTERP_LINEAR)
    images = fn.crop_mirror_normalize(
        images,
        mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
        std=[0.229 * 255, 0.224 * 255, 0.225 * 255],
        mirror=fn.random.coin_flip(probability=0.5),
        dtype=types.FLOAT16,
        output_layout="CHW",
    )
    scale = math.clamp(fn.random.uniform(range=(0.5, 1.5), shape=[2]), 0.7, 1.2)
    floats = fn.decoders.image(jpegs, dtype=types.FLOAT)[2:5, ::2] * types.Constant(2.0)
    return images, labels + np.int32(1), scale, fn.shapes(floats), np.array([[1, 2]], np.uint8)


def _batches(pipe, count=3):
    with pipe:
        return [[np.asarray(out.as_cpu()).tobytes() for out in pipe.run()] for _ in range(count)]


@pytest.fixture(scope="module")
def defined(jpeg_files):
    return rp.pipeline_def(batch_size=4, num_threads=2, device_id=None, seed=7)(training)(jpeg_files[:8])


def test_a_deserialized_pipeline_gives_the_same_batches(defined, jpeg_files, tmp_path):
    data = defined.serialize(filename=tmp_path / "pipe.json")
    assert isinstance(data, bytes) and (tmp_path / "pipe.json").read_bytes() == data
    expected = _batches(rp.pipeline_def(batch_size=4, num_threads=2, device_id=None, seed=7)(training)(jpeg_files[:8]))
    assert _batches(Pipeline.deserialize(data)) == expected
    assert _batches(Pipeline.deserialize(filename=tmp_path / "pipe.json", num_threads=1)) == expected


def test_arguments_given_replace_the_serialized_ones(defined):
    pipe = Pipeline.deserialize(defined.serialize(), batch_size=2, seed=8)
    assert (pipe.batch_size, pipe.seed, pipe.num_threads) == (2, 8, 2)
    with pipe:
        images = pipe.run()[0]
        assert len(images) == 2 and pipe.epoch_size("Reader") == 8
    with pytest.raises(rp.ArgumentError, match="'batch' is not a pipeline argument"):
        Pipeline.deserialize(defined.serialize(), batch=2)


def test_another_process_runs_it_without_the_code_that_defined_it(defined, jpeg_files, tmp_path):
    path = tmp_path / "pipe.json"
    defined.serialize(filename=path)
    script = (
        "import sys, numpy as np\n"
        "from raypipe.pipeline import Pipeline\n"
        "pipe = Pipeline.deserialize(filename=sys.argv[1])\n"
        "with pipe:\n"
        "    for out in pipe.run():\n"
        "        sys.stdout.write(np.asarray(out.as_cpu()).tobytes().hex() + '\\n')\n"
    )
    run = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    expected = _batches(rp.pipeline_def(batch_size=4, num_threads=2, device_id=None, seed=7)(training)(jpeg_files[:8]))
    assert run.stdout.split() == [b.hex() for b in expected[0]]


def test_deserialize_and_build_gives_a_pipeline_the_graph_with_its_own_arguments(defined, jpeg_files):
    expected = _batches(rp.pipeline_def(batch_size=4, num_threads=2, device_id=None, seed=7)(training)(jpeg_files[:8]))
    pipe = Pipeline(batch_size=4, num_threads=1, device_id=None, seed=7)
    pipe.deserialize_and_build(defined.serialize())
    assert pipe.num_threads == 1 and _batches(pipe) == expected
    with pytest.raises(
        rp.PipelineDefinitionError, match="deserialize_and_build\\(\\): the pipeline already has a graph"
    ):
        pipe.deserialize_and_build(defined.serialize())


def test_a_with_block_pipeline_and_a_given_define_graph_serialize_alike(jpeg_files):
    pipe = Pipeline(batch_size=4, num_threads=2, device_id=None, seed=7)
    with pipe:
        pipe.set_outputs(*training(jpeg_files[:8])[:4])  # set_outputs takes operators' outputs only
    other = Pipeline(batch_size=4, num_threads=2, device_id=None, seed=7)
    assert pipe.serialize() == other.serialize(define_graph=lambda: training(jpeg_files[:8])[:4])
    assert _batches(Pipeline.deserialize(pipe.serialize())) == _batches(pipe)


def test_a_tfrecord_feature_and_declared_outputs_are_kept(tmp_path):
    pipe = rp.pipeline_def(batch_size=2, num_threads=1, device_id=None, output_dtype=[types.INT64])(
        lambda: fn.readers.tfrecord(
            path=[str(tmp_path / "a.tfrecord")],
            index_path=[str(tmp_path / "a.idx")],
            features={"label": tfrecord.FixedLenFeature([1], tfrecord.int64, -1)},
        )["label"]
    )()
    data = pipe.serialize()
    definition = pipeline_serial.load(data)
    assert definition.calls[0].kwargs["features"] == {"label": tfrecord.FixedLenFeature([1], tfrecord.int64, -1)}
    assert definition.arguments["output_dtype"] == [types.INT64]
    assert Pipeline.deserialize(data).serialize() == data


def test_an_external_source_fed_by_name_survives_as_in_dali():
    """DALI's serialized pipelines keep external sources without a ``source`` (fed with ``feed_input``)."""
    pipe = Pipeline(batch_size=2, num_threads=1, device_id=None)
    with pipe:
        pipe.set_outputs(fn.external_source(name="x", dtype=types.FLOAT, ndim=1) * 2)
    again = Pipeline.deserialize(pipe.serialize())
    with again:
        (out,) = again.run(x=[np.ones(3, np.float32), np.zeros(2, np.float32)])
    assert [np.asarray(out[i]).tolist() for i in range(2)] == [[2.0, 2.0, 2.0], [0.0, 0.0]]


def _brighten(image):
    return image


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: fn.python_function(fn.random.uniform(shape=[2]), function=_brighten), "argument 'function'"),
        (lambda: fn.external_source(source=lambda: [np.zeros(2)] * 2, batch=True), "argument 'source'"),
    ],
)
def test_code_arguments_are_refused_naming_the_operator(build, message):
    pipe = Pipeline(batch_size=2, num_threads=1, device_id=None)
    with pytest.raises(
        rp.ArgumentError, match=rf"serialize: operator '\w+' \(call \d\) {message} cannot be serialized"
    ):
        pipe.serialize(define_graph=build)


@rp.pipeline_def(batch_size=2, num_threads=1, device_id=None, enable_conditionals=True)
def branching():
    x = fn.random.uniform(shape=[2])
    if fn.random.coin_flip(dtype=types.BOOL):
        x = x * 2
    return x


def test_graphs_of_operators_are_refused_by_what_they_are():
    with pytest.raises(
        rp.ArgumentError, match=r"an `if` on pipeline data \(enable_conditionals\) cannot be serialized"
    ):
        branching().serialize()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x08\x01\x12", "not JSON text"),
        (b'{"format": "other"}', "DALI's serialized pipelines"),
        (b'{"format": "raypipe.pipeline", "version": 9}', "version 9"),
        (b'{"format": "raypipe.pipeline", "version": 1, "pipeline": {}}', "damaged"),
    ],
)
def test_what_is_not_a_serialized_pipeline_is_refused(data, message):
    with pytest.raises(rp.ArgumentError, match=message):
        Pipeline.deserialize(data)
    with pytest.raises(rp.ArgumentError, match="give serialized_pipeline or filename"):
        Pipeline.deserialize()
