"""Readers on an S3 bucket (a real moto server on 127.0.0.1) under ``rp.serve`` with 2 ranks:
every sample exactly once per epoch with ``shuffle="global"`` and ``"buffer"``, the same batches
as the local files (files, and ``raypipe convert`` outputs uploaded to the bucket), and a bucket
folder listed once by the service, not by its actors."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
import ray

import raypipe as rp
from actors import service_kv, shared_listings
from raypipe.convert.plan import list_source
from raypipe.convert.run import convert
from raypipe.formats.registry import get
from raypipe.service_config import ServiceConfig
from raypipe.storage import listings, store
from tests.cluster.bucket_pipelines import folder
from tests.cluster.pipelines import converted, resized

WORLD = 2


@pytest.fixture(scope="module")
def jpeg_bucket(s3_server, jpeg_root):
    return s3_server.upload(jpeg_root, "service-test", "jpegs")


def _epochs(svc, epochs: int = 2) -> tuple[list[list[tuple[np.ndarray, ...]]], list[dict], dict]:
    """Per epoch, every rank's batches (images, labels, padding) in order; the actors' read counts;
    the service's stats."""
    loaders = [rp.loader(svc.name, rank=r, world_size=WORLD, output="numpy") for r in range(WORLD)]
    out = []
    for epoch in range(epochs):
        batches = []
        for ld in loaders:
            ld.set_epoch(epoch)
            batches += [(images.copy(), labels.copy(), ld.last_is_pad.copy()) for images, labels in ld]
        out.append(batches)
    stats = svc.stats()
    return out, [a.get("reads") for a in stats["actors"]], stats


def _serve(pipeline, name: str, shuffle: str, **kwargs):
    return rp.serve(
        pipeline, name=name, world_size=WORLD, seed=5, shuffle=shuffle, block_size=4, initial_fill=8,
        num_cpus_per_actor=0.25, replace=True, **kwargs,
    )  # fmt: skip


@pytest.mark.parametrize("shuffle", ["global", "buffer"])
def test_bucket_files_serve_every_sample_once_as_the_local_files(cluster, jpeg_root, jpeg_bucket, jpeg_files, shuffle):
    urls = [f"{jpeg_bucket}/{p[len(jpeg_root) + 1 :]}" for p in jpeg_files]
    got = {}
    for where, files in (("local", jpeg_files), ("bucket", urls)):
        svc = _serve(resized, f"bucket-files-{where}-{shuffle}", shuffle, files=files, normalize=False)
        try:
            got[where], reads, _ = _epochs(svc)
            if where == "bucket":
                assert all(r["prefetch_hits"] > 0 and r["in_flight_peak"] >= 1 for r in reads), reads
        finally:
            svc.shutdown()
    for epoch in got["bucket"]:
        seen = [int(s) for _, labels, pad in epoch for s, p in zip(labels.ravel(), pad) if not p]
        assert sorted(seen) == list(range(len(jpeg_files))), "exactly once per epoch"
    for mine, theirs in zip(got["bucket"], got["local"]):
        assert all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for a, b in zip(mine, theirs))


def test_a_bucket_folder_is_listed_once_by_the_service(cluster, s3_server, jpeg_root, jpeg_bucket):
    """An object added after ``serve`` listed the folder is not seen by the actors: they use the
    service's listing (listing again would change the dataset, and its digest would stop them)."""
    svc = _serve(folder, "bucket-root", "global", file_root=jpeg_bucket)
    try:
        first = sorted(os.listdir(jpeg_root))[0]
        s3_server.client().put_object(Bucket="service-test", Key=f"jpegs/{first}/zz-late.jpg", Body=b"late")
        bucket_batches = _epochs(svc, epochs=1)[0][0]
    finally:
        svc.shutdown()
        s3_server.client().delete_object(Bucket="service-test", Key=f"jpegs/{first}/zz-late.jpg")
    svc = _serve(folder, "local-root", "global", file_root=jpeg_root)
    try:
        local_batches = _epochs(svc, epochs=1)[0][0]
    finally:
        svc.shutdown()
    assert len(bucket_batches) == len(local_batches)
    assert all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for a, b in zip(bucket_batches, local_batches))


@pytest.fixture(scope="module")
def bucket_containers(tmp_path_factory, jpeg_files, s3_server):
    """Per sharded format: (local folder, its URL) of the 24 JPEGs that ``raypipe convert`` wrote."""
    root = tmp_path_factory.mktemp("served-containers")
    listing = root / "list.txt"
    listing.write_text("".join(f"{p} {i}\n" for i, p in enumerate(jpeg_files)))
    out = {}
    for fmt in ("tfrecord", "webdataset", "recordio"):
        dst = str(root / fmt)
        convert(list_source(str(listing)), dst, get(fmt), part_size=7, workers=1)
        out[fmt] = (dst, s3_server.upload(dst, "served-containers", fmt))
    return out


@pytest.mark.parametrize(
    "fmt, shuffle", [("tfrecord", "global"), ("webdataset", "global"), ("recordio", "global"), ("tfrecord", "buffer")]
)
def test_bucket_containers_serve_every_sample_once_as_the_local_files(
    cluster, bucket_containers, jpeg_files, fmt, shuffle
):
    """Against the local files' batches under a global shuffle (one service each way), every format;
    the buffer shuffle's sequential extents, which every format reads through one module
    (``raypipe/formats/record_files.py``), for one format, checked for exactly-once only (the
    batches are read back in one process by tests/operators/test_container_readers_on_buckets.py)."""
    got = {}
    places = ("local", "bucket") if shuffle == "global" else ("bucket",)
    for where in places:
        dst = bucket_containers[fmt][0 if where == "local" else 1]
        svc = _serve(converted, f"bucket-{fmt}-{where}-{shuffle}", shuffle, dst=dst)
        try:
            got[where], reads, _ = _epochs(svc, epochs=1)
        finally:
            svc.shutdown()
    seen = [int(s) for _, labels, pad in got["bucket"][0] for s, p in zip(labels.ravel(), pad) if not p]
    assert sorted(seen) == list(range(len(jpeg_files))), "exactly once per epoch"
    if "local" in got:
        pairs = zip(got["bucket"][0], got["local"][0])
        assert all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for a, b in pairs)
    if shuffle == "buffer":
        assert all(r["extent_reads"] > 0 and r["direct_reads"] == 0 for r in reads), reads
    else:
        assert all(r["direct_reads"] > 0 and r["extent_reads"] == 0 and r["in_flight_peak"] >= 1 for r in reads), reads


def test_a_cpu_helper_builds_its_pipeline_from_the_service_listing(cluster, s3_server, jpeg_bucket, jpeg_files):
    """A CPU helper (or pipeline actor) process builds the service's pipeline from the listing the
    service published, even after the bucket changed; without it, it lists and sees the change."""
    config = ServiceConfig("helper-listing", 1, 4, len(jpeg_files), "unused")
    probe = folder(file_root=jpeg_bucket)
    probe.build()
    shared_listings.publish(config.name, listings.of_pipeline(probe))
    probe.close()
    late = f"jpegs/{sorted(os.listdir(os.path.dirname(os.path.dirname(jpeg_files[0]))))[0]}/zz-late.jpg"
    s3_server.client().put_object(Bucket="service-test", Key=late, Body=b"late")

    @ray.remote(num_cpus=0, max_calls=1)  # each call in a new process, as each helper is
    def sizes(service: str) -> int:
        from actors import shared_listings as shared

        shared.install(service)
        pipe = folder(file_root=jpeg_bucket)
        pipe.build()
        return pipe.reader_meta()["epoch_size"]

    try:
        assert ray.get(sizes.remote(config.name)) == len(jpeg_files), "the service's listing"
        service_kv.delete(config.name, shared_listings.PART)
        assert ray.get(sizes.remote(config.name)) == len(jpeg_files) + 1, "listed again without it"
    finally:
        s3_server.client().delete_object(Bucket="service-test", Key=late)


def test_a_stopped_server_fails_the_rank_by_url_and_once_restarted_a_new_epoch_reads(
    cluster, s3_server, jpeg_root, jpeg_files
):
    """The server stops while the service runs, between a rank's passes (the fetch-ahead of a live
    pipeline actor already holds what this small dataset's next epochs read, so the stop is met by
    the rank's next pipeline actor, which builds from the bucket): the rank fails with an error
    naming the object and the reason within the retry budget, not a hang, and without the secret;
    once the server answers again, the ranks read a new epoch, every sample once."""
    url = s3_server.upload(jpeg_root, "stopping", "jpegs")
    files = [f"{url}/{p[len(jpeg_root) + 1 :]}" for p in jpeg_files]
    svc = _serve(resized, "bucket-stopped", "global", files=files, normalize=False)
    try:
        assert _labels_once(svc, epoch=0) == list(range(len(files)))
        s3_server.stop()
        try:
            began = time.monotonic()
            with pytest.raises(Exception, match=r"s3://stopping/jpegs/\S+: the server does not answer") as failed:
                _labels_once(svc, epoch=1)
            _, budget = store.retry_budget()
            assert time.monotonic() - began < 3 * budget + 30, "within the retry budget, no hang"
            assert "testing-secret" not in str(failed.value)
        finally:
            s3_server.start()
        assert _labels_once(svc, epoch=2) == list(range(len(files)))
    finally:
        svc.shutdown()


def _labels_once(svc, epoch: int) -> list[int]:
    """The labels both ranks read in ``epoch`` (each through a loader of its own, dropped after),
    sorted, padding left out."""
    seen = []
    for rank in range(WORLD):
        loader = rp.loader(svc.name, rank=rank, world_size=WORLD, output="numpy")
        loader.set_epoch(epoch)
        seen += [int(s) for _, labels in loader for s, p in zip(labels.ravel(), loader.last_is_pad) if not p]
    return sorted(seen)
