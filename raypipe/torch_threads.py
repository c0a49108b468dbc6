"""torch on the CPU stage's threads: whether to use it, and one intra-op thread per calling thread.

The CPU stage's threads call torch's host kernels (resize, FFT) concurrently; each would otherwise
start a thread team of its own and over-subscribe the cores. OpenMP's thread count is per calling
thread, so setting it on a worker thread leaves the process's setting (the main thread's, the
training code's) alone.
"""

from __future__ import annotations

import os
import threading
from typing import Any

_LOCAL = threading.local()


def single_threaded(torch: Any) -> None:
    """Give the calling thread one intra-op thread, once; the main thread keeps its own setting."""
    if not getattr(_LOCAL, "set", False):
        _LOCAL.set = True
        if threading.current_thread() is not threading.main_thread():
            torch.set_num_threads(1)


def optional_torch(env: str, other: str) -> Any | None:
    """torch for a host kernel where installed, unless the environment variable ``env`` names the
    ``other`` backend; None then, or without torch. ``env=torch`` without torch raises ImportError."""
    choice = os.environ.get(env, "auto")
    if choice == other:
        return None
    try:
        import torch
    except ImportError:
        if choice == "torch":
            raise
        return None
    return torch
