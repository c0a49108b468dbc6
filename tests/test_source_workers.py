"""external_source(parallel=True): the sources run in ``py_num_workers`` worker processes (started
with ``py_start_method``) and give the batches the same sources give serially; results come back
through shared memory; the workers are gone after ``close()``, after the pipeline is dropped and
after a source's error; DALI's rules for what may run in parallel are checked."""

from __future__ import annotations

import gc
import multiprocessing
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, types
from raypipe.errors import ArgumentError, PipelineDefinitionError, SampleError
from raypipe.source_workers import _read_segment, _write_segment

BATCH = 4
WORKERS = 2


def per_sample(info: types.SampleInfo):
    if info.iteration >= 3:
        raise StopIteration
    return np.full((2, 3), info.idx_in_epoch, np.int32), np.array([info.idx_in_batch, info.epoch_idx], np.int64)


def per_batch(info: types.BatchInfo):
    if info.iteration >= 2:
        raise StopIteration
    return [np.arange(j + 1, dtype=np.float32) + 10 * info.iteration + 100 * info.epoch_idx for j in range(BATCH)]


class Batches:
    """An iterable of two batches (rewound by ``cycle="raise"``)."""

    def __iter__(self):
        self.i = 0
        return self

    def __next__(self):
        if self.i >= 2:
            raise StopIteration
        self.i += 1
        return np.full((BATCH, 2), self.i, np.uint8)


def failing(info: types.SampleInfo):
    if info.iteration == 2:  # the first run() feeds two batches ahead (prefetch_queue_depth=2), as DALI
        raise ValueError("sample source broke")
    return np.zeros(2, np.uint8)


def worker_pid(info: types.SampleInfo):
    return np.array([os.getpid()])


def graph(parallel: bool):
    a, b = fn.external_source(per_sample, num_outputs=2, batch=False, parallel=parallel)
    c = fn.external_source(per_batch, batch=True, batch_info=True, parallel=parallel)
    d = fn.external_source(
        Batches(), batch=True, cycle="raise", parallel=parallel, **({"prefetch_queue_depth": 3} if parallel else {})
    )
    return a, b, c, d


def _pipe(define, start_method: str = "fork", **kwargs) -> rp.Pipeline:
    return rp.pipeline_def(
        define,
        batch_size=BATCH,
        num_threads=1,
        device_id=None,
        seed=0,
        py_num_workers=WORKERS,
        py_start_method=start_method,
    )(**kwargs)


def _epochs(pipe: rp.Pipeline, count: int) -> list[list[list[list[np.ndarray]]]]:
    """``count`` epochs: per batch, per output, the samples."""
    result = []
    for _ in range(count):
        batches = []
        try:
            while True:
                batches.append([[np.array(sample) for sample in out] for out in pipe.run()])
        except StopIteration:
            pipe.reset()
        result.append(batches)
    return result


def _workers() -> list[multiprocessing.process.BaseProcess]:
    return [p for p in multiprocessing.active_children() if p.name.startswith("raypipe-source-worker")]


def _gone(deadline_s: float = 10.0) -> bool:
    end = time.monotonic() + deadline_s
    while _workers() and time.monotonic() < end:
        time.sleep(0.05)
    return not _workers()


@pytest.fixture(autouse=True)
def no_workers_before():
    """Each test counts the workers it starts: none may be left from before (another module's)."""
    assert _gone(), f"source workers left running before the test: {_workers()}"


@pytest.mark.parametrize("start_method", ["fork", "spawn", "forkserver"])
def test_parallel_gives_the_serial_batches(start_method):
    with _pipe(graph, parallel=False) as serial:
        want = _epochs(serial, 2)
    with _pipe(graph, start_method, parallel=True) as parallel:
        got = _epochs(parallel, 2)
        assert len(_workers()) == WORKERS
    assert [len(e) for e in got] == [2, 2], "the shortest source (two batches) ends each epoch"
    for epoch_got, epoch_want in zip(got, want):
        for batch_got, batch_want in zip(epoch_got, epoch_want):
            for output_got, output_want in zip(batch_got, batch_want, strict=True):
                for g, w in zip(output_got, output_want, strict=True):
                    assert g.dtype == w.dtype
                    np.testing.assert_array_equal(g, w)
    assert _gone(), "close() stops the workers"


def test_start_py_workers_starts_them_before_the_first_batch():
    with _pipe(graph, parallel=True) as pipe:
        assert not _workers()
        pipe.start_py_workers()
        assert len(_workers()) == WORKERS, "started before any run()"
        started = {p.pid for p in _workers()}
        pipe.run()
        assert {p.pid for p in _workers()} == started, "the first batch uses the workers already started"
    assert _gone()


def test_a_per_sample_batch_is_split_among_the_workers():
    with _pipe(lambda: fn.external_source(worker_pid, batch=False, parallel=True)) as pipe:
        pids = set(pipe.run()[0].as_tensor().ravel().tolist())
    assert len(pids) == WORKERS and os.getpid() not in pids


def test_workers_go_when_the_pipeline_is_dropped():
    pipe = _pipe(graph, parallel=True)
    pipe.run()
    assert len(_workers()) == WORKERS
    del pipe
    gc.collect()
    assert _gone()


def _segments() -> set[str]:
    return {name for name in os.listdir("/dev/shm") if name.startswith("psm_")}


@pytest.mark.parametrize("close", [True, False])
def test_batches_computed_ahead_are_freed_when_the_pipeline_goes(close):
    """The workers run ``prefetch_queue_depth`` batches ahead: those never taken leave no shared
    memory behind, whether the pipeline is closed or dropped."""
    before = _segments()
    pipe = _pipe(
        lambda: fn.external_source(per_sample, num_outputs=2, batch=False, parallel=True, prefetch_queue_depth=3)
    )
    pipe.run()
    time.sleep(0.5)  # the batches ahead are written
    if close:
        pipe.close()
    else:
        del pipe
        gc.collect()
    assert _gone()
    assert not _segments() - before


def test_workers_go_after_a_sources_error():
    pipe = _pipe(lambda: fn.external_source(failing, batch=False, parallel=True, prefetch_queue_depth=2))
    pipe.run()
    failed = False
    try:
        pipe.run()
    except SampleError as exc:
        failed = "sample source broke" in str(exc)
    assert failed, "the worker's error is raised by run(), with its message"
    del pipe
    gc.collect()
    assert _gone()
    pipe = _pipe(lambda: fn.external_source(failing, batch=False, parallel=True))
    with pytest.raises(SampleError, match="ValueError: sample source broke"):
        with pipe:
            for _ in range(3):
                pipe.run()
    assert _gone()


def test_dalis_rules_for_parallel_sources():
    with pytest.raises(ArgumentError, match="must run in batch mode"):
        _pipe(lambda: fn.external_source(Batches(), parallel=True)).build()
    with pytest.raises(ArgumentError, match="must accept one argument"):
        _pipe(lambda: fn.external_source(lambda: np.zeros(1), parallel=True)).build()
    with pytest.raises(ArgumentError, match="no_copy cannot be False"):
        _pipe(lambda: fn.external_source(per_sample, parallel=True, no_copy=False)).build()
    with pytest.raises(ArgumentError, match="prefetch_queue_depth must be a positive int"):
        _pipe(lambda: fn.external_source(per_sample, parallel=True, prefetch_queue_depth=0)).build()
    assert not _workers(), "nothing started for a refused source"


def test_a_source_spawned_workers_cannot_unpickle_is_refused_naming_it_before_any_starts():
    """DALI's rule for ``py_start_method="spawn"``: the source must pickle. A lambda is refused with
    the way out, and no worker is left half-started."""
    pipe = _pipe(lambda: fn.external_source(lambda info: np.zeros(1), batch=False, parallel=True), "spawn")
    with pytest.raises(
        PipelineDefinitionError, match=r"source '.*<lambda>' cannot be pickled .* py_start_method='fork'"
    ):
        pipe.run()
    assert not _workers()
    with _pipe(lambda: fn.external_source(worker_pid, batch=False, parallel=True), "spawn") as pipe:
        assert [len(out) for out in pipe.run()] == [BATCH], "a module-level function pickles"


def test_results_travel_through_shared_memory_and_are_freed():
    from multiprocessing import shared_memory

    outputs = [[np.arange(6, dtype=np.int16).reshape(2, 3), np.array(7.5)], [np.zeros((0, 4), np.uint8)] * 2]
    name, layout = _write_segment(outputs)
    back = _read_segment(name, layout)
    for want, got in zip(outputs, back):
        for w, g in zip(want, got):
            assert w.dtype == g.dtype and w.shape == g.shape
            np.testing.assert_array_equal(w, g)
    with pytest.raises(FileNotFoundError):
        shared_memory.SharedMemory(name=name)


def test_a_spawned_worker_of_an_unguarded_script_says_what_to_do(tmp_path):
    """Spawned workers import the main script again; without the ``__main__`` guard they fail, and
    the error says how to write the script."""
    script = tmp_path / "unguarded.py"
    script.write_text(
        "import numpy as np\nimport raypipe as rp\nfrom raypipe import fn\n\n\n"
        "def source(info):\n    return np.zeros(3, np.float32)\n\n\n"
        "@rp.pipeline_def(batch_size=2, num_threads=1, device_id=None, py_num_workers=1, py_start_method='spawn')\n"
        "def pipe():\n    return fn.external_source(source, batch=False, parallel=True)\n\n\n"
        "pipe().run()\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode != 0
    assert 'under `if __name__ == "__main__":`' in done.stderr.splitlines()[-1]
