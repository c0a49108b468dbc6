"""DALI class-style operators: ``ops.Resize(device="gpu", resize_x=224)`` created once in
``__init__`` and called on inputs in ``define_graph``."""

from __future__ import annotations

from typing import Any

from .graph import DataNode, current_graph
from .operator import registry


class OperatorFactory:
    """A configured operator; each call places one instance of it in the graph."""

    op_name: str = ""

    def __init__(self, *, device: str | None = None, **kwargs: Any):
        self.device = device
        self.kwargs = kwargs

    def __call__(self, *inputs: DataNode, **call_kwargs: Any):
        kwargs = {**self.kwargs, **call_kwargs}
        outputs = current_graph(f"ops.{type(self).__name__}").add(self.op_name, inputs, kwargs, device=self.device)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)


def _class_name(snake: str) -> str:
    return "".join(part.capitalize() for part in snake.split("_"))


class _Namespace:
    def __init__(self, prefix: str):
        self._prefix = prefix

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        ops = registry()
        for name, cls in ops.items():
            if name.startswith(self._prefix) and "." not in name[len(self._prefix) :]:
                if _class_name(name[len(self._prefix) :]) == attr:
                    return type(attr, (OperatorFactory,), {"op_name": name, "__doc__": cls.__doc__})
        sub = f"{self._prefix}{attr}."
        if any(k.startswith(sub) for k in ops):
            return _Namespace(sub)
        raise AttributeError(f"raypipe has no operator ops.{self._prefix}{attr}")


_root = _Namespace("")


def __getattr__(attr: str):
    return getattr(_root, attr)
