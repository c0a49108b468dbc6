"""DALI's graph-context style: ``with pipe:`` records operators (fn.* and ops objects) into a
pipeline without a graph, ``pipe.set_outputs(...)`` names the outputs; the same script gives
DALI's batches, and the same graph as a ``pipeline_def``."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, ops, types


def script(pipeline_cls, fn, ops, types, files):
    """A DALI script in the graph-context style, run for three batches: each batch's outputs as arrays."""
    pipe = pipeline_cls(batch_size=3, num_threads=1, device_id=None, seed=3)
    as_int64 = ops.Cast(dtype=types.INT64)  # an ops object made before the block, called inside
    with pipe:
        jpegs, labels = fn.readers.file(files=files, labels=list(range(len(files))), name="Reader")
        shapes = fn.shapes(fn.decoders.image(jpegs))
        pipe.set_outputs(as_int64(labels) * 2 + 1, shapes, fn.cast(labels, dtype=types.FLOAT) / 2)
    pipe.build()
    return [[np.asarray(out.as_array()) for out in pipe.run()] for _ in range(3)]


def test_the_same_script_gives_dalis_batches(jpeg_files):
    dali = pytest.importorskip("nvidia.dali")
    from nvidia.dali import fn as dali_fn
    from nvidia.dali import ops as dali_ops
    from nvidia.dali import types as dali_types

    theirs = script(dali.Pipeline, dali_fn, dali_ops, dali_types, jpeg_files[:6])
    mine = script(rp.Pipeline, fn, ops, types, jpeg_files[:6])
    for their_batch, my_batch in zip(theirs, mine, strict=True):
        for their, my in zip(their_batch, my_batch, strict=True):
            assert my.dtype == their.dtype
            np.testing.assert_array_equal(my, their)


def augment(jpegs):
    """A part of a graph shared by a pipeline_def and a with block (random: same places, same draws)."""
    images = fn.resize(fn.decoders.image(jpegs), resize_x=16, resize_y=16)
    return fn.flip(images, horizontal=fn.random.coin_flip()), fn.random.uniform(range=[0, 1])


def test_a_recorded_graph_runs_as_the_same_pipeline_def(jpeg_files):
    @rp.pipeline_def(batch_size=4, num_threads=1, seed=11)
    def defined():
        jpegs, labels = fn.readers.file(files=jpeg_files, random_shuffle=True)
        return (*augment(jpegs), labels)

    pipe = rp.Pipeline(batch_size=4, num_threads=1, seed=11)
    with pipe:
        jpegs, labels = fn.readers.file(files=jpeg_files, random_shuffle=True)
        images, draws = augment(jpegs)
    pipe.set_outputs(images, draws, labels)  # after the block, as DALI allows
    with defined() as reference:
        for _ in range(3):
            for mine, theirs in zip(pipe.run(), reference.run(), strict=True):
                np.testing.assert_array_equal(mine.as_array(), theirs.as_array())
    pipe.close()


def test_pipeline_def_functions_inside_a_block(jpeg_files):
    """As in DALI: a pipeline_def factory called inside the block makes a pipeline of its own (nothing
    is recorded into the block's), and its undecorated function (``__wrapped__``) records into it."""

    @rp.pipeline_def(batch_size=2, num_threads=1, seed=4)
    def labelled():
        _, labels = fn.readers.file(files=jpeg_files[:4], labels=[10, 11, 12, 13])
        return labels * 3

    pipe = rp.Pipeline(batch_size=2, num_threads=1, seed=4)
    with pipe:
        other = labelled()
        assert rp.Pipeline.current() is pipe
        pipe.set_outputs(labelled.__wrapped__())
    with other:
        assert pipe.run()[0].as_array().tolist() == other.run()[0].as_array().tolist() == [[30], [33]]
    pipe.close()


def test_the_block_makes_the_pipeline_current_and_records_only_inside():
    pipe = rp.Pipeline(batch_size=2)
    assert rp.Pipeline.current() is None
    with pipe as entered:
        assert entered is pipe and rp.Pipeline.current() is pipe
        out = fn.constant(idata=[1, 2], dtype=types.INT32)
    assert rp.Pipeline.current() is None
    with pytest.raises(rp.PipelineDefinitionError, match="outside a pipeline definition"):
        fn.constant(idata=[1])
    pipe.set_outputs(out)
    assert [s.tolist() for s in pipe.run()[0]] == [[1, 2], [1, 2]]
    with pipe:  # a defined graph: the block only closes the pipeline at its end
        pipe.run()
    assert not pipe.engine.running


def test_nested_blocks_record_into_the_innermost_pipeline():
    outer, inner = rp.Pipeline(batch_size=1), rp.Pipeline(batch_size=1)
    with outer:
        a = fn.constant(idata=[1], dtype=types.INT32)
        with inner:
            assert rp.Pipeline.current() is inner
            b = fn.constant(idata=[2], dtype=types.INT32)
        c = a + 10
    outer.set_outputs(a, c)
    inner.set_outputs(b)
    assert [out.as_array().tolist() for out in outer.run()] == [[[1]], [[11]]]
    assert inner.run()[0].as_array().tolist() == [[2]]
    with pytest.raises(rp.PipelineDefinitionError, match="output 0 .* was not made .* of this pipeline"):
        rp.Pipeline(batch_size=1).set_outputs(a)


def test_push_current_and_pop_current_record_as_the_block_does():
    pipe = rp.Pipeline(batch_size=1)
    assert rp.Pipeline.push_current(pipe) is None
    out = fn.constant(idata=[5], dtype=types.INT32)
    rp.Pipeline.pop_current()
    assert rp.Pipeline.current() is None
    pipe.set_outputs(out)
    assert pipe.run()[0].as_array().tolist() == [[5]]
    pipe.close()


def test_set_outputs_errors():
    @rp.pipeline_def(batch_size=1)
    def defined():
        return fn.constant(idata=[1], dtype=types.INT32)

    with pytest.raises(rp.PipelineDefinitionError, match="defines its graph with define_graph"):
        defined().set_outputs()
    pipe = rp.Pipeline(batch_size=1)
    with pytest.raises(rp.PipelineDefinitionError, match="call operators inside `with pipe:`"):
        pipe.build()
    other = rp.Pipeline(batch_size=1)
    with other:
        foreign = fn.constant(idata=[2], dtype=types.INT32)
    with pipe:
        out = fn.constant(idata=[1], dtype=types.INT32)
        with pytest.raises(rp.PipelineDefinitionError, match="output 1 .* not made by an operator called inside"):
            pipe.set_outputs(out, foreign)
        pipe.set_outputs(out)
    pipe.build()
    with pytest.raises(rp.PipelineDefinitionError, match="already built"):
        pipe.set_outputs(out)


def test_argument_errors_come_at_the_call():
    with rp.Pipeline(batch_size=1), pytest.raises(rp.ArgumentError, match="resize"):
        fn.resize(fn.constant(idata=[1], dtype=types.UINT8), interp_type="nope")


def test_a_dropped_pipeline_is_freed_with_its_recorded_graph():
    pipe = rp.Pipeline(batch_size=2)
    with pipe:
        pipe.set_outputs(fn.constant(idata=[3], dtype=types.INT32))
    pipe.run()
    ref = weakref.ref(pipe)
    del pipe
    gc.collect()
    assert ref() is None


def test_while_a_graph_is_defined_the_current_pipeline_gives_its_settings(jpeg_files):
    """DALI's definitions read ``Pipeline.current()`` (its ``device_id`` as their shard, its batch
    size): raypipe gives the pipeline's settings there, for ``pipeline_def`` functions and
    ``define_graph`` alike."""
    seen = []

    @rp.pipeline_def(batch_size=2, num_threads=1, seed=5)
    def sharded():
        current = rp.Pipeline.current()
        seen.append((current.device_id, current.batch_size, current.max_batch_size, current.num_threads))
        jpegs, labels = fn.readers.file(files=jpeg_files[:4], shard_id=current.device_id or 0, num_shards=2)
        return labels

    class Subclassed(rp.Pipeline):
        def define_graph(self):
            seen.append(("subclass", rp.Pipeline.current().batch_size))
            return fn.constant(idata=[1], dtype=types.INT32)

    with sharded(device_id=1) as pipe:
        labels = pipe.run()[0].as_array().ravel().tolist()
    assert seen[0] == (1, 2, 2, 1) and labels == [2, 3]  # the second shard of four files
    with Subclassed(batch_size=3) as pipe:
        pipe.run()
    assert ("subclass", 3) in seen
    assert rp.Pipeline.current() is None
    settings = sharded(device_id=1).settings()
    with pytest.raises(AttributeError):
        settings.device_id = 0  # a snapshot, not the pipeline


def test_calls_that_place_operators_themselves_replay_as_pipeline_def_places_them(jpeg_files):
    """A decoder's ``dtype`` places its conversion and a constant input its constant: a ``with`` block
    records only the call, so the replayed graph is the one a ``pipeline_def`` function makes (the
    same operators in the same places, hence the same batches)."""

    def graph():
        jpegs, labels = fn.readers.file(files=jpeg_files[:4], random_shuffle=True, initial_fill=4)
        images = fn.decoders.image_random_crop(jpegs, dtype=types.FLOAT)
        return fn.resize(images, resize_x=16, resize_y=12) * 2, labels + 1, fn.random.coin_flip()

    pipe = rp.Pipeline(batch_size=4, num_threads=1, device_id=None, seed=5)
    with pipe:
        pipe.set_outputs(*graph())
    assert [c.op_name for c in pipe._recorded.calls] == [
        "readers.file",
        "decoders.image_random_crop",
        "resize",
        "_arithmetic",
        "_arithmetic",
        "random.coin_flip",
    ]
    by_def = rp.pipeline_def(batch_size=4, num_threads=1, device_id=None, seed=5)(graph)()
    with pipe, by_def:
        for _ in range(2):
            for ours, theirs in zip(pipe.run(), by_def.run(), strict=True):
                np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
