"""Pipeline lifetime: a dropped, closed or failed pipeline leaves no raypipe thread behind.

The garbage collector is off in these tests, so a pipeline must be freed by reference
counting alone: no executor thread and no reference cycle may keep it alive. torch is
imported up front because its first import leaves frame cycles that only the collector
frees, and they would hold whatever made that import (the iterator under test).
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from pathlib import Path

import numpy as np
import pytest
import torch  # noqa: F401  (see the module docstring)

import raypipe as rp
from raypipe import fn
from raypipe.plugin.pytorch import DALIGenericIterator

SIDE = 64
DEADLINE = 3.0


@rp.pipeline_def(batch_size=6, num_threads=2, device_id=None, seed=7)
def decode_pipe(files):
    jpegs, labels = fn.readers.file(files=files, random_shuffle=True, name="Reader")
    images = fn.resize(fn.decoders.image(jpegs), resize_x=SIDE, resize_y=SIDE)
    return images, labels


@rp.pipeline_def(batch_size=4, num_threads=2, device_id=None, seed=7)
def failing_gpu_op_pipe(files):
    _, labels = fn.readers.file(files=files)
    return fn.python_function(labels, function=_fail_batch, device="gpu")


class ClassStylePipe(rp.Pipeline):
    """``decode_pipe`` in DALI's class style: the graph is the pipeline's own method."""

    def __init__(self, files):
        super().__init__(batch_size=6, num_threads=2, device_id=None, seed=7)
        self.files = files

    def define_graph(self):
        jpegs, labels = fn.readers.file(files=self.files, random_shuffle=True, name="Reader")
        return fn.resize(fn.decoders.image(jpegs), resize_x=SIDE, resize_y=SIDE), labels


def _fail_batch(samples):
    raise ValueError("this batch is bad")


def _raypipe_threads(before: set[threading.Thread]) -> list[str]:
    """Names of raypipe threads started since ``before`` was taken and still alive."""
    return [t.name for t in threading.enumerate() if t.name.startswith("raypipe") and t not in before]


def _wait_for_no_threads(before: set[threading.Thread]) -> None:
    """Poll until every raypipe thread started since ``before`` is gone; fail after DEADLINE seconds."""
    deadline = time.monotonic() + DEADLINE
    while _raypipe_threads(before) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _raypipe_threads(before) == []


@pytest.fixture()
def before():
    """The threads alive before the test, with the garbage collector off during it."""
    gc.collect()
    gc.disable()
    try:
        yield set(threading.enumerate())
    finally:
        gc.enable()


def _running(pipe: rp.Pipeline, before: set[threading.Thread]) -> rp.Pipeline:
    """``pipe`` after one real batch, with its stage threads running."""
    images, labels = pipe.run()
    assert np.asarray(images).shape == (6, SIDE, SIDE, 3) and np.asarray(labels).shape == (6, 1)
    assert {"raypipe-dispatch", "raypipe-mixed", "raypipe-gpu"} <= set(_raypipe_threads(before))
    return pipe


def test_deleted_pipeline_is_freed_and_stops_its_threads(jpeg_files, before):
    pipe = _running(decode_pipe(jpeg_files), before)
    ref = weakref.ref(pipe)
    del pipe
    assert ref() is None
    _wait_for_no_threads(before)


def test_deleted_class_style_pipeline_is_freed_and_stops_its_threads(jpeg_files, before):
    pipe = _running(ClassStylePipe(jpeg_files), before)
    ref = weakref.ref(pipe)
    del pipe
    assert ref() is None
    _wait_for_no_threads(before)


def test_pipeline_dropped_by_a_returning_function_stops_its_threads(jpeg_files, before):
    def first_labels() -> list[int]:
        pipe = _running(decode_pipe(jpeg_files), before)
        return np.asarray(pipe.run()[1]).ravel().tolist()

    labels = first_labels()
    assert len(set(labels)) == 6 and set(labels) <= set(range(len(jpeg_files)))  # labels are sample indices
    _wait_for_no_threads(before)


def test_dropped_torch_iterator_stops_the_pipeline_threads(jpeg_files, before):
    it = DALIGenericIterator(decode_pipe(jpeg_files), ["images", "labels"], reader_name="Reader")
    (batch,) = next(it)
    assert tuple(batch["images"].shape) == (6, SIDE, SIDE, 3) and tuple(batch["labels"].shape) == (6, 1)
    assert _raypipe_threads(before)
    del it, batch
    _wait_for_no_threads(before)


def test_pipeline_dropped_after_a_decode_error_stops_its_threads(jpeg_files, before, tmp_path):
    data = Path(jpeg_files[0]).read_bytes()
    bad = tmp_path / "truncated.jpg"
    bad.write_bytes(data[: len(data) // 3])
    pipe = decode_pipe([*jpeg_files[:5], str(bad)], batch_size=6)
    with pytest.raises(rp.DecodeError) as info:
        pipe.run()
    assert info.value.source == str(bad) and info.value.sample_index == 5
    del info
    assert _raypipe_threads(before)
    ref = weakref.ref(pipe)
    del pipe
    assert ref() is None
    _wait_for_no_threads(before)


def test_pipeline_dropped_after_a_gpu_stage_error_stops_its_threads(jpeg_files, before):
    pipe = failing_gpu_op_pipe(jpeg_files)
    with pytest.raises(rp.SampleError, match="this batch is bad"):
        pipe.run()
    ref = weakref.ref(pipe)
    del pipe
    assert ref() is None
    _wait_for_no_threads(before)


def test_close_twice_then_context_manager_exit_leave_no_threads(jpeg_files, before):
    pipe = _running(decode_pipe(jpeg_files), before)
    pipe.close()
    assert _raypipe_threads(before) == []
    pipe.close()
    with pipe:
        _running(pipe, before)
        assert pipe.last_batch_info.index == 0  # close() dropped the prefetched batches: the epoch restarts
    assert _raypipe_threads(before) == []


RAY_AFTER_DROP = """
import sys, threading, time
import ray
import raypipe as rp
from raypipe import fn

@rp.pipeline_def(batch_size=6, num_threads=2, seed=7)
def pipe_def(root):
    jpegs, labels = fn.readers.file(file_root=root, random_shuffle=True)
    return fn.decoders.image(jpegs), labels

def first_batch():
    pipe = pipe_def(sys.argv[1])
    return pipe.run()

assert len(first_batch()[0]) == 6
deadline = time.monotonic() + 3
while any(t.name.startswith("raypipe") for t in threading.enumerate()) and time.monotonic() < deadline:
    time.sleep(0.01)
left = [t.name for t in threading.enumerate() if t.name.startswith("raypipe")]
assert not left, f"threads left before ray.init: {left}"
ray.init(address="local", num_cpus=1, include_dashboard=False)
ray.shutdown()
"""


def test_ray_init_after_dropping_a_running_pipeline(jpeg_root):
    """Ray forks its processes: a leaked decode thread holding a lock there once hung ray.init forever.
    The child starts its own Ray instance in a private temp dir, whatever clusters run beside it."""
    with tempfile.TemporaryDirectory(prefix="rp-ray-", ignore_cleanup_errors=True) as ray_tmp:
        done = subprocess.run(
            [sys.executable, "-c", RAY_AFTER_DROP, jpeg_root],
            cwd=Path(__file__).resolve().parents[1],
            env={**os.environ, "RAY_ADDRESS": "local", "RAY_TMPDIR": ray_tmp},
            capture_output=True,
            text=True,
            timeout=180,
        )
    assert done.returncode == 0, done.stderr[-3000:]
