"""A staged graph as Graphviz DOT text, for DALI's ``Pipeline.save_graph_to_dot_file``.

Operators are named as errors name them (their ``name``, or ``schema_id``), in graph order; with
``show_tensors`` every operator output is a box between its producer and its consumers (edges
labelled by output index and by input position or argument name), and ``use_colors`` colours each
operator by the device it was placed on."""

from __future__ import annotations

from .graph import DataNode, OpNode, StagedGraph

COLORS = {"cpu": "blue", "mixed": "cyan", "gpu": "#76b900"}


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _op_id(node: OpNode) -> str:
    return _quoted(node.name or f"{node.op.schema.name}_{node.op.op_id}")


def _tensor_id(data: DataNode) -> str:
    producer = data.producer
    return _quoted(f"{producer.name or f'{producer.op.schema.name}_{producer.op.op_id}'}[{data.index}]_{data.device}")


def dot_text(staged: StagedGraph, *, show_tensors: bool = False, use_colors: bool = False) -> str:
    """The operators of ``staged`` and the data between them as one ``digraph``."""
    nodes = sorted([*staged.host_nodes, *staged.gpu_nodes], key=lambda n: n.op.op_id)
    lines = ["digraph graphname {"]
    shown: set[DataNode] = set()

    def tensor(data: DataNode) -> str:
        tid = _tensor_id(data)
        if data not in shown:
            shown.add(data)
            lines.append(f"{tid}[shape=box];")
            lines.append(f"{_op_id(data.producer)} -> {tid}[label={data.index}];")
        return tid

    for node in nodes:
        if use_colors:
            lines.append(f'{_op_id(node)}[color="{COLORS.get(node.device, "black")}"];')
        edges = [*((str(i), d) for i, d in enumerate(node.inputs)), *node.arg_inputs.items()]
        for label, data in edges:
            if show_tensors:
                lines.append(f"{tensor(data)} -> {_op_id(node)}[label={_quoted(label)}];")
            else:
                lines.append(f"{_op_id(data.producer)} -> {_op_id(node)};")
        if not edges and not use_colors:
            lines.append(f"{_op_id(node)};")
    if show_tensors:
        for out in staged.outputs:
            tensor(out)
    lines.append("}")
    return "\n".join(lines) + "\n"
