"""``experimental.median_blur``, ``experimental.dilate`` and ``experimental.erode`` (GPU-only in
DALI, checked there against OpenCV's ``medianBlur``, ``dilate`` and ``erode``): against a
pixel-by-pixel reference written from those definitions, and where OpenCV is installed against
OpenCV itself (equal); every layout, per-sample sizes and anchors, per-frame masks; the ``gpu``
device gives the cpu result; bad arguments fail naming the operator."""

from __future__ import annotations

import numpy as np
import pytest

from raypipe import fn
from raypipe.errors import ArgumentError, SampleError

RNG = np.random.default_rng(5)
IMAGES = {
    "uint8": RNG.integers(0, 256, (9, 12, 3)).astype(np.uint8),
    "uint16": RNG.integers(0, 65536, (9, 12, 1)).astype(np.uint16),
    "float32": RNG.random((9, 12, 4)).astype(np.float32),
}
BORDERS = ["constant", "replicate", "reflect", "reflect_101", "wrap"]
#: (mask_size, anchor, iterations)
MASKS = [((3, 3), (-1, -1), 1), ((4, 2), (0, 1), 1), ((5, 3), (-1, -1), 2), ((2, 5), (1, 4), 3), ((1, 4), (-1, -1), 1)]


def _source(p: int, n: int, border: str) -> int | None:
    """OpenCV's source index for position ``p`` of an axis of ``n`` (None: outside, constant border)."""
    if 0 <= p < n:
        return p
    if border == "constant":
        return None
    if border == "replicate":
        return min(max(p, 0), n - 1)
    if border == "wrap":
        return p % n
    if border == "reflect":  # fedcba|abcdef|fedcba
        q = p % (2 * n)
        return q if q < n else 2 * n - 1 - q
    if n == 1:  # reflect_101: gfedcb|abcdefgh|gfedcba
        return 0
    q = p % (2 * n - 2)
    return q if q < n else 2 * n - 2 - q


def reference(image, op: str, size, anchor=(-1, -1), iterations=1, border="replicate") -> np.ndarray:
    """The filter pixel by pixel on an HWC image: window ``size`` ``(w, h)`` at ``anchor``
    (``-1``: ``k // 2``), grown by ``size - 1`` per added iteration with the anchor scaled."""
    (w, h), n = size, iterations
    ax, ay = (k // 2 if a == -1 else a for k, a in zip(size, anchor))
    w, h, ax, ay = w + (n - 1) * (w - 1), h + (n - 1) * (h - 1), ax * n, ay * n
    rows, cols, _ = image.shape
    out = np.empty_like(image)
    for y in range(rows):
        for x in range(cols):
            taps = [
                image[r, c]
                for i in range(h)
                for j in range(w)
                if (r := _source(y + i - ay, rows, border)) is not None
                and (c := _source(x + j - ax, cols, border)) is not None
            ]
            taps = np.stack(taps)
            if op == "median_blur":
                out[y, x] = np.sort(taps, axis=0)[len(taps) // 2]
            else:
                out[y, x] = taps.max(axis=0) if op == "dilate" else taps.min(axis=0)
    return out


def _run(ours, samples, build, layout="HWC", per_sample=()):
    ((out, out_layout),) = ours(samples, build, layout, per_sample=per_sample)
    assert out_layout == layout
    return out


@pytest.mark.parametrize("size", [(3, 3), (5, 5), (4, 2), (1, 3)])
@pytest.mark.parametrize("dtype", list(IMAGES))
def test_median_blur_is_the_definition(ours, dtype, size):
    (out,) = _run(ours, [IMAGES[dtype]], lambda x: fn.experimental.median_blur(x, window_size=list(size)))
    np.testing.assert_array_equal(out, reference(IMAGES[dtype], "median_blur", size))


@pytest.mark.parametrize("op", ["dilate", "erode"])
@pytest.mark.parametrize("border", BORDERS)
@pytest.mark.parametrize(("mask", "anchor", "iterations"), MASKS)
def test_morphology_is_the_definition(ours, op, border, mask, anchor, iterations):
    image = IMAGES["uint8"]

    def build(x):
        return getattr(fn.experimental, op)(
            x, mask_size=list(mask), anchor=list(anchor), iterations=iterations, border_mode=border
        )

    (out,) = _run(ours, [image], build)
    np.testing.assert_array_equal(out, reference(image, op, mask, anchor, iterations, border))


@pytest.mark.parametrize("dtype", list(IMAGES))
def test_values_are_opencvs(ours, dtype):
    cv2 = pytest.importorskip("cv2")
    image = IMAGES[dtype]
    borders = {"constant": cv2.BORDER_CONSTANT, "reflect": cv2.BORDER_REFLECT, "reflect_101": cv2.BORDER_REFLECT_101}
    cases = [("median_blur", k, None, None, None) for k in (3, 5)]
    cases += [(op, *m, b) for op in ("dilate", "erode") for b in borders for m in MASKS]

    def build(x):
        return tuple(
            fn.experimental.median_blur(x, window_size=size)
            if op == "median_blur"
            else getattr(fn.experimental, op)(
                x, mask_size=list(size), anchor=list(anchor), iterations=iterations, border_mode=border
            )
            for op, size, anchor, iterations, border in cases
        )

    outs = ours([image], build, "HWC")
    for ((out,), _), (op, size, anchor, iterations, border) in zip(outs, cases, strict=True):
        if op == "median_blur":
            theirs = cv2.medianBlur(image, size)
        else:
            element = cv2.getStructuringElement(cv2.MORPH_RECT, size)
            theirs = getattr(cv2, op)(image, element, anchor=anchor, iterations=iterations, borderType=borders[border])
        np.testing.assert_array_equal(out, theirs.reshape(image.shape), err_msg=f"{op} {size} {anchor} {border}")


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_every_layout_filters_each_channel_of_each_frame(ours, device):
    image = IMAGES["uint8"]
    frames = np.stack([image, image[::-1].copy()])
    expected_image = reference(image, "dilate", (3, 2))
    expected_frames = np.stack([expected_image, reference(frames[1], "dilate", (3, 2))])

    def build(x):
        return fn.experimental.dilate(x.gpu() if device == "gpu" else x, mask_size=[3, 2])

    cases = {
        "HWC": (image, expected_image),
        "HW": (image[:, :, 1].copy(), expected_image[:, :, 1]),
        "CHW": (image.transpose(2, 0, 1).copy(), expected_image.transpose(2, 0, 1)),
        "FHWC": (frames, expected_frames),
        "FCHW": (frames.transpose(0, 3, 1, 2).copy(), expected_frames.transpose(0, 3, 1, 2)),
    }
    for layout, (sample, expected) in cases.items():
        (out,) = _run(ours, [sample], build, layout)
        np.testing.assert_array_equal(out, expected, err_msg=layout)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_per_sample_sizes_and_anchors(ours, device):
    images = [IMAGES["uint8"], IMAGES["uint8"][::-1].copy()]
    windows = [np.array([3, 5], np.int32), np.array([5, 1], np.int32)]
    masks = [np.array([2, 3], np.int32), np.array([4, 4], np.int32)]
    anchors = [np.array([0, 2], np.int32), np.array([-1, -1], np.int32)]

    def build(x, window, mask, anchor):
        x = x.gpu() if device == "gpu" else x
        return fn.experimental.median_blur(x, window_size=window), fn.experimental.erode(
            x, mask_size=mask, anchor=anchor
        )

    (medians, _), (eroded, _) = ours(images, build, "HWC", per_sample=[windows, masks, anchors])
    for i, image in enumerate(images):
        np.testing.assert_array_equal(medians[i], reference(image, "median_blur", tuple(windows[i])))
        np.testing.assert_array_equal(
            eroded[i], reference(image, "erode", tuple(masks[i]), tuple(anchors[i]), border="constant")
        )


def test_masks_per_frame(ours):
    frames = np.stack([IMAGES["uint8"]] * 3)
    masks = np.array([[1, 1], [3, 3], [5, 1]], np.int32)

    def build(x, mask):
        return fn.experimental.dilate(x, mask_size=fn.per_frame(mask))

    ((out, layout),) = ours([frames], build, "FHWC", per_sample=[[masks]])
    assert layout == "FHWC"
    for f, mask in enumerate(masks):
        expected = reference(frames[f], "dilate", tuple(mask), border="constant")
        np.testing.assert_array_equal(out[0][f], expected)


def test_the_gpu_device_gives_the_cpu_values(ours):
    images = [IMAGES["float32"], IMAGES["float32"][:, ::-1].copy()]
    outs = {}
    for device in ("cpu", "gpu"):

        def build(x, device=device):
            x = x.gpu() if device == "gpu" else x
            return fn.experimental.median_blur(x, window_size=5)

        outs[device] = _run(ours, images, build)
    for a, b in zip(outs["cpu"], outs["gpu"], strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda x: fn.experimental.median_blur(x, window_size=[3, 3, 3]), "median_blur: window_size is"),
        (lambda x: fn.experimental.median_blur(x, window_size=0), "median_blur: window_size must be positive"),
        (lambda x: fn.experimental.dilate(x, mask_size=[0, 3]), "dilate: mask_size must be positive"),
        (lambda x: fn.experimental.erode(x, anchor=[3, 0]), "erode: anchor x = 3 is outside the mask"),
        (lambda x: fn.experimental.erode(x, iterations=0), "erode: iterations must be a positive int"),
        (lambda x: fn.experimental.dilate(x, border_mode="mirror"), "dilate: border_mode must be one of"),
    ],
)
def test_bad_arguments_fail_when_the_pipeline_is_built(ours, build, message):
    with pytest.raises(ArgumentError, match=f"experimental.{message}"):
        _run(ours, [IMAGES["uint8"]], build)


def test_a_layout_it_does_not_take_is_refused(ours):
    with pytest.raises(ArgumentError, match="laid out as HW, HWC, FHWC, CHW, FCHW, got 'WHC'"):
        _run(ours, [IMAGES["uint8"]], lambda x: fn.experimental.erode(x), "WHC")


def test_bad_samples_fail_naming_the_operator(ours):
    with pytest.raises(SampleError, match="experimental.median_blur: takes integer, float32 or float64 images"):
        _run(ours, [np.zeros((4, 4, 3), bool)], lambda x: fn.experimental.median_blur(x))
    with pytest.raises(SampleError, match=r"experimental.dilate: anchor y = 4 is outside the mask \(0 to 2"):
        _run(ours, [IMAGES["uint8"]], lambda x, a: fn.experimental.dilate(x, anchor=a), per_sample=[[np.array([1, 4])]])


@pytest.mark.parametrize("layout", ["HWC", "CHW", "FHWC"])
def test_a_batch_of_one_shape_is_filtered_at_once_as_each_sample_alone(layout):
    """The GPU stage's batch step: equally shaped samples with the same arguments in one pass;
    different arguments or shapes sample by sample; the same values either way."""
    from raypipe.operators.rank_filters import Dilate, MedianBlur
    from tests.kernels.helpers import contexts

    image = IMAGES["uint8"]
    sample = {"HWC": image, "CHW": image.transpose(2, 0, 1), "FHWC": np.stack([image, image[::-1]])}[layout]
    batch = [np.ascontiguousarray(np.roll(sample, k, axis=-2)) for k in range(3)]
    for op, args in ((MedianBlur("gpu", 0, window_size=[3, 5]), {}), (Dilate("gpu", 0), {})):
        op.output_layout([layout])
        calls = []
        original = op.filter
        op.filter = lambda xp, planes, a, original=original, calls=calls: (
            calls.append(planes.shape[0]) or original(xp, planes, a)
        )
        out = op.run_batch(np, [batch], args, contexts(3))
        assert calls == [len(batch) * (3 if layout == "CHW" else 2 if layout == "FHWC" else 1)]
        for got, one in zip(out, batch, strict=True):
            np.testing.assert_array_equal(got, op.compute(np, [one], {}, None))
    masks = {"mask_size": [np.array([3, 3]), np.array([5, 1]), np.array([3, 3])]}
    op = Dilate("gpu", 0)
    op.output_layout([layout])
    out = op.run_batch(np, [batch], masks, contexts(3))
    for i, (got, one) in enumerate(zip(out, batch, strict=True)):
        np.testing.assert_array_equal(got, op.compute(np, [one], {"mask_size": masks["mask_size"][i]}, None))
