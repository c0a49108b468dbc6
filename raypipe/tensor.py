"""DALI's ``TensorCPU``: a sample or a dense batch in host memory, as ``tl[i]``, ``tl.as_tensor()``
and ``tl.as_reshaped_tensor()`` give it.

It is a numpy array, so numpy and torch code takes it as one, that also answers the Tensor methods
DALI scripts call: ``shape()`` (a list) besides the attribute ``.shape`` (a tuple), ``layout()``,
``source_info()`` and ``get_property(key)`` (where a pipeline output's sample came from, as DALI
gives it), ``data_ptr()``, ``copy_to_external(ptr)`` (the bytes copied to an address, as a script's
own ``feed_ndarray`` does into a torch tensor), ``reinterpret(type)`` and ``as_cpu()``. Scripts
make one as DALI's, ``TensorCPU(array, layout)``, viewing the array's memory. Its ``dtype`` stays
numpy's (DALI's is a ``types.DALIDataType``; ``plugin.pytorch.to_torch_type`` takes either). What
numpy's functions compute from it (arithmetic, reductions) is a plain array; views and copies of it
stay tensors.

``TensorListCPU(data, layout)`` and ``TensorListGPU`` make a
:class:`~raypipe.tensor_list.TensorList` (to feed an external source, say) as DALI's
constructors do, and ``isinstance`` tells what a pipeline gave by them; ``TensorGPU(array)`` makes
a cupy array, the GPU stage's tensor.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
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

    def __new__(cls, data: Any, layout: str | None = None, is_pinned: bool = False) -> TensorCPU:
        """DALI's ``TensorCPU(array, layout)``: ``data`` (an array, or what numpy takes as one) viewed
        without a copy; ``layout`` has one letter per dimension. ``is_pinned`` (page-locked memory
        in DALI) is accepted: a host array here is an ordinary one."""
        array = np.asarray(data)
        layout = check_layout("TensorCPU", layout if layout is not None else getattr(data, "_layout", ""), array.ndim)
        return cls.of(array, layout)

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

    def reinterpret(self, new_type: Any) -> None:
        """The same bytes read as ``new_type`` (a ``types.DALIDataType`` or numpy dtype) of the same
        element size, in place, as DALI's; ValueError for another size."""
        self.dtype = reinterpreted_dtype(self.dtype, new_type)

    def as_cpu(self) -> TensorCPU:
        """Itself: it is in host memory already."""
        return self


def check_layout(kind: str, layout: Any, ndim: int) -> str:
    """``layout`` when it is a string naming ``ndim`` dimensions or empty; ValueError (TypeError
    for a non-string) naming ``kind`` otherwise."""
    if not isinstance(layout, str):
        raise TypeError(f"{kind}: a layout is a string such as 'HWC', got {layout!r}")
    if layout and len(layout) != ndim:
        raise ValueError(f"{kind}: layout {layout!r} names {len(layout)} dimensions, the samples have {ndim}")
    return layout


def reinterpreted_dtype(dtype: np.dtype, new_type: Any) -> np.dtype:
    """The numpy dtype of ``new_type``, which must have ``dtype``'s element size (``reinterpret``)."""
    from .types import to_dali_type, to_numpy_dtype

    new = to_numpy_dtype(new_type)
    if new.itemsize != dtype.itemsize:
        raise ValueError(
            f"reinterpret: {to_dali_type(new).name} has {new.itemsize}-byte elements, "
            f"the data {to_dali_type(dtype).name} {dtype.itemsize}-byte ones; the element size cannot change"
        )
    return new


def destination_address(ptr: Any) -> int:
    """The address ``copy_to_external`` writes to: an int, or a ctypes pointer such as
    ``ctypes.c_void_p`` (its ``value``); ValueError for a null one."""
    address = ptr.value if hasattr(ptr, "value") else int(ptr)
    if not address:
        raise ValueError("copy_to_external: the destination pointer is null")
    return address


class _Kind(type):
    """A class that stands for a kind of raypipe object in ``isinstance`` (DALI's backend classes),
    and makes one when called, as DALI's constructors do."""

    def __instancecheck__(cls, obj: Any) -> bool:
        return cls._is_kind(obj)

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return cls._make(*args, **kwargs)


class TensorGPU(metaclass=_Kind):
    """DALI's ``TensorGPU`` for ``isinstance``: a sample or dense batch on the GPU is a cupy array."""

    @staticmethod
    def _is_kind(obj: Any) -> bool:
        from .backend import is_device_array

        return is_device_array(obj)

    @staticmethod
    def _make(data: Any, layout: str | None = None, device_id: int = -1) -> Any:
        """DALI's ``TensorGPU(data, layout)``: ``data`` as a cupy array on the current GPU (no copy
        when it is one; a GPU array has no layout here, so ``layout`` is only checked)."""
        import cupy

        array = cupy.asarray(data)
        check_layout("TensorGPU", layout or "", array.ndim)
        return array


class TensorListCPU(metaclass=_Kind):
    """DALI's ``TensorListCPU`` for ``isinstance``: a :class:`~raypipe.tensor_list.TensorList` on the host."""

    @staticmethod
    def _is_kind(obj: Any) -> bool:
        from .tensor_list import TensorList

        return isinstance(obj, TensorList) and obj.device == "cpu"

    @staticmethod
    def _make(data: Any, layout: str | None = None, is_pinned: bool = False, contiguous: bool = True) -> Any:
        """DALI's ``TensorListCPU(data, layout)``: a dense array (first dimension the batch, memory
        shared), a list of samples (copied), or another host batch (its samples, a new layout)."""
        from .tensor_list import TensorList

        return TensorList.construct(data, "cpu", layout, contiguous)

    @staticmethod
    def broadcast(tensor: Any, num_samples: int) -> Any:
        """A batch of ``num_samples`` copies of ``tensor``, with its layout (DALI's ``broadcast``)."""
        from .tensor_list import TensorList

        return TensorList.broadcast(tensor, num_samples, "cpu")

    @staticmethod
    def from_dlpack_list(list_of_objects: Sequence[Any], layout: str | None = None, contiguous: bool = False) -> Any:
        """A host batch of objects that export DLPack (torch CPU tensors, say), viewing their memory
        (copied into one buffer when ``contiguous``)."""
        from .tensor_list import TensorList

        return TensorList.construct([np.from_dlpack(o) for o in list_of_objects], "cpu", layout, contiguous)


class TensorListGPU(metaclass=_Kind):
    """DALI's ``TensorListGPU`` for ``isinstance``: a :class:`~raypipe.tensor_list.TensorList` on the GPU."""

    @staticmethod
    def _is_kind(obj: Any) -> bool:
        from .tensor_list import TensorList

        return isinstance(obj, TensorList) and obj.device == "gpu"

    @staticmethod
    def _make(data: Any, layout: str | None = None, device_id: int = -1, contiguous: bool = True) -> Any:
        """DALI's ``TensorListGPU(data, layout)``: as ``TensorListCPU``'s, of cupy arrays."""
        from .tensor_list import TensorList

        return TensorList.construct(data, "gpu", layout, contiguous)

    @staticmethod
    def broadcast(tensor: Any, num_samples: int) -> Any:
        """A GPU batch of ``num_samples`` copies of ``tensor`` (DALI's ``broadcast``)."""
        from .tensor_list import TensorList

        return TensorList.broadcast(tensor, num_samples, "gpu")

    @staticmethod
    def from_dlpack_list(
        list_of_objects: Sequence[Any], layout: str | None = None, stream: Any = None, contiguous: bool = False
    ) -> Any:
        """A GPU batch of objects that export DLPack on the GPU (torch CUDA tensors, say)."""
        import cupy

        from .tensor_list import TensorList

        return TensorList.construct([cupy.from_dlpack(o) for o in list_of_objects], "gpu", layout, contiguous)
