"""``x[...]`` on pipeline data (``DataNode.__getitem__``), as DALI's: ints (negative from the end),
slices ``start:stop:step``, ``None`` (the whole axis, as ``:``), per-sample indices and bounds
given as pipeline data, and :data:`newaxis` (an axis of extent 1, optionally named:
``newaxis("N")``). An Ellipsis is not supported, as in DALI."""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import ArgumentError
from .graph import DataNode, current_graph


class NewAxis:
    """``x[newaxis]``: insert an axis of extent 1 here; ``newaxis("N")`` names it in the layout."""

    def __init__(self, name: str | None = None):
        if name is not None and (not isinstance(name, str) or len(name) != 1):
            raise ArgumentError(f"newaxis: the name must be one character, got {name!r}")
        self.name = name

    def __call__(self, name: str | None = None) -> NewAxis:
        return NewAxis(name)

    def __repr__(self) -> str:
        return "newaxis" if self.name is None else f"newaxis({self.name!r})"


#: DALI's ``nvidia.dali.newaxis``.
newaxis = NewAxis()


def _checked_int(value: Any) -> Any:
    """A static index or bound as an int, or a per-sample one (a DataNode) as it is."""
    if value is None or isinstance(value, DataNode):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ArgumentError(f"subscript: indices must be ints, slices, None, newaxis or pipeline data, got {value!r}")
    return int(value)


def subscript(node: DataNode, key: Any) -> DataNode:
    """``node[key]``: the ``_subscript`` operator for the indices and slices, then ``expand_dims``
    for the new axes."""
    keys = key if isinstance(key, tuple) else (key,)
    kwargs: dict[str, Any] = {}
    indexed: list[int] = []
    new_axes: list[int] = []
    names: list[str] = []
    count = 0  # subscripts of the input
    out_dim = 0  # axes of the output so far
    for item in keys:
        if item is Ellipsis:
            raise ArgumentError("subscript: an Ellipsis (...) is not supported, as in DALI")
        if isinstance(item, NewAxis):
            new_axes.append(out_dim)
            if item.name is not None:
                names.append(item.name)
            out_dim += 1
            continue
        if item is None:
            pass
        elif isinstance(item, slice):
            for part, value in (("lo", item.start), ("hi", item.stop), ("step", item.step)):
                value = _checked_int(value)
                if value is not None:
                    kwargs[f"{part}_{count}"] = value
        else:
            kwargs[f"at_{count}"] = _checked_int(item)
            indexed.append(count)
            count += 1
            continue
        count += 1
        out_dim += 1
    if names and len(names) != len(new_axes):
        raise ArgumentError("subscript: name every new axis or none")
    graph = current_graph("DataNode[...]")
    (sliced,) = graph.add("_subscript", [node], {**kwargs, "num_subscripts": count, "indices": tuple(indexed)})
    if not new_axes:
        return sliced
    return graph.add("expand_dims", [sliced], {"axes": new_axes, "new_axis_names": "".join(names)})[0]
