"""Outputs whose samples differ in shape in one process, as DALI treats them: ``TensorList.as_tensor``
refuses them, DALIGenericIterator refuses them (``dynamic_shape`` changes nothing), and
DALIRaggedIterator gives them as a list of tensors or a sparse COO tensor; side by side with DALI's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from raypipe import ArgumentError, PipelineDefinitionError, fn, pipeline_def, types
from raypipe.plugin.pytorch import DALIGenericIterator, DALIRaggedIterator

#: Sample i is its label repeated (i % 3 + 1) times: lengths 1, 2, 3, 1, ...
COUNT = 6


def text(label: int) -> np.ndarray:
    return np.full(label % 3 + 1, label, np.int32)


@pipeline_def(batch_size=3, num_threads=1, seed=0)
def ragged_pipe(files):
    _, labels = fn.readers.file(files=files, labels=list(range(len(files))), name="Reader")
    texts = fn.python_function(labels, function=lambda label: text(int(np.asarray(label).reshape(-1)[0])))
    return texts, fn.cast(labels, dtype=types.INT64)


def dali_ragged_pipe():
    dali = pytest.importorskip("nvidia.dali")
    from nvidia.dali import fn as dali_fn

    batches = [[text(i) for i in range(b, b + 3)] for b in range(0, COUNT, 3)]

    @dali.pipeline_def(batch_size=3, num_threads=1, device_id=None)
    def pipe():
        texts = dali_fn.external_source(source=batches, batch=True, cycle=True)
        labels = dali_fn.external_source(
            source=[[np.array([i], np.int64) for i in range(b, b + 3)] for b in range(0, COUNT, 3)],
            batch=True,
            cycle=True,
        )
        return texts, labels

    return pipe()


def _steps(iterator, steps: int = 2) -> list[dict]:
    return [next(iterator)[0] for _ in range(steps)]


@pytest.mark.parametrize("tag", ["sparse_list", "sparse_coo"])
def test_ragged_iterator_matches_dalis(jpeg_files, tag):
    pytest.importorskip("nvidia.dali")
    from nvidia.dali.plugin.pytorch import DALIRaggedIterator as TheirIterator

    theirs = _steps(TheirIterator([dali_ragged_pipe()], ["text", "label"], size=COUNT, output_types=[tag, "dense"]))
    with ragged_pipe(jpeg_files[:COUNT]) as pipe:
        mine = _steps(DALIRaggedIterator(pipe, ["text", "label"], reader_name="Reader", output_types=[tag, "dense"]))
    for their, my in zip(theirs, mine, strict=True):
        assert torch.equal(my["label"], their["label"])
        if tag == "sparse_list":
            assert [t.tolist() for t in my["text"]] == [t.tolist() for t in their["text"]]
        else:
            assert my["text"].is_sparse and my["text"].shape == their["text"].shape
            assert torch.equal(my["text"].to_dense(), their["text"].to_dense())


def test_ragged_iterator_without_dali(jpeg_files):
    with ragged_pipe(jpeg_files[:COUNT]) as pipe:
        iterator = DALIRaggedIterator(
            pipe, ["text", "label"], reader_name="Reader", output_types=[DALIRaggedIterator.SPARSE_LIST_TAG, "dense"]
        )
        (first,) = next(iterator)
    assert [t.tolist() for t in first["text"]] == [[0], [1, 1], [2, 2, 2]]
    assert first["label"].tolist() == [[0], [1], [2]]
    with ragged_pipe(jpeg_files[:COUNT]) as pipe:
        (coo,) = next(
            DALIRaggedIterator(pipe, ["text", "label"], reader_name="Reader", output_types=["sparse_coo", "dense"])
        )
    assert coo["text"].to_dense().tolist() == [[0, 0, 0], [1, 1, 0], [2, 2, 2]]


@pytest.mark.parametrize("tag", ["sparse_list", "sparse_coo"])
def test_partial_trims_ragged_outputs(jpeg_files, tag):
    """The last batch of 5 samples in batches of 3 keeps its 2 real samples, whatever the tag."""
    with ragged_pipe(jpeg_files[:5]) as pipe:
        iterator = DALIRaggedIterator(
            pipe, ["text", "label"], reader_name="Reader", output_types=[tag, "dense"], last_batch_policy="partial"
        )
        steps = [step[0] for step in iterator]
    assert [len(step["label"]) for step in steps] == [3, 2]
    last = steps[1]["text"]
    texts = [t.tolist() for t in last] if tag == "sparse_list" else last.to_dense().tolist()
    assert texts == ([[3], [4, 4]] if tag == "sparse_list" else [[3, 0], [4, 4]])


def test_the_generic_iterator_refuses_ragged_outputs_as_dali_does(jpeg_files):
    with ragged_pipe(jpeg_files[:COUNT]) as pipe:
        with pytest.raises(PipelineDefinitionError, match=r"output 'text' .*different shapes"):
            next(DALIGenericIterator(pipe, ["text", "label"], reader_name="Reader", dynamic_shape=True))
        (texts, _) = pipe.run()
    with pytest.raises(ValueError, match="samples have different shapes"):
        texts.as_tensor()
    assert [texts.at(i).tolist() for i in range(3)] == [[3], [4, 4], [5, 5, 5]]


def test_dali_refuses_them_too():
    pytest.importorskip("nvidia.dali")
    from nvidia.dali.plugin.pytorch import DALIGenericIterator as TheirIterator

    pipe = dali_ragged_pipe()
    pipe.build()
    texts, _ = pipe.run()
    with pytest.raises(RuntimeError):
        texts.as_tensor()
    with pytest.raises(RuntimeError):
        next(TheirIterator([dali_ragged_pipe()], ["text", "label"], size=COUNT, dynamic_shape=True))


def test_output_types_are_checked(jpeg_files):
    with ragged_pipe(jpeg_files[:COUNT]) as pipe, pytest.raises(ArgumentError, match="output_types must give one of"):
        DALIRaggedIterator(pipe, ["text", "label"], reader_name="Reader", output_types=["sparse_list"])
