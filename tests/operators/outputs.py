"""Comparing pipeline outputs as the ``ours`` and ``dali`` fixtures return them: per output, the
host samples and the layout."""

from __future__ import annotations

import numpy as np


def assert_same(mine, theirs, layout: str | None = None) -> None:
    """Every output's layout (and ``layout`` where given) and every sample's type, shape and values
    equal."""
    assert len(mine) == len(theirs)
    for (my_samples, my_layout), (their_samples, their_layout) in zip(mine, theirs, strict=True):
        assert my_layout == their_layout
        assert layout is None or my_layout == layout
        for a, b in zip(my_samples, their_samples, strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a, b)


def on_both(ours, dali, samples, build, device: str, layout: str, per_sample=()) -> tuple[list, list]:
    """``build(x, fn, types, device, *extra)`` on ``samples`` in DALI (on the CPU) and in raypipe
    (its input moved to the GPU stage for ``device="gpu"``), with the ``ours`` and ``dali`` fixtures:
    DALI's samples and raypipe's, both outputs laid out as ``layout``. Each of ``per_sample``'s
    argument batches is cut to the samples' count."""
    from raypipe import fn, types

    per_sample = [batch[: len(samples)] for batch in per_sample]

    ((theirs, their_layout),) = dali(
        samples, lambda x, f, t, *a: build(x, f, t, "cpu", *a), layout, per_sample=per_sample
    )
    ((mine, my_layout),) = ours(
        samples,
        lambda x, *a: build(x.gpu() if device == "gpu" else x, fn, types, device, *a),
        layout,
        per_sample=per_sample,
    )
    assert my_layout == their_layout == layout
    return theirs, mine


def case_samples(samples, images: list[np.ndarray]) -> list[np.ndarray]:
    """A test case's samples: given ones, or (None) the real decoded ``images``, or ("chw") those
    images as CHW."""
    if samples is None:
        return images
    if isinstance(samples, str) and samples == "chw":
        return [np.ascontiguousarray(i.transpose(2, 0, 1)) for i in images]
    return samples
