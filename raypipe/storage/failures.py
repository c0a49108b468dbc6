"""What went wrong with an object-store request, in words: :class:`StorageError` names the URL
and the reason (no such bucket or object, access denied, server unreachable after the retries),
never a credential."""

from __future__ import annotations

import os
import re

from ..errors import ReaderError

#: Environment variables whose values never appear in an error.
SECRETS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "GOOGLE_SERVICE_ACCOUNT_KEY")

_DENIED = (
    "AccessDenied",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "ExpiredToken",
    "403 Forbidden",
    "401 Unauthorized",
)
_DENIED_HELP = "access denied: check the credentials (AWS_ACCESS_KEY_ID/AWS_PROFILE, or GOOGLE_APPLICATION_CREDENTIALS)"


class StorageError(ReaderError):
    """An object-store request failed: the message names the URL and why. A reader raises it as
    it raises a bad file, so ``on_error="skip"`` skips a missing object."""


class MissingObjectError(StorageError, FileNotFoundError):
    """The object (or its bucket) does not exist."""


def describe(url: str, exc: BaseException) -> StorageError:
    """The StorageError for ``exc`` raised by the client on ``url``."""
    text = str(exc)
    code = re.search(r"<Code>([^<]+)</Code>", text)
    code = code.group(1) if code else ""
    if code == "NoSuchBucket" or "bucket does not exist" in text.lower():
        return MissingObjectError(f"{url}: the bucket does not exist")
    if code in ("NoSuchKey", "NotFound") or isinstance(exc, FileNotFoundError):
        return MissingObjectError(f"{url}: no such object")
    if code in _DENIED or any(d in text for d in _DENIED) or isinstance(exc, PermissionError):
        return StorageError(f"{url}: {_DENIED_HELP}")
    if "token request" in text.lower() or "credential" in text.lower():
        return StorageError(f"{url}: no usable credentials ({_first_line(text)})")
    if "error sending request" in text or "Connect" in text or "timed out" in text.lower():
        return StorageError(f"{url}: the server does not answer ({_first_line(text)})")
    return StorageError(f"{url}: {_first_line(text)}")


def _first_line(text: str) -> str:
    """The client's message without its debug dump, the XML body or any secret."""
    line = text.split("\n", 1)[0].split(": <?xml", 1)[0].strip()
    for name in SECRETS:
        value = os.environ.get(name)
        if value:
            line = line.replace(value, "***")
    return re.sub(r"(X-Amz-[A-Za-z-]+=)[^&\s]+", r"\1***", line)[:400]
