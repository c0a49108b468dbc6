"""Detection pipelines the service tests serve (importable by Ray workers)."""

from __future__ import annotations

import raypipe as rp
from raypipe import fn


@rp.pipeline_def(batch_size=3, num_threads=1)
def coco_boxes(file_root, annotations_file):
    """A COCO dataset's images at 32 x 32 with each image's boxes and labels as read (ragged), its
    id, and the boxes and labels of an SSD random crop and flip (ragged too)."""
    jpegs, boxes, labels, ids = fn.readers.coco(
        file_root=file_root, annotations_file=annotations_file, ltrb=True, ratio=True, image_ids=True, name="Reader"
    )
    anchor, shape, crop_boxes, crop_labels = fn.random_bbox_crop(
        boxes, labels, thresholds=[0, 0.1, 0.3, 0.5], scaling=[0.3, 1.0], aspect_ratio=[0.5, 2.0], bbox_layout="xyXY"
    )
    coin = fn.random.coin_flip()
    images = fn.flip(fn.decoders.image_slice(jpegs, anchor, shape), horizontal=coin)
    images = fn.resize(images, resize_x=32, resize_y=32)
    return images, boxes, labels, ids, fn.bb_flip(crop_boxes, ltrb=True, horizontal=coin), crop_labels
