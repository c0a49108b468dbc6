"""DALI class-style operators: ``ops.Resize(device="gpu", resize_x=224)`` created once in
``__init__`` and called on inputs in ``define_graph``."""

from __future__ import annotations

from typing import Any

from .graph import DataNode, current_graph, named_outputs
from .operator import registry


class OperatorFactory:
    """A configured operator; each call places one instance of it in the graph."""

    op_name: str = ""

    def __init__(self, *, device: str | None = None, **kwargs: Any):
        self.device = device
        self.kwargs = kwargs

    def __call__(self, *inputs: DataNode, **call_kwargs: Any):
        kwargs = {**self.kwargs, **call_kwargs}
        return named_outputs(
            current_graph(f"ops.{type(self).__name__}").add(self.op_name, inputs, kwargs, device=self.device)
        )


# DALI's class names where they are not the capitalised operator name
_CLASS_NAMES = {"readers.tfrecord": "TFRecord", "readers.mxnet": "MXNet", "readers.coco": "COCO"}
# long-lived DALI aliases at the top level of ``ops``
ALIASES = {
    "FileReader": "readers.file",
    "CaffeReader": "readers.caffe",
    "Caffe2Reader": "readers.caffe2",
    "TFRecordReader": "readers.tfrecord",
    "MXNetReader": "readers.mxnet",
}
_CLASSES: dict[str, type[OperatorFactory]] = {}


def _class_name(op_name: str) -> str:
    if op_name in _CLASS_NAMES:
        return _CLASS_NAMES[op_name]
    return "".join(part.capitalize() for part in op_name.rsplit(".", 1)[-1].split("_"))


def factory(op_name: str, attr: str) -> type[OperatorFactory]:
    """The one ``ops`` class of operator ``op_name`` (``ops.X is ops.X``)."""
    cls = _CLASSES.get(op_name)
    if cls is None:
        cls = type(attr, (OperatorFactory,), {"op_name": op_name, "__doc__": registry()[op_name].__doc__})
        _CLASSES[op_name] = cls
    return cls


class _Namespace:
    def __init__(self, prefix: str):
        self._prefix = prefix

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        ops = registry()
        if not self._prefix and attr in ALIASES and ALIASES[attr] in ops:
            return factory(ALIASES[attr], attr)
        for name in ops:
            if name.startswith(self._prefix) and "." not in name[len(self._prefix) :]:
                if _class_name(name) == attr:
                    return factory(name, attr)
        sub = f"{self._prefix}{attr}."
        if any(k.startswith(sub) for k in ops):
            return _Namespace(sub)
        raise AttributeError(f"raypipe has no operator ops.{self._prefix}{attr}")


_root = _Namespace("")


def __getattr__(attr: str):
    return getattr(_root, attr)
