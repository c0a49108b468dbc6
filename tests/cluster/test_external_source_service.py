"""A per-sample external source (a function of SampleInfo) served like a reader: on the simulated
cluster of ``conftest.py``, 2 ranks read every sample exactly once per epoch under both shuffles,
and the same bytes across a killed pipeline actor and an elastic resume into 1 or 3 ranks; a
stateful source is refused by ``rp.serve`` before anything starts."""

from __future__ import annotations

import hashlib
import os
import signal
import time

import numpy as np
import pytest
import ray

import raypipe as rp
from cluster.naming import NAMESPACE, coordinator_name
from tests.cluster.pipelines import NUMBERED, from_generator, from_source


def _serve(name: str, world_size: int = 2, **kwargs) -> rp.Service:
    args = {"seed": 3, "num_cpus_per_actor": 0.25, "replace": True} | kwargs
    return rp.serve(from_source, name=name, world_size=world_size, **args)


def _record(images, labels, loader) -> tuple[list[int], list[bool], str]:
    pixels = hashlib.sha256(np.ascontiguousarray(images.numpy()).tobytes()).hexdigest()[:16]
    return labels.numpy().ravel().tolist(), loader.last_is_pad.tolist(), pixels


def _lockstep(loaders, epoch: int, on_step=None) -> dict[int, list]:
    for ld in loaders:
        ld.set_epoch(epoch)
    iters = [iter(ld) for ld in loaders]
    out: dict[int, list] = {r: [] for r in range(len(loaders))}
    for k in range(len(loaders[0])):
        for r, (ld, it) in enumerate(zip(loaders, iters)):
            out[r].append(_record(*next(it), ld))
        if on_step is not None:
            on_step(k)
    return out


def _real(records: dict[int, list]) -> list[int]:
    return [s for recs in records.values() for ids, pads, _ in recs for s, p in zip(ids, pads) if not p]


@pytest.mark.parametrize("shuffle", ["global", "buffer"])
def test_every_sample_once_per_epoch_reshuffled(cluster, shuffle):
    svc = _serve(f"es-{shuffle}", shuffle=shuffle, block_size=4, initial_fill=8)
    try:
        assert svc.config.dataset_len == NUMBERED, "the epoch's length was probed from the source"
        loaders = [rp.loader(f"es-{shuffle}", rank=r, world_size=2) for r in range(2)]
        epochs = [_lockstep(loaders, e) for e in range(2)]
        for records in epochs:
            assert sorted(_real(records)) == list(range(NUMBERED))
        assert _real(epochs[0]) != _real(epochs[1]), "each epoch has its own order"
    finally:
        svc.shutdown()


def test_pixels_are_the_sources_samples(cluster):
    svc = _serve("es-pixels", shuffle="global")
    try:
        loader = rp.loader("es-pixels", rank=0, world_size=2)
        loader.set_epoch(0)
        images, labels = next(iter(loader))
        for image, (index,) in zip(images.numpy(), labels.numpy()):
            expected = (np.arange(6 * 6 * 3, dtype=np.uint8).reshape(6, 6, 3) + index * 7).astype(np.uint8)
            assert np.array_equal(image, expected) or np.array_equal(image, expected[:, ::-1])
    finally:
        svc.shutdown()


def test_killing_the_pipeline_actors_changes_no_byte(cluster):
    svc = _serve("es-kill")
    try:
        loaders = [rp.loader("es-kill", rank=r, world_size=2) for r in range(2)]
        reference = _lockstep(loaders, 1)
        old = [a["pid"] for a in svc.stats()["actors"]]
        disturbed = _lockstep(loaders, 1, on_step=lambda k: k == 0 and [os.kill(p, signal.SIGKILL) for p in old])
        assert disturbed == reference, "same sample ids and bytes as the undisturbed epoch"
        assert not set(old) & {a["pid"] for a in svc.stats()["actors"]}, "every actor was restarted"
    finally:
        svc.shutdown()


def _parts(worlds_and_steps, name: str) -> list[tuple[int, str]]:
    """Epoch 0 read in parts, each by a new service of the given world size resuming from the
    previous part's state: (sample, pixel digest) of every real sample in global order."""
    state, order = None, []
    for i, (world, steps) in enumerate(worlds_and_steps):
        svc = _serve(f"{name}-{i}", world_size=world)
        try:
            loaders = [rp.loader(f"{name}-{i}", rank=r, world_size=world) for r in range(world)]
            for ld in loaders:
                if state is not None:
                    ld.load_state_dict(state)
                ld.set_epoch(0)
            iters = [iter(ld) for ld in loaders]
            for _ in range(len(loaders[0]) if steps is None else steps):
                for ld, it in zip(loaders, iters):
                    images, labels = next(it)
                    for image, s, pad in zip(images.numpy(), labels.numpy().ravel().tolist(), ld.last_is_pad):
                        if not pad:
                            order.append((s, hashlib.sha256(image.tobytes()).hexdigest()[:16]))
            state = loaders[0].state_dict()
        finally:
            svc.shutdown()
    return order


def test_elastic_resume_into_one_or_three_ranks_is_the_same_epoch(cluster):
    undisturbed = _parts([(2, None)], "es-full")
    assert sorted(s for s, _ in undisturbed) == list(range(NUMBERED))
    for plan in ([(2, 1), (1, None)], [(2, 1), (3, None)]):
        assert _parts(plan, "es-elastic") == undisturbed, f"{plan}: every sample once, same order, same bytes"


def test_a_stateful_source_is_refused_before_anything_starts(cluster):
    with pytest.raises(rp.ArgumentError, match="is a generator function: each batch depends on") as refused:
        rp.serve(from_generator, name="es-refused", world_size=2)
    assert "fn.external_source(source=sample, batch=False)" in str(refused.value)
    with pytest.raises(ValueError):
        ray.get_actor(coordinator_name("es-refused"), namespace=NAMESPACE)


def test_a_cpu_helper_computes_the_same_samples(cluster):
    """A CPU helper builds the pipeline again and calls the source itself: same bytes."""
    svc = _serve("es-nohelp")
    try:
        loaders = [rp.loader("es-nohelp", rank=r, world_size=2) for r in range(2)]
        reference = {e: _lockstep(loaders, e) for e in range(4)}
    finally:
        svc.shutdown()
    svc = _serve("es-help", cpu_helpers=1, cpus_per_helper=0.5, cpu_reserve_per_gpu=0.0)
    try:
        loaders = [rp.loader("es-help", rank=r, world_size=2) for r in range(2)]
        deadline = time.monotonic() + 60
        epoch, helped = 0, 0
        while not helped and time.monotonic() < deadline:
            assert _lockstep(loaders, epoch % 4) == reference[epoch % 4]
            details = svc.stats()["helpers"]["details"]
            helped = details[0].get("samples", 0) if details else 0
            epoch += 1
        assert helped, "the helper computed samples"
    finally:
        svc.shutdown()
