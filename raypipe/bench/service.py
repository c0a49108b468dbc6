"""The raypipe service contender: ``rp.serve`` the recipe on the round's local Ray, and read
epochs through ``rp.loader`` from ranks that are Ray actors holding one logical GPU each (as
Ray Train workers are). Each round serves afresh and shuts the service down, so nothing of
it runs during the other contenders' rounds; its time to first batch runs from ``serve`` to
the last rank's first batch, and img/s is that of the round's timed epochs, steady ones, after
a first (which pays for the pipeline actor's start: its process, imports and first allocations). Ranks take
torch tensors (the loader's default), so these rows need torch.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

from raypipe import types
from raypipe.presets import IMAGENET_MEAN, IMAGENET_STD, resnet50_train

from .contenders import Timing, Workload, check_batch, time_batches
from .reference import SIZE

SERVICE_NAME = "raypipe-bench"


class Rank:
    """A training rank: opens its loader, reads a first epoch and then timed ones, and reports when
    its first batch came (wall clock, comparable with the driver's on one machine) and images/s
    of the timed epochs."""

    def ready(self) -> bool:
        """Answers once the actor runs and has torch loaded, as a training rank has, so neither
        is charged to the service."""
        import torch  # noqa: F401

        return True

    def read_epochs(self, rank: int, world_size: int, seconds: float, uint8: bool) -> dict[str, Any]:
        """Epochs of this rank's batches: the first for the time to the first batch (the pipeline
        actor starts with it), then steady ones, timed, until ``seconds`` have passed (at least
        one). uint8 batches (CHW) are normalized by the loader with
        ``rp.Normalize(..., input_layout="CHW")``."""
        import raypipe as rp

        normalize = rp.Normalize(IMAGENET_MEAN, IMAGENET_STD, input_layout="CHW") if uint8 else None
        loader = rp.loader(SERVICE_NAME, rank=rank, world_size=world_size, normalize=normalize)

        first_at: list[float] = []

        def sizes():
            """Batch sizes of epochs 0, 1, 2, ...; notes when the first batch came and checks it."""
            for epoch in itertools.count():
                loader.set_epoch(epoch)
                for images, _ in loader:
                    if not first_at:
                        first_at.append(time.time())
                        check_batch("raypipe service", images, "float32", (loader.config.batch_size, 3, SIZE, SIZE))
                    yield len(images)

        per_epoch = len(loader)
        timing = time_batches(sizes(), warmup=per_epoch - 1, per_epoch=per_epoch, seconds=seconds)
        return {"first_at": first_at[0], "images": timing.images, "images_per_s": timing.images_per_s}


def service_round(work: Workload, ranks: int, uint8: bool) -> Timing:
    """Serve the recipe (float32, or uint8 that the ranks normalize) to ``ranks`` rank actors
    over the round's files; images/s of the timed epochs, summed over the ranks."""
    import ray

    import raypipe as rp

    actors = [ray.remote(Rank).options(num_gpus=1, num_cpus=0).remote() for _ in range(ranks)]
    service = None
    try:
        ray.get([a.ready.remote() for a in actors])
        start = time.time()
        service = rp.serve(
            resnet50_train,
            name=SERVICE_NAME,
            world_size=ranks,
            seed=work.round,
            last_batch="drop",
            replace=True,
            file_root=work.root,
            batch_size=work.batch_size,
            num_threads=work.threads,
            dtype=types.UINT8 if uint8 else types.FLOAT,
        )
        results = ray.get([a.read_epochs.remote(r, ranks, work.seconds, uint8) for r, a in enumerate(actors)])
    finally:  # ranks first: an acknowledgement in flight to a stopped coordinator makes Ray log retries
        for actor in actors:
            ray.kill(actor)
        if service is not None:
            service.shutdown()
    return Timing(
        first_batch_s=max(r["first_at"] for r in results) - start,
        images=sum(r["images"] for r in results),
        images_per_s=sum(r["images_per_s"] for r in results),
    )
