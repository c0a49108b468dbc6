"""A pipeline's definition as data, for DALI's ``Pipeline.serialize`` and ``Pipeline.deserialize``.

What is kept is what defines the pipeline: its constructor's arguments and its operator calls in
order (the operator, its device, its inputs and arguments, as :class:`raypipe.graph_context.RecordedGraph`
records them), and which call outputs are the pipeline's outputs. Replaying the calls places the
same operators in the same order, so a deserialized pipeline gives the same batches. The text is
JSON in raypipe's own format (DALI's is a protobuf message: neither reads the other's), holding
values only: numbers, strings, lists, numpy arrays and dtypes, ``types`` enums, raypipe's argument
records (a TFRecord feature) and references to earlier calls' outputs. An argument that is code (a
Python function or a source) cannot be kept and makes :func:`dump` fail naming the operator and the
argument, as DALI refuses to serialize Python operators.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import importlib
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import types
from .errors import ArgumentError
from .graph import DataNode

FORMAT = "raypipe.pipeline"
VERSION = 1


@dataclasses.dataclass(frozen=True)
class Call:
    """One operator call to replay: ``inputs`` and ``kwargs`` hold :class:`Ref` where they took a
    data node."""

    op_name: str
    device: str | None
    inputs: list[Any]
    kwargs: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Ref:
    """Output ``output`` of call ``call`` (earlier in the list)."""

    call: int
    output: int


@dataclasses.dataclass(frozen=True)
class Definition:
    """A pipeline's definition: its constructor's ``arguments``, its ``calls`` and its ``outputs``."""

    arguments: dict[str, Any]
    calls: list[Call]
    outputs: list[Ref]


#: raypipe's operators that hold graphs of operators (branches, augmentations): not kept here
_GRAPH_HOLDERS = {
    "_conditional": "an `if` on pipeline data (enable_conditionals)",
    "_augment_select": "an automatic augmentation (raypipe.auto_aug)",
}


class _Unkeepable(Exception):
    """A value with no data form (code, an object of no known kind)."""


def dump(arguments: dict[str, Any], calls: Sequence[Any], outputs: Sequence[DataNode]) -> bytes:
    """The definition as JSON bytes: ``calls`` are recorded calls (``op_name``, ``inputs``, ``kwargs``,
    ``device``, ``outputs``), ``outputs`` the pipeline's outputs among their outputs."""
    refs: dict[int, list[int]] = {}
    encoded_calls = []
    for index, call in enumerate(calls):
        label = f"operator {call.op_name!r} (call {index})"
        if call.op_name in _GRAPH_HOLDERS:
            raise ArgumentError(
                f"serialize: {_GRAPH_HOLDERS[call.op_name]} cannot be serialized here: it holds graphs of operators, "
                "not values; build such a pipeline from its code"
            )
        try:
            inputs = [_encode(value, refs) for value in call.inputs]
        except _Unkeepable as exc:
            raise ArgumentError(f"serialize: {label} has an input that cannot be serialized: {exc}") from None
        kwargs = {}
        for key, value in call.kwargs.items():
            try:
                kwargs[key] = _encode(value, refs)
            except _Unkeepable as exc:
                raise ArgumentError(
                    f"serialize: {label} argument {key!r} cannot be serialized: {exc} (a definition keeps values, "
                    "not code, as DALI's does)"
                ) from None
        if call.outputs and call.outputs[0].producer.op.preserve:  # also kept by add_sink, which no call records
            kwargs["preserve"] = True
        encoded_calls.append({"op": call.op_name, "device": call.device, "inputs": inputs, "kwargs": kwargs})
        for k, out in enumerate(call.outputs):
            refs[id(out)] = [index, k]
    try:
        encoded_outputs = [_encode(out, refs) for out in outputs]
        encoded_arguments = {key: _encode(value, refs) for key, value in arguments.items()}
    except _Unkeepable as exc:
        raise ArgumentError(f"serialize: {exc}") from None
    document = {
        "format": FORMAT,
        "version": VERSION,
        "pipeline": encoded_arguments,
        "calls": encoded_calls,
        "outputs": encoded_outputs,
    }
    return json.dumps(document, separators=(",", ":")).encode()


def load(data: bytes | str) -> Definition:
    """The definition :func:`dump` wrote; ArgumentError for anything else."""
    try:
        document = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ArgumentError("deserialize: not a serialized raypipe pipeline (not JSON text)") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ArgumentError(
            f"deserialize: not a serialized raypipe pipeline (format {FORMAT!r}); DALI's serialized pipelines "
            "(protobuf) cannot be read here"
        )
    if document.get("version") != VERSION:
        raise ArgumentError(f"deserialize: version {document.get('version')!r} of the format; this reads {VERSION}")
    try:
        calls = [
            Call(
                c["op"], c["device"], [_decode(v) for v in c["inputs"]], {k: _decode(v) for k, v in c["kwargs"].items()}
            )
            for c in document["calls"]
        ]
        return Definition(
            {k: _decode(v) for k, v in document["pipeline"].items()}, calls, [_decode(v) for v in document["outputs"]]
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ArgumentError(f"deserialize: a damaged serialized pipeline ({type(exc).__name__}: {exc})") from None


def _encode(value: Any, refs: dict[int, list[int]]) -> Any:
    if value is None or isinstance(value, (bool, str, int, float)):
        return value
    if isinstance(value, DataNode):
        if id(value) not in refs:
            raise _Unkeepable(f"{value!r} is not the output of an earlier call")
        return {"ref": refs[id(value)]}
    if isinstance(value, list):
        return [_encode(v, refs) for v in value]
    if isinstance(value, tuple):
        return {"tuple": [_encode(v, refs) for v in value]}
    if isinstance(value, dict):
        return {"dict": [[_encode(k, refs), _encode(v, refs)] for k, v in value.items()]}
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biufc":
            raise _Unkeepable(f"an array of {value.dtype}")
        data = base64.b64encode(np.ascontiguousarray(value).tobytes()).decode()
        return {"array": {"dtype": value.dtype.str, "shape": list(value.shape), "data": data}}
    if isinstance(value, np.generic):
        return {"scalar": {"dtype": value.dtype.str, "value": value.item()}}
    if isinstance(value, np.dtype):
        return {"dtype": value.str}
    if isinstance(value, enum.Enum) and getattr(types, type(value).__name__, None) is type(value):
        return {"enum": [type(value).__name__, value.name]}
    if isinstance(value, types.ScalarConstant):
        return {"constant": [value.value, value.dtype.name]}
    if isinstance(value, slice):
        return {"slice": [_encode(v, refs) for v in (value.start, value.stop, value.step)]}
    if value is Ellipsis:
        return {"ellipsis": True}
    if dataclasses.is_dataclass(value) and type(value).__module__.startswith("raypipe."):
        fields = {f.name: _encode(getattr(value, f.name), refs) for f in dataclasses.fields(value)}
        return {"record": [type(value).__module__, type(value).__qualname__, fields]}
    raise _Unkeepable(f"{type(value).__name__} {value!r:.60}")


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    ((tag, body),) = value.items()
    if tag == "ref":
        return Ref(*body)
    if tag == "tuple":
        return tuple(_decode(v) for v in body)
    if tag == "dict":
        return {_decode(k): _decode(v) for k, v in body}
    if tag == "array":
        raw = base64.b64decode(body["data"])
        return np.frombuffer(raw, np.dtype(body["dtype"])).reshape(body["shape"]).copy()
    if tag == "scalar":
        return np.dtype(body["dtype"]).type(body["value"])
    if tag == "dtype":
        return np.dtype(body)
    if tag == "enum":
        return getattr(types, body[0])[body[1]]
    if tag == "constant":
        return types.ScalarConstant(body[0], types.DALIDataType[body[1]])
    if tag == "slice":
        return slice(*(_decode(v) for v in body))
    if tag == "ellipsis":
        return Ellipsis
    if tag == "record":
        module, qualname, fields = body
        if not module.startswith("raypipe."):
            raise ValueError(f"a record of module {module!r}")
        cls = importlib.import_module(module)
        for part in qualname.split("."):
            cls = getattr(cls, part)
        if not dataclasses.is_dataclass(cls):
            raise ValueError(f"{module}.{qualname} is not a record")
        return cls(**{k: _decode(v) for k, v in fields.items()})
    raise ValueError(f"unknown value tag {tag!r}")
