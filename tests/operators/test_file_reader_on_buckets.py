"""``readers.file`` over object-store URLs in one process: ``file_root``, ``file_list`` (on the
bucket, or local with URLs inside) and ``files`` read the same bytes and labels as the local
folder; missing buckets, objects and credentials are named before any batch where the reader
can tell, and ``on_error="skip"`` skips a missing object."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn
from raypipe.errors import ReaderError, SampleError
from raypipe.operators.readers import FileReader, list_file_root
from raypipe.storage import store
from tests.s3_server import checking_server


@pytest.fixture(scope="module")
def jpeg_bucket(s3_server, jpeg_root):
    """``jpeg_root`` uploaded to ``s3://reader-test/jpegs``, with a list file beside it."""
    url = s3_server.upload(jpeg_root, "reader-test", "jpegs")
    paths, labels = list_file_root(jpeg_root)
    lines = "".join(f"{p[len(jpeg_root) + 1 :]} {label}\n" for p, label in zip(paths, labels))
    s3_server.client().put_object(Bucket="reader-test", Key="jpegs/list.txt", Body=lines.encode())
    return url


def _reader(**kwargs) -> FileReader:
    op = FileReader("cpu", 0, **kwargs)
    op.prepare()
    return op


def _samples(op: FileReader) -> list[tuple[bytes, int]]:
    op.will_read(range(len(op)))
    return [(data.tobytes(), int(label[0])) for data, label in (op.read(i) for i in range(len(op)))]


def test_a_bucket_reads_as_the_local_folder(jpeg_root, jpeg_bucket):
    local = _reader(file_root=jpeg_root)
    for kwargs in ({"file_root": jpeg_bucket}, {"file_list": f"{jpeg_bucket}/list.txt"}):
        remote = _reader(**kwargs)
        assert _samples(remote) == _samples(local), kwargs
        assert remote.digest() == local.digest(), "the digest does not depend on where the data lives"
        stats = remote.io_stats()
        assert stats["prefetch_hits"] == len(local) and stats["direct_fetches"] == 0 and stats["in_flight_peak"] >= 2
        remote.close()


def test_urls_in_files_and_in_a_local_list(jpeg_root, jpeg_bucket, tmp_path):
    local = _reader(file_root=jpeg_root)
    urls = [f"{jpeg_bucket}/{p[len(jpeg_root) + 1 :]}" for p in local.paths]
    assert _samples(_reader(files=urls, labels=list(local.labels))) == _samples(local)
    listing = tmp_path / "list.txt"
    listing.write_text("".join(f"{u} {label}\n" for u, label in zip(urls, local.labels)))
    assert _samples(_reader(file_list=str(listing))) == _samples(local)
    mixed = [urls[0], local.paths[1]]
    assert [d for d, _ in _samples(_reader(files=mixed))] == [d for d, _ in _samples(local)[:2]]


def test_missing_buckets_roots_and_lists_are_named_before_any_batch(jpeg_bucket):
    with pytest.raises(ReaderError, match=r"s3://no-bucket-here/x: the bucket does not exist"):
        _reader(file_root="s3://no-bucket-here/x")
    with pytest.raises(ReaderError, match=r"file_root 's3://reader-test/nothing' holds no objects"):
        _reader(file_root="s3://reader-test/nothing")
    with pytest.raises(ReaderError, match=r"file_list s3://reader-test/jpegs/none.txt: no such object"):
        _reader(file_list=f"{jpeg_bucket}/none.txt")
    with pytest.raises(ReaderError, match=r"readers.file: s3://no-bucket-here/a.jpg: the bucket does not exist"):
        _reader(files=["s3://no-bucket-here/a.jpg"])


def test_wrong_credentials_are_named_without_the_secret_before_any_batch(monkeypatch):
    with checking_server() as endpoint:
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "a-wrong-secret")
        monkeypatch.setattr(store, "_STORES", {})
        for kwargs in ({"file_root": "s3://private/jpegs"}, {"files": ["s3://private/a.jpg"]}):
            with pytest.raises(ReaderError, match=r"s3://private/.*: access denied: check the credentials") as info:
                _reader(**kwargs)
            assert "a-wrong-secret" not in str(info.value) and "testing" not in str(info.value)


@rp.pipeline_def(batch_size=4, num_threads=2)
def _files(files, on_error):
    data, labels = fn.readers.file(files=files, labels=list(range(len(files))), on_error=on_error)
    return data, labels


def test_a_missing_object_raises_naming_it_or_is_skipped(jpeg_bucket):
    files = [f"{jpeg_bucket}/{i}" for i in ("list.txt", "gone.jpg", "list.txt", "list.txt")]
    pipe = _files(files=files, on_error="raise")
    with pytest.raises(SampleError, match=r"sample 1 \(s3://reader-test/jpegs/gone.jpg\).*: no such object"):
        pipe.run()
    pipe.close()
    pipe = _files(files=files, on_error="skip")
    data, labels = pipe.run()
    assert 1 not in [int(np.asarray(labels.at(i))[0]) for i in range(len(labels))]
    pipe.close()
