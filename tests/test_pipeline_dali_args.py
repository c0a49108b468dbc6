"""DALI's pipeline and operator arguments: what each accepted one does (and that it changes no
batch where DALI's does not), that each one raypipe does not implement is refused by name, per-operator
seeds, ``preserve``, and checkpoints that resume at the exact next batch."""

from __future__ import annotations

import inspect
import json
import os
import pickle
import shutil
import subprocess

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, ops, types
from raypipe.pipeline import PIPELINE_ARGS


@rp.pipeline_def(batch_size=4, num_threads=1, device_id=None, seed=11)
def train(files):
    jpegs, labels = fn.readers.file(files=files, random_shuffle=True, initial_fill=8, name="Reader")
    images = fn.decoders.image_random_crop(jpegs)
    images = fn.resize(images, resize_x=16, resize_y=12)
    return images, labels, fn.random.coin_flip(), fn.random.uniform(range=[0.0, 1.0])


def batches(pipe, count=5):
    """The bytes of ``count`` batches (crossing an epoch of 8 samples)."""
    with pipe:
        return [[np.asarray(out).tobytes() for out in pipe.run()] for _ in range(count)]


@pytest.fixture(scope="module")
def reference(jpeg_files):
    return batches(train(jpeg_files[:8]))


@pytest.mark.parametrize(
    "kwargs, attrs",
    [
        # exec_dynamic, exec_separated and max_streams as DALI 2.4 reports them
        ({}, {"exec_dynamic": True, "exec_separated": False, "concurrency": None, "stream_policy": None}),
        (
            {"exec_pipelined": False},
            {"exec_pipelined": False, "cpu_queue_depth": 1, "gpu_queue_depth": 1, "exec_dynamic": None},
        ),
        (
            {"exec_async": False},
            {"exec_async": False, "cpu_queue_depth": 1, "gpu_queue_depth": 1, "exec_dynamic": None},
        ),
        ({"exec_async": True, "prefetch_queue_depth": 3}, {"cpu_queue_depth": 3, "gpu_queue_depth": 3}),
        (
            {"prefetch_queue_depth": {"cpu_size": 2, "gpu_size": 3}},
            {"cpu_queue_size": 2, "gpu_queue_size": 3, "exec_separated": True, "exec_dynamic": None},
        ),
        ({"exec_dynamic": False}, {"exec_dynamic": False}),
        ({"experimental_exec_dynamic": True}, {"exec_dynamic": True}),
        ({"bytes_per_sample": 1 << 20}, {"bytes_per_sample": 1 << 20}),
        ({"set_affinity": True}, {"set_affinity": True}),
        ({"max_streams": 4}, {"max_streams": -1}),
        ({"default_cuda_stream_priority": -1}, {"default_cuda_stream_priority": -1}),
        ({"enable_memory_stats": True}, {"enable_memory_stats": True}),
        ({"enable_checkpointing": True}, {"enable_checkpointing": True}),
        ({"py_num_workers": 4, "py_start_method": "spawn"}, {"py_num_workers": 4, "py_start_method": "spawn"}),
        ({"py_callback_pickler": None, "stream_policy": None, "concurrency": None}, {}),
        ({"device_id": types.CPU_ONLY_DEVICE_ID}, {"device_id": None}),
        ({"output_dtype": types.UINT8, "output_ndim": 3, "output_layout": "HWC"}, {}),
        ({"output_dtype": [None, types.INT32, types.INT32, types.FLOAT], "output_ndim": [3, 1, 0, 0]}, {}),
        ({"output_layout": [types.NHWC, "", None, ""]}, {}),
        ({"enable_conditionals": False, "debug": False}, {}),
        ({"enable_conditionals": True}, {}),
    ],
)
def test_accepted_arguments_take_dalis_meaning_and_change_no_batch(jpeg_files, reference, kwargs, attrs):
    pipe = train(jpeg_files[:8], **kwargs)
    for name, value in attrs.items():
        assert getattr(pipe, name) == value, name
    if "cpu_queue_depth" in attrs:
        pipe.build()
        assert pipe.queue_stats()["cpu"]["size"] == attrs["cpu_queue_depth"]
    if "output_dtype" in kwargs and not isinstance(kwargs["output_dtype"], list):
        with pytest.raises(rp.PipelineDefinitionError, match="output 1 has dtype int32, output_dtype declares"):
            pipe.run()
        return
    assert batches(pipe) == reference


@pytest.mark.parametrize(
    "kwargs, dtypes, ndims",
    [
        ({}, [None] * 4, [None] * 4),
        ({"output_dtype": types.UINT8}, [types.UINT8] * 4, [None] * 4),
        (
            {"output_dtype": [None, types.INT32, None, types.FLOAT], "output_ndim": [3, 1, 0, 0]},
            [None, types.INT32, None, types.FLOAT],
            [3, 1, 0, 0],
        ),
    ],
)
def test_output_dtype_and_ndim_give_each_outputs_declaration_as_dali(jpeg_files, kwargs, dtypes, ndims):
    """DALI's ``Pipeline.output_dtype()`` / ``output_ndim()``: one entry per output, None where
    nothing is declared (the values DALI 2.4 gives for the same declarations)."""
    pipe = train(jpeg_files[:8], **kwargs)
    assert pipe.output_dtype() == dtypes
    assert pipe.output_ndim() == ndims


def test_the_arguments_are_dalis_in_dalis_order():
    assert PIPELINE_ARGS[:11] == (
        "batch_size",
        "num_threads",
        "device_id",
        "seed",
        "exec_pipelined",
        "prefetch_queue_depth",
        "exec_async",
        "bytes_per_sample",
        "set_affinity",
        "max_streams",
        "default_cuda_stream_priority",
    )
    pipe = rp.Pipeline(4, 2, None, 3, False, 2, True)  # positional, as a DALI subclass passes them
    assert (pipe.batch_size, pipe.num_threads, pipe.seed, pipe.exec_pipelined, pipe.cpu_queue_depth) == (
        4,
        2,
        3,
        False,
        1,
    )
    dali = pytest.importorskip("nvidia.dali")
    assert tuple(inspect.signature(dali.Pipeline.__init__).parameters)[1:] == PIPELINE_ARGS


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"py_callback_pickler": pickle}, "py_callback_pickler is not supported by raypipe"),
        ({"stream_policy": 1}, "stream_policy is not supported by raypipe"),
        ({"concurrency": "full"}, "concurrency is not supported by raypipe"),
        ({"enable_conditionals": 1}, r"enable_conditionals must be a bool, got 1"),
        ({"debug": True}, r"debug=True is not supported"),
        ({"exec_async": "no"}, "exec_async must be a bool"),
        ({"exec_pipelined": 0}, "exec_pipelined must be a bool"),
        ({"exec_dynamic": 1}, "exec_dynamic must be a bool or None"),
        ({"set_affinity": None}, "set_affinity must be a bool"),
        ({"enable_memory_stats": "yes"}, "enable_memory_stats must be a bool"),
        ({"enable_checkpointing": 1}, "enable_checkpointing must be a bool"),
        ({"bytes_per_sample": -1}, "bytes_per_sample must be a non-negative int"),
        ({"max_streams": 1.5}, "max_streams must be a non-negative int"),
        ({"default_cuda_stream_priority": "high"}, "default_cuda_stream_priority must be None or an int"),
        ({"py_num_workers": -1}, "py_num_workers must be a non-negative int"),
        ({"py_start_method": "threads"}, "py_start_method must be 'fork', 'spawn' or 'forkserver'"),
        ({"output_dtype": "uint8"}, "output_dtype must be a types.DALIDataType"),
        ({"output_ndim": [3, -1]}, "output_ndim must be a non-negative int"),
        ({"output_layout": 3}, "output_layout must be a str"),
        ({"exec_async": False, "prefetch_queue_depth": {"cpu_size": 2, "gpu_size": 2}}, "needs exec_pipelined"),
        ({"checkpoint": b"{}"}, "cannot restore the checkpoint: enable_checkpointing=True was not specified"),
        ({"checkpoint": "not json", "enable_checkpointing": True}, "checkpoint must be the value Pipeline.checkpoint"),
        ({"seed": True}, "seed must be a non-negative int"),
    ],
)
def test_arguments_not_implemented_or_invalid_are_refused_by_name(jpeg_files, kwargs, match):
    with pytest.raises(rp.ArgumentError, match=match):
        train(jpeg_files[:8], **kwargs)


def test_declared_output_counts_must_match_at_build(jpeg_files):
    pipe = train(jpeg_files[:8], output_ndim=[3, 1])
    with pytest.raises(rp.ArgumentError, match="output_ndim declares 2 outputs, the pipeline has 4"):
        pipe.build()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"output_ndim": [3, 2, None, None]}, "output 1 has 1 dimensions, output_ndim declares 2"),
        ({"output_layout": [types.NCHW]}, None),
        ({"output_layout": ["HWC", "", "", "X"]}, "output 3 has layout '', output_layout declares 'X'"),
        ({"output_dtype": [None, None, None, types.FLOAT16]}, "output 3 has dtype float32, output_dtype declares"),
    ],
)
def test_declared_outputs_are_checked_on_every_batch(jpeg_files, kwargs, match):
    @rp.pipeline_def(batch_size=2, num_threads=1, seed=1)
    def one_output(files):
        jpegs, _ = fn.readers.file(files=files)
        return fn.resize(fn.decoders.image(jpegs), resize_x=8, resize_y=8)

    if match is None:  # one output: a one-entry list that does not match
        with pytest.raises(rp.PipelineDefinitionError, match="output 0 has layout 'HWC', output_layout declares 'CHW'"):
            one_output(jpeg_files[:2], **kwargs).run()
        return
    with pytest.raises(rp.PipelineDefinitionError, match=match):
        train(jpeg_files[:8], **kwargs).run()


def test_unknown_arguments_fail_clearly(jpeg_files):
    with pytest.raises(TypeError, match="exec_asnyc"):
        rp.Pipeline(batch_size=2, exec_asnyc=False)
    with pytest.raises(
        rp.ArgumentError, match=r"unknown pipeline arguments \['exec_asnyc'\]; did you mean 'exec_async'"
    ):
        rp.pipeline_def(batch_size=2, exec_asnyc=False)
    with pytest.raises(
        rp.ArgumentError, match="train: got an unexpected keyword argument 'exec_asnyc'; did you mean 'exec_async'"
    ):
        train(jpeg_files[:8], exec_asnyc=False)
    with pytest.raises(
        rp.ArgumentError, match="train: got an unexpected keyword argument 'seeed'; did you mean 'seed'"
    ):
        train(jpeg_files[:8], seeed=3)


def test_a_function_parameter_shadows_a_pipeline_argument_as_in_dali(jpeg_files):
    seen = {}

    @rp.pipeline_def(batch_size=2, num_threads=1, seed=1)
    def graph(files, exec_async, **operator_args):
        seen.update(exec_async=exec_async, **operator_args)
        jpegs, _ = fn.readers.file(files=files)
        return fn.crop_mirror_normalize(fn.decoders.image(jpegs), crop=(8, 8), **operator_args)

    with pytest.warns(UserWarning, match="'exec_async' goes to the function"):
        pipe = graph(jpeg_files[:2], exec_async=False, output_layout="HWC", exec_pipelined=False)
    with pipe:
        (out,) = pipe.run()
    assert seen == {"exec_async": False, "output_layout": "HWC"}  # **kwargs gets the operator's output_layout
    assert pipe.exec_async is True and pipe.exec_pipelined is False and out.layout() == "HWC"


def _draws(files, pipeline_seed, **op_seeds):
    @rp.pipeline_def(batch_size=4, num_threads=2, seed=pipeline_seed)
    def graph():
        jpegs, _ = fn.readers.file(files=files)
        crops = fn.decoders.image_random_crop(jpegs, seed=op_seeds.get("crop", -1))
        return (
            fn.random.uniform(range=[0.0, 1.0], seed=op_seeds.get("uniform")),
            fn.random.coin_flip(seed=op_seeds.get("coin", -1)),
            fn.random.uniform(range=[0.0, 1.0], seed=op_seeds.get("second")),
            fn.resize(crops, resize_x=4, resize_y=4),
        )

    return [[np.asarray(out).tobytes() for out in batch] for batch in _runs(graph(), 3)]


def _runs(pipe, count):
    with pipe:
        return [pipe.run() for _ in range(count)]


def test_an_operator_seed_fixes_its_draws_whatever_the_pipeline_seed(jpeg_files):
    files = jpeg_files[:8]
    seeded = {"uniform": 7, "coin": 7, "crop": 7}
    a, b = _draws(files, 1, **seeded), _draws(files, 2, **seeded)
    for k in (0, 1, 3):  # the seeded uniform, coin flip and crop windows
        assert [batch[k] for batch in a] == [batch[k] for batch in b]
    assert [batch[2] for batch in a] != [batch[2] for batch in b]  # the unseeded uniform follows the pipeline
    plain1, plain2 = _draws(files, 1), _draws(files, 2)
    assert [batch[0] for batch in plain1] != [batch[0] for batch in plain2]
    other = _draws(files, 1, uniform=8)
    assert [batch[0] for batch in other] != [batch[0] for batch in a]  # the seed changes the draws
    twins = _draws(files, 3, uniform=5, second=5)
    assert [batch[0] for batch in twins] == [batch[2] for batch in twins]  # one seed, one stream (as in DALI)
    assert len({batch[0] for batch in a}) == 3  # still a new draw for every batch (sample)


def test_a_reader_seed_fixes_its_shuffle_whatever_the_pipeline_seed(jpeg_files):
    def labels(pipeline_seed, reader_seed):
        @rp.pipeline_def(batch_size=4, num_threads=1, seed=pipeline_seed)
        def graph():
            _, lab = fn.readers.file(files=jpeg_files[:16], random_shuffle=True, initial_fill=16, seed=reader_seed)
            return lab

        return [np.asarray(out).ravel().tolist() for (out,) in _runs(graph(), 4)]

    assert labels(1, 3) == labels(2, 3) != labels(1, 4)
    assert labels(1, -1) != labels(2, -1)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"seed": -2}, r"random.coin_flip: seed must be a non-negative int \(or -1"),
        ({"seed": 1.5}, "random.coin_flip: seed must be"),
        ({"preserve": 1}, "random.coin_flip: preserve must be a bool"),
        ({"bytes_per_sample_hint": [16, -1]}, "random.coin_flip: bytes_per_sample_hint must be a non-negative int"),
    ],
)
def test_common_operator_arguments_are_validated(kwargs, match):
    @rp.pipeline_def(batch_size=2, num_threads=1, seed=1)
    def graph():
        return fn.random.coin_flip(**kwargs)

    with pytest.raises(rp.ArgumentError, match=match):
        graph().build()


def test_preserve_runs_an_operator_no_output_needs(jpeg_files):
    calls = []

    def count(jpeg):
        calls.append(len(jpeg))
        return jpeg

    def graph(preserve):
        jpegs, labels = fn.readers.file(files=jpeg_files[:4], bytes_per_sample_hint=1 << 16)
        fn.python_function(jpegs, function=count, preserve=preserve, bytes_per_sample_hint=[1024])
        return fn.cast(labels, dtype=types.INT64, bytes_per_sample_hint=64)

    for preserve in (False, True):
        calls.clear()
        with rp.pipeline_def(graph, batch_size=2, num_threads=1, seed=1)(preserve) as pipe:
            (labels,) = pipe.run()
            assert np.asarray(labels).ravel().tolist() == [0, 1]
        if preserve:  # every sample of the batch (and of any prefetched one) went through it
            assert len(calls) >= 2 and all(n > 1000 for n in calls)
        else:
            assert calls == []


def test_class_style_operators_take_the_common_arguments(jpeg_files):
    class Pipe(rp.Pipeline):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.reader = ops.FileReader(files=jpeg_files[:4], preserve=True)
            self.coin = ops.CoinFlip(probability=0.5, seed=21, bytes_per_sample_hint=4)

        def define_graph(self):
            self.reader()
            return self.coin()

    runs = [[np.asarray(c).tobytes() for (c,) in _runs(Pipe(batch_size=4, seed=s), 3)] for s in (1, 2)]
    assert runs[0] == runs[1] and len(set(runs[0])) > 1


@pytest.mark.parametrize("consumed", [1, 2, 3])
def test_checkpoint_resumes_at_the_exact_next_batch(jpeg_files, reference, tmp_path, consumed):
    """Batches of 4 from 8 samples: 1 and 3 resume mid-epoch, 2 at the start of the next epoch."""
    pipe = train(jpeg_files[:8], enable_checkpointing=True)
    path = tmp_path / "checkpoint"
    with pipe:
        seen = [[np.asarray(out).tobytes() for out in pipe.run()] for _ in range(consumed)]
        data = pipe.checkpoint(str(path))
    assert seen == reference[:consumed]
    assert path.read_bytes() == data and json.loads(data) == pipe.state_dict()
    for checkpoint in (data, path.read_text()):
        resumed = train(jpeg_files[:8], enable_checkpointing=True, checkpoint=checkpoint)
        assert not resumed.is_restored_from_checkpoint
        assert batches(resumed, 5 - consumed) == reference[consumed:]
        assert resumed.is_restored_from_checkpoint


def test_checkpoint_of_a_random_seed_restores_that_seed(jpeg_files):
    pipe = train(jpeg_files[:8], seed=None, enable_checkpointing=True)
    with pipe:
        pipe.run()
        data = pipe.checkpoint()
        expected = [[np.asarray(out).tobytes() for out in pipe.run()] for _ in range(2)]
    resumed = train(jpeg_files[:8], seed=None, enable_checkpointing=True, checkpoint=data)
    assert resumed.seed == pipe.seed and batches(resumed, 2) == expected


def test_checkpoint_needs_enable_checkpointing_and_the_same_pipeline(jpeg_files):
    pipe = train(jpeg_files[:8])
    with pytest.raises(rp.ArgumentError, match="cannot save the checkpoint: enable_checkpointing=True"):
        pipe.checkpoint()
    with train(jpeg_files[:8], enable_checkpointing=True) as pipe:
        pipe.run()
        data = pipe.checkpoint()
    other = train(jpeg_files[:8], batch_size=2, enable_checkpointing=True, checkpoint=data)
    with pytest.raises(rp.ArgumentError, match=r"saved for another order: batch_size=4 \(here 2\)"):
        other.build()
    with pytest.raises(rp.ArgumentError, match="batch_size=4"):  # still not built: never runs from the start
        other.run()


def test_dalis_split_run_api_gives_the_batches_of_run(jpeg_files, reference):
    pipe = train(jpeg_files[:8], prefetch_queue_depth={"cpu_size": 3, "gpu_size": 2})
    with pytest.raises(rp.PipelineDefinitionError, match="no run is scheduled; call schedule_run"):
        pipe.outputs()
    assert (pipe.max_batch_size, pipe.num_outputs, pipe.cpu_queue_size, pipe.gpu_queue_size) == (4, 4, 3, 2)
    got = []
    with pipe:
        for _ in range(2):
            pipe.schedule_run()
        got.append(pipe.outputs())
        got.append(pipe.share_outputs())
        pipe.release_outputs()
        pipe.schedule_run()
        got.append(pipe.share_outputs())
        got += [pipe.run(), pipe.run()]
        assert [[np.asarray(out).tobytes() for out in batch] for batch in got] == reference
        pipe.schedule_run()
        pipe.reset()
        with pytest.raises(rp.PipelineDefinitionError, match="no run is scheduled"):
            pipe.outputs()


def test_the_split_run_api_matches_dalis():
    dali = pytest.importorskip("nvidia.dali")

    def counting(module):
        @module.pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=1)
        def graph():
            return module.fn.random.uniform(range=[0.0, 1.0]), module.fn.random.coin_flip()

        pipe = graph()
        pipe.build()
        pipe.schedule_run()
        pipe.schedule_run()
        shapes = [[o.as_array().shape for o in pipe.share_outputs()]]
        pipe.release_outputs()
        shapes.append([o.as_array().shape for o in pipe.outputs()])
        return shapes, pipe.max_batch_size, pipe.num_outputs

    assert counting(rp) == counting(dali)


def _empty_states(module, depth):
    """``empty()`` after build, two ``run()`` calls, and through scheduled runs on a second pipeline."""

    @module.pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=1, prefetch_queue_depth=depth)
    def graph():
        return module.fn.random.uniform(shape=[2])

    pipe = graph()
    pipe.build()
    states = [pipe.empty()]
    for _ in range(2):
        pipe.run()
        states.append(pipe.empty())
    pipe = graph()
    pipe.build()
    pipe.schedule_run()
    states.append(pipe.empty())
    pipe.outputs()
    states.append(pipe.empty())
    pipe.schedule_run()
    pipe.schedule_run()
    states.append(pipe.empty())
    for _ in range(2):
        pipe.outputs()
        states.append(pipe.empty())
    return states


@pytest.mark.parametrize("depth", [1, 2])
def test_empty_says_whether_runs_wait_as_dalis(depth):
    expected = {
        1: [True, True, True, False, True, False, False, True],
        2: [True, False, False, False, False, False, False, False],
    }[depth]
    assert _empty_states(rp, depth) == expected
    dali = _dali_or_none()
    if dali is not None:
        assert _empty_states(dali, depth) == expected


def test_empty_after_reset_lets_an_iterator_schedule_the_next_epoch(jpeg_files, reference):
    """DALI's iterators reset each pipeline and schedule a run when ``empty()`` says none waits."""
    pipe = train(jpeg_files[:8], prefetch_queue_depth=2)
    with pipe:
        pipe.run()
        assert not pipe.empty()
        pipe.reset(epoch=0)
        assert pipe.empty()
        pipe.schedule_run()  # the first since the reset: a full prefetch queue, two batches
        got = [[np.asarray(out).tobytes() for out in pipe.outputs()]]
        assert not pipe.empty()
        got.append([np.asarray(out).tobytes() for out in pipe.outputs()])
        assert pipe.empty()
        assert got == reference[:2]


def _dali_or_none():
    try:
        import nvidia.dali as dali
    except ImportError:
        return None
    return dali


def _feed_counts(module, depth):
    """``input_feed_count`` before and after feeds and runs."""

    @module.pipeline_def(batch_size=2, num_threads=1, device_id=None, prefetch_queue_depth=depth)
    def fed():
        return module.fn.external_source(name="x")

    pipe = fed()
    pipe.build()
    got = [pipe.input_feed_count("x")]
    for _ in range(depth + 1):
        pipe.feed_input("x", [np.ones(2, np.float32)] * 2)
        got.append(pipe.input_feed_count("x"))
    pipe.run()
    got.append(pipe.input_feed_count("x"))
    return got


@pytest.mark.parametrize("depth", [1, 3])
def test_input_feed_count_is_the_prefetch_depth_as_dalis(depth):
    assert _feed_counts(rp, depth) == [depth] * (depth + 3)
    dali = _dali_or_none()
    if dali is not None:
        assert _feed_counts(dali, depth) == [depth] * (depth + 3)
    with pytest.raises(rp.ArgumentError, match="input_feed_count: the pipeline has no external source 'z'"):
        train(["a.jpg"]).input_feed_count("z")


def test_save_graph_to_dot_file_draws_the_built_graph(tmp_path, jpeg_files):
    pipe = train(jpeg_files[:8])
    plain, full = tmp_path / "plain.dot", tmp_path / "full.dot"
    pipe.save_graph_to_dot_file(plain)
    text = plain.read_text()
    assert text.startswith("digraph graphname {") and text.rstrip().endswith("}")
    assert '"Reader" -> "decoders.image_random_crop_1";' in text
    assert '"decoders.image_random_crop_1" -> "resize_2";' in text
    with pytest.warns(DeprecationWarning, match="show_ids"):
        pipe.save_graph_to_dot_file(str(full), show_tensors=True, show_ids=True, use_colors=True)
    text = full.read_text()
    assert '"Reader"[color="blue"];' in text
    assert '"Reader[0]_cpu"[shape=box];' in text
    assert '"Reader" -> "Reader[0]_cpu"[label=0];' in text
    assert '"Reader[0]_cpu" -> "decoders.image_random_crop_1"[label="0"];' in text
    assert '"Reader[1]_cpu"[shape=box];' in text  # the labels: a pipeline output consumed by no operator
    graphviz = shutil.which("dot")
    if graphviz is not None:  # the text is valid DOT where Graphviz is installed
        subprocess.run([graphviz, "-Tsvg", "-o", os.devnull, str(full)], check=True)


def test_old_iterators_prefetch_then_take_shared_outputs(jpeg_files, reference):
    """DALI's SSD example iterator calls ``pipe._prefetch()`` before every ``share_outputs()``."""
    pipe = train(jpeg_files[:8], prefetch_queue_depth=2)
    got = []
    with pipe:
        for _ in range(3):
            pipe._prefetch()
            got.append(pipe.share_outputs())
            pipe.release_outputs()
        assert [[np.asarray(out).tobytes() for out in batch] for batch in got] == reference[:3]


def test_run_feeds_named_inputs():
    """``pipe.run(name=batch)`` feeds the external source of that name, as DALI's."""

    @rp.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def flipped():
        return rp.fn.flip(rp.fn.external_source(name="images"), horizontal=1)

    with flipped() as pipe:
        for k in range(3):
            batch = np.arange(24, dtype=np.uint8).reshape(2, 3, 4, 1) + k
            (out,) = pipe.run(images=batch)
            np.testing.assert_array_equal(np.asarray(out), batch[:, :, ::-1])
        with pytest.raises(rp.ArgumentError, match="nowhere"):
            pipe.run(nowhere=batch)


def _sinked(files, sink):
    """A pipeline whose output is a random draw, beside a reader no output needs, kept by ``add_sink``."""
    pipe = rp.Pipeline(batch_size=2, num_threads=1, device_id=None, seed=3)
    with pipe:
        jpegs, _ = fn.readers.file(files=files, name="Kept")
        if sink:
            pipe.add_sink(jpegs)
        pipe.set_outputs(fn.random.uniform(range=[0.0, 1.0]))
    return pipe


def test_add_sink_keeps_an_operator_no_output_needs(jpeg_files):
    """The reader is kept (the pipeline has it), in a ``with`` block, in a ``pipeline_def``
    (``Pipeline.current().add_sink``) and once deserialized."""
    with _sinked(jpeg_files[:3], sink=False) as pipe:
        pipe.run()
        with pytest.raises(rp.PipelineDefinitionError, match="no reader"):
            pipe.reader_meta()

    @rp.pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=3)
    def defined():
        jpegs, _ = fn.readers.file(files=jpeg_files[:3], name="Kept")
        rp.Pipeline.current().add_sink(jpegs)
        return fn.random.uniform(range=[0.0, 1.0])

    sinked = _sinked(jpeg_files[:3], sink=True)
    for pipe in (sinked, defined(), rp.Pipeline.deserialize(sinked.serialize())):
        with pipe:
            assert pipe.reader_meta("Kept")["epoch_size"] == 3
            assert [np.asarray(pipe.run()[0]).shape for _ in range(3)] == [(2,)] * 3
    with pytest.raises(TypeError, match="must be an operator's output"):
        rp.Pipeline(batch_size=1, num_threads=1).add_sink(np.zeros(2))


def test_dalis_executor_queries_on_the_host(jpeg_files):
    """``executor_statistics`` is empty as DALI 2.4's default executor gives it, ``output_stream``
    is None without a GPU stage, and ``enable_api_check`` takes a bool."""
    with train(jpeg_files[:8], enable_memory_stats=True) as pipe:
        pipe.run()
        assert pipe.executor_statistics() == {}
        assert pipe.output_stream() is None
        assert pipe.external_source_shm_statistics() == {"capacities": [], "per_sample_capacities": []}
        pipe.enable_api_check(False)
        with pytest.raises(rp.ArgumentError, match="enable must be a bool"):
            pipe.enable_api_check("no")


def _ten_floats(info):
    return np.full(10, info.idx_in_epoch, np.float32)


def test_external_source_shm_statistics_give_the_workers_largest_results():
    """Two workers each compute half of a batch of 4 samples of 40 bytes: 80 bytes per result."""

    @rp.pipeline_def(batch_size=4, num_threads=1, device_id=None, py_num_workers=2, py_start_method="fork")
    def parallel():
        return fn.external_source(source=_ten_floats, batch=False, parallel=True)

    with parallel() as pipe:
        (out,) = pipe.run()
        assert np.asarray(out)[:, 0].tolist() == [0, 1, 2, 3]
        assert pipe.external_source_shm_statistics() == {"capacities": [80, 80], "per_sample_capacities": [40, 40]}
