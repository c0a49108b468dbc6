"""raypipe.plugin.pytorch over real pipelines decoding the real JPEG fixture files, and side by side
with DALI's own nvidia.dali.plugin.pytorch where DALI is installed."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
import torch

import raypipe as rp
from raypipe import ArgumentError, PipelineDefinitionError, TensorList, fn, last_batch, pipeline_def
from raypipe.backend import GpuUnavailableWarning, gpu_available
from raypipe.plugin import base_iterator
from raypipe.plugin import numpy as numpy_plugin
from raypipe.plugin.pytorch import (
    DALIClassificationIterator,
    DALIGenericIterator,
    LastBatchPolicy,
    feed_ndarray,
    to_torch,
    to_torch_type,
)
from tests.plugin.pipelines import (
    NAMES,
    SIDE,
    _corner,
    drain,
    image_pipe,
    label_pipe,
    labels_of,
    real_labels,
    run_epoch,
)

DEPRECATED_SIZE = "ignore:Please set `reader_name`"


@pipeline_def(batch_size=5, num_threads=1, seed=7, device_id=0)
def gpu_stage_pipe(files):
    jpegs, labels = fn.readers.file(files=files, labels=list(range(len(files))))
    images = fn.decoders.image(jpegs, device="mixed")
    return fn.python_function(images, function=lambda batch: [_corner(x) for x in batch], device="gpu"), labels


def test_each_step_is_a_list_with_one_dict_per_pipeline(jpeg_files):
    with (
        image_pipe(jpeg_files, shard_id=0, num_shards=2) as first,
        image_pipe(jpeg_files, shard_id=1, num_shards=2) as second,
    ):
        it = DALIGenericIterator([first, second], NAMES, reader_name="Reader")
        steps = run_epoch(it)
    assert len(steps) == len(it) == 3  # 12 samples per shard in batches of 5
    for step, infos in steps:
        assert isinstance(step, list) and len(step) == 2 and len(infos) == 2
        for batch, info in zip(step, infos, strict=True):
            assert list(batch) == NAMES
            assert batch["images"].dtype == torch.uint8 and batch["images"].shape == (5, SIDE, SIDE, 3)
            assert batch["labels"].dtype == torch.int32 and batch["labels"].shape == (5, 1)
            assert labels_of(batch) == info.sample_indices
    assert sorted(real_labels(steps, 0)) == list(range(12))
    assert sorted(real_labels(steps, 1)) == list(range(12, 24))


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
        it = DALIGenericIterator(pipe, NAMES, reader_name="Reader", last_batch_policy=policy)
        expected_len = len(it)
        steps = run_epoch(it)
    rows = [len(step[0]["images"]) for step, _ in steps]
    assert rows == EXPECTED_ROWS[shards][policy]
    assert expected_len == len(rows)
    assert [len(step[0]["labels"]) for step, _ in steps] == rows
    assert [infos[0].index for _, infos in steps] == list(range(len(rows)))
    for step, infos in steps:
        assert labels_of(step[0]) == infos[0].sample_indices  # rows line up with their info
    size = 24 // num_shards
    start = shard_id * size
    if policy == "drop":
        assert real_labels(steps) == list(range(start, start + 5 * len(rows)))
    else:
        assert sorted(real_labels(steps)) == list(range(start, start + size))  # each sample exactly once
    pads = [infos[0].num_pad for _, infos in steps]
    assert sum(pads) == (5 * len(rows) - size if policy == "fill" else 0)


def test_every_shard_yields_the_same_batch_count_when_shards_differ_in_size(jpeg_files):
    # 21 files on 2 shards: 10 and 11 samples, 3 batches of 5 each; shard 0's last batch is all padding
    counts = {}
    for shard_id, policy in itertools.product((0, 1), ("fill", "partial", "drop")):
        with label_pipe(jpeg_files[:21], num_shards=2, shard_id=shard_id) as pipe:
            it = DALIGenericIterator(pipe, ["labels"], reader_name="Reader", last_batch_policy=policy)
            counts[shard_id, policy] = (len(it), [len(step[0]["labels"]) for step, _ in run_epoch(it)])
    assert counts[0, "fill"] == counts[1, "fill"] == (3, [5, 5, 5])
    assert counts[0, "partial"] == (3, [5, 5, 0])  # trimmed down to nothing, but still a batch
    assert counts[1, "partial"] == (3, [5, 5, 1])
    assert counts[0, "drop"] == counts[1, "drop"] == (2, [5, 5])


def test_drop_yields_the_smallest_shards_full_batches_on_every_shard_in_every_epoch(jpeg_files):
    # 23 files on 2 shards of 11 and 12 samples, batches of 4: shards swap every epoch, and every
    # shard yields 11 // 4 = 2 batches (as DALI counts), though 12 samples would make 3
    seen = {}
    for shard_id in (0, 1):
        with label_pipe(jpeg_files[:23], batch_size=4, num_shards=2, shard_id=shard_id) as pipe:
            it = DALIGenericIterator(
                pipe, ["labels"], reader_name="Reader", last_batch_policy=LastBatchPolicy.DROP, auto_reset=True
            )
            assert (len(it), it.size) == (2, 11)
            for epoch in range(3):
                assert it.epoch == epoch
                seen[shard_id, epoch] = real_labels(run_epoch(it))
    assert seen[0, 0] == seen[1, 1] == seen[0, 2] == list(range(0, 8))
    assert seen[1, 0] == seen[0, 1] == seen[1, 2] == list(range(11, 19))


def test_partial_trims_exactly_the_padding_of_fill(jpeg_files):
    with image_pipe(jpeg_files) as fill_pipe, image_pipe(jpeg_files) as partial_pipe:
        fill = run_epoch(DALIGenericIterator(fill_pipe, NAMES, last_batch_policy="fill"))
        partial = run_epoch(DALIGenericIterator(partial_pipe, NAMES, last_batch_policy="partial"))
    assert len(fill) == len(partial) == 5
    for (full, full_infos), (part, part_infos) in zip(fill, partial, strict=True):
        keep = full_infos[0].is_pad.count(False)
        assert len(part[0]["images"]) == keep
        assert torch.equal(part[0]["images"], full[0]["images"][:keep])
        assert torch.equal(part[0]["labels"], full[0]["labels"][:keep])
        assert part_infos[0].sample_indices == full_infos[0].sample_indices[:keep]
        assert part_infos[0].is_pad == [False] * keep
    assert fill[-1][1][0].is_pad == [False] * 4 + [True]


@pytest.mark.parametrize(("pad_last_batch", "filler"), [(False, 0), (True, 23)])
def test_fill_returns_full_batches_topped_up_by_the_reader(jpeg_files, pad_last_batch, filler):
    with image_pipe(jpeg_files, pad_last_batch=pad_last_batch) as pipe:
        steps = run_epoch(DALIGenericIterator(pipe, NAMES, reader_name="Reader"))
    assert all(step[0]["images"].shape == (5, SIDE, SIDE, 3) for step, _ in steps)
    last, infos = steps[-1]
    assert labels_of(last[0]) == [20, 21, 22, 23, filler]  # wraps to the shard start, or repeats its end
    assert infos[0].is_pad == [False, False, False, False, True]
    assert infos[0].last_in_epoch


@pytest.mark.parametrize("auto_reset", [True, "yes"])
def test_auto_reset_runs_consecutive_epochs_over_moving_shards(jpeg_files, auto_reset):
    with label_pipe(jpeg_files, num_shards=2, shard_id=1) as pipe:
        it = DALIGenericIterator(
            pipe, ["labels"], reader_name="Reader", last_batch_policy="partial", auto_reset=auto_reset
        )
        epochs = []
        for _ in range(3):
            steps = run_epoch(it)
            assert len(steps) == 3
            epochs.append((steps[0][1][0].epoch, sorted(real_labels(steps))))
    assert epochs == [(0, list(range(12, 24))), (1, list(range(0, 12))), (2, list(range(12, 24)))]
    assert it.epoch == 3


@pytest.mark.parametrize("auto_reset", [False, None, "no"])
def test_without_auto_reset_the_iterator_stays_exhausted_until_reset(jpeg_files, auto_reset):
    with label_pipe(jpeg_files) as pipe:
        it = DALIGenericIterator(pipe, ["labels"], reader_name="Reader", auto_reset=auto_reset)
        assert len([next(it) for _ in range(5)]) == 5
        for _ in range(2):
            with pytest.raises(StopIteration):
                next(it)
        assert it.epoch == 0
        it.reset()
        assert it.epoch == 1
        step = it.next()
        assert (it.last_batch_info[0].epoch, it.last_batch_info[0].index) == (1, 0)
        assert labels_of(step[0]) == [0, 1, 2, 3, 4]


def test_iterating_again_after_the_epoch_starts_the_next_one(jpeg_files):
    # as in DALI, iter() resets an iterator whose epoch is over: for-loops need no reset()
    with label_pipe(jpeg_files) as pipe:
        it = DALIGenericIterator(pipe, ["labels"], reader_name="Reader")
        epochs = [[info[0].epoch for _, info in run_epoch(it)] for _ in range(2)]
    assert epochs == [[0] * 5, [1] * 5]


@pytest.mark.filterwarnings(DEPRECATED_SIZE)
@pytest.mark.parametrize("policy", ["fill", "partial", "drop"])
@pytest.mark.parametrize("counted_by", [{"reader_name": "Reader"}, {"size": 23}])
def test_reset_after_len_steps_needs_no_stop_iteration(jpeg_files, policy, counted_by):
    # training loops often take len(it) steps and reset(); the epoch is over then, even for DROP
    with label_pipe(jpeg_files[:23]) as pipe:
        it = DALIGenericIterator(pipe, ["labels"], last_batch_policy=policy, **counted_by)
        for epoch in range(2):
            steps = [labels_of(it.next()[0]) for _ in range(len(it))]
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                it.reset()
            assert steps[0] == [0, 1, 2, 3, 4], f"epoch {epoch} starts at the shard start"
            assert len(steps) == (4 if policy == "drop" else 5)


def test_reset_mid_epoch_is_ignored_with_a_warning_as_in_dali(jpeg_files):
    with label_pipe(jpeg_files) as pipe:
        it = DALIGenericIterator(pipe, ["labels"], reader_name="Reader")
        with pytest.warns(UserWarning, match=r"DALIGenericIterator.reset\(\): the epoch is not finished"):
            it.reset()  # before the first batch
        first = [labels_of(next(it)[0]) for _ in range(2)]
        with pytest.warns(UserWarning, match="resetting mid-epoch is ignored"):
            it.reset()
        with pytest.warns(UserWarning, match="resetting mid-epoch is ignored"):
            rest = [labels_of(step[0]) for step, _ in run_epoch(it)]  # iter() resets too: ignored
    assert first + rest == [list(range(b, b + 5)) for b in range(0, 20, 5)] + [[20, 21, 22, 23, 0]]


def test_without_reader_name_reset_mid_epoch_starts_the_next_epoch(jpeg_files):
    with label_pipe(jpeg_files) as pipe:
        it = DALIGenericIterator(pipe, ["labels"])
        it.reset()  # nothing yielded yet: a no-op
        next(it)
        next(it)
        assert it.last_batch_info[0].index == 1
        it.reset()
        it.reset()  # nothing taken from epoch 1 yet: a no-op
        steps = run_epoch(it)
    assert [(infos[0].epoch, infos[0].index) for _, infos in steps] == [(1, b) for b in range(5)]
    assert sorted(real_labels(steps)) == list(range(24))


def test_the_iterator_continues_at_the_pipelines_position(jpeg_files):
    with label_pipe(jpeg_files) as pipe:
        pipe.run()  # looked at one batch of epoch 0 before wrapping the pipeline
        it = DALIGenericIterator(pipe, ["labels"], reader_name="Reader")
        steps = run_epoch(it)
        assert [(infos[0].epoch, infos[0].index) for _, infos in steps] == [(0, b) for b in range(1, 5)]
        assert len(it) == 5  # len() is the whole epoch's, as in DALI
        pipe.reset(epoch=4)
        restarted = DALIGenericIterator(pipe, ["labels"], reader_name="Reader", last_batch_policy="drop")
        assert restarted.epoch == 4 and len(restarted) == 4
        assert labels_of(next(restarted)[0]) == [0, 1, 2, 3, 4]
        assert (restarted.last_batch_info[0].epoch, restarted.last_batch_info[0].index) == (4, 0)


@pytest.mark.parametrize("prepare_first_batch", [True, False])
def test_prepare_first_batch_reads_the_first_batch_while_constructing(jpeg_files, prepare_first_batch):
    with label_pipe(jpeg_files) as pipe:
        it = DALIGenericIterator(pipe, ["labels"], reader_name="Reader", prepare_first_batch=prepare_first_batch)
        ran = pipe.last_batch_info
        assert (ran is not None) == prepare_first_batch
        assert (it.state_dict()["epoch"], it.state_dict()["offset"]) == (0, 0)  # the next batch is still batch 0
        assert it.last_batch_info is None
        assert labels_of(next(it)[0]) == [0, 1, 2, 3, 4]
        assert it.state_dict()["offset"] == 5


def test_torch_tensors_share_memory_with_the_pipeline_batch(jpeg_files):
    with image_pipe(jpeg_files) as pipe:
        images, labels = pipe.run()
        for tl in (images, labels):
            array = np.asarray(tl)
            tensor = to_torch(tl)
            assert tensor.data_ptr() == array.__array_interface__["data"][0]
            assert np.shares_memory(tensor.numpy(), array)
        it = DALIGenericIterator(pipe, NAMES)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # e.g. torch's warning about non-writable arrays
            steps = run_epoch(it)
    assert len(steps) == 4  # the rest of epoch 0
    first = steps[0][0][0]["images"]
    first[0, 0, 0, 0] = 255 - first[0, 0, 0, 0]  # writable, and not shared with any later batch
    assert not any(np.shares_memory(first.numpy(), step[0]["images"].numpy()) for step, _ in steps[1:])


def test_read_only_batch_is_copied_once_without_a_torch_warning():
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    array.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tensor = to_torch(TensorList(array, "cpu"))
    assert tensor.dtype == torch.float32 and tensor.shape == (3, 4)
    assert np.array_equal(tensor.numpy(), array)
    assert not np.shares_memory(tensor.numpy(), array)


def test_feed_ndarray_copies_a_batch_into_a_tensor():
    batch = TensorList(np.arange(24, dtype=np.uint8).reshape(2, 3, 4), "cpu")
    target = torch.zeros((2, 3, 4), dtype=torch.uint8)
    assert feed_ndarray(batch, target) is target
    assert torch.equal(target, torch.arange(24, dtype=torch.uint8).reshape(2, 3, 4))
    assert not np.shares_memory(target.numpy(), np.asarray(batch))
    with pytest.raises(ArgumentError, match=r"feed_ndarray: the batch holds torch.uint8 but arr is torch.float32"):
        feed_ndarray(batch, torch.zeros((2, 3, 4)))
    with pytest.raises(ArgumentError, match=r"feed_ndarray: the batch has shape \(2, 3, 4\) but arr \(2, 12\)"):
        feed_ndarray(batch, torch.zeros((2, 12), dtype=torch.uint8))


@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.float16, np.float32, np.bool_])
def test_to_torch_type_allocates_the_tensor_feed_ndarray_fills_as_dali_scripts_do(dtype):
    """DALI scripts allocate with ``to_torch_type[batch.dtype]`` (a ``types.DALIDataType``) and
    fill with ``feed_ndarray``; the batch's numpy dtype is a key too."""
    batch = TensorList(np.arange(24).reshape(2, 3, 4).astype(dtype), "cpu")
    target = torch.empty(batch.as_tensor().shape, dtype=to_torch_type[batch.dtype])
    assert to_torch_type[batch.as_tensor().dtype] is target.dtype
    feed_ndarray(batch, target)
    assert np.array_equal(target.numpy(), np.asarray(batch))


def test_feed_ndarray_takes_the_arrays_dali_gives_as_tensors():
    """DALI's ``feed_ndarray(tl.as_tensor(), t)`` and ``feed_ndarray(tl[i], t)``: raypipe gives
    the arrays themselves, and feed_ndarray takes them."""
    batch = TensorList(np.arange(24, dtype=np.int32).reshape(2, 3, 4), "cpu")
    whole = feed_ndarray(batch.as_tensor(), torch.empty((2, 3, 4), dtype=torch.int32))
    assert np.array_equal(whole.numpy(), np.asarray(batch))
    sample = feed_ndarray(batch[1], torch.empty((3, 4), dtype=torch.int32))
    assert np.array_equal(sample.numpy(), np.asarray(batch)[1])
    with pytest.raises(ArgumentError, match=r"feed_ndarray: the batch has shape \(3, 4\) but arr \(2, 3, 4\)"):
        feed_ndarray(batch[0], torch.empty((2, 3, 4), dtype=torch.int32))


def test_to_torch_type_maps_every_type_dalis_maps_to_the_same_torch_type():
    dali_pytorch = pytest.importorskip("nvidia.dali.plugin.pytorch")
    theirs = {member.name: torch_type for member, torch_type in dali_pytorch.to_torch_type.items()}
    ours = {key.name: torch_type for key, torch_type in to_torch_type.items() if not isinstance(key, np.dtype)}
    assert ours == theirs


def test_gpu_stage_outputs_convert_on_their_device(jpeg_files):
    # without a GPU the GPU stage runs on the host (with one warning) and its batches stay there
    with gpu_stage_pipe(jpeg_files[:10]) as gpu_pipe, image_pipe(jpeg_files[:10]) as host_pipe:
        if gpu_available():
            on_device = run_epoch(DALIGenericIterator(gpu_pipe, NAMES))
        else:
            with pytest.warns(GpuUnavailableWarning, match="device_id=0 asks for a GPU but none is usable"):
                on_device = run_epoch(DALIGenericIterator(gpu_pipe, NAMES))
        on_host = run_epoch(numpy_plugin.DALIGenericIterator(host_pipe, NAMES))
    assert len(on_device) == len(on_host) == 2
    for (t, _), (n, _) in zip(on_device, on_host, strict=True):
        assert t[0]["images"].device.type == ("cuda" if gpu_available() else "cpu")
        assert t[0]["labels"].device.type == "cpu"  # the reader's labels never left the host
        assert np.array_equal(t[0]["images"].cpu().numpy(), n[0]["images"])


@pytest.mark.parametrize("prepare_first_batch", [True, False])
def test_ragged_output_raises_a_clear_error(jpeg_files, prepare_first_batch):
    message = r"output 'images' .*different shapes.*resize or crop"
    with image_pipe(jpeg_files, ragged=True) as pipe:
        if prepare_first_batch:
            with pytest.raises(PipelineDefinitionError, match=message):
                DALIGenericIterator(pipe, NAMES)
        else:
            it = DALIGenericIterator(pipe, NAMES, prepare_first_batch=False)
            with pytest.raises(PipelineDefinitionError, match=message):
                next(it)


def test_skipped_samples_are_gone_and_partial_trims_only_padding(jpeg_files, tmp_path):
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"not a jpeg at all")
    files = jpeg_files[:11] + [str(bad)]  # sample 11 cannot be decoded; last batch: 10, 11, then padding
    rows = {}
    for policy in ("fill", "partial", "drop"):
        with image_pipe(files, on_error="skip") as pipe:
            steps = run_epoch(DALIGenericIterator(pipe, NAMES, reader_name="Reader", last_batch_policy=policy))
        rows[policy] = [labels_of(step[0]) for step, _ in steps]
        assert all(labels_of(step[0]) == infos[0].sample_indices for step, infos in steps)
    assert rows["fill"] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 0, 1, 2]]
    assert rows["partial"] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10]]
    assert rows["drop"] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]


def test_a_batch_with_every_sample_skipped_is_passed_over(jpeg_files, tmp_path):
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"\xff\xd8 truncated")
    files = [str(bad)] * 5 + jpeg_files[:5]
    with image_pipe(files, on_error="skip") as pipe:
        it = DALIGenericIterator(pipe, NAMES, auto_reset=True)
        for epoch in range(2):
            steps = run_epoch(it)
            assert [(infos[0].epoch, infos[0].index) for _, infos in steps] == [(epoch, 1)]
            assert labels_of(steps[0][0][0]) == [5, 6, 7, 8, 9]


def test_len_needs_a_reader_name_or_a_size_but_iteration_does_not(jpeg_files):
    with label_pipe(jpeg_files) as pipe:
        it = DALIGenericIterator(pipe, ["labels"])
        assert it.size == -1
        with pytest.raises(TypeError, match="reader_name"):
            len(it)
        steps = list(it)  # list() must not trip over len()
    assert [len(step[0]["labels"]) for step in steps] == [5] * 5


@pytest.mark.filterwarnings(DEPRECATED_SIZE)
@pytest.mark.parametrize(
    ("policy", "rows"), [("fill", [[5, 5]] * 3), ("partial", [[5, 5], [5, 5], [4]]), ("drop", [[5, 5]] * 2)]
)
def test_size_counts_the_samples_of_all_pipelines_as_dali_does(jpeg_files, policy, rows):
    # 24 samples on 2 pipelines in steps of 2 x 5: PARTIAL returns exactly 24 rows, the last
    # step only from the first pipeline
    pipes = [label_pipe(jpeg_files, shard_id=i, num_shards=2) for i in (0, 1)]
    it = DALIGenericIterator(pipes, ["labels"], size=24, last_batch_policy=policy)
    assert it.size == 24 and len(it) == len(rows)
    for _ in range(2):
        steps = run_epoch(it)
        assert [[len(batch["labels"]) for batch in step] for step, _ in steps] == rows
        assert [len(infos) for _, infos in steps] == [len(r) for r in rows]
        it.reset()
    for pipe in pipes:
        pipe.close()


def test_size_warns_as_dali_does_and_fill_last_batch_still_works(jpeg_files):
    with label_pipe(jpeg_files) as pipe:
        with pytest.warns(Warning, match="Please set `reader_name` and don't set last_batch_padded and size"):
            it = DALIGenericIterator(pipe, ["labels"], size=24.0, dynamic_shape=True)  # DALI takes a float
        assert (it.size, len(it)) == (24, 5)
    with label_pipe(jpeg_files) as pipe:
        with pytest.warns(Warning, match="Please do not use `fill_last_batch`"):
            it = DALIGenericIterator(pipe, ["labels"], reader_name="Reader", fill_last_batch=False)
        assert [len(step[0]["labels"]) for step in it] == [5, 5, 5, 5, 4]  # False is PARTIAL


def test_classification_iterator_names_data_and_label(jpeg_root):
    @pipeline_def(batch_size=6, num_threads=1, seed=7)
    def classify(root):
        jpegs, labels = fn.readers.file(file_root=root, name="Reader")
        return fn.resize(fn.decoders.image(jpegs), resize_x=32, resize_y=24), labels

    with classify(jpeg_root) as pipe:
        it = DALIClassificationIterator(pipe, reader_name="Reader", last_batch_policy=LastBatchPolicy.PARTIAL)
        steps = run_epoch(it)
    assert it.output_map == ["data", "label"] and it.batch_size == 6 and len(it) == 4
    for step, _ in steps:
        assert list(step[0]) == ["data", "label"]
        assert step[0]["data"].shape == (6, 24, 32, 3)
    assert [labels_of(step[0], "label") for step, _ in steps] == [[c] * 6 for c in range(4)]  # one folder a class


def test_last_batch_policy_is_one_enum_everywhere(jpeg_files):
    assert LastBatchPolicy is last_batch.LastBatchPolicy is base_iterator.LastBatchPolicy
    assert numpy_plugin.LastBatchPolicy is LastBatchPolicy
    assert LastBatchPolicy.FILL is LastBatchPolicy.PAD, "one vocabulary: DALI's FILL is the service's pad"
    counts = []
    for policy in ("drop", "DROP", LastBatchPolicy.DROP):
        with label_pipe(jpeg_files) as pipe:
            it = DALIGenericIterator([pipe], ["labels"], reader_name="Reader", last_batch_policy=policy)
            counts.append((len(it), len(run_epoch(it))))
    assert counts == [(4, 4)] * 3


def test_bad_arguments_raise_argument_error(jpeg_files):
    with label_pipe(jpeg_files) as pipe, label_pipe(jpeg_files, shard_id=1, num_shards=2) as other:
        for kwargs, message in (
            ({"last_batch_policy": "ends"}, "last_batch_policy must be one of 'pad' .*'fill'.*'drop', 'partial'"),
            ({"auto_reset": "maybe"}, "auto_reset must be True, False, None, 'yes' or 'no'"),
            ({"auto_reset": 1}, "auto_reset must be"),
            ({"size": 0}, "size cannot be 0"),
            ({"size": "24"}, "size must be a number of samples"),
            ({"size": 24, "reader_name": "Reader"}, "pass size or reader_name, not both"),
            ({"reader_name": "Reader", "last_batch_padded": True}, "pass last_batch_padded or reader_name, not both"),
            ({"reader_name": "Loader"}, "no reader named 'Loader'"),
            ({"reader_name": 3}, "reader_name must be the name of a reader"),
            ({"prepare_first_batch": "no"}, "prepare_first_batch must be True or False"),
            ({"size": 4, "last_batch_policy": "drop"}, "DROP leaves no batch: size 4 is less than one step"),
        ):
            with pytest.raises(ArgumentError, match=message), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                DALIGenericIterator(pipe, ["labels"], **kwargs)
        for pipelines, names, message in (
            ([], ["labels"], "pipelines is empty"),
            ("pipe", ["labels"], "pipelines must be raypipe Pipelines, got str"),
            ([pipe, label_pipe(jpeg_files, batch_size=4)], ["labels"], r"same batch_size, got \[5, 4\]"),
            ([pipe, other], ["labels"], "size=-1 .* takes one pipeline; with 2 pass reader_name or size"),
            (pipe, ["x", "x"], "distinct"),
            (pipe, "labels", "list of names"),
            (pipe, ["a", "b"], "output_map has 2 names but the pipeline has 1 outputs"),
        ):
            with pytest.raises(ArgumentError, match=message):
                DALIGenericIterator(pipelines, names)
        with pytest.raises(ArgumentError, match=r"reader 'Reader' must have the same size value .*\[24, 23\]"):
            DALIGenericIterator([pipe, label_pipe(jpeg_files[:23])], ["labels"], reader_name="Reader")
        with pytest.raises(ArgumentError, match="DROP leaves no batch: batch_size 5 is larger than the smallest"):
            DALIGenericIterator(
                label_pipe(jpeg_files[:9], num_shards=2), ["labels"], reader_name="Reader", last_batch_policy="drop"
            )
    late, early = label_pipe(jpeg_files), label_pipe(jpeg_files)
    late.run()
    with pytest.raises(ArgumentError, match="pipelines are not in step: pipeline 1 read epoch 0 batch 0"):
        DALIGenericIterator([late, early], ["labels"], reader_name="Reader")
    late.reset(epoch=1)
    with pytest.raises(ArgumentError, match=r"pipelines are at epochs \[0, 1\]"):
        DALIGenericIterator([late, early], ["labels"], reader_name="Reader")
    late.close()
    early.close()


def _take(it, n):
    """``n`` steps' labels per pipeline, across epochs (``auto_reset``)."""
    out = []
    while len(out) < n:
        try:
            out.append([labels_of(batch) for batch in next(it)])
        except StopIteration:
            continue  # auto_reset started the next epoch
    return out


def test_state_of_several_pipelines_resumes_at_the_same_step(jpeg_files):
    def make():
        pipes = [label_pipe(jpeg_files, shard_id=i, num_shards=2, random_shuffle=True) for i in (0, 1)]
        return DALIGenericIterator(pipes, ["labels"], reader_name="Reader", auto_reset=True)

    first = make()
    _take(first, 4)  # epoch 0 and the first step of epoch 1
    state = first.state_dict()
    assert (state["epoch"], state["offset"]) == (1, 5) and len(state["pipelines"]) == 2
    expected = _take(first, 4)
    second = make()
    second.load_state_dict(state)
    assert _take(second, 4) == expected
    with label_pipe(jpeg_files) as single:
        with pytest.raises(ArgumentError, match="saved for another order"):
            DALIGenericIterator(single, ["labels"], reader_name="Reader").load_state_dict(state)


@pytest.mark.filterwarnings(DEPRECATED_SIZE)
def test_state_with_size_keeps_the_samples_read_in_the_epoch(jpeg_files):
    def make():
        return DALIGenericIterator(label_pipe(jpeg_files), ["labels"], size=12, last_batch_policy="partial")

    first = make()
    steps = [labels_of(step[0]) for step in first]
    assert steps == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11]]  # the third step trimmed to 12 samples
    first.reset()
    next(first)
    state = first.state_dict()
    assert state["samples_in_epoch"] == 5 and (state["epoch"], state["offset"]) == (0, 20)
    second = make()
    second.load_state_dict(state)
    assert [labels_of(step[0]) for step in drain(second)] == [labels_of(step[0]) for step in drain(first)]


# ---- side by side with DALI (nvidia.dali.plugin.pytorch), CPU only ----------------------------------


def _dali_label_pipes(files, pipelines, pad):
    dali = pytest.importorskip("nvidia.dali")

    @dali.pipeline_def(batch_size=5, num_threads=1, device_id=None)
    def labels(shard_id, num_shards):
        _, labels = dali.fn.readers.file(
            files=files,
            labels=list(range(len(files))),
            name="Reader",
            shard_id=shard_id,
            num_shards=num_shards,
            pad_last_batch=pad,
        )
        return labels

    return [labels(shard_id=i, num_shards=pipelines) for i in range(pipelines)]


def _epochs(iterator_class, policy_enum, pipes, policy, mode, pad, epochs=2):
    """(len, size, [[labels per pipeline] per step]) of each epoch, reset() between them."""
    samples = pipes[0].reader_meta("Reader")["epoch_size"]  # DALI's epoch_size("Reader") counts padding in
    kwargs = {"reader_name": "Reader"} if mode == "reader_name" else {"size": samples, "last_batch_padded": pad}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        it = iterator_class(pipes, ["labels"], last_batch_policy=getattr(policy_enum, policy), **kwargs)
    out = []
    for _ in range(epochs):
        steps = []
        for step in it:
            infos = getattr(it, "last_batch_info", None) or [None] * len(step)
            steps.append([(batch["labels"].ravel().tolist(), info) for batch, info in zip(step, infos)])
        out.append((len(it), it.size, steps))
        it.reset()
    return out


def _labels(epoch):
    return [[labels for labels, _ in step] for step in epoch[2]]


def _real(epoch, reference):
    """``epoch``'s labels on the rows that ``reference`` (a raypipe epoch) reports as not padding."""
    return [
        [[x for x, pad in zip(labels, info.is_pad) if not pad] for (labels, _), (_, info) in zip(step, ref)]
        for step, ref in zip(epoch[2], reference[2], strict=True)
    ]


PARITY = list(itertools.product(["FILL", "DROP", "PARTIAL"], ["reader_name", "size"], [1, 2], [24, 23]))


@pytest.mark.parametrize(("policy", "mode", "pipelines", "samples"), PARITY)
def test_padded_readers_give_dalis_steps_over_two_epochs(jpeg_files, policy, mode, pipelines, samples):
    dali_pytorch = pytest.importorskip("nvidia.dali.plugin.pytorch")

    files = jpeg_files[:samples]
    dali_pipes = _dali_label_pipes(files, pipelines, pad=True)
    ours = [label_pipe(files, shard_id=i, num_shards=pipelines, pad_last_batch=True) for i in range(pipelines)]
    expected = _epochs(dali_pytorch.DALIGenericIterator, dali_pytorch.LastBatchPolicy, dali_pipes, policy, mode, True)
    got = _epochs(DALIGenericIterator, LastBatchPolicy, ours, policy, mode, True)
    assert [(n, size) for n, size, _ in got] == [(n, size) for n, size, _ in expected]  # len() and size
    assert [_labels(e) for e in got] == [_labels(e) for e in expected]  # the same rows, step by step
    for pipe in ours:
        pipe.close()


@pytest.mark.parametrize(("policy", "mode", "pipelines", "samples"), PARITY)
def test_unpadded_readers_give_dalis_first_epoch_and_then_stay_aligned(jpeg_files, policy, mode, pipelines, samples):
    # DALI's reader reads on into the next epoch to fill the last batch; raypipe's wraps around
    # to the shard start and marks those rows as padding. So the first epoch has DALI's steps,
    # sizes and samples (the filler aside), and every epoch is the one DALI gives with
    # pad_last_batch=True (the filler aside): no epoch starts mid-shard
    dali_pytorch = pytest.importorskip("nvidia.dali.plugin.pytorch")

    files = jpeg_files[:samples]
    ours = [label_pipe(files, shard_id=i, num_shards=pipelines) for i in range(pipelines)]
    got = _epochs(DALIGenericIterator, LastBatchPolicy, ours, policy, mode, False)
    unpadded = _epochs(
        dali_pytorch.DALIGenericIterator,
        dali_pytorch.LastBatchPolicy,
        _dali_label_pipes(files, pipelines, False),
        policy,
        mode,
        False,
        epochs=1,
    )
    padded = _epochs(
        dali_pytorch.DALIGenericIterator,
        dali_pytorch.LastBatchPolicy,
        _dali_label_pipes(files, pipelines, True),
        policy,
        mode,
        True,
    )
    assert got[0][:2] == unpadded[0][:2]
    assert [[len(x) for x in step] for step in _labels(got[0])] == [
        [len(x) for x in step] for step in _labels(unpadded[0])
    ]
    assert _real(unpadded[0], got[0]) == _real(got[0], got[0])
    assert [n for n, _, _ in got] == [n for n, _, _ in padded]
    assert [_real(p, g) for p, g in zip(padded, got)] == [_real(g, g) for g in got]
    for pipe in ours:
        pipe.close()


def test_classification_iterator_reads_a_folder_as_dalis_does(jpeg_root):
    dali = pytest.importorskip("nvidia.dali")
    dali_pytorch = pytest.importorskip("nvidia.dali.plugin.pytorch")

    @dali.pipeline_def(batch_size=5, num_threads=1, device_id=None)
    def dali_pipe(shard_id):
        jpegs, labels = dali.fn.readers.file(
            file_root=jpeg_root, name="Reader", shard_id=shard_id, num_shards=2, pad_last_batch=True
        )
        return dali.fn.resize(dali.fn.decoders.image(jpegs), resize_x=32, resize_y=24), labels

    @pipeline_def(batch_size=5, num_threads=1, seed=7)
    def our_pipe(shard_id):
        jpegs, labels = fn.readers.file(
            file_root=jpeg_root, name="Reader", shard_id=shard_id, num_shards=2, pad_last_batch=True
        )
        return fn.resize(fn.decoders.image(jpegs), resize_x=32, resize_y=24), labels

    def epochs(iterator):
        return [
            [
                [(tuple(b["data"].shape), b["data"].dtype, b["label"].ravel().tolist()) for b in step]
                for step in iterator
            ]
            for _ in range(2)
        ]

    policy = dali_pytorch.LastBatchPolicy.PARTIAL
    expected = epochs(
        dali_pytorch.DALIClassificationIterator(
            [dali_pipe(0), dali_pipe(1)], reader_name="Reader", last_batch_policy=policy, auto_reset=True
        )
    )
    ours = [our_pipe(0), our_pipe(1)]
    got = epochs(
        DALIClassificationIterator(
            ours, reader_name="Reader", last_batch_policy=LastBatchPolicy.PARTIAL, auto_reset=True
        )
    )
    assert got == expected
    assert [[rows for _, _, rows in step] for step in got[0]] == [
        [[0] * 5, [2] * 5],
        [[0, 1, 1, 1, 1], [2, 3, 3, 3, 3]],
        [[1, 1], [3, 3]],
    ]  # shard 0 holds classes 0 and 1, shard 1 classes 2 and 3
    for pipe in ours:
        pipe.close()


def test_resets_and_loops_mid_epoch_behave_as_dalis(jpeg_files):
    dali_pytorch = pytest.importorskip("nvidia.dali.plugin.pytorch")

    def walk(iterator):
        seen = []
        for i, step in enumerate(iterator):
            seen.append(step[0]["labels"].ravel().tolist())
            if i == 1:
                break
        iterator.reset()  # mid-epoch: ignored
        seen += [step[0]["labels"].ravel().tolist() for step in iterator]  # the rest of the epoch
        seen += [step[0]["labels"].ravel().tolist() for step in iterator]  # iter() starts the next
        return seen

    expected = walk(
        dali_pytorch.DALIGenericIterator(_dali_label_pipes(jpeg_files, 1, True), ["labels"], reader_name="Reader")
    )
    with label_pipe(jpeg_files, pad_last_batch=True) as pipe, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = walk(DALIGenericIterator(pipe, ["labels"], reader_name="Reader"))
    assert got == expected and len(got) == 10


def _fed_epochs(module, **kwargs) -> list[list[list[int]]]:
    """Three epochs of DALI's older style (an ExternalSource fed in ``iter_setup``, which rewinds
    its data when it ends) read by a size-counted iterator."""

    def batches():
        for start in range(0, 10, 4):
            yield [np.array([min(i, 9)], np.int32) for i in range(start, start + 4)]

    class Fed(module.pipeline.Pipeline):
        def __init__(self):
            super().__init__(4, 1, None)
            self.source = module.ops.ExternalSource()
            self.data = batches()

        def define_graph(self):
            self.x = self.source()
            return self.x

        def iter_setup(self):
            try:
                self.feed_input(self.x, next(self.data))
            except StopIteration:
                self.data = batches()
                raise

    iterator = module.plugin.pytorch.DALIGenericIterator(Fed(), ["x"], **kwargs)
    epochs = []
    for _ in range(3):
        epochs.append([step[0]["x"].flatten().tolist() for step in iterator])
        iterator.reset()
    return epochs


def test_a_fed_pipeline_starts_over_at_each_size_counted_epoch():
    """The iterator's reset starts over pipelines fed by external sources, as DALI's resets them."""
    import raypipe.plugin.pytorch  # noqa: F401  (module.plugin.pytorch below)

    kwargs = {"size": 10, "last_batch_padded": True, "fill_last_batch": False}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mine = _fed_epochs(rp, **kwargs)
        assert mine == [[[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]] * 3
        dali = pytest.importorskip("nvidia.dali")
        import nvidia.dali.plugin.pytorch  # noqa: F401

        assert mine == _fed_epochs(dali, **kwargs)


def test_an_older_positional_call_and_a_subclass_taking_the_first_batch(jpeg_files):
    """DALI's pre-1.0 positional order lands ``auto_reset=False`` in ``reader_name`` (DALI reads a
    false value as none), and iterator subclasses take ``_first_batch`` in their own ``__next__``."""

    class Taking(DALIGenericIterator):
        def __next__(self):
            if self._first_batch is not None:
                batch = self._first_batch
                self._first_batch = None
                return batch
            return super().__next__()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with label_pipe(jpeg_files[:8]) as pipe:
            # size=8, reader_name=False, auto_reset=True, fill_last_batch=False, dynamic_shape=False
            iterator = Taking([pipe], ["labels"], 8, False, True, False, False)
            labels = [step[0]["labels"].flatten().tolist() for step in iterator]
            assert iterator._first_batch is None and len(labels) == len(iterator) == 2
            assert sorted(sum(labels, [])) == list(range(8)) and len(labels[1]) == 3


@pytest.mark.parametrize("shards", [1, 2])
def test_checkpoints_resume_the_iterator_as_dalis_tutorial_does(jpeg_files, shards):
    """DALI's checkpointing tutorial: read some steps, take ``it.checkpoints()``, make each pipeline
    with ``checkpoint=`` its entry and an iterator over them as before: the steps go on from the next
    one, the epoch ending where it would have, the batch read ahead by the first iterator included."""

    def make(checkpoints=None):
        pipes = [
            label_pipe(
                jpeg_files,
                shard_id=i,
                num_shards=shards,
                random_shuffle=True,
                enable_checkpointing=True,
                checkpoint=None if checkpoints is None else checkpoints[i],
            )
            for i in range(shards)
        ]
        return DALIGenericIterator(pipes, ["labels"], reader_name="Reader", auto_reset=True)

    first = make()
    _take(first, 2)
    checkpoints = first.checkpoints()
    assert len(checkpoints) == shards and all(isinstance(c, bytes) for c in checkpoints)
    expected = _take(first, 5)  # the rest of epoch 0 and into epoch 1
    second = make(checkpoints)
    assert _take(second, 5) == expected


@pytest.mark.filterwarnings(DEPRECATED_SIZE)
def test_checkpoints_with_size_keep_the_samples_read_in_the_epoch(jpeg_files):
    def make(checkpoint=None):
        pipe = label_pipe(jpeg_files, enable_checkpointing=True, checkpoint=checkpoint)
        return DALIGenericIterator(pipe, ["labels"], size=12, last_batch_policy="partial")

    first = make()
    next(first)
    (checkpoint,) = first.checkpoints()
    rest = [labels_of(step[0]) for step in drain(first)]
    assert rest == [[5, 6, 7, 8, 9], [10, 11]]
    assert [labels_of(step[0]) for step in drain(make(checkpoint))] == rest


def test_checkpoints_need_checkpointing_enabled(jpeg_files):
    it = DALIGenericIterator(label_pipe(jpeg_files), ["labels"], reader_name="Reader")
    with pytest.raises(ArgumentError, match="cannot access checkpoints with checkpointing disabled"):
        it.checkpoints()
