"""The operator contract and the registry that ``fn`` and ``ops`` are built from.

An operator runs per sample on the host (CPU stage, and the host part of
"mixed" decoders) through :meth:`Operator.run_sample`, and per batch in the GPU
stage through :meth:`Operator.run_batch`. Most operators implement only
:meth:`Operator.compute`, written against an array module ``xp`` (numpy or
cupy), which serves both stages; an operator may override ``run_sample`` with a
faster host implementation (Pillow) as long as it matches ``compute`` within its
stated tolerance.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, ClassVar

import numpy as np

from .errors import ArgumentError
from .keyed_random import SampleContext

DEVICES = ("cpu", "mixed", "gpu")
STAGE_ORDER = {"cpu": 0, "mixed": 1, "gpu": 2}


class Skip:
    """Returned by ``run_sample`` to drop a sample (decoders with ``on_error="skip"``)."""

    def __init__(self, reason: str):
        self.reason = reason


@dataclass(frozen=True)
class Schema:
    """What an operator is called, where it may run and how it is wired."""

    name: str
    devices: tuple[str, ...] = ("cpu", "gpu")
    min_inputs: int = 1
    max_inputs: int = 1
    num_outputs: int = 1
    arg_inputs: tuple[str, ...] = ()
    is_reader: bool = False


_REGISTRY: dict[str, type[Operator]] = {}


def register(cls: type[Operator]) -> type[Operator]:
    """Class decorator: make an operator reachable as ``fn.<name>`` and ``ops.<Name>``."""
    _REGISTRY[cls.schema.name] = cls
    return cls


def registry() -> dict[str, type[Operator]]:
    """Every registered operator by dotted name (``"decoders.image"``)."""
    from . import operators  # noqa: F401  (registers the built-in operators)

    return _REGISTRY


class Operator:
    """Base class of every operator. Subclasses set ``schema`` and ``configure``."""

    schema: ClassVar[Schema]

    def __init__(self, device: str, op_id: int, **kwargs: Any):
        self.device = device
        self.op_id = op_id
        try:
            self.configure(**kwargs)
        except TypeError as exc:
            raise ArgumentError(f"{self.schema.name}: {exc}") from None

    def configure(self) -> None:
        """Validate and store the operator's static arguments (raise ArgumentError)."""

    @property
    def num_outputs(self) -> int:
        """Outputs of this instance (the schema's, unless they depend on the arguments)."""
        return len(self.output_names) if self.output_names is not None else self.schema.num_outputs

    #: Names of the outputs when ``fn``/``ops`` return them as a dict (TFRecord features); else None.
    output_names: tuple[str, ...] | None = None

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        """Layout of the first output given the inputs' layouts."""
        return input_layouts[0] if input_layouts else ""

    def compute(self, xp: ModuleType, inputs: Sequence[Any], args: dict[str, Any], ctx: SampleContext) -> Any:
        """One sample, written against the array module ``xp``."""
        raise NotImplementedError(f"{self.schema.name} has no array-module implementation")

    def run_sample(self, inputs: Sequence[Any], args: dict[str, Any], ctx: SampleContext) -> Any:
        """One sample on the host (CPU stage)."""
        return self.compute(np, inputs, args, ctx)

    def run_batch(
        self,
        xp: ModuleType,
        inputs: Sequence[list[Any]],
        args: dict[str, list[Any]],
        ctxs: Sequence[SampleContext],
    ) -> list[Any] | tuple[list[Any], ...]:
        """One batch in the GPU stage. Each input is a sequence of per-sample device arrays (a
        list, or one array holding the whole batch); return the same for each output."""
        outs = [
            self.compute(xp, [inp[i] for inp in inputs], {k: v[i] for k, v in args.items()}, ctx)
            for i, ctx in enumerate(ctxs)
        ]
        if self.num_outputs == 1:
            return outs
        return tuple([o[k] for o in outs] for k in range(self.num_outputs))

    def rng(self, ctx: SampleContext) -> np.random.Generator:
        """This operator's random stream for the sample in ``ctx``."""
        return ctx.rng(self.op_id)


def check_range(op: str, name: str, value: Sequence[float], low: float | None = None) -> tuple:
    """Validate a ``[lo, hi]`` argument; return it as a tuple of floats."""
    try:
        lo, hi = (float(v) for v in value)
    except (TypeError, ValueError):
        raise ArgumentError(f"{op}: {name} must be a pair [lo, hi], got {value!r}") from None
    if lo > hi or (low is not None and lo < low):
        bound = f" with lo >= {low}" if low is not None else ""
        raise ArgumentError(f"{op}: {name} must satisfy lo <= hi{bound}, got {value!r}")
    return lo, hi


def check_number(op: str, name: str, value: Any) -> float:
    """A finite float argument; ArgumentError naming the operator and argument otherwise."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ArgumentError(f"{op}: {name} must be a number, got {value!r}") from None
    if not math.isfinite(number):
        raise ArgumentError(f"{op}: {name} must be finite, got {value!r}")
    return number


def as_scalar(value: Any) -> Any:
    """A per-sample argument value (0-d or 1-element array, or a Python scalar) as a scalar."""
    if isinstance(value, np.ndarray):
        return value.reshape(-1)[0].item()
    return value
