"""A Ray Train worker's training function for the Ray Train tests (importable by Ray workers).

It trains nothing (the ranks meet at a barrier every step, as DDP's all-reduce makes them): its
first line logs when the function began and when its loader was ready, then each step logs what
the rank's loader delivered (epoch, the samples and their padding, a digest of the image bytes)
to one file per process, checkpoints the step counter and the loader's position every ``every``
steps (``rp.train.save``, rank 0), dies hard once at ``fail_at`` on ``fail_rank`` (SIGKILL of its
own process) or, at ``lose_node_at``, asks the driver to remove its node from the cluster and waits
to go with it. ``settle_s`` after a checkpoint that comes before the failure gives Ray Train's
controller time to register it: it collects reports when it polls its workers (every 2 s by
default, more often in the tests), and a worker that dies before then restarts from the
checkpoint before.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import tempfile
import time

import ray
import torch.distributed as dist
from ray import train
from ray.experimental import internal_kv

import raypipe as rp

#: Where a worker names the node it wants removed (``lose_node_at``, tests/cluster/test_ray_train.py).
REMOVE_KEY = b"raypipe-test/remove-node"


def train_loop(config: dict) -> None:
    began = time.time()
    loader = rp.loader(config["service"])  # rank, world size and the restored position from Ray Train
    ready = time.time()
    ctx = train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    step = 0
    checkpoint = train.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as directory, open(os.path.join(directory, "step.json")) as f:
            step = json.load(f)["step"]
    restored = step
    path = os.path.join(config["logs"], f"rank{rank}-pid{os.getpid()}.jsonl")
    with open(path, "a") as log:
        log.write(json.dumps({"began": began, "loader_ready": ready, "restored": restored}) + "\n")
        for epoch in range(loader.epoch, config["epochs"]):
            loader.set_epoch(epoch)
            for images, _labels in loader:
                dist.barrier()  # the ranks step together, as DDP's gradient all-reduce makes them
                step += 1
                entry = {
                    "step": step,
                    "epoch": epoch,
                    "rank": rank,
                    "world": world,
                    "restored": restored,
                    "indices": loader.last_sample_indices.tolist(),
                    "pad": loader.last_is_pad.tolist(),
                    "digest": hashlib.sha1(images.numpy().tobytes()).hexdigest(),
                    "time": time.time(),
                }
                log.write(json.dumps(entry) + "\n")
                log.flush()
                if step == config.get("fail_at") and rank == config.get("fail_rank", 1) and _first_failure(config):
                    os.kill(os.getpid(), signal.SIGKILL)
                if step == config.get("lose_node_at") and rank == config.get("fail_rank", 1) and _first_failure(config):
                    _ask_to_remove_my_node()
                if step % config["every"] == 0:
                    _checkpoint(loader, step, rank)
                    if step < max(config.get("fail_at", 0), config.get("lose_node_at", 0)):
                        time.sleep(config.get("settle_s", 0.0))


def _first_failure(config: dict) -> bool:
    """True for the first process that asks (a key in Ray's store outlives the worker)."""
    key = f"raypipe-test-failed/{config['logs']}".encode()
    return not internal_kv._internal_kv_put(key, b"1", overwrite=False)


def _ask_to_remove_my_node() -> None:
    """Name this worker's node to the driver (which removes it from the cluster), then wait to go
    with it."""
    internal_kv._internal_kv_put(REMOVE_KEY, ray.get_runtime_context().get_node_id().encode())
    while True:
        time.sleep(1)


def _checkpoint(loader, step: int, rank: int) -> None:
    with tempfile.TemporaryDirectory() as directory:
        if rank == 0:
            with open(os.path.join(directory, "step.json"), "w") as f:
                json.dump({"step": step}, f)
            rp.train.save(loader, directory)
            train.report({"step": step}, checkpoint=train.Checkpoint.from_directory(directory))
        else:
            train.report({"step": step})
