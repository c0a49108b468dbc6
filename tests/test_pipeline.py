"""The ResNet-50 training pipeline end to end: deterministic per seed, whatever the thread count."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, types
from raypipe.backend import GpuUnavailableWarning, gpu_available

MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]


@rp.pipeline_def(batch_size=6, num_threads=2, device_id=None, seed=7)
def train_pipe(file_root, gpu_stage=False):
    jpegs, labels = fn.readers.file(file_root=file_root, random_shuffle=True, name="Reader")
    images = fn.decoders.image_random_crop(jpegs, device="mixed" if gpu_stage else "cpu")
    images = fn.resize(images, resize_x=64, resize_y=64)
    images = fn.crop_mirror_normalize(
        images, mirror=fn.random.coin_flip(), dtype=types.FLOAT, output_layout="CHW", mean=MEAN, std=STD
    )
    return images, labels


def _epochs(pipe, n_batches=8):
    out = []
    with pipe:
        for _ in range(n_batches):
            images, labels = pipe.run()
            out.append((np.asarray(images.as_cpu()).copy(), np.asarray(labels).copy(), pipe.last_batch_info.epoch))
    return out


def test_contract_example_runs(jpeg_root):
    pipe = train_pipe(file_root=jpeg_root)
    pipe.build()
    images, labels = pipe.run()
    pipe.close()
    assert np.asarray(images).shape == (6, 3, 64, 64) and np.asarray(images).dtype == np.float32
    assert images.layout() == "CHW" and np.asarray(labels).shape == (6, 1)
    assert -3 < np.asarray(images).mean() < 3


@pytest.mark.parametrize("threads", [1, 3])
def test_same_seed_gives_identical_bytes_for_any_thread_count(jpeg_root, threads):
    reference = _epochs(train_pipe(file_root=jpeg_root, num_threads=2))
    other = _epochs(train_pipe(file_root=jpeg_root, num_threads=threads, prefetch_queue_depth=1))
    assert [e for *_, e in reference] == [0, 0, 0, 0, 1, 1, 1, 1]
    for (a, la, _), (b, lb, _) in zip(reference, other):
        assert a.tobytes() == b.tobytes() and np.array_equal(la, lb)


def test_different_seed_or_epoch_gives_different_batches(jpeg_root):
    a = _epochs(train_pipe(file_root=jpeg_root, seed=7), 4)
    b = _epochs(train_pipe(file_root=jpeg_root, seed=8), 4)
    assert all(x.tobytes() != y.tobytes() for (x, *_), (y, *_) in zip(a, b))
    order_epoch0 = np.concatenate([lab for _, lab, e in a if e == 0]).ravel()
    order_epoch1 = np.concatenate([lab for _, lab, e in _epochs(train_pipe(file_root=jpeg_root), 8)[4:]]).ravel()
    assert sorted(order_epoch0.tolist()) == sorted(order_epoch1.tolist())
    assert order_epoch0.tolist() != order_epoch1.tolist()


@pytest.mark.skipif(gpu_available(), reason="checks the machine without a GPU")
def test_without_gpu_mixed_pipeline_is_the_cpu_pipeline(jpeg_root):
    """Mixed and gpu operators fall back to the host path of device="cpu": identical arrays."""
    cpu = _epochs(train_pipe(file_root=jpeg_root), 3)
    gpu = _epochs(train_pipe(file_root=jpeg_root, gpu_stage=True), 3)
    for (a, la, ea), (b, lb, eb) in zip(cpu, gpu):
        assert a.tobytes() == b.tobytes() and np.array_equal(la, lb) and ea == eb


@pytest.mark.skipif(gpu_available(), reason="checks the machine without a GPU")
def test_device_id_without_gpu_warns_once_per_pipeline_and_runs_on_the_cpu(jpeg_root):
    with pytest.warns(GpuUnavailableWarning) as record:
        pipe = train_pipe(file_root=jpeg_root, gpu_stage=True, device_id=0)
        with pipe:
            images, _ = pipe.run()
            pipe.run()
            pipe.reset(epoch=0)
            again, _ = pipe.run()
    assert len([w for w in record if w.category is GpuUnavailableWarning]) == 1
    assert "device_id=0" in str(record[0].message) and record[0].filename == __file__
    assert images.device == "gpu" and np.asarray(images.as_cpu()).tobytes() == np.asarray(again).tobytes()
    reference = _epochs(train_pipe(file_root=jpeg_root), 1)[0][0]
    assert np.asarray(images).tobytes() == reference.tobytes()


def test_memory_stats_is_a_plain_dict(jpeg_root, monkeypatch):
    monkeypatch.setenv("RAYPIPE_GPU_MEMORY_MB", "300")
    with train_pipe(file_root=jpeg_root, gpu_stage=True) as pipe:
        stats = pipe.memory_stats()
    assert set(stats) == {"device_id", "pool_used_mb", "pool_total_mb", "limit_mb", "pinned_mb", "decoder_reserved_mb"}
    assert stats["limit_mb"] == 300.0
    if not gpu_available():
        assert stats["device_id"] is None and stats["pool_total_mb"] == stats["pinned_mb"] == 0.0


def test_reset_restarts_at_a_chosen_epoch(jpeg_root):
    pipe = train_pipe(file_root=jpeg_root)
    with pipe:
        assert pipe.epoch == 0
        first = [np.asarray(pipe.run()[1]).ravel().tolist() for _ in range(5)]
        assert pipe.epoch == 1  # 24 samples / 6: the fifth batch opened epoch 1
        pipe.reset(epoch=0)
        assert pipe.epoch == 0
        again = [np.asarray(pipe.run()[1]).ravel().tolist() for _ in range(5)]
        assert pipe.last_batch_info.epoch == 1
    assert first == again


@rp.pipeline_def(batch_size=4, num_threads=1, device_id=None, seed=3)
def images_and_masks(images, masks):
    """Two readers over parallel lists, shuffled alike (one seed), as segmentation pipelines read."""
    image, _ = fn.readers.file(files=images, random_shuffle=True, seed=11, name="Images")
    mask, _ = fn.readers.file(files=masks, random_shuffle=True, seed=11, name="Masks")
    return image, mask


def test_a_pipeline_with_several_readers_answers_per_reader(jpeg_files):
    images, masks = jpeg_files[:10], jpeg_files[10:20]
    with images_and_masks(images, masks) as pipe:
        pipe.run()
        assert pipe.epoch_size() == {"Images": 10, "Masks": 10}
        assert pipe.epoch_size("Masks") == 10
        assert pipe.reader_meta("Masks") == pipe.reader_meta() == pipe.reader_meta("Images")
        assert pipe.dataset_digest("Masks") != pipe.dataset_digest("Images") == pipe.dataset_digest()
        assert pipe.reader_label("Masks") == "'Masks'" and pipe.reader_label() == "'Images'"
        assert pipe.read_stats("Masks") == {}
        with pytest.raises(rp.ArgumentError, match="no reader named 'Labels'.*readers are 'Images', 'Masks'"):
            pipe.reader_meta("Labels")


def test_a_position_state_covers_every_readers_dataset(jpeg_files):
    with images_and_masks(jpeg_files[:10], jpeg_files[10:20]) as pipe:
        pipe.run()
        state = pipe.state_dict()
    with images_and_masks(jpeg_files[:10], jpeg_files[14:24]) as other:
        with pytest.raises(rp.ArgumentError, match="dataset_digest"):
            other.load_state_dict(state)
    with images_and_masks(jpeg_files[:10], jpeg_files[10:20]) as same:
        same.load_state_dict(state)
        assert same.state_dict() == state


def test_numbers_arrays_and_lists_are_outputs_as_in_dali():
    """A pipeline may return a number, an array or a list beside its data: each is a constant output
    of every sample, typed as DALI types them (int32, float32, a ``types.Constant``'s dtype)."""

    @rp.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        data = fn.random.uniform(range=(0, 1))
        return data, np.array([-1]), 3, np.float32(2.5), [1, 2], types.Constant(7, types.UINT8)

    p = pipe()
    p.build()
    _, *constants = p.run()
    got = [(np.asarray(c[1]).tolist(), np.asarray(c[1]).dtype) for c in constants]
    assert got == [([-1], np.int32), (3, np.int32), (2.5, np.float32), ([1, 2], np.int32), (7, np.uint8)]
