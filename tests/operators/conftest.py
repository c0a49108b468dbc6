"""Running an operator on given samples, in raypipe and (where installed) in DALI 2.4's CPU build.

A batch of given arrays (ragged ones too) enters each pipeline through ``external_source``. Both
return, per output, the host samples and the layout.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn

Outputs = list[tuple[list[np.ndarray], str]]


def _collect(outputs) -> Outputs:
    outputs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    collected = []
    for out in outputs:
        host = out.as_cpu()
        collected.append(([np.asarray(host.at(i)) for i in range(len(host))], host.layout()))
    return collected


@pytest.fixture
def ours() -> Callable[..., Outputs]:
    """``ours(samples, build, layout="", per_sample=())``: ``build(data, *extra)`` on a batch holding
    ``samples``, with a batch per entry of ``per_sample`` (for per-sample argument inputs)."""

    def run(
        samples: Sequence[np.ndarray], build: Callable, layout: str = "", seed: int = 0, per_sample: Sequence = ()
    ) -> Outputs:
        @rp.pipeline_def(batch_size=len(samples), num_threads=1, seed=seed)
        def pipe():
            data = fn.external_source(source=_batch_of(samples), layout=layout or None)
            extra = [fn.external_source(source=_batch_of(values)) for values in per_sample]
            return build(data, *extra)

        with pipe() as p:
            return _collect(p.run())

    return run


def _batch_of(values: Sequence) -> Callable[[], list]:
    return lambda: list(values)


@pytest.fixture
def dali() -> Callable[..., Outputs]:
    """``dali(samples, build, layout="", per_sample=())``: the same in DALI 2.4 (skipped where DALI
    is absent); ``build`` gets DALI's ``fn`` and ``types`` after the data, then the extra batches."""
    pytest.importorskip("nvidia.dali")
    from nvidia.dali import fn as dali_fn
    from nvidia.dali import pipeline_def
    from nvidia.dali import types as dali_types

    def run(samples: Sequence[np.ndarray], build: Callable, layout: str = "", per_sample: Sequence = ()) -> Outputs:
        @pipeline_def(batch_size=len(samples), num_threads=1, device_id=None, seed=0)
        def pipe():
            data = dali_fn.external_source(source=lambda: list(samples), batch=True, layout=layout or None)
            extra = [dali_fn.external_source(source=_batch_of(values), batch=True) for values in per_sample]
            return build(data, dali_fn, dali_types, *extra)

        p = pipe()
        p.build()
        outputs = p.run()
        return [
            ([np.asarray(out[i]) for i in range(len(samples))], out.layout())
            for out in (outputs if isinstance(outputs, tuple) else (outputs,))
        ]

    return run


@pytest.fixture(scope="session")
def images(jpeg_files) -> list[np.ndarray]:
    """Four real decoded JPEGs (HWC uint8, of different sizes), decoded by raypipe."""

    @rp.pipeline_def(batch_size=4, num_threads=1, seed=0)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:4])
        return fn.decoders.image(jpegs)

    with pipe() as p:
        (decoded,) = _collect(p.run())
    return decoded[0]
