"""DALI's ``TensorCPU``: a sample or a dense batch in host memory, as ``tl[i]``, ``tl.as_tensor()``
and ``tl.as_reshaped_tensor()`` give it.

It is a numpy array, so numpy and torch code takes it as one, that also answers the Tensor methods
DALI scripts call: ``shape()`` (a list) besides the attribute ``.shape`` (a tuple), ``layout()``,
``source_info()`` and ``get_property(key)`` (where a pipeline output's sample came from, as DALI
gives it), ``data_ptr()``, ``copy_to_external(ptr)`` (the bytes copied to an address, as a script's
own ``feed_ndarray`` does into a torch tensor) and ``as_cpu()``. Its ``dtype`` stays numpy's (DALI's
is a ``types.DALIDataType``; ``plugin.pytorch.to_torch_type`` takes either). What numpy's functions
compute from it (arithmetic, reductions) is a plain array; views and copies of it stay tensors.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np


class TensorShape(tuple):
    """A shape that is also DALI's ``shape()`` method: ``t.shape`` is the tuple, ``t.shape()`` the list."""

    def __call__(self) -> list[int]:
        return list(self)


class TensorCPU(np.ndarray):
    """A host array with DALI's ``TensorCPU`` methods (see the module's docstring)."""

    _layout = ""
    _source_info = ""

    @classmethod
    def of(cls, array: np.ndarray, layout: str = "", source_info: str = "") -> TensorCPU:
        """``array`` viewed as a tensor of ``layout`` (no copy), from ``source_info``."""
        tensor = array.view(cls)
        tensor._layout = layout
        tensor._source_info = source_info
        return tensor

    def __array_finalize__(self, obj: Any) -> None:
        self._layout = getattr(obj, "_layout", "")
        self._source_info = getattr(obj, "_source_info", "")

    def __array_wrap__(self, array: np.ndarray, context: Any = None, return_scalar: bool = False) -> Any:
        result = array.view(np.ndarray)
        return result[()] if return_scalar else result

    @property
    def shape(self) -> TensorShape:
        return TensorShape(np.ndarray.shape.__get__(self))

    @shape.setter
    def shape(self, value: Any) -> None:
        np.ndarray.shape.__set__(self, value)

    def layout(self) -> str:
        """The layout, such as ``"HWC"`` (``""`` when it has none)."""
        return self._layout

    def set_layout(self, layout: str | None) -> None:
        """Set the layout (DALI's ``Tensor.set_layout``): a string, or None for none."""
        if layout is not None and not isinstance(layout, str):
            raise TypeError(f"set_layout: a layout is a string such as 'HWC', got {layout!r}")
        self._layout = layout or ""

    def source_info(self) -> str:
        """Where the sample's data came from, as ``fn.get_property(key="source_info")`` gives it (a
        file reader's path as listed); ``""`` when it did not come from a reader's data."""
        return self._source_info

    def get_property(self, key: str) -> str | None:
        """DALI's properties of the tensor: ``"source_info"`` and ``"layout"``; None where unset."""
        return {"source_info": self._source_info, "layout": self._layout}.get(key) or None

    def data_ptr(self) -> int:
        """The address of the first element."""
        return self.ctypes.data

    def copy_to_external(self, ptr: ctypes.c_void_p | int, non_blocking: bool = False) -> None:
        """Copy the elements, C-ordered, to the host memory at ``ptr`` (room for ``nbytes`` bytes)."""
        address = destination_address(ptr)
        source = np.ascontiguousarray(self)
        ctypes.memmove(address, source.ctypes.data, source.nbytes)

    def as_cpu(self) -> TensorCPU:
        """Itself: it is in host memory already."""
        return self


def destination_address(ptr: Any) -> int:
    """The address ``copy_to_external`` writes to: an int, or a ctypes pointer such as
    ``ctypes.c_void_p`` (its ``value``); ValueError for a null one."""
    address = ptr.value if hasattr(ptr, "value") else int(ptr)
    if not address:
        raise ValueError("copy_to_external: the destination pointer is null")
    return address


class _Kind(type):
    """A class that stands for a kind of raypipe object in ``isinstance`` (DALI's backend classes)."""

    def __instancecheck__(cls, obj: Any) -> bool:
        return cls._is_kind(obj)


class TensorGPU(metaclass=_Kind):
    """DALI's ``TensorGPU`` for ``isinstance``: a sample or dense batch on the GPU is a cupy array."""

    @staticmethod
    def _is_kind(obj: Any) -> bool:
        from .backend import is_device_array

        return is_device_array(obj)


class TensorListCPU(metaclass=_Kind):
    """DALI's ``TensorListCPU`` for ``isinstance``: a :class:`~raypipe.tensor_list.TensorList` on the host."""

    @staticmethod
    def _is_kind(obj: Any) -> bool:
        from .tensor_list import TensorList

        return isinstance(obj, TensorList) and obj.device == "cpu"


class TensorListGPU(metaclass=_Kind):
    """DALI's ``TensorListGPU`` for ``isinstance``: a :class:`~raypipe.tensor_list.TensorList` on the GPU."""

    @staticmethod
    def _is_kind(obj: Any) -> bool:
        from .tensor_list import TensorList

        return isinstance(obj, TensorList) and obj.device == "gpu"
