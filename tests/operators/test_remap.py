"""``experimental.remap`` (GPU-only in DALI, checked there against OpenCV's ``remap`` with a
constant border of 0): against a pixel-by-pixel reference written from that definition, and where
OpenCV is installed against ``cv2.remap`` itself (OpenCV 5: uint8 equal, uint16 within one level,
float32 within 1e-4; int16's linear interpolation is float32 here, OpenCV's 1/32-pixel table
there); sequences with one pair of maps or one per frame; the ``gpu`` device gives the cpu result;
bad maps fail naming the map."""

from __future__ import annotations

import numpy as np
import pytest

from raypipe import fn, types
from raypipe.errors import ArgumentError, SampleError

RNG = np.random.default_rng(3)
H, W = 9, 11
IMAGES = {
    "uint8": RNG.integers(0, 256, (H, W, 3)).astype(np.uint8),
    "uint16": RNG.integers(0, 65536, (H, W, 3)).astype(np.uint16),
    "int16": RNG.integers(-32768, 32768, (H, W, 3)).astype(np.int16),
    "float32": (RNG.random((H, W, 3)) * 255).astype(np.float32),
}
YS, XS = np.mgrid[0:H, 0:W].astype(np.float32)
MAPS = {
    "random": (RNG.uniform(-2, W + 2, (H, W)).astype(np.float32), RNG.uniform(-2, H + 2, (H, W)).astype(np.float32)),
    "flip": (np.float32(W) - XS, YS.copy()),
    "zoom": (XS * np.float32(0.5) + np.float32(0.25), YS * np.float32(0.5) + np.float32(0.5)),
}


def reference(image: np.ndarray, mapx: np.ndarray, mapy: np.ndarray, interp: str, corner: bool) -> np.ndarray:
    """OpenCV's ``remap`` pixel by pixel: the point (map values, moved by half a pixel from the
    corner origin), nearest rounding ties to even, linear in float32 steps; taps outside read 0."""
    out = np.zeros_like(image)
    h, w = image.shape[:2]

    def tap(r: int, c: int) -> np.ndarray:
        return image[r, c].astype(np.float32) if 0 <= r < h and 0 <= c < w else np.zeros(image.shape[2], np.float32)

    for y in range(h):
        for x in range(w):
            sx, sy = mapx[y, x], mapy[y, x]
            if corner:
                sx, sy = sx - np.float32(0.5), sy - np.float32(0.5)
            if interp == "nearest":
                out[y, x] = tap(int(np.rint(sy)), int(np.rint(sx)))
                continue
            x0, y0 = int(np.floor(sx)), int(np.floor(sy))
            fx, fy = np.float32(sx - np.float32(x0)), np.float32(sy - np.float32(y0))
            top = tap(y0, x0) + fx * (tap(y0, x0 + 1) - tap(y0, x0))
            bottom = tap(y0 + 1, x0) + fx * (tap(y0 + 1, x0 + 1) - tap(y0 + 1, x0))
            value = top + fy * (bottom - top)
            if image.dtype.kind in "iu":
                info = np.iinfo(image.dtype)
                value = np.clip(np.rint(value), info.min, info.max)
            out[y, x] = value.astype(image.dtype)
    return out


def _remap(ours, images, maps, device="cpu", layout="HWC", **kwargs) -> list[np.ndarray]:
    def build(x, mapx, mapy):
        if device == "gpu":
            x, mapx, mapy = x.gpu(), mapx.gpu(), mapy.gpu()
        return fn.experimental.remap(x, mapx, mapy, **kwargs)

    ((samples, out_layout),) = ours(images, build, layout, per_sample=[[m[0] for m in maps], [m[1] for m in maps]])
    assert out_layout == layout
    return samples


@pytest.mark.parametrize("origin", ["corner", "center"])
@pytest.mark.parametrize("interp", ["INTERP_NN", "INTERP_LINEAR"])
@pytest.mark.parametrize("dtype", list(IMAGES))
def test_values_are_the_definitions(ours, dtype, interp, origin):
    images = [IMAGES[dtype]] * len(MAPS)
    mine = _remap(ours, images, list(MAPS.values()), interp=getattr(types, interp), pixel_origin=origin)
    name = "nearest" if interp == "INTERP_NN" else "linear"
    for out, (mapx, mapy) in zip(mine, MAPS.values(), strict=True):
        expected = reference(IMAGES[dtype], mapx, mapy, name, origin == "corner")
        assert out.dtype == expected.dtype and out.shape == expected.shape
        limit = 1 if name == "linear" else 0
        np.testing.assert_allclose(out.astype(np.float64), expected.astype(np.float64), atol=limit)
        if dtype == "uint8":  # one level only next to a rounding tie (float32 steps fused or not)
            assert (out != expected).mean() <= 0.01


@pytest.mark.parametrize("interp", ["INTERP_NN", "INTERP_LINEAR"])
@pytest.mark.parametrize("dtype", ["uint8", "uint16", "float32"])
def test_values_are_opencvs(ours, dtype, interp):
    cv2 = pytest.importorskip("cv2")
    mine = _remap(ours, [IMAGES[dtype]] * len(MAPS), list(MAPS.values()), interp=getattr(types, interp))
    flag = cv2.INTER_NEAREST if interp == "INTERP_NN" else cv2.INTER_LINEAR
    for out, (mapx, mapy) in zip(mine, MAPS.values(), strict=True):
        half = np.float32(0.5)
        theirs = cv2.remap(IMAGES[dtype], mapx - half, mapy - half, flag, borderMode=cv2.BORDER_CONSTANT, borderValue=0)
        limit = {"uint8": 0, "uint16": 1, "float32": 1e-4}[dtype] if interp == "INTERP_LINEAR" else 0
        np.testing.assert_allclose(out.astype(np.float64), theirs.astype(np.float64), atol=limit)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_gray_images_and_maps_with_a_channel(ours, device):
    gray = IMAGES["uint8"][:, :, 0].copy()
    mapx, mapy = MAPS["random"]
    (out,) = _remap(ours, [gray], [(mapx[:, :, None], mapy[:, :, None])], device, layout="HW")
    np.testing.assert_array_equal(out, reference(gray[:, :, None], mapx, mapy, "linear", True)[:, :, 0])


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_the_gpu_device_gives_the_cpu_values(ours, device):
    for dtype in ("uint8", "float32"):  # a batch has one dtype
        images = [IMAGES[dtype], IMAGES[dtype][::-1]]
        maps = [MAPS["random"], MAPS["zoom"]]
        cpu = _remap(ours, images, maps)
        gpu = _remap(ours, images, maps, device)
        for a, b in zip(cpu, gpu, strict=True):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_sequences_take_one_pair_of_maps_or_one_per_frame(ours, device):
    frames = np.stack([np.roll(IMAGES["uint8"], k, axis=1) for k in range(3)])
    mapx, mapy = MAPS["random"]
    each_x = np.stack([mapx, MAPS["flip"][0], MAPS["zoom"][0]])
    each_y = np.stack([mapy, MAPS["flip"][1], MAPS["zoom"][1]])
    (shared,) = _remap(ours, [frames], [(mapx, mapy)], device, layout="FHWC")
    (per_frame,) = _remap(ours, [frames], [(each_x, each_y)], device, layout="FHWC")
    for f in range(3):
        np.testing.assert_array_equal(shared[f], reference(frames[f], mapx, mapy, "linear", True))
        np.testing.assert_array_equal(per_frame[f], reference(frames[f], each_x[f], each_y[f], "linear", True))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"interp": types.INTERP_CUBIC}, "INTERP_CUBIC is not here"),
        ({"pixel_origin": "middle"}, "pixel_origin must be 'corner' or 'center'"),
    ],
)
def test_bad_arguments_fail_when_the_pipeline_is_built(ours, kwargs, message):
    with pytest.raises(ArgumentError, match=f"experimental.remap: .*{message}"):
        _remap(ours, [IMAGES["uint8"]], [MAPS["flip"]], **kwargs)


def test_channels_first_images_are_refused(ours):
    chw = IMAGES["uint8"].transpose(2, 0, 1).copy()
    with pytest.raises(ArgumentError, match="channels last"):
        _remap(ours, [chw], [MAPS["flip"]], layout="CHW")


@pytest.mark.parametrize(
    ("maps", "message"),
    [
        ((MAPS["flip"][0].astype(np.float64), MAPS["flip"][1]), "mapx must be float32, got float64"),
        ((MAPS["flip"][0], MAPS["flip"][1][:5]), r"mapy has shape \(5, 11\); it must be the image's height and width"),
    ],
)
def test_bad_maps_fail_naming_the_map(ours, maps, message):
    with pytest.raises(SampleError, match=message):
        _remap(ours, [IMAGES["uint8"]], [maps])


def test_a_sequences_maps_must_fit_its_frames(ours):
    frames = np.stack([IMAGES["uint8"]] * 3)
    mapx, mapy = np.stack([MAPS["flip"][0]] * 2), np.stack([MAPS["flip"][1]] * 2)
    with pytest.raises(SampleError, match=r"or \(3, 9, 11\) for each frame"):
        _remap(ours, [frames], [(mapx, mapy)], layout="FHWC")


@pytest.mark.parametrize("interp", ["INTERP_NN", "INTERP_LINEAR"])
def test_a_batch_of_one_shape_is_read_in_one_gather_as_each_sample_alone(interp):
    """The GPU stage's batch step: images of one shape and their maps in one gather (maps with a
    channel too); ragged batches sample by sample; the same values either way."""
    from raypipe.operators import remap
    from tests.kernels.helpers import contexts

    op = remap.Remap("gpu", 0, interp=getattr(types, interp))
    images = [IMAGES["uint8"], IMAGES["uint8"][::-1].copy(), IMAGES["uint8"][:, ::-1].copy()]
    maps = list(MAPS.values())
    gathers = []
    original = remap.sample
    remap.sample = lambda xp, pixels, *a: gathers.append(pixels.base) or original(xp, pixels, *a)
    try:
        out = op.run_batch(np, [images, [m[0] for m in maps], [m[1][:, :, None] for m in maps]], {}, contexts(3))
        assert len(gathers) == 1
        ragged = op.run_batch(
            np,
            [[images[0], IMAGES["uint8"][:5].copy()], [maps[0][0], maps[0][0][:5]], [maps[0][1], maps[0][1][:5]]],
            {},
            contexts(2),
        )
        assert len(gathers) == 3
    finally:
        remap.sample = original
    for got, image, (mapx, mapy) in zip(out, images, maps, strict=True):
        np.testing.assert_array_equal(got, op.compute(np, [image, mapx, mapy], {}, None))
    np.testing.assert_array_equal(
        ragged[1], op.compute(np, [IMAGES["uint8"][:5], maps[0][0][:5], maps[0][1][:5]], {}, None)
    )
