"""benchmarks/dataset_scale.py on a small tree: every step is timed, the tree is kept for the next
run, and the three ways of working the digest out agree (the script checks it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_scale_benchmark_times_every_step_on_a_tree_of_links(tmp_path):
    tree = tmp_path / "tree"
    command = [
        sys.executable,
        "benchmarks/dataset_scale.py",
        "--classes",
        "3",
        "--per-class",
        "30",
        "--root",
        str(tree),
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "90 files in 3 class folders" in done.stdout and "(90 links made" in done.stdout
    rows = [line.split("|")[1:-1] for line in done.stdout.splitlines() if line.startswith("| ") and "---" not in line]
    rows, kept = rows[:11], rows[11:]
    assert [row[0].strip() for row in rows][1:] == [
        "list the folders, hashing them as listed (raypipe, file_root)",
        "dataset digest of a files list of the paths, kept as a table (raypipe, a sorted files list)",
        "the same, each folder related once (raypipe, a files list in no folder order)",
        "dataset digest of the paths, each path related on its own (reference)",
        "read a file_list of the same files and hash it, at once (raypipe)",
        "read it line by line, then hash the paths by folder (reference)",
        "build the pipeline (lists again)",
        "first batch",
        "first state_dict()",
        "every later state_dict()",
    ]
    assert all(float(row[1]) >= 0 for row in rows[1:])
    assert [row[0].strip() for row in kept] == [
        "paths",
        "listed file_root, as raypipe keeps them (PathTable)",
        "the same paths as a list of strings (reference)",
    ]
    assert all(float(value) > 0 for row in kept[1:] for value in row[1:])
    assert "the memory of a list of strings" in done.stdout
    assert "all four the same hash" in done.stdout and "the same paths, labels and hash" in done.stdout
    assert sorted(os.listdir(tree)) == ["n00000000", "n00000001", "n00000002"]
    assert len((tmp_path / "tree.list.txt").read_text().splitlines()) == 90
    again = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "(0 links made" in again.stdout, again.stderr[-3000:]
