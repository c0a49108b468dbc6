"""``TensorList``: DALI's indexing, iteration and conversions, on real pipeline batches and, where
DALI is installed, next to DALI's own ``TensorListCPU``."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
import torch

import raypipe as rp
from raypipe import fn, tensors, types
from raypipe.backend import TensorCPU, TensorGPU, TensorListCPU, TensorListGPU
from raypipe.kernels import launch
from raypipe.plugin.pytorch import to_torch_type
from raypipe.tensor_list import TensorList


def feed_ndarray(dali_tensor, arr):
    """DALI's copy of a Tensor into a torch tensor, as its older examples wrote it in the script."""
    assert dali_tensor.shape() == list(arr.size()), "shapes do not match"
    dali_tensor.copy_to_external(ctypes.c_void_p(arr.data_ptr()))
    return arr


@rp.pipeline_def(batch_size=4, num_threads=1, device_id=None, seed=2)
def decoded(files):
    jpegs, labels = fn.readers.file(files=files, name="Reader")
    images = fn.decoders.image(jpegs)
    return images, fn.resize(images, resize_x=12, resize_y=10), labels


@pytest.fixture(scope="module")
def batch(jpeg_files):
    with decoded(jpeg_files[:4]) as pipe:
        return pipe.run()


def test_indexing_and_iteration_give_each_sample(batch):
    ragged, dense, labels = batch
    for tl in (ragged, dense, labels):
        samples = list(tl)
        assert len(samples) == len(tl) == 4
        for i in range(4):
            assert np.array_equal(tl[i], tl.at(i)) and np.array_equal(tl[i], samples[i])
            assert np.array_equal(tl[i - 4], tl[i])  # negative indices count from the end
    assert len({s.shape for s in ragged}) > 1  # the decoded images differ in size
    assert [int(s[0]) for s in labels] == [0, 1, 2, 3]  # files= without labels: the index, as in DALI
    assert np.array_equal(dense[1], np.asarray(dense)[1]) and dense[np.int64(2)].shape == (10, 12, 3)


@pytest.mark.parametrize("index", [4, -5, 100])
def test_out_of_range_index_is_an_index_error(batch, index):
    for tl in batch:
        with pytest.raises(IndexError, match=f"index {index} out of range for a batch of 4"):
            tl[index]
        with pytest.raises(IndexError):
            tl.at(index)


@pytest.mark.parametrize("index", [slice(0, 2), 1.0, "1", True])
def test_non_integer_index_is_a_type_error(batch, index):
    with pytest.raises(TypeError, match="TensorList indices must be integers"):
        batch[1][index]


def test_dense_and_ragged_conversions(batch):
    ragged, dense, labels = batch
    assert dense.is_dense_tensor() and not ragged.is_dense_tensor()
    array = dense.as_array()
    assert isinstance(array, np.ndarray) and array.shape == (4, 10, 12, 3) and array.dtype == np.uint8
    assert np.array_equal(dense.as_tensor(), array)
    assert np.array_equal(dense.as_reshaped_tensor([4, 120, 3]), array.reshape(4, 120, 3))
    with pytest.raises(ValueError, match="cannot reshape a batch of 1440 elements"):
        dense.as_reshaped_tensor([5, 10, 12, 3])
    with pytest.raises(ValueError, match="samples have different shapes"):
        ragged.as_array()
    assert dense.layout() == ragged.layout() == "HWC" and labels.layout() == ""
    assert dense.as_cpu() is dense  # a host batch is its own host copy, as in DALI
    assert dense.dtype is types.UINT8 and labels.dtype is types.INT32
    assert dense.ndim() == ragged.ndim() == 3 and labels.ndim() == 1
    assert dense.shape() == [(10, 12, 3)] * 4 and ragged.shape() == [s.shape for s in ragged]


def test_a_packed_batch_stays_one_buffer_until_a_sample_is_asked_for():
    samples = [np.arange(12, dtype=np.uint8).reshape(2, 2, 3), np.arange(6, dtype=np.uint8).reshape(1, 2, 3)]
    packed = launch.pack(np, samples, "test")
    tl = TensorList.from_samples(packed, "gpu", "HWC")
    assert tl.shape() == [(2, 2, 3), (1, 2, 3)] and not tl.is_dense_tensor() and tl.ndim() == 3
    assert tl.dtype is types.UINT8 and len(tl) == 2
    assert all(np.array_equal(a, b) and np.shares_memory(a, packed.data) for a, b in zip(tl, samples, strict=True))
    host = tl.as_cpu()
    assert host.device == "cpu" and host.shape() == tl.shape() and np.array_equal(host[-1], samples[1])
    with pytest.raises(ValueError, match="samples have different shapes"):
        tl.as_tensor()
    same = launch.pack(np, [samples[0], samples[0] + 1], "test")
    dense = TensorList.from_samples(same, "gpu", "HWC")
    assert dense.is_dense_tensor() and np.shares_memory(dense.as_tensor(), same.data)
    assert np.array_equal(dense.as_tensor(), np.stack([samples[0], samples[0] + 1]))


def test_a_list_of_samples_indexes_like_a_dense_batch():
    samples = [np.full((2, 3), i, np.float32) for i in range(3)]
    as_list, as_dense = TensorList(samples, "cpu"), TensorList(np.stack(samples), "cpu")
    for tl in (as_list, as_dense):
        assert [float(s[0, 0]) for s in tl] == [0.0, 1.0, 2.0]
        assert float(tl[-1][0, 0]) == 2.0 and tl.dtype is types.FLOAT and tl.is_dense_tensor()
    empty = TensorList([], "cpu")
    assert len(empty) == 0 and list(empty) == [] and empty.ndim() == 0
    with pytest.raises(IndexError):
        empty[0]


def test_a_scalar_sample_is_a_0d_array_as_in_dali():
    """``at(i)`` of a batch of scalars is an array (DALI's is), which ``torch.from_numpy`` takes."""
    scalars = TensorList(np.array([3, 4], np.int32), "cpu")
    assert all(isinstance(s, np.ndarray) and s.shape == () and s.dtype == np.int32 for s in (scalars.at(0), scalars[1]))
    assert type(scalars.at(0)) is np.ndarray, "at(i) is a plain array, as DALI's"
    assert [int(torch.from_numpy(s)) for s in (scalars.at(0), scalars[1])] == [3, 4]
    assert [int(s) for s in scalars] == [3, 4]


def test_matches_dalis_tensor_list_cpu(batch):
    dali_tensors = pytest.importorskip("nvidia.dali.tensors")
    _, dense, labels = batch
    for ours in (dense, labels):
        theirs = dali_tensors.TensorListCPU(np.ascontiguousarray(ours.as_array()), ours.layout() or None)
        assert len(theirs) == len(ours) and theirs.layout() == ours.layout()
        assert theirs.dtype.name == ours.dtype.name and theirs.ndim() == ours.ndim()
        assert [tuple(s) for s in theirs.shape()] == ours.shape()
        assert theirs.is_dense_tensor() == ours.is_dense_tensor()
        for i in (0, 3, -1, -4):
            assert np.array_equal(np.asarray(theirs[i]), ours[i])
        assert all(np.array_equal(np.asarray(t), o) for t, o in zip(theirs, ours))
        for index in (4, -5):
            with pytest.raises(IndexError):
                theirs[index]
            with pytest.raises(IndexError):
                ours[index]
        assert np.array_equal(theirs.as_array(), ours.as_array())
        assert theirs.as_tensor().shape() == ours.as_tensor().shape() and theirs[1].shape() == ours[1].shape()
        assert theirs[1].layout() == ours[1].layout() and theirs.as_tensor().layout() == ours.as_tensor().layout()
        flat = [4, ours.as_array().size // 4]
        assert theirs.as_reshaped_tensor(flat).layout() == ours.as_reshaped_tensor(flat).layout() == ""
        for source in (theirs.as_tensor(), ours.as_tensor()):
            target = torch.empty(ours.as_tensor().shape(), dtype=to_torch_type[ours.dtype])
            assert np.array_equal(feed_ndarray(source, target), ours.as_array())
        for source in (theirs, ours):  # a batch copies itself too
            target = torch.empty(ours.as_tensor().shape(), dtype=to_torch_type[ours.dtype])
            source.copy_to_external(ctypes.c_void_p(target.data_ptr()))
            assert np.array_equal(target, ours.as_array())


def test_a_packed_batch_with_gaps_between_equal_samples_keeps_each_sample():
    data = np.arange(48, dtype=np.uint8)
    packed = launch.Packed(data, np.array([[2, 2, 3]] * 2, np.int64), np.array([0, 32], np.int64))
    batch = TensorList.from_samples(packed, "gpu", "HWC")
    assert batch.is_dense_tensor()
    assert np.array_equal(batch.at(1), data[32:44].reshape(2, 2, 3))
    assert np.array_equal(batch.as_tensor(), np.stack([data[:12], data[32:44]]).reshape(2, 2, 2, 3))


def test_dalis_tensor_methods_on_host_samples_and_batches(batch):
    """``tl[i]`` and ``as_tensor()`` are DALI's TensorCPU there: numpy arrays that also have
    ``shape()``, ``layout()``, ``data_ptr()`` and ``copy_to_external``; what numpy makes of them is
    a plain array."""
    ragged, dense, labels = batch
    tensor = dense.as_tensor()
    assert isinstance(tensor, TensorCPU) and isinstance(dense[0], TensorCPU) and isinstance(ragged[2], TensorCPU)
    assert (
        tensor.shape == (4, 10, 12, 3)
        and tensor.shape() == [4, 10, 12, 3]
        and ragged[2].shape() == list(ragged.shape()[2])
    )
    assert tensor.layout() == "NHWC" and dense[0].layout() == "HWC" and labels.as_reshaped_tensor([4]).shape() == [4]
    assert tensor.data_ptr() == dense.data_ptr() == np.asarray(dense).ctypes.data, "a view, not a copy"
    assert all(type(x) is np.ndarray for x in (tensor + 1, np.asarray(tensor), np.sqrt(tensor), dense.at(0)))
    assert isinstance(tensor.sum(), np.integer)
    typed = torch.empty(tensor.shape(), dtype=to_torch_type[tensor.dtype])
    assert torch.equal(feed_ndarray(tensor, typed), torch.from_numpy(np.asarray(dense)))
    assert isinstance(dense, TensorListCPU) and not isinstance(dense, TensorListGPU)
    assert not isinstance(tensor, TensorGPU) and not isinstance(dense, TensorCPU)
    with pytest.raises(ValueError, match="null"):
        tensor.copy_to_external(ctypes.c_void_p(0))


def test_set_layout_sets_the_layout_of_the_batch_and_of_a_sample():
    batch = TensorList([np.zeros((2, 3, 1), np.uint8), np.ones((4, 3, 1), np.uint8)], "cpu", "HWC")
    batch.set_layout("CHW")
    assert batch.layout() == "CHW" and batch[1].layout() == "CHW"
    sample = batch[0]
    sample.set_layout(None)
    assert sample.layout() == "" and batch.layout() == "CHW"
    with pytest.raises(TypeError, match="a layout is a string"):
        batch.set_layout(3)


def _made(tensors):
    """The batches of DALI's constructor cases made by ``tensors`` (raypipe's or DALI's module)."""
    dense = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    return {
        "dense": tensors.TensorListCPU(dense, "HW"),
        "ragged": tensors.TensorListCPU([np.zeros((2, 2), np.uint8), np.ones((3, 1), np.uint8)], "HW"),
        "uniform list": tensors.TensorListCPU([np.arange(3), np.arange(3) + 10], "X"),
        "of tensors": tensors.TensorListCPU(
            [tensors.TensorCPU(np.arange(2), "X"), tensors.TensorCPU(np.arange(3), "X")]
        ),
        "of a batch": tensors.TensorListCPU(tensors.TensorListCPU(dense, "HW")),
        "broadcast": tensors.TensorListCPU.broadcast(tensors.TensorCPU(np.arange(6).reshape(2, 3), "AB"), 3),
        "dlpack": tensors.TensorListCPU.from_dlpack_list([torch.arange(3), torch.arange(5)], "X"),
        "empty": tensors.TensorListCPU([]),
    }


def _described(tl):
    samples = [np.asarray(tl[i]).tolist() for i in range(len(tl))]
    return len(tl), tl.layout(), [tuple(s) for s in tl.shape()], samples, tl.dtype.name if len(tl) else None


def test_dalis_constructors_make_batches_and_tensors():
    """``TensorListCPU(data, layout)``, ``TensorCPU(array, layout)``, ``broadcast`` and
    ``from_dlpack_list``, as scripts call them to feed external sources (the values DALI 2.4 gives)."""
    made = {name: _described(tl) for name, tl in _made(tensors).items()}
    assert made["dense"][:3] == (2, "HW", [(3, 4), (3, 4)]) and made["dense"][4] == "FLOAT"
    assert made["ragged"] == (2, "HW", [(2, 2), (3, 1)], [[[0, 0], [0, 0]], [[1], [1], [1]]], "UINT8")
    assert made["uniform list"] == (2, "X", [(3,), (3,)], [[0, 1, 2], [10, 11, 12]], "INT64")
    assert made["of tensors"][:3] == (2, "X", [(2,), (3,)]), "the samples' layout when none is given"
    assert made["of a batch"][:3] == made["dense"][:3]
    assert made["broadcast"] == (3, "AB", [(2, 3)] * 3, [[[0, 1, 2], [3, 4, 5]]] * 3, "INT64")
    assert made["dlpack"] == (2, "X", [(3,), (5,)], [[0, 1, 2], [0, 1, 2, 3, 4]], "INT64")
    assert made["empty"][0] == 0
    assert all(isinstance(tl, TensorListCPU) and not isinstance(tl, TensorListGPU) for tl in _made(tensors).values())
    tensor = TensorCPU(np.arange(6).reshape(2, 3), "AB")
    assert isinstance(tensor, TensorCPU) and tensor.layout() == "AB" and tensor.shape() == [2, 3]


def test_dalis_constructors_share_an_array_and_copy_a_list():
    array = np.arange(6, dtype=np.int32).reshape(2, 3)
    batch, tensor = TensorListCPU(array), TensorCPU(array[0])
    samples = [np.arange(3), np.arange(3) + 10]
    listed = TensorListCPU(samples)
    viewed = TensorListCPU.from_dlpack_list(samples)  # contiguous=False: views, as DALI's
    array[0, 0] = samples[0][0] = 99
    assert batch[0][0] == 99 and tensor[0] == 99
    assert listed[0][0] == 0 and viewed[0][0] == 99


def test_dalis_constructors_match_dalis():
    dali_tensors = pytest.importorskip("nvidia.dali.tensors")
    ours, theirs = _made(tensors), _made(dali_tensors)
    for name in ours:
        assert _described(ours[name]) == _described(theirs[name]), name


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (
            lambda: TensorListCPU(np.zeros((2, 2)), "AB"),
            ValueError,
            "layout 'AB' names 2 dimensions, the samples have 1",
        ),
        (lambda: TensorListCPU(np.float32(3)), ValueError, "a 0-dim array is not a batch"),
        (lambda: TensorListCPU([np.zeros(2, np.uint8), np.zeros(2, np.int16)]), TypeError, "sample 1 has type int16"),
        (lambda: TensorListCPU([np.zeros(2), np.zeros((2, 1))]), TypeError, "sample 1 has 2 dimensions, sample 0 1"),
        (lambda: TensorCPU(np.zeros((2, 2)), "HWC"), ValueError, "TensorCPU: layout 'HWC' names 3 dimensions"),
        (lambda: TensorListCPU(np.zeros((2, 2)), 3), TypeError, "a layout is a string"),
        (lambda: TensorListCPU.broadcast(TensorCPU(np.zeros(2)), -1), ValueError, "cannot be negative"),
    ],
)
def test_dalis_constructors_refuse_what_dali_refuses(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_reinterpret_reads_the_same_bytes_as_another_type_of_the_same_size():
    for batch in (
        TensorListCPU(np.arange(8, dtype=np.int32).reshape(2, 4)),
        TensorListCPU([np.arange(3, dtype=np.int32), np.arange(4, dtype=np.int32)]),
        TensorList(launch.Packed(np.arange(7, dtype=np.int32), np.array([[3], [4]]), np.array([0, 3])), "cpu"),
    ):
        before = [np.asarray(s).tolist() for s in batch]
        batch.reinterpret(types.FLOAT)
        assert batch.dtype == types.FLOAT
        assert [np.asarray(s).view(np.int32).tolist() for s in batch] == before
        with pytest.raises(ValueError, match="INT64 has 8-byte elements, the data FLOAT 4-byte ones"):
            batch.reinterpret(types.INT64)
    tensor = TensorCPU(np.zeros((2, 2)))
    tensor.reinterpret(types.INT64)
    assert tensor.dtype == np.int64 and tensor.tolist() == [[0, 0], [0, 0]]


def test_a_fed_batch_brings_its_layout_to_what_is_computed_from_it():
    """As in DALI, ``feed_input`` of a ``TensorListCPU`` with a layout gives the external source that
    layout, and the outputs computed from it theirs."""

    @rp.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def doubled():
        x = fn.external_source(name="x")
        return x, x * 2, fn.transpose(x, perm=[1, 0])

    with doubled() as pipe:
        pipe.feed_input("x", TensorListCPU(np.arange(12, dtype=np.int32).reshape(2, 3, 2), "AB"))
        fed, twice, swapped = pipe.run()
    assert (fed.layout(), twice.layout(), swapped.layout()) == ("AB", "AB", "BA")
    assert np.asarray(twice).tolist() == (np.arange(12).reshape(2, 3, 2) * 2).tolist()


def test_a_returned_batch_brings_its_layout_unless_the_source_has_one():
    """A ``source`` returning ``TensorListCPU`` batches with a layout gives the external source that
    layout (and what is computed from it), as in DALI; a source's own ``layout=`` stays."""

    def batches():
        return TensorListCPU(np.ones((2, 3, 2), np.float32), "AB")

    @rp.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def returned(own):
        x = fn.external_source(source=batches, layout=own)
        return x, fn.transpose(x, perm=[1, 0])

    with returned(None) as pipe:
        assert [out.layout() for out in pipe.run()] == ["AB", "BA"]
    with returned("XY") as pipe:
        assert [out.layout() for out in pipe.run()] == ["XY", "YX"]
