"""``io.file.read``: the bytes of the file each sample names, as DALI's (paths made inside the
pipeline, for example by ``python_function`` or a source of strings, then read and decoded).

A sample is a path encoded in UTF-8 as a 1-D ``uint8`` or ``int8`` array
(``np.frombuffer(path.encode(), np.uint8)``); the output is the file's bytes, 1-D ``uint8``. An
object-store URL (``s3://``, ``gs://``) reads the object. Unlike DALI 2.4, which maps each file and
fails on an empty one, an empty file gives an empty sample; ``dont_use_mmap`` and ``use_o_direct``
are accepted and checked as DALI checks them, and the read is always a plain read.
"""

from __future__ import annotations

import os

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, register
from ..storage import store
from ..storage.urls import is_url
from .readers import read_file

OP = "io.file.read"


@register
class FileRead(Operator):
    """Each sample's file, read whole."""

    schema = Schema(OP, devices=("cpu",))

    def configure(self, dont_use_mmap: bool = False, use_o_direct: bool = False, bytes_per_sample_hint=0) -> None:
        for name, value in (("dont_use_mmap", dont_use_mmap), ("use_o_direct", use_o_direct)):
            if not isinstance(value, (bool, np.bool_)):
                raise ArgumentError(f"{OP}: {name} must be a bool, got {value!r}")
        if use_o_direct and not dont_use_mmap:
            raise ArgumentError(f"{OP}: use_o_direct=True needs dont_use_mmap=True (a mapped file bypasses no cache)")

    def output_layout(self, input_layouts) -> str:
        return ""

    def compute(self, xp, inputs, args, ctx):
        encoded = np.asarray(inputs[0])
        if encoded.ndim != 1 or encoded.dtype not in (np.uint8, np.int8):
            raise ValueError(
                f"{OP}: a path must be a 1-D uint8 or int8 array of its UTF-8 bytes, got {encoded.dtype} of shape "
                f"{encoded.shape}"
            )
        try:
            path = encoded.tobytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"{OP}: the path is not UTF-8 ({exc})") from None
        if not path:
            raise ValueError(f"{OP}: the path is empty")
        if is_url(path):
            return store.read(path)
        if os.path.isdir(path):
            raise ValueError(f"{OP}: {path!r} is a folder, not a file")
        try:
            return read_file(path)
        except OSError as exc:
            raise ValueError(f"{OP}: cannot read {path!r}: {exc.strerror or exc}") from None
