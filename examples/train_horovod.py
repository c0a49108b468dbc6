"""Train a small model with Horovod (PyTorch, Gloo) fed by a raypipe service.

Needs a running Ray cluster (``ray start --head``, or ``RAY_ADDRESS``) and Horovod
(``bash cluster/install_horovod.sh``). Rank 0 starts the service; every rank reads its
own batches through ``rp.loader`` with ``hvd.rank()`` / ``hvd.size()``:

    horovodrun -np 2 -H localhost:2 --gloo python examples/train_horovod.py
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile

import horovod.torch as hvd
import ray
import torch
import torch.nn.functional as F
from tqdm import tqdm

import raypipe as rp
from raypipe import fn
from raypipe.datasets import make_jpeg_folder


@rp.pipeline_def(batch_size=8, num_threads=1)
def train_pipe(file_root: str):
    jpegs, labels = fn.readers.file(file_root=file_root, name="Reader")
    images = fn.decoders.image_random_crop(jpegs)
    return fn.resize(images, resize_x=32, resize_y=32), labels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", help="folder of class folders of JPEGs (default: generated)")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--service", default="horovod-demo")
    args = parser.parse_args()
    hvd.init()
    rank, world = hvd.rank(), hvd.size()
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"), log_to_driver=False, logging_level=logging.ERROR)
    root = args.data or os.path.join(tempfile.gettempdir(), "raypipe-horovod-demo")
    svc = None
    if rank == 0:
        if not args.data:
            make_jpeg_folder(root, num_classes=4, per_class=20)
        svc = rp.serve(
            train_pipe,
            name=args.service,
            world_size=world,
            seed=0,
            replace=True,
            file_root=root,
        )
    hvd.allreduce(torch.zeros(1), name="service-ready")
    loader = rp.loader(args.service, rank=rank, world_size=world)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(32 * 32 * 3, 4))
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.01), named_parameters=model.named_parameters()
    )
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    for epoch in range(args.epochs):
        loader.set_epoch(epoch)
        steps, total = 0, 0.0
        for images, labels in tqdm(loader, desc=f"epoch {epoch}", unit="batch", disable=rank != 0, leave=False):
            loss = F.cross_entropy(model(images.float().permute(0, 3, 1, 2) / 255), labels.long().view(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            steps, total = steps + 1, total + loss.item()
        mean_loss = hvd.allreduce(torch.tensor(total / max(steps, 1)), name=f"loss{epoch}").item()
        print(
            f"raypipe-horovod rank={rank} epoch={epoch} steps={steps} len={len(loader)} loss={mean_loss:.4f}",
            flush=True,
        )
    weights = torch.cat([p.detach().view(-1) for p in model.parameters()])
    gathered = hvd.allgather(weights.view(1, -1))
    print(f"raypipe-horovod rank={rank} replicas_in_sync={bool(torch.allclose(gathered[0], gathered[-1]))}", flush=True)
    if svc is not None:  # every rank's loader is still open: show where their pipeline actors run
        gpus = [a.get("cuda_visible_devices") for a in svc.stats()["actors"]]
        print(f"raypipe-horovod pipeline_actor_gpus={gpus}", flush=True)
    hvd.allreduce(torch.zeros(1), name="done")
    if svc is not None:
        svc.shutdown()


if __name__ == "__main__":
    main()
