"""``get_property``: a sample's ``source_info`` or ``layout`` as a byte string, as DALI's (file
names beside predictions at inference, a check of what a pipeline produced).

``source_info`` is where the sample's data came from. As in DALI it follows an operator's first
input back to where the data began: the first output of a reader gives the reader's description of
the sample (``readers.file``: the file's path as DALI gives it, relative to ``file_root`` or as
listed; the other readers: raypipe's own description, the file and record), anything else (a
reader's labels, an external source, a constant) an empty string. The
``layout`` is the input's layout. Both are 1-D ``uint8`` arrays, layout ``""``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, register
from .reader_base import ShardedReader

OP = "get_property"
KEYS = ("source_info", "layout")


def origin_reader(data: Any) -> ShardedReader | None:
    """The reader whose first output ``data`` (a data node) began as, following each operator's first
    input back, as DALI's ``source_info`` follows it; None when it began elsewhere."""
    node = data
    while node.producer.inputs:
        node = node.producer.inputs[0]
    op = node.producer.op
    return op if isinstance(op, ShardedReader) and node.index == 0 else None


@register
class GetProperty(Operator):
    """A property of each sample of the input, as bytes."""

    schema = Schema(OP, devices=("cpu",))

    def configure(self, key: str | None = None) -> None:
        if key not in KEYS:
            raise ArgumentError(f"{OP}: key must be one of {list(KEYS)}, got {key!r}")
        self.key = key
        self.origin: ShardedReader | None = None
        self.layout = ""

    def bind_upstream(self, inputs: Sequence[Any]) -> None:
        self.origin = origin_reader(inputs[0])

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        self.layout = input_layouts[0] if input_layouts else ""
        return ""

    def compute(self, xp, inputs, args, ctx):
        if self.key == "layout":
            text = self.layout
        elif self.origin is None or ctx is None:
            text = ""
        else:
            text = self.origin.source_info(ctx.sample_index)
        return np.frombuffer(text.encode("utf-8"), np.uint8).copy()
