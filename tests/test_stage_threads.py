"""The CPU stage's thread count: one thread where the GPU decodes, ``num_threads`` otherwise, and
``RAYPIPE_CPU_STAGE_THREADS`` over both, as the executor runs it and the device report says."""

from __future__ import annotations

import threading

import pytest

import raypipe as rp
from raypipe import fn
from raypipe.errors import ArgumentError
from raypipe.stage_threads import GPU_DECODE_THREADS, THREADS_ENV, cpu_stage_threads


def test_one_thread_where_the_gpu_decodes_and_num_threads_otherwise(monkeypatch):
    monkeypatch.delenv(THREADS_ENV, raising=False)
    assert GPU_DECODE_THREADS == 1
    gpu = cpu_stage_threads(4, gpu_decode=True)
    assert gpu.threads == 1 and "the GPU decodes" in gpu.detail and "num_threads=4" in gpu.detail
    assert cpu_stage_threads(1, gpu_decode=True).threads == 1
    assert cpu_stage_threads(4, gpu_decode=False) == (4, "num_threads=4")


def test_the_environment_sets_the_count_for_any_pipeline(monkeypatch):
    monkeypatch.setenv(THREADS_ENV, "3")
    assert cpu_stage_threads(8, gpu_decode=True) == (3, f"{THREADS_ENV}=3")
    assert cpu_stage_threads(1, gpu_decode=False).threads == 3
    for bad in ("0", "-2", "two", "1.5"):
        monkeypatch.setenv(THREADS_ENV, bad)
        with pytest.raises(ArgumentError, match=f"{THREADS_ENV} must be a positive integer, got '{bad}'"):
            cpu_stage_threads(4, gpu_decode=False)


@rp.pipeline_def(batch_size=8, num_threads=3, seed=1)
def decode_pipe(files):
    jpegs, labels = fn.readers.file(files=files, name="Reader")
    return fn.decoders.image_random_crop(jpegs), labels


def _stage_threads_running() -> int:
    return sum(t.name.startswith("raypipe-cpu") for t in threading.enumerate())


@pytest.mark.parametrize(("setting", "expected"), [(None, 3), ("2", 2)])
def test_the_executor_runs_as_many_threads_as_the_report_says(jpeg_files, monkeypatch, setting, expected):
    if setting is None:
        monkeypatch.delenv(THREADS_ENV, raising=False)
    else:
        monkeypatch.setenv(THREADS_ENV, setting)
    before = _stage_threads_running()
    with decode_pipe(jpeg_files) as pipe:
        for _ in range(3):
            images, _ = pipe.run()
            assert len(images) == 8
        assert pipe.device_report()["cpu_stage"]["threads"] == expected
        assert pipe._engine.executor._pool._max_workers == expected
        assert 0 < _stage_threads_running() - before <= expected
    assert _stage_threads_running() == before


def test_a_bad_setting_fails_the_build_not_a_batch(jpeg_files, monkeypatch):
    monkeypatch.setenv(THREADS_ENV, "none")
    with pytest.raises(ArgumentError, match=THREADS_ENV):
        decode_pipe(jpeg_files).build()
