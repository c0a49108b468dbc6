"""Data types, image types, interpolation types and layouts, named as in DALI's ``types`` module."""

from __future__ import annotations

import enum

import numpy as np

from .sample_info import BatchInfo, SampleInfo  # noqa: F401  (DALI's callback arguments)


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
    """Colour spaces: decoders produce RGB, BGR or GRAY; ``color_space_conversion`` also takes YCbCr.
    ``ANY_DATA`` is DALI's "not an image", which scripts pass as the deprecated ``image_type`` of
    ``slice``, ``crop`` or ``resize`` (no effect there)."""

    RGB = "RGB"
    BGR = "BGR"
    GRAY = "L"
    YCbCr = "YCbCr"
    ANY_DATA = "ANY_DATA"


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
YCbCr = DALIImageType.YCbCr
ANY_DATA = DALIImageType.ANY_DATA

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


def to_numpy_type(dali_type: DALIDataType) -> type:
    """DALI's ``types.to_numpy_type``: the numpy scalar type of a ``types`` member (``FLOAT`` ->
    ``np.float32``), as scripts key their tables of framework types by it."""
    return to_numpy_dtype(dali_type).type


def to_dali_type(dtype: np.dtype | type | str) -> DALIDataType:
    """The ``types`` member of a numpy dtype; ValueError for one DALI has no member for."""
    name = np.dtype(dtype).name
    try:
        return DALIDataType(name)
    except ValueError:
        raise ValueError(f"dtype {name} has no DALIDataType") from None


class ScalarConstant:
    """A scalar with a DALI type for arithmetic on pipeline data (``images * types.Constant(2,
    dtype=types.UINT8)`` stays uint8), as DALI's: ``bool``, ``int`` and ``float`` are BOOL, INT32 and
    FLOAT unless ``dtype`` says otherwise."""

    def __init__(self, value: bool | int | float | np.generic, dtype: DALIDataType | None = None):
        if isinstance(value, (np.generic, np.ndarray)):
            if dtype is None:
                dtype = to_dali_type(value.dtype)
            value = value.item()
        if not isinstance(value, (bool, int, float)):
            raise TypeError(f"types.Constant: a scalar must be a bool, int or float, got {value!r}")
        if dtype is None:
            dtype = BOOL if isinstance(value, bool) else INT32 if isinstance(value, int) else FLOAT
        self.dtype = dtype if isinstance(dtype, DALIDataType) else to_dali_type(to_numpy_dtype(dtype))
        kind = self.dtype.numpy.kind
        self.value = bool(value) if kind == "b" else float(value) if kind == "f" else int(value)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        return np.asarray(self.value, dtype=dtype or self.dtype.numpy)

    def __repr__(self) -> str:
        return f"{self.value}"

    def __str__(self) -> str:
        return f"{self.value}:{self.dtype}"


def Constant(  # noqa: N802  (DALI's name)
    value, dtype: DALIDataType | None = None, shape=None, layout: str | None = None, device: str | None = None, **kwargs
):
    """A constant for a pipeline definition, as DALI's ``types.Constant``: a scalar alone is a
    :class:`ScalarConstant` for arithmetic; a list, an array, or any of ``shape``, ``layout``,
    ``device`` or other arguments place a ``constant`` operator (float64 becomes float32, and int64
    int32 unless ``dtype`` says so, as in DALI)."""
    scalar = np.ndim(value) == 0 and not isinstance(value, (list, tuple))
    if scalar and device is None and layout is None and not kwargs and (shape is None or np.size(shape) == 0):
        return ScalarConstant(value, dtype)
    from . import fn

    array = np.asarray(value)
    if array.dtype == np.float64:
        array = array.astype(np.float32)
    elif array.dtype == np.int64 and dtype is None:
        array = array.astype(np.int32)
    data = array.reshape(-1).tolist()
    integral = array.dtype.kind in "biu"
    dims = list(array.shape) if shape is None else [shape] if isinstance(shape, int) else list(shape)

    constant = {
        "device": device or "cpu",
        "fdata": None if integral else data,
        "idata": [int(v) for v in data] if integral else None,
        "shape": dims,
        "dtype": dtype if dtype is not None else to_dali_type(array.dtype),
        "layout": layout or "",
        **kwargs,
    }
    from .graph import defining_a_graph

    if not defining_a_graph():  # in a pipeline's __init__, as DALI allows: placed where it is used
        from .deferred_node import DeferredNode

        device = constant.pop("device")
        described = f"types.Constant(shape={dims}, dtype={constant['dtype']})"
        return DeferredNode("constant", (), constant, device, described)
    return fn.constant(**constant)
