"""PyTorch Lightning over a raypipe service: real Lightning DDP (2 CPU processes, gloo), real Ray,
real JPEGs. Each run is ``tests/plugin/lightning_run.py`` in a process of its own (Lightning
starts the second rank by running the same command); the service lives in this process.

22 samples, 2 ranks x 2 per batch: 6 steps an epoch, the last padded; 2 epochs; a checkpoint
every 3 steps.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest
import ray
import torch

import raypipe as rp
from cluster import object_store
from cluster.naming import NAMESPACE, coordinator_name, pipeline_actor_name
from raypipe.plugin.lightning import RaypipeDataModule
from tests.cluster.pipelines import indexed

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES, WORLD, STEPS = 22, 2, 6


@pytest.fixture(scope="module")
def ray_address():
    """The Ray cluster the Lightning processes join: the test session's when one is up, else a
    local one of this module's own."""
    started = not ray.is_initialized()
    if started:
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray.get_runtime_context().gcs_address
    if started:
        ray.shutdown()


@contextlib.contextmanager
def _service(name, files):
    """The service for a test; afterwards none of its actors remains and the object store is
    back to where it was."""
    baseline = object_store.usage().used_bytes
    svc = rp.serve(
        indexed, name=name, world_size=WORLD, files=files, seed=0, batch_size=2, num_cpus_per_actor=0.25, replace=True
    )
    try:
        yield svc
    finally:
        svc.shutdown()
    names = [coordinator_name(name)] + [pipeline_actor_name(name, r) for r in range(WORLD)]
    assert _wait_until(lambda: not any(_alive(n) for n in names)), [n for n in names if _alive(n)]
    assert _wait_until(lambda: object_store.usage().used_bytes <= baseline), (baseline, object_store.usage())


def _alive(actor_name):
    try:
        ray.get_actor(actor_name, namespace=NAMESPACE)
    except ValueError:
        return False
    return True


def _wait_until(check, timeout_s=30.0):
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _fit(address, service, out, *args):
    """One Lightning run writing to ``out``; returns its exit status and output. Its process
    group (Lightning's rank 1 included) is gone afterwards."""
    os.makedirs(out, exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.plugin.lightning_run", service, str(out), *args],
        cwd=ROOT,
        env={**os.environ, "RAY_ADDRESS": address},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=240)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return proc.returncode, output


def _records(out):
    """Every rank's step records, in order."""
    records = {}
    for rank in range(WORLD):
        with open(os.path.join(out, f"rank{rank}.jsonl")) as f:
            records[rank] = [json.loads(line) for line in f]
    return records


def _real(records, epoch):
    """The real (not padding) samples of ``epoch`` in ``records``, every rank's together."""
    return sorted(
        s
        for recs in records.values()
        for r in recs
        if r["epoch"] == epoch
        for s, pad in zip(r["indices"], r["pad"])
        if not pad
    )


def _check_batches(records):
    """The labels are the loader's sample indices, and every rank sees the same epoch length."""
    for recs in records.values():
        for r in recs:
            assert r["labels"] == r["indices"] and len(r["indices"]) == 2, r
            assert r["len"] == STEPS, r


def _batch(record):
    """Where a step's batch sits in its epoch, and its samples."""
    return record["epoch"], record["batch_idx"], record["indices"]


def test_bad_arguments_are_named_before_any_cluster_work():
    with pytest.raises(rp.ArgumentError, match="service_name must be a non-empty str"):
        RaypipeDataModule("")
    with pytest.raises(rp.ArgumentError, match="rank and world_size come from the Lightning trainer"):
        RaypipeDataModule("svc", rank=0, world_size=2)
    with pytest.raises(rp.ArgumentError, match=r"unknown loader arguments \['batch_size'\]"):
        RaypipeDataModule("svc", batch_size=4)
    with pytest.raises(rp.ArgumentError, match="needs a Trainer"):
        RaypipeDataModule("svc").train_dataloader()
    module = RaypipeDataModule("svc", output="jax")
    module.trainer = SimpleNamespace(global_rank=0, world_size=1, current_epoch=0)
    with pytest.raises(rp.ArgumentError, match="output must be one of"):
        module.train_dataloader()
    assert module.loader is None


class _StandInLoader:
    """What TrainBatches uses of a rank loader, recording the calls: 3 batches an epoch."""

    def __init__(self):
        self.config = SimpleNamespace(plan=lambda epoch: SimpleNamespace(num_batches=3))
        self.calls = []

    def set_epoch(self, epoch):
        self.calls.append(("set_epoch", epoch))

    def load_state_dict(self, state):
        self.calls.append(("load_state_dict", state["epoch"]))

    def state_dict(self):
        return {"epoch": 1}

    def __iter__(self):
        self.calls.append(("iter",))
        return iter([])


def test_each_iteration_reads_the_trainers_epoch_unless_a_position_was_just_loaded(monkeypatch):
    """Lightning loads a checkpoint's position, then makes the epoch's iterator while its epoch
    counter may still name the epoch that checkpoint ended: that iteration follows the position."""
    opened = []

    def open_loader(*args, **kwargs):
        opened.append((args, kwargs))
        return _StandInLoader()

    monkeypatch.setattr(rp, "loader", open_loader)
    module = RaypipeDataModule("svc", prefetch=3)
    module.trainer = SimpleNamespace(global_rank=1, world_size=2, current_epoch=0)
    batches = module.train_dataloader()
    assert opened == [(("svc",), {"rank": 1, "world_size": 2, "prefetch": 3})]
    assert len(batches) == 3 and batches.state_dict() == {"epoch": 1}
    iter(batches)
    batches.load_state_dict({"epoch": 1})
    iter(batches)
    module.trainer = SimpleNamespace(global_rank=1, world_size=2, current_epoch=4)  # a later fit's trainer
    assert module.train_dataloader() is batches and len(opened) == 1
    iter(batches)
    assert module.loader.calls == [
        ("set_epoch", 0),
        ("iter",),
        ("load_state_dict", 1),
        ("iter",),
        ("set_epoch", 4),
        ("iter",),
    ]


@pytest.mark.slow
def test_a_killed_ddp_run_resumes_from_its_checkpoints_exactly_once(ray_address, jpeg_files, tmp_path):
    """Every rank SIGKILLs itself at global step 10 (epoch 1, batch 4), after the checkpoints of
    steps 3, 6 and 9; until then it is a run from a fresh start (two processes, every sample of
    epoch 0 once, a new order in epoch 1). Resumed from the end of epoch 0 and from mid-epoch 1
    (the harder cases: an epoch's boundary, and a position in an epoch after the first), the run
    continues at the checkpoint's next batch: the steps after it are redone with the same samples
    and, with the steps before it, cover every sample of the epoch exactly once."""
    killed = tmp_path / "killed"
    with _service("lightning-resume", jpeg_files[:SAMPLES]):
        code, output = _fit(ray_address, "lightning-resume", killed, "--kill-at", "10")
        assert code == -signal.SIGKILL, output[-4000:]
        first = _records(killed)
        for recs in first.values():  # rank 0 wrote step 10 before it died; rank 1 may have been killed first
            assert [r["step"] for r in recs][:10] == list(range(10)), recs
            assert [(r["epoch"], r["batch_idx"]) for r in recs[:10]] == [
                (e, k) for e in range(2) for k in range(STEPS)
            ][:10]
        _check_batches(first)
        assert first[0][0]["pid"] != first[1][0]["pid"], "two processes"
        assert _real(first, 0) == list(range(SAMPLES)), "epoch 0: every sample exactly once"
        assert sum(sum(r["pad"]) for recs in first.values() for r in recs if r["epoch"] == 0) == 2
        orders = [[r["indices"] for r in first[0][:10] if r["epoch"] == e][:4] for e in range(2)]
        assert orders[0] != orders[1], "a new order each epoch"
        checkpoint = torch.load(killed / "ckpt" / "step=9.ckpt", weights_only=True)
        (position,) = checkpoint["loops"]["fit_loop"]["state_dict"]["combined_loader"]
        assert (position["epoch"], position["offset"]) == (1, 3 * WORLD * 2), "the loader's global position"
        for step in (6, 9):
            out = tmp_path / f"from-{step}"
            code, output = _fit(
                ray_address, "lightning-resume", out, "--ckpt", str(killed / "ckpt" / f"step={step}.ckpt")
            )
            assert code == 0, output[-4000:]
            resumed = _records(out)
            _check_batches(resumed)
            for rank, recs in resumed.items():
                assert [r["step"] for r in recs] == list(range(step, 2 * STEPS)), f"from {step}: continues at its step"
                killed_after = [r for r in first[rank] if r["step"] >= step]
                redone = [_batch(r) for r in recs[: len(killed_after)]]
                assert redone == [_batch(r) for r in killed_after], (
                    f"from {step}: the steps after it redone identically"
                )
            before = {rank: [r for r in recs if r["step"] < step] for rank, recs in first.items()}
            for epoch in range(2):
                both = _real(before, epoch) + _real(resumed, epoch)
                assert sorted(both) == list(range(SAMPLES)), f"from {step}, epoch {epoch}: every sample exactly once"
