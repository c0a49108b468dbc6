"""NumPy names that numba-cuda registers when its CUDA target starts, restored where NumPy dropped them.

numba-cuda 0.30 (and earlier) registers an overload of ``np.row_stack`` at its first kernel
compile; NumPy 2.5 removed that alias of ``np.vstack``, so with those releases every compile fails
with "module 'numpy' has no attribute 'row_stack'" (seen with numba-cuda 0.30.4 and NumPy 2.5.2 on
an H200). The alias is put back only where it is missing, as the same function it always was.
"""

from __future__ import annotations

import numpy as np

ALIASES = {"row_stack": "vstack"}


def restore() -> list[str]:
    """Add each missing alias to the numpy module; the names added."""
    added = []
    for alias, target in ALIASES.items():
        if not hasattr(np, alias):
            setattr(np, alias, getattr(np, target))
            added.append(alias)
    return added
