"""The host's BLAS on one thread while raypipe runs CPU stages.

A host operator's matrix product (a colour twist's 3x3 map over every pixel, a resize's weights, a
mel filter bank) calls numpy's OpenBLAS, which starts its own threads, one per core, for every call
large enough. raypipe already runs ``num_threads`` CPU-stage threads; each of them waking a BLAS
pool over-subscribes the cores, and under load a 3 ms operator took 20 ms. On one BLAS thread the
same products cost what they cost alone. The BLAS libraries loaded in the process are limited (numpy's
and scipy's; not those torch ships, which training uses), once per process when a CPU stage first
runs; ``RAYPIPE_BLAS_THREADS`` sets another count (``0`` leaves BLAS as it is).
"""

from __future__ import annotations

import os
import threading

import numpy  # noqa: F401  (loads its BLAS, which threadpoolctl then finds)
from threadpoolctl import ThreadpoolController

BLAS_THREADS_ENV = "RAYPIPE_BLAS_THREADS"

_lock = threading.Lock()
_done = False


def host_blas_libraries() -> list:
    """threadpoolctl's controllers of the BLAS libraries loaded here, torch's left out."""
    return [
        lib
        for lib in ThreadpoolController().lib_controllers
        if lib.user_api == "blas" and "torch" not in os.path.normpath(lib.filepath).split(os.sep)
    ]


def limit_host_blas() -> None:
    """Set the host's BLAS to ``RAYPIPE_BLAS_THREADS`` threads (1 by default; 0: unchanged), once per process."""
    global _done
    with _lock:
        if _done:
            return
        _done = True
        count = int(os.environ.get(BLAS_THREADS_ENV, "1"))
        if count > 0:
            for lib in host_blas_libraries():
                lib.set_num_threads(count)
