"""The engine under a pipeline: no executor until batches are driven (building CPU stages makes
none), settings given before the executor exists apply to it, driven batches come back in
order, and the service's methods live on the engine, not on DALI's ``Pipeline``; ``preload`` imports what
the CPU stage's operators load on their first call, and only that."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn
from raypipe.engine import Engine

DEFERRED = {"on_gpu": True, "decode_on_gpu": True}
SERVICE_ONLY = (
    "drive", "cpu_split", "cpu_stage", "preload", "set_cpu_helpers", "set_host_allocator", "offload_stats",
)  # fmt: skip


@rp.pipeline_def(batch_size=4, num_threads=1, device_id=None, seed=3)
def labelled(files, side=16):
    jpegs, labels = fn.readers.file(files=files, labels=list(range(100, 100 + len(files))), name="Reader")
    return fn.resize(fn.decoders.image(jpegs, device="mixed"), resize_x=side, resize_y=side), labels


class ClassStyle(rp.Pipeline):
    """DALI's class style: the graph is the pipeline's own method."""

    def __init__(self, files):
        super().__init__(batch_size=4, num_threads=1, device_id=None, seed=3)
        self.files = files

    def define_graph(self):
        jpegs, labels = fn.readers.file(files=self.files, name="Reader")
        return fn.decoders.image(jpegs), labels


def _raypipe_threads() -> set[str]:
    return {t.name for t in threading.enumerate() if t.name.startswith("raypipe")}


def test_a_built_engine_makes_cpu_stages_without_an_executor(jpeg_files):
    before = _raypipe_threads()
    pipe = labelled(jpeg_files[:8])
    engine = pipe.engine
    assert engine.cpu_split() == {"on_gpu": False, "decode_on_gpu": False}
    stage = engine.cpu_stage(DEFERRED)  # a GPU node's stage: decoding deferred to its Mixed stage
    assert stage.by_node and len(stage.run_packed(0, [2, 5])) == 2
    assert engine.executor is None and _raypipe_threads() == before
    assert engine.queue_stats() == {
        "cpu": {"used": 0, "size": 2},
        "gpu": {"used": 0, "size": 2},
        "ready": {"used": 0, "size": 1},
    }
    assert engine.offload_stats() == {}
    with pytest.raises(rp.PipelineDefinitionError, match="call drive"):
        engine.next()
    pipe.close()
    assert engine.executor is None


def test_driven_batches_come_back_in_order_with_settings_given_before(jpeg_files):
    made = []

    def allocate(shape, dtype):
        made.append(tuple(shape))
        return np.empty(shape, dtype)

    with labelled(jpeg_files[:8], side=512) as pipe:  # images of 3 MiB a batch: pooled
        engine = pipe.engine
        engine.enable_profiling()
        engine.set_host_allocator(allocate)
        engine.drive([rp.BatchSpec(epoch=2, index=0, sample_indices=np.array([6, 1, 3, 0]), last_in_epoch=True)])
        assert engine.executor is not None and engine.running
        result = engine.next()
        with pytest.raises(StopIteration):
            engine.next()
        assert np.asarray(result.outputs[1]).ravel().tolist() == [106, 101, 103, 100]
        assert (result.spec.epoch, result.spec.index, result.sample_indices) == (2, 0, [6, 1, 3, 0])
        assert (4, 512, 512, 3) in made, "the allocator set before the executor existed made the images"
        stages = {row["stage"] for row in engine.profile()["rows"]}
        assert {"cpu", "caller"} <= stages, "profiling enabled before the executor existed"


def test_an_engine_outlives_a_dropped_function_pipeline_but_not_a_class_style_one(jpeg_files):
    function_engine = labelled(jpeg_files[:8]).engine
    assert function_engine.cpu_stage(DEFERRED).run_packed(0, [0])  # the function defines its graph anew
    class_engine = ClassStyle(jpeg_files[:8]).engine
    with pytest.raises(rp.PipelineDefinitionError, match="the pipeline that defines this engine's graph is gone"):
        class_engine.cpu_stage(DEFERRED)


def test_the_service_methods_are_the_engines_not_dalis_pipelines():
    for name in SERVICE_ONLY:
        assert not hasattr(rp.Pipeline, name), name
        assert callable(getattr(Engine, name)), name


PRELOADED = """
import sys
from tests.test_engine import ClassStyle, labelled
for pipe in (ClassStyle(sys.argv[1:]), labelled(files=sys.argv[1:])):
    pipe.build()
    pipe.engine.preload()
    print("torch" in sys.modules, end=" ")
"""


def test_preload_imports_torch_for_a_host_resize_and_nothing_for_a_decode_alone(jpeg_files):
    """In a new interpreter: the decode-only pipeline's preload leaves torch out (its memory too),
    the resizing one's imports it (the host resize's backend)."""
    pytest.importorskip("torch")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {k: v for k, v in os.environ.items() if k != "RAYPIPE_HOST_RESIZE"}
    done = subprocess.run(
        [sys.executable, "-c", PRELOADED, *jpeg_files[:4]], cwd=root, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["False", "True"], done.stdout
