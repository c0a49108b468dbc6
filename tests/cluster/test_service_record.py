"""The service's record in the GCS: what loaders start their pipeline actors from, without
waiting for the coordinator (on the simulated cluster of ``conftest.py``)."""

from __future__ import annotations

import pathlib
import pickle
import subprocess
import sys
import time

import pytest
import ray
from ray.experimental import internal_kv

import raypipe as rp
from actors import served_pipeline, service_kv
from cluster import service_record
from cluster.loader import _wait_attached
from cluster.naming import NAMESPACE, coordinator_name
from cluster.service import connect
from raypipe.errors import RaypipeError
from tests.cluster.pipelines import indexed

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_serve_records_what_it_serves_and_shutdown_forgets_it(cluster, jpeg_files):
    svc = rp.serve(indexed, name="rec", world_size=2, seed=3, files=jpeg_files[:8], niceness=4, replace=True)
    try:
        config, launch = service_record.load("rec")
        assert config == svc.config
        assert (config.world_size, config.seed, config.dataset_len) == (2, 3, 8)
        assert served_pipeline.load("rec") == (indexed, {"files": jpeg_files[:8]})
        assert launch.niceness == 4
        assert connect("rec").config == config
        loaders = [rp.loader("rec", rank=r, world_size=2, output="numpy") for r in range(2)]
        real = []
        for loader in loaders:
            loader.set_epoch(0)
            for _, labels in loader:
                real += [int(v) for v, pad in zip(labels.ravel(), loader.last_is_pad) if not pad]
        assert sorted(real) == list(range(8)), "the ranks' actors, started from the record, read every sample once"
        del loaders
    finally:
        svc.shutdown()
    assert service_record.load("rec") is None
    with pytest.raises(RaypipeError, match="service 'rec' has no pipeline on record: it was shut down"):
        served_pipeline.load("rec")
    with pytest.raises(RaypipeError, match="no raypipe service named 'rec'"):
        rp.loader("rec", rank=0, world_size=2)


def test_forgetting_a_service_forgets_all_its_entries_and_none_of_another(cluster):
    """Shutdown forgets a service's entries by their prefix: those of a service whose name begins
    with the same letters stay."""
    for service in ("kv", "kv2", "kv.x"):
        for part in ("record", "coordinator", "pipeline", "listings"):
            service_kv.put(service, part, f"{service}:{part}".encode())
    try:
        assert service_kv.get("kv", "pipeline") == b"kv:pipeline"
        service_kv.delete("kv", "pipeline")
        assert service_kv.get("kv", "pipeline") is None and service_kv.get("kv", "record") == b"kv:record"
        service_kv.forget("kv")
        assert [service_kv.get("kv", p) for p in ("record", "coordinator", "listings")] == [None] * 3
        assert (
            service_kv.get("kv2", "record") == b"kv2:record" and service_kv.get("kv.x", "listings") == b"kv.x:listings"
        )
        assert service_kv.connected()
    finally:
        service_kv.forget("kv2")
        service_kv.forget("kv.x")
    assert service_kv.get("kv2", "coordinator") is None


def test_a_replaced_services_handle_shuts_down_nothing_of_the_new_one(cluster, jpeg_files, caplog):
    """A driver's handle on a service that another ``serve(..., replace=True)`` took over finds the
    actors and records by name: its shutdown must leave the new service serving."""
    old = rp.serve(indexed, name="swap", world_size=1, files=jpeg_files[:4], replace=True)
    new = rp.serve(indexed, name="swap", world_size=1, files=jpeg_files[:6], replace=True)
    try:
        for call in (old.stats, old.pause, old.snapshot):  # by name they would reach the new service's actors
            with pytest.raises(RaypipeError, match=r"'swap' was replaced by .*cluster.service.connect\('swap'\)"):
                call()
        with caplog.at_level("WARNING", logger="raypipe"):
            old.shutdown()
        with pytest.raises(RaypipeError, match="service 'swap' was shut down"):
            old.stats()
        assert "service 'swap' was replaced by another of that name" in caplog.text
        assert service_record.load("swap")[0].dataset_len == 6
        loader = rp.loader("swap", rank=0, world_size=1, output="numpy")
        loader.set_epoch(0)
        real = [int(v) for _, labels in loader for v, pad in zip(labels.ravel(), loader.last_is_pad) if not pad]
        assert sorted(real) == list(range(6)), "the new service serves its whole epoch"
        del loader
    finally:
        new.shutdown()
    assert service_record.load("swap") is None and service_kv.get("swap", served_pipeline.PART) is None


def test_a_record_left_by_a_dead_driver_is_not_a_service(cluster, jpeg_files):
    """A driver that dies takes its coordinator along and leaves its record: loaders refuse it."""
    svc = rp.serve(indexed, name="ghost", world_size=1, files=jpeg_files[:4], replace=True)
    config, launch = service_record.load("ghost")
    svc.shutdown()
    service_record.save("ghost", config, launch)
    try:
        with pytest.raises(RaypipeError, match="no raypipe service named 'ghost'"):
            rp.loader("ghost", rank=0, world_size=1)
        with pytest.raises(RaypipeError, match="no raypipe service named 'ghost'"):
            connect("ghost")
    finally:
        service_kv.forget("ghost")


def _wait_dead(call, what: str, timeout_s: float = 30.0) -> None:
    """Wait until ``call()`` (a remote call) fails because its actor is gone (a kill takes effect
    asynchronously); fail the test saying that ``what`` still runs after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            ray.get(call(), timeout=timeout_s)
        except ray.exceptions.RayActorError:
            return
        time.sleep(0.05)
    pytest.fail(f"{what} still runs")


def test_a_coordinator_that_dies_before_recording_the_rank_stops_its_new_actor(cluster, jpeg_files):
    """The real coordinator and pipeline actor: the coordinator is gone when the loader waits for it."""
    svc = rp.serve(indexed, name="orphan", world_size=1, files=jpeg_files[:4], replace=True)
    try:
        loader = rp.loader("orphan", rank=0, world_size=1, output="numpy")
        actor = loader._actor
        ray.get(actor.where.remote())
        coordinator = ray.get_actor(coordinator_name("orphan"), namespace=NAMESPACE)
        ray.kill(coordinator, no_restart=True)
        _wait_dead(coordinator.config.remote, "the killed coordinator")  # or attach might still run
        with pytest.raises(RaypipeError, match="the coordinator of service 'orphan' failed"):
            _wait_attached(coordinator.attach.remote(0, loader.location.as_dict()), "orphan", 30.0, actor)
        _wait_dead(actor.where.remote, "the rank's new pipeline actor")
    finally:
        svc.shutdown()


def test_reading_records_does_not_import_the_actor_classes():
    """Every loader and ``raypipe stats`` read records: they need the launch description, not the
    pipeline actor's or the CPU helper's code."""
    probe = "import sys; from cluster import service_record; print(sorted(m for m in sys.modules if 'actors' in m))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert "actors.pipeline_actor" not in out and "actors.cpu_helper" not in out, out


def test_large_pipeline_arguments_are_no_actor_constructor_arguments(cluster, jpeg_files, capfd):
    """A pipeline actor or coordinator given pipeline arguments over 100 KB (a ``files`` list of a
    few thousand paths) got them through the object store, owned by the process that started it,
    and Ray logged an error per actor that its restart would fail once they were lost. They come
    from the GCS now (:mod:`actors.served_pipeline`): no such error, and the record stays small."""
    files = list(jpeg_files) * 150  # 3,600 paths: about 300 KB pickled, over Ray's 100 KB for inline arguments
    capfd.readouterr()
    svc = rp.serve(indexed, name="rec-large", world_size=1, files=files, replace=True)
    try:
        loader = rp.loader("rec-large", rank=0, world_size=1, output="numpy")
        _, labels = next(iter(loader))
        assert labels.size == 5 and all(0 <= v < len(files) for v in labels.ravel())
        del loader
    finally:
        svc.shutdown()
    logged = capfd.readouterr().err
    assert "constructor arguments in the object store" not in logged, logged[-3000:]


def test_the_record_leaves_the_pipeline_arguments_out(cluster, jpeg_files):
    files = list(jpeg_files) * 150
    svc = rp.serve(indexed, name="rec-small", world_size=1, files=files, replace=True)
    try:
        blob = internal_kv._internal_kv_get(b"raypipe/rec-small/record", namespace=NAMESPACE)
        assert blob is not None and len(blob) < 4096, len(blob)
        assert served_pipeline.load("rec-small")[1] == {"files": files}
        published = internal_kv._internal_kv_get(b"raypipe/rec-small/pipeline", namespace=NAMESPACE)
        assert len(published) < len(pickle.dumps(files)) / 4, "the paths are published compressed"
    finally:
        svc.shutdown()
