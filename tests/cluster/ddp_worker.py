"""One DDP rank (gloo) training a few steps through rp.loader; run in a spawned process."""

from __future__ import annotations

import os

import ray
import torch
import torch.distributed as dist
import torch.nn.functional as F

import raypipe as rp


def train_rank(rank: int, world: int, address: str, service: str, port: int, results) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    ray.init(address=address, log_to_driver=False)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(32 * 32 * 3, 24))
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = rp.loader(service, rank=rank, world_size=world)
    seen, losses = [[], []], []
    for epoch in range(2):
        loader.set_epoch(epoch)
        for images, labels in loader:
            x = images.float().permute(0, 3, 1, 2) / 255
            loss = F.cross_entropy(model(x), labels.long().view(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            seen[epoch].extend(labels.view(-1)[~torch.from_numpy(loader.last_is_pad)].tolist())
    weights = torch.cat([p.detach().view(-1) for p in model.parameters()])
    results.put((rank, len(loader), seen, losses, weights.numpy()))
    dist.destroy_process_group()
    ray.shutdown()
