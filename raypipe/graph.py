"""The operator graph: nodes recorded while a pipeline is defined, then checked,
pruned and split into the CPU, Mixed and GPU stages at build time."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

import numpy as np

from .decode_plan import DecodePlan, plan_decoders
from .errors import ArgumentError, PipelineDefinitionError
from .operator import DEVICES, STAGE_ORDER, Operator, registry

_local = threading.local()


_UNARY = object()  # no second operand


def _operator(op: str, reflected: bool = False, unary: bool = False) -> Callable[..., DataNode]:
    """A DataNode operator method placing arithmetic ``op`` (see :meth:`DataNode._arithmetic`)."""
    if unary:
        return lambda self: self._arithmetic(op)
    return lambda self, other: self._arithmetic(op, other, reflected)


class DataNode:
    """A symbolic batch: output ``index`` of an operator node."""

    def __init__(self, producer: OpNode, index: int):
        self.producer = producer
        self.index = index

    @property
    def device(self) -> str:
        """Where the data lives: ``"cpu"`` or ``"gpu"`` (mixed operators produce GPU data)."""
        return "gpu" if self.producer.device in ("mixed", "gpu") else "cpu"

    @property
    def name(self) -> str:
        return self.producer.label if self.index == 0 else f"{self.producer.label}[{self.index}]"

    @property
    def layout(self) -> str:
        """The layout its producer gives this output (``""`` for none), from its inputs' layouts."""
        known = self.__dict__.get("_layout")
        if known is None:
            op = self.producer.op
            known = op.output_layout([d.layout for d in self.producer.inputs])
            per_output = getattr(op, "output_layouts", None)  # operators whose outputs differ, once
            if per_output is not None:  # output_layout has seen the inputs'
                known = per_output()[self.index]
            elif self.index > 0:  # the other outputs of the rest (boxes, labels, sizes) have none, as in DALI
                known = ""
            self._layout = known
        return known

    def gpu(self) -> DataNode:
        """This data moved to the GPU stage."""
        if self.device == "gpu":
            return self
        return current_graph("DataNode.gpu()").add("_transfer", [self], {}, device="mixed")[0]

    def cpu(self) -> DataNode:
        """This data on the host: itself for host data, as DALI's ``.cpu()``. GPU data stays there:
        raypipe's stages run the host's work before the GPU's, so it is refused by name."""
        if self.device == "cpu":
            return self
        raise PipelineDefinitionError(
            f"{self!r}.cpu(): GPU data cannot go back to the host in a raypipe pipeline; take the value before "
            "its .gpu() (or a mixed or gpu operator) instead"
        )

    def shape(self, *, dtype: Any = None, device: str = "cpu") -> DataNode:
        """DALI's ``node.shape()``: each sample's shape as data (``fn.shapes``; int64 unless ``dtype``)."""
        from . import fn

        self._check_host("shape", device)
        return fn.shapes(self, dtype=dtype, device=device)

    def property(self, key: str, *, device: str = "cpu") -> DataNode:
        """DALI's ``node.property(key)``: ``"source_info"`` or ``"layout"`` as uint8 data (``fn.get_property``)."""
        from . import fn

        self._check_host("property", device)
        return fn.get_property(self, key=key, device=device)

    def source_info(self, *, device: str = "cpu") -> DataNode:
        """DALI's ``node.source_info()``: ``property("source_info")``."""
        return self.property("source_info", device=device)

    def _check_host(self, method: str, device: str) -> None:
        if self.device == "gpu" and device == "cpu":
            raise PipelineDefinitionError(
                f"{self!r}.{method}(): GPU data cannot give host data in a raypipe pipeline; call it before .gpu() "
                "(or before the mixed or gpu operator that made this data)"
            )

    def __repr__(self) -> str:
        return f"DataNode({self.name}, device={self.device})"

    def __getitem__(self, key: Any) -> DataNode:
        """DALI's subscript ``x[...]`` (see :mod:`raypipe.subscript`)."""
        from .subscript import subscript

        return subscript(self, key)

    def __bool__(self) -> NoReturn:
        """Not a truth value: outside a rewritten function, an ``if``, ``while``, ``and``, ``or`` or
        ``not`` on pipeline data would pick one branch for every sample at definition time."""
        raise TypeError(
            f"{self!r} is pipeline data, not a truth value: to choose per sample with `if`, `and`, `or` or `not`, "
            "define the pipeline with @pipeline_def(enable_conditionals=True) (as in DALI; `while` loops and "
            "`x if c else y` on pipeline data are not supported there either), or choose with arithmetic "
            "(mask * a + (mask ^ True) * b)"
        )

    def __iter__(self) -> NoReturn:
        """Not iterable (``__getitem__`` would otherwise make it endlessly so): one output of one operator."""
        raise TypeError(f"{self!r} is one operator output, not a sequence of outputs: it cannot be unpacked")

    # Arithmetic, comparisons and bitwise operators (DALI's mathematical expressions, see
    # raypipe.operators.arithmetic). DataNodes are also dictionary keys and list members: == and !=
    # place a comparison only while a pipeline is being defined, and are identity otherwise.
    def _arithmetic(self, op: str, other: Any = _UNARY, reflected: bool = False) -> DataNode:
        from .operators.arithmetic import SYMBOLS, constant_dtype

        where = f"DataNode {SYMBOLS[op]}"
        other = placed(other)
        if other is _UNARY:
            return current_graph(where).add("_arithmetic", [self], {"op": op})[0]
        if isinstance(other, (np.ndarray, list, tuple)):  # a tensor constant, as DALI makes it
            other = constant_input(where, other)
        if isinstance(other, DataNode):
            inputs = [other, self] if reflected else [self, other]
            return current_graph(where).add("_arithmetic", inputs, {"op": op})[0]
        if constant_dtype(other) is None:
            return NotImplemented
        return current_graph(where).add(
            "_arithmetic", [self], {"op": op, "constant": other, "constant_first": reflected}
        )[0]

    #: numpy defers to these operators (``array * node`` is ``node.__rmul__(array)``) instead of
    #: applying its own elementwise over the node
    __array_ufunc__ = None

    __add__ = _operator("add")
    __radd__ = _operator("add", reflected=True)
    __sub__ = _operator("sub")
    __rsub__ = _operator("sub", reflected=True)
    __mul__ = _operator("mul")
    __rmul__ = _operator("mul", reflected=True)
    __truediv__ = _operator("truediv")
    __rtruediv__ = _operator("truediv", reflected=True)
    __floordiv__ = _operator("floordiv")
    __rfloordiv__ = _operator("floordiv", reflected=True)
    __mod__ = _operator("mod")
    __rmod__ = _operator("mod", reflected=True)
    __pow__ = _operator("pow")
    __rpow__ = _operator("pow", reflected=True)
    __neg__ = _operator("neg", unary=True)
    __pos__ = _operator("pos", unary=True)
    __lt__ = _operator("lt")
    __le__ = _operator("le")
    __gt__ = _operator("gt")
    __ge__ = _operator("ge")
    __and__ = _operator("and")
    __rand__ = _operator("and", reflected=True)
    __or__ = _operator("or")
    __ror__ = _operator("or", reflected=True)
    __xor__ = _operator("xor")
    __rxor__ = _operator("xor", reflected=True)
    __hash__ = object.__hash__

    def __eq__(self, other: Any) -> Any:
        if getattr(_local, "graph", None) is None:
            return self is other
        return self._arithmetic("eq", other)

    def __ne__(self, other: Any) -> Any:
        if getattr(_local, "graph", None) is None:
            return self is not other
        return self._arithmetic("ne", other)


class OpNode:
    """One operator instance placed in the graph."""

    def __init__(self, op: Operator, inputs: list[DataNode], arg_inputs: dict[str, DataNode], name: str | None):
        self.op = op
        self.inputs = inputs
        self.arg_inputs = arg_inputs
        self.name = name
        self.outputs = [DataNode(self, i) for i in range(op.num_outputs)]
        #: Where the branch that recorded this node ended (an ``if`` on pipeline data): its outputs
        #: reach further only through the variables the ``if`` assigns (:func:`check_open`).
        self.closed_in: str | None = None

    @property
    def device(self) -> str:
        return self.op.device

    @property
    def label(self) -> str:
        """How errors name this operator: its ``name`` or ``schema#id``."""
        return f"'{self.name}'" if self.name else f"'{self.op.schema.name}'#{self.op.op_id}"

    def upstream(self) -> list[DataNode]:
        return [*self.inputs, *self.arg_inputs.values()]


def named_outputs(outputs: list[DataNode]) -> DataNode | tuple[DataNode, ...] | dict[str, DataNode]:
    """What ``fn``/``ops`` return for an operator's outputs: one node, a tuple, or a dict by name."""
    names = outputs[0].producer.op.output_names if outputs else None
    if names is not None:
        return dict(zip(names, outputs))
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


class Graph:
    """Operator nodes in the order they were defined; their operator ids (which key their random
    streams) count from ``first_id``."""

    def __init__(self, first_id: int = 0):
        self.nodes: list[OpNode] = []
        self.first_id = first_id

    def add(
        self, op_name: str, inputs: Sequence[Any], kwargs: dict[str, Any], device: str | None = None
    ) -> list[DataNode]:
        """Place operator ``op_name`` on ``inputs``; DataNode keyword values become argument inputs."""
        cls = registry()[op_name]
        schema = cls.schema
        if cls.positional_args and inputs and not isinstance(inputs[0], DataNode):  # fn.external_source(source)
            kwargs = {**dict(zip(cls.positional_args, inputs)), **kwargs}
            inputs = ()
        inputs = [constant_input(op_name, value) for value in inputs]
        if not op_name.startswith("_"):  # DALI's rule: None is no argument's value, so it means "not given"
            kwargs = {k: placed(v) for k, v in kwargs.items() if v is not None}
        for value in (*inputs, *kwargs.values()):
            check_open(value)
        if not schema.min_inputs <= len(inputs) <= schema.max_inputs:
            expected = (
                str(schema.min_inputs)
                if schema.min_inputs == schema.max_inputs
                else f"{schema.min_inputs}..{schema.max_inputs}"
            )
            raise ArgumentError(f"{op_name}: expects {expected} inputs, got {len(inputs)}")
        name = kwargs.pop("name", None)
        arg_inputs = {k: v for k, v in kwargs.items() if isinstance(v, DataNode)}
        for key in arg_inputs:
            if key not in schema.arg_inputs:
                raise ArgumentError(f"{op_name}: argument {key!r} cannot be a per-sample input")
            kwargs.pop(key)
        if device is None:
            device = (
                "gpu" if any(i.device == "gpu" for i in inputs) and "gpu" in schema.devices else (schema.devices[0])
            )
        if device not in DEVICES:
            raise ArgumentError(f"{op_name}: device must be one of {DEVICES}, got {device!r}")
        if device not in schema.devices:
            raise ArgumentError(f"{op_name}: cannot run on device {device!r} (supported: {schema.devices})")
        moved = device in ("gpu", "mixed") and getattr(cls, "reads_on_host", False)
        op = cls(device="cpu" if moved else device, op_id=self.first_id + len(self.nodes), **kwargs)
        op.bind_inputs(len(inputs), set(arg_inputs))
        op.bind_upstream(inputs)
        # per-frame arguments, by their layout as DALI tells them (raypipe's own "_" operators carry
        # sequences in their argument inputs as data)
        per_frame = set() if op_name.startswith("_") else {k for k, d in arg_inputs.items() if d.layout.startswith("F")}
        by_frame = getattr(op, "per_frame_inputs", frozenset())
        if per_frame or any(d.layout.startswith("F") for i, d in enumerate(inputs) if i in by_frame):
            from .frame_args import with_frame_args

            op = with_frame_args(op, per_frame, [d.layout for d in inputs])
        node = OpNode(op, list(inputs), arg_inputs, name)
        self.nodes.append(node)
        outputs = node.outputs
        if moved:  # a reader decoding on the host: device="gpu" gives its outputs on the GPU, as .gpu()
            outputs = [out.gpu() for out in outputs]
        follow = op.then()
        if follow is not None:  # e.g. a decoder's dtype: its conversion placed right after it
            (converted,) = self.add(follow[0], [outputs[0]], follow[1], "gpu" if outputs[0].device == "gpu" else "cpu")
            outputs = [converted, *outputs[1:]]
        return outputs


def check_open(value: Any) -> None:
    """Refuse a data node made inside a branch of an ``if`` on pipeline data that reached beyond it
    other than through a variable the ``if`` assigns (appended to a list, stored in a dict...)."""
    if isinstance(value, DataNode) and value.producer.closed_in is not None:
        raise PipelineDefinitionError(
            f"{value!r} was made inside a branch of the `if` on pipeline data at {value.producer.closed_in} and is "
            "used after it, not through a variable the `if` assigns (a list or dict it was added to?): assign it to "
            "a variable in both branches"
        )


def placed(value: Any) -> Any:
    """``value``, or for a constant made outside any definition
    (:class:`~raypipe.deferred_node.DeferredNode`) its node in the graph being defined."""
    place = getattr(value, "place_in_current_graph", None) if not isinstance(value, DataNode) else None
    return value if place is None else place()


def constant_input(op_name: str, value: Any) -> DataNode:
    """An operator's input: a node, or, as in DALI, a number (a bool too), list or array made a
    ``constant``."""
    value = placed(value)
    if isinstance(value, DataNode):
        return value
    from .types import Constant, ScalarConstant

    if isinstance(value, ScalarConstant):
        value = value.value
    if isinstance(value, (bool, int, float, np.number, np.bool_, np.ndarray, list, tuple)):
        return Constant(np.asarray(value), device="cpu")
    raise ArgumentError(f"{op_name}: inputs must be outputs of other operators or constants, got {value!r}")


def defining_a_graph() -> bool:
    """Whether a pipeline definition is running in this thread."""
    return getattr(_local, "graph", None) is not None


def current_graph(caller: str) -> Graph:
    """The graph being defined in this thread; an error outside a pipeline definition."""
    graph = getattr(_local, "graph", None)
    if graph is None:
        raise PipelineDefinitionError(
            f"{caller} was called outside a pipeline definition "
            "(call it inside a @pipeline_def function or Pipeline.define_graph)"
        )
    return graph


class defining:
    """Context manager: record operator calls into ``graph`` in this thread."""

    def __init__(self, graph: Graph):
        self.graph = graph

    def __enter__(self) -> Graph:
        self._previous = getattr(_local, "graph", None)
        _local.graph = self.graph
        return self.graph

    def __exit__(self, *exc) -> None:
        _local.graph = self._previous


@dataclass
class StagedGraph:
    """A checked, pruned graph split by stage, ready for the executor.

    ``host_nodes`` run per sample in the CPU stage, ``gpu_nodes`` per batch in the GPU stage;
    ``readers`` are the reader nodes in graph order (the first decides the order they all read in,
    :mod:`raypipe.aligned_readers`); ``to_device`` are the host results the Mixed stage moves to the
    device. ``decode_plans`` record how staging placed each decoder (:mod:`raypipe.decode_plan`):
    staging changes no operator, the stages pass each operator what was decided for it
    (:meth:`op_kwargs`)."""

    outputs: list[DataNode]
    host_nodes: list[OpNode]
    gpu_nodes: list[OpNode]
    readers: list[OpNode]
    to_device: list[DataNode]
    host_results: list[DataNode]
    layouts: dict[DataNode, str] = field(default_factory=dict)
    decode_plans: dict[OpNode, DecodePlan] = field(default_factory=dict)

    def relayout(self, changed: dict[DataNode, str]) -> None:
        """Give the ``changed`` outputs (an external source's, as fed or returned) their layouts, and every output
        computed from them the layout its operator gives for those: layouts follow the data, as
        DALI's do at run time."""
        touched = set()
        for d, layout in changed.items():
            if self.layouts.get(d, "") != layout:
                d._layout = self.layouts[d] = layout
                touched.add(d)
        if not touched:
            return
        for node in (*self.host_nodes, *self.gpu_nodes):
            if not touched.isdisjoint(node.inputs):
                for d in node.outputs:
                    d.__dict__.pop("_layout", None)
                    self.layouts[d] = d.layout
                    touched.add(d)

    @property
    def reader(self) -> OpNode | None:
        """The reader whose order every reader follows (the first in graph order); None without one."""
        return self.readers[0] if self.readers else None

    @property
    def deferred(self) -> list[DataNode]:
        """The outputs of the decoders whose decoding the Mixed stage does on the GPU."""
        return [node.outputs[0] for node, plan in self.decode_plans.items() if plan.deferred]

    def op_kwargs(self, node: OpNode) -> dict[str, Any]:
        """What staging decided for ``node``'s operator, as keyword arguments of its per-sample and
        per-chunk calls (``plan=`` for a decoder); empty for the others."""
        plan = self.decode_plans.get(node)
        return {} if plan is None else {"plan": plan}


def stage(graph: Graph, outputs: Sequence[Any], *, on_gpu: bool = True, decode_on_gpu: bool = False) -> StagedGraph:
    """Check device order, prune what the outputs and the operators with ``preserve=True`` do not
    need, and split by stage.

    ``on_gpu=False`` (no usable GPU) runs mixed and gpu operators per sample in the CPU stage, with
    their fast host implementations, exactly as if they were cpu operators; only operators whose
    batch call means something else (``batch_semantics``: python_function on the GPU gets the whole
    batch), and what consumes them, stay batch steps. ``decode_on_gpu`` (nvImageCodec present) defers
    mixed decoders to the Mixed stage. The decisions are recorded in the result; the graph's
    operators are left as they are, so a graph may be staged again with another split."""
    if not outputs:
        raise PipelineDefinitionError("the pipeline defines no outputs")
    for out in outputs:
        if not isinstance(out, DataNode):
            raise PipelineDefinitionError(f"pipeline outputs must be operator outputs, got {out!r}")
        check_open(out)
    needed = _reachable([*(o.producer for o in outputs), *(n for n in graph.nodes if n.op.preserve)])
    ordered = [n for n in graph.nodes if n in needed]
    for node in ordered:
        _check_order(node)
    readers = [n for n in ordered if n.op.schema.is_reader]
    batched = _batch_stage(ordered, on_gpu)
    host_nodes = [n for n in ordered if n not in batched]
    gpu_nodes = [n for n in ordered if n in batched]
    to_device: list[DataNode] = []
    host_results: list[DataNode] = []
    for node in gpu_nodes:
        for d in node.inputs:
            if d.producer in batched:
                continue
            if node.device == "cpu":  # a host batch step takes its inputs as the CPU stage left them
                if d not in host_results:
                    host_results.append(d)
            elif d not in to_device:
                to_device.append(d)
        for d in node.arg_inputs.values():
            if d.producer not in batched and d not in host_results:
                host_results.append(d)
    for out in outputs:
        if out.producer in batched:
            continue
        if on_gpu and out.producer.device == "mixed":
            if out not in to_device:
                to_device.append(out)
        elif out not in host_results:
            host_results.append(out)
    host_results = [d for d in host_results if d not in to_device] + to_device
    decode_plans = plan_decoders(ordered, outputs, set(host_nodes), defer=on_gpu and decode_on_gpu)
    layouts = {d: d.layout for node in ordered for d in node.outputs}
    return StagedGraph(
        outputs=list(outputs),
        host_nodes=host_nodes,
        gpu_nodes=gpu_nodes,
        readers=readers,
        to_device=to_device,
        host_results=host_results,
        layouts=layouts,
        decode_plans=decode_plans,
    )


def _batch_stage(ordered: list[OpNode], on_gpu: bool) -> set[OpNode]:
    """The nodes the GPU stage runs batch by batch: every gpu node on a GPU; without one, gpu nodes
    with ``batch_semantics``. Besides, cpu nodes that need the whole batch
    (:meth:`~raypipe.operator.Operator.host_batch_step`) run there on the host (numpy) once the CPU
    stage has gathered the batch. Whatever consumes a batched node's output (as an input or an
    argument input) is batched too; of the
    mixed nodes only ``.gpu()``'s transfer can be, the others run per sample on the host."""
    batched: set[OpNode] = set()
    for node in ordered:
        downstream = any(d.producer in batched for d in node.upstream())
        if node.device == "mixed" and not getattr(node.op, "batch_transfer", False):
            if downstream:
                source = next(d.producer for d in node.upstream() if d.producer in batched)
                raise PipelineDefinitionError(
                    f"operator {node.label} (device 'mixed') runs per sample and cannot consume {source.label}, "
                    "which needs the whole batch: move it after the mixed operator"
                )
            continue
        if node.device == "cpu":
            wanted = node.op.host_batch_step(set(node.arg_inputs))
        elif node.device == "mixed":
            wanted = False
        else:
            wanted = on_gpu or getattr(node.op, "batch_semantics", False)
        if wanted or downstream:
            batched.add(node)
    return batched


def _reachable(roots: Sequence[OpNode]) -> set[OpNode]:
    """``roots`` and every node they depend on."""
    seen: set[OpNode] = set()
    stack = list(roots)
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            stack.extend(d.producer for d in node.upstream())
    return seen


def _check_order(node: OpNode) -> None:
    for d in node.inputs:
        if STAGE_ORDER[d.producer.device] > STAGE_ORDER[node.device] or (node.device == "mixed" and d.device == "gpu"):
            if d.producer.op.schema.name == "_transfer":  # DataNode.gpu(): name what the script wrote
                moved = d.producer.inputs[0].producer.label
                raise PipelineDefinitionError(
                    f"operator {node.label} (device {node.device!r}) cannot consume the output of {moved} moved to "
                    f"the GPU by .gpu(): data flows cpu -> mixed -> gpu; run {node.label} on the GPU or call .gpu() "
                    "after it"
                )
            raise PipelineDefinitionError(
                f"operator {node.label} (device {node.device!r}) cannot consume the output of "
                f"{d.producer.label} (device {d.producer.device!r}): data flows cpu -> mixed -> gpu; "
                f"run {node.label} on the GPU or move {d.producer.label} earlier"
            )
    for key, d in node.arg_inputs.items():
        if d.device == "gpu":
            raise PipelineDefinitionError(
                f"argument {key!r} of operator {node.label} comes from {d.producer.label} on the GPU; "
                "per-sample arguments must be computed on the CPU"
            )
