"""Batch arrays written in place and reused: never while anything refers to them, bounded in
number, and what a caller holds stays as it was."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import raypipe as rp
from raypipe import batch_buffers, fn, types
from raypipe.batch_buffers import BatchOutputs, BufferPool


def test_an_array_is_reused_only_once_nothing_refers_to_it():
    pool = BufferPool(capacity=2)
    first = pool.take((4, 3), np.float32)
    view = first[1:]
    del first
    second = pool.take((4, 3), np.float32)
    assert not np.shares_memory(second, view)  # the view keeps the first array in use
    del view, second
    again = pool.take((4, 3), np.float32)
    assert pool.allocated == 2 and again.shape == (4, 3)
    del again
    other = pool.take((2, 2), np.uint8)  # the pool is full: a free array of another shape makes room
    assert other.dtype == np.uint8 and pool.allocated == 3
    pool.clear()


def test_batch_outputs_give_rows_and_the_dense_batch():
    pool = BufferPool(capacity=4)
    outputs = BatchOutputs(pool, 3)
    rows = [outputs.row("x", p, (2,), np.dtype(np.int32)) for p in range(3)]
    for p, row in enumerate(rows):
        row[:] = p
    dense = outputs.dense("x", [0, 1, 2], rows)
    assert dense.shape == (3, 2) and np.array_equal(dense[:, 0], [0, 1, 2])
    assert np.shares_memory(outputs.dense("x", [0, 1], rows[:2]), dense)
    gapped = outputs.dense("x", [0, 2], [rows[0], rows[2]])  # a skipped sample: a compact copy
    assert np.array_equal(gapped[:, 0], [0, 2]) and not np.shares_memory(gapped, dense)
    assert outputs.row("x", 0, (5,), np.dtype(np.int32)) is None  # another shape: no row
    assert outputs.dense("x", [0, 1, 2], [rows[0], rows[1], rows[2].copy()]) is None


def test_a_filled_batch_copies_kept_rows_into_the_skipped_slots_in_place():
    outputs = BatchOutputs(BufferPool(capacity=4), 4)
    rows = {p: outputs.row("x", p, (2,), np.dtype(np.int32)) for p in (0, 2, 3)}  # position 1 was skipped
    for p, row in rows.items():
        row[:] = p
    kept = [rows[0], rows[2], rows[3]]
    whole = outputs.filled("x", [0, 2, 3], kept, [0, 0, 2, 3])
    assert whole.base is None and np.shares_memory(whole, rows[0]), "the batch array itself"
    assert whole[:, 0].tolist() == [0, 0, 2, 3]
    assert outputs.filled("x", [0, 2, 3], kept, [0, 2, 3]) is None, "a position for every row"
    assert outputs.filled("x", [0, 2, 3], [rows[0], rows[2], rows[3].copy()], [0, 0, 2, 3]) is None


@rp.pipeline_def(batch_size=4, num_threads=2, seed=5, prefetch_queue_depth=2)
def _normalized(files, skip=False):
    jpegs, labels = fn.readers.file(files=files, name="Reader")
    images = fn.decoders.image(jpegs, on_error="skip" if skip else "raise")
    images = fn.resize(images, resize_x=32, resize_y=24)
    images = fn.crop_mirror_normalize(images, mirror=fn.random.coin_flip(), mean=[10.0, 20, 30], dtype=types.FLOAT)
    return images, labels


def test_held_batches_stay_intact_while_arrays_are_reused(jpeg_files):
    with _normalized(jpeg_files[:8]) as pipe:
        held, _ = pipe.run()
        kept = held.as_tensor().copy()
        later = []
        for _ in range(12):
            images, _ = pipe.run()
            later.append(images.as_tensor().__array_interface__["data"][0])
            del images
            gc.collect()
        np.testing.assert_array_equal(held.as_tensor(), kept)
        pool = pipe.engine.executor._buffers
        assert pool.allocated <= pipe.engine.executor._cpu_size + pipe.engine.executor._gpu_size + 4
        assert len(set(later)) < len(later)  # dropped batches' arrays came back
    with _normalized(jpeg_files[:8]) as fresh:
        np.testing.assert_array_equal(fresh.run()[0].as_tensor(), kept)


def test_a_skipped_sample_leaves_a_compact_batch(jpeg_files, tmp_path):
    bad = tmp_path / "bad.jpg"
    bad.write_text("not an image")
    files = [jpeg_files[0], str(bad), jpeg_files[1], jpeg_files[2]]
    with _normalized(files, skip=True) as pipe:
        images, labels = pipe.run()
        assert len(images) == 3 and images.as_tensor().shape == (3, 3, 24, 32)
    with _normalized([jpeg_files[0], jpeg_files[1], jpeg_files[2], jpeg_files[0]]) as whole:
        reference, _ = whole.run()
    # the keyed randomness follows the sample index, so compare samples 0 only (same index in both)
    np.testing.assert_array_equal(images.at(0), reference.at(0))


@pytest.mark.parametrize("dtype", [types.FLOAT16, types.UINT8])
def test_narrow_outputs_in_place(jpeg_files, dtype):
    @rp.pipeline_def(batch_size=4, num_threads=2, seed=1)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:4])
        images = fn.resize(fn.decoders.image(jpegs), resize_x=16, resize_y=16)
        return fn.crop_mirror_normalize(images, dtype=dtype)

    with pipe() as p:
        (out,) = p.run()
    tensor = out.as_tensor()
    assert tensor.dtype == types.to_numpy_dtype(dtype) and tensor.shape == (4, 3, 16, 16)


def test_arrays_come_from_the_allocator_once_one_is_set():
    made = []

    def allocate(shape, dtype):
        made.append(shape)
        return np.full(shape, 9, dtype)

    pool = BufferPool(capacity=1)
    kept = pool.take((2, 2), np.uint8)
    pool.set_allocator(allocate, capacity=2)
    first = pool.take((2, 2), np.uint8)
    assert made == [(2, 2)] and first[0, 0] == 9 and not np.shares_memory(first, kept), "kept arrays forgotten"
    second = pool.take((2, 2), np.uint8)  # the first is in use: a second, kept by the larger pool
    del first, second
    assert pool.take((2, 2), np.uint8)[0, 0] == 9 and len(made) == 2, "reused, not made again"


def test_large_stacked_outputs_go_to_the_pool_and_small_ones_do_not():
    pool = BufferPool(capacity=2)
    small = pool.stack_target((64,), np.int32)
    large_shape = (4, batch_buffers.STACK_POOLED_BYTES // 4)
    large = pool.stack_target(large_shape, np.uint8)
    assert pool.allocated == 1 and small.shape == (64,) and large.shape == large_shape
    del large
    assert pool.take(large_shape, np.uint8) is not None and pool.allocated == 1, "the large one was pooled"


def test_a_pipeline_stacks_its_large_outputs_into_pooled_arrays(jpeg_files):
    """An output made of per-sample arrays (no operator writes rows) is stacked into the pool's
    arrays, so a pipeline actor's allocator (shared memory) receives it too."""
    made = []

    @rp.pipeline_def(batch_size=4, num_threads=1, seed=1)
    def resized():
        jpegs, labels = fn.readers.file(files=jpeg_files[:4])
        return fn.resize(fn.decoders.image(jpegs), resize_x=512, resize_y=512), labels

    def allocate(shape, dtype):
        made.append(tuple(shape))
        return np.empty(shape, dtype)

    with resized() as plain:
        reference = plain.run()[0].as_tensor().copy()
    with resized() as pipe:
        pipe.engine.set_host_allocator(allocate)
        images, labels = pipe.run()
        np.testing.assert_array_equal(images.as_tensor(), reference)
    assert set(made) == {(4, 512, 512, 3)}, "the images are pooled, the small labels are not"
