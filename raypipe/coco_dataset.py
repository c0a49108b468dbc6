"""A small generated COCO detection dataset (JPEGs and an instances JSON with boxes, polygons,
crowd regions and an image without annotations) for tests, demos and benchmarks."""

from __future__ import annotations

import json
import os

import numpy as np

from .datasets import synthetic_image

#: category ids as COCO has them: not consecutive, not in order
CATEGORY_IDS = (18, 3, 44, 7)


def make_coco_dataset(
    root: str,
    images: int = 12,
    size: tuple[int, int] = (320, 240),
    seed: int = 0,
    vary: float = 0.25,
    quality: int = 90,
) -> tuple[str, str]:
    """Write ``images`` JPEGs around ``size`` (w, h) under ``root/images`` and their annotations to
    ``root/annotations.json``; return ``(file_root, annotations_file)``. Image ids are not in file
    order; each image has 0 to 5 objects (the third has none), each object a box and a polygon, some
    objects are crowds and some are tiny (a side of 1-3 pixels). Existing JPEGs are kept."""
    rng = np.random.default_rng(seed)
    file_root = os.path.join(root, "images")
    os.makedirs(file_root, exist_ok=True)
    entries, annotations = [], []
    for i in range(images):
        w = int(size[0] * rng.uniform(1 - vary, 1 + vary))
        h = int(size[1] * rng.uniform(1 - vary, 1 + vary))
        image_id = 1000 + 37 * ((i * 5) % images)
        name = f"img_{i:03d}.jpg"
        path = os.path.join(file_root, name)
        if not os.path.exists(path):
            synthetic_image(np.random.default_rng([seed, i]), w, h).save(path, quality=quality)
        entries.append({"id": image_id, "file_name": name, "width": w, "height": h})
        count = 0 if i == 2 else int(rng.integers(1, 6))
        for _ in range(count):
            annotations.append(_annotation(rng, len(annotations) + 1, image_id, w, h))
    categories = [{"id": c, "name": f"class_{c}", "supercategory": "thing"} for c in CATEGORY_IDS]
    document = {"images": entries, "annotations": annotations, "categories": categories}
    annotations_file = os.path.join(root, "annotations.json")
    with open(annotations_file, "w", encoding="utf-8") as f:
        json.dump(document, f)
    return file_root, annotations_file


def _annotation(rng: np.random.Generator, ann_id: int, image_id: int, w: int, h: int) -> dict:
    """One object: a box inside the image (a tiny one one time in six), a polygon inside the box."""
    tiny = rng.uniform() < 1 / 6
    bw = float(rng.uniform(1, 3)) if tiny else float(rng.uniform(0.1, 0.6) * w)
    bh = float(rng.uniform(1, 3)) if tiny else float(rng.uniform(0.1, 0.6) * h)
    x = float(rng.uniform(0, w - bw))
    y = float(rng.uniform(0, h - bh))
    corners = int(rng.integers(3, 7))
    angles = np.sort(rng.uniform(0, 2 * np.pi, corners))
    px = x + bw * (0.5 + 0.5 * np.cos(angles))
    py = y + bh * (0.5 + 0.5 * np.sin(angles))
    polygon = np.stack([px, py], axis=1).ravel().round(2).tolist()
    return {
        "id": ann_id,
        "image_id": image_id,
        "category_id": int(CATEGORY_IDS[int(rng.integers(0, len(CATEGORY_IDS)))]),
        "bbox": [round(x, 2), round(y, 2), round(bw, 2), round(bh, 2)],
        "area": round(bw * bh, 2),
        "iscrowd": int(rng.uniform() < 0.15),
        "segmentation": [polygon],
    }
