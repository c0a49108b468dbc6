"""Data types, image types, interpolation types and layouts, named as in DALI's ``types`` module."""

from __future__ import annotations

import enum

import numpy as np


class DALIDataType(enum.Enum):
    """Element types an operator can produce (``dtype=`` arguments)."""

    UINT8 = "uint8"
    UINT16 = "uint16"
    UINT32 = "uint32"
    UINT64 = "uint64"
    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    INT64 = "int64"
    FLOAT16 = "float16"
    FLOAT = "float32"
    FLOAT64 = "float64"
    BOOL = "bool"

    @property
    def numpy(self) -> np.dtype:
        """The matching numpy dtype."""
        return np.dtype(self.value)


class DALIImageType(enum.Enum):
    """Colour spaces a decoder can produce."""

    RGB = "RGB"
    BGR = "BGR"
    GRAY = "L"


class DALIInterpType(enum.Enum):
    """Interpolation methods of resampling operators (``interp_type``, ``min_filter``, ``mag_filter``),
    with DALI's values. Operators say which they implement and reject the others by name."""

    INTERP_NN = 0
    INTERP_LINEAR = 1
    INTERP_CUBIC = 2
    INTERP_LANCZOS3 = 3
    INTERP_TRIANGULAR = 4
    INTERP_GAUSSIAN = 5


UINT8 = DALIDataType.UINT8
UINT16 = DALIDataType.UINT16
UINT32 = DALIDataType.UINT32
UINT64 = DALIDataType.UINT64
INT8 = DALIDataType.INT8
INT16 = DALIDataType.INT16
INT32 = DALIDataType.INT32
INT64 = DALIDataType.INT64
FLOAT16 = DALIDataType.FLOAT16
FLOAT = DALIDataType.FLOAT
FLOAT64 = DALIDataType.FLOAT64
BOOL = DALIDataType.BOOL

RGB = DALIImageType.RGB
BGR = DALIImageType.BGR
GRAY = DALIImageType.GRAY

INTERP_NN = DALIInterpType.INTERP_NN
INTERP_LINEAR = DALIInterpType.INTERP_LINEAR
INTERP_CUBIC = DALIInterpType.INTERP_CUBIC
INTERP_LANCZOS3 = DALIInterpType.INTERP_LANCZOS3
INTERP_TRIANGULAR = DALIInterpType.INTERP_TRIANGULAR
INTERP_GAUSSIAN = DALIInterpType.INTERP_GAUSSIAN

HWC = "HWC"
CHW = "CHW"
LAYOUTS = (HWC, CHW)
# DALI's legacy layout names are per-sample layouts: ``types.NCHW == "CHW"``, as in DALI
NHWC = HWC
NCHW = CHW
NFHWC = "FHWC"
NFCHW = "FCHW"

#: DALI's ``device_id`` for a pipeline without a GPU; the same as ``device_id=None``
CPU_ONLY_DEVICE_ID = -99999


def to_numpy_dtype(dtype: DALIDataType | np.dtype | type | str) -> np.dtype:
    """Accept a ``types`` member, a numpy dtype or its name; return the numpy dtype."""
    if isinstance(dtype, DALIDataType):
        return dtype.numpy
    try:
        return np.dtype(dtype)
    except TypeError as exc:
        raise ValueError(f"unknown dtype {dtype!r}") from exc


def to_dali_type(dtype: np.dtype | type | str) -> DALIDataType:
    """The ``types`` member of a numpy dtype; ValueError for one DALI has no member for."""
    name = np.dtype(dtype).name
    try:
        return DALIDataType(name)
    except ValueError:
        raise ValueError(f"dtype {name} has no DALIDataType") from None
