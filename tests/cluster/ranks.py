"""A training rank living in a Ray actor (as Ray Train workers do), wherever Ray placed it."""

from __future__ import annotations

import os

import numpy as np
import ray

import raypipe as rp


class RankProcess:
    """Opens ``rank``'s loader from wherever Ray placed this actor and reads from it."""

    def first_batch(self, service: str, rank: int, world_size: int) -> str:
        """Read one batch, keeping the loader (and so the rank's pipeline actor) open."""
        self.loader = rp.loader(service, rank=rank, world_size=world_size, output="numpy")
        next(iter(self.loader))
        return ray.get_runtime_context().get_node_id()

    def home(self) -> dict:
        """This rank's node, the GPUs Ray gave it, what its CUDA_VISIBLE_DEVICES says and its niceness."""
        return {
            "niceness": os.getpriority(os.PRIO_PROCESS, 0),
            "node_id": ray.get_runtime_context().get_node_id(),
            "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        }

    def read_epoch(self, service: str, rank: int, world_size: int, epoch: int) -> list[int]:
        """Every real sample label of ``epoch`` for this rank, keeping the loader open."""
        self.loader = rp.loader(service, rank=rank, world_size=world_size, output="numpy")
        self.loader.set_epoch(epoch)
        seen = []
        for _, labels in self.loader:
            seen += [s for s, pad in zip(labels.ravel().tolist(), self.loader.last_is_pad) if not pad]
        return seen

    def epoch_digests(self, service: str, rank: int, world_size: int, epoch: int) -> list[tuple[list[int], str]]:
        """Every batch of ``epoch`` for this rank: its sample labels and a hash of its images."""
        import hashlib

        if getattr(self, "digest_loader", None) is None or self.digest_loader.name != service:
            self.digest_loader = rp.loader(service, rank=rank, world_size=world_size, output="numpy")
        self.digest_loader.set_epoch(epoch)
        return [
            (labels.ravel().tolist(), hashlib.sha1(images.tobytes()).hexdigest())
            for images, labels in self.digest_loader
        ]

    def epoch_outputs(self, service: str, rank: int, world_size: int, epoch: int) -> list[tuple]:
        """Every batch of ``epoch`` for this rank: each output's samples (as arrays; ragged outputs
        sample by sample) and which rows are padding."""
        if getattr(self, "outputs_loader", None) is None or self.outputs_loader.name != service:
            self.outputs_loader = rp.loader(service, rank=rank, world_size=world_size, output="numpy")
        self.outputs_loader.set_epoch(epoch)
        return [
            (*([np.asarray(sample) for sample in output] for output in batch), self.outputs_loader.last_is_pad.tolist())
            for batch in self.outputs_loader
        ]
