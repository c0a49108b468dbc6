"""A CPU helper builds only CPU stages of the service's pipeline, one per split a pipeline actor
names, and never an executor; its units are what the actor's own CPU stage makes of them."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import raypipe as rp
from actors.cpu_helper import CpuHelper
from raypipe import fn
from raypipe.service_config import ServiceConfig

HOST = {"on_gpu": False, "decode_on_gpu": False}
GPU_NODE = {"on_gpu": True, "decode_on_gpu": True}


@rp.pipeline_def(batch_size=2, num_threads=1)
def served(files):
    jpegs, labels = fn.readers.file(files=files, name="Reader")
    images = fn.decoders.image_random_crop(jpegs, device="mixed")
    return fn.resize(images, resize_x=24, resize_y=24), labels


@pytest.fixture()
def helper(jpeg_files, monkeypatch):
    """A helper for a service of 8 samples; the variable it clears to hide GPUs is restored after."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    probe = served(jpeg_files[:8])
    config = ServiceConfig("svc", 1, 4, probe.reader_meta()["epoch_size"], probe.dataset_digest(), seed=9)
    probe.close()
    made = CpuHelper(config, index=0, pipeline=(served, {"files": jpeg_files[:8]}))
    yield made
    made.pipe.close()


def _raypipe_threads() -> set[str]:
    return {t.name for t in threading.enumerate() if t.name.startswith("raypipe")}


def test_a_helper_builds_stages_and_no_executor(helper, jpeg_files):
    before = _raypipe_threads()
    on_host = helper.run(HOST, 1, [3, 0])
    helper.run(GPU_NODE, 1, [3, 0])
    helper.run(HOST, 2, [5])
    assert len(helper._stages) == 2, "one stage per split, reused"
    assert helper.pipe.engine.executor is None
    assert _raypipe_threads() == before, "no executor thread started"
    owner = served(jpeg_files[:8], batch_size=4, seed=9)  # the service's pipeline, as an actor builds it
    expected = owner.engine.cpu_stage(owner.engine.cpu_split()).run_packed(1, [3, 0])
    assert len(on_host) == len(expected) == 2
    for got, want in zip(on_host, expected):
        assert all(np.array_equal(np.asarray(g), np.asarray(w)) for g, w in zip(got, want))
