"""Record access in container files: direct reads, sequential extents read ahead, the cache
bound, errors naming the record, and the read-ahead thread and files released on close."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

from raypipe.errors import ReaderError
from raypipe.formats.record_files import RecordFiles, RecordTable


def _container(path, sizes, seed=0) -> tuple[list[bytes], np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    records = [rng.integers(0, 256, s, dtype=np.uint8).tobytes() for s in sizes]
    offsets, pos = [], 16  # a header before the first record, gaps between records
    with open(path, "wb") as f:
        f.write(b"H" * 16)
        for r in records:
            offsets.append(pos)
            f.write(r + b"gap")
            pos += len(r) + 3
    return records, np.array(offsets), np.array(sizes)


@pytest.fixture
def two_files(tmp_path):
    a, oa, sa = _container(tmp_path / "a.bin", [1000 + 37 * i for i in range(40)], seed=1)
    b, ob, sb = _container(tmp_path / "b.bin", [500 + 11 * i for i in range(25)], seed=2)
    table = RecordTable.concat([str(tmp_path / "a.bin"), str(tmp_path / "b.bin")], [(oa, sa), (ob, sb)])
    return a + b, table


def test_table_names_file_record_and_offset(two_files):
    _, table = two_files
    assert len(table) == 65
    assert table.where(41).endswith("b.bin record 1 (offset " + str(int(table.offsets[41])) + ")")


def test_unannounced_reads_are_one_pread_each(two_files):
    records, table = two_files
    files = RecordFiles(table, extent_bytes=4096)
    indices = [0, 7, 15, 22, 30, 39, 45, 60]
    assert [files.read(i).tobytes() for i in indices] == [records[i] for i in indices]
    assert files.stats["extent_reads"] == 0 and files.stats["direct_reads"] == len(indices)
    files.close()


def test_sequential_batches_read_whole_extents_ahead(two_files):
    records, table = two_files
    files = RecordFiles(table, extent_bytes=8192)
    for first in range(0, 65, 16):
        batch = list(range(first, min(65, first + 16)))[::-1]
        files.will_read(batch)
        assert [files.read(i).tobytes() for i in batch] == [records[i] for i in batch]
    assert files.stats["direct_reads"] == 0
    assert files.stats["extent_reads"] == files.num_extents  # each extent read once
    # an extent never crosses a file: both files' bytes were read, nothing more than their records span
    spans = sum(int(table.offsets[i] + table.sizes[i]) for i in (39, 64)) - 2 * 16
    assert files.stats["extent_bytes"] <= spans
    files.close()


def test_a_chunk_read_at_once_gives_each_record_as_read_alone(two_files):
    records, table = two_files
    files = RecordFiles(table, extent_bytes=4096)
    files.will_read(list(range(8)))  # the first extents read ahead; the rest of the chunk read directly
    chunk = [3, 60, 0, 41, 7, 3, 25]
    got = list(files.records(chunk))
    assert [g.tobytes() for g in got] == [records[i] for i in chunk]
    in_extents = [i for i in chunk if i < 8]
    assert files.stats["extent_hits"] == len(in_extents) and files.stats["direct_reads"] == len(chunk) - len(in_extents)
    assert all(g.base is not None for i, g in zip(chunk, got) if i < 8)  # views of their extent
    assert all(g.base is None and g.nbytes == table.sizes[i] for i, g in zip(chunk, got) if i >= 8)
    assert list(files.records([])) == []
    files.close()


def test_the_extent_cache_stays_bounded(two_files):
    records, table = two_files
    files = RecordFiles(table, extent_bytes=4096, cache_bytes=10_000)
    for i in [0, 20, 40, 60, 5, 25]:
        files.will_read([i])
        assert files.read(i).tobytes() == records[i]
        assert files._cached_bytes <= 10_000
    assert files.stats["extent_reads"] == 6 and files.stats["direct_reads"] == 0
    files.close()


def test_truncated_file_names_the_record(tmp_path):
    records, offsets, sizes = _container(tmp_path / "c.bin", [300, 400, 500])
    os.truncate(tmp_path / "c.bin", int(offsets[2]) + 100)
    files = RecordFiles(RecordTable.concat([str(tmp_path / "c.bin")], [(offsets, sizes)]))
    assert files.read(1).tobytes() == records[1]
    with pytest.raises(ReaderError, match=r"c\.bin record 2 .*400 bytes short"):
        files.read(2)
    files.will_read([0, 1, 2])  # the extent holding record 2 fails the same way
    with pytest.raises(ReaderError, match=r"c\.bin record"):
        files.read(2)
    files.close()


def test_missing_file_is_named(tmp_path):
    files = RecordFiles(RecordTable.concat([str(tmp_path / "gone.bin")], [(np.array([0]), np.array([10]))]))
    with pytest.raises(ReaderError, match="gone.bin"):
        files.read(0)


def test_close_stops_the_read_ahead_thread_and_closes_files(two_files):
    records, table = two_files
    before = {t.name for t in threading.enumerate()}
    fds_before = len(os.listdir("/proc/self/fd"))
    files = RecordFiles(table, extent_bytes=8192)
    files.will_read(range(16))
    assert files.read(3).tobytes() == records[3]
    assert any(t.name.startswith("raypipe-read-ahead") for t in threading.enumerate())
    files.close()
    assert not any(t.name.startswith("raypipe-read-ahead") for t in threading.enumerate() if t.name not in before)
    assert len(os.listdir("/proc/self/fd")) == fds_before
    files.will_read(range(16))  # usable again after close
    assert files.read(5).tobytes() == records[5]
    files.close()


def test_dropped_reader_releases_its_files(two_files):
    import gc

    _, table = two_files
    fds_before = len(os.listdir("/proc/self/fd"))
    files = RecordFiles(table)
    files.read(0)
    files.read(50)
    assert len(os.listdir("/proc/self/fd")) == fds_before + 2
    del files
    gc.collect()
    assert len(os.listdir("/proc/self/fd")) == fds_before
