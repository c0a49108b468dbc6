"""``experimental.readers.fits`` on real FITS files written here with astropy: every image type
(unsigned and signed bytes by BZERO, scaled integers, floats), tile-compressed images, several
HDUs per sample, DALI's listing (``file_root``/``file_filter``, ``file_list``, ``files``),
shards, ``device="gpu"``, and the errors. DALI's own FITS reader needs a CUDA driver even on the
CPU, so the reference is the arrays written and astropy's reading of the files."""

from __future__ import annotations

import os

import numpy as np
import pytest

fits = pytest.importorskip("astropy.io.fits")

import raypipe as rp  # noqa: E402
from raypipe import fn, types  # noqa: E402
from raypipe.errors import ArgumentError, ReaderError, SampleError  # noqa: E402

RNG = np.random.default_rng(7)

#: HDU 2.. of ``many.fits``: (name, the image written, the HDU that writes it).
IMAGES = {
    "uint8": RNG.integers(0, 256, (5, 7), dtype=np.uint8),
    "int8": RNG.integers(-128, 128, (6,), dtype=np.int8),  # BITPIX 8, BZERO -128
    "int16": RNG.integers(-30000, 30000, (3, 4, 2), dtype=np.int16),
    "uint16": RNG.integers(0, 65536, (4, 4), dtype=np.uint16),  # BITPIX 16, BZERO 32768
    "int32": RNG.integers(-(2**31), 2**31 - 1, (2, 3), dtype=np.int32),
    "uint32": np.array([0, 1, 2**32 - 1], dtype=np.uint32),
    "int64": np.array([[-(2**62), 5]], dtype=np.int64),
    "float32": RNG.standard_normal((3, 5)).astype(np.float32),
    "float64": RNG.standard_normal((2, 2, 2)),
}


def _scaled(raw: np.ndarray, bscale: float, bzero: float):
    hdu = fits.ImageHDU(raw)
    hdu.header["BSCALE"], hdu.header["BZERO"] = bscale, bzero
    return hdu


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> str:
    """``many.fits`` (every type, scaled and compressed images, a table, an empty HDU) and a
    folder of small files ``a.fits``.. with one image each, plus a file of another extension."""
    root = tmp_path_factory.mktemp("fits")
    hdus = [fits.PrimaryHDU(), *(fits.ImageHDU(image) for image in IMAGES.values())]
    hdus.append(_scaled(np.array([[1, 2], [3, 4]], np.int16), 0.5, 1.5))  # equivalent type: float32
    hdus.append(_scaled(np.array([7, -8], np.int32), 0.25, 0.0))  # equivalent type: float64
    hdus.append(fits.CompImageHDU(RNG.integers(0, 5000, (20, 33), dtype=np.int32), compression_type="RICE_1"))
    hdus.append(fits.CompImageHDU(RNG.integers(0, 200, (9, 8), dtype=np.int16), compression_type="GZIP_2"))
    hdus.append(fits.BinTableHDU.from_columns([fits.Column(name="x", format="J", array=np.arange(3))]))
    hdus.append(fits.ImageHDU())
    fits.HDUList(hdus).writeto(root / "many.fits")
    small = root / "small"
    small.mkdir()
    for k, name in enumerate("abcdef"):
        fits.HDUList(
            [fits.PrimaryHDU(np.full((2, 2), k, np.int16)), fits.ImageHDU(np.arange(k + 1, dtype=np.float32))]
        ).writeto(small / f"{name}.fits")
    (small / "sub").mkdir()
    fits.HDUList([fits.PrimaryHDU(), fits.ImageHDU(np.array([9.0], np.float32))]).writeto(small / "sub" / "g.fits")
    (small / "notes.txt").write_text("not a FITS file")
    return str(root)


def _run(batch_size: int = 1, iterations: int = 1, device: str = "cpu", **kwargs) -> list[list[list[np.ndarray]]]:
    """The outputs of ``iterations`` batches of a pipeline of one FITS reader, as lists of arrays."""

    @rp.pipeline_def(batch_size=batch_size, num_threads=2, device_id=None, seed=1)
    def pipe():
        out = fn.experimental.readers.fits(device=device, name="Reader", **kwargs)
        return tuple(out) if isinstance(out, list) else out

    p = pipe()
    p.build()
    batches = []
    for _ in range(iterations):
        outs = p.run()
        batches.append([[np.asarray(o.as_cpu()[i]) for i in range(len(o))] for o in outs])
    return batches


def test_every_image_type_reads_as_written_in_native_byte_order(folder):
    path = os.path.join(folder, "many.fits")
    indices = list(range(2, 2 + len(IMAGES)))
    ((*outputs,),) = _run(files=[path], hdu_indices=indices)
    for (name, written), (got,) in zip(IMAGES.items(), outputs, strict=True):
        assert got.dtype == written.dtype and got.dtype.isnative, name
        np.testing.assert_array_equal(got, written, err_msg=name)


def test_scaled_and_compressed_images_take_cfitsios_equivalent_type(folder):
    path = os.path.join(folder, "many.fits")
    first = 2 + len(IMAGES)
    ((half, quarter, rice, gzip),) = _run(files=[path], hdu_indices=list(range(first, first + 4)))
    assert half[0].dtype == np.float32 and half[0].tolist() == [[2.0, 2.5], [3.0, 3.5]]
    assert quarter[0].dtype == np.float64 and quarter[0].tolist() == [1.75, -2.0]
    with fits.open(path) as hdus:
        for got, hdu in ((rice[0], hdus[first + 1]), (gzip[0], hdus[first + 2])):
            assert got.dtype == hdu.data.dtype.newbyteorder("=") and got.shape == hdu.data.shape
            np.testing.assert_array_equal(got, hdu.data)


def test_the_default_is_the_first_extension_and_the_listing_is_dalis(folder):
    """``file_root``: the matching files in it, then those of each sub-folder; ``hdu_indices=[2]``."""
    small = os.path.join(folder, "small")
    (batch,) = _run(batch_size=7, file_root=small)
    assert [x.tolist() for x in batch[0]] == [list(range(k + 1)) for k in range(6)] + [[9.0]]
    listing = os.path.join(folder, "list.txt")
    with open(listing, "w") as f:
        f.write("small/c.fits\n\nsmall/a.fits\n")
    (batch,) = _run(batch_size=2, file_list=listing, hdu_indices=1)
    assert [x[0, 0] for x in batch[0]] == [2, 0] and batch[0][0].dtype == np.int16
    (batch,) = _run(batch_size=2, file_root=small, files=["b.fits", "f.fits"], hdu_indices=[1, 2])
    assert [x.tolist() for x in batch[1]] == [[0.0, 1.0], list(range(6))]


def test_dtypes_are_checked_and_convert_nothing_as_in_dali(folder):
    ((image,),) = _run(files=[os.path.join(folder, "many.fits")], hdu_indices=[2], dtypes=[types.FLOAT])
    assert image[0].dtype == np.uint8


def test_shards_split_the_files_and_a_shuffle_keeps_them_whole(folder):
    small = os.path.join(folder, "small")
    files = [f"{c}.fits" for c in "abcdef"]
    seen = []
    for shard in range(2):
        (batch,) = _run(batch_size=3, file_root=small, files=files, num_shards=2, shard_id=shard)
        seen += [len(x) for x in batch[0]]
    assert seen == [1, 2, 3, 4, 5, 6]
    (batch,) = _run(batch_size=6, file_root=small, files=files, random_shuffle=True, initial_fill=6)
    assert sorted(len(x) for x in batch[0]) == [1, 2, 3, 4, 5, 6]


def test_a_checkpoint_resumes_the_same_files(folder):
    """DALI's FITS reader refuses checkpoints; this one resumes as every raypipe reader does."""

    def pipe(checkpoint=None):
        @rp.pipeline_def(batch_size=2, num_threads=2, device_id=None, seed=5, enable_checkpointing=True)
        def fits_pipe():
            return fn.experimental.readers.fits(file_root=os.path.join(folder, "small"), random_shuffle=True)

        p = fits_pipe(checkpoint=checkpoint)
        p.build()
        return p

    first = pipe()
    first.run()
    saved = first.checkpoint()
    expected = [[x.tolist() for x in first.run()[0]] for _ in range(3)]
    resumed = pipe(saved)
    assert [[x.tolist() for x in resumed.run()[0]] for _ in range(3)] == expected


def test_gpu_device_reads_on_the_host_and_gives_the_same_images(folder):
    args = {"files": [os.path.join(folder, "many.fits")], "hdu_indices": [2, 5]}
    (cpu,) = _run(**args)
    (gpu,) = _run(device="gpu", **args)
    for a, b in zip(cpu, gpu, strict=True):
        np.testing.assert_array_equal(a[0], b[0])


@pytest.mark.parametrize(
    "hdu, match",
    [
        (2 + len(IMAGES) + 4, r"HDU 15 is a BinTableHDU: only image HDUs are read"),
        (2 + len(IMAGES) + 5, r"HDU 16 holds no image \(NAXIS = 0\)"),
        (40, r"HDU 40 is past the file's last HDU \(16\)"),
        (1, r"HDU 1 holds no image"),
    ],
)
def test_an_hdu_that_is_no_image_is_an_error_naming_the_file(folder, hdu, match):
    path = os.path.join(folder, "many.fits")
    with pytest.raises(SampleError, match=f"experimental.readers.fits: '{path}': {match}"):
        _run(files=[path], hdu_indices=[hdu])


def test_a_missing_or_corrupt_file_is_named_and_can_be_skipped(folder, tmp_path):
    bad = tmp_path / "bad.fits"
    bad.write_bytes(b"SIMPLE  = garbage" * 10)
    with pytest.raises(SampleError, match=f"experimental.readers.fits: cannot read '{bad}': No SIMPLE card found"):
        _run(files=[str(bad)])
    with pytest.raises(SampleError, match="cannot read .*missing.fits'?: No such file"):
        _run(files=[str(tmp_path / "missing.fits")])
    good = os.path.join(folder, "small", "c.fits")
    (batch,) = _run(batch_size=3, files=[good, str(bad), good], on_error="skip")  # the bad one dropped
    assert [x.tolist() for x in batch[0]] == [[0.0, 1.0, 2.0]] * 2


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"files": "a.fits", "hdu_indices": [0]}, "hdu_indices must be ints >= 1"),
        ({"files": "a.fits", "hdu_indices": []}, "hdu_indices must be ints >= 1"),
        ({"files": "a.fits", "hdu_indices": [2, 3], "dtypes": [types.INT16]}, r"1 dtypes for 2 hdu_indices"),
        ({"files": "a.fits", "dtypes": [types.BOOL]}, "unsupported output dtype"),
        ({"files": ["a.fits"], "file_list": "l.txt"}, "give file_list or files, not both"),
        ({}, "give file_root, file_list or files"),
    ],
)
def test_argument_errors_before_anything_is_read(kwargs, match):
    @rp.pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        return fn.experimental.readers.fits(**kwargs)

    with pytest.raises(ArgumentError, match=f"experimental.readers.fits: {match}"):
        pipe().build()


def test_a_folder_without_fits_files_is_named(tmp_path):
    with pytest.raises(ReaderError, match=f"file_root '{tmp_path}' holds no files matching '\\*.fits'"):
        _run(file_root=str(tmp_path))
