"""``experimental.readers.fits``: image HDUs of FITS files (astronomy's format), as DALI's reader.

Files come as in ``readers.numpy``: ``file_root`` filtered by ``file_filter`` (``*.fits``),
``file_list`` or ``files``. A sample gives one output per entry of ``hdu_indices`` (1-based, as in
CFITSIO: 1 is the primary HDU; ``[2]`` by default, the first extension): that HDU's image with
its axes in C order (NAXISn reversed), in the type CFITSIO calls its equivalent type (BITPIX,
unsigned by the BZERO convention, float32 or float64 when BSCALE or BZERO scale it), tile-compressed
images (Rice, GZIP, PLIO, HCOMPRESS) decompressed. As in DALI, ``dtypes`` is checked (supported
types, one per HDU) and does not convert: an output has its image's type. A table HDU, an HDU
without an image or an index past the file's last HDU is an error naming the file and the HDU.
Files are read with astropy (``pip install 'raypipe[fits]'``), on the host also for
``device="gpu"``, whose outputs then move to the GPU.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import ArgumentError, ReaderError
from ..operator import Schema, register
from ..types import DALIDataType
from .cast import parse_dtype
from .file_listing import FilteredFilesReader

_OP = "experimental.readers.fits"

#: The output types DALI's FITS reader accepts in ``dtypes``.
SUPPORTED_DTYPES = frozenset(np.dtype(t) for t in ("u1", "u2", "u4", "u8", "i1", "i2", "i4", "i8", "f2", "f4", "f8"))


def astropy_fits() -> ModuleType:
    """``astropy.io.fits``, or an error saying how to install it."""
    try:
        from astropy.io import fits
    except ImportError as error:
        raise ArgumentError(f"{_OP} needs astropy: pip install 'raypipe[fits]' ({error})") from None
    return fits


def read_image_hdus(path: str, hdu_indices: Sequence[int]) -> list[np.ndarray]:
    """The images of the HDUs ``hdu_indices`` (1-based) of the FITS file ``path``, in native byte
    order and C order. ValueError saying which HDU is not an image; OSError when the file cannot
    be read."""
    fits = astropy_fits()
    images = []
    with fits.open(path, memmap=False, lazy_load_hdus=True) as hdus:
        for index in hdu_indices:
            try:
                hdu = hdus[index - 1]
            except IndexError:
                raise ValueError(f"HDU {index} is past the file's last HDU ({len(hdus)})") from None
            if not isinstance(hdu, (fits.PrimaryHDU, fits.ImageHDU, fits.CompImageHDU)):
                raise ValueError(f"HDU {index} is a {type(hdu).__name__}: only image HDUs are read, as in DALI")
            data = hdu.data
            if data is None or data.ndim == 0:
                raise ValueError(f"HDU {index} holds no image (NAXIS = 0)")
            images.append(np.ascontiguousarray(data, dtype=data.dtype.newbyteorder("=")))
    return images


@register
class FitsReader(FilteredFilesReader):
    """Reads image HDUs of FITS files: one output per HDU of ``hdu_indices``, no layout."""

    schema = Schema(_OP, devices=("cpu", "gpu"), min_inputs=0, max_inputs=0, is_reader=True)
    SHUFFLES_LISTING = True
    reads_on_host = True  # device="gpu": read on the host, then move the outputs

    def configure(
        self,
        file_root: str | None = None,
        file_filter: str = "*.fits",
        file_list: str | None = None,
        files: str | Sequence[str] | None = None,
        hdu_indices: int | Sequence[int] = (2,),
        dtypes: DALIDataType | Sequence[DALIDataType] | None = None,
        **reader_args: Any,
    ) -> None:
        self.configure_files(file_root, file_filter, file_list, files)
        indices = [hdu_indices] if isinstance(hdu_indices, (int, np.integer)) else list(hdu_indices)
        if not indices or any(isinstance(i, bool) or not isinstance(i, (int, np.integer)) or i < 1 for i in indices):
            raise ArgumentError(f"{_OP}: hdu_indices must be ints >= 1 (1 is the primary HDU), got {hdu_indices!r}")
        self.hdu_indices = [int(i) for i in indices]
        if dtypes is not None:
            given = [dtypes] if isinstance(dtypes, (DALIDataType, np.dtype, type, str)) else list(dtypes)
            for dtype in given:
                if parse_dtype(_OP, "dtypes", dtype) not in SUPPORTED_DTYPES:
                    supported = ", ".join(sorted(str(d) for d in SUPPORTED_DTYPES))
                    raise ArgumentError(f"{_OP}: unsupported output dtype {dtype!r}; supported: {supported}")
            if len(given) != len(self.hdu_indices):
                raise ArgumentError(
                    f"{_OP}: {len(given)} dtypes for {len(self.hdu_indices)} hdu_indices (one type per HDU)"
                )
        astropy_fits()
        self.configure_reader(**reader_args)
        self._stats = {"files_read": 0, "bytes_read": 0}
        self._stats_lock = threading.Lock()

    @property
    def num_outputs(self) -> int:
        return len(self.hdu_indices)

    def output_layouts(self) -> list[str]:
        return [""] * self.num_outputs

    def output_layout(self, input_layouts: Any) -> str:
        return ""

    def io_stats(self) -> dict[str, int]:
        """Files read and their bytes on disk."""
        with self._stats_lock:
            return dict(self._stats)

    def read(self, index: int) -> tuple[np.ndarray, ...]:
        """Random access: the images of sample ``index``'s HDUs; ReaderError naming the file."""
        if not 0 <= index < len(self.paths):
            raise IndexError(f"{_OP}: sample index {index} outside [0, {len(self.paths)})")
        path = self.paths[index]
        try:
            images = read_image_hdus(path, self.hdu_indices)
            size = os.path.getsize(path)
        except OSError as exc:
            raise ReaderError(f"{_OP}: cannot read {path!r}: {exc.strerror or exc}") from None
        except Exception as exc:  # astropy's errors on a malformed file: ValueError, VerifyError, TypeError...
            raise ReaderError(f"{_OP}: {path!r}: {exc}") from None
        with self._stats_lock:
            self._stats["files_read"] += 1
            self._stats["bytes_read"] += size
        return tuple(images)
