"""DALI's ``nvidia.dali.tensors``: the tensor and tensor-list classes scripts import from there to
test what a pipeline returned with ``isinstance`` (they live in :mod:`raypipe.tensor`)."""

from .tensor import TensorCPU, TensorGPU, TensorListCPU, TensorListGPU

__all__ = ["TensorCPU", "TensorGPU", "TensorListCPU", "TensorListGPU"]
