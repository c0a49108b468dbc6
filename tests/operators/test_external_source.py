"""fn.external_source in every form DALI has, in one process: batch callables (of nothing, of the
iteration, of BatchInfo), iterables and generator functions with each ``cycle``, per-sample callables
of SampleInfo, several outputs, feed_input and iter_setup; epochs end with StopIteration and
``reset()`` starts the next, as in DALI. Where DALI 2.4 is installed the same sources run there too
and every epoch's batches (values, shapes, dtypes, layouts) and ends must match."""

from __future__ import annotations

import gc
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, ops, types
from raypipe.errors import ArgumentError, PipelineDefinitionError, SampleError
from raypipe.plugin.numpy import DALIGenericIterator, LastBatchPolicy
from raypipe.sample_info import BatchInfo, SampleInfo

BATCH = 3

Batch = list[tuple[list[np.ndarray], str]]


def _batch(outputs) -> Batch:
    outputs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    got = []
    for out in outputs:
        host = out.as_cpu() if hasattr(out, "as_cpu") else out
        got.append(([np.array(host.at(i)) for i in range(len(host))], host.layout()))
    return got


def epochs(pipe, count: int, limit: int = 6) -> list[list[Batch]]:
    """``count`` epochs of ``pipe`` (raypipe's or DALI's), each its batches until StopIteration
    (at most ``limit``: a cycled source never ends), with ``reset()`` between them."""
    result = []
    for _ in range(count):
        batches = []
        try:
            while len(batches) < limit:
                batches.append(_batch(pipe.run()))
        except StopIteration:
            pass
        result.append(batches)
        pipe.reset()
    return result


def ours(define: Callable, batch_size: int = BATCH, **kwargs):
    return rp.pipeline_def(define, batch_size=batch_size, num_threads=2, device_id=None, seed=0)(**kwargs)


def dalis(define: Callable, batch_size: int = BATCH, **kwargs):
    dali = pytest.importorskip("nvidia.dali")
    pipe = dali.pipeline_def(define, batch_size=batch_size, num_threads=1, device_id=None, seed=0)(**kwargs)
    pipe.build()
    return pipe


def assert_same(got: list[list[Batch]], want: list[list[Batch]]) -> None:
    assert [len(e) for e in got] == [len(e) for e in want]
    for epoch_got, epoch_want in zip(got, want):
        for batch_got, batch_want in zip(epoch_got, epoch_want):
            assert len(batch_got) == len(batch_want)
            for (samples, layout), (expected, expected_layout) in zip(batch_got, batch_want):
                assert layout == expected_layout
                assert len(samples) == len(expected)
                for s, e in zip(samples, expected):
                    assert s.dtype == e.dtype and s.shape == e.shape
                    np.testing.assert_array_equal(s, e)


def image(value: int, shape=(2, 3, 1)) -> np.ndarray:
    return np.full(shape, value, np.uint8)


class Batches:
    """An iterable of ``n`` batches (each iteration starts over), as DALI's examples write them."""

    def __init__(self, n: int):
        self.n = n

    def __iter__(self):
        self.i = 0
        return self

    def __next__(self):
        if self.i >= self.n:
            raise StopIteration
        self.i += 1
        return [image(10 * self.i + j) for j in range(BATCH)], np.arange(BATCH, dtype=np.int32) + self.i


def generate():
    for i in range(2):
        yield [image(i + j, (1, j + 1, 1)) for j in range(BATCH)]


def by_iteration(i: int):
    if i >= 2:
        raise StopIteration
    return np.stack([image(i * 5 + j) for j in range(BATCH)])


def by_batch_info(info: types.BatchInfo):
    if info.iteration >= 2:
        raise StopIteration
    return [np.array([info.iteration, info.epoch_idx], np.int64)] * BATCH


def by_sample(info: types.SampleInfo):
    if info.idx_in_epoch >= 7:  # in the middle of the third batch: DALI drops that batch
        raise StopIteration
    return np.array([info.idx_in_epoch, info.idx_in_batch, info.iteration, info.epoch_idx], np.int32)


def without_args():
    return [image(7)] * BATCH


# Each form: (name, a definition taking DALI's or raypipe's fn and types, epochs to read).
FORMS: dict[str, tuple[Callable, int]] = {
    "callable, no argument": (lambda fn, types: fn.external_source(without_args, layout="HWC"), 1),
    "callable of the iteration, one array": (lambda fn, types: fn.external_source(by_iteration), 2),
    "callable of BatchInfo": (lambda fn, types: fn.external_source(by_batch_info, batch_info=True), 3),
    "callable of SampleInfo": (lambda fn, types: fn.external_source(by_sample, batch=False), 3),
    "iterable, two outputs": (lambda fn, types: tuple(fn.external_source(Batches(2), num_outputs=2)), 3),
    "iterable, cycle": (lambda fn, types: tuple(fn.external_source(Batches(2), num_outputs=2, cycle=True)), 1),
    "iterable, cycle quiet": (lambda fn, types: tuple(fn.external_source(Batches(2), num_outputs=2, cycle="quiet")), 1),
    "iterable, cycle raise": (lambda fn, types: tuple(fn.external_source(Batches(2), num_outputs=2, cycle="raise")), 3),
    "generator function": (lambda fn, types: fn.external_source(source=generate, layout="HWC"), 2),
    "generator function, cycle raise": (
        lambda fn, types: fn.external_source(generate, cycle="raise", dtype=types.UINT8),
        3,
    ),
    "generator": (lambda fn, types: fn.external_source(generate()), 2),
}


def expected(name: str) -> list[list[Batch]]:
    """What DALI's documentation says each form gives, written out (CI has no DALI)."""
    data = {
        "callable of BatchInfo": [[[([np.array([i, e])] * BATCH, "")] for i in range(2)] for e in range(3)],
        "callable of SampleInfo": [
            [[([np.array([3 * i + j, j, i, e], np.int32) for j in range(BATCH)], "")] for i in range(2)]
            for e in range(3)
        ],
    }
    return data[name]


@pytest.mark.parametrize("name", sorted(FORMS))
def test_every_form_runs_as_in_dali(name):
    build, count = FORMS[name]
    got = epochs(ours(lambda: build(fn, types)), count)
    assert got[0], "the first epoch has batches"
    dali_fn = pytest.importorskip("nvidia.dali.fn")
    dali_types = pytest.importorskip("nvidia.dali.types")
    assert_same(got, epochs(dalis(lambda: build(dali_fn, dali_types)), count))


@pytest.mark.parametrize("name", ["callable of BatchInfo", "callable of SampleInfo"])
def test_callbacks_get_dalis_indices(name):
    build, count = FORMS[name]
    assert_same(epochs(ours(lambda: build(fn, types)), count), expected(name))


def test_iterable_epochs_and_cycles():
    """Without cycle an iterable is read once (its second epoch is empty, as in DALI); "raise"
    rewinds it after each end; True never ends."""
    plain = epochs(ours(lambda: fn.external_source(Batches(2), num_outputs=2)), 2)
    assert [len(e) for e in plain] == [2, 0]
    raising = epochs(ours(lambda: fn.external_source(Batches(2), num_outputs=2, cycle="raise")), 3)
    assert [len(e) for e in raising] == [2, 2, 2]
    assert_same(raising[1:2], raising[2:3])
    endless = epochs(ours(lambda: fn.external_source(Batches(2), num_outputs=2, cycle=True)), 1, limit=5)
    assert len(endless[0]) == 5
    assert_same([endless[0][2:4]], [endless[0][0:2]])


class Samples(Batches):
    """An iterator of ``n`` single samples (``[1]``, ``[2]``...), as a per-sample (``batch=False``) source."""

    def __next__(self):
        super().__next__()  # counts, and ends after n
        return np.array([self.i], np.int32)


def sample_generator():
    yield from (np.array([10 + i], np.int32) for i in range(4))


def per_sample_sources(fn, cycle: str):
    return (
        fn.external_source(source=Samples(5), batch=False, cycle=cycle),
        fn.external_source(source=sample_generator, batch=False, cycle=cycle),
    )


@pytest.mark.parametrize("cycle", ["no", "quiet", "raise"])
def test_per_sample_iterables_and_generators_give_one_sample_per_next(cycle):
    """``batch=False`` with an iterable or generator function: DALI takes each sample from one
    ``next()``; the source's end ends the epoch (or starts it over, as ``cycle`` says)."""
    got = epochs(ours(lambda: per_sample_sources(fn, cycle), batch_size=3), 2)
    values = [[[s.ravel().tolist() for s in samples] for samples, _ in batch] for batch in got[0]]
    assert values[0] == [[[1], [2], [3]], [[10], [11], [12]]]
    if cycle == "quiet":
        assert values[1] == [[[4], [5], [1]], [[13], [10], [11]]]
    else:
        assert len(got[0]) == 1


@pytest.mark.parametrize("cycle", ["no", "quiet", "raise"])
def test_per_sample_iterables_and_generators_against_dali(cycle):
    want = epochs(dalis(lambda: per_sample_sources(pytest.importorskip("nvidia.dali.fn"), cycle), batch_size=3), 2)
    assert_same(epochs(ours(lambda: per_sample_sources(fn, cycle), batch_size=3), 2), want)


def test_generator_and_generator_function():
    """A generator object is read once; a generator function with cycle="raise" is called again
    for each epoch. Samples of different shapes stay as they are."""
    once = epochs(ours(lambda: fn.external_source(generate())), 2)
    assert [len(e) for e in once] == [2, 0]
    assert [s.shape for s in once[0][1][0][0]] == [(1, 1, 1), (1, 2, 1), (1, 3, 1)]
    again = epochs(ours(lambda: fn.external_source(generate, cycle="raise")), 2)
    assert [len(e) for e in again] == [2, 2]
    with pytest.raises(ArgumentError, match="cannot cycle through a generator"):
        ours(lambda: fn.external_source(generate(), cycle=True)).build()


def test_values_flow_into_operators_and_num_outputs():
    def define():
        images, labels = fn.external_source(Batches(1), num_outputs=2, layout=["HWC", ""])
        return fn.cast(images, dtype=types.FLOAT) * 2, labels

    with ours(define) as pipe:
        images, labels = pipe.run()
        assert images.layout() == "HWC" and labels.layout() == ""
        np.testing.assert_array_equal(images.as_tensor()[:, 0, 0, 0], [20.0, 22.0, 24.0])
        np.testing.assert_array_equal(labels.as_tensor(), [1, 2, 3])
        with pytest.raises(StopIteration):
            pipe.run()


def test_variable_batch_size():
    sizes = iter([3, 1, 2])

    def source():
        n = next(sizes)
        return [np.array([n])] * n

    with ours(lambda: fn.external_source(source)) as pipe:
        assert [len(pipe.run()[0]) for _ in range(3)] == [3, 1, 2]


def test_declared_dtype_ndim_layout_are_checked():
    with pytest.raises(ArgumentError, match="dtype declares"):
        with ours(lambda: fn.external_source(without_args, dtype=types.FLOAT)) as pipe:
            pipe.run()
    with pytest.raises(ArgumentError, match="ndim declares"):
        with ours(lambda: fn.external_source(without_args, ndim=2)) as pipe:
            pipe.run()
    with pytest.raises(ArgumentError, match="layout 'HW'"):
        ours(lambda: fn.external_source(without_args, layout="HW", ndim=3)).build()
    with ours(lambda: fn.external_source(without_args, dtype=types.UINT8, ndim=3, layout="HWC")) as pipe:
        assert pipe.run()[0].layout() == "HWC"


def test_a_batch_of_samples_of_other_dtypes_or_ranks_is_refused():
    """As in DALI, a batch is one tensor list: its samples share a dtype and a number of dimensions."""
    for other, described in ((np.zeros(2, np.int32), "int32 of ndim 1"), (np.zeros((1, 2), np.float32), "ndim 2")):
        with ours(lambda: fn.external_source(name="x"), batch_size=2) as pipe:
            pipe.feed_input("x", [np.zeros(2, np.float32), other])
            refused = f"'x' gave .* sample 0 is float32 of ndim 1, sample 1 is .*{described}"
            with pytest.raises(SampleError, match=refused):
                pipe.run()
    with ours(lambda: fn.external_source(name="x"), batch_size=2) as pipe:
        pipe.feed_input("x", [np.zeros(2, np.float32), np.zeros(5, np.float32)])
        assert [a.shape for a in _batch(pipe.run())[0][0]] == [(2,), (5,)], "shapes may differ"


class StopsAt:
    """A per-sample source of SampleInfo giving its four indices, ending at iteration ``last``."""

    def __init__(self, last: int):
        self.last = last

    def __call__(self, info: types.SampleInfo) -> np.ndarray:
        if info.iteration >= self.last:
            raise StopIteration
        return np.array([info.epoch_idx, info.iteration, info.idx_in_epoch, info.idx_in_batch], np.int32)


def beside_reader(files: list[str], fn_module, pad: bool = False):
    """A file reader's labels beside a per-sample source that ends every 4 iterations and a batch
    source counting its calls (DALI's or raypipe's ``fn``)."""
    calls = iter(range(1000))

    def counted():
        n = next(calls)
        return [np.array([n, k], np.int32) for k in range(BATCH)]

    def define():
        _, labels = fn_module.readers.file(files=files, labels=list(range(len(files))), pad_last_batch=pad, name="R")
        return labels, fn_module.external_source(StopsAt(4), batch=False), fn_module.external_source(counted)

    return define


def runs(pipe, count: int, reader_batches: int) -> list:
    """``count`` calls of ``run()``: per call the reader's labels (the first ``reader_batches`` only: DALI's
    reader goes on into the next epoch where raypipe's starts it over) and the sources' outputs, or
    "stop" for a StopIteration, after which the pipeline is reset."""
    seen = []
    for r in range(count):
        try:
            labels, info, counted = (_batch(o)[0][0] for o in pipe.run())
        except StopIteration:
            seen.append("stop")
            pipe.reset()
            continue
        reader = [int(v[0]) for v in labels] if r < reader_batches else None
        seen.append((reader, [v.tolist() for v in info], [v.tolist() for v in counted]))
    return seen


@pytest.mark.parametrize("pad", [False, True])
def test_sources_beside_a_reader_take_one_batch_for_each_of_its_batches_as_in_dali(jpeg_files, pad):
    """Beside a reader each batch it reads takes the sources' next batch; the reader decides the
    samples, a source's StopIteration ends run() and reset() starts the sources' next epoch while the
    reader goes on, as in DALI 2.4 (compared where it is installed)."""
    files = jpeg_files[:7]
    with ours(beside_reader(files, fn, pad)) as pipe:
        got = runs(pipe, 11, reader_batches=3)
    first = got[0]
    assert first[0] == [0, 1, 2] and first[1] == [[0, 0, 0, 0], [0, 0, 1, 1], [0, 0, 2, 2]]
    assert got[4] == "stop" and got[9] == "stop"
    assert got[5][1][0] == [1, 0, 0, 0], "the sources' epoch 1 starts after the reset"
    counted = [g[2][0][0] for g in got if g != "stop"]
    assert counted == [0, 1, 2, 3, 5, 6, 7, 8, 10], "once per batch run, and at each end (every source is asked)"
    dali_fn = pytest.importorskip("nvidia.dali.fn")
    assert got == runs(dalis(beside_reader(files, dali_fn, pad)), 11, reader_batches=3)


def test_a_reader_epoch_goes_on_beside_a_cycled_generator_function(jpeg_files):
    """The Jasper form: masks from a generator function with ``cycle=True`` beside a reader, read with
    the framework iterator by the reader's epochs: every sample once an epoch, a new batch of the
    source for every step."""
    made = []

    def masks():
        made.append(len(made))
        yield [np.array([len(made)], np.int32)] * BATCH

    def define():
        _, labels = fn.readers.file(files=jpeg_files[:7], labels=list(range(7)), random_shuffle=True, name="R")
        return labels, fn.external_source(masks, cycle=True)

    with ours(define) as pipe:
        loader = DALIGenericIterator(
            pipe, ["label", "mask"], reader_name="R", auto_reset=True, last_batch_policy=LastBatchPolicy.PARTIAL
        )
        epochs_seen = [[(s[0]["label"].ravel().tolist(), s[0]["mask"].ravel().tolist()) for s in loader] for _ in "ab"]
    for steps in epochs_seen:
        assert sorted(v for labels, _ in steps for v in labels) == list(range(7))
    masks_seen = [m[0] for steps in epochs_seen for _, m in steps]
    assert masks_seen == list(range(1, len(masks_seen) + 1)), "one fresh source batch per step, in order"


def test_feed_input_and_gpu_sources_beside_a_reader(jpeg_files):
    def define():
        _, labels = fn.readers.file(files=jpeg_files[:6], labels=list(range(6)), name="R")
        return labels, fn.external_source(name="fed"), fn.external_source(endless, device="gpu")

    def endless(i: int) -> np.ndarray:
        return np.stack([image(i * 5 + j) for j in range(BATCH)])

    with ours(define) as pipe:
        for i in range(4):
            pipe.feed_input("fed", [np.array([10 * i + k]) for k in range(BATCH)])
            labels, fed, gpu = pipe.run()
            assert np.asarray(labels.as_tensor()).ravel().tolist() == [(3 * i + k) % 6 for k in range(BATCH)]
            assert np.asarray(fed.as_tensor()).ravel().tolist() == [10 * i + k for k in range(BATCH)]
            assert gpu.device == "gpu"
            np.testing.assert_array_equal(gpu.as_cpu().as_tensor(), endless(i))


def test_a_source_batch_of_another_size_beside_a_reader_fails_naming_the_reader(jpeg_files):
    def define():
        _, labels = fn.readers.file(files=jpeg_files[:6], name="R")
        return labels, fn.external_source(lambda: [np.zeros(1)] * (BATCH - 1))

    with ours(define) as pipe:
        with pytest.raises(ArgumentError, match="batch of 2 samples beside reader 'R', whose batches have 3"):
            pipe.run()


def test_a_restored_pipeline_with_a_source_beside_its_reader_continues_the_reader(jpeg_files):
    def define():
        _, labels = fn.readers.file(files=jpeg_files[:9], labels=list(range(9)), random_shuffle=True, name="R")
        return labels, fn.external_source(by_iteration)

    with ours(define) as pipe:
        pipe.run()
        state = pipe.state_dict()
        want = np.asarray(pipe.run()[0].as_tensor()).ravel().tolist()
    restored = ours(define)
    restored.load_state_dict(state)
    with restored:
        labels, values = restored.run()
    assert np.asarray(labels.as_tensor()).ravel().tolist() == want
    np.testing.assert_array_equal(values.as_tensor(), by_iteration(0))


def test_argument_rules_as_in_dali():
    with pytest.raises(ArgumentError, match="cycle can only be given"):
        ours(lambda: fn.external_source(without_args, cycle=True)).build()
    with pytest.raises(ArgumentError, match="prefetch_queue_depth is valid only"):
        ours(lambda: fn.external_source(without_args, prefetch_queue_depth=2)).build()
    with pytest.raises(ArgumentError, match="0 or 1 positional"):
        ours(lambda: fn.external_source(lambda a, b: None)).build()
    with pytest.raises(ArgumentError, match="repeat_last"):
        ours(lambda: fn.external_source(without_args, repeat_last=True)).build()
    with pytest.raises(ArgumentError, match="num_outputs=2 the source must return 2"):
        with ours(lambda: fn.external_source(without_args, num_outputs=2)) as pipe:
            pipe.run()


class FedPipeline(rp.Pipeline):
    """DALI's older style: ops.ExternalSource, fed by feed_input in iter_setup."""

    def __init__(self, batches: list[list[np.ndarray]]):
        super().__init__(batch_size=BATCH, num_threads=1, device_id=None, seed=0)
        self.source = ops.ExternalSource()
        self.batches = iter(batches)

    def define_graph(self):
        self.images = self.source(name="images")
        return self.images

    def iter_setup(self):
        self.feed_input(self.images, next(self.batches), layout="HWC")


def test_ops_external_source_takes_its_source_positionally():
    class Positional(rp.Pipeline):
        def __init__(self):
            super().__init__(batch_size=BATCH, num_threads=1, device_id=None, seed=0)
            self.source = ops.ExternalSource(Batches(1), 2, layout=["HWC", ""])

        def define_graph(self):
            return self.source()

    with Positional() as pipe:
        images, labels = pipe.run()
    assert images.layout() == "HWC"
    np.testing.assert_array_equal(labels.as_tensor(), [1, 2, 3])
    with pytest.raises(TypeError, match="takes 0 positional arguments"):
        ops.Flip(1)


def test_feed_input_in_iter_setup():
    batches = [[image(i + j) for j in range(BATCH)] for i in range(3)]
    with FedPipeline(batches) as pipe:
        got = [pipe.run()[0] for _ in range(3)]
        with pytest.raises(StopIteration):  # iter_setup's next() ran out
            pipe.run()
    assert [b.layout() for b in got] == ["HWC"] * 3
    for batch, fed in zip(got, batches):
        np.testing.assert_array_equal(batch.as_tensor(), np.stack(fed))


def test_feed_input_in_iter_setup_as_in_dali():
    dali = pytest.importorskip("nvidia.dali")

    class DaliFed(dali.Pipeline):
        def __init__(self, batches):
            super().__init__(batch_size=BATCH, num_threads=1, device_id=None, seed=0)
            self.source = dali.ops.ExternalSource()
            self.batches = iter(batches)

        def define_graph(self):
            self.images = self.source(name="images")
            return self.images

        def iter_setup(self):
            self.feed_input(self.images, next(self.batches), layout="HWC")

    batches = [[image(i + j, (1, j + 1, 1)) for j in range(BATCH)] for i in range(3)]
    dali_pipe = DaliFed(batches)
    dali_pipe.build()
    assert_same(epochs(FedPipeline(batches), 1), epochs(dali_pipe, 1))


def test_feed_input_by_name_before_run_and_repeat_last():
    def define():
        return fn.external_source(name="x", repeat_last=True), fn.external_source(name="y")

    with ours(define) as pipe:
        pipe.feed_input("x", np.arange(BATCH * 2).reshape(BATCH, 2))
        pipe.feed_input("y", [np.array(i) for i in range(BATCH)])
        x, y = pipe.run()
        np.testing.assert_array_equal(x.as_tensor(), np.arange(BATCH * 2).reshape(BATCH, 2))
        pipe.feed_input("y", [np.array(9)] * BATCH)
        x, y = pipe.run()  # x repeats its last batch
        np.testing.assert_array_equal(x.as_tensor(), np.arange(BATCH * 2).reshape(BATCH, 2))
        np.testing.assert_array_equal(y.as_tensor(), [9] * BATCH)
        with pytest.raises(PipelineDefinitionError, match="no data was fed to external source 'y'"):
            pipe.run()


def test_gpu_source_is_gpu_data():
    with ours(lambda: fn.external_source(by_iteration, device="gpu")) as pipe:
        (out,) = pipe.run()
    assert out.device == "gpu"
    np.testing.assert_array_equal(out.as_cpu().as_tensor(), by_iteration(0))


def test_a_gpu_batch_is_uploaded_at_once_where_samples_agree():
    """The GPU stage's call (run here with numpy as the device's array module)."""
    from raypipe.operators.external_source import ExternalSource
    from raypipe.sample_contexts import SampleContexts

    op = ExternalSource("gpu", 0, source=by_iteration)
    op.hold(0, 0, op.batch_outputs(by_iteration(0)))
    batch = op.run_batch(np, [], {}, SampleContexts(0, 0, np.arange(BATCH), batch=0))
    np.testing.assert_array_equal(batch, by_iteration(0))
    op.hold(1, 0, op.batch_outputs(list(generate())[0]))
    ragged = op.run_batch(np, [], {}, SampleContexts(0, 1, np.arange(BATCH), batch=0))
    assert [s.shape for s in ragged] == [(1, 1, 1), (1, 2, 1), (1, 3, 1)]


def test_framework_iterator_ends_the_epoch_at_stop_iteration():
    """size=-1 without a reader: an epoch is what the source gives until StopIteration; the
    iterator resets the pipeline for the next (the BatchInfo callable sees the new epoch)."""
    with ours(lambda: fn.external_source(by_batch_info, batch_info=True)) as pipe:
        loader = DALIGenericIterator(pipe, ["info"], auto_reset=True)
        seen = [[step[0]["info"][0].tolist() for step in loader] for _ in range(2)]
    assert seen == [[[0, 0], [1, 0]], [[0, 1], [1, 1]]]


def test_the_same_iterator_in_dali():
    dali_torch = pytest.importorskip("nvidia.dali.plugin.pytorch")
    from nvidia.dali import fn as dali_fn

    pipe = dalis(lambda: dali_fn.external_source(by_batch_info, batch_info=True))
    loader = dali_torch.DALIGenericIterator(pipe, ["info"], auto_reset=True)
    seen = [[step[0]["info"][0].tolist() for step in loader] for _ in range(2)]
    assert seen == [[[0, 0], [1, 0]], [[0, 1], [1, 1]]]


def test_sample_info_types_match_dali():
    assert types.SampleInfo(4, 1, 1, 0).idx_in_epoch == 4
    assert types.BatchInfo(2, 1).epoch_idx == 1
    assert rp.types.SampleInfo is SampleInfo and rp.types.BatchInfo is BatchInfo


def _raypipe_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("raypipe")]


def _beside_a_reader(files: list[str]):
    def define():
        jpegs, _ = fn.readers.file(files=files)
        return jpegs, fn.external_source(lambda: [np.zeros(1)] * BATCH)

    return define


@pytest.mark.parametrize("beside_reader", [False, True])
def test_a_dropped_fed_pipeline_is_freed_and_stops_its_threads(jpeg_files, beside_reader):
    """No reference cycle through the feeding: freed at once (the garbage collector off), and the
    dispatch thread waiting for fed batches (or, beside a reader, for the batch to pair with the
    reader's next) ends with it."""
    earlier = set(_raypipe_threads())
    gc.collect()
    gc.disable()
    try:
        define = (
            _beside_a_reader(jpeg_files[:7]) if beside_reader else lambda: fn.external_source(Batches(3), num_outputs=2)
        )
        pipe = ours(define)
        pipe.run()
        ref = weakref.ref(pipe)
        del pipe
        assert ref() is None
    finally:
        gc.enable()
    deadline = time.monotonic() + 10
    while set(_raypipe_threads()) - earlier and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not set(_raypipe_threads()) - earlier


EXIT_WHILE_FED = """
import numpy as np
import raypipe as rp
from raypipe import fn

@rp.pipeline_def(batch_size=2, num_threads=1, device_id=None)
def pipe():
    return fn.external_source(lambda: [np.zeros(1)] * 2)

running = pipe()
running.run()
print("ran")
"""


def test_the_interpreter_exits_with_a_fed_pipeline_running():
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", EXIT_WHILE_FED], cwd=root, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ran", done.stderr
