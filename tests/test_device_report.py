"""``pipe.device_report()``: where each part of a pipeline runs on this machine, and why."""

from __future__ import annotations

import json

import pytest

import raypipe as rp
from raypipe import fn, types
from raypipe.backend import GpuUnavailableWarning, gpu_available


@rp.pipeline_def(batch_size=4, num_threads=1, seed=3)
def mixed_pipe(files):
    jpegs, labels = fn.readers.file(files=files, name="Reader")
    images = fn.decoders.image_random_crop(jpegs, device="mixed", hw_decoder_load=0.5)
    images = fn.resize(images, device="gpu", resize_x=32, resize_y=32)
    images = fn.crop_mirror_normalize(images, device="gpu", mirror=fn.random.coin_flip(), dtype=types.FLOAT)
    return images, labels


@pytest.mark.skipif(gpu_available(), reason="checks the machine without a GPU")
def test_report_without_a_gpu_says_everything_runs_on_the_host(jpeg_files):
    with mixed_pipe(jpeg_files[:8]) as pipe:
        report = pipe.device_report()
        pipe.run()
    assert report["gpu"] is False and report["device_id"] is None
    assert report["reason"] == "no device_id: a CPU-only pipeline"
    assert report["decoder"]["path"] == "host" and report["kernels"]["path"] == "host"
    assert set(report["operators"].values()) <= {"host"}
    json.dumps(report)  # a plain dict: it travels in svc.stats()


@pytest.mark.skipif(gpu_available(), reason="checks the machine without a GPU")
def test_report_for_a_gpu_pipeline_on_a_machine_without_one_names_the_reason(jpeg_files):
    with pytest.warns(GpuUnavailableWarning):
        pipe = mixed_pipe(jpeg_files[:8], device_id=0)
        pipe.build()
    with pipe:
        report = pipe.device_report()
    assert report["gpu"] is False and report["reason"].startswith("device_id=0 but no usable GPU (")
    report["reason"] = "changed"
    assert pipe.device_report()["reason"] != "changed"  # a copy: callers cannot change the pipeline's


def test_report_of_a_pipeline_without_mixed_decoder(jpeg_files):
    @rp.pipeline_def(batch_size=2, num_threads=1, seed=3)
    def host_pipe():
        jpegs, labels = fn.readers.file(files=jpeg_files[:4], name="Reader")
        return fn.decoders.image(jpegs), labels

    with host_pipe() as pipe:
        assert pipe.device_report()["decoder"] == {"path": None, "detail": "no mixed decoder"}


def test_hw_decoder_load_is_kept_for_the_gpu_decoder(jpeg_files):
    with mixed_pipe(jpeg_files[:8]) as pipe:
        pipe.build()
        decoder = next(n.op for n in pipe._staged.host_nodes if n.device == "mixed")
        assert decoder.hw_decoder_load == 0.5
    with pytest.raises(rp.errors.ArgumentError, match=r"hw_decoder_load must be a number in \[0, 1\]"):
        fn_pipe = rp.pipeline_def(batch_size=1, num_threads=1)(
            lambda: fn.decoders.image(fn.readers.file(files=jpeg_files[:1])[0], hw_decoder_load=2.0)
        )
        fn_pipe().build()


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU")
def test_report_on_a_gpu_names_the_checked_paths(jpeg_files):
    with mixed_pipe(jpeg_files[:8], device_id=0) as pipe:
        report = pipe.device_report()
        pipe.run()
    assert report["gpu"] is True and report["device_id"] == 0
    assert report["kernels"]["path"] == "gpu", report["kernels"]
    assert report["decoder"]["path"] == "gpu", report["decoder"]
    assert set(report["operators"].values()) == {"kernels"}


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU")
def test_where_the_gpu_decodes_the_cpu_stage_runs_on_one_thread(jpeg_files, monkeypatch):
    monkeypatch.delenv("RAYPIPE_CPU_STAGE_THREADS", raising=False)
    with mixed_pipe(jpeg_files[:8], device_id=0, num_threads=4) as pipe:
        report = pipe.device_report()
        pipe.run()
    if report["decoder"]["path"] != "gpu":
        pytest.skip(f"nvImageCodec is not used here: {report['decoder']['detail']}")
    assert report["cpu_stage"]["threads"] == 1 and "num_threads=4" in report["cpu_stage"]["detail"]
