"""Subgraphs (:mod:`raypipe.subgraph`): a function of placeholder data traced into operators of
its own, run per sample as the CPU stage runs operators and per group as the GPU stage does."""

from __future__ import annotations

import numpy as np
import pytest

from raypipe import fn
from raypipe.errors import PipelineDefinitionError
from raypipe.graph import Graph, defining
from raypipe.keyed_random import SampleContext
from raypipe.sample_contexts import SampleContexts
from raypipe.subgraph import Subgraph

RNG = np.random.default_rng(1)
IMAGES = [RNG.integers(0, 256, (5 + i, 6, 3), dtype=np.uint8) for i in range(4)]


def _brighten_and_jitter(data, amount):
    noise = fn.random.uniform(range=[0, 3], shape=[3])
    return fn.cast_like(fn.cast(data, dtype=np.float32) + amount + noise, data)


def test_a_subgraph_runs_one_sample_or_a_group_alike_with_random_streams_of_its_own():
    with defining(Graph()):
        sub = Subgraph.trace("brighten", _brighten_and_jitter, ["cpu", "cpu"], {}, first_id=1 << 20)
    assert [n.op.op_id for n in sub.nodes][0] >= 1 << 20, "ids no pipeline operator has"
    assert sub.output_layouts(["HWC", ""]) == ["HWC"]
    amounts = [np.float32(a) for a in (1, 5, 9, 40)]
    ctxs = SampleContexts(7, 0, np.arange(4))
    each = [sub.run_sample([image, amount], ctx)[0] for image, amount, ctx in zip(IMAGES, amounts, ctxs)]
    (group,) = sub.run_batch(np, [IMAGES, amounts], ctxs)
    for one, together, image, amount in zip(each, group, IMAGES, amounts):
        assert np.array_equal(one, together) and one.dtype == np.uint8
        low, high = (np.clip(image.astype(int) + int(amount) + d, 0, 255) for d in (0, 3))
        assert (low <= one).all() and (one <= high).all(), "the amount plus noise in [0, 3), saturated"
    (again,) = sub.run_sample([IMAGES[0], amounts[0]], SampleContext(7, 1, 0))
    assert not np.array_equal(again, each[0]), "another epoch, other noise"


def test_a_subgraph_of_only_its_input_returns_the_input():
    with defining(Graph()):
        sub = Subgraph.trace("identity", lambda data: data, ["cpu"], {}, first_id=0)
    assert sub.nodes == [] and sub.run_sample([IMAGES[1]], SampleContext(0, 0, 0))[0] is IMAGES[1]


@pytest.mark.parametrize(
    ("function", "message"),
    [
        (lambda data: fn.readers.file(files=["a.jpg"])[0], "makes data of its own"),
        (lambda data: fn.external_source(name="fed"), "makes data of its own"),
        (lambda data: fn.experimental.inputs.video(name="fed", sequence_length=2), "makes data of its own"),
        (lambda data: fn.decoders.image(data, device="mixed"), "runs on device 'mixed'"),
        (lambda data: fn.normalize(data, batch=True), "needs the whole batch"),
        (lambda data: 3, "must return one output of the operators"),
    ],
)
def test_what_cannot_run_on_chosen_samples_is_refused_when_traced(function, message):
    with defining(Graph()), pytest.raises(PipelineDefinitionError, match=message):
        Subgraph.trace("bad", function, ["cpu"], {}, first_id=0)
