"""The ResNet-50 training recipe per sample in plain Pillow + numpy (what the torch DataLoader
and Ray Data contenders run), and full-image decoding for the decode-only bound."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from raypipe.operators.crop_window import DRAWS, random_crop_window
from raypipe.presets import IMAGENET_MEAN, IMAGENET_STD

SIZE = 224
MEAN = np.array(IMAGENET_MEAN, np.float32).reshape(3, 1, 1)
INV_STD = 1 / np.array(IMAGENET_STD, np.float32).reshape(3, 1, 1)


def reference_sample(source: str | bytes, rng: np.random.Generator) -> np.ndarray:
    """Decode a JPEG (a path or its bytes), take a random-area crop resized to 224x224 in one
    Pillow call (``resize(box=...)``), mirror it half the time and normalize it to float32 CHW."""
    image = Image.open(source if isinstance(source, str) else io.BytesIO(source)).convert("RGB")
    x, y, w, h = random_crop_window(*image.size, (0.08, 1.0), (3 / 4, 4 / 3), rng.random((DRAWS, 10)))
    array = np.asarray(image.resize((SIZE, SIZE), Image.BILINEAR, box=(x, y, x + w, y + h)))
    if rng.random() < 0.5:
        array = array[:, ::-1]
    out = np.empty((3, SIZE, SIZE), np.float32)
    np.subtract(array.transpose(2, 0, 1), MEAN, out=out)
    out *= INV_STD
    return out


def decode_pillow(path: str) -> np.ndarray:
    """The whole image as RGB uint8 HWC, decoded by Pillow (libjpeg-turbo)."""
    return np.asarray(Image.open(path).convert("RGB"))


def decode_turbo(path: str) -> np.ndarray:
    """The whole image as RGB uint8 HWC, decoded by ``raypipe.jpeg_turbo`` (TurboJPEG 3)."""
    from raypipe import jpeg_turbo

    decoder = jpeg_turbo.decoder()
    with open(path, "rb") as f:
        data = np.frombuffer(f.read(), np.uint8)
    decoder.header(data)
    return decoder.decode(data)


def turbo_unavailable() -> str | None:
    """Why ``decode_turbo`` cannot run here, or None when it can."""
    try:
        from raypipe import jpeg_turbo
    except ImportError as exc:
        return f"raypipe.jpeg_turbo cannot be imported ({exc})"
    if not jpeg_turbo.available():
        return "no usable libturbojpeg 3 here (the turbojpeg wheel), or RAYPIPE_TURBOJPEG=0"
    return None
