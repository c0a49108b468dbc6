"""benchmarks/nvimgcodec_gil.py on the host: each way of making a batch's code streams makes one
per image, cut to its window, split over threads or not; the Mixed stage's work decodes one image
per window through either API; its tables have a row per case; without nvImageCodec it says why and measures nothing."""

from __future__ import annotations

import sys

import pytest

from tests.bench.scripts import load_benchmark


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("nvimgcodec_gil")


@pytest.mark.parametrize("parts", [0, 3])
def test_each_way_makes_one_code_stream_per_image(bench, jpeg_root, parts):
    nv = pytest.importorskip("nvidia.nvimgcodec")
    from concurrent.futures import ThreadPoolExecutor

    data, windows = bench.batches_of(jpeg_root, images=8, batch=8)[0]
    with ThreadPoolExecutor(3) as pool:
        for name, work in bench.calls(nv).items():
            made = bench.split(work, pool if parts else None, parts)(data, windows)
            flat = [item for part in made for item in part] if parts else made
            assert len(flat) == len(data), name
    full = bench.calls(nv)["CodeStream per image"](data, windows)
    for code_stream, encoded in zip(full, data, strict=True):
        assert code_stream.width > 0 and code_stream.height > 0, encoded[:4]


def test_the_table_has_a_row_per_call_thread_count_and_busy_count(bench, capsys):
    pytest.importorskip("nvidia.nvimgcodec")
    assert bench.main(["--images", "16", "--busy", "0", "1", "--threads", "0", "2", "--rounds", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = [line for line in out if "per image" in line]
    assert len(rows) == 3 * 2 * 2
    assert all(float(row.split()[-2]) > 0 for row in rows)  # microseconds per image
    mixed = [line for line in out if line.startswith(("Python binding", "C API"))]
    assert len(mixed) == len(bench.ARRANGEMENTS) * 2
    assert all(float(row.split()[-2]) > 0 for row in mixed)  # microseconds per image


@pytest.mark.parametrize(
    "arrangement",
    [
        "Python binding, code streams made here (CODE_STREAMS=mixed)",
        "C API (NVIMGCODEC_API=c), code streams from the CPU stage",
    ],
)
def test_the_mixed_stage_work_decodes_one_image_per_window(bench, jpeg_root, arrangement):
    nv = pytest.importorskip("nvidia.nvimgcodec")
    batch = bench.batches_of(jpeg_root, images=8, batch=8)[0]
    packed = bench.mixed_stage(nv, *bench.ARRANGEMENTS[arrangement], batch)(*batch)
    assert [tuple(shape) for shape in packed.shapes.tolist()] == [(w[3], w[2], 3) for w in batch[1]]


def test_without_nvimgcodec_it_says_why(bench, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "nvidia.nvimgcodec", None)
    assert bench.main(["--images", "4"]) == 0
    assert "nvImageCodec is not installed here" in capsys.readouterr().out


@pytest.mark.parametrize("args", [["--busy", "-1"], ["--rounds", "0"], ["--threads", "-2"]])
def test_bad_arguments_are_refused(bench, args):
    with pytest.raises(SystemExit):
        bench.main(args)
