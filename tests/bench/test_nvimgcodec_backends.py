"""benchmarks/nvimgcodec_backends.py on the host: the CPU backend through both nvImageCodec APIs,
the same images decoded and the same pixels; without nvImageCodec it says why."""

from __future__ import annotations

import sys

import pytest

from raypipe.gpu_decode import nvimgcodec_installed
from tests.bench.scripts import load_benchmark


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("nvimgcodec_backends")


@pytest.mark.skipif(not nvimgcodec_installed(), reason="needs the nvImageCodec package")
def test_both_apis_decode_every_crop_of_a_batch_to_the_same_pixels(bench, capsys):
    assert bench.main(["--images", "32", "--batch", "16", "--seconds", "0.2"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.startswith("cpu ")]
    assert [row[1] for row in rows] == ["python", "c"]
    assert all(row[2] == "16/16" and float(row[3]) > 0 and float(row[4]) > 0 for row in rows)
    assert rows[1][-1] == "equal"


@pytest.mark.skipif(not nvimgcodec_installed(), reason="needs the nvImageCodec package")
def test_a_backend_an_instance_lacks_is_a_row_that_says_so_and_the_next_rows_still_run(bench, capsys):
    """Without a GPU neither instance has the hardware decoder: both rows name it, the CPU rows run."""
    assert bench.main(["--images", "32", "--batch", "16", "--seconds", "0.2", "--sets", "hw_gpu", "cpu"]) == 0
    lines = capsys.readouterr().out.splitlines()
    missing = [line for line in lines if line.startswith("hw_gpu ")]
    assert len(missing) == 2 and all("no decoder:" in line for line in missing)
    assert "Status_t 7" in missing[1]
    rows = [line.split() for line in lines if line.startswith("cpu ")]
    assert [row[2] for row in rows] == ["16/16", "16/16"] and rows[1][-1] == "equal"


@pytest.mark.skipif(not nvimgcodec_installed(), reason="needs the nvImageCodec package")
def test_the_conditions_rows_decode_every_crop_to_the_first_rows_pixels(bench, capsys):
    """--conditions: the C API under each of the Mixed stage's conditions and the Mixed stage's own
    decoder with each API (here all on the CPU backend: the same pixels in every row)."""
    assert bench.main(["--images", "32", "--batch", "16", "--seconds", "0.2", "--conditions", "--threads", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [line for line in lines if line.startswith(("C API", "Mixed stage"))]
    assert len(rows) == 8 and all(" 16/16 " in row for row in rows)
    assert rows[0].endswith("-") and all(row.endswith("equal") for row in rows[1:])
    assert "(decoded through" not in " ".join(rows)  # the Mixed stage's C row decoded through the C API


def test_without_nvimgcodec_it_says_why(bench, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "nvidia.nvimgcodec", None)
    monkeypatch.setitem(sys.modules, "nvidia", None)
    assert bench.main(["--images", "4", "--batch", "2"]) == 0
    assert "nvImageCodec is not installed here" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args", [["--images", "0"], ["--batch", "8", "--images", "4"], ["--seconds", "0"], ["--threads", "-1"]]
)
def test_bad_arguments_are_refused(bench, args):
    with pytest.raises(SystemExit):
        bench.main(args)
