"""The batch container a pipeline returns: one ``TensorList`` per output."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from .backend import is_device_array, to_host
from .batch_buffers import Allocator
from .kernels.launch import Packed
from .tensor import TensorCPU, check_layout, destination_address, reinterpreted_dtype
from .types import DALIDataType, to_dali_type


class TensorList:
    """A batch of samples of one pipeline output, with the methods of DALI's ``TensorListCPU`` /
    ``TensorListGPU`` that training scripts use.

    ``device`` is ``"cpu"`` for host data and ``"gpu"`` for data made by the GPU
    stage. ``np.asarray(tl)`` gives the dense ``(batch, ...)`` array of a host
    batch whose samples share a shape; ``tl.as_cpu()`` brings a GPU batch to the
    host; ``tl[i]`` and ``tl.at(i)`` are one sample, and iterating gives every sample.
    Where DALI returns a ``Tensor`` (``tl[i]``, ``as_tensor()``, ``as_reshaped_tensor()``)
    this returns, on the host, a :class:`~raypipe.tensor.TensorCPU` (a numpy array with DALI's
    Tensor methods), and on the GPU the cupy array itself. A ragged batch of the GPU
    stage stays one :class:`~raypipe.kernels.launch.Packed` buffer: a sample is a view made when
    asked for, and ``as_cpu()`` copies the buffer once.
    """

    def __init__(self, samples: Sequence[Any] | Packed | Any, device: str, layout: str = ""):
        if isinstance(samples, (list, tuple, Packed)):
            self._samples = samples if isinstance(samples, Packed) else list(samples)
            self._dense = None
        else:
            self._dense = samples
            self._samples = None
        self.device = device
        self._layout = layout
        self._source_info: Callable[[int], str] | None = None  # a sample's source_info by its row

    @classmethod
    def from_samples(
        cls,
        samples: Sequence[Any],
        device: str,
        layout: str = "",
        xp=np,
        allocate: Allocator | None = None,
    ) -> TensorList:
        """Stack samples into one dense array when their shapes and dtypes agree (into
        ``allocate(shape, dtype)`` when given, for host samples); an array that already holds
        the whole batch is taken as it is, and so is a packed batch of the GPU stage
        (:class:`raypipe.kernels.launch.Packed`; viewed as one array when :meth:`~Packed.dense`)."""
        if isinstance(samples, Packed):
            dense = samples.dense()
            return cls(samples if dense is None else dense, device, layout)
        if not isinstance(samples, (list, tuple)):
            return cls(samples, device, layout)
        if samples and _uniform(samples):
            first = samples[0]
            if xp is not np or not isinstance(first, np.ndarray):
                return cls(xp.stack(samples), device, layout)
            shape = (len(samples), *first.shape)
            out = allocate(shape, first.dtype) if allocate is not None else None
            if out is None:
                out = np.empty(shape, first.dtype)
            np.concatenate(samples, axis=None, out=out.reshape(-1))  # one call, as np.stack is one per sample
            return cls(out, device, layout)
        return cls(list(samples), device, layout)

    @classmethod
    def construct(cls, data: Any, device: str, layout: str | None = None, contiguous: bool = True) -> TensorList:
        """What DALI's ``TensorListCPU(data, layout)`` / ``TensorListGPU`` make: from a batch of this
        device (its samples; its layout unless one is given), a dense array whose first dimension is
        the batch (memory shared), or a list of samples of one type and number of dimensions (copied
        into one buffer when ``contiguous``, viewed otherwise; the first's layout unless one is given)."""
        kind = "TensorListCPU" if device == "cpu" else "TensorListGPU"
        if isinstance(data, TensorList):
            if data.device != device:
                raise TypeError(
                    f"{kind}: the batch given lives on the {data.device}; use as_cpu() or a {kind} of its own"
                )
            layout = data.layout() if layout is None else layout
            tl = cls(data._samples if data._dense is None else data._dense, device)
        elif isinstance(data, (list, tuple)):
            tl = cls._of_samples(kind, data, device, contiguous)
            layout = (getattr(data[0], "_layout", "") if data else "") if layout is None else layout
        else:
            array = np.asarray(data) if device == "cpu" else _cupy().asarray(data)
            if array.ndim == 0:
                raise ValueError(f"{kind}: a 0-dim array is not a batch; its first dimension is the batch's")
            tl = cls(array, device)
        tl._layout = check_layout(kind, layout or "", tl.ndim())
        return tl

    @classmethod
    def _of_samples(cls, kind: str, data: Sequence[Any], device: str, contiguous: bool) -> TensorList:
        """A batch of ``data``'s samples; TypeError naming the first sample whose type or number of
        dimensions differs from the first's."""
        xp = np if device == "cpu" else _cupy()
        samples = [xp.asarray(sample) for sample in data]
        for i, sample in enumerate(samples[1:], 1):
            if sample.dtype != samples[0].dtype:
                raise TypeError(f"{kind}: sample {i} has type {sample.dtype}, sample 0 {samples[0].dtype}")
            if sample.ndim != samples[0].ndim:
                raise TypeError(f"{kind}: sample {i} has {sample.ndim} dimensions, sample 0 {samples[0].ndim}")
        if not contiguous:
            return cls(samples, device)
        if samples and _uniform(samples):
            return cls(xp.stack(samples), device)
        return cls([xp.array(sample) for sample in samples], device)

    @classmethod
    def broadcast(cls, tensor: Any, num_samples: int, device: str) -> TensorList:
        """``num_samples`` copies of ``tensor`` as one dense batch, with its layout (DALI's
        ``TensorListCPU.broadcast``)."""
        count = operator.index(num_samples)
        if count < 0:
            raise ValueError(f"broadcast: the number of samples cannot be negative, got {count}")
        xp = np if device == "cpu" else _cupy()
        array = xp.asarray(tensor)
        return cls(xp.repeat(array[None], count, axis=0), device, getattr(tensor, "_layout", ""))

    def reinterpret(self, new_type: Any) -> None:
        """The same bytes read as ``new_type`` (a ``types.DALIDataType`` or numpy dtype) of the same
        element size, in place, as DALI's; ValueError for another size."""
        if self._dense is not None:
            self._dense = self._dense.view(reinterpreted_dtype(self._dense.dtype, new_type))
        elif isinstance(self._samples, Packed):
            packed = self._samples
            data = packed.data.view(reinterpreted_dtype(packed.dtype, new_type))
            self._samples = Packed(data, packed.shapes, packed.offsets)
        elif self._samples:
            dtype = reinterpreted_dtype(self._samples[0].dtype, new_type)
            self._samples = [sample.view(dtype) for sample in self._samples]

    def __len__(self) -> int:
        return len(self._dense) if self._dense is not None else len(self._samples)

    def __getitem__(self, index: int) -> Any:
        """Sample ``index`` (negative counts from the end; IndexError out of range, as in DALI): on
        the host a :class:`~raypipe.tensor.TensorCPU` (with its ``source_info()``), as DALI's ``tl[i]``
        is a Tensor."""
        array = self.at(index)
        if not isinstance(array, np.ndarray):
            return array
        source = self._source_info(operator.index(index) % len(self)) if self._source_info is not None else ""
        return TensorCPU.of(array, self._layout, source)

    def set_layout(self, layout: str | None) -> None:
        """Set the samples' layout (DALI's ``TensorList.set_layout``): a string, or None for none."""
        if layout is not None and not isinstance(layout, str):
            raise TypeError(f"set_layout: a layout is a string such as 'HWC', got {layout!r}")
        self._layout = layout or ""

    def set_source_info(self, source_info: Callable[[int], str] | None) -> TensorList:
        """Where each sample came from, by its row (what ``tl[i].source_info()`` gives); itself."""
        self._source_info = source_info
        return self

    def __iter__(self) -> Iterator[Any]:
        """Every sample in order."""
        return (self.at(i) for i in range(len(self)))

    def layout(self) -> str:
        """Per-sample layout such as ``"HWC"``, or ``""`` when not an image."""
        return self._layout

    def is_dense_tensor(self) -> bool:
        """True when every sample has the same shape and dtype."""
        if isinstance(self._samples, Packed):
            return bool(len(self._samples)) and _same_shapes(self._samples.shapes)
        return self._dense is not None or (bool(self._samples) and _uniform(self._samples))

    def shape(self) -> list[tuple[int, ...]]:
        """Shape of every sample."""
        if self._dense is not None:
            return [tuple(self._dense.shape[1:])] * len(self._dense)
        if isinstance(self._samples, Packed):
            return [tuple(shape) for shape in self._samples.shapes.tolist()]
        return [tuple(s.shape) for s in self._samples]

    def ndim(self) -> int:
        """Dimensions of each sample."""
        if self._dense is not None:
            return self._dense.ndim - 1
        return self._samples[0].ndim if self._samples else 0

    @property
    def dtype(self) -> DALIDataType:
        """The samples' element type as a ``types.DALIDataType`` (a property, as in DALI)."""
        if self._dense is not None:
            return to_dali_type(self._dense.dtype)
        if not self._samples:
            raise ValueError("an empty batch has no dtype")
        return to_dali_type(self._samples[0].dtype)

    def at(self, index: int) -> Any:
        """Sample ``index`` as an array on this batch's device (negative counts from the end)."""
        if isinstance(index, (bool, np.bool_)):
            raise TypeError(f"TensorList indices must be integers, got {index!r}")
        try:
            position = operator.index(index)
        except TypeError:
            raise TypeError(f"TensorList indices must be integers, got {type(index).__name__}") from None
        size = len(self)
        if not -size <= position < size:
            raise IndexError(f"TensorList index {position} out of range for a batch of {size}")
        position %= size
        if self._dense is not None:
            return self._dense[position, ...]  # an array for scalar samples too (a numpy scalar is not one)
        return self._samples[position]

    def as_tensor(self) -> Any:
        """The dense ``(batch, ...)`` array on this batch's device (on the host a
        :class:`~raypipe.tensor.TensorCPU` whose layout, as DALI's, is ``"N"`` before the samples')."""
        dense = self.dense_array()
        return (
            TensorCPU.of(dense, "N" + self._layout if self._layout else "") if isinstance(dense, np.ndarray) else dense
        )

    def dense_array(self) -> Any:
        """The dense ``(batch, ...)`` array itself (numpy or cupy, no Tensor view), stacked once from
        the samples when needed."""
        if self._dense is None:
            if not self._samples:
                raise ValueError("empty batch has no dense form")
            if not self.is_dense_tensor():
                shapes = sorted(set(self.shape()))[:4]
                raise ValueError(
                    f"samples have different shapes ({shapes}...); "
                    "resize/crop them to one size or read them with .at(i)"
                )
            xp = _module_of(self._samples[0])
            self._dense = xp.stack(self._samples)
            self._samples = None
        return self._dense

    def as_reshaped_tensor(self, shape: Sequence[int]) -> Any:
        """The dense batch reshaped to ``shape``, whose volume must equal the batch's."""
        dense = self.dense_array()
        shape = tuple(int(n) for n in shape)
        if int(np.prod(shape)) != dense.size:
            raise ValueError(f"cannot reshape a batch of {dense.size} elements {tuple(dense.shape)} to {shape}")
        reshaped = dense.reshape(shape)
        return TensorCPU.of(reshaped) if isinstance(reshaped, np.ndarray) else reshaped  # no layout, as in DALI

    def data_ptr(self) -> int:
        """The address of the dense batch (host or device memory)."""
        dense = self.dense_array()
        return dense.data.ptr if is_device_array(dense) else dense.ctypes.data

    def copy_to_external(
        self, ptr: Any, cuda_stream: Any = None, non_blocking: bool = False, use_copy_kernel: bool = False
    ) -> None:
        """DALI's copy of the dense batch, C-ordered, to the memory at ``ptr`` (a ``ctypes.c_void_p``
        or an int): host memory for a host batch; device memory for a GPU batch, queued on
        ``cuda_stream`` (a raw ``cudaStream_t``, default the null stream) and waited for unless
        ``non_blocking``. ``use_copy_kernel`` is accepted and changes nothing."""
        dense = self.dense_array()
        if not is_device_array(dense):
            TensorCPU.of(dense).copy_to_external(ptr)
            return
        import cupy

        address = destination_address(ptr)
        stream = (cuda_stream.value if hasattr(cuda_stream, "value") else int(cuda_stream or 0)) or 0
        source = cupy.ascontiguousarray(dense)
        runtime = cupy.cuda.runtime
        runtime.memcpyAsync(address, source.data.ptr, source.nbytes, runtime.memcpyDefault, stream)
        if not non_blocking:
            runtime.streamSynchronize(stream)

    def as_cpu(self) -> TensorList:
        """This batch in host memory (itself when already there, as in DALI)."""
        if self.device == "cpu":
            return self
        if self._dense is not None:
            host = TensorList(to_host(self._dense), "cpu", self._layout)
        elif isinstance(self._samples, Packed):
            packed = self._samples
            host = TensorList(Packed(to_host(packed.data), packed.shapes, packed.offsets), "cpu", self._layout)
        else:
            host = TensorList([to_host(s) for s in self._samples], "cpu", self._layout)
        return host.set_source_info(self._source_info)

    def as_array(self) -> np.ndarray:
        """The dense batch as a host numpy array."""
        return to_host(self.dense_array())

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        dense = self.dense_array()
        if is_device_array(dense):
            raise TypeError("this batch lives on the GPU: call .as_cpu() before np.asarray")
        return np.asarray(dense, dtype=dtype)

    def __dlpack__(self, **kwargs):
        return self.dense_array().__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.dense_array().__dlpack_device__()

    def __repr__(self) -> str:
        return f"TensorList(len={len(self)}, device={self.device!r}, layout={self._layout!r})"


def _uniform(samples: Sequence[Any]) -> bool:
    """Whether every sample has the same shape and dtype (one set comprehension, no call per sample)."""
    return len({(s.shape, s.dtype) for s in samples}) == 1


def _same_shapes(shapes: Any) -> bool:
    """Whether every row of an ``(n, ndim)`` shape array is the same."""
    return bool((shapes == shapes[0]).all())


def _cupy():
    import cupy

    return cupy


def _module_of(array: Any):
    return _cupy() if is_device_array(array) else np
