"""Which GPU components import and work on this machine, each on its own line: the versions of
torch, cupy, numba, numba-cuda, Ray and nvImageCodec, whether torch sees CUDA, whether raypipe
finds a usable GPU, and whether numba-cuda compiles and runs a kernel (it needs NVVM, which
``numba-cuda[cu13]`` brings). The first thing benchmarks/gpu_session.sh records on a GPU machine.

    python benchmarks/gpu_probe.py      # exit status 1 when any component failed

A failure is printed and the probe goes on to the next component.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

MODULES = ("torch", "cupy", "numba", "numba.cuda", "ray", "nvidia.nvimgcodec")


def check(what: str, probe: Callable[[], Any], failed: list[str]) -> None:
    """Print ``what`` and what ``probe()`` returns, or why it failed (appending ``what`` to ``failed``)."""
    try:
        print(f"{what}: {probe()}")
    except Exception as exc:  # every failure is reported, and the next component probed
        print(f"{what}: FAILED: {type(exc).__name__}: {exc}")
        failed.append(what)


def version(name: str) -> str:
    return str(getattr(importlib.import_module(name), "__version__", "imported"))


def torch_cuda() -> str:
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError(f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no CUDA device")
    return f"CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}"


def raypipe_gpu() -> str:
    from raypipe.backend import gpu_available, gpu_unavailable_reason
    from raypipe.gpu_decode import nvimgcodec_available

    if not gpu_available():
        raise RuntimeError(gpu_unavailable_reason())
    return f"usable; nvImageCodec available: {nvimgcodec_available()}"


def numba_kernel() -> str:
    import numpy as np
    from numba import config, cuda

    from raypipe.kernels import numpy_aliases

    restored = numpy_aliases.restore()

    @cuda.jit
    def add_one(a):
        a[0] += 1

    a = cuda.to_device(np.zeros(1, np.float32))
    add_one[1, 1](a)
    if a.copy_to_host()[0] != 1:
        raise RuntimeError("the kernel ran but wrote the wrong value")
    where = " (CUDA simulator)" if config.ENABLE_CUDASIM else ""
    return f"compiled and ran a kernel{where}" + (f"; restored numpy.{', numpy.'.join(restored)}" if restored else "")


def main() -> int:
    failed: list[str] = []
    for name in MODULES:
        check(name, lambda name=name: version(name), failed)
    check("torch CUDA", torch_cuda, failed)
    check("raypipe GPU", raypipe_gpu, failed)
    check("numba.cuda kernel", numba_kernel, failed)
    print("failed: " + (", ".join(failed) if failed else "none"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
