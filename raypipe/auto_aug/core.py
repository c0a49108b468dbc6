"""Augmentations and policies: DALI's ``nvidia.dali.auto_aug.core``.

An :class:`Augmentation` is a function of a batch and a parameter written with ``fn`` operators
(``@augmentation``), with the range of magnitudes its parameter is drawn from: ``num_magnitude_bins``
evenly spaced magnitudes from ``mag_range``, each negated at random where ``randomly_negate``, and
mapped to the parameter by ``mag_to_param`` (numpy, computed once for every bin). A :class:`Policy`
is AutoAugment's list of sub-policies. The policies (:mod:`.auto_augment`, :mod:`.rand_augment`,
:mod:`.trivial_augment`) place one operator that applies, per sample, the augmentations it draws
(:mod:`raypipe.operators.augment_select`): DALI does that with conditional execution
(``enable_conditionals=True``), which raypipe does not need for it.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..graph import DataNode

_UNSET: Any = object()


def _as_array(magnitude: Any) -> np.ndarray:
    return np.array(magnitude)


class Augmentation:
    """A transformation for automatic augmentation policies; made by :func:`augmentation`."""

    def __init__(
        self,
        op: Callable[..., DataNode],
        mag_range: tuple[float, float] | np.ndarray | None = None,
        randomly_negate: bool | None = None,
        mag_to_param: Callable[[Any], Any] | None = None,
        param_device: str | None = None,
        name: str | None = None,
    ):
        self._op = op
        self._mag_range = mag_range
        self._randomly_negate = randomly_negate
        self._mag_to_param = mag_to_param
        self._param_device = param_device
        self._name = name
        required = _parameters(op)[:2]
        if len(required) < 2:
            raise ArgumentError(
                f"augmentation {self.name!r}: the function must take the batch and the parameter as its first two "
                f"positional arguments (def {op.__name__}(data, parameter, ...)), got {inspect.signature(op)}"
            )
        if param_device not in (None, "cpu", "gpu", "auto"):
            raise ArgumentError(
                f"augmentation {self.name!r}: param_device must be 'cpu', 'gpu' or 'auto', got {param_device!r}"
            )

    @property
    def op(self) -> Callable[..., DataNode]:
        return self._op

    @property
    def mag_range(self) -> tuple[float, float] | np.ndarray | None:
        return self._mag_range

    @property
    def mag_to_param(self) -> Callable[[Any], Any]:
        return self._mag_to_param or _as_array

    @property
    def randomly_negate(self) -> bool:
        return bool(self._randomly_negate)

    @property
    def param_device(self) -> str:
        return self._param_device or "cpu"

    @property
    def name(self) -> str:
        return self._name or self._op.__name__

    def __repr__(self) -> str:
        config = {k: v for k, v in self._config().items() if v is not None}
        return f"Augmentation({', '.join([repr(self._op), *(f'{k}={v!r}' for k, v in config.items())])})"

    def _config(self) -> dict[str, Any]:
        return {
            "mag_range": self._mag_range,
            "randomly_negate": self._randomly_negate,
            "mag_to_param": self._mag_to_param,
            "param_device": self._param_device,
            "name": self._name,
        }

    def augmentation(
        self,
        mag_range: Any = _UNSET,
        randomly_negate: Any = _UNSET,
        mag_to_param: Any = _UNSET,
        param_device: Any = _UNSET,
        name: Any = _UNSET,
        augmentation_cls: type[Augmentation] | None = None,
    ) -> Augmentation:
        """The same function with some of its settings replaced (the rest kept)."""
        config = self._config()
        given = dict(
            mag_range=mag_range,
            randomly_negate=randomly_negate,
            mag_to_param=mag_to_param,
            param_device=param_device,
            name=name,
        )
        config.update({k: v for k, v in given.items() if v is not _UNSET})
        return (augmentation_cls or type(self))(self._op, **config)

    def magnitudes(self, num_magnitude_bins: int | None) -> np.ndarray | None:
        """The magnitude of each bin (None without a ``mag_range``)."""
        if self._mag_range is None:
            return None
        if isinstance(self._mag_range, np.ndarray):
            if num_magnitude_bins is not None and len(self._mag_range) != num_magnitude_bins:
                raise ArgumentError(
                    f"augmentation {self.name!r}: mag_range holds {len(self._mag_range)} magnitudes, "
                    f"num_magnitude_bins is {num_magnitude_bins}"
                )
            return self._mag_range
        if num_magnitude_bins is None:
            raise ArgumentError(f"augmentation {self.name!r} has a mag_range: give num_magnitude_bins")
        if not hasattr(self._mag_range, "__len__") or len(self._mag_range) != 2:
            raise ArgumentError(
                f"augmentation {self.name!r}: mag_range must be (low, high) or an array of magnitudes, "
                f"got {self._mag_range!r}"
            )
        low, high = self._mag_range
        return np.linspace(low, high, num_magnitude_bins, dtype=np.float32)

    def parameter_table(self, num_magnitude_bins: int | None) -> np.ndarray | None:
        """The parameter of each bin, or of each signed bin (row ``2 * bin + sign``, sign 1 negated)
        when the magnitude is negated at random; None without a ``mag_range``."""
        magnitudes = self.magnitudes(num_magnitude_bins)
        if magnitudes is None:
            return None
        if self.randomly_negate:
            magnitudes = np.stack([magnitudes, -magnitudes], axis=1).reshape(-1)
        params = []
        for magnitude in magnitudes:
            param = self.mag_to_param(magnitude)
            if isinstance(param, DataNode) or (
                isinstance(param, (list, tuple)) and any(isinstance(p, DataNode) for p in param)
            ):
                raise ArgumentError(
                    f"augmentation {self.name!r}: mag_to_param returned pipeline data; it must return numpy "
                    "values (move the operators into the augmentation's function)"
                )
            params.append(np.array(param))
        first = params[0]
        for param, magnitude in zip(params, magnitudes):
            if param.shape != first.shape or param.dtype != first.dtype:
                raise ArgumentError(
                    f"augmentation {self.name!r}: mag_to_param must return arrays of one shape and type; got "
                    f"{first.shape} {first.dtype} for magnitude {magnitudes[0]} and {param.shape} {param.dtype} "
                    f"for {magnitude}"
                )
        table = np.stack(params)
        table.flags.writeable = False
        return table

    def extra_arguments(self) -> list[inspect.Parameter]:
        """The function's arguments after the batch and the parameter."""
        return _parameters(self._op)[2:]

    def __call__(
        self,
        data: DataNode,
        *,
        magnitude_bin: int | None = None,
        num_magnitude_bins: int | None = None,
        seed: int | None = None,
        **kwargs: Any,
    ) -> DataNode:
        """The augmentation applied to every sample of ``data`` with the magnitude of bin
        ``magnitude_bin`` (negated at random per sample where ``randomly_negate``)."""
        from ..augment_plan import Fixed
        from . import _apply

        if isinstance(magnitude_bin, DataNode):
            raise ArgumentError(
                f"augmentation {self.name!r}: magnitude_bin must be an int here (a bin per sample comes from the "
                "policies: rand_augment, trivial_augment, auto_augment)"
            )
        if self._mag_range is not None:
            if magnitude_bin is None:
                raise ArgumentError(f"augmentation {self.name!r} has a mag_range: give magnitude_bin")
            _check_bin(
                self.name,
                magnitude_bin,
                num_magnitude_bins if num_magnitude_bins is not None else len(self.magnitudes(None)),
            )
        selector = Fixed(int(magnitude_bin or 0), self.randomly_negate)
        return _apply.apply(self.name, [self], selector, data, num_magnitude_bins, kwargs, seed)


def _check_bin(name: str, magnitude_bin: Any, num_magnitude_bins: int) -> None:
    if isinstance(magnitude_bin, bool) or not isinstance(magnitude_bin, (int, np.integer)):
        raise ArgumentError(f"{name}: magnitude_bin must be an int, got {magnitude_bin!r}")
    if not 0 <= magnitude_bin < num_magnitude_bins:
        raise ArgumentError(f"{name}: magnitude_bin must be in [0, {num_magnitude_bins - 1}], got {magnitude_bin}")


def _parameters(function: Callable[..., Any]) -> list[inspect.Parameter]:
    try:
        return list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return []


def augmentation(
    function: Callable[..., DataNode] | None = None,
    *,
    mag_range: tuple[float, float] | np.ndarray | None = None,
    randomly_negate: bool | None = None,
    mag_to_param: Callable[[Any], Any] | None = None,
    param_device: str | None = None,
    name: str | None = None,
    augmentation_cls: type[Augmentation] | None = None,
) -> Any:
    """Decorator: ``function(data, parameter, **extra)``, written with ``fn`` operators, as an
    :class:`Augmentation` (DALI's ``@augmentation``)."""

    def decorate(f: Callable[..., DataNode]) -> Augmentation:
        if isinstance(f, Augmentation):
            raise ArgumentError(
                f"@augmentation was applied to the augmentation {f.name!r}: call {f.name}.augmentation(...) "
                "to change its settings"
            )
        if not callable(f):
            raise ArgumentError(f"@augmentation decorates a function, got {f!r}")
        return (augmentation_cls or Augmentation)(
            f,
            mag_range=mag_range,
            randomly_negate=randomly_negate,
            mag_to_param=mag_to_param,
            param_device=param_device,
            name=name,
        )

    return decorate if function is None else decorate(function)


class Policy:
    """AutoAugment's policy: ``sub_policies``, each a list of ``(augmentation, probability,
    magnitude_bin)`` stages (``magnitude_bin`` None for an augmentation without a magnitude)."""

    def __init__(
        self,
        name: str,
        num_magnitude_bins: int,
        sub_policies: Sequence[Sequence[tuple[Augmentation, float, int | None]]],
    ):
        if isinstance(num_magnitude_bins, bool) or not isinstance(num_magnitude_bins, int) or num_magnitude_bins < 1:
            raise ArgumentError(
                f"Policy {name!r}: num_magnitude_bins must be a positive int, got {num_magnitude_bins!r}"
            )
        if not isinstance(sub_policies, (list, tuple)):
            raise ArgumentError(
                f"Policy {name!r}: sub_policies must be a list of sub-policies, got {type(sub_policies)}"
            )
        for sub_policy in sub_policies:
            if not isinstance(sub_policy, (list, tuple)):
                raise ArgumentError(f"Policy {name!r}: each sub-policy must be a list, got {sub_policy!r}")
            for stage in sub_policy:
                _check_stage(name, num_magnitude_bins, stage)
        self.name = name
        self.num_magnitude_bins = num_magnitude_bins
        self.sub_policies = _unique_names(sub_policies)

    @property
    def augmentations(self) -> dict[str, Augmentation]:
        """Every augmentation of the policy, by name."""
        unique = {aug for sub_policy in self.sub_policies for aug, _, _ in sub_policy}
        return {aug.name: aug for aug in sorted(unique, key=lambda aug: aug.name)}

    def __repr__(self) -> str:
        stages = ",\n\t".join(repr([(aug.name, p, b) for aug, p, b in sub]) for sub in self.sub_policies)
        return f"Policy(name={self.name!r}, num_magnitude_bins={self.num_magnitude_bins}, sub_policies=[\n\t{stages}])"


def _check_stage(policy: str, num_bins: int, stage: Any) -> None:
    if not isinstance(stage, (list, tuple)) or len(stage) != 3:
        raise ArgumentError(
            f"Policy {policy!r}: each stage is (augmentation, probability, magnitude_bin), got {stage!r}"
        )
    aug, p, magnitude_bin = stage
    if not isinstance(aug, Augmentation):
        raise ArgumentError(f"Policy {policy!r}: {aug!r} is not an Augmentation (decorate it with @augmentation)")
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 1:
        raise ArgumentError(f"Policy {policy!r}: the probability of {aug.name!r} must be in [0, 1], got {p!r}")
    if p == 0:
        warnings.warn(f"Policy {policy!r}: {aug.name!r} has probability 0 in a sub-policy", stacklevel=4)
    if magnitude_bin is None:
        if aug.mag_range is not None:
            raise ArgumentError(f"Policy {policy!r}: {aug.name!r} has a mag_range, so its stages need a magnitude bin")
        return
    if aug.mag_range is None:
        warnings.warn(
            f"Policy {policy!r}: {aug.name!r} takes no magnitude; its bin {magnitude_bin} is ignored (write None)",
            stacklevel=4,
        )
    _check_bin(f"Policy {policy!r}: {aug.name!r}", magnitude_bin, num_bins)


def _unique_names(sub_policies: Sequence[Sequence[tuple]]) -> tuple[tuple[tuple, ...], ...]:
    """The sub-policies, with distinct augmentations of one name renamed ``NN__name``."""
    ordered = list(dict.fromkeys(aug for sub in sub_policies for aug, _, _ in sub))
    if len({aug.name for aug in ordered}) == len(ordered):
        return tuple(tuple(sub) for sub in sub_policies)
    digits = len(str(len(ordered) - 1))
    renamed = {aug: aug.augmentation(name=f"{str(i).zfill(digits)}__{aug.name}") for i, aug in enumerate(ordered)}
    return tuple(tuple((renamed[aug], p, b) for aug, p, b in sub) for sub in sub_policies)


def select(ops: Sequence[Augmentation], selected_op_idx: DataNode, *op_args: Any, **op_kwargs: Any) -> DataNode:
    """DALI's ``select``, its building block for policies written with ``if`` on per-sample
    magnitude bins, is not here: the policies here choose per sample themselves."""
    raise ArgumentError(
        "auto_aug.core.select is not supported by raypipe; pass your augmentations to "
        "rand_augment.apply_rand_augment, trivial_augment.apply_trivial_augment or auto_augment.apply_auto_augment "
        "(a Policy) instead, or choose with `if` on pipeline data in a @pipeline_def(enable_conditionals=True) "
        "function, calling each augmentation with a fixed magnitude_bin"
    )


def signed_bin(
    magnitude_bin: Any, random_sign: DataNode | None = None, seed: int | None = None, shape: Any = None
) -> Any:
    """DALI's ``signed_bin`` feeds ``select`` (not here); the policies here draw signs themselves."""
    raise ArgumentError(
        "auto_aug.core.signed_bin feeds core.select, which raypipe does not support: the policies draw each "
        "magnitude's sign themselves"
    )


_Augmentation = Augmentation
