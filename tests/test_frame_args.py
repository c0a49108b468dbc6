"""Per-frame arguments (``fn.per_frame``): an operator on ``FHWC`` sequences takes each frame's own
value of an argument, one value serving all frames of its sample. Checked against the same operator
run on each frame as an image with that frame's value (no DALI needed), on ``cpu``, ``gpu`` and in
the GPU stage with its kernels in the CUDA simulator, and against DALI 2.4's CPU build."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, types
from raypipe.backend import gpu_available
from raypipe.errors import ArgumentError
from tests.video_data import frame_image

SEQUENCES = [
    np.stack([frame_image(k, 36, 50) for k in range(4)]),
    np.stack([frame_image(k + 7, 30, 44) for k in range(3)]),
]
#: per-frame values for each sample: one per frame for the first, one for all frames for the second
SCALE = [np.array([0.5, 1.0, 1.5, 0.8], np.float32), np.array([1.2], np.float32)]
HUE = [np.array([-30.0, 0.0, 45.0, 90.0], np.float32), np.array([10.0, 20.0, 30.0], np.float32)]
ANGLE = [np.array([0.0, 30.0, 90.0, -17.0], np.float32), np.array([10.0, 20.0, 45.0], np.float32)]
SIGMA = [np.array([0.5, 1.0, 2.0, 3.0], np.float32), np.array([1.5], np.float32)]


def _shear(k: float) -> np.ndarray:
    return np.array([[1.0, k, -3.0], [0.1 * k, 1.0, 2.0]], np.float32)


ANCHOR = [np.array([[0, 0], [1, 2], [2, 1], [-1, -1]], np.int32), np.array([[2, 0]], np.int32)]
WINDOW = [np.array([3, 5, 7, 3], np.int32), np.array([5, 3, 5], np.int32)]
KERNEL = np.array([[1, 2, 0], [0, 1, 3], [2, 0, 1]], np.float32) / 10
MATRIX = [np.stack([_shear(k) for k in (0.0, 0.1, 0.2, -0.3)]), np.stack([_shear(0.25)])]

CASES = {
    "color_twist": lambda f, t, x, a: f.color_twist(x, brightness=a["scale"], hue=a["hue"], saturation=0.8),
    "hsv": lambda f, t, x, a: f.hsv(x, saturation=a["scale"], hue=20.0),
    "brightness_contrast": lambda f, t, x, a: f.brightness_contrast(x, contrast=a["scale"], brightness=1.1),
    "gaussian_blur": lambda f, t, x, a: f.gaussian_blur(x, sigma=a["sigma"]),
    "rotate": lambda f, t, x, a: f.rotate(x, angle=a["angle"]),
    "warp_affine": lambda f, t, x, a: f.warp_affine(x, matrix=a["matrix"], fill_value=0),
    "filter": lambda f, t, x, a: f.filter(x, KERNEL, anchor=a["anchor"]),
    "laplacian": lambda f, t, x, a: f.laplacian(x, window_size=a["window"], dtype=t.FLOAT),
}
PER_FRAME = {
    "scale": SCALE,
    "hue": HUE,
    "angle": ANGLE,
    "sigma": SIGMA,
    "matrix": MATRIX,
    "anchor": ANCHOR,
    "window": WINDOW,
}


def _batch(values: list[np.ndarray]):
    """An external source giving ``values`` every iteration (a callable without arguments: DALI
    passes one to callables that take one)."""
    return lambda: values


def _sequences(lib, case: str, device: str, device_id: int | None = None) -> tuple[list[np.ndarray], str]:
    @lib.pipeline_def(batch_size=2, num_threads=1, device_id=device_id, seed=1)
    def pipe():
        x = lib.fn.external_source(source=lambda: SEQUENCES, layout="FHWC", batch=True)
        args = {
            name: lib.fn.per_frame(lib.fn.external_source(source=_batch(values), batch=True))
            for name, values in PER_FRAME.items()
        }
        return CASES[case](lib.fn, lib.types, x.gpu() if device == "gpu" else x, args)

    p = pipe()
    p.build()
    (out,) = p.run()
    layout = out.layout()
    out = out.as_cpu() if hasattr(out, "as_cpu") else out
    return [np.asarray(out[i]) for i in range(2)], layout


def _frame_by_frame(case: str) -> list[list[np.ndarray]]:
    """The case's operator on each frame as an HWC image with that frame's values, by sequence."""
    frames = [frame for seq in SEQUENCES for frame in seq]
    places = [(i, f) for i, seq in enumerate(SEQUENCES) for f in range(len(seq))]

    def value(values, i, f):
        return values[i][0 if len(values[i]) == 1 else f]

    @rp.pipeline_def(batch_size=len(frames), num_threads=1, device_id=None, seed=1)
    def pipe():
        x = fn.external_source(source=lambda: frames, layout="HWC", batch=True)
        args = {
            name: fn.external_source(source=_batch([value(values, i, f) for i, f in places]), batch=True)
            for name, values in PER_FRAME.items()
        }
        return CASES[case](fn, types, x, args)

    p = pipe()
    p.build()
    (out,) = p.run()
    outs = [np.asarray(out[k]) for k in range(len(frames))]
    return [[o for o, (i, _) in zip(outs, places) if i == s] for s in range(len(SEQUENCES))]


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("case", sorted(set(CASES) - {"rotate"}))
def test_each_frame_takes_its_own_value(case, device):
    ours, layout = _sequences(rp, case, device)
    assert layout == "FHWC"
    for a, frames in zip(ours, _frame_by_frame(case), strict=True):
        b = np.stack(frames)
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_rotated_frames_share_the_largest_canvas(device):
    """Each frame rotated by its angle, centred in a canvas as large as the largest frame's along
    each axis: the frame's own rotation where it is the largest, and inside it otherwise."""
    ours, _ = _sequences(rp, "rotate", device)
    images = _frame_by_frame("rotate")
    for seq, frames, angles in zip(ours, images, ANGLE, strict=True):
        sizes = [f.shape[:2] for f in frames]
        assert seq.shape == (len(frames), max(h for h, _ in sizes), max(w for _, w in sizes), 3)
        for k, frame in enumerate(frames):
            top, left = (seq.shape[1] - frame.shape[0]) // 2, (seq.shape[2] - frame.shape[1]) // 2
            inner = seq[k, top : top + frame.shape[0], left : left + frame.shape[1]].astype(int)
            assert np.abs(inner - frame).mean() < 1, f"frame {k} at {angles[k]} degrees"


@pytest.mark.skipif(gpu_available(), reason="runs the GPU stage in the CUDA simulator, on a machine without a GPU")
@pytest.mark.parametrize("case", ["color_twist", "hsv", "brightness_contrast"])
def test_the_gpu_stage_kernels_take_the_frames_with_their_values(monkeypatch, case):
    """In the GPU stage (kernels in numba's CUDA simulator) the batch's frames go through the
    batched image kernels with their own values: the host's frames within the kernels' tolerance."""
    monkeypatch.setenv("RAYPIPE_DEVICE", "simulator")
    host, _ = _sequences(rp, case, "cpu")
    device, layout = _sequences(rp, case, "gpu", device_id=0)
    assert layout == "FHWC"
    for a, b in zip(host, device, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, atol=1)


@pytest.mark.parametrize("case", sorted(CASES))
def test_equals_dali(case):
    pytest.importorskip("nvidia.dali")
    import nvidia.dali as dali

    theirs, their_layout = _sequences(dali, case, "cpu")
    ours, layout = _sequences(rp, case, "cpu")
    assert layout == their_layout
    for a, b in zip(theirs, ours, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype
        diff = np.abs(a.astype(np.float64) - b)
        if case == "warp_affine":  # their resampling rounds, Pillow's truncates (as for images)
            assert diff.max() <= 2 and diff.mean() < 0.6
        elif case == "laplacian":  # float32 outputs: DALI's values (test_laplacian.py)
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-3)
        else:
            assert diff.max() <= 1


def _build(make) -> None:
    @rp.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        x = fn.external_source(source=lambda: SEQUENCES, layout="FHWC", batch=True)
        return make(x)

    p = pipe()
    p.build()
    p.run()


def test_a_count_of_values_other_than_the_frames_or_one_is_refused():
    with pytest.raises(Exception, match=r"sample 0 of the per-frame argument 'brightness' has 2 values for 4 frames"):
        _build(
            lambda x: fn.color_twist(
                x, brightness=fn.per_frame(fn.external_source(source=lambda: [np.ones(2, np.float32)] * 2, batch=True))
            )
        )


def test_an_argument_that_takes_no_per_frame_values_is_refused():
    with pytest.raises(ArgumentError, match="flip: argument .horizontal. does not take per-frame values"):
        flips = _batch([np.ones(4, np.int32)] * 2)
        _build(lambda x: fn.flip(x, horizontal=fn.per_frame(fn.external_source(source=flips))))


def test_per_frame_values_need_a_sequence():
    with pytest.raises(ArgumentError, match="input 0 is not a sequence"):
        _build(
            lambda x: fn.color_twist(
                fn.reshape(x, layout="HWC", shape=[-1, 50, 3]),
                brightness=fn.per_frame(fn.external_source(source=lambda: [np.ones(4, np.float32)] * 2)),
            )
        )


BAYER = [
    np.random.default_rng(7).integers(0, 256, (3, 12, 16), dtype=np.uint8),
    np.random.default_rng(8).integers(0, 256, (2, 10, 8), dtype=np.uint8),
]
BLUE = [np.array([[0, 0], [1, 1], [0, 1]], np.int32), np.array([[1, 0], [0, 0]], np.int32)]


def _debayered(lib) -> tuple[list[np.ndarray], str]:
    @lib.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        frames = lib.fn.external_source(source=_batch(BAYER), layout="FHW", batch=True)
        blue = lib.fn.per_frame(lib.fn.external_source(source=_batch(BLUE), batch=True))
        return lib.fn.debayer(frames, blue_position=blue)

    p = pipe()
    p.build()
    (out,) = p.run()
    return [np.asarray(out[i]) for i in range(2)], out.layout()


def test_debayer_takes_each_frames_pattern():
    """DALI's own use of ``per_frame``: each Bayer frame with its blue position (FHW in, FHWC out)."""
    ours, layout = _debayered(rp)
    assert layout == "FHWC"
    for frames, positions, got in zip(BAYER, BLUE, ours, strict=True):
        for frame, position, out in zip(frames, positions, got, strict=True):
            alone = rp.ops.Debayer(blue_position=position.tolist())
            np.testing.assert_array_equal(out, _one(alone, frame))


def _one(op, frame: np.ndarray) -> np.ndarray:
    @rp.pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        return op(fn.external_source(source=_batch([frame]), layout="HW", batch=True))

    p = pipe()
    p.build()
    return np.asarray(p.run()[0][0])


def test_debayer_per_frame_equals_dali():
    pytest.importorskip("nvidia.dali")
    import nvidia.dali as dali

    theirs, their_layout = _debayered(dali)
    ours, layout = _debayered(rp)
    assert layout == their_layout
    for a, b in zip(theirs, ours, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


OFFSET = [np.array([[0, 0], [2, 1], [4, 2], [6, 3]], np.float32), np.array([[-3, 5]], np.float32)]


def _transforms(lib) -> list[tuple[list[np.ndarray], str]]:
    """DALI's per-frame transforms: matrices built from per-frame angles and offsets, combined with a
    transform of the sample, and the frames warped by them (as an argument and as a second input)."""

    @lib.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        x = lib.fn.external_source(source=_batch(SEQUENCES), layout="FHWC", batch=True)
        angle = lib.fn.per_frame(lib.fn.external_source(source=_batch(ANGLE), batch=True))
        offset = lib.fn.per_frame(lib.fn.external_source(source=_batch(OFFSET), batch=True))
        turn = lib.fn.transforms.rotation(angle=angle, center=[25.0, 18.0])
        moved = lib.fn.transforms.translation(turn, offset=offset)
        both = lib.fn.transforms.combine(moved, lib.fn.transforms.scale(scale=[1.1, 0.9]))
        return turn, moved, both, lib.fn.warp_affine(x, matrix=both, fill_value=0), lib.fn.warp_affine(x, turn)

    p = pipe()
    p.build()
    return [([np.asarray(out[i]) for i in range(2)], out.layout()) for out in p.run()]


def test_per_frame_transforms_are_dalis():
    pytest.importorskip("nvidia.dali")
    import nvidia.dali as dali

    theirs, ours = _transforms(dali), _transforms(rp)
    for k, ((their, their_layout), (mine, layout)) in enumerate(zip(theirs, ours, strict=True)):
        assert layout == their_layout
        for a, b in zip(their, mine, strict=True):
            assert a.shape == b.shape and a.dtype == b.dtype
            if k < 3:  # the matrices: DALI's float32 arithmetic
                np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-5)
            else:  # their resampling rounds, this one truncates (as for images)
                diff = np.abs(a.astype(np.float64) - b)
                assert diff.max() <= 2 and diff.mean() < 0.6


def test_per_frame_transforms_give_one_matrix_per_frame():
    (turn, layout), (moved, _), (both, _), (warped, warped_layout), _ = _transforms(rp)
    assert layout == "F**" and warped_layout == "FHWC"
    for s, angles in enumerate(ANGLE):
        assert turn[s].shape == (len(angles), 2, 3) and warped[s].shape == SEQUENCES[s].shape
        for f, angle in enumerate(angles):
            alone = _one_transform(float(angle), OFFSET[s][0 if len(OFFSET[s]) == 1 else f])
            np.testing.assert_allclose(moved[s][f], alone, atol=1e-5)


def _one_transform(angle: float, offset: np.ndarray) -> np.ndarray:
    @rp.pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        turn = fn.transforms.rotation(angle=angle, center=[25.0, 18.0])
        return fn.transforms.translation(turn, offset=offset.tolist())

    p = pipe()
    p.build()
    return np.asarray(p.run()[0][0])


def test_transforms_frames_must_agree():
    angles = _batch([np.zeros(4, np.float32), np.zeros(3, np.float32)])
    centers = _batch([np.zeros((2, 2), np.float32), np.zeros((3, 2), np.float32)])

    @rp.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        angle = fn.per_frame(fn.external_source(source=angles, batch=True))
        center = fn.per_frame(fn.external_source(source=centers, batch=True))
        return fn.transforms.rotation(angle=angle, center=center)

    p = pipe()
    p.build()
    with pytest.raises(Exception, match="sample 0 of the per-frame argument 'center' has 2 values for 4 frames"):
        p.run()


def test_an_operator_with_per_frame_values_pickles():
    """Pipelines travel to pipeline actors and helpers pickled: the wrapped operator goes along."""
    import pickle

    from raypipe.frame_args import FrameArgs
    from raypipe.operators.color_twist import ColorTwist

    op = FrameArgs(ColorTwist("cpu", 3, saturation=0.5), frozenset({"brightness"}), frozenset({0}))
    copy = pickle.loads(pickle.dumps(op))
    assert isinstance(copy, FrameArgs) and copy.names == op.names and copy.inputs == op.inputs
    assert copy.schema.name == "color_twist" and copy.op_id == 3
    frames, values = SEQUENCES[0], {"brightness": SCALE[0]}
    np.testing.assert_array_equal(copy.run_sample([frames], values, None), op.run_sample([frames], values, None))
