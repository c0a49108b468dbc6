"""CPU helpers on the simulated cluster (``conftest.py``'s head and 2 GPU nodes, plus a CPU-only
node added here): batches identical to those made without helpers, a SIGKILLed helper losing
nothing, and ``cpu_helpers="auto"`` adding a helper while the rank stalls and removing it once the
rank is slower than its data. Pipeline actors run 1 thread each."""

from __future__ import annotations

import os
import signal
import time

import pytest
import ray

import raypipe as rp
from tests.cluster.pipelines import indexed, slowed
from tests.cluster.ranks import RankProcess


def _digests(name, files, world, **serve_args):
    """Every rank's batches of epochs 0 and 1 (labels, image hash), ranks in GPU-holding actors."""
    svc = rp.serve(indexed, name=name, files=files, world_size=world, seed=5, replace=True, **serve_args)
    ranks = [ray.remote(num_gpus=1)(RankProcess).remote() for _ in range(world)]
    try:
        out = {e: ray.get([r.epoch_digests.remote(name, i, world, e) for i, r in enumerate(ranks)]) for e in (0, 1)}
        return out, svc.stats()
    finally:
        for r in ranks:
            ray.kill(r)
        svc.shutdown()


def test_batches_are_identical_with_a_helper_on_a_cpu_only_node(cpu_node, jpeg_files):
    without, _ = _digests("svc-nohelp", jpeg_files, 2)
    with_helper, stats = _digests("svc-help", jpeg_files, 2, cpu_helpers=1, niceness=7)
    assert with_helper == without
    helpers = stats["helpers"]
    assert [a["niceness"] for a in stats["actors"]] == [7, 7], "pipeline actors at the service's niceness"
    assert helpers["details"][0]["niceness"] == 7, "so are its helpers"
    assert list(helpers["running"].values()) == [cpu_node], "the helper sits on the CPU-only node"
    assert helpers["details"][0]["samples"] > 0, "the helper ran samples"
    shipped = [a["offload"]["workers"] for a in stats["actors"] if a.get("available")]
    assert any(w and next(iter(w.values()))["samples"] > 0 for w in shipped), "ranks received samples from it"
    assert [d["action"] for d in helpers["decisions"]] == ["add"]
    deadline = time.monotonic() + 10  # shutdown (in _digests) took the helper with the service
    while time.monotonic() < deadline:
        try:
            ray.get_actor("svc-help.helper.0", namespace="raypipe")
        except ValueError:
            break
        time.sleep(0.2)
    else:
        raise AssertionError("the helper outlived svc.shutdown()")


def test_too_many_fixed_helpers_fail_before_anything_starts(cpu_node, jpeg_files):
    with pytest.raises(rp.ArgumentError, match="cpu_helpers=40 x 1 CPUs do not fit"):
        rp.serve(indexed, name="svc-toomany", files=jpeg_files, world_size=1, cpu_helpers=40)
    with pytest.raises(rp.ArgumentError, match="cpu_helpers"):
        rp.serve(indexed, name="svc-bad", files=jpeg_files, world_size=1, cpu_helpers="many")


def _read(loader, epoch, until=None):
    loader.set_epoch(epoch)
    out = []
    for images, labels in loader:
        out.append((labels.ravel().tolist(), images.tobytes()))
        if until is not None and len(out) == until[0]:
            until[1]()
    return out


def test_a_sigkilled_helper_loses_nothing(cpu_node, jpeg_files):
    svc = rp.serve(indexed, name="svc-ref", files=jpeg_files, world_size=1, seed=9, replace=True)
    ld = rp.loader("svc-ref", rank=0, world_size=1, output="numpy")
    reference = [_read(ld, e) for e in (0, 1)]
    del ld
    svc.shutdown()

    svc = rp.serve(indexed, name="svc-kill", files=jpeg_files, world_size=1, seed=9, cpu_helpers=1, replace=True)
    try:
        ld = rp.loader("svc-kill", rank=0, world_size=1, output="numpy")
        first = _read(ld, 0)  # the actor finds its helper during this epoch
        pid = svc.stats()["helpers"]["details"][0]["pid"]

        def kill():
            os.kill(pid, signal.SIGKILL)

        second = _read(ld, 1, until=(1, kill))
        assert [first, second] == reference, "every batch as without helpers, across the kill"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # Ray restarts the helper
            details = svc.stats()["helpers"]["details"][0]
            if details.get("available") and details["pid"] != pid:
                break
            time.sleep(0.5)
        assert details["pid"] != pid, "the helper came back"
        epoch, deadline = 2, time.monotonic() + 30
        while svc.stats()["helpers"]["details"][0].get("units", 0) == 0 and time.monotonic() < deadline:
            assert _read(ld, epoch) == _read(ld, epoch), "the same batches, whoever makes them"
            epoch += 1
        assert svc.stats()["helpers"]["details"][0]["units"] > 0, "and the actor uses it again"
    finally:
        svc.shutdown()


def test_auto_adds_a_helper_while_the_rank_stalls_and_removes_it_when_not_needed(cpu_node, jpeg_files):
    svc = rp.serve(
        slowed,
        name="svc-auto",
        files=jpeg_files,
        world_size=1,
        cpu_helpers="auto",
        max_cpu_helpers=1,
        autoscale_interval_s=1.0,
        replace=True,
    )
    try:
        ld = rp.loader("svc-auto", rank=0, world_size=1, output="numpy")
        epoch, deadline = 0, time.monotonic() + 60
        while not svc.stats()["helpers"]["running"] and time.monotonic() < deadline:
            _read(ld, epoch)  # as fast as the data comes: the rank stalls
            epoch += 1
        helpers = svc.stats()["helpers"]
        assert list(helpers["running"].values()) == [cpu_node]
        added = [d for d in helpers["decisions"] if d["action"] == "add"]
        assert added and "waits for data" in added[0]["reason"]
        deadline = time.monotonic() + 60
        while svc.stats()["helpers"]["running"] and time.monotonic() < deadline:
            ld.set_epoch(epoch)
            for _ in ld:
                time.sleep(1.0)  # a slow trainer: the data is always ready
            epoch += 1
        helpers = svc.stats()["helpers"]
        assert helpers["running"] == {}, (helpers["stall"], helpers["decisions"][-4:])
        removed = [d for d in helpers["decisions"] if d["action"] == "remove"]
        assert removed and "waited less than" in removed[-1]["reason"] and removed[-1]["time"] > added[0]["time"]
        ld.set_epoch(epoch)
        assert sum(len(labels) for _, labels in ld) == 5 * len(ld), "the rank reads on without the helper"
    finally:
        svc.shutdown()


def test_a_restarted_coordinator_starts_its_helpers_again(cpu_node, jpeg_files):
    svc = rp.serve(indexed, name="svc-coord", files=jpeg_files, world_size=1, seed=9, cpu_helpers=1, replace=True)
    try:
        ld = rp.loader("svc-coord", rank=0, world_size=1, output="numpy")
        before = _read(ld, 0)
        os.kill(svc.stats()["coordinator"]["pid"], signal.SIGKILL)  # its helper goes with it
        assert _read(ld, 0) == before, "the rank reads on, with the same batches"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                stats = svc.stats(timeout_s=5)
            except ray.exceptions.RayError:
                time.sleep(0.5)
                continue
            details = stats["helpers"].get("details", [])
            if stats["coordinator"]["restarts"] == 1 and details and details[0].get("available"):
                break
            time.sleep(0.5)
        assert stats["coordinator"]["restarts"] == 1
        assert list(stats["helpers"]["running"]) == ["svc-coord.helper.0"]
        assert "restarted with the coordinator" in stats["helpers"]["decisions"][-1]["reason"]
        assert _read(ld, 0) == before
        epoch, deadline = 1, time.monotonic() + 30
        while svc.stats()["helpers"]["details"][0].get("units", 0) == 0 and time.monotonic() < deadline:
            _read(ld, epoch)
            epoch += 1
        assert svc.stats()["helpers"]["details"][0]["units"] > 0, "the actor uses the new helper, not the one gone"
    finally:
        svc.shutdown()


def _read_until_attached(svc, loader, epoch, old_pid=None):
    """Read epochs from ``epoch`` on until rank 0's actor (another one than ``old_pid``'s) uses a
    helper, at most 30 s: that actor's stats."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        actor = svc.stats()["actors"][0]
        if actor.get("available") and actor["pid"] != old_pid and actor["offload"].get("attached"):
            break
        _read(loader, epoch)
        epoch += 1
    return actor


def test_a_restarted_pipeline_actor_is_told_its_helpers_again(cpu_node, jpeg_files):
    svc = rp.serve(indexed, name="svc-actor", files=jpeg_files, world_size=1, seed=9, cpu_helpers=1, replace=True)
    try:
        ld = rp.loader("svc-actor", rank=0, world_size=1, output="numpy")
        before = _read(ld, 0)
        actor = _read_until_attached(svc, ld, 1)
        assert actor["offload"]["attached"] == ["svc-actor.helper.0"], "told by the coordinator, without asking"
        os.kill(actor["pid"], signal.SIGKILL)  # Ray restarts it, with no helpers
        assert _read(ld, 0) == before, "the rank reads on, with the same batches"
        restarted = _read_until_attached(svc, ld, 1, old_pid=actor["pid"])
        assert restarted["pid"] != actor["pid"]
        assert restarted["offload"]["attached"] == ["svc-actor.helper.0"], "the restarted actor was told again"
    finally:
        svc.shutdown()
