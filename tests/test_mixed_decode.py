"""The Mixed stage's GPU decode, run whole without a GPU.

With ``RAYPIPE_DEVICE=simulator`` and ``RAYPIPE_GPU_DECODE=host`` a pipeline is staged as on a GPU
and its mixed decoder is deferred: the CPU stage reads headers, draws windows and makes nvImageCodec's
code streams, the Mixed stage decodes each batch into one buffer with nvImageCodec's CPU backend and
hands it to the GPU stage as one packed batch, whose kernels run in numba's CUDA simulator. The
results must not depend on which stage makes the code streams, and must match the host decode.
"""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, nvimgcodec_c, types
from raypipe.backend import gpu_available
from raypipe.device_check import DECODE_MEAN_TOLERANCE, DECODE_P99_TOLERANCE
from raypipe.errors import SampleError
from raypipe.formats.registry import get, read_converted
from raypipe.gpu_decode import CODE_STREAMS_ENV, nvimgcodec_installed
from raypipe.kernels.launch import Packed

pytestmark = [
    pytest.mark.skipif(gpu_available(), reason="simulates the GPU path of a machine without a GPU"),
    pytest.mark.skipif(not nvimgcodec_installed(), reason="needs nvImageCodec"),
]


@rp.pipeline_def(batch_size=6, num_threads=1, seed=11, device_id=0, prefetch_queue_depth=1)
def cropped(files, output_type=types.RGB, on_error="raise", dst=None):
    """The files, or with ``dst`` what ``raypipe convert`` wrote there, cropped and flipped."""
    if dst is None:
        jpegs, labels = fn.readers.file(files=files, name="Reader")
    else:
        jpegs, labels = read_converted(dst, name="Reader")
    images = fn.decoders.image_random_crop(jpegs, device="mixed", output_type=output_type, on_error=on_error)
    flipped = fn.crop_mirror_normalize(
        images, mirror=fn.random.coin_flip(), dtype=types.FLOAT, mean=[0.0], std=[1.0], output_layout="HWC"
    )
    return images, flipped, labels


def _epoch(files, monkeypatch, *, decode: str, code_streams: str = "cpu", batches: int = 2, **kwargs):
    """Each batch's (decoded images, flipped images, labels) on the host, and the device report."""
    monkeypatch.setenv("RAYPIPE_DEVICE", "simulator")
    monkeypatch.setenv("RAYPIPE_GPU_DECODE", decode)
    monkeypatch.setenv(CODE_STREAMS_ENV, code_streams)
    out = []
    with cropped(files, **kwargs) as pipe:
        report = pipe.device_report()
        for _ in range(batches):
            images, flipped, labels = pipe.run()
            out.append(([np.asarray(i) for i in images.as_cpu()], [np.asarray(f) for f in flipped.as_cpu()], labels))
    return out, report


@pytest.fixture
def files(tmp_path):
    from raypipe.datasets import make_jpeg_folder

    return make_jpeg_folder(str(tmp_path), num_classes=2, per_class=6, size=(40, 30), progress=False)


def test_nvimgcodecs_c_api_and_python_binding_give_the_same_batches(files, monkeypatch):
    monkeypatch.setenv(nvimgcodec_c.API_ENV, "c")
    through_c, report = _epoch(files, monkeypatch, decode="host")
    assert report["decoder"]["api"] == "c", report
    monkeypatch.setenv(nvimgcodec_c.API_ENV, "python")
    through_python, report = _epoch(files, monkeypatch, decode="host")
    assert report["decoder"]["api"] == f"python ({nvimgcodec_c.API_ENV}=python)", report
    for (a_images, a_flipped, a_labels), (b_images, b_flipped, b_labels) in zip(through_c, through_python):
        assert all(np.array_equal(a, b) for a, b in zip(a_images, b_images))
        assert all(np.array_equal(a, b) for a, b in zip(a_flipped, b_flipped))
        assert np.array_equal(np.asarray(a_labels.as_tensor()), np.asarray(b_labels.as_tensor()))


def test_the_mixed_stage_decodes_with_nvimgcodec_and_code_streams_from_either_stage_agree(files, monkeypatch):
    by_cpu, report = _epoch(files, monkeypatch, decode="host", code_streams="cpu")
    assert report["decoder"]["path"] == "simulator" and report["decoder"]["code_streams"] == "cpu stage", report
    by_mixed, report = _epoch(files, monkeypatch, decode="host", code_streams="mixed")
    assert report["decoder"]["code_streams"] == "mixed stage", report
    for (a_images, a_flipped, a_labels), (b_images, b_flipped, b_labels) in zip(by_cpu, by_mixed):
        assert all(np.array_equal(a, b) for a, b in zip(a_images, b_images))
        assert all(np.array_equal(a, b) for a, b in zip(a_flipped, b_flipped))
        assert np.array_equal(np.asarray(a_labels.as_tensor()), np.asarray(b_labels.as_tensor()))


@pytest.mark.parametrize("output_type", [types.RGB, types.BGR, types.GRAY])
def test_the_simulated_gpu_decode_matches_the_host_decode(files, monkeypatch, output_type):
    gpu, _ = _epoch(files, monkeypatch, decode="host", output_type=output_type)
    host, report = _epoch(files, monkeypatch, decode="1", output_type=output_type)
    assert report["decoder"]["path"] == "host", report
    for (g_images, g_flipped, _), (h_images, h_flipped, _) in zip(gpu, host):
        for g, h, gf, hf in zip(g_images, h_images, g_flipped, h_flipped):
            assert g.shape == h.shape and g.shape[2] == (1 if output_type is types.GRAY else 3)
            diff = np.abs(g.astype(np.int16) - h.astype(np.int16))
            assert diff.mean() <= DECODE_MEAN_TOLERANCE and np.percentile(diff, 99) <= DECODE_P99_TOLERANCE
            mirrored = not np.array_equal(gf, g.astype(np.float32))
            assert np.array_equal(gf, (g[:, ::-1] if mirrored else g).astype(np.float32))
            assert np.array_equal(hf, (h[:, ::-1] if mirrored else h).astype(np.float32))


def test_a_batch_decoded_into_one_buffer_reaches_the_gpu_stage_as_one_packed_batch(files, monkeypatch):
    from raypipe.executor import Executor

    seen = []
    run_gpu = Executor._run_gpu

    def spy(self, xp, batch):
        seen.extend(type(v) for v in batch.device.values())
        return run_gpu(self, xp, batch)

    monkeypatch.setattr(Executor, "_run_gpu", spy)
    _epoch(files, monkeypatch, decode="host", batches=1)
    assert seen and set(seen) == {Packed}  # every batch, including any prefetched


def test_an_undecodable_sample_in_the_mixed_stage_is_named_or_skipped(files, monkeypatch, tmp_path):
    bad = tmp_path / "truncated.jpg"
    bad.write_bytes(open(files[0], "rb").read()[:400])
    with pytest.raises(SampleError, match="truncated.jpg"):
        _epoch([*files[:3], str(bad), *files[3:5]], monkeypatch, decode="host", batches=1)
    out, _ = _epoch([*files[:3], str(bad), *files[3:5]], monkeypatch, decode="host", batches=1, on_error="skip")
    kept, _ = _epoch(files[:3], monkeypatch, decode="host", batches=1)  # windows are keyed by sample index
    assert len(out[0][0]) == 5  # skipped, not replaced (the pipeline's default)
    assert all(np.array_equal(a, b) for a, b in zip(out[0][0][:3], kept[0][0][:3]))


def test_lmdb_records_are_decoded_from_read_only_views_of_the_map_as_the_files_are(files, monkeypatch, tmp_path):
    """A Caffe LMDB's encoded images are read-only views into its memory map: the C API's code
    streams take them by address, and the batches are those of the same JPEGs read as files."""
    import raypipe.executor as executor
    from raypipe.convert.plan import list_source
    from raypipe.convert.run import convert

    listing = tmp_path / "list.txt"
    listing.write_text("".join(f"{p} {i}\n" for i, p in enumerate(files)))
    db = str(tmp_path / "db")
    convert(list_source(str(listing)), db, get("caffe"), part_size=5, workers=1)
    writable = []
    maker = executor.code_stream_maker

    def spying_maker():
        make = maker()

        def spy(data, window):
            writable.append(data.flags.writeable)
            return make(data, window)

        return spy

    monkeypatch.setattr(executor, "code_stream_maker", spying_maker)
    monkeypatch.setenv(nvimgcodec_c.API_ENV, "c")
    as_files, _ = _epoch(files, monkeypatch, decode="host")
    del writable[:]
    as_records, report = _epoch(None, monkeypatch, decode="host", dst=db)
    assert report["decoder"]["api"] == "c" and report["decoder"]["code_streams"] == "cpu stage", report
    assert writable and not any(writable), "code streams made over the map's read-only views"
    for (a_images, a_flipped, _), (b_images, b_flipped, _) in zip(as_files, as_records):
        assert all(np.array_equal(a, b) for a, b in zip(a_images, b_images))
        assert all(np.array_equal(a, b) for a, b in zip(a_flipped, b_flipped))
    labels = [int(v) for _, _, batch in as_records for v in np.asarray(batch.as_tensor()).ravel()]
    assert labels == list(range(len(labels)))
