"""The object-store client against a real S3 server (moto on 127.0.0.1): whole objects, ranges,
sizes, listings, and every failure named by URL and reason, never with a credential."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from raypipe.errors import ReaderError
from raypipe.storage import store
from raypipe.storage.failures import MissingObjectError, StorageError


@pytest.fixture(scope="module")
def bucket(s3_server):
    s3 = s3_server.client()
    s3_server.bucket("store-test")
    for i in range(5):
        s3.put_object(Bucket="store-test", Key=f"data/c{i % 2}/{i}.bin", Body=bytes(range(i, i + 200)))
    s3.put_object(Bucket="store-test", Key="data-beside/x.bin", Body=b"x")
    return "s3://store-test"


def test_whole_objects_and_ranges_read_back_exactly(bucket):
    data = store.read(f"{bucket}/data/c1/3.bin")
    assert data.dtype == np.uint8 and data.tobytes() == bytes(range(3, 203)) and data.flags.writeable
    assert store.read_range(f"{bucket}/data/c1/3.bin", 10, 20).tobytes() == bytes(range(13, 23))
    assert store.size(f"{bucket}/data/c0/0.bin") == 200


def test_a_folder_lists_its_sub_folders_and_the_objects_directly_inside(bucket):
    assert store.list_folder(f"{bucket}/data") == (["c0", "c1"], [])
    assert store.list_folder(f"{bucket}/data/c1/") == ([], [(f"{bucket}/data/c1/{i}.bin", 200) for i in (1, 3)])
    assert store.list_folder(f"{bucket}/data-beside") == ([], [(f"{bucket}/data-beside/x.bin", 1)])


def test_a_missing_object_or_bucket_is_named(bucket):
    with pytest.raises(MissingObjectError, match=r"s3://store-test/data/none: no such object"):
        store.read(f"{bucket}/data/none")
    with pytest.raises(MissingObjectError, match=r"s3://no-such-bucket-x/k: the bucket does not exist"):
        store.read("s3://no-such-bucket-x/k")
    with pytest.raises(StorageError, match="bucket does not exist"):
        store.check("s3://no-such-bucket-x/k")
    store.check(f"{bucket}/data/none")  # a missing object is not a bucket's failure
    assert issubclass(StorageError, ReaderError)


def test_a_range_past_the_end_is_named(bucket):
    with pytest.raises(StorageError, match="s3://store-test/data/c0/0.bin"):
        store.read_range(f"{bucket}/data/c0/0.bin", 150, 400)


def test_a_server_that_does_not_answer_fails_within_the_retry_budget(bucket, monkeypatch):
    from tests.s3_server import _free_port

    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{_free_port()}")
    monkeypatch.setattr(store, "_STORES", {})
    retries, seconds = store.retry_budget()
    began = time.monotonic()
    with pytest.raises(StorageError, match="s3://store-test/data/c0/0.bin: the server does not answer") as info:
        store.read(f"{bucket}/data/c0/0.bin")
    assert time.monotonic() - began < seconds + 5
    assert os.environ["AWS_SECRET_ACCESS_KEY"] not in str(info.value)


def test_gs_urls_go_to_gcs_and_missing_credentials_are_named(bucket, monkeypatch, tmp_path):
    """No GCS server runs here: a gs:// URL reaches GCS's client, whose missing credentials are
    named with the URL; s3:// URLs in the same process are not affected."""
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "none.json"))
    monkeypatch.setattr(store, "_STORES", {})
    with pytest.raises(StorageError, match=r"gs://some-bucket/x.jpg: no usable credentials \(Generic GCS error"):
        store.read("gs://some-bucket/x.jpg")
    assert store.size(f"{bucket}/data/c0/0.bin") == 200
