"""URLs beside local paths: which is which, their parts, joining and relating them."""

from __future__ import annotations

import os

import pytest

from raypipe.errors import ArgumentError
from raypipe.storage import urls


def test_urls_and_paths_are_told_apart():
    assert urls.is_url("s3://b/k") and urls.is_url("gs://b/k/x.jpg")
    assert not urls.is_url("/data/s3://x") and not urls.is_url("relative/k") and not urls.is_url("http://host/x")


def test_a_url_parses_into_scheme_bucket_and_key():
    assert urls.parse("s3://bucket/a/b.jpg") == urls.ObjectUrl("s3", "bucket", "a/b.jpg")
    assert urls.parse("gs://bucket") == urls.ObjectUrl("gs", "bucket", "")
    assert str(urls.parse("s3://bucket/a/b")) == "s3://bucket/a/b"
    with pytest.raises(ArgumentError, match="names no bucket"):
        urls.parse("s3:///key")
    with pytest.raises(ArgumentError, match="not an object-store URL"):
        urls.parse("ftp://x/y")


def test_names_join_onto_urls_and_folders_alike():
    assert urls.join("s3://b/root/", "cls/x.jpg") == "s3://b/root/cls/x.jpg"
    assert urls.join("s3://b/root", "gs://o/x") == "gs://o/x"
    assert urls.join("/data", "cls/x.jpg") == os.path.join("/data", "cls/x.jpg")
    assert urls.join("/data", "/abs/x.jpg") == "/abs/x.jpg"
    assert urls.parent("s3://b/root/list.txt") == "s3://b/root"
    assert urls.parent("s3://b/list.txt") == "s3://b"


def test_posix_form_relates_urls_as_paths():
    assert urls.as_posix("s3://b/x/y") == "/s3/b/x/y"
    assert urls.as_posix("rel") == os.path.abspath("rel")
