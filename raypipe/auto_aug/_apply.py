"""Place a policy: its augmentations traced as subgraphs behind one ``_augment_select`` operator."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..graph import DataNode, current_graph
from ..subgraph import Subgraph, first_subgraph_id
from .core import Augmentation


def apply(
    policy: str,
    augmentations: Sequence[Augmentation],
    selector: Any,
    data: DataNode,
    num_magnitude_bins: int | None,
    kwargs: dict[str, Any],
    seed: int | None,
    uint8: bool = False,
) -> DataNode:
    """``data`` through ``augmentations`` as ``selector`` picks them per sample; ``kwargs`` go to
    each augmentation that takes them (``shape``, ``fill_value``, ``interp_type``). ``uint8``: the
    samples must be uint8 (the built-in suites)."""
    if not isinstance(data, DataNode):
        raise ArgumentError(f"{policy}: data must be the output of an operator (a batch of images), got {data!r}")
    if not augmentations:
        raise ArgumentError(f"{policy}: the list of augmentations is empty")
    _check_kwargs(policy, augmentations, kwargs)
    graph = current_graph(policy)
    first_id = first_subgraph_id(graph)
    shape = kwargs.get("shape")
    subgraphs, tables = [], []
    for i, aug in enumerate(augmentations):
        table = aug.parameter_table(num_magnitude_bins)
        param_device = data.device if aug.param_device == "auto" else aug.param_device
        if data.device == "cpu":
            param_device = "cpu"
        accepted = {p.name for p in aug.extra_arguments()}
        given = {k: v for k, v in kwargs.items() if k in accepted}
        subgraphs.append(
            Subgraph.trace(
                f"{policy}: augmentation {aug.name!r}",
                _traced(aug, table is not None, given, isinstance(shape, DataNode)),
                [data.device, param_device, "cpu"],
                {},
                first_id=first_id + i * 1024,
            )
        )
        tables.append(table)
    op_kwargs: dict[str, Any] = {
        "policy": policy,
        "augmentations": subgraphs,
        "tables": tables,
        "selector": selector,
        "uint8": uint8,
    }
    if seed is not None:
        op_kwargs["seed"] = seed
    if isinstance(shape, DataNode):
        op_kwargs["shape"] = shape
    return graph.add("_augment_select", [data], op_kwargs, device=data.device)[0]


def _traced(aug: Augmentation, has_param: bool, given: dict[str, Any], shape_per_sample: bool):
    """The function a subgraph traces: the augmentation on the placeholders (data, parameter, shape)."""

    def traced(data: DataNode, parameter: DataNode, shape: DataNode) -> DataNode:
        extra = dict(given)
        if shape_per_sample and "shape" in extra:
            extra["shape"] = shape
        return aug.op(data, parameter if has_param else None, **extra)

    traced.__name__ = aug.name
    return traced


def _check_kwargs(policy: str, augmentations: Sequence[Augmentation], kwargs: dict[str, Any]) -> None:
    """Every keyword argument is taken by some augmentation, and every augmentation gets the
    arguments it needs (``shape`` for the translations relative to the image size)."""
    taken = {p.name for aug in augmentations for p in aug.extra_arguments()}
    unused = sorted(set(kwargs) - taken)
    if unused:
        raise ArgumentError(
            f"{policy}: no augmentation takes the argument(s) {unused} (they take: {sorted(taken) or 'nothing'})"
        )
    for aug in augmentations:
        missing = [
            p.name
            for p in aug.extra_arguments()
            if p.default is inspect.Parameter.empty
            and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
            and p.name not in kwargs
        ]
        if missing == ["shape"]:
            raise ArgumentError(
                f"{policy}: augmentation {aug.name!r} needs the images' shape: pass shape=(H, W) or "
                "shape=fn.peek_image_shape(jpegs), or use the suite without shapes (translations by pixels)"
            )
        if missing:
            raise ArgumentError(f"{policy}: augmentation {aug.name!r} needs the argument(s) {missing}")


def check_positive(policy: str, name: str, value: Any) -> int:
    """``value`` as a positive int; ArgumentError naming it otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ArgumentError(f"{policy}: {name} must be a positive int, got {value!r}")
    return int(value)
