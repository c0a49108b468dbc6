"""The ResNet-50 training preset reads a folder of JPEGs, or a conversion of it by ``raypipe
convert`` with the format's reader: the same samples in the same order either way, unshuffled
(shuffled, the file reader shuffles its listing first, as DALI's does; container readers do not). The random
crops are the same where the conversion's labels need no conversion (Caffe's LMDB): the draws are
keyed by each operator's place in the graph, and the other formats' labels take one operator more."""

from __future__ import annotations

import os

import numpy as np
import pytest

from raypipe.convert.plan import list_source
from raypipe.convert.run import convert
from raypipe.errors import UsageError
from raypipe.formats.registry import get
from raypipe.presets import num_classes, resnet50_train


def batches(root: str, count: int) -> list[tuple[np.ndarray, np.ndarray]]:
    with resnet50_train(
        root, size=32, random_shuffle=False, batch_size=5, num_threads=2, device_id=None, seed=3
    ) as pipe:
        out = []
        for _ in range(count):
            images, labels = pipe.run()
            out.append((np.stack([images.at(i) for i in range(5)]), np.stack([labels.at(i) for i in range(5)])))
    return out


@pytest.mark.parametrize("fmt", ["tfrecord", "webdataset", "recordio", "caffe"])
def test_a_conversion_gives_the_batches_of_its_folder(tmp_path, jpeg_root, fmt):
    dst = str(tmp_path / fmt)
    convert(list_source(jpeg_root), dst, get(fmt), part_size=8, workers=1)
    for (images, labels), (want_images, want_labels) in zip(batches(dst, 3), batches(jpeg_root, 3)):
        assert labels.dtype == want_labels.dtype == np.int32
        np.testing.assert_array_equal(labels, want_labels)
        assert images.shape == want_images.shape == (5, 3, 32, 32) and images.dtype == want_images.dtype
        if fmt == "caffe":
            np.testing.assert_array_equal(images, want_images)


def test_the_classes_of_a_folder_and_of_its_conversion(tmp_path, jpeg_root, jpeg_files):
    dst = str(tmp_path / "tfrecord")
    convert(list_source(jpeg_root), dst, get("tfrecord"), part_size=8, workers=1)
    assert num_classes(jpeg_root) == num_classes(dst) == 4
    listed = tmp_path / "list.txt"
    listed.write_text("".join(f"{path} {i % 3}\n" for i, path in enumerate(jpeg_files)))
    from_list = str(tmp_path / "from-list")
    convert(list_source(str(listed)), from_list, get("tfrecord"), part_size=8, workers=1)
    assert not os.path.exists(os.path.join(from_list, "classes.txt"))
    with pytest.raises(UsageError, match="without classes.txt"):
        num_classes(from_list)
