"""Objects opened as files: seeks and reads become ranged requests, so code written for local
files (index parsers, ``tarfile``) reads an object unchanged; sizes and ``read_at`` alike."""

from __future__ import annotations

import io
import tarfile

import pytest

from raypipe.storage import files


@pytest.fixture(scope="module")
def tar_url(s3_server, tmp_path_factory):
    folder = tmp_path_factory.mktemp("tar")
    with tarfile.open(folder / "a.tar", "w") as tar:
        for i in range(3):
            data = bytes([i]) * (1000 + i)
            info = tarfile.TarInfo(f"s{i}.bin")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    url = s3_server.upload(folder, "files-test", "tars")
    return url + "/a.tar", str(folder / "a.tar")


def test_an_object_reads_as_its_local_file(tar_url):
    url, local = tar_url
    assert files.size(url) == files.size(local)
    with files.open_binary(url) as remote, files.open_binary(local) as f:
        assert remote.read() == f.read()
        remote.seek(-10, io.SEEK_END)
        f.seek(-10, io.SEEK_END)
        assert remote.read(4) == f.read(4) and remote.tell() == f.tell()
        assert files.read_at(remote, 100, 600) == files.read_at(f, 100, 600)
        assert files.read_at(remote, 100, files.size(local) - 5) == files.read_at(f, 100, files.size(local) - 5)


def test_tarfile_walks_an_object(tar_url):
    url, _ = tar_url
    with tarfile.open(fileobj=files.open_binary(url), mode="r:") as tar:
        assert [(m.name, m.size) for m in tar] == [("s0.bin", 1000), ("s1.bin", 1001), ("s2.bin", 1002)]


def test_a_missing_object_fails_to_open_as_a_missing_file(tar_url):
    url, _ = tar_url
    with pytest.raises(FileNotFoundError, match="no such object"):
        files.open_binary(url.replace("a.tar", "b.tar"))
