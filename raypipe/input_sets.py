"""DALI's input sets: an operator called with lists of nodes as inputs (``fn.slice([img, label],
anchor, shape)``) runs once per list element, with the other inputs and the arguments shared, and
returns a list of the results (a list of numbers stays a constant input). As in DALI, where one
operator instance processes every set, the instances share one random stream: a random window or
flip is the same for every set of a sample.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .errors import ArgumentError
from .graph import DataNode, Graph, named_outputs


def place(graph: Graph, op_name: str, inputs: Sequence[Any], kwargs: dict[str, Any], device: str | None) -> Any:
    """Place ``op_name`` on ``inputs`` in ``graph``, once per input set where inputs are lists;
    return what ``fn`` returns (a node, a tuple, a dict, or a list of them for input sets)."""
    sets = [isinstance(x, list) and bool(x) and all(isinstance(e, DataNode) for e in x) for x in inputs]
    lengths = {len(x) for x, is_set in zip(inputs, sets) if is_set}
    if not lengths:
        return named_outputs(graph.add(op_name, inputs, kwargs, device=device))
    if len(lengths) > 1:
        raise ArgumentError(f"{op_name}: the input sets (lists of inputs) have different lengths {sorted(lengths)}")
    results, stream = [], None
    for k in range(lengths.pop()):
        args = dict(kwargs) if k == 0 else {key: v for key, v in kwargs.items() if key != "name"}
        outputs = graph.add(op_name, [x[k] if s else x for x, s in zip(inputs, sets)], args, device=device)
        op = outputs[0].producer.op if outputs else None
        if op is not None:
            stream = op.op_id if stream is None else stream
            op.op_id = stream
        results.append(named_outputs(outputs))
    return results
