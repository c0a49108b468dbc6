"""Framework iterators over real pipelines decoding the real JPEG fixture files.

Most pipelines give the reader ``labels=range(N)``, so a sample's label is its sample
index and the tests can say exactly which samples every yielded row holds.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from raypipe import ArgumentError, PipelineDefinitionError, TensorList, fn, pipeline_def
from raypipe.backend import GpuUnavailableWarning, gpu_available
from raypipe.iterators import LastBatchPolicy, NumpyIterator, TorchIterator, to_torch

SIDE = 64
NAMES = ["images", "labels"]


def _corner(image: np.ndarray) -> np.ndarray:
    """Top-left SIDE x SIDE pixels: one shape for every sample (the fixtures are larger)."""
    return image[:SIDE, :SIDE]


@pipeline_def(batch_size=5, num_threads=1, seed=7)
def image_pipe(files, ragged=False, on_error="raise", **reader):
    jpegs, labels = fn.readers.file(files=files, labels=list(range(len(files))), name="Reader", **reader)
    images = fn.decoders.image(jpegs, on_error=on_error, name="images")
    if not ragged:
        images = fn.python_function(images, function=_corner, device="cpu")
    return images, labels


@pipeline_def(batch_size=6, num_threads=1, seed=7)
def folder_pipe(root):
    jpegs, labels = fn.readers.file(file_root=root, name="Reader")
    return fn.python_function(fn.decoders.image(jpegs), function=_corner, device="cpu"), labels


@pipeline_def(batch_size=5, num_threads=1, seed=7, device_id=0)
def gpu_stage_pipe(files):
    jpegs, labels = fn.readers.file(files=files, labels=list(range(len(files))))
    images = fn.decoders.image(jpegs, device="mixed")
    return fn.python_function(images, function=lambda batch: [_corner(x) for x in batch], device="gpu"), labels


def run_epoch(it) -> list[tuple[dict, object]]:
    """Every batch of one epoch with the info of its rows."""
    return [(batch, it.last_batch_info) for batch in it]


def labels_of(batch: dict) -> list[int]:
    return np.asarray(batch["labels"]).ravel().tolist()


def real_labels(batches) -> list[int]:
    """Labels of the rows that are not padding, in yield order."""
    return [i for b, info in batches for i, pad in zip(labels_of(b), info.is_pad, strict=True) if not pad]


# (num_shards, shard_id) -> policy -> rows per batch, for 24 files in batches of 5
EXPECTED_ROWS = {
    (1, 0): {"fill": [5, 5, 5, 5, 5], "partial": [5, 5, 5, 5, 4], "drop": [5, 5, 5, 5]},
    (2, 0): {"fill": [5, 5, 5], "partial": [5, 5, 2], "drop": [5, 5]},
    (2, 1): {"fill": [5, 5, 5], "partial": [5, 5, 2], "drop": [5, 5]},
}


@pytest.mark.parametrize("shards", list(EXPECTED_ROWS))
@pytest.mark.parametrize("policy", ["fill", "partial", "drop"])
def test_policy_gives_the_right_batches_and_covers_the_shard_once(jpeg_files, shards, policy):
    num_shards, shard_id = shards
    with image_pipe(jpeg_files, num_shards=num_shards, shard_id=shard_id) as pipe:
        it = TorchIterator(pipe, NAMES, reader_name="Reader", last_batch_policy=policy)
        expected_len = len(it)
        batches = run_epoch(it)
    rows = [len(b["images"]) for b, _ in batches]
    assert rows == EXPECTED_ROWS[shards][policy]
    assert expected_len == len(rows)
    assert [len(b["labels"]) for b, _ in batches] == rows
    assert [info.index for _, info in batches] == list(range(len(rows)))
    for batch, info in batches:
        assert labels_of(batch) == info.sample_indices  # rows line up with their info
    size = 24 // num_shards
    start = shard_id * size
    if policy == "drop":
        assert real_labels(batches) == list(range(start, start + 5 * len(rows)))
    else:
        assert sorted(real_labels(batches)) == list(range(start, start + size))  # each sample exactly once
    pads = [info.num_pad for _, info in batches]
    assert sum(pads) == (5 * len(rows) - size if policy == "fill" else 0)


def test_every_shard_yields_the_same_batch_count_when_shards_differ_in_size(jpeg_files):
    # 21 files on 2 shards: 10 and 11 samples, 3 batches of 5 each; shard 0's last batch is all padding
    counts = {}
    for shard_id in (0, 1):
        for policy in ("fill", "partial"):
            with image_pipe(jpeg_files[:21], num_shards=2, shard_id=shard_id) as pipe:
                it = NumpyIterator(pipe, NAMES, reader_name="Reader", last_batch_policy=policy)
                batches = run_epoch(it)
            counts[shard_id, policy] = [len(b["labels"]) for b, _ in batches]
            assert len(it) == 3
    assert counts[0, "fill"] == counts[1, "fill"] == [5, 5, 5]
    assert counts[0, "partial"] == [5, 5, 0]  # trimmed down to nothing, but still a batch
    assert counts[1, "partial"] == [5, 5, 1]


def test_drop_len_follows_the_shard_read_in_each_epoch(jpeg_files):
    # 23 files on 2 shards of 11 and 12 samples, batches of 4: shards swap every epoch
    with image_pipe(jpeg_files[:23], batch_size=4, num_shards=2, shard_id=0) as pipe:
        it = TorchIterator(pipe, NAMES, reader_name="Reader", last_batch_policy=LastBatchPolicy.DROP, auto_reset=True)
        seen = []
        for epoch in range(3):
            assert it.epoch == epoch
            expected = len(it)
            batches = run_epoch(it)
            assert len(batches) == expected
            seen.append((expected, real_labels(batches)))
    assert seen[0] == (2, list(range(0, 8)))  # shard 0: 11 samples -> 2 full batches
    assert seen[1] == (3, list(range(11, 23)))  # shard 1: 12 samples -> 3 full batches
    assert seen[2] == seen[0]


def test_partial_trims_exactly_the_padding_of_fill(jpeg_files):
    with image_pipe(jpeg_files) as fill_pipe, image_pipe(jpeg_files) as partial_pipe:
        fill = run_epoch(TorchIterator(fill_pipe, NAMES, last_batch_policy="fill"))
        partial = run_epoch(TorchIterator(partial_pipe, NAMES, last_batch_policy="partial"))
    assert len(fill) == len(partial) == 5
    for (full, full_info), (part, part_info) in zip(fill, partial, strict=True):
        keep = full_info.is_pad.count(False)
        assert len(part["images"]) == keep
        assert torch.equal(part["images"], full["images"][:keep])
        assert torch.equal(part["labels"], full["labels"][:keep])
        assert part_info.sample_indices == full_info.sample_indices[:keep]
        assert part_info.is_pad == [False] * keep
    assert fill[-1][1].is_pad == [False] * 4 + [True]


@pytest.mark.parametrize(("pad_last_batch", "filler"), [(False, 0), (True, 23)])
def test_fill_returns_full_batches_topped_up_by_the_reader(jpeg_files, pad_last_batch, filler):
    with image_pipe(jpeg_files, pad_last_batch=pad_last_batch) as pipe:
        batches = run_epoch(TorchIterator(pipe, NAMES))
    assert all(b["images"].shape == (5, SIDE, SIDE, 3) for b, _ in batches)
    last, info = batches[-1]
    assert labels_of(last) == [20, 21, 22, 23, filler]  # wraps to the shard start, or repeats its end
    assert info.is_pad == [False, False, False, False, True]
    assert info.last_in_epoch


def test_auto_reset_runs_consecutive_epochs_over_moving_shards(jpeg_files):
    with image_pipe(jpeg_files, num_shards=2, shard_id=1) as pipe:
        it = TorchIterator(pipe, NAMES, reader_name="Reader", last_batch_policy="partial", auto_reset=True)
        epochs = []
        for _ in range(3):
            batches = run_epoch(it)
            assert len(batches) == 3
            epochs.append((batches[0][1].epoch, sorted(real_labels(batches))))
    assert epochs == [(0, list(range(12, 24))), (1, list(range(0, 12))), (2, list(range(12, 24)))]
    assert it.epoch == 3


def test_without_auto_reset_the_iterator_stays_exhausted_until_reset(jpeg_files):
    with image_pipe(jpeg_files) as pipe:
        it = NumpyIterator(pipe, NAMES, reader_name="Reader")
        assert len(run_epoch(it)) == 5
        for _ in range(2):
            with pytest.raises(StopIteration):
                next(it)
        assert run_epoch(it) == []
        assert it.epoch == 0
        it.reset()
        assert it.epoch == 1
        batch = next(it)
        assert (it.last_batch_info.epoch, it.last_batch_info.index) == (1, 0)
        assert labels_of(batch) == [0, 1, 2, 3, 4]


def test_reset_mid_epoch_starts_the_next_epoch_at_batch_zero(jpeg_files):
    with image_pipe(jpeg_files) as pipe:
        it = TorchIterator(pipe, NAMES, reader_name="Reader")
        next(it)
        next(it)
        assert it.last_batch_info.index == 1
        it.reset()
        it.reset()  # nothing taken from epoch 1 yet: a no-op
        batches = run_epoch(it)
    assert [(info.epoch, info.index) for _, info in batches] == [(1, b) for b in range(5)]
    assert sorted(real_labels(batches)) == list(range(24))


def test_iterator_starts_at_an_epoch_boundary_of_a_used_pipeline(jpeg_files):
    with image_pipe(jpeg_files) as pipe:
        pipe.run()  # looked at one batch of epoch 0 before wrapping the pipeline
        it = TorchIterator(pipe, NAMES)
        assert it.epoch == 1
        next(it)
        assert (it.last_batch_info.epoch, it.last_batch_info.index) == (1, 0)
        pipe.reset(epoch=4)
        restarted = TorchIterator(pipe, NAMES, reader_name="Reader", last_batch_policy="drop")
        assert restarted.epoch == 4  # learned by fetching the first batch, which is then yielded
        assert len(restarted) == 4
        first = next(restarted)
        assert (restarted.last_batch_info.epoch, restarted.last_batch_info.index) == (4, 0)
        assert labels_of(first) == [0, 1, 2, 3, 4]


def test_torch_tensors_share_memory_with_the_pipeline_batch(jpeg_files):
    with image_pipe(jpeg_files) as pipe:
        images, labels = pipe.run()
        for tl in (images, labels):
            array = np.asarray(tl)
            tensor = to_torch(tl)
            assert tensor.data_ptr() == array.__array_interface__["data"][0]
            assert np.shares_memory(tensor.numpy(), array)
        it = TorchIterator(pipe, NAMES)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # e.g. torch's warning about non-writable arrays
            batches = run_epoch(it)
    assert len(batches) == 5
    for batch, _ in batches:
        assert batch["images"].dtype == torch.uint8 and batch["images"].shape == (5, SIDE, SIDE, 3)
        assert batch["labels"].dtype == torch.int32 and batch["labels"].shape == (5, 1)
    first = batches[0][0]["images"]
    first[0, 0, 0, 0] = 255 - first[0, 0, 0, 0]  # writable, and not shared with any later batch
    assert not any(np.shares_memory(first.numpy(), b["images"].numpy()) for b, _ in batches[1:])


def test_read_only_batch_is_copied_once_without_a_torch_warning():
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    array.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tensor = to_torch(TensorList(array, "cpu"))
    assert tensor.dtype == torch.float32 and tensor.shape == (3, 4)
    assert np.array_equal(tensor.numpy(), array)
    assert not np.shares_memory(tensor.numpy(), array)


def test_numpy_iterator_yields_the_same_batches_as_arrays(jpeg_root):
    with folder_pipe(jpeg_root) as torch_pipe, folder_pipe(jpeg_root) as numpy_pipe:
        as_torch = run_epoch(TorchIterator(torch_pipe, reader_name="Reader"))
        as_numpy = run_epoch(NumpyIterator(numpy_pipe, reader_name="Reader"))
    assert len(as_torch) == len(as_numpy) == 4  # 24 files in batches of 6
    for (t, _), (n, info) in zip(as_torch, as_numpy, strict=True):
        assert set(n) == {"data0", "data1"}  # default output names
        assert isinstance(n["data0"], np.ndarray) and n["data0"].dtype == np.uint8
        assert np.array_equal(t["data0"].numpy(), n["data0"])
        assert n["data1"].ravel().tolist() == [i // 6 for i in info.sample_indices]  # class folder labels


def test_gpu_stage_outputs_convert_on_their_device(jpeg_files):
    # without a GPU the GPU stage runs on the host (with one warning) and its batches stay there
    with gpu_stage_pipe(jpeg_files[:10]) as gpu_pipe, image_pipe(jpeg_files[:10]) as host_pipe:
        if gpu_available():
            on_device = run_epoch(TorchIterator(gpu_pipe, NAMES))
        else:
            with pytest.warns(GpuUnavailableWarning, match="device_id=0 asks for a GPU but none is usable"):
                on_device = run_epoch(TorchIterator(gpu_pipe, NAMES))
        on_host = run_epoch(NumpyIterator(host_pipe, NAMES))
    assert len(on_device) == len(on_host) == 2
    for (t, _), (n, _) in zip(on_device, on_host, strict=True):
        assert t["images"].device.type == ("cuda" if gpu_available() else "cpu")
        assert t["labels"].device.type == "cpu"  # the reader's labels never left the host
        assert np.array_equal(t["images"].cpu().numpy(), n["images"])


@pytest.mark.parametrize("iterator", [TorchIterator, NumpyIterator])
def test_ragged_output_raises_a_clear_error(jpeg_files, iterator):
    with image_pipe(jpeg_files, ragged=True) as pipe:
        it = iterator(pipe, NAMES)
        with pytest.raises(PipelineDefinitionError, match=r"output 'images' .*different shapes.*resize or crop"):
            next(it)


def test_skipped_samples_are_gone_and_partial_trims_only_padding(jpeg_files, tmp_path):
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"not a jpeg at all")
    files = jpeg_files[:11] + [str(bad)]  # sample 11 cannot be decoded; last batch: 10, 11, then padding
    rows = {}
    for policy in ("fill", "partial", "drop"):
        with image_pipe(files, on_error="skip") as pipe:
            batches = run_epoch(TorchIterator(pipe, NAMES, last_batch_policy=policy))
        rows[policy] = [labels_of(b) for b, _ in batches]
        assert all(labels_of(b) == info.sample_indices for b, info in batches)
    assert rows["fill"] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 0, 1, 2]]
    assert rows["partial"] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10]]
    assert rows["drop"] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]


def test_a_batch_with_every_sample_skipped_is_passed_over(jpeg_files, tmp_path):
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"\xff\xd8 truncated")
    files = [str(bad)] * 5 + jpeg_files[:5]
    with image_pipe(files, on_error="skip") as pipe:
        it = TorchIterator(pipe, NAMES, auto_reset=True)
        for epoch in range(2):
            batches = run_epoch(it)
            assert [(info.epoch, info.index) for _, info in batches] == [(epoch, 1)]
            assert labels_of(batches[0][0]) == [5, 6, 7, 8, 9]


def test_len_needs_a_reader_name_but_iteration_does_not(jpeg_files):
    with image_pipe(jpeg_files) as pipe:
        it = TorchIterator(pipe, NAMES)
        with pytest.raises(TypeError, match="reader_name"):
            len(it)
        batches = list(it)  # list() must not trip over len()
    assert [len(b["labels"]) for b in batches] == [5] * 5


def test_policy_names_and_enum_members_are_equivalent(jpeg_files):
    counts = []
    for policy in ("drop", "DROP", LastBatchPolicy.DROP):
        with image_pipe(jpeg_files) as pipe:
            it = NumpyIterator([pipe], NAMES, reader_name="Reader", last_batch_policy=policy)
            counts.append((len(it), len(run_epoch(it))))
    assert counts == [(4, 4)] * 3
    assert LastBatchPolicy.FILL is LastBatchPolicy.PAD, "one vocabulary: DALI's FILL is the service's pad"
    assert {LastBatchPolicy.parse(n) for n in ("fill", "pad", "FILL", LastBatchPolicy.FILL)} == {LastBatchPolicy.PAD}


def test_bad_arguments_raise_argument_error(jpeg_files):
    with image_pipe(jpeg_files) as pipe, image_pipe(jpeg_files) as other:
        with pytest.raises(ArgumentError, match="last_batch_policy must be one of 'pad' .*'fill'.*'drop', 'partial'"):
            TorchIterator(pipe, last_batch_policy="ends")
        with pytest.raises(ArgumentError, match="one pipeline, got 2.*distributed service"):
            TorchIterator([pipe, other])
        with pytest.raises(ArgumentError, match="one pipeline, got 0"):
            NumpyIterator([])
        with pytest.raises(ArgumentError, match="needs a raypipe Pipeline"):
            TorchIterator("pipe")
        with pytest.raises(ArgumentError, match="unique"):
            TorchIterator(pipe, ["x", "x"])
        with pytest.raises(ArgumentError, match="list of names"):
            TorchIterator(pipe, "images")
        with pytest.raises(ArgumentError, match="auto_reset"):
            TorchIterator(pipe, auto_reset="yes")
        with pytest.raises(ArgumentError, match="no reader named 'Loader'"):
            TorchIterator(pipe, reader_name="Loader")
        with pytest.raises(ArgumentError, match="3 names but the pipeline has 2 outputs"):
            next(TorchIterator(pipe, ["a", "b", "c"]))
