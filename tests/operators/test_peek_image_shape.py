"""``peek_image_shape`` on real JPEGs (and a PNG): DALI 2.4's shapes and types, the header alone,
EXIF orientation as DALI reads it when asked and as raypipe's decoders decode otherwise."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest
from PIL import Image

import raypipe as rp
from raypipe import fn, types
from raypipe.exif import ExifOrientationWarning
from raypipe.keyed_random import SampleContext
from raypipe.operators.peek_image_shape import PeekImageShape


@pytest.fixture(scope="module")
def encoded(jpeg_files) -> list[np.ndarray]:
    """Four real JPEGs and one PNG, as encoded bytes."""
    data = [np.fromfile(path, np.uint8) for path in jpeg_files[:4]]
    png = io.BytesIO()
    Image.open(jpeg_files[4]).save(png, "PNG")
    return [*data, np.frombuffer(png.getvalue(), np.uint8)]


@pytest.fixture(scope="module")
def rotated(jpeg_files) -> list[np.ndarray]:
    """Three JPEGs; the second carries EXIF orientation 6 (stored sideways), the third 3 (upside down)."""
    out = []
    for i, source in enumerate(jpeg_files[:3]):
        exif = Image.Exif()
        if i:
            exif[0x0112] = 6 if i == 1 else 3
        buffer = io.BytesIO()
        Image.open(source).save(buffer, "JPEG", quality=90, exif=exif)
        out.append(np.frombuffer(buffer.getvalue(), np.uint8))
    return out


@pytest.mark.parametrize(
    "args",
    [{}, {"dtype": "INT32"}, {"dtype": "FLOAT"}, {"dtype": "UINT64"}, {"image_type": "GRAY"}, {"image_type": "BGR"}],
)
def test_against_dali(ours, dali, encoded, args):
    def build(x, fn, types):
        return fn.peek_image_shape(x, **{k: getattr(types, v) for k, v in args.items()})

    theirs = dali(encoded, build)
    mine = ours(encoded, lambda x: build(x, fn, types))
    for their, my in zip(theirs[0][0], mine[0][0], strict=True):
        assert my.dtype == their.dtype and my.shape == their.shape == (3,)
        np.testing.assert_array_equal(my, their)


def test_reference_shapes_without_dali(ours, encoded, images):
    (shapes,) = ours(encoded[:4], lambda x: fn.peek_image_shape(x))
    for shape, image in zip(shapes[0], images, strict=True):
        assert shape.dtype == np.int64 and shape.tolist() == list(image.shape)
    (gray,) = ours(encoded[4:], lambda x: fn.peek_image_shape(x, image_type=types.GRAY, dtype=types.INT32))
    assert gray[0][0].dtype == np.int32 and gray[0][0][2] == 1


def test_adjust_orientation_true_is_dalis_default(ours, dali, rotated):
    theirs = dali(rotated, lambda x, fn, types: fn.peek_image_shape(x))
    mine = ours(rotated, lambda x: fn.peek_image_shape(x, adjust_orientation=True))
    for their, my in zip(theirs[0][0], mine[0][0], strict=True):
        np.testing.assert_array_equal(my, their)


def test_stored_shape_by_default_warns_once(rotated):
    op = PeekImageShape("cpu", 0)
    stored = [op.run_sample([rotated[0]], {}, SampleContext(0, 0, 0))]
    with pytest.warns(ExifOrientationWarning, match="sample 1 is a JPEG with EXIF orientation 6") as caught:
        stored += [op.run_sample([data], {}, SampleContext(0, 0, i)) for i, data in enumerate(rotated) if i]
    assert sum(issubclass(w.category, ExifOrientationWarning) for w in caught) == 1
    sideways = Image.open(io.BytesIO(rotated[1].tobytes())).size  # (width, height) as stored
    assert stored[1].tolist() == [sideways[1], sideways[0], 3]
    adjusted = PeekImageShape("cpu", 0, adjust_orientation=True).run_sample([rotated[1]], {}, None)
    assert adjusted.tolist() == [sideways[0], sideways[1], 3]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ExifOrientationWarning)
        explicit = PeekImageShape("cpu", 0, adjust_orientation=False)
        assert explicit.run_sample([rotated[1]], {}, None).tolist() == stored[1].tolist()


def test_invalid_arguments_and_data_are_named(ours):
    with pytest.raises(rp.ArgumentError, match="peek_image_shape: image_type must be types.RGB, BGR or GRAY"):
        PeekImageShape("cpu", 0, image_type="RGB")
    with pytest.raises(rp.ArgumentError, match="peek_image_shape: adjust_orientation must be a bool"):
        PeekImageShape("cpu", 0, adjust_orientation=1)
    with pytest.raises(rp.ArgumentError, match="peek_image_shape: dtype"):
        PeekImageShape("cpu", 0, dtype="pixels")
    with pytest.raises(rp.SampleError, match="peek_image_shape.*not a recognised image format"):
        ours([np.frombuffer(b"not an image", np.uint8)], lambda x: fn.peek_image_shape(x))
