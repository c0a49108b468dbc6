"""benchmarks/file_read_cost.py runs each way of reading and reports it, on a few files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_read_benchmark_reports_copies_maps_and_where_the_copy_goes(tmp_path):
    done = subprocess.run(
        [sys.executable, "benchmarks/file_read_cost.py", "--files", "64", "--seconds", "0.4", "--rounds", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    rows = [
        line.split("|")[1:-1]
        for line in done.stdout.split("Where the copy's time goes")[0].splitlines()
        if line.startswith(("| copy", "| memory", "| direct"))
    ]
    names = [row[0].strip() for row in rows]
    if "O_DIRECT is not measured here" in done.stdout:  # a filesystem without O_DIRECT (tmpfs)
        assert names == ["copy (preadv)", "memory map"]
    else:
        assert names == ["copy (preadv)", "memory map", "direct read (O_DIRECT, no page cache)"]
    for row in rows:
        alone, rate, cpu = (float(cell.replace(",", "")) for cell in row[1:])
        assert alone > 0 and rate > 0 and cpu > 0
    floor = [line.split("|")[1:-1] for line in done.stdout.split("Where the copy's time goes")[1].splitlines()[3:]]
    assert [row[0].strip().split(" (")[0] for row in floor if row] == [
        "one file again and again",
        "each file once, by an open descriptor",
        "each file once, opened, sized and closed as readers.file does",
        "the same bytes as records of one file, in a shuffled order",
    ]
    assert all(float(row[1]) > 0 for row in floor if row)
