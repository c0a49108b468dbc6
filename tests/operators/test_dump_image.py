"""``dump_image`` against DALI 2.4's CPU build where installed: the same files, byte for byte, for
decoded JPEGs from a reader and for given images of 1 and 3 channels; the output is the input; on
``gpu`` the same files; what it refuses."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn
from raypipe.errors import ArgumentError, SampleError

GIVEN = [np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3), np.full((1, 2, 3), 200, np.uint8)]
GRAY = [np.arange(6, dtype=np.uint8).reshape(3, 2, 1), np.full((1, 1, 1), 7, np.uint8)]


def _files(folder) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _decoded(f, jpeg_files, suffix: str, device: str = "cpu"):
    jpegs, _ = f.readers.file(files=jpeg_files[:2])
    images = f.crop(f.decoders.image(jpegs), crop=(4, 5))
    return f.dump_image(images.gpu() if device == "gpu" else images, suffix=suffix)


def _given(samples):
    def build(f, _, suffix: str, device: str = "cpu"):
        source = f.external_source(source=lambda: samples, batch=True, layout="HWC")
        return f.dump_image(source.gpu() if device == "gpu" else source, suffix=suffix)

    return build


def _run_ours(build, jpeg_files, folder, monkeypatch, device="cpu"):
    monkeypatch.chdir(folder)

    @rp.pipeline_def(batch_size=2, num_threads=2, seed=0)
    def pipe():
        return build(fn, jpeg_files, "x", device)

    with pipe() as p:
        (out,) = p.run()
    return [np.asarray(out.as_cpu().at(i)) for i in range(2)], out.layout()


@pytest.mark.parametrize("case", ["decoded", "given", "gray"])
def test_the_files_are_dalis(jpeg_files, tmp_path, monkeypatch, case):
    dali = pytest.importorskip("nvidia.dali")
    build = {"decoded": _decoded, "given": _given(GIVEN), "gray": _given(GRAY)}[case]
    (tmp_path / "ours").mkdir()
    (tmp_path / "dali").mkdir()
    mine, layout = _run_ours(build, jpeg_files, tmp_path / "ours", monkeypatch)

    monkeypatch.chdir(tmp_path / "dali")

    @dali.pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=0)
    def theirs():
        return build(dali.fn, jpeg_files, "x")

    p = theirs()
    p.build()
    (out,) = p.run()
    assert _files(tmp_path / "ours") == _files(tmp_path / "dali") and len(_files(tmp_path / "ours")) == 2
    assert layout == out.layout() == "HWC"
    for a, i in zip(mine, range(2)):
        np.testing.assert_array_equal(a, np.asarray(out[i]))


def test_on_the_gpu_the_files_are_the_cpus(jpeg_files, tmp_path, monkeypatch):
    for device in ("cpu", "gpu"):
        (tmp_path / device).mkdir()
        _run_ours(_decoded, jpeg_files, tmp_path / device, monkeypatch, device)
    assert _files(tmp_path / "cpu") == _files(tmp_path / "gpu")
    assert sorted(_files(tmp_path / "cpu")) == ["0-x-0.ppm", "1-x-0.ppm"]


@pytest.mark.parametrize(
    "sample", [np.zeros((2, 2, 3), np.float32), np.zeros((2, 2), np.uint8), np.zeros((2, 2, 4), np.uint8)]
)
def test_what_is_not_an_image_fails_naming_the_operator(ours, tmp_path, monkeypatch, sample):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SampleError, match="dump_image: needs uint8 HWC images of 1 or 3 channels"):
        ours([sample], lambda x: fn.dump_image(x))
    assert not list(tmp_path.iterdir())


def test_only_hwc_is_taken():
    @rp.pipeline_def(batch_size=1, num_threads=1)
    def pipe():
        return fn.dump_image(fn.external_source(source=lambda: GIVEN[:1], batch=True), input_layout="CHW")

    with pytest.raises(ArgumentError, match="dump_image: input_layout must be 'HWC'"):
        pipe().build()
