"""Small generated image datasets for demos, tests and benchmarks."""

from __future__ import annotations

import os

import numpy as np
from PIL import Image
from tqdm import tqdm


def synthetic_image(rng: np.random.Generator, width: int, height: int) -> Image.Image:
    """An RGB image with smooth gradients, blocks of colour and mild noise, so that JPEG
    files have realistic size and structure (about 4-6 bits per pixel at quality 90)."""
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    base = rng.uniform(0, 255, 3)
    slope = rng.uniform(-0.5, 0.5, (2, 3))
    img = base + xx[..., None] * slope[0] + yy[..., None] * slope[1]
    for _ in range(12):
        x0, y0 = rng.integers(0, width), rng.integers(0, height)
        w, h = rng.integers(width // 10, width // 2), rng.integers(height // 10, height // 2)
        img[y0 : y0 + h, x0 : x0 + w] += rng.uniform(-80, 80, 3)
    img += rng.normal(0, 24, img.shape)
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8), "RGB")


def make_jpeg_folder(
    root: str,
    num_classes: int = 4,
    per_class: int = 16,
    size: tuple[int, int] = (500, 375),
    quality: int = 90,
    seed: int = 0,
    vary: float = 0.2,
    progress: bool = True,
) -> list[str]:
    """Write ``num_classes`` folders of ``per_class`` JPEGs around ``size`` (w, h), each side
    varied by up to ``vary``; return the paths in reader order. Existing files are kept. A
    progress bar shows on a terminal while files are written (``progress=False``: never)."""
    rng = np.random.default_rng(seed)
    paths = []
    bar = tqdm(total=num_classes * per_class, desc="generating JPEGs", unit="img", leave=False,
               disable=None if progress else True)  # fmt: skip
    for c in range(num_classes):
        folder = os.path.join(root, f"class_{c:03d}")
        os.makedirs(folder, exist_ok=True)
        for i in range(per_class):
            w = int(size[0] * rng.uniform(1 - vary, 1 + vary))
            h = int(size[1] * rng.uniform(1 - vary, 1 + vary))
            path = os.path.join(folder, f"img_{i:05d}.jpg")
            image_rng = np.random.default_rng([seed, c, i])
            if not os.path.exists(path):
                synthetic_image(image_rng, w, h).save(path, quality=quality)
            bar.update()
            paths.append(path)
    bar.close()
    return paths
