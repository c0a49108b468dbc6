"""The staged executor: stages overlap, prefetch is bounded, errors reach run()."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, types
from raypipe.backend import gpu_available
from raypipe.executor import chunk_size
from raypipe.replacement import fill_skipped

CPU_SLEEP = 0.12
GPU_SLEEP = 0.12


def _sleep_sample(a):
    time.sleep(CPU_SLEEP)
    return a


def _sleep_batch(samples):
    time.sleep(GPU_SLEEP)
    return samples


@rp.pipeline_def(batch_size=4, num_threads=4, seed=0)
def sleepy(files):
    _, labels = fn.readers.file(files=files)
    labels = fn.python_function(labels, function=_sleep_sample)
    return fn.python_function(labels, function=_sleep_batch, device="gpu")


def test_cpu_and_gpu_stages_overlap(jpeg_files):
    """Each stage sleeps the same time per batch: steady state must cost about one stage, not two."""
    with sleepy(jpeg_files, prefetch_queue_depth={"cpu_size": 2, "gpu_size": 2}) as pipe:
        pipe.run()
        pipe.run()
        n = 6
        start = time.perf_counter()
        for _ in range(n):
            (out,) = pipe.run()
        per_batch = (time.perf_counter() - start) / n
    assert len(out) == 4
    assert per_batch < 0.75 * (CPU_SLEEP + GPU_SLEEP), per_batch
    assert per_batch > 0.8 * max(CPU_SLEEP, GPU_SLEEP), per_batch


def test_prefetch_is_bounded(jpeg_files):
    seen: list[int] = []
    lock = threading.Lock()

    def record(label):
        with lock:
            seen.append(int(label[0]))
        return label

    @rp.pipeline_def(batch_size=2, num_threads=2, seed=0, prefetch_queue_depth={"cpu_size": 1, "gpu_size": 1})
    def counting(files):
        _, labels = fn.readers.file(files=files)
        return fn.python_function(labels, function=record)

    with counting(jpeg_files) as pipe:
        pipe.run()
        time.sleep(0.5)
        # held 1 + cpu_size 1 + gpu_size 1 + 2 (in the GPU stage, finished) = 5 batches of 2
        assert 2 <= len(seen) <= 10, seen


@pytest.mark.parametrize("batch", [2, 64])
def test_readers_hear_of_coming_samples_at_most_2048_samples_and_64_batches_ahead(jpeg_files, batch, monkeypatch):
    from raypipe.operators.readers import FileReader

    heard: list[int] = []
    lock = threading.Lock()
    will_read = FileReader.will_read

    def record(self, indices, sequential=False):
        with lock:
            heard.append(len(indices))
        return will_read(self, indices, sequential)

    monkeypatch.setattr(FileReader, "will_read", record)

    @rp.pipeline_def(batch_size=batch, num_threads=1, seed=0, prefetch_queue_depth={"cpu_size": 1, "gpu_size": 1})
    def reading(files):
        _, labels = fn.readers.file(files=files, random_shuffle=True)
        return labels

    with reading(jpeg_files) as pipe:
        pipe.run()
        time.sleep(0.5)
        with lock:
            batches, samples = len(heard), sum(heard)
    in_flight = 5  # batches past the look-ahead: held, queued and in the stages (test above)
    assert batches <= 64 + 1 + in_flight, "not hundreds of tiny batches planned before the first"
    assert samples <= 2048 + (1 + in_flight) * batch
    assert batches >= min(64, 2048 // batch), "the readers do hear ahead"


def test_sample_error_reaches_run_and_names_the_file(jpeg_files):
    def fail_on_third(label):
        if int(label[0]) == 2:
            raise ValueError("bad value")
        return label

    @rp.pipeline_def(batch_size=2, num_threads=2, seed=0)
    def failing(files):
        _, labels = fn.readers.file(files=files, name="Reader")
        return fn.python_function(labels, function=fail_on_third, name="checker")

    files = jpeg_files[:6]
    with failing(files) as pipe:
        (first,) = pipe.run()
        assert np.asarray(first).ravel().tolist() == [0, 1]
        with pytest.raises(
            rp.SampleError, match=r"operator 'checker' failed on sample 2 \(.*img_00002.jpg\).*bad value"
        ) as info:
            pipe.run()
        assert info.value.sample_index == 2 and info.value.source == files[2]
        (third,) = pipe.run()
        assert np.asarray(third).ravel().tolist() == [4, 5]


def test_drive_runs_explicit_batches_then_stops(jpeg_files):
    @rp.pipeline_def(batch_size=3, num_threads=2, seed=0)
    def labels_only(files):
        return fn.readers.file(files=files, labels=list(range(100, 100 + len(files))))[1]

    specs = [
        rp.BatchSpec(epoch=4, index=0, sample_indices=np.array([5, 1, 7])),
        rp.BatchSpec(epoch=4, index=1, sample_indices=np.array([2, 2]), num_pad=1, last_in_epoch=True),
    ]
    with labels_only(jpeg_files[:8]) as pipe:
        pipe.engine.drive(specs)
        (a,) = pipe.run()
        info_a = pipe.last_batch_info
        (b,) = pipe.run()
        info_b = pipe.last_batch_info
        with pytest.raises(StopIteration):
            pipe.run()
    assert np.asarray(a).ravel().tolist() == [105, 101, 107]
    assert (info_a.epoch, info_a.index, info_a.sample_indices) == (4, 0, [5, 1, 7])
    assert np.asarray(b).ravel().tolist() == [102, 102]
    assert info_b.is_pad == [False, True] and info_b.last_in_epoch


BATCHES_SEEN: list[int] = []


def _whole_batch(labels):
    BATCHES_SEEN.append(len(labels))
    return labels


@rp.pipeline_def(batch_size=4, num_threads=2, seed=0)
def skipping(files):
    """A skipping decoder with an output of each kind: stacked into a pooled array (over
    ``STACK_POOLED_BYTES``), written in place, small, and made by a batch step."""
    jpegs, labels = fn.readers.file(files=files, labels=list(range(len(files))), name="Reader")
    images = fn.decoders.image(jpegs, on_error="skip")
    large = fn.resize(images, resize_x=384, resize_y=384)
    normalized = fn.crop_mirror_normalize(fn.resize(images, resize_x=32, resize_y=24), dtype=types.FLOAT)
    return large, normalized, labels, fn.python_function(labels, function=_whole_batch, device="gpu")


def test_a_driven_batch_replaces_skipped_samples_by_position_in_the_allocators_arrays(jpeg_files, tmp_path):
    bad = tmp_path / "bad.jpg"
    bad.write_text("not an image")
    files = [jpeg_files[0], str(bad), *jpeg_files[1:4]]
    spec = rp.BatchSpec(epoch=0, index=0, sample_indices=np.array([1, 0, 2, 3]))
    handed: list[np.ndarray] = []
    BATCHES_SEEN.clear()

    def allocate(shape, dtype):
        handed.append(np.empty(shape, dtype))
        return handed[-1]

    with skipping(files) as pipe, skipping(files) as reference:
        pipe.engine.set_host_allocator(allocate)
        pipe.engine.drive([spec])
        outputs = pipe.run()
        info = pipe.last_batch_info
        reference.engine.drive([rp.BatchSpec(epoch=0, index=0, sample_indices=np.array([0, 0, 2, 3]))])
        expected = reference.run()
    rows, samples, is_pad = fill_skipped(spec, [1], [str(bad)])
    assert (
        (info.sample_indices, info.is_pad)
        == (samples.tolist(), is_pad.tolist())
        == ([0, 0, 2, 3], [True] + [False] * 3)
    )
    assert [(s.sample_index, s.source) for s in info.skipped] == [(1, str(bad))]
    large, normalized = outputs[0].dense_array(), outputs[1].dense_array()
    assert any(large is a for a in handed) and any(normalized is a for a in handed), "the allocator's arrays"
    for got, want in zip(outputs, expected):
        np.testing.assert_array_equal(got.as_tensor(), want.as_tensor())
    assert np.asarray(outputs[3]).ravel().tolist() == [0, 0, 2, 3]
    assert BATCHES_SEEN == [3, 4], "the batch step ran on the kept samples, then the slot was filled"


def test_without_gpu_gpu_operators_run_per_sample_and_python_function_keeps_its_batch(jpeg_files):
    seen: list[int] = []

    def whole_batch(images):
        seen.append(len(images))
        return [image[:, ::-1] for image in images]

    @rp.pipeline_def(batch_size=3, num_threads=2, seed=0)
    def mixed(files):
        jpegs, labels = fn.readers.file(files=files)
        images = fn.decoders.image(jpegs, device="mixed")
        small = fn.resize(images, resize_x=32, resize_y=24)
        flipped = fn.python_function(small, function=whole_batch, device="gpu")
        return fn.cast(flipped, dtype=types.FLOAT), small, labels

    with mixed(jpeg_files[:6]) as pipe:
        as_float, small, labels = pipe.run()
        staged = pipe._staged
    assert [n.op.schema.name for n in staged.gpu_nodes] == ["python_function", "cast"]
    assert [n.op.schema.name for n in staged.host_nodes] == ["readers.file", "decoders.image", "resize"]
    assert seen and set(seen) == {3}  # the function got whole batches, as on a GPU
    assert as_float.device == small.device == "gpu" and labels.device == "cpu"
    small = np.asarray(small.as_cpu())
    assert small.shape == (3, 24, 32, 3) and small.dtype == np.uint8
    assert np.array_equal(np.asarray(as_float.as_cpu()), small[:, :, ::-1].astype(np.float32))


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a usable CUDA GPU")
def test_mixed_stage_host_decode_async_copy_and_flat_memory(jpeg_root, monkeypatch):
    """Host decode, pinned staging and an event-ordered copy: the decoded images reach the GPU stage
    bit for bit; the pipeline's pool stays within its budget and does not grow over epochs."""
    import cupy

    monkeypatch.setenv("RAYPIPE_GPU_DECODE", "0")
    monkeypatch.setenv("RAYPIPE_GPU_MEMORY_MB", "512")

    @rp.pipeline_def(batch_size=6, num_threads=2, seed=3)
    def decode(root, device):
        jpegs, labels = fn.readers.file(file_root=root, name="Reader")
        images = fn.decoders.image(jpegs, device=device)
        return images, fn.cast(images, dtype=types.FLOAT), labels

    totals = []
    with decode(jpeg_root, "cpu", device_id=None) as cpu, decode(jpeg_root, "mixed", device_id=0) as gpu:
        gpu.build()
        assert not gpu._staged.deferred
        for _epoch in range(4):
            for _ in range(gpu.batches_per_epoch()):
                (ref, _, ref_labels), (images, as_float, labels) = cpu.run(), gpu.run()
                assert isinstance(images.at(0), cupy.ndarray)
                for i in range(len(ref)):
                    assert np.array_equal(images.at(i).get(), ref.at(i))
                    assert np.array_equal(as_float.at(i).get(), ref.at(i).astype(np.float32))
                assert np.array_equal(np.asarray(labels), np.asarray(ref_labels))
            stats = gpu.memory_stats()
            assert stats["limit_mb"] == 512.0 and stats["pool_total_mb"] <= 512.0
            totals.append(stats["pool_total_mb"])
    assert totals[-1] <= totals[1] * 1.1, totals  # flat after the first epochs


def test_chunks_are_four_per_thread_up_to_16_or_a_threads_share_up_to_64_for_a_cheap_stage():
    assert [chunk_size(b, t) for b, t in ((256, 4), (64, 2), (64, 1), (3, 4))] == [16, 8, 16, 1]
    assert [chunk_size(b, t, cheap=True) for b, t in ((256, 4), (64, 2), (512, 2), (3, 4))] == [64, 32, 64, 1]
