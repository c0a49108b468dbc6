"""transforms.*: translation, scale, rotation, shear, crop and combine against DALI 2.4's CPU
operators (2-D and 3-D, with and without a centre, on an input transform, reverse_order, per-sample
argument inputs, one fed by random.uniform), a rotation fed to warp_affine and coord_transform as
in DALI, known matrices without DALI, and clear errors for bad arguments.

No tolerance against DALI: the matrices are compared bit for bit (``_same``), as raypipe does DALI's
float32 arithmetic in its order and takes sines, cosines and tangents from the C library DALI calls.
The warped images use warp_affine's own tolerance (its test module explains it)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn
from raypipe.errors import ArgumentError
from raypipe.operators import transforms
from tests.operators.test_warp_affine import assert_close

F32 = np.float32
_RNG = np.random.default_rng(5)
#: input transforms: 2-D (2x3) and 3-D (3x4), a batch of three each
IN2 = [_RNG.uniform(-3, 3, (2, 3)).astype(F32) for _ in range(3)]
IN3 = [_RNG.uniform(-3, 3, (3, 4)).astype(F32) for _ in range(3)]
#: per-sample argument values for a batch of three
ANGLES = [np.array(a, F32) for a in (90.0, -33.3, 1234.5)]
CENTERS2 = [np.array(c, F32) for c in ((10, 20), (-3.5, 7.25), (640, 480))]
CENTERS3 = [np.array(c, F32) for c in ((1, 2, 3), (-40, 0.5, 9), (100, 200, 300))]
AXES = [np.array(a, F32) for a in ((0, 0, 1), (1, 2, 3), (-0.3, 5, 0.01))]


def _same(mine, theirs) -> None:
    """Equal outputs: DALI's layout ``**``, float32 matrices of the same shape and the same bits (any NaN
    counts as NaN)."""
    for (my_samples, my_layout), (their_samples, their_layout) in zip(mine, theirs, strict=True):
        assert my_layout == their_layout == "**"
        for my, their in zip(my_samples, their_samples, strict=True):
            assert my.dtype == their.dtype == F32 and my.shape == their.shape
            nan = np.isnan(their)
            np.testing.assert_array_equal(np.isnan(my), nan)
            assert my[~nan].tobytes() == their[~nan].tobytes(), (my, their)


def _compare(ours, dali, samples, case, per_sample=()) -> list[np.ndarray]:
    """``case(transforms, x, *per_sample)`` with raypipe's and DALI's ``fn.transforms`` on a batch of
    input transforms ``samples``; raypipe's matrices after checking them equal to DALI's."""
    theirs = dali(samples, lambda x, dali_fn, _, *extra: case(dali_fn.transforms, x, *extra), per_sample=per_sample)
    mine = ours(samples, lambda x, *extra: case(fn.transforms, x, *extra), per_sample=per_sample)
    _same(mine, theirs)
    return mine[0][0]


# (id, input transforms, build(t, x)) with constant arguments; x is the batch of input transforms
CASES = [
    ("translation-2d", IN2, lambda t, x: t.translation(offset=[1.5, -2])),
    ("translation-1d-scalar", IN2, lambda t, x: t.translation(offset=3.25)),
    ("translation-6d", IN2, lambda t, x: t.translation(offset=[1, 2, 3, 4, 5, 6])),
    ("translation-on-input", IN2, lambda t, x: t.translation(x, offset=[1.5, -2])),
    ("translation-reversed", IN3, lambda t, x: t.translation(x, offset=[0.1, 0.2, 0.3], reverse_order=True)),
    ("scale-2d", IN2, lambda t, x: t.scale(scale=[2, 0.3])),
    ("scale-center", IN2, lambda t, x: t.scale(scale=[2, 0.3], center=[10.1, -20])),
    ("scale-one-factor-ndim", IN2, lambda t, x: t.scale(scale=1.7, ndim=3, center=5)),
    ("scale-one-factor-1d", IN2, lambda t, x: t.scale(scale=1.7)),
    ("scale-one-factor-input", IN3, lambda t, x: t.scale(x, scale=0.9, center=[1, 2, 3])),
    ("scale-reversed", IN2, lambda t, x: t.scale(x, scale=[2, 0.3], center=[1, 1], reverse_order=True)),
    ("rotation-90", IN2, lambda t, x: t.rotation(angle=90)),
    ("rotation-center", IN2, lambda t, x: t.rotation(angle=-30.7, center=[320, 240])),
    ("rotation-scalar-center", IN2, lambda t, x: t.rotation(angle=10, center=5)),
    ("rotation-on-input", IN2, lambda t, x: t.rotation(x, angle=1234.5, center=[3, 4])),
    ("rotation-reversed", IN2, lambda t, x: t.rotation(x, angle=77, reverse_order=True)),
    ("rotation-3d-z", IN3, lambda t, x: t.rotation(angle=30, axis=[0, 0, 1])),
    ("rotation-3d-center", IN3, lambda t, x: t.rotation(angle=30, axis=[1, 2, 3], center=[1, 2, 3])),
    ("rotation-3d-scalar-axis", IN3, lambda t, x: t.rotation(angle=10, axis=5)),
    ("rotation-3d-zero-angle", IN3, lambda t, x: t.rotation(angle=0, axis=[1, 2, 3], center=[1, 2, 3])),
    ("rotation-3d-on-input", IN3, lambda t, x: t.rotation(x, angle=-45, axis=[1, 1, 0], center=7)),
    ("rotation-3d-reversed", IN3, lambda t, x: t.rotation(x, angle=-45, axis=[1, 1, 0], reverse_order=True)),
    ("shear-2d", IN2, lambda t, x: t.shear(shear=[0.5, 0.25])),
    ("shear-center", IN2, lambda t, x: t.shear(shear=[0.5, -0.25], center=[3.3, 4])),
    ("shear-3d", IN3, lambda t, x: t.shear(shear=[1, 2, 3, 4, 5, 6], center=[1, -1, 2])),
    ("shear-angles-2d", IN2, lambda t, x: t.shear(angles=[30, -45], center=[3, 4])),
    ("shear-angles-3d", IN3, lambda t, x: t.shear(angles=[10, 20, -30, 40, -50, 60])),
    ("shear-angles-90", IN2, lambda t, x: t.shear(angles=[90, -90])),
    ("shear-on-input", IN3, lambda t, x: t.shear(x, shear=[1, 2, 3, 4, 5, 6])),
    ("shear-reversed", IN2, lambda t, x: t.shear(x, angles=[12, 34], reverse_order=True)),
    ("crop-2d", IN2, lambda t, x: t.crop(from_start=[10, 20], from_end=[110, 220], to_start=0, to_end=1)),
    ("crop-default", IN2, lambda t, x: t.crop()),
    ("crop-absolute", IN2, lambda t, x: t.crop(
        from_start=[110, 20], from_end=[10, 220], to_start=[1, 0], to_end=[0, 1], absolute=True)),
    ("crop-unordered", IN2, lambda t, x: t.crop(from_start=[110, 20], from_end=[10, 220])),
    ("crop-3d-broadcast", IN3, lambda t, x: t.crop(from_start=-1, from_end=[3, 4, 5], to_end=0.5)),
    ("crop-empty-source", IN2, lambda t, x: t.crop(from_start=[1, 2], from_end=[1, 4])),
    ("crop-on-input", IN2, lambda t, x: t.crop(x, from_start=[0.1, 0.2], from_end=[0.7, 0.9])),
    ("crop-reversed", IN3, lambda t, x: t.crop(x, to_start=[2, 3, 4], to_end=9, reverse_order=True)),
    ("combine-two", IN2, lambda t, x: t.combine(t.translation(offset=[1, 2]), t.scale(scale=[2, 3]))),
    ("combine-three-reversed", IN2, lambda t, x: t.combine(
        x, t.rotation(angle=33, center=[5, 6]), t.shear(shear=[0.1, 0.2]), reverse_order=True)),
    ("combine-inputs", IN3, lambda t, x: t.combine(
        x, t.rotation(angle=33, axis=[1, 0, 1]), x, t.scale(scale=[2, 3, 4]))),
    # one sample: DALI's combine keeps its matrices' bottom row from sample to sample of a batch, so
    # after an infinite entry made it NaN the next samples of the batch are NaN there (not here)
    ("combine-infinite", IN2[:1], lambda t, x: t.combine(
        t.crop(from_start=[1, 2], from_end=[1, 4]), t.translation(offset=[1, 2]))),
    ("chain", IN2, lambda t, x: t.translation(t.rotation(t.scale(x, scale=[1.1, 0.9]), angle=17), offset=[3, 4])),
]  # fmt: skip


@pytest.mark.parametrize("case, samples, build", CASES, ids=[c[0] for c in CASES])
def test_against_dali(ours, dali, case, samples, build):
    _compare(ours, dali, samples, build)


# (id, input transforms, per-sample batches, build(t, x, *per_sample))
PER_SAMPLE = [
    ("rotation-angle", IN2, [ANGLES], lambda t, x, a: t.rotation(angle=a)),
    ("rotation-angle-center", IN2, [ANGLES, CENTERS2], lambda t, x, a, c: t.rotation(x, angle=a, center=c)),
    ("rotation-3d-all", IN3, [ANGLES, AXES, CENTERS3],
     lambda t, x, a, ax, c: t.rotation(x, angle=a, axis=ax, center=c, reverse_order=True)),
    ("translation-offset", IN3, [CENTERS3], lambda t, x, o: t.translation(x, offset=o)),
    ("scale-scale-center", IN2, [[np.array(s, F32) for s in ((2, 3), (0.5, -1), (1, 1))], CENTERS2],
     lambda t, x, s, c: t.scale(scale=s, center=c)),
    ("scale-one-factor", IN2, [[np.array(s, F32) for s in (2, 0.25, -1)]],
     lambda t, x, s: t.scale(scale=s, ndim=2)),
    ("shear-3x2", IN3, [[_RNG.uniform(-1, 1, (3, 2)).astype(F32) for _ in range(3)]],
     lambda t, x, s: t.shear(x, shear=s)),
    ("shear-angles-center", IN2, [[np.array(a, F32) for a in ((10, 20), (-89.5, 3), (0, 45))], CENTERS2],
     lambda t, x, a, c: t.shear(angles=a, center=c)),
    ("crop-ends", IN2, [CENTERS2, [np.array(e, F32) for e in (700, 8, -5)]],
     lambda t, x, s, e: t.crop(from_start=s, from_end=e, absolute=True)),
]  # fmt: skip


@pytest.mark.parametrize("case, samples, values, build", PER_SAMPLE, ids=[c[0] for c in PER_SAMPLE])
def test_per_sample_arguments_against_dali(ours, dali, case, samples, values, build):
    mine = _compare(ours, dali, samples, build, values)
    assert len({m.tobytes() for m in mine}) == len(mine)  # each sample its own matrix


def test_an_angle_from_random_uniform_gives_dalis_rotation_of_that_angle(dali):
    """``angle`` from another operator (random.uniform): DALI, given the same angles, gives the same
    matrices."""

    @rp.pipeline_def(batch_size=8, num_threads=1, seed=3)
    def pipe():
        angle = fn.random.uniform(range=[-180, 180])
        return angle, fn.transforms.rotation(angle=angle, center=[64, 48])

    with pipe() as p:
        angles, matrices = p.run()
    angles = [np.asarray(angles.at(i)) for i in range(8)]
    mine = [np.asarray(matrices.at(i)) for i in range(8)]
    assert len({float(a) for a in angles}) == 8
    theirs = dali(angles, lambda a, dali_fn, types: dali_fn.transforms.rotation(angle=a, center=[64, 48]))
    _same([(mine, matrices.layout())], theirs)


def test_a_rotation_fed_to_warp_affine_warps_as_dalis(ours, dali, images):
    """The whole path as DALI scripts write it: a per-sample angle, a rotation about each image's
    centre, warp_affine taking the matrix as an argument input and as a second input."""
    angles = [np.array(a, F32) for a in (90, -17.5, 33, 180)]
    centers = [np.array([i.shape[1] / 2, i.shape[0] / 2], F32) for i in images]

    def build(fn, x, a, c):
        matrix = fn.transforms.rotation(angle=a, center=c)
        return fn.warp_affine(x, matrix=matrix, fill_value=0), fn.warp_affine(x, matrix, fill_value=0), matrix

    theirs = dali(images, lambda x, dali_fn, types, a, c: build(dali_fn, x, a, c), "HWC", [angles, centers])
    mine = ours(images, lambda x, a, c: build(fn, x, a, c), "HWC", per_sample=[angles, centers])
    _same(mine[2:], theirs[2:])
    for (my_images, my_layout), (their_images, their_layout) in zip(mine[:2], theirs[:2], strict=True):
        assert my_layout == their_layout == "HWC"
        for my, their in zip(my_images, their_images, strict=True):
            assert_close(my, their)


def test_a_rotation_fed_to_coord_transform_moves_points_as_dalis(ours, dali):
    points = [_RNG.uniform(0, 100, (n, 2)).astype(F32) for n in (5, 1, 9)]

    def build(fn, p):
        return fn.coord_transform(p, MT=fn.transforms.rotation(fn.transforms.translation(offset=[3, 4]), angle=30))

    theirs = dali(points, lambda p, dali_fn, types: build(dali_fn, p))
    mine = ours(points, lambda p: build(fn, p))
    for my, their in zip(mine[0][0], theirs[0][0], strict=True):
        np.testing.assert_array_equal(my, their)


# --- without DALI: known matrices and what the order of composition means ---


def _run(build) -> list[np.ndarray]:
    """The outputs of ``build()`` for a batch of one sample."""

    @rp.pipeline_def(batch_size=1, num_threads=1, seed=0)
    def pipe():
        return build()

    with pipe() as p:
        outputs = p.run()
    outputs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    return [np.asarray(out.at(0)) for out in outputs]


def _apply(matrix: np.ndarray, point) -> np.ndarray:
    return matrix[:, :-1].astype(np.float64) @ np.asarray(point, np.float64) + matrix[:, -1]


def test_known_matrices():
    rot90, about, rot3, sheared, cropped, scaled, moved = _run(
        lambda: (
            fn.transforms.rotation(angle=90),
            fn.transforms.rotation(angle=90, center=[10, 20]),
            fn.transforms.rotation(angle=90, axis=[0, 0, 2]),
            fn.transforms.shear(angles=[45, 0]),
            fn.transforms.crop(from_start=[10, 20], from_end=[110, 220], to_start=[0, 0], to_end=[1, 1]),
            fn.transforms.scale(scale=[2, 3], center=[1, 1]),
            fn.transforms.translation(offset=[1, 2, 3]),
        )
    )
    cos90 = np.float32(math.cos(np.float32(90) * np.float32(math.pi / 180)))  # -4.4e-8: float32's pi/2
    assert all(m.dtype == F32 for m in (rot90, rot3, sheared, cropped, scaled, moved))
    np.testing.assert_array_equal(rot90, [[cos90, -1, 0], [1, cos90, 0]])
    np.testing.assert_allclose(about, [[0, -1, 30], [1, 0, 10]], atol=1e-5)
    np.testing.assert_allclose(_apply(about, [10, 20]), [10, 20], atol=1e-5)  # the centre stays
    np.testing.assert_array_equal(rot3, [[cos90, -1, 0, 0], [1, cos90, 0, 0], [0, 0, 1, 0]])
    np.testing.assert_allclose(sheared, [[1, 1, 0], [0, 1, 0]], atol=1e-7)
    np.testing.assert_allclose(_apply(cropped, [10, 20]), [0, 0], atol=1e-6)
    np.testing.assert_allclose(_apply(cropped, [110, 220]), [1, 1], atol=1e-6)
    np.testing.assert_array_equal(scaled, [[2, 0, -1], [0, 3, -2]])
    np.testing.assert_array_equal(moved, [[1, 0, 0, 1], [0, 1, 0, 2], [0, 0, 1, 3]])


def test_a_quarter_turn_warps_an_image_as_rot90(ours):
    """warp_affine maps each output pixel centre through the matrix into the input: a rotation by 90
    degrees about the image's centre turns it a quarter, pixel for pixel (nearest)."""
    image = np.arange(6 * 6 * 2, dtype=np.uint8).reshape(6, 6, 2)

    def build(x):
        matrix = fn.transforms.rotation(angle=90, center=[3, 3])
        return fn.warp_affine(x, matrix=matrix, interp_type=rp.types.INTERP_NN)

    (((turned,), _),) = ours([image], build, "HWC")
    np.testing.assert_array_equal(turned, np.rot90(image))


def test_the_order_of_composition():
    """By default an operator's transform applies after its input's, and combine applies its inputs
    in the order listed; reverse_order turns both round."""
    after, before, listed, reversed_ = _run(
        lambda: (
            fn.transforms.scale(fn.transforms.translation(offset=[1, 2]), scale=[2, 3]),
            fn.transforms.scale(fn.transforms.translation(offset=[1, 2]), scale=[2, 3], reverse_order=True),
            fn.transforms.combine(fn.transforms.translation(offset=[1, 2]), fn.transforms.scale(scale=[2, 3])),
            fn.transforms.combine(
                fn.transforms.translation(offset=[1, 2]), fn.transforms.scale(scale=[2, 3]), reverse_order=True
            ),
        )
    )
    np.testing.assert_array_equal(_apply(after, [0, 0]), [2, 6])  # translated, then scaled
    np.testing.assert_array_equal(_apply(before, [0, 0]), [1, 2])  # scaled, then translated
    np.testing.assert_array_equal(listed, after)
    np.testing.assert_array_equal(reversed_, before)


def test_without_a_c_math_library_trig_is_within_an_ulp(monkeypatch):
    """Where no C math library loads, sines, cosines and tangents are the float64 values rounded to
    float32: at most an ulp from ``sinf``, ``cosf`` and ``tanf``."""
    radians = np.linspace(-720, 720, 2001, dtype=F32) * transforms._DEG
    names = ("sin", "cos", "tan")
    from_c = {name: np.array([transforms.c_trig(name, r) for r in radians]) for name in names}
    monkeypatch.setattr(transforms, "_libm", lambda: None)
    for name in names:
        rounded = np.array([transforms.c_trig(name, r) for r in radians])
        assert rounded.dtype == F32
        np.testing.assert_array_max_ulp(rounded, from_c[name], maxulp=1)


def test_names():
    assert fn.transforms.rotation.__qualname__ == "fn.transforms.rotation"
    assert {"translation", "scale", "rotation", "shear", "crop", "combine"} <= set(dir(fn.transforms))
    classes = ("Translation", "Scale", "Rotation", "Shear", "Crop", "Combine")
    assert [getattr(rp.ops.transforms, name).__name__ for name in classes] == list(classes)

    class Pipe(rp.Pipeline):
        def __init__(self):
            super().__init__(batch_size=1, num_threads=1, seed=0)
            self.rotate = rp.ops.transforms.Rotation(angle=180)
            self.combine = rp.ops.transforms.Combine()

        def define_graph(self):
            rotation = self.rotate()
            return self.combine(rotation, rotation)

    with Pipe() as p:
        (out,) = p.run()
    np.testing.assert_allclose(np.asarray(out.at(0)), [[1, 0, 0], [0, 1, 0]], atol=1e-6)  # two half turns


# --- errors ---

T = fn.transforms


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: T.translation(), r"transforms.translation: offset is required"),
        (lambda: T.translation(offset=[1] * 7), r"offset of 7 values gives a 7-D transform; .* 1-D to 6-D"),
        (lambda: T.translation(offset=["a"]), r"transforms.translation: offset must be a number or a list"),
        (lambda: T.translation(offset=[1, 2], reverse_order=1), r"reverse_order must be a bool"),
        (lambda: T.scale(), r"transforms.scale: scale is required"),
        (lambda: T.scale(scale=[]), r"transforms.scale: scale needs at least one value"),
        (lambda: T.scale(scale=2.0, ndim=0), r"transforms.scale: ndim must be an int from 1 to 6"),
        (lambda: T.scale(scale=[2, 3], ndim=3), r"ndim=3 contradicts .* \(scale has 2 values\)"),
        (lambda: T.scale(scale=[2, 3], center=[1, 2, 3]), r"center needs 2 values \(or one\) for a 2-D"),
        (lambda: T.rotation(), r"transforms.rotation: angle is required"),
        (lambda: T.rotation(angle=[1, 2]), r"transforms.rotation: angle must be a number"),
        (lambda: T.rotation(angle=10, axis=[1, 2]), r"axis needs 3 values \(or one\)"),
        (lambda: T.rotation(angle=10, axis=[0, 0, 0]), r"axis must have a non-zero length"),
        (lambda: T.rotation(angle=10, center=[1, 2, 3]), r"center needs 2 values \(or one\) for a 2-D"),
        (lambda: T.rotation(angle=fn.random.uniform(), center=[1, 2, 3]), r"center needs 2 values"),
        (lambda: T.shear(), r"transforms.shear: give one of shear and angles, got neither"),
        (lambda: T.shear(shear=[1, 2], angles=[3, 4]), r"one of shear and angles, got \['shear', 'angles'\]"),
        (lambda: T.shear(shear=[1, 2, 3, 4]), r"shear needs 2 values \(2-D\) or 6 \(3-D\), got 4"),
        (lambda: T.shear(angles=[100, 0]), r"angles must be within \[-90, 90\] degrees, got 100"),
        (lambda: T.crop(from_start=[1, 2], from_end=[3, 4, 5]), r"each end needs 3 values .*from_start \(2\)"),
        (lambda: T.crop(from_start=[]), r"each end needs 1 values .*from_start \(0\)"),
        (lambda: T.crop(absolute="yes"), r"transforms.crop: absolute must be a bool"),
        (lambda: T.combine(T.translation(offset=1)), r"transforms.combine: expects 2..99 inputs, got 1"),
        (lambda: T.rotation(angle=fn.random.uniform(), nope=1), r"transforms.rotation: .*nope"),
    ],
)
def test_bad_arguments_fail_the_build(build, message):
    @rp.pipeline_def(batch_size=1, num_threads=1)
    def pipe():
        return build()

    with pytest.raises(ArgumentError, match=message):
        pipe().build()


@pytest.mark.parametrize(
    "samples, build, message",
    [
        (IN3, lambda x: T.translation(x, offset=[1, 2]), r"the input is a 3-D transform but the arguments give a 2-D"),
        (IN3, lambda x: T.rotation(x, angle=30), r"the input is a 3-D transform but the arguments give a 2-D one"),
        ([np.eye(3, dtype=F32)], lambda x: T.rotation(x, angle=3), r"input must be an affine .* got shape \(3, 3\)"),
        (IN2, lambda x: T.combine(x, T.translation(offset=[1, 2, 3])), r"of the same dimensions, got 2-D, 3-D"),
        (IN2, lambda x: T.scale(x, scale=1.5, ndim=3), r"ndim=3 contradicts .* \(the input is a 2-D transform\)"),
        ([np.array([1, 2, 3], F32)], lambda a: T.rotation(angle=a), r"angle must be one number, got 3"),
        ([np.array([95, 0], F32)], lambda a: T.shear(angles=a), r"angles must be within \[-90, 90\] degrees, got 95"),
        ([np.array([0, 0, 0], F32)], lambda a: T.rotation(angle=5, axis=a), r"axis must have a non-zero length"),
        # DALI refuses a 2-D offset too (a per-frame offset comes through fn.per_frame)
        ([np.ones((2, 2), F32)], lambda a: T.translation(offset=a), r"offset must be .* 1-D array .* \(2, 2\)"),
    ],
)
def test_bad_samples_fail_naming_the_sample(ours, samples, build, message):
    with pytest.raises(Exception, match=message) as caught:
        ours(samples, build)
    assert "sample" in str(caught.value)
