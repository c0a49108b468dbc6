"""Batched GPU kernels (``numba.cuda``) for the GPU stage: one launch covers a whole batch.

The kernels run compiled on a CUDA device, on cupy's current stream and sharing memory with
cupy through ``__cuda_array_interface__``; without a GPU, numba's CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1``) runs the same kernel code on numpy arrays, which is how CI tests
them. Importing this package does not import numba: :func:`available` tells an operator whether
the kernels can take its batch, and the kernel modules are imported only after it says yes.
"""

from . import numpy_aliases
from .launch import available

numpy_aliases.restore()

__all__ = ["available"]
