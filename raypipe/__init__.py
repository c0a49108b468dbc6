"""raypipe: a DALI-style data pipeline that scales across GPUs and nodes with Ray.

``import raypipe as rp`` never starts Ray: ``rp.serve``, ``rp.loader`` and ``rp.synthetic_loader``
load the cluster package on first use.
"""

from __future__ import annotations

from typing import Any

from . import fn, ops, train, types
from . import math as math  # dali.math.clamp; not in __all__, where it would hide Python's math
from .batch_spec import BatchSpec
from .errors import (
    ArgumentError,
    DecodeError,
    PipelineDefinitionError,
    RaypipeError,
    ReaderError,
    SampleError,
)
from .pipeline import BatchInfo, Pipeline, pipeline_def
from .rank_normalize import Normalize
from .subscript import newaxis
from .tensor_list import TensorList

__all__ = [
    "ArgumentError",
    "BatchInfo",
    "BatchSpec",
    "DecodeError",
    "Normalize",
    "Pipeline",
    "PipelineDefinitionError",
    "RaypipeError",
    "ReaderError",
    "SampleError",
    "TensorList",
    "fn",
    "loader",
    "newaxis",
    "ops",
    "pipeline_def",
    "serve",
    "synthetic_loader",
    "train",
    "types",
]
__version__ = "0.1.0"

fn.register_namespace_modules()
ops.register_namespace_modules()


def serve(*args: Any, **kwargs: Any):
    """Start a distributed pipeline service on the Ray cluster (see ``cluster.service.serve``)."""
    from cluster.service import serve as _serve

    return _serve(*args, **kwargs)


def loader(*args: Any, **kwargs: Any):
    """Open the per-rank loader of a running service (see ``cluster.loader.loader``)."""
    from cluster.loader import loader as _loader

    return _loader(*args, **kwargs)


def synthetic_loader(*args: Any, **kwargs: Any):
    """Batches shaped like a loader's, made once in memory: training speed without input costs
    (see ``cluster.synthetic.synthetic_loader``)."""
    from cluster.synthetic import synthetic_loader as _synthetic_loader

    return _synthetic_loader(*args, **kwargs)
