"""``readers.numpy`` on ``.npy`` volumes the tests write (several dtypes, C and Fortran order),
against DALI 2.4's CPU reader where installed: whole arrays, regions of interest (static and per
sample, every out-of-bounds policy), the listing of ``file_root`` and ``file_list``; and a region
read reads only the region's rows."""

from __future__ import annotations

import os

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn
from raypipe.errors import SampleError

DTYPES = ["uint8", "int16", "uint16", "int32", "int64", "float16", "float32", "float64", "bool"]


def _volume(dtype: str, shape=(6, 7, 9), seed: int = 0) -> np.ndarray:
    values = np.random.default_rng(seed).integers(0, 100, size=shape)
    return values.astype(dtype)


@pytest.fixture
def volumes(tmp_path) -> dict[str, list[str]]:
    """Per dtype, two files: C order and Fortran order."""
    out = {}
    for dtype in DTYPES:
        paths = []
        for order, seed in (("C", 1), ("F", 2)):
            path = tmp_path / f"{dtype}_{order}.npy"
            np.save(path, np.asarray(_volume(dtype, seed=seed), order=order))
            paths.append(str(path))
        out[dtype] = paths
    return out


def _ours(batch_size: int, **kwargs) -> list[np.ndarray]:
    @rp.pipeline_def(batch_size=batch_size, num_threads=1, seed=0)
    def pipe():
        extra = {k: fn.constant(idata=v) if isinstance(v, Per) else v for k, v in kwargs.items()}
        return fn.readers.numpy(**extra)

    with pipe() as p:
        (out,) = p.run()
        assert out.layout() == ""
        return [np.asarray(out.at(i)) for i in range(batch_size)]


def _dali(batch_size: int, **kwargs) -> list[np.ndarray]:
    pytest.importorskip("nvidia.dali")
    from nvidia.dali import fn as dali_fn
    from nvidia.dali import pipeline_def

    @pipeline_def(batch_size=batch_size, num_threads=1, device_id=None, seed=0)
    def pipe():
        extra = {k: dali_fn.constant(idata=v) if isinstance(v, Per) else v for k, v in kwargs.items()}
        return dali_fn.readers.numpy(**extra)

    p = pipe()
    p.build()
    (out,) = p.run()
    assert out.layout() == ""
    return [np.asarray(out[i]) for i in range(batch_size)]


class Per(list):
    """A ROI argument given per sample (an argument input, ``fn.constant``)."""


def _same(ours: list[np.ndarray], theirs: list[np.ndarray]) -> None:
    for a, b in zip(ours, theirs, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", DTYPES)
def test_whole_arrays_of_every_dtype_and_order_are_read_as_saved(volumes, dtype):
    ours = _ours(2, files=volumes[dtype])
    for got, path in zip(ours, volumes[dtype]):
        np.testing.assert_array_equal(got, np.load(path))
        assert got.dtype == np.dtype(dtype) and got.flags.c_contiguous
    _same(ours, _dali(2, files=volumes[dtype]))


ROIS = [
    {"roi_start": [1, 2, 3], "roi_end": [4, 6, 8]},
    {"roi_start": [1, 2], "roi_shape": [3, 3], "roi_axes": [2, 0]},
    {"rel_roi_start": [0.25, 0.1, 0.5], "rel_roi_shape": [0.5, 0.5, 0.5]},
    {"rel_roi_start": [0.1], "rel_roi_end": [0.9], "roi_axes": [1]},
    {"roi_start": [-2, 1], "roi_end": [3, 12], "roi_axes": [0, 2], "out_of_bounds_policy": "pad", "fill_value": 7},
    {"roi_start": [-2, 1], "roi_end": [3, 12], "roi_axes": [0, 2], "out_of_bounds_policy": "trim_to_shape"},
    {"roi_start": Per([1, 0, 2]), "roi_shape": [2, 7, 3]},
    {"rel_roi_start": [0.5, 0.5, 0.5], "roi_end": Per([6, 7, 9])},
]


@pytest.mark.parametrize("roi", ROIS, ids=range(len(ROIS)))
@pytest.mark.parametrize("dtype", ["uint8", "float32"])
def test_regions_of_interest_match_dali(volumes, dtype, roi):
    _same(_ours(2, files=volumes[dtype], **roi), _dali(2, files=volumes[dtype], **roi))


def test_a_region_outside_the_array_is_an_error_by_default(volumes):
    with pytest.raises(Exception, match="outside the array's shape"):
        _ours(1, files=volumes["uint8"][:1], roi_start=[0, 0, 0], roi_end=[7, 7, 9])


def test_a_region_read_reads_only_its_rows(tmp_path):
    big = np.arange(64 * 64 * 64, dtype=np.float32).reshape(64, 64, 64)
    path = tmp_path / "big.npy"
    np.save(path, big)
    np.save(tmp_path / "fortran.npy", np.asfortranarray(big))

    @rp.pipeline_def(batch_size=2, num_threads=1, seed=0)
    def pipe():
        files = [str(path), str(tmp_path / "fortran.npy")]
        return fn.readers.numpy(files=files, roi_start=[10, 20, 30], roi_shape=[8, 8, 8], name="R")

    with pipe() as p:
        (out,) = p.run()
        stats = p.read_stats("R")
    for i in range(2):
        np.testing.assert_array_equal(np.asarray(out.at(i)), big[10:18, 20:28, 30:38])
    files = stats["files_read"]  # two, or more where the pipeline read ahead into the next batch
    assert files >= 2 and stats["bytes_in_files"] == files * big.nbytes
    assert stats["bytes_read"] <= files * 8 * 64 * 64 * 4, "at most the region's outer extent, whole below it"
    assert stats["bytes_read"] < files * os.path.getsize(path) / 7


def test_file_root_lists_its_files_then_each_sub_folders_and_file_list_is_relative(tmp_path):
    for i, name in enumerate(["z.npy", "sub/b.npy", "sub/deeper/c.npy", "other/a.npy", "other/skip.txt"]):
        target = tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        np.save(target, np.full(2, i, np.int16)) if name.endswith(".npy") else target.write_text("x")
    (tmp_path / "list.txt").write_text("sub/b.npy\nz.npy\n")
    root = str(tmp_path)
    reader = rp.operator.registry()["readers.numpy"](device="cpu", op_id=0, file_root=root)
    reader.prepare()
    assert [os.path.relpath(p, root) for p in reader.paths] == ["z.npy", "other/a.npy", "sub/b.npy"]
    for kwargs in (
        {"file_root": root},
        {"file_root": root, "file_filter": "[bz]*"},
        {"file_root": root, "file_list": str(tmp_path / "list.txt")},
        {"file_list": str(tmp_path / "list.txt")},
        {"file_root": root, "files": ["sub/b.npy", "other/a.npy"]},
    ):
        _same(_ours(4, **kwargs), _dali(4, **kwargs))


def test_shards_split_the_files_as_every_reader(volumes):
    files = [p for dtype in ("uint8", "int16", "int32") for p in volumes[dtype]]
    seen = []
    for shard in range(2):

        @rp.pipeline_def(batch_size=1, num_threads=1, seed=0)  # one dtype per batch
        def pipe(shard=shard):
            return fn.readers.numpy(files=files, shard_id=shard, num_shards=2, name="R")

        with pipe() as p:
            assert p.epoch_size("R") == 6
            seen.extend(str(np.asarray(p.run()[0].at(0)).dtype) for _ in range(3))
    assert sorted(seen) == sorted(["uint8", "uint8", "int16", "int16", "int32", "int32"])


def test_old_ops_name_reads_the_same(volumes):
    @rp.pipeline_def(batch_size=2, num_threads=1, seed=0)
    def pipe():
        return rp.ops.NumpyReader(files=volumes["int16"])()

    with pipe() as p:
        (out,) = p.run()
    np.testing.assert_array_equal(np.asarray(out.at(1)), np.load(volumes["int16"][1]))


def test_digest_ignores_where_the_data_lives_and_bad_files_are_skipped_on_request(tmp_path):
    for name in ("a", "b"):
        folder = tmp_path / name
        folder.mkdir()
        for i in range(3):
            np.save(folder / f"{i}.npy", np.full(4, i, np.int32))
    make = rp.operator.registry()["readers.numpy"]
    first, second = (make(device="cpu", op_id=0, file_root=str(tmp_path / n)) for n in ("a", "b"))
    assert first.digest() == second.digest()
    (tmp_path / "b" / "1.npy").write_bytes(b"broken")

    @rp.pipeline_def(batch_size=2, num_threads=1, seed=0)
    def pipe():
        return fn.readers.numpy(file_root=str(tmp_path / "b"), on_error="skip")

    with pipe() as p:
        (out,) = p.run()
        assert [np.asarray(out.at(i))[0] for i in range(len(out))] == [0], "the broken file's sample is dropped"
        assert [s.sample_index for s in p.skipped_samples] == [1]
    with pytest.raises(Exception, match="1.npy"):
        with rp.pipeline_def(batch_size=2, num_threads=1)(
            lambda: fn.readers.numpy(file_root=str(tmp_path / "b"))
        )() as p:
            p.run()


@pytest.mark.parametrize(
    ("other", "described"),
    [(np.zeros((2, 3), np.int16), "int16 of ndim 2"), (np.zeros(3, np.float32), "float32 of ndim 1")],
)
def test_a_batch_of_files_of_other_dtypes_or_ranks_is_refused_naming_both(tmp_path, other, described):
    """As DALI ("Inconsistent data: All samples in the batch must have the same ..."): a batch is one
    tensor list. Shapes may differ; files of other types in other batches are read."""
    np.save(tmp_path / "a.npy", np.zeros((2, 2), np.float32))
    np.save(tmp_path / "b.npy", other)
    np.save(tmp_path / "c.npy", np.ones((4, 5), np.float32))
    assert [a.shape for a in _ours(2, file_root=str(tmp_path), files=["a.npy", "c.npy"])] == [(2, 2), (4, 5)]
    assert _ours(1, file_root=str(tmp_path), files=["b.npy"])[0].dtype == other.dtype
    with pytest.raises(SampleError, match=rf"a\.npy\) is float32 of ndim 2, sample 1 \(.*b\.npy\) is {described}"):
        _ours(2, file_root=str(tmp_path), files=["a.npy", "b.npy"])
