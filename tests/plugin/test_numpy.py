"""raypipe.plugin.numpy: the PyTorch plugin's iteration with numpy arrays (the shared epoch and
policy logic is tested in test_pytorch.py)."""

from __future__ import annotations

import numpy as np
import pytest

from raypipe import ArgumentError, PipelineDefinitionError
from raypipe.plugin import numpy as numpy_plugin
from raypipe.plugin import pytorch as torch_plugin
from raypipe.plugin.numpy import DALIGenericIterator, LastBatchPolicy, to_numpy
from tests.plugin.pipelines import NAMES, SIDE, folder_pipe, image_pipe, labels_of, real_labels, run_epoch


def test_numpy_iterator_yields_the_torch_iterators_batches_as_arrays(jpeg_root):
    with folder_pipe(jpeg_root) as torch_pipe, folder_pipe(jpeg_root) as numpy_pipe:
        as_torch = run_epoch(torch_plugin.DALIGenericIterator(torch_pipe, NAMES, reader_name="Reader"))
        as_numpy = run_epoch(DALIGenericIterator(numpy_pipe, NAMES, reader_name="Reader"))
    assert len(as_torch) == len(as_numpy) == 4  # 24 files in batches of 6
    for (t, _), (n, infos) in zip(as_torch, as_numpy, strict=True):
        assert len(n) == 1 and list(n[0]) == NAMES
        images = n[0]["images"]
        assert isinstance(images, np.ndarray) and images.dtype == np.uint8 and images.shape == (6, SIDE, SIDE, 3)
        assert np.array_equal(t[0]["images"].numpy(), images)
        assert labels_of(n[0]) == [i // 6 for i in infos[0].sample_indices]  # class folder labels


def test_host_batches_are_not_copied(jpeg_files):
    with image_pipe(jpeg_files) as pipe:
        images, labels = pipe.run()
    for tl in (images, labels):
        assert np.shares_memory(to_numpy(tl), np.asarray(tl))


def test_several_pipelines_give_one_dict_each_and_partial_trims_their_padding(jpeg_files):
    with (
        image_pipe(jpeg_files[:21], num_shards=2, shard_id=0) as first,
        image_pipe(jpeg_files[:21], num_shards=2, shard_id=1) as second,
    ):
        it = DALIGenericIterator(
            [first, second], NAMES, reader_name="Reader", last_batch_policy=LastBatchPolicy.PARTIAL
        )
        steps = run_epoch(it)
    assert len(it) == len(steps) == 3  # 10 and 11 samples in batches of 5
    rows = [[len(batch["labels"]) for batch in step] for step, _ in steps]
    assert rows == [[5, 5], [5, 5], [0, 1]]
    assert all(isinstance(batch["images"], np.ndarray) for step, _ in steps for batch in step)
    assert steps[-1][0][0]["images"].shape == (0, SIDE, SIDE, 3)  # trimmed to nothing, shape kept
    assert real_labels(steps, 0) == list(range(10)) and real_labels(steps, 1) == list(range(10, 21))


def test_module_mirrors_the_pytorch_plugin_without_a_classification_iterator():
    assert numpy_plugin.LastBatchPolicy is torch_plugin.LastBatchPolicy
    assert set(numpy_plugin.__all__) == {"DALIGenericIterator", "LastBatchPolicy", "to_numpy"}
    assert not hasattr(numpy_plugin, "DALIClassificationIterator")


def test_ragged_output_and_bad_arguments_raise_clear_errors(jpeg_files):
    with image_pipe(jpeg_files, ragged=True) as pipe:
        with pytest.raises(PipelineDefinitionError, match=r"output 'images' .*different shapes"):
            DALIGenericIterator(pipe, NAMES)
        with pytest.raises(ArgumentError, match="DALIGenericIterator: output_map names must be distinct"):
            DALIGenericIterator(pipe, ["images", "images"])
