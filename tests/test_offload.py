"""The CPU stage shared with remote workers (:mod:`raypipe.offload`): identical batches, units of
lost or silent workers reassigned, worker sample errors raised as local ones, threads released.
The workers here are CPU stages of other pipeline objects on their own threads (the Ray helper
actor runs exactly this; tests/cluster covers it across processes)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn
from raypipe.errors import SampleError
from raypipe.offload import WorkerLost


@rp.pipeline_def(batch_size=8, num_threads=1, device_id=None, seed=11)
def augmented(files):
    jpegs, labels = fn.readers.file(files=files, name="Reader")
    images = fn.decoders.image_random_crop(jpegs)
    images = fn.resize(images, resize_x=48, resize_y=40)
    images = fn.crop_mirror_normalize(images, mirror=fn.random.coin_flip(), output_layout="CHW")
    return images, labels


class ThreadWorker:
    """A worker with its own copy of the pipeline's CPU stage, on its own thread."""

    def __init__(self, files, owner, fail_first: int = 0, silent: bool = False):
        self.stage = augmented(files=files).engine.cpu_stage(owner.engine.cpu_split())
        self.pool = ThreadPoolExecutor(1)
        self.calls = 0
        self.fail_first, self.silent = fail_first, silent

    def __call__(self, epoch, indices) -> Future:
        self.calls += 1
        if self.calls <= self.fail_first:
            failed = Future()
            failed.set_exception(WorkerLost("gone"))
            return failed
        if self.silent:
            return Future()  # never answers
        return self.pool.submit(self.stage.run_packed, epoch, list(indices))


def _epochs(pipe, batches):
    out = []
    for _ in range(batches):
        images, labels = pipe.run()
        out.append((np.asarray(images.as_tensor()).copy(), np.asarray(labels.as_tensor()).ravel().tolist()))
    return out


def test_batches_are_identical_with_a_helper(jpeg_files):
    reference = augmented(files=jpeg_files)
    expected = _epochs(reference, 6)
    reference.close()
    pipe = augmented(files=jpeg_files)
    worker = ThreadWorker(jpeg_files, pipe)
    pipe.engine.set_cpu_helpers({"w0": worker})
    got = _epochs(pipe, 6)
    for (a, la), (b, lb) in zip(expected, got):
        assert la == lb and np.array_equal(a, b)
    stats = pipe.engine.offload_stats()
    assert stats["workers"]["w0"]["samples"] > 0 and stats["workers"]["w0"]["bytes"] > 0
    pipe.close()


def test_units_of_a_lost_worker_are_reassigned(jpeg_files):
    reference = augmented(files=jpeg_files)
    expected = _epochs(reference, 3)
    reference.close()
    pipe = augmented(files=jpeg_files)
    pipe.engine.set_cpu_helpers({"flaky": ThreadWorker(jpeg_files, pipe, fail_first=2)})
    got = _epochs(pipe, 3)
    assert all(np.array_equal(a, b) and la == lb for (a, la), (b, lb) in zip(expected, got))
    stats = pipe.engine.offload_stats()
    assert stats["workers"]["flaky"]["lost"] == 2 and stats["reassigned"] == 2
    pipe.close()


def test_a_silent_worker_times_out_and_its_units_run_elsewhere(jpeg_files):
    pipe = augmented(files=jpeg_files)
    pipe.engine.set_cpu_helpers({"silent": ThreadWorker(jpeg_files, pipe, silent=True)}, unit_timeout_s=0.3)
    _, labels = pipe.run()
    assert len(labels) == 8
    stats = pipe.engine.offload_stats()
    assert stats["workers"]["silent"]["lost"] >= 1
    assert stats["reassigned"] >= 1 and stats["units_local"] >= 1, "the silent worker ran nothing: all ran here"
    pipe.close()


def test_a_sample_error_at_a_worker_names_the_sample(jpeg_files, tmp_path):
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"\xff\xd8 not a jpeg")
    files = [bad] + list(jpeg_files[:7])
    pipe = augmented(files=files)
    pipe.engine.set_cpu_helpers({"w": ThreadWorker(files, pipe)})
    with pytest.raises(SampleError, match="bad.jpg"):
        for _ in range(2):
            pipe.run()
    pipe.close()


def test_close_releases_the_proxy_threads(jpeg_files):
    before = {t.ident for t in threading.enumerate()}
    pipe = augmented(files=jpeg_files)
    pipe.engine.set_cpu_helpers({"w": ThreadWorker(jpeg_files, pipe)})
    pipe.run()
    assert any(t.name.startswith("raypipe-offload") for t in threading.enumerate())
    pipe.close()
    left = [t.name for t in threading.enumerate() if t.ident not in before and t.name.startswith("raypipe-offload")]
    assert left == []
    pipe.engine.set_cpu_helpers({"w": ThreadWorker(jpeg_files, pipe)})  # usable again after close
    assert len(pipe.run()[1]) == 8
    pipe.close()


def test_a_dropped_pipeline_releases_the_proxy_threads(jpeg_files):
    import gc

    pipe = augmented(files=jpeg_files)
    pipe.engine.set_cpu_helpers({"w": ThreadWorker(jpeg_files, pipe)})
    pipe.run()
    del pipe
    gc.collect()
    deadline = time.monotonic() + 5
    while any(t.name.startswith("raypipe-offload") for t in threading.enumerate()):
        assert time.monotonic() < deadline, "proxy threads outlive their pipeline"
        time.sleep(0.05)


@rp.pipeline_def(batch_size=8, num_threads=1, device_id=None, seed=11)
def skipping(files):
    jpegs, labels = fn.readers.file(files=files, name="Reader")
    return fn.resize(fn.decoders.image(jpegs, on_error="skip"), resize_x=32, resize_y=32), labels


def test_samples_skipped_at_a_worker_are_reported_as_locally(jpeg_files, tmp_path):
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"\xff\xd8 not a jpeg")
    files = list(jpeg_files[:3]) + [bad] + list(jpeg_files[3:7])
    local = skipping(files=files)
    local.run()
    expected = [(s.sample_index, s.source) for s in local.skipped_samples]
    local.close()
    pipe = skipping(files=files)
    worker_stage = skipping(files=files).engine.cpu_stage(pipe.engine.cpu_split())
    pool = ThreadPoolExecutor(1)
    pipe.engine.set_cpu_helpers(
        {"w": lambda epoch, indices: pool.submit(worker_stage.run_packed, epoch, list(indices))}
    )
    _, labels = pipe.run()
    assert [(s.sample_index, s.source) for s in pipe.skipped_samples] == expected == [(3, str(bad))]
    assert pipe.last_batch_info.sample_indices == [0, 1, 2, 4, 5, 6, 7] and len(labels) == 7
    assert pipe.engine.offload_stats()["workers"]["w"]["samples"] > 0
    pipe.close()
    pool.shutdown()
