"""The start-up self-checks of the GPU components: what they prove, what they report when a
component is missing or broken, and the comparison against the host decode they rely on."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest
from PIL import Image

from raypipe import device_check
from raypipe.backend import gpu_available
from raypipe.kernels import launch
from raypipe.operators.host_decode import decode, open_source
from raypipe.types import DALIImageType

no_gpu = pytest.mark.skipif(gpu_available(), reason="checks the machine without a GPU")


@pytest.fixture
def fresh_checks():
    """The checks are cached per process: forget them around a test that changes their inputs."""
    device_check.clear()
    yield
    device_check.clear()


def test_probe_jpeg_is_a_small_colour_jpeg_with_its_host_decode():
    data, reference = device_check.probe_jpeg()
    assert data[:2] == b"\xff\xd8" and len(data) < 8192
    assert reference.shape == (48, 64, 3) and reference.dtype == np.uint8
    assert np.array_equal(reference, np.asarray(Image.open(io.BytesIO(data)).convert("RGB")))
    assert reference.std() > 20  # colours and gradients, not a flat image a broken decoder could match


def test_another_jpeg_decoder_passes_the_comparison():
    """libjpeg-turbo's fast integer IDCT rounds differently from Pillow's default, as nvJPEG does:
    a real second decoder must pass, or the check would reject working GPU decoders."""
    data, reference = device_check.probe_jpeg()
    other = decode(open_source(np.frombuffer(data, np.uint8), DALIImageType.RGB), DALIImageType.RGB, fast_idct=True)
    assert device_check.compare_decoded(other, reference) is None


def test_comparison_names_what_is_wrong():
    _, reference = device_check.probe_jpeg()
    assert "decoded nothing" in device_check.compare_decoded(None, reference)
    assert "shape (48, 63, 3)" in device_check.compare_decoded(reference[:, :63], reference)
    assert "expected uint8" in device_check.compare_decoded(reference.astype(np.float32), reference)
    wrong = device_check.compare_decoded(255 - reference, reference)
    assert wrong is not None and "grey levels on average" in wrong
    assert device_check.compare_decoded(reference[:, :, :1][:, :, 0], reference[:, :, :1]) is None  # HW gray


def test_probe_kernel_computes_its_value_in_the_simulator():
    """The kernel the check compiles on a GPU, run by the same launcher in numba's simulator."""
    assert launch.simulator_enabled()
    from raypipe.kernels.probe import probe

    values = np.array([20], np.int32)
    launch.launch(np, probe, 1, 1, values)
    assert values[0] == 41


@no_gpu
def test_checks_without_a_gpu_say_why(fresh_checks):
    kernels = device_check.kernels()
    assert not kernels.ok and kernels.detail.startswith("no usable GPU (")
    decoder = device_check.decoder(0)
    assert not decoder.ok and decoder.detail.startswith("no usable GPU (")
    assert decoder.as_dict() == {"ok": False, "detail": decoder.detail}


def test_failures_name_the_likely_fix():
    nvvm = device_check.describe_failure(RuntimeError("libNVVM cannot be found. Do `conda install cuda-nvvm`"))
    assert nvvm.startswith("numba-cuda has no NVVM compiler") and "gpu-cu13" in nvvm
    ptx = device_check.describe_failure(RuntimeError("CUDA_ERROR_UNSUPPORTED_PTX_VERSION"))
    assert "driver is older" in ptx
    plain = device_check.describe_failure(ValueError("first line\nsecond line"))
    assert plain == "ValueError: first line"


def test_two_cupy_wheels_are_found(tmp_path, monkeypatch):
    """Two cupy distributions overwrite each other's files in site-packages: the check lists them."""
    for name in ("cupy_cuda12x-13.6.0", "cupy_cuda13x-14.2.0"):
        info = tmp_path / f"{name}.dist-info"
        info.mkdir()
        project, version = name.split("-")
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {project.replace('_', '-')}\nVersion: {version}\n"
        )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert {"cupy-cuda12x", "cupy-cuda13x"} <= set(device_check.installed_cupy())


def test_warn_once_warns_once_per_key():
    key = "test-warn-once"
    with pytest.warns(device_check.GpuComponentWarning, match="first") as record:
        device_check.warn_once(key, "first")
        device_check.warn_once(key, "again")
    assert len(record) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        device_check.warn_once(key, "still not")


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_the_kernels_and_the_decoder_prove_themselves(fresh_checks):
    kernels = device_check.kernels()
    assert kernels.ok, kernels.detail
    decoder = device_check.decoder(0)
    assert decoder.ok, decoder.detail
    assert set(decoder.backends) == set(device_check.GPU_BACKENDS), decoder.detail
