"""Quick start: the ResNet-50 training pipeline on one machine, no Ray.

With no arguments it generates a small JPEG dataset (4 classes x 32 images) and
runs two epochs through DALI's PyTorch iterator (``raypipe.plugin.pytorch``):

    python examples/quickstart.py
    python examples/quickstart.py --data /data/train --epochs 1 --batch-size 128
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from tqdm import tqdm

from raypipe.backend import gpu_available
from raypipe.datasets import make_jpeg_folder
from raypipe.plugin.pytorch import DALIGenericIterator, LastBatchPolicy
from raypipe.presets import resnet50_train


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", help="folder with one sub-folder of JPEGs per class (default: generated)")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    root = args.data or os.path.join(tempfile.gettempdir(), "raypipe-quickstart")
    if not args.data:
        make_jpeg_folder(root, num_classes=4, per_class=32)
    pipe = resnet50_train(
        file_root=root,
        decoder_device="mixed" if gpu_available() else "cpu",
        batch_size=args.batch_size,
        num_threads=args.threads,
        seed=7,
    )
    with pipe:
        loader = DALIGenericIterator(
            pipe,
            output_map=["images", "labels"],
            reader_name="Reader",
            last_batch_policy=LastBatchPolicy.PARTIAL,
            auto_reset=True,
        )
        for epoch in range(args.epochs):
            start, seen = time.perf_counter(), 0
            for data in tqdm(loader, total=len(loader), desc=f"epoch {epoch}", unit="batch"):
                batch = data[0]  # one dict per pipeline
                seen += len(batch["labels"])
            rate = seen / (time.perf_counter() - start)
            images = batch["images"]
            print(
                f"epoch {epoch}: {seen} images ({rate:.0f} img/s); last batch {tuple(images.shape)} "
                f"{images.dtype}, mean {images.mean():.3f}, labels {batch['labels'].ravel().tolist()[:8]}"
            )


if __name__ == "__main__":
    main()
