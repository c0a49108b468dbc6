"""benchmarks/gpu_decode_rate.py without a GPU: its batches and windows, and that it says why it
measures nothing here."""

from __future__ import annotations

import threading

import pytest

from raypipe.backend import gpu_available
from raypipe.jpeg_header import frame_size
from raypipe.operators.readers import list_file_root
from tests.bench.scripts import load_benchmark


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("gpu_decode_rate")


def test_batches_are_whole_with_a_crop_window_inside_each_image(bench, jpeg_root):
    batches = bench.batches_of(jpeg_root, images=24, batch=8)
    assert [len(data) for data, _ in batches] == [8, 8, 8]
    for data, windows in batches:
        for encoded, (x, y, w, h) in zip(data, windows):
            width, height = frame_size(encoded)
            assert 0 <= x and 0 <= y and 0 < w and 0 < h and x + w <= width and y + h <= height
            assert w * h >= 0.08 * width * height * 0.99
    assert bench.batches_of(jpeg_root, images=24, batch=8)[0][1] == batches[0][1]  # seeded


@pytest.mark.skipif(gpu_available(), reason="checks the message without a GPU")
def test_without_a_gpu_it_says_why_and_measures_nothing(bench, capsys):
    assert bench.main(["--seconds", "0.1"]) == 0
    assert "needs a CUDA GPU with nvImageCodec" in capsys.readouterr().out


def test_the_busy_threads_do_a_cpu_stage_s_work_until_stopped(bench, jpeg_root):
    paths = list_file_root(jpeg_root)[0]
    stop = threading.Event()
    stop.set()
    assert bench.cpu_stage_work(paths, stop) == 0
    stop.clear()
    timer = threading.Timer(0.2, stop.set)
    timer.start()
    assert bench.cpu_stage_work(paths, stop, chunk=4) >= 4 and stop.is_set()


@pytest.mark.parametrize("args", [["--busy", "-1"], ["--switch-ms", "0"]])
def test_bad_contention_arguments_are_refused(bench, args):
    with pytest.raises(SystemExit):
        bench.main(args)
