"""DALI's ``transforms``: an affine transform matrix per sample, for ``warp_affine`` and
``coord_transform``: ``translation``, ``scale``, ``rotation``, ``shear``, ``crop`` and ``combine``.

An ``n``-D transform is an ``n x (n + 1)`` float32 matrix ``[M | t]`` that maps a point ``x`` to
``M x + t``. Each operator but ``combine`` builds one from its arguments (per sample where they are
argument inputs) and, given a transform as its input, composes the two: its own transform applies
after the input's (``new @ input`` in homogeneous coordinates), or before it with
``reverse_order=True`` (``input @ new``). ``combine`` applies its inputs in the order listed (in
the reverse order with ``reverse_order``). A ``center`` moves the operation's fixed point there.

The arithmetic is DALI 2.4's, in float32 and in its order, so the matrices are DALI's bit for bit:
degrees become radians as ``degrees * float32(pi / 180)``; sines, cosines and tangents come from the
C library's ``sinf``, ``cosf`` and ``tanf``, the functions DALI calls (numpy's float32 ones round
differently in the last bit); each element of a product of matrices is summed term by term from
the first; a rotation's axis is divided by its float32 length; a centre ``c`` gives the
translation ``M (-c) + c``. As in DALI, a ``crop`` whose source range is empty gives infinities.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import math
from collections.abc import Collection, Sequence
from typing import Any, ClassVar

import numpy as np

from ..errors import ArgumentError
from ..operator import Operator, Schema, check_number, register
from .axes import float_list, is_int

_F32 = np.float32
#: DALI's ``deg2rad`` factor: ``M_PI / 180`` as a float
_DEG = _F32(math.pi / 180)
#: the most dimensions DALI's transforms have
_MAX_DIMS = 6

#: the layout of DALI's transform outputs: two axes, unnamed
_LAYOUT = "**"
#: a number or numbers argument: a constant (DALI's "float or list of float")
Numbers = float | Sequence[float] | np.ndarray
#: one sample's arguments by name: flat float32 values, None where not given
Values = dict[str, np.ndarray | None]


@functools.cache
def _libm() -> ctypes.CDLL | None:
    """The C math library (whose ``sinf``, ``cosf`` and ``tanf`` DALI calls), or None without one."""
    path = ctypes.util.find_library("m")
    if path is None:
        return None
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return None
    for name in ("sinf", "cosf", "tanf"):
        function = getattr(lib, name)
        function.argtypes, function.restype = [ctypes.c_float], ctypes.c_float
    return lib


def c_trig(name: str, radians: np.float32) -> np.float32:
    """``sin``, ``cos`` or ``tan`` of float32 ``radians`` as C's ``sinf``, ``cosf`` or ``tanf``
    gives it (DALI's value); without a C math library, the float64 value rounded (within an ulp)."""
    lib = _libm()
    if lib is None:
        return _F32(getattr(np, name)(np.float64(radians)))
    return _F32(getattr(lib, f"{name}f")(float(radians)))


def _compose(outer: np.ndarray, inner: np.ndarray) -> np.ndarray:
    """``outer @ inner`` of homogeneous float32 matrices (the transform applying ``inner``, then
    ``outer``), each element summed term by term from the first, as DALI's ``mat`` multiplies."""
    with np.errstate(invalid="ignore", over="ignore"):  # inf * 0 is NaN, as in DALI
        total = outer[:, :1] * inner[:1, :]
        for k in range(1, len(inner)):
            total = total + outer[:, k : k + 1] * inner[k : k + 1, :]
    return total


def _about(matrix: np.ndarray, center: np.ndarray) -> None:
    """Make ``matrix`` (a linear map, homogeneous) keep ``center`` fixed: its translation becomes
    ``M (-c) + c``, summed as DALI's matrix-vector product."""
    n = len(center)
    linear, negated = matrix[:n, :n], -center
    shift = linear[:, 0] * negated[0]
    for j in range(1, n):
        shift = shift + linear[:, j] * negated[j]
    matrix[:n, n] = shift + center


def _fit(op: str, name: str, values: np.ndarray, ndim: int) -> np.ndarray:
    """``values`` for an ``ndim``-D transform: ``ndim`` of them, or one repeated (as in DALI)."""
    if values.size == 1:
        return np.repeat(values, ndim)
    if values.size != ndim:
        raise ArgumentError(f"{op}: {name} needs {ndim} values (or one) for a {ndim}-D transform, got {values.size}")
    return values


def _check_dims(op: str, ndim: int, why: str) -> int:
    if not 1 <= ndim <= _MAX_DIMS:
        raise ArgumentError(f"{op}: {why} a {ndim}-D transform; DALI's transforms are 1-D to {_MAX_DIMS}-D")
    return ndim


def _static(op: str, name: str, value: Any) -> np.ndarray | None:
    """A constant argument's numbers as a flat float32 array (None when not given)."""
    return None if value is None else np.asarray(float_list(op, name, value), _F32)


def _sample_values(op: str, name: str, value: Any) -> np.ndarray:
    """A per-sample argument's numbers as a flat float32 array (DALI reads them as float32)."""
    array = np.asarray(value)
    if array.dtype.kind not in "iuf":
        raise ArgumentError(f"{op}: {name} must hold numbers, got an array of {array.dtype}")
    if array.ndim > 1 and name != "shear":  # DALI takes shear as a (ndim, ndim - 1) matrix too
        raise ArgumentError(f"{op}: {name} must be a number or a 1-D array per sample, got shape {array.shape}")
    return array.astype(_F32).reshape(-1)


def _transform(op: str, value: Any, what: str = "the input") -> np.ndarray:
    """An input transform (``n x (n + 1)``) as its homogeneous ``(n + 1)``-square float32 matrix."""
    array = np.asarray(value)
    if array.ndim != 2 or array.shape[1] != array.shape[0] + 1 or array.dtype.kind not in "iuf":
        raise ArgumentError(
            f"{op}: {what} must be an affine transform, a 2-D (ndim, ndim + 1) array of numbers; "
            f"got shape {array.shape} of {array.dtype}"
        )
    ndim = _check_dims(op, array.shape[0], f"{what} is")
    full = np.eye(ndim + 1, dtype=_F32)
    full[:ndim] = array
    return full


def _flag(op: str, name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ArgumentError(f"{op}: {name} must be a bool, got {value!r}")
    return bool(value)


class _Transform(Operator):
    """One affine transform per sample from the arguments (:meth:`matrix`), composed with the
    optional input transform. Subclasses set ``static`` (each argument's constant value, None when
    not given) in ``configure`` and call :meth:`_order`."""

    #: arguments that must be given, as constants or argument inputs
    required: ClassVar[tuple[str, ...]] = ()
    per_frame_inputs = frozenset({0})
    frames_from_arguments = True
    static: Values
    reverse_order: bool

    def _order(self, reverse_order: Any) -> None:
        self.reverse_order = _flag(self.schema.name, "reverse_order", reverse_order)

    def bind_inputs(self, count: int, arg_inputs: Collection[str]) -> None:
        """Required arguments present; with no argument per sample, the transform built now, so
        that bad constant arguments fail the build."""
        for name in self.required:
            if self.static[name] is None and name not in arg_inputs:
                raise ArgumentError(f"{self.schema.name}: {name} is required")
        if not arg_inputs and not (count and self.ndim_from_input()):
            self.matrix(self.static, None)

    def ndim_from_input(self) -> bool:
        """Whether the input transform, when there is one, decides the number of dimensions."""
        return False

    def matrix(self, values: Values, input_ndim: int | None) -> np.ndarray:
        """The homogeneous ``(n + 1)``-square float32 transform of one sample's argument ``values``
        (``input_ndim``: the input transform's dimensions, None without one)."""
        raise NotImplementedError

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        return _LAYOUT

    def compute(self, xp, inputs, args, ctx):
        op = self.schema.name
        values = dict(self.static)
        values.update({name: _sample_values(op, name, value) for name, value in args.items()})
        given = _transform(op, inputs[0]) if inputs else None
        new = self.matrix(values, None if given is None else len(given) - 1)
        if given is not None:
            if len(given) != len(new):
                raise ArgumentError(
                    f"{op}: the input is a {len(given) - 1}-D transform but the arguments give a {len(new) - 1}-D one"
                )
            new = _compose(given, new) if self.reverse_order else _compose(new, given)
        return np.ascontiguousarray(new[:-1])


@register
class Translation(_Transform):
    """A translation by ``offset`` (its length is the number of dimensions, 1 to 6)."""

    schema = Schema("transforms.translation", devices=("cpu",), min_inputs=0, max_inputs=1, arg_inputs=("offset",))
    per_frame_args = frozenset({"offset"})
    required = ("offset",)

    def configure(self, offset: Numbers | None = None, reverse_order: bool = False) -> None:
        self.static = {"offset": _static(self.schema.name, "offset", offset)}
        self._order(reverse_order)

    def matrix(self, values: Values, input_ndim: int | None) -> np.ndarray:
        offset = values["offset"]
        ndim = _check_dims(self.schema.name, offset.size, f"offset of {offset.size} values gives")
        matrix = np.eye(ndim + 1, dtype=_F32)
        matrix[:ndim, ndim] = offset
        return matrix


@register
class Scale(_Transform):
    """A scaling by ``scale`` (one factor per dimension) about ``center`` (the origin by default).
    One factor scales every dimension: of the input transform, else ``ndim`` of them, else one."""

    schema = Schema("transforms.scale", devices=("cpu",), min_inputs=0, max_inputs=1, arg_inputs=("scale", "center"))
    per_frame_args = frozenset({"scale", "center"})
    required = ("scale",)

    def configure(
        self,
        scale: Numbers | None = None,
        center: Numbers | None = None,
        ndim: int | None = None,
        reverse_order: bool = False,
    ) -> None:
        op = self.schema.name
        if ndim is not None and not (is_int(ndim) and 1 <= ndim <= _MAX_DIMS):
            raise ArgumentError(f"{op}: ndim must be an int from 1 to {_MAX_DIMS}, got {ndim!r}")
        self.ndim = None if ndim is None else int(ndim)
        self.static = {"scale": _static(op, "scale", scale), "center": _static(op, "center", center)}
        self._order(reverse_order)

    def ndim_from_input(self) -> bool:
        scale = self.static["scale"]
        return scale is None or scale.size == 1

    def matrix(self, values: Values, input_ndim: int | None) -> np.ndarray:
        op, scale, center = self.schema.name, values["scale"], values["center"]
        if scale.size == 0:
            raise ArgumentError(f"{op}: scale needs at least one value")
        ndim = scale.size if scale.size > 1 else input_ndim or self.ndim or 1
        if self.ndim is not None and self.ndim != ndim:
            source = f"scale has {scale.size} values" if scale.size > 1 else f"the input is a {ndim}-D transform"
            raise ArgumentError(f"{op}: ndim={self.ndim} contradicts the transform's dimensions ({source})")
        scale = _fit(op, "scale", scale, _check_dims(op, ndim, "scale gives"))
        matrix = np.diag(np.append(scale, _F32(1)))
        if center is not None:
            matrix[:ndim, ndim] = _fit(op, "center", center, ndim) * (_F32(1) - scale)
        return matrix


@register
class Rotation(_Transform):
    """A rotation by ``angle`` degrees (2-D: ``[[cos, -sin], [sin, cos]]``) about ``center`` (the
    origin by default); 3-D, about ``axis`` (of any non-zero length), when ``axis`` is given."""

    schema = Schema(
        "transforms.rotation", devices=("cpu",), min_inputs=0, max_inputs=1, arg_inputs=("angle", "axis", "center")
    )
    per_frame_args = frozenset({"angle", "axis", "center"})
    required = ("angle",)

    def configure(
        self,
        angle: float | None = None,
        axis: Numbers | None = None,
        center: Numbers | None = None,
        reverse_order: bool = False,
    ) -> None:
        op = self.schema.name
        angle = None if angle is None else np.asarray([check_number(op, "angle", angle)], _F32)
        self.static = {"angle": angle, "axis": _static(op, "axis", axis), "center": _static(op, "center", center)}
        self._order(reverse_order)

    def bind_inputs(self, count: int, arg_inputs: Collection[str]) -> None:
        super().bind_inputs(count, arg_inputs)
        ndim = 3 if self.static["axis"] is not None or "axis" in arg_inputs else 2
        for name in ("axis", "center"):  # constant ones checked now, whatever comes per sample
            if self.static[name] is not None:
                _fit(self.schema.name, name, self.static[name], 3 if name == "axis" else ndim)

    def matrix(self, values: Values, input_ndim: int | None) -> np.ndarray:
        op, angle = self.schema.name, values["angle"]
        if angle.size != 1:
            raise ArgumentError(f"{op}: angle must be one number, got {angle.size}")
        radians = angle[0] * _DEG
        if values["axis"] is None:
            ndim = 2
            cos, sin = c_trig("cos", radians), c_trig("sin", radians)
            matrix = np.array([[cos, -sin, 0], [sin, cos, 0], [0, 0, 1]], _F32)
        else:
            ndim = 3
            matrix = _rotation_3d(op, _fit(op, "axis", values["axis"], 3), radians)
        if values["center"] is not None:
            _about(matrix, _fit(op, "center", values["center"], ndim))
        return matrix


def _rotation_3d(op: str, axis: np.ndarray, radians: np.float32) -> np.ndarray:
    """The rotation by ``radians`` about ``axis`` (Rodrigues' formula), as DALI's ``rotation3D``
    evaluates it in float32."""
    u, v, w = axis
    length = np.sqrt(u * u + v * v + w * w)
    if length == 0:
        raise ArgumentError(f"{op}: axis must have a non-zero length, got {axis.tolist()}")
    if radians == 0:
        return np.eye(4, dtype=_F32)
    cos, sin = c_trig("cos", radians), c_trig("sin", radians)
    u, v, w = u / length, v / length, w / length
    uu, vv, ww, uv, uw, vw = u * u, v * v, w * w, u * v, u * w, v * w
    rest = _F32(1) - cos
    return np.array(
        [
            [uu + (vv + ww) * cos, uv * rest - w * sin, uw * rest + v * sin, 0],
            [uv * rest + w * sin, vv + (uu + ww) * cos, vw * rest - u * sin, 0],
            [uw * rest - v * sin, vw * rest + u * sin, ww + (uu + vv) * cos, 0],
            [0, 0, 0, 1],
        ],
        _F32,
    )


@register
class Shear(_Transform):
    """A shear about ``center`` (the origin by default) by ``shear`` factors, or by ``angles`` in
    degrees (factor ``tan(angle)``, angles within [-90, 90]): two (``x`` along ``y``, ``y`` along
    ``x``) for 2-D, six (``xy, xz, yx, yz, zx, zy``, or a 3x2 array) for 3-D."""

    schema = Schema(
        "transforms.shear", devices=("cpu",), min_inputs=0, max_inputs=1, arg_inputs=("shear", "angles", "center")
    )
    per_frame_args = frozenset({"shear", "angles", "center"})

    def configure(
        self,
        shear: Numbers | None = None,
        angles: Numbers | None = None,
        center: Numbers | None = None,
        reverse_order: bool = False,
    ) -> None:
        op = self.schema.name
        self.static = {
            "shear": _static(op, "shear", shear),
            "angles": _static(op, "angles", angles),
            "center": _static(op, "center", center),
        }
        self._order(reverse_order)

    def bind_inputs(self, count: int, arg_inputs: Collection[str]) -> None:
        given = [name for name in ("shear", "angles") if self.static[name] is not None or name in arg_inputs]
        if len(given) != 1:
            raise ArgumentError(f"{self.schema.name}: give one of shear and angles, got {given or 'neither'}")
        super().bind_inputs(count, arg_inputs)

    def matrix(self, values: Values, input_ndim: int | None) -> np.ndarray:
        op = self.schema.name
        if values["shear"] is not None:
            name, factors = "shear", values["shear"]
        else:
            name, angles = "angles", values["angles"]
            outside = angles[(angles < -90) | (angles > 90) | np.isnan(angles)]
            if outside.size:
                raise ArgumentError(f"{op}: angles must be within [-90, 90] degrees, got {outside[0]}")
            factors = np.array([c_trig("tan", a * _DEG) for a in angles], _F32)
        if factors.size == 2:
            (sx, sy), ndim = factors, 2
            matrix = np.array([[1, sx, 0], [sy, 1, 0], [0, 0, 1]], _F32)
        elif factors.size == 6:
            (xy, xz, yx, yz, zx, zy), ndim = factors, 3
            matrix = np.array([[1, xy, xz, 0], [yx, 1, yz, 0], [zx, zy, 1, 0], [0, 0, 0, 1]], _F32)
        else:
            raise ArgumentError(f"{op}: {name} needs 2 values (2-D) or 6 (3-D), got {factors.size}")
        if values["center"] is not None:
            _about(matrix, _fit(op, "center", values["center"], ndim))
        return matrix


@register
class Crop(_Transform):
    """The transform mapping the box ``[from_start, from_end]`` onto ``[to_start, to_end]`` (each
    end one value per dimension, or one for all; by default the unit box); ``absolute`` first
    orders each pair of ends. Its number of dimensions is the longest end's."""

    _ENDS = ("from_start", "from_end", "to_start", "to_end")
    schema = Schema("transforms.crop", devices=("cpu",), min_inputs=0, max_inputs=1, arg_inputs=_ENDS)
    per_frame_args = frozenset(_ENDS)

    def configure(
        self,
        from_start: Numbers | None = None,
        from_end: Numbers | None = None,
        to_start: Numbers | None = None,
        to_end: Numbers | None = None,
        absolute: bool = False,
        reverse_order: bool = False,
    ) -> None:
        op = self.schema.name
        given = {"from_start": from_start, "from_end": from_end, "to_start": to_start, "to_end": to_end}
        defaults = {"from_start": 0.0, "from_end": 1.0, "to_start": 0.0, "to_end": 1.0}
        self.static = {
            name: _static(op, name, defaults[name] if value is None else value) for name, value in given.items()
        }
        self.absolute = _flag(op, "absolute", absolute)
        self._order(reverse_order)

    def matrix(self, values: Values, input_ndim: int | None) -> np.ndarray:
        op = self.schema.name
        ndim = max(values[name].size for name in self._ENDS)
        wrong = [f"{name} ({values[name].size})" for name in self._ENDS if values[name].size not in (1, ndim)]
        if wrong:
            raise ArgumentError(
                f"{op}: each end needs {ndim} values (the longest end's) or one; got {', '.join(wrong)}"
            )
        _check_dims(op, ndim, "the ends give")
        from_start, from_end, to_start, to_end = (np.broadcast_to(values[name], ndim) for name in self._ENDS)
        if self.absolute:
            from_start, from_end = np.minimum(from_start, from_end), np.maximum(from_start, from_end)
            to_start, to_end = np.minimum(to_start, to_end), np.maximum(to_start, to_end)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # an empty source range: inf, as DALI
            scale = (to_end - to_start) / (from_end - from_start)
            shift = to_start - scale * from_start
        matrix = np.diag(np.append(scale, _F32(1)))
        matrix[:ndim, ndim] = shift
        return matrix


@register
class Combine(Operator):
    """The transform applying its inputs (2 to 99 transforms of the same shape) in the order
    listed, or in the reverse order with ``reverse_order``."""

    schema = Schema("transforms.combine", devices=("cpu",), min_inputs=2, max_inputs=99)
    per_frame_inputs = frozenset(range(99))
    frames_from_arguments = True

    def configure(self, reverse_order: bool = False) -> None:
        self.reverse_order = _flag(self.schema.name, "reverse_order", reverse_order)

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        return _LAYOUT

    def compute(self, xp, inputs, args, ctx):
        op = self.schema.name
        matrices = [_transform(op, value, f"input {k}") for k, value in enumerate(inputs)]
        shapes = {len(m) for m in matrices}
        if len(shapes) > 1:
            dims = ", ".join(f"{len(m) - 1}-D" for m in matrices)
            raise ArgumentError(f"{op}: the inputs must be transforms of the same dimensions, got {dims}")
        combined = matrices[0]
        for matrix in matrices[1:]:
            combined = _compose(combined, matrix) if self.reverse_order else _compose(matrix, combined)
        return np.ascontiguousarray(combined[:-1])
