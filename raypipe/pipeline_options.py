"""DALI's pipeline arguments, parsed once: :func:`parse` checks every argument of
:class:`~raypipe.pipeline.Pipeline` and returns the :class:`PipelineOptions` the pipeline keeps.

The arguments about how DALI's own executor runs take DALI's values and change no batch (see the
:class:`~raypipe.pipeline.Pipeline` docstring); this module only checks them and works out the
queue depths, the seed (a checkpoint's when none is given) and the output declarations."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .errors import ArgumentError
from .types import CPU_ONLY_DEVICE_ID, DALIDataType


@dataclass(frozen=True)
class PipelineOptions:
    """The checked arguments of a pipeline. ``cpu_queue_depth`` and ``gpu_queue_depth`` are the
    executor's queue depths (1 without DALI's pipelined, asynchronous execution); ``checkpoint`` is
    the state in the ``checkpoint`` argument; ``declared`` holds the output declarations given."""

    batch_size: int
    num_threads: int
    device_id: int | None
    seed: int
    exec_pipelined: bool
    exec_async: bool
    prefetch_queue_depth: int | dict[str, int]
    cpu_queue_depth: int
    gpu_queue_depth: int
    exec_dynamic: bool | None
    bytes_per_sample: int
    set_affinity: bool
    max_streams: int | None
    default_cuda_stream_priority: int | None
    enable_memory_stats: bool
    enable_checkpointing: bool
    checkpoint: dict[str, Any] | None
    py_num_workers: int
    py_start_method: str
    declared: dict[str, Any]


def parse(
    batch_size: int = 1,
    num_threads: int = 1,
    device_id: int | None = None,
    seed: int | None = None,
    exec_pipelined: bool = True,
    prefetch_queue_depth: int | dict[str, int] = 2,
    exec_async: bool = True,
    bytes_per_sample: int = 0,
    set_affinity: bool = False,
    max_streams: int | None = None,
    default_cuda_stream_priority: int | None = None,
    *,
    enable_memory_stats: bool = False,
    enable_checkpointing: bool = False,
    checkpoint: str | bytes | None = None,
    py_num_workers: int = 1,
    py_start_method: str = "fork",
    py_callback_pickler: Any = None,
    output_dtype: DALIDataType | Sequence[DALIDataType | None] | None = None,
    output_ndim: int | Sequence[int | None] | None = None,
    output_layout: str | Sequence[str | None] | None = None,
    exec_dynamic: bool | None = None,
    experimental_exec_dynamic: bool | None = None,
    stream_policy: Any = None,
    concurrency: Any = None,
) -> PipelineOptions:
    """The options of a pipeline made with these (DALI's) arguments; raises
    :class:`~raypipe.errors.ArgumentError` naming the first invalid one."""
    batch_size = _positive_int("batch_size", batch_size)
    num_threads = _positive_int("num_threads", num_threads)
    if device_id == CPU_ONLY_DEVICE_ID:
        device_id = None
    if device_id is not None and (not isinstance(device_id, int) or device_id < 0):
        raise ArgumentError(f"device_id must be None or a non-negative int, got {device_id!r}")
    for name, value in (
        ("py_callback_pickler", py_callback_pickler),
        ("stream_policy", stream_policy),
        ("concurrency", concurrency),
    ):
        if value is not None:
            raise ArgumentError(f"{name} is not supported by raypipe (only its default, None), got {value!r}")
    enable_checkpointing = _flag("enable_checkpointing", enable_checkpointing)
    state = _read_checkpoint(checkpoint, enable_checkpointing)
    if (seed is None or seed == -1) and state is not None:
        seed = state.get("seed", seed)  # the checkpointed pipeline's random seed
    if seed is None or seed == -1:
        seed = int.from_bytes(os.urandom(8), "little") >> 1
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ArgumentError(f"seed must be a non-negative int, got {seed!r}")
    exec_pipelined = _flag("exec_pipelined", exec_pipelined)
    exec_async = _flag("exec_async", exec_async)
    cpu_queue_depth, gpu_queue_depth = _queue_depths(prefetch_queue_depth)
    if not (exec_pipelined and exec_async):
        if isinstance(prefetch_queue_depth, dict):
            raise ArgumentError(
                "prefetch_queue_depth as a dict (separate queues) needs exec_pipelined=True and exec_async=True"
            )
        cpu_queue_depth = gpu_queue_depth = 1
    if experimental_exec_dynamic is not None and exec_dynamic is None:
        exec_dynamic = experimental_exec_dynamic
    exec_dynamic = _flag("exec_dynamic", exec_dynamic, optional=True)
    bytes_per_sample = _count("bytes_per_sample", bytes_per_sample)
    set_affinity = _flag("set_affinity", set_affinity)
    max_streams = None if max_streams is None else _count("max_streams", max_streams)
    if default_cuda_stream_priority is not None and not _is_int(default_cuda_stream_priority):
        raise ArgumentError(
            f"default_cuda_stream_priority must be None or an int, got {default_cuda_stream_priority!r}"
        )
    enable_memory_stats = _flag("enable_memory_stats", enable_memory_stats)
    py_num_workers = _count("py_num_workers", py_num_workers)
    if py_start_method not in ("fork", "spawn", "forkserver"):
        raise ArgumentError(f"py_start_method must be 'fork', 'spawn' or 'forkserver', got {py_start_method!r}")
    declared = _declarations(output_dtype=output_dtype, output_ndim=output_ndim, output_layout=output_layout)
    return PipelineOptions(
        batch_size=batch_size,
        num_threads=num_threads,
        device_id=device_id,
        seed=seed,
        exec_pipelined=exec_pipelined,
        exec_async=exec_async,
        prefetch_queue_depth=prefetch_queue_depth,
        cpu_queue_depth=cpu_queue_depth,
        gpu_queue_depth=gpu_queue_depth,
        exec_dynamic=exec_dynamic,
        bytes_per_sample=bytes_per_sample,
        set_affinity=set_affinity,
        max_streams=max_streams,
        default_cuda_stream_priority=default_cuda_stream_priority,
        enable_memory_stats=enable_memory_stats,
        enable_checkpointing=enable_checkpointing,
        checkpoint=state,
        py_num_workers=py_num_workers,
        py_start_method=py_start_method,
        declared=declared,
    )


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ArgumentError(f"{name} must be a positive int, got {value!r}")
    return value


def _queue_depths(depth: int | dict[str, int]) -> tuple[int, int]:
    if isinstance(depth, dict):
        extra = set(depth) - {"cpu_size", "gpu_size"}
        if extra or len(depth) != 2:
            raise ArgumentError(
                f"prefetch_queue_depth as a dict needs exactly 'cpu_size' and 'gpu_size', got {depth!r}"
            )
        return _positive_int("prefetch_queue_depth['cpu_size']", depth["cpu_size"]), _positive_int(
            "prefetch_queue_depth['gpu_size']", depth["gpu_size"]
        )
    d = _positive_int("prefetch_queue_depth", depth)
    return d, d


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _count(name: str, value: Any) -> int:
    if not _is_int(value) or value < 0:
        raise ArgumentError(f"{name} must be a non-negative int, got {value!r}")
    return value


def _flag(name: str, value: Any, optional: bool = False) -> bool | None:
    if value is None and optional:
        return None
    if not isinstance(value, bool):
        raise ArgumentError(f"{name} must be a bool{' or None' if optional else ''}, got {value!r}")
    return value


def _read_checkpoint(checkpoint: str | bytes | None, enabled: bool) -> dict[str, Any] | None:
    """The state in a checkpoint from :meth:`Pipeline.checkpoint` (None without one)."""
    if checkpoint is None:
        return None
    if not enabled:
        raise ArgumentError(
            "cannot restore the checkpoint: enable_checkpointing=True was not specified when creating the pipeline"
        )
    try:
        state = json.loads(checkpoint)
    except (TypeError, ValueError):
        state = None
    if not isinstance(state, dict):
        raise ArgumentError("checkpoint must be the value Pipeline.checkpoint() returned (or its file's content)")
    return state


#: What output_dtype / output_ndim / output_layout may hold per output (None, or "" for a layout: anything).
DECLARATIONS = {
    "output_dtype": (lambda v: isinstance(v, DALIDataType), "a types.DALIDataType"),
    "output_ndim": (lambda v: _is_int(v) and v >= 0, "a non-negative int"),
    "output_layout": (lambda v: isinstance(v, str), "a str"),
}


def _declarations(**given: Any) -> dict[str, Any]:
    """The given output declarations, validated: one value for every output or a list of them."""
    for name, value in given.items():
        ok, what = DECLARATIONS[name]
        values = value if isinstance(value, (list, tuple)) else [value]
        if not all(v is None or ok(v) for v in values):
            raise ArgumentError(f"{name} must be {what}, a list of those (None: any) or None, got {value!r}")
    return {name: value for name, value in given.items() if value is not None}
