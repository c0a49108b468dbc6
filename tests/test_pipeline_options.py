"""DALI's pipeline arguments parsed once: the options a pipeline keeps, the queue depths DALI's
execution flags imply, the seed a checkpoint carries, and the first bad argument named."""

from __future__ import annotations

import dataclasses
import json

import pytest

import raypipe as rp
from raypipe import types
from raypipe.pipeline_options import PipelineOptions, parse


def test_defaults_are_dalis():
    options = parse(seed=1)
    assert (options.batch_size, options.num_threads, options.device_id, options.seed) == (1, 1, None, 1)
    assert (options.cpu_queue_depth, options.gpu_queue_depth) == (2, 2)
    assert options.checkpoint is None and options.declared == {} and options.exec_dynamic is None


def test_queue_depths_follow_dalis_execution_flags():
    assert parse(prefetch_queue_depth={"cpu_size": 3, "gpu_size": 1}).cpu_queue_depth == 3
    assert parse(prefetch_queue_depth=4, exec_async=False).gpu_queue_depth == 1
    with pytest.raises(rp.ArgumentError, match="needs exec_pipelined=True and exec_async=True"):
        parse(prefetch_queue_depth={"cpu_size": 3, "gpu_size": 1}, exec_pipelined=False)


def test_a_checkpoint_gives_its_seed_and_state():
    state = {"seed": 42, "epoch": 3}
    options = parse(enable_checkpointing=True, checkpoint=json.dumps(state).encode())
    assert options.seed == 42 and options.checkpoint == state
    assert parse(seed=7, enable_checkpointing=True, checkpoint=json.dumps(state)).seed == 7
    with pytest.raises(rp.ArgumentError, match="enable_checkpointing=True was not specified"):
        parse(checkpoint=json.dumps(state))


def test_declarations_and_cpu_only_device_are_normalised():
    options = parse(device_id=types.CPU_ONLY_DEVICE_ID, output_ndim=[3, None], output_layout=None)
    assert options.device_id is None and options.declared == {"output_ndim": [3, None]}


def test_the_first_bad_argument_is_named_and_options_are_frozen():
    with pytest.raises(rp.ArgumentError, match="batch_size must be a positive int, got 0"):
        parse(batch_size=0, num_threads=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        parse().batch_size = 2  # type: ignore[misc]
    assert {f.name for f in dataclasses.fields(PipelineOptions)} >= {"cpu_queue_depth", "declared", "checkpoint"}


def test_the_pipelines_signature_is_the_parsers():
    """``rp.Pipeline`` shows DALI's signature and hands every argument to ``parse``: the same names,
    kinds and defaults, so neither can drift from the other."""
    import inspect

    import raypipe as rp

    ours = list(inspect.signature(rp.Pipeline.__init__).parameters.values())[1:]
    parsed = list(inspect.signature(parse).parameters.values())
    assert [(p.name, p.kind, p.default) for p in ours] == [(p.name, p.kind, p.default) for p in parsed]
