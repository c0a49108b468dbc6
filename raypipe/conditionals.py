"""Conditional execution on pipeline data: what DALI's ``enable_conditionals=True`` runs.

A pipeline function defined with ``@pipeline_def(enable_conditionals=True)`` is rewritten
(:mod:`raypipe.autograph`) so that each ``if`` statement, ``and``, ``or`` and ``not`` calls the
functions here. When the condition is a Python value they do what Python does. When it is pipeline
data (a :class:`~raypipe.graph.DataNode`, one bool per sample), both branches are traced, each into
a graph of its own (:class:`~raypipe.subgraph.CapturingGraph`), and the variables the ``if`` assigns
become outputs of one ``_conditional`` operator per device (:mod:`raypipe.operators.conditional`),
which runs each sample through the branch its condition picks. As in DALI:

* a variable both branches leave as it was keeps its value; one that differs is merged, and Python
  numbers assigned in a branch become constants; tuples, lists and dicts are merged item by item
  and must have the same structure in both branches;
* a variable assigned in one branch only is undefined after the ``if`` (using it is an error
  naming the other branch);
* the condition must be computed on the CPU; ``and``, ``or`` and ``not`` take and give truth values.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import numpy as np

from .errors import PipelineDefinitionError
from .graph import DataNode, Graph, current_graph, defining
from .operators.conditional import MAX_HOST_SOURCES
from .subgraph import ID_SPAN, CapturingGraph, Subgraph, first_subgraph_id

BRANCHES = ("if", "else")


class Undefined:
    """A variable without a value after an ``if`` on pipeline data: assigned in one branch only, or
    a return value only one branch gives. Using it is an error saying which."""

    def __init__(self, name: str, missing_in: str | None = None):
        self.name = name
        self.missing_in = missing_in

    def describe(self) -> str:
        """What is missing, in a sentence."""
        if self.missing_in is None:
            return f"variable {self.name!r} is not defined"
        if self.name == RETURN_VALUE:
            return (
                f"the `{self.missing_in}` branch of an `if` on pipeline data has no return statement; "
                "with conditionals, every branch must return"
            )
        return (
            f"variable {self.name!r} is assigned in one branch of an `if` on pipeline data only: initialize it in "
            f"the `{self.missing_in}` branch too (or before the `if`)"
        )

    def __repr__(self) -> str:
        return f"<undefined: {self.describe()}>"

    def _fail(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise PipelineDefinitionError(self.describe())

    __bool__ = __call__ = __getitem__ = __iter__ = __len__ = _fail
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _fail

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        self._fail()


class Unmerged(Undefined):
    """A variable whose values after the two branches of an ``if`` on pipeline data cannot be merged
    per sample (``None`` in one, a number in the other...). As DALI, which merges only the variables
    used after the ``if``, it is no error until it is used."""

    def __init__(self, name: str, where: str, first: Any, second: Any):
        super().__init__(name)
        self.where, self.first, self.second = where, first, second

    def describe(self) -> str:
        return (
            f"{self.where}: variable {self.name!r} is {self.first!r} in the if branch and {self.second!r} in the else "
            "branch: values that differ between the branches of an `if` on pipeline data are merged per sample, so "
            "they must be pipeline data or numbers, in the same structure (tuples, lists and dicts item by item)"
        )


#: The name the rewritten code keeps a function's return value under.
RETURN_VALUE = "__rp_retval"


def returned(value: Any) -> Any:
    """What a function whose ``return`` statements were inside an ``if`` returns."""
    if isinstance(value, Undefined):
        if value.missing_in is None:
            return None  # no branch returned: the function fell off its end
        value._fail()
    return value


def if_stmt(
    test: Any,
    body: Callable[[], None],
    orelse: Callable[[], None],
    get_state: Callable[[], tuple],
    set_state: Callable[[tuple], None],
    names: Sequence[str],
    where: str,
    logical: bool = False,
    mutated: Sequence[str] = (),
) -> None:
    """``if test: body() else: orelse()``, where the branches assign ``names`` (read and written by
    ``get_state`` and ``set_state``) and ``mutated`` (items and attributes). On pipeline data, both
    branches are traced and the variables they assign merged per sample."""
    if not isinstance(test, DataNode):
        if test:
            body()
        else:
            orelse()
        return
    if mutated:
        raise PipelineDefinitionError(
            f"{where}: the branches of an `if` on pipeline data assign to {', '.join(mutated)}; both branches "
            "would write the same object. Assign to a variable in each branch (x = ...) and store it after the `if`"
        )
    if test.device != "cpu":
        raise PipelineDefinitionError(
            f"{where}: the condition of an `if` is {test!r} on the GPU; conditions must be computed on the CPU "
            "(as in DALI)"
        )
    graph = current_graph(f"{where}: an `if` on pipeline data")
    first_id = first_subgraph_id(graph)
    before = get_state()
    traced = []
    for k, branch in enumerate((body, orelse)):
        recorded = CapturingGraph(graph, first_id + k * (ID_SPAN // 2))
        set_state(before)
        with defining(recorded):
            branch()
            traced.append((recorded, get_state()))
    merge = _Merge(where, [g for g, _ in traced])
    after = tuple(
        merge.value(name, start, *(state[i] for _, state in traced))
        for i, (name, start) in enumerate(zip(names, before))
    )
    outputs = merge.place(graph, test, logical)
    for recorded, _ in traced:
        recorded.close(where)
    set_state(tuple(_substitute(value, outputs) for value in after))


def not_(value: Any, where: str) -> Any:
    """``not value``: on pipeline data, the negated truth value of each sample."""
    if not isinstance(value, DataNode):
        return not value
    return _choose(value, lambda: False, lambda: True, where)


def and_(where: str, first: Any, *rest: Callable[[], Any]) -> Any:
    """``first and rest[0]() and ...``: on pipeline data, each sample's operands after the first are
    evaluated (traced) in the branch of the samples whose operands so far are true."""
    return _logical(where, first, rest, True)


def or_(where: str, first: Any, *rest: Callable[[], Any]) -> Any:
    """``first or rest[0]() or ...``, as :func:`and_` with the branches swapped."""
    return _logical(where, first, rest, False)


def _logical(where: str, value: Any, rest: Sequence[Callable[[], Any]], is_and: bool) -> Any:
    if not rest:
        return value
    if isinstance(value, DataNode):

        def further() -> Any:
            return _logical(where, rest[0](), rest[1:], is_and)

        def same() -> Any:
            return value

        return _choose(value, further, same, where) if is_and else _choose(value, same, further, where)
    if bool(value) != is_and:  # `and` stops at a false operand, `or` at a true one
        return value
    return _logical(where, rest[0](), rest[1:], is_and)


def _choose(test: DataNode, if_true: Callable[[], Any], if_false: Callable[[], Any], where: str) -> Any:
    """A truth value per sample: ``if_true()`` where ``test`` is true, ``if_false()`` elsewhere."""
    box: list[Any] = [None]

    def body() -> None:
        box[0] = if_true()

    def orelse() -> None:
        box[0] = if_false()

    def set_state(values: tuple) -> None:
        box[0] = values[0]

    if_stmt(test, body, orelse, lambda: (box[0],), set_state, ("value",), where, logical=True)
    return box[0]


class _Pending:
    """A merged variable's place until its ``_conditional`` operator is placed."""

    def __init__(self, index: int):
        self.index = index


class _Merge:
    """The variables of one ``if`` on pipeline data: which keep their value and which are merged,
    and the operators that merge them."""

    def __init__(self, where: str, graphs: list[CapturingGraph]):
        self.where = where
        self.graphs = graphs
        self.names: list[str] = []
        self.ends: list[tuple[DataNode, DataNode]] = []  # each merged variable's node in each branch

    def value(self, name: str, before: Any, first: Any, second: Any) -> Any:
        """The variable after the ``if``, given its value before it and after each branch."""
        if first is second:
            return first
        if isinstance(first, Undefined) or isinstance(second, Undefined):
            if isinstance(first, Undefined) and isinstance(second, Undefined):
                return before
            return Undefined(name, BRANCHES[0] if isinstance(first, Undefined) else BRANCHES[1])
        if isinstance(first, DataNode) or isinstance(second, DataNode):
            return self._pending(name, first, second)
        if isinstance(first, (tuple, list)) and type(first) is type(second) and len(first) == len(second):
            items = [self.value(f"{name}[{i}]", before, a, b) for i, (a, b) in enumerate(zip(first, second))]
            return type(first)(*items) if hasattr(first, "_fields") else type(first)(items)
        if isinstance(first, dict) and isinstance(second, dict) and first.keys() == second.keys():
            return {key: self.value(f"{name}[{key!r}]", before, first[key], second[key]) for key in first}
        if _is_number(first) and _is_number(second):
            if type(first) is type(second) and not isinstance(first, np.ndarray) and first == second:
                return first
            return self._pending(name, first, second)
        if type(first) is type(second) and _equal(first, second):
            return first
        return Unmerged(name, self.where, first, second)

    def _pending(self, name: str, first: Any, second: Any) -> _Pending:
        if not isinstance(first, DataNode) and not isinstance(second, DataNode):  # numbers: one type for both
            first, second = _common_type(first, second)
        ends = []
        for graph, value in zip(self.graphs, (first, second)):
            with defining(graph):
                ends.append(graph.capture(value) if isinstance(value, DataNode) else _constant(value))
        self.names.append(name)
        self.ends.append((ends[0], ends[1]))
        return _Pending(len(self.ends) - 1)

    def place(self, graph: Graph, test: DataNode, logical: bool) -> dict[int, DataNode]:
        """One ``_conditional`` operator per device of the merged variables; their outputs by index."""
        placed: dict[int, DataNode] = {}
        for device in ("cpu", "gpu"):
            chosen = [i for i, ends in enumerate(self.ends) if _device(ends) == device]
            if chosen and logical and device == "gpu":
                raise PipelineDefinitionError(
                    f"{self.where}: an operand of `and`/`or` is on the GPU; logical expressions take truth values "
                    "computed on the CPU (as in DALI)"
                )
            if chosen:
                outputs = self._place(graph, test, logical, device, chosen)
                placed.update(zip(chosen, outputs))
        return placed

    def _place(self, graph: Graph, test: DataNode, logical: bool, device: str, chosen: list[int]) -> list[DataNode]:
        names = [self.names[i] for i in chosen]
        branches, outers = [], []
        for k, recorded in enumerate(self.graphs):
            outputs = [self.ends[i][k] for i in chosen]
            placeholders = Subgraph.needed_placeholders(recorded, outputs)
            label = f"{self.where}: the {BRANCHES[k]} branch"
            branches.append(Subgraph(label, recorded, placeholders, outputs, allow_whole_batch=True))
            outers.append([recorded.outer(p) for p in placeholders])
        sources: list[DataNode] = []
        for node in (node for each in outers for node in each):
            if not any(node is s for s in sources):
                sources.append(node)
        regular = [s for s in sources if device == "cpu" or s.device == "gpu"]
        host = [s for s in sources if not any(s is r for r in regular)]
        if len(host) > MAX_HOST_SOURCES:
            raise PipelineDefinitionError(
                f"{self.where}: the branches on the GPU read {len(host)} host values from before the `if`; at most "
                f"{MAX_HOST_SOURCES} are supported"
            )
        order = [*regular, *host]
        slots = [[next(j for j, s in enumerate(order) if s is node) for node in each] for each in outers]
        kwargs: dict[str, Any] = {
            "where": self.where,
            "branches": branches,
            "slots": slots,
            "names": names,
            "host_sources": len(host),
            "logical": logical,
            "predicate": test,
            **{f"host{i}": node for i, node in enumerate(host)},
        }
        return graph.add("_conditional", regular, kwargs, device=device)


def _device(ends: tuple[DataNode, DataNode]) -> str:
    return "gpu" if any(end.device == "gpu" for end in ends) else "cpu"


def _constant(value: Any) -> DataNode:
    """A Python number (or array) a branch assigns, as a ``constant`` operator there (as DALI does)."""
    from .types import Constant

    return Constant(np.asarray(value), device="cpu")


def _common_type(first: Any, second: Any) -> tuple[np.ndarray, np.ndarray]:
    """Two numbers (or arrays) as arrays of one type, the one ``types.Constant`` gives their common
    type (float32 for floats, int32 for Python ints)."""
    a, b = np.asarray(first), np.asarray(second)
    common = np.result_type(a, b)
    common = {np.dtype(np.float64): np.dtype(np.float32), np.dtype(np.int64): np.dtype(np.int32)}.get(common, common)
    return a.astype(common), b.astype(common)


def _is_number(value: Any) -> bool:
    return isinstance(value, (bool, int, float, np.number, np.bool_, np.ndarray))


def _equal(first: Any, second: Any) -> bool:
    try:
        return bool(first == second)
    except Exception:  # values whose == is not a truth value differ for this purpose
        return False


def _substitute(value: Any, outputs: dict[int, DataNode]) -> Any:
    """``value`` with each merged variable's place filled by its operator's output."""
    if isinstance(value, _Pending):
        return outputs[value.index]
    if isinstance(value, (tuple, list)):
        items = [_substitute(v, outputs) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    if isinstance(value, dict):
        return {key: _substitute(v, outputs) for key, v in value.items()}
    return value
