"""The numpy twin of :mod:`raypipe.plugin.pytorch`: each step yields a list with one
``{name: numpy.ndarray}`` dict per pipeline (host batches are not copied, GPU batches are
copied to the host). DALI itself has no numpy plugin; this one mirrors the PyTorch plugin's
``DALIGenericIterator`` (and, like DALI's other generic-only plugins, has no classification
iterator). Arguments and epochs: see :mod:`raypipe.plugin.base_iterator`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..backend import to_host
from ..pipeline import Pipeline
from ..tensor_list import TensorList
from .base_iterator import LastBatchPolicy, _DaliBaseIterator, dense

__all__ = ["DALIGenericIterator", "LastBatchPolicy", "to_numpy"]


def to_numpy(tensor_list: TensorList, name: str = "output") -> np.ndarray:
    """A dense batch as a host ``(batch, ...)`` array (GPU batches are copied to the host)."""
    return to_host(dense(tensor_list, name))


class DALIGenericIterator(_DaliBaseIterator):
    """Yields ``[{name: numpy.ndarray}, ...]``, one dict per pipeline; the arguments are those
    of :class:`raypipe.plugin.pytorch.DALIGenericIterator`."""

    _convert = staticmethod(to_numpy)

    def __init__(
        self,
        pipelines: Pipeline | Sequence[Pipeline],
        output_map: Sequence[str],
        size: int = -1,
        reader_name: str | None = None,
        auto_reset: bool | str | None = False,
        fill_last_batch: bool | None = None,
        dynamic_shape: Any = False,
        last_batch_padded: bool = False,
        last_batch_policy: LastBatchPolicy | str = LastBatchPolicy.FILL,
        prepare_first_batch: bool = True,
    ) -> None:
        super().__init__(
            pipelines,
            output_map,
            size,
            reader_name,
            auto_reset,
            fill_last_batch,
            last_batch_padded,
            last_batch_policy,
            prepare_first_batch,
        )
