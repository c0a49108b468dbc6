"""docs/porting-from-dali.md names every operator, old name, pipeline argument and operator
argument raypipe takes, and (where DALI is installed) every argument DALI's versions of those
operators take, so that what differs is written down for each."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from raypipe.operator import OLD_NAMES, registry
from raypipe.operators.decoders import MEMORY_HINTS
from raypipe.operators.reader_base import NO_OP_ARGS, ShardedReader
from raypipe.ops import class_name
from raypipe.pipeline import PIPELINE_ARGS
from raypipe.types import DALIInterpType

DOC = Path(__file__).resolve().parents[1] / "docs" / "porting-from-dali.md"
COMMON = {"seed", "preserve", "bytes_per_sample_hint", "device", "name"}


@pytest.fixture(scope="module")
def named() -> set[str]:
    """Everything the document writes in backticks, and each dotted or called part of it."""
    spans = re.findall(r"`([^`]+)`", DOC.read_text(encoding="utf-8"))
    words = set(spans)
    for span in spans:
        words.update(re.findall(r"[A-Za-z_][A-Za-z0-9_.]*", span))
    return words


def _operators():
    return sorted((name, cls) for name, cls in registry().items() if not name.startswith("_"))


def _named_parameters(function) -> set[str]:
    parameters = inspect.signature(function).parameters.values()
    return {p.name for p in parameters if p.name != "self" and p.kind is not p.VAR_KEYWORD}


def _arguments(cls) -> set[str]:
    args = _named_parameters(cls.configure)
    return args | _named_parameters(ShardedReader.configure_reader) if issubclass(cls, ShardedReader) else args


def test_every_operator_and_old_name_is_documented(named):
    for name, _ in _operators():
        assert name in named, name
    for old_class, old_function in OLD_NAMES.values():
        assert f"ops.{old_class}" in named and f"fn.{old_function}" in named, old_class


def test_every_argument_raypipe_takes_is_documented(named):
    missing = sorted(f"{name}: {arg}" for name, cls in _operators() for arg in _arguments(cls) if arg not in named)
    assert not missing
    for arg in (*PIPELINE_ARGS, "enable_conditionals", "debug", *NO_OP_ARGS, *MEMORY_HINTS):
        assert arg in named, arg
    for member in DALIInterpType:
        assert member.name in named, member.name


def test_every_argument_dali_takes_is_documented(named):
    backend = pytest.importorskip("nvidia.dali.backend")
    missing = []
    for name, _ in _operators():
        module, _, _ = name.rpartition(".")
        schema = backend.GetSchema("__".join([*module.split("."), class_name(name)]) if module else class_name(name))
        for arg in schema.GetArgumentNames():
            if not schema.IsDeprecatedArg(arg) and arg not in COMMON and arg not in named:
                missing.append(f"{name}: {arg}")
    assert not missing
