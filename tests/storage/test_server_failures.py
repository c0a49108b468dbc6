"""An object store that stops answering: reads fail within the retry budget with an error naming
the URL (no hang), and once it answers again a new epoch reads."""

from __future__ import annotations

import time

import pytest

import raypipe as rp
from raypipe import fn
from raypipe.errors import RaypipeError
from raypipe.storage import store


@rp.pipeline_def(batch_size=4, num_threads=2)
def _files(files):
    data, labels = fn.readers.file(files=files, labels=list(range(len(files))))
    return data, labels


def test_a_stopped_server_fails_within_the_budget_and_a_restarted_one_reads(s3_server, jpeg_root, jpeg_files):
    url = s3_server.upload(jpeg_root, "failures", "jpegs")
    files = [f"{url}/{p[len(jpeg_root) + 1 :]}" for p in jpeg_files]
    pipe = _files(files=files)
    pipe.build()  # the bucket is checked here, while the server answers
    s3_server.stop()
    try:
        began = time.monotonic()
        with pytest.raises(RaypipeError, match=r"s3://failures/jpegs/.*: the server does not answer"):
            pipe.run()
        _, seconds = store.retry_budget()
        assert time.monotonic() - began < 3 * seconds + 10, "within the retry budget, no hang"
    finally:
        pipe.close()
        s3_server.start()
    pipe = _files(files=files)
    data, labels = pipe.run()
    assert [int(labels.at(i)[0]) for i in range(len(labels))] == [0, 1, 2, 3]
    assert bytes(data.at(0)) == open(jpeg_files[0], "rb").read()
    pipe.close()
