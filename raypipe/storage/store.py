"""Objects read through obstore (Rust's ``object_store``: S3 and S3-compatible stores, GCS), one
client per bucket and process, configured from the standard places and never from code: AWS
environment variables, ``AWS_PROFILE`` (through boto3's credential chain), ``AWS_ENDPOINT_URL``
for S3-compatible stores (plain http allowed when the endpoint says so), GCS application default
credentials.

Each request is retried by the client, with exponential backoff and jitter, on what retrying can
help (5xx answers such as S3's ``503 SlowDown``, dropped connections, timeouts) for at most
``RAYPIPE_STORAGE_RETRIES`` retries and ``RAYPIPE_STORAGE_RETRY_TIMEOUT_S`` seconds; then
:class:`~raypipe.storage.failures.StorageError` names the URL and the reason."""

from __future__ import annotations

import os
import threading
from datetime import timedelta
from typing import Any

import numpy as np

from ..errors import ArgumentError
from .failures import StorageError, describe
from .urls import ObjectUrl, parse

_STORES: dict[tuple[int, str, str], Any] = {}
_LOCK = threading.Lock()


def _setting(name: str, default: float) -> float:
    value = os.environ.get(name)
    try:
        return float(value) if value else default
    except ValueError:
        raise ArgumentError(f"{name} must be a number, got {value!r}") from None


def retry_budget() -> tuple[int, float]:
    """(retries, seconds) a request may take before it fails: ``RAYPIPE_STORAGE_RETRIES`` (10) and
    ``RAYPIPE_STORAGE_RETRY_TIMEOUT_S`` (60)."""
    return int(_setting("RAYPIPE_STORAGE_RETRIES", 10)), _setting("RAYPIPE_STORAGE_RETRY_TIMEOUT_S", 60.0)


def _client_options(endpoint: str | None) -> dict[str, Any]:
    timeout = _setting("RAYPIPE_STORAGE_TIMEOUT_S", 30.0)
    return {
        "allow_http": bool(endpoint and endpoint.startswith("http://")),
        "connect_timeout": timedelta(seconds=min(5.0, timeout)),
        "timeout": timedelta(seconds=timeout),
        "pool_max_idle_per_host": "256",
    }


def _make(u: ObjectUrl) -> Any:
    from obstore.store import GCSStore, S3Store

    retries, seconds = retry_budget()
    retry = {
        "max_retries": retries,
        "retry_timeout": timedelta(seconds=seconds),
        "backoff": {"init_backoff": timedelta(milliseconds=100), "max_backoff": timedelta(seconds=5), "base": 2},
    }
    if u.scheme == "gs":
        return GCSStore(u.bucket, client_options=_client_options(None), retry_config=retry)
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    options: dict[str, Any] = {}
    if not os.environ.get("AWS_DEFAULT_REGION") and not os.environ.get("AWS_REGION"):
        options["region"] = "us-east-1"
    if os.environ.get("AWS_PROFILE") and not os.environ.get("AWS_ACCESS_KEY_ID"):
        from obstore.auth.boto3 import Boto3CredentialProvider

        options["credential_provider"] = Boto3CredentialProvider()
    return S3Store(u.bucket, client_options=_client_options(endpoint), retry_config=retry, **options)


def client(url: str | ObjectUrl) -> tuple[Any, str]:
    """(the store of ``url``'s bucket in this process, the object's key)."""
    u = parse(url) if isinstance(url, str) else url
    key = (os.getpid(), u.scheme, u.bucket)
    store = _STORES.get(key)
    if store is None:
        try:
            import obstore  # noqa: F401
        except ImportError:
            need = "pip install 'raypipe[object-store]'"
            raise StorageError(f"{u}: reading object stores needs obstore: {need}") from None
        with _LOCK:
            store = _STORES.get(key)
            if store is None:
                try:
                    store = _STORES[key] = _make(u)
                except Exception as exc:  # obstore raises its own errors for a bad configuration
                    raise describe(str(u), exc) from None
    return store, u.key


def read(url: str) -> np.ndarray:
    """The bytes of the object at ``url`` as a new uint8 array."""
    import obstore

    store, key = client(url)
    try:
        data = obstore.get(store, key).bytes()
    except Exception as exc:
        raise describe(url, exc) from None
    return np.frombuffer(data, np.uint8).copy()


def read_range(url: str, start: int, end: int) -> np.ndarray:
    """Bytes ``[start, end)`` of the object at ``url`` as a new uint8 array."""
    import obstore

    if end <= start:
        return np.zeros(0, np.uint8)
    store, key = client(url)
    try:
        data = obstore.get_range(store, key, start=start, end=end)
    except Exception as exc:
        raise describe(url, exc) from None
    out = np.frombuffer(data, np.uint8).copy()
    if len(out) != end - start:
        raise StorageError(f"{url}: asked for bytes {start}-{end}, the object ends after {start + len(out)}")
    return out


def size(url: str) -> int:
    """The size in bytes of the object at ``url``."""
    import obstore

    store, key = client(url)
    try:
        return int(obstore.head(store, key)["size"])
    except Exception as exc:
        raise describe(url, exc) from None


def list_folder(folder: str) -> tuple[list[str], list[tuple[str, int]]]:
    """The names of the sub-folders directly under the folder URL ``folder``, and ``(url, size)``
    of the objects directly inside it (every page of the listing)."""
    import obstore

    u = parse(folder)
    store, _ = client(u)
    prefix = u.key.rstrip("/")
    base = f"{u.scheme}://{u.bucket}/"
    try:
        found = obstore.list_with_delimiter(store, prefix or None)
    except Exception as exc:
        raise describe(folder, exc) from None
    skip = len(prefix) + 1 if prefix else 0
    folders = [p.rstrip("/")[skip:] for p in found["common_prefixes"]]
    return folders, [(base + m["path"], int(m["size"])) for m in found["objects"]]


def check(url: str) -> None:
    """Raise StorageError when the bucket of ``url`` is missing or the credentials cannot read it
    (one listing request of the object's folder; a missing object itself is not an error)."""
    import obstore

    u = parse(url)
    store, _ = client(u)
    folder = u.key.rsplit("/", 1)[0] if "/" in u.key else None
    try:
        next(iter(obstore.list(store, folder, chunk_size=1)), None)
    except Exception as exc:
        raise describe(url, exc) from None
