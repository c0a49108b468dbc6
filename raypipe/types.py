"""Data types, image types and layouts, named as in DALI's ``types`` module."""

from __future__ import annotations

import enum

import numpy as np


class DALIDataType(enum.Enum):
    """Element types an operator can produce (``dtype=`` arguments)."""

    UINT8 = "uint8"
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


UINT8 = DALIDataType.UINT8
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

NHWC = "NHWC"
NCHW = "NCHW"
HWC = "HWC"
CHW = "CHW"
LAYOUTS = (HWC, CHW)


def to_numpy_dtype(dtype: DALIDataType | np.dtype | type | str) -> np.dtype:
    """Accept a ``types`` member, a numpy dtype or its name; return the numpy dtype."""
    if isinstance(dtype, DALIDataType):
        return dtype.numpy
    try:
        return np.dtype(dtype)
    except TypeError as exc:
        raise ValueError(f"unknown dtype {dtype!r}") from exc
