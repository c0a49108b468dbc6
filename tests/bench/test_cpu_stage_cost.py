"""benchmarks/cpu_stage_cost.py measures the GPU path's CPU stage for a folder of JPEGs and for a
conversion of it, one column each, and says whether each meets the target."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_stage_benchmark_reports_every_part_of_every_source(tmp_path):
    args = ["--images", "64", "--samples", "64", "--batch", "64", "--rounds", "1", "--source", "files", "tfrecord"]
    done = subprocess.run(
        [sys.executable, "benchmarks/cpu_stage_cost.py", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        env=os.environ | {"XDG_CACHE_HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "| part | folder of JPEG files | TFRecord |" in lines
    rows = {line.split("|")[1].strip().strip("*"): line.split("|")[2:-1] for line in lines if line.startswith("| ")}
    for name in (
        "read the samples (the reader, a chunk at a time)",
        "whole CPU stage, GPU decode",
        "decoder, all of it (run_chunk)",
    ):
        values = [float(cell.strip().strip("*").replace(",", "")) for cell in rows[name]]
        assert len(values) == 2 and all(v > 0 for v in values)
    floor = rows["for reference: the same bytes read into one reused buffer (the copy alone)"]
    assert all(float(cell) > 0 for cell in floor)
    verdicts = [line for line in lines if "us per sample:" in line]
    assert [v.split(":")[0] for v in verdicts] == ["folder of JPEG files", "TFRecord"]
    assert all(("meets" in v) != ("misses" in v) for v in verdicts)
    assert (tmp_path / "raypipe" / "bench" / "containers-64" / "tfrecord" / ".raypipe-convert").is_dir()
