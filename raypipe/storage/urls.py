"""Object-store URLs (``s3://bucket/key``, ``gs://bucket/key``) beside local paths: which a path
is, its parts, and joining names onto it the way a folder joins them."""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass

from ..errors import ArgumentError

#: The object stores a URL may name, by scheme.
SCHEMES = ("s3", "gs")


@dataclass(frozen=True)
class ObjectUrl:
    """A parsed URL: ``scheme://bucket/key`` (``key`` without a leading slash, maybe empty)."""

    scheme: str
    bucket: str
    key: str

    def __str__(self) -> str:
        return f"{self.scheme}://{self.bucket}/{self.key}"


def is_url(path: str | os.PathLike) -> bool:
    """True when ``path`` names an object store (``s3://`` or ``gs://``), False for a local path."""
    return isinstance(path, str) and path.partition("://")[0] in SCHEMES and "://" in path


def parse(url: str) -> ObjectUrl:
    """The parts of an object-store URL; raise ArgumentError for another scheme or no bucket."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in SCHEMES:
        raise ArgumentError(f"{url!r} is not an object-store URL (expected {' or '.join(s + '://' for s in SCHEMES)})")
    bucket, _, key = rest.partition("/")
    if not bucket:
        raise ArgumentError(f"{url!r} names no bucket (expected {scheme}://bucket/key)")
    return ObjectUrl(scheme, bucket, key.lstrip("/"))


def join(base: str, name: str) -> str:
    """``name`` inside the folder ``base`` (a URL or a local path); a URL or absolute ``name`` as is."""
    if is_url(name) or (not is_url(base) and os.path.isabs(name)):
        return name
    if is_url(base):
        return base.rstrip("/") + "/" + name.lstrip("/")
    return os.path.join(base, name)


def parent(path: str) -> str:
    """The folder holding ``path``: its URL prefix, or the absolute local folder."""
    if is_url(path):
        u = parse(path)
        return f"{u.scheme}://{u.bucket}/{posixpath.dirname(u.key)}".rstrip("/")
    return os.path.dirname(os.path.abspath(path))


def as_posix(path: str) -> str:
    """An absolute POSIX-style form of a URL or local path, for comparing and relating paths:
    ``/s3/bucket/key`` for a URL, the absolute path otherwise."""
    if is_url(path):
        u = parse(path)
        return posixpath.join("/", u.scheme, u.bucket, u.key)
    return os.path.abspath(path)
