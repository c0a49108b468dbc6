"""PathTable: a listing's paths kept as folder prefixes and one string of names."""

from __future__ import annotations

import os
import pickle
import random
import tracemalloc

import pytest
from ray import cloudpickle

from raypipe.operators.path_table import PathTable

GROUPS = [
    ("/data/train/a/", ["1.jpg", "2.jpg"]),
    ("/data/train/empty/", []),
    ("/data/train/b/", ["caf\u00e9.jpg", os.fsdecode(b"raw\xff.jpg"), "\u732b.png"]),
    ("", ["/elsewhere/x.jpg"]),
]
PATHS = [prefix + name for prefix, names in GROUPS for name in names]


def test_it_is_the_sequence_of_its_paths():
    table = PathTable(GROUPS)
    assert len(table) == len(PATHS) == 6
    assert [table[i] for i in range(len(table))] == list(table) == PATHS
    assert [table[-i] for i in range(1, 7)] == PATHS[::-1]
    assert table[1:5] == PATHS[1:5] and table[::-2] == PATHS[::-2] and table[7:] == []
    assert table == PATHS and PATHS == table and table == PathTable(GROUPS) and table == tuple(PATHS)
    assert table != PATHS[:-1] and table != "".join(PATHS) and table != 3
    assert table.index(PATHS[3]) == 3 and PATHS[4] in table and "/data/train/a/3.jpg" not in table
    assert list(reversed(table)) == PATHS[::-1]
    for bad in (6, -7):
        with pytest.raises(IndexError, match=f"path index {bad}"):
            table[bad]


def test_an_empty_table():
    table = PathTable([("/x/", []), ("/y/", [])])
    assert len(table) == 0 and not table and list(table) == [] and table == []
    with pytest.raises(IndexError):
        table[0]


def test_it_crosses_process_boundaries():
    """A service hands an object-store listing to its actors by pickling it (Ray's cloudpickle)."""
    table = PathTable(GROUPS)
    for dumps, loads in ((pickle.dumps, pickle.loads), (cloudpickle.dumps, pickle.loads)):
        copy = loads(dumps(table))
        assert isinstance(copy, PathTable) and copy == PATHS and copy[4] == PATHS[4]


def test_contains_finds_a_part_in_a_prefix_or_a_name():
    table = PathTable([("s3://bucket/a/", ["1.jpg"]), ("/local/", ["x://y"])])
    assert table.contains("://") and table.contains("1.jp") and not table.contains("a/1")
    assert not PathTable(GROUPS).contains("://")


def test_it_holds_a_million_paths_in_a_fraction_of_a_lists_memory():
    """ImageNet's layout: 1,000 folders of names like n01440764_10026.JPEG (100,000 here)."""
    folders = [f"/datasets/imagenet/train/n{c:08d}/" for c in range(100)]
    names = [[f"n{c:08d}_{i:05d}.JPEG" for i in range(1000)] for c in range(100)]

    def held(make):
        tracemalloc.start()
        made = make()
        size = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        return made, size

    as_list, list_bytes = held(lambda: [f + n for f, group in zip(folders, names) for n in group])
    table, table_bytes = held(lambda: PathTable(zip(folders, names)))
    assert table == as_list
    assert table_bytes < 0.3 * list_bytes, (table_bytes, list_bytes)


def test_of_groups_runs_of_a_folder_and_compacted_keeps_shuffled_lists():
    paths = [f"/data/c{c}/{i}.jpg" for c in range(4) for i in range(300)] + ["top.jpg", "/root.jpg", "s3://b/k/x"]
    table = PathTable.of(paths)
    assert table == paths and repr(table) == "PathTable(1203 paths in 7 groups)"
    assert table.by_folder() and not PathTable([("/data/c", ["0/a"])]).by_folder()
    assert isinstance(PathTable.compacted(paths), PathTable)
    shuffled = paths[:]
    random.Random(0).shuffle(shuffled)
    assert PathTable.compacted(shuffled) is shuffled, "a group per path would hold no less"
    assert PathTable.compacted(["/a/x"]) == ["/a/x"] and PathTable.compacted([]) == []


def test_a_path_with_a_nul_is_refused():
    with pytest.raises(ValueError, match="a path holds a NUL character"):
        PathTable.of(["/a/x.jpg", "/a/y\0.jpg"])
