"""Train a small CNN with PyTorch DDP on Ray Train, fed by a raypipe service.

With no arguments: a local Ray instance with 2 logical GPUs, a generated JPEG dataset,
2 gloo ranks, 2 epochs. On a real cluster, submit it as a job:

    ray job submit --working-dir . -- python examples/train_ddp.py --data /data/train --workers 16 --gpu

Every rank's loader starts the rank's pipeline actor on the rank's node and GPU (the
service reserves no GPU of its own); every rank reads its own shard of each epoch through
``rp.loader`` and all ranks get the same number of batches. Asking for more workers than
the cluster can hold fails at once, naming the resource. ``--cpu-helpers N`` (or ``auto``)
adds CPU helper actors that run the pipelines' CPU stage on other CPUs of the cluster
(CPU-only nodes first); the summary printed at the end shows them.

Every ``--checkpoint-every`` steps the ranks report a Ray Train checkpoint holding the model, the
optimizer and the loader's position (``rp.train.save``). ``--fail-at STEP`` makes the last rank
kill its own process once at that step: Ray Train restarts the worker group from the last
checkpoint (``FailureConfig(max_failures=1)``), each restarted rank's ``rp.loader`` re-attaches
to the running service and resumes from the checkpoint's position, and the steps since that
checkpoint are trained again on the same samples.

The driver shows a progress bar over every rank's batches (from the service's acknowledged
progress) and each rank's per-epoch results; Ray's own logs stay in Ray's log files
(``--verbose`` shows them, and raypipe's INFO messages).
"""

from __future__ import annotations

import argparse
import logging
import os
import queue
import signal
import tempfile
import threading
import time

import ray
import torch
import torch.nn.functional as F
from ray.experimental import internal_kv
from ray.train import (
    Checkpoint,
    FailureConfig,
    RunConfig,
    ScalingConfig,
    TrainingFailedError,
    get_checkpoint,
    get_context,
    report,
)
from ray.train.torch import TorchTrainer, prepare_model
from ray.util.queue import Queue
from tqdm import tqdm

import raypipe as rp
from cluster.placement import require_resources
from raypipe import log
from raypipe.datasets import make_jpeg_folder
from raypipe.presets import num_classes, resnet50_train

#: How long after the last checkpoint Ray Train has surely registered it (its health check runs
#: every RAY_TRAIN_HEALTH_CHECK_INTERVAL_S, 2 s by default).
REGISTERED_S = float(os.environ.get("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "2")) + 1.0


def small_cnn(num_classes: int) -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, stride=2, padding=1),
        torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 3, stride=2, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(32, num_classes),
    )


def train_loop(config: dict) -> None:
    """One DDP rank: its loader, a DDP-wrapped model, SGD, and every ``checkpoint_every`` steps a
    checkpoint of the model, the optimizer and the loader's position. Rank, world size and, after a
    restart, the position of the checkpoint Ray Train restored all reach ``rp.loader`` from Ray
    Train, so a restarted group (of any size) picks up where that checkpoint left off."""
    began = time.time()
    loader = rp.loader(config["service"])
    opened_s = time.time() - began
    ctx = get_context()
    rank = ctx.get_world_rank()
    model = prepare_model(small_cnn(config["classes"]))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    device = next(model.parameters()).device
    step = restore(model, opt)
    restarted = step > 0 and rank == 0
    resumed = (step, loader.epoch)
    for epoch in range(loader.epoch, config["epochs"]):
        loader.set_epoch(epoch)
        start, seen, total = time.perf_counter(), 0, 0.0
        for images, labels in loader:
            images, labels = images.to(device), labels.to(device).long().view(-1)
            loss = F.cross_entropy(model(images), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            seen += len(labels)
            total += loss.item() * len(labels)
            if restarted:
                restarted = False
                config["results"].put({"restart": _restart_line(config, *resumed, opened_s)})
            step += 1
            if step == config["fail_at"] and rank == ctx.get_world_size() - 1 and _first_failure(config):
                config["results"].put({"failure": f"rank {rank} kills its own process at step {step} (--fail-at)"})
                # Ray Train registers a reported checkpoint at its next health check (every 2 s): a
                # rank that died sooner would restart from the checkpoint before the last
                time.sleep(REGISTERED_S)
                internal_kv._internal_kv_put(_failure_key(config), str(time.time()))  # when it died
                os.kill(os.getpid(), signal.SIGKILL)
            if config["checkpoint_every"] and step % config["checkpoint_every"] == 0:
                save(model, opt, loader, step, rank)
        metrics = {
            "epoch": epoch,
            "rank": rank,
            "batches": len(loader),
            "images": seen,
            "loss": round(total / max(seen, 1), 4),
            "img_per_s": round(seen / (time.perf_counter() - start)),
        }
        config["results"].put(metrics)
        report(metrics)


def save(model: torch.nn.Module, opt: torch.optim.Optimizer, loader, step: int, rank: int) -> None:
    """Report a checkpoint: rank 0 writes the model, the optimizer, the step and the loader's
    position (the same on every rank: the ranks step together); the others report no files."""
    with tempfile.TemporaryDirectory() as directory:
        if rank != 0:
            report({"step": step})
            return
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, f"{directory}/model.pt")
        rp.train.save(loader, directory)
        report({"step": step}, checkpoint=Checkpoint.from_directory(directory))


def restore(model: torch.nn.Module, opt: torch.optim.Optimizer) -> int:
    """Load the model and the optimizer from the checkpoint Ray Train restored, if any; the step it
    was made at (0 without one). The loader restored itself when it opened."""
    checkpoint = get_checkpoint()
    if checkpoint is None:
        return 0
    with checkpoint.as_directory() as directory:
        saved = torch.load(f"{directory}/model.pt", map_location=next(model.parameters()).device)
    model.load_state_dict(saved["model"])
    opt.load_state_dict(saved["opt"])
    return saved["step"]


def _restart_line(config: dict, step: int, epoch: int, opened_s: float) -> str:
    """What a restarted rank 0 says at its first batch: where it resumed and how long it took."""
    died = internal_kv._internal_kv_get(_failure_key(config))
    since = f"; first batch {time.time() - float(died):.1f} s after the rank died" if died else ""
    return f"resumed from the checkpoint of step {step} in epoch {epoch}{since}; rp.loader opened in {opened_s:.1f} s"


def _failure_key(config: dict) -> bytes:
    return f"raypipe-demo/{config['run']}/died".encode()


def _first_failure(config: dict) -> bool:
    """True once per run: Ray's key-value store outlives the worker, and remembers when it died."""
    return not internal_kv._internal_kv_put(_failure_key(config), str(time.time()), overwrite=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--data", help="folder of class folders of JPEGs, or its conversion by raypipe convert (default: generated)"
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--gpu", action="store_true", help="train on GPUs (nccl); default CPU (gloo)")
    parser.add_argument("--verbose", action="store_true", help="show Ray's logs and raypipe's INFO messages")
    parser.add_argument(
        "--checkpoint-every", type=int, default=4, help="checkpoint model and loader every N steps (0: never)"
    )
    parser.add_argument(
        "--fail-at",
        type=int,
        default=0,
        help="the last rank kills its own process (SIGKILL) once at this step, to show the restart and resume",
    )
    parser.add_argument(
        "--storage",
        help="where Ray Train keeps checkpoints (default: a temporary folder; on several nodes a shared file "
        "system or a bucket)",
    )
    parser.add_argument(
        "--cpu-helpers",
        default="0",
        help="CPU helper actors running the pipelines' CPU stage anywhere in the cluster: a number or 'auto'",
    )
    args = parser.parse_args()
    if args.checkpoint_every < 0 or args.fail_at < 0:
        parser.error("--checkpoint-every and --fail-at must be >= 0")
    cpu_helpers = args.cpu_helpers if args.cpu_helpers == "auto" else int(args.cpu_helpers)
    root = args.data or os.path.join(tempfile.gettempdir(), "raypipe-ddp-demo")
    if not args.data:
        make_jpeg_folder(root, num_classes=4, per_class=40)
    if args.verbose:
        log.set_level("INFO")
    quiet = {"log_to_driver": args.verbose, "logging_level": logging.INFO if args.verbose else logging.ERROR}
    if not ray.is_initialized():
        if os.environ.get("RAY_ADDRESS"):
            ray.init(**quiet)
        else:
            ray.init(
                address="local",  # a fresh local instance, never a stale one left in /tmp/ray
                num_cpus=max(4, os.cpu_count() or 1),
                num_gpus=args.workers,
                include_dashboard=False,
                **quiet,
            )
    classes = num_classes(root)
    per_worker = {"CPU": 1.0} | ({"GPU": 1.0} if args.gpu else {})
    require_resources("Ray Train workers", args.workers, per_worker)
    svc = rp.serve(
        resnet50_train,
        name="ddp-demo",
        world_size=args.workers,
        seed=0,
        shuffle="global",
        last_batch="pad",
        replace=True,
        file_root=root,
        size=64,
        batch_size=16,
        num_threads=1,
        decoder_device="mixed",
        cpu_helpers=cpu_helpers,
    )
    results = Queue()
    run = f"ddp-demo-{time.strftime('%Y%m%d-%H%M%S')}"  # a new run: Ray Train resumes a run of the same name
    try:
        trainer = TorchTrainer(
            train_loop,
            train_loop_config={
                "service": "ddp-demo",
                "run": run,
                "epochs": args.epochs,
                "classes": classes,
                "results": results,
                "checkpoint_every": args.checkpoint_every,
                "fail_at": args.fail_at,
            },
            scaling_config=ScalingConfig(num_workers=args.workers, use_gpu=args.gpu, resources_per_worker=per_worker),
            run_config=RunConfig(
                name=run,
                storage_path=args.storage or os.path.join(tempfile.gettempdir(), "raypipe-ddp-runs"),
                # a worker group that fails restarts once from the last checkpoint; Ray Train waits 60 s
                # for its workers' resources per attempt: give up after two
                failure_config=FailureConfig(max_failures=1, controller_failure_limit=1),
            ),
        )
        try:
            result = fit_with_progress(trainer, svc, args.epochs, results)
        except TrainingFailedError as exc:
            free = {k: ray.available_resources().get(k, 0) for k in per_worker}
            raise SystemExit(
                f"training failed: {exc}\n(each of the {args.workers} workers needs {per_worker}; "
                f"free now: {free}; the pipeline actors reserve none)"
            ) from None
        except KeyboardInterrupt:
            print("\ninterrupted: the service is shut down")
            raise SystemExit(130) from None
        print("training finished:", "error" if result.error else "ok")
        print_summary(svc.stats())
    finally:
        svc.shutdown()


def fit_with_progress(trainer: TorchTrainer, svc, epochs: int, results: Queue):
    """Run ``trainer.fit()`` in a thread; meanwhile show every rank's acknowledged batches as a
    progress bar and each rank's per-epoch results as they arrive."""
    outcome: dict = {}
    thread = threading.Thread(target=lambda: outcome.update(run=_attempt(trainer.fit)), daemon=True)
    thread.start()
    per_epoch = svc.config.plan(0, 0).num_batches
    with tqdm(total=epochs * per_epoch * svc.config.world_size, unit="batch", desc="training") as bar:
        while thread.is_alive() or not results.empty():
            thread.join(timeout=0.5)
            progress = svc.snapshot()["progress"].values()
            bar.update(min(bar.total, sum(e * per_epoch + k for e, k in progress)) - bar.n)
            while True:
                try:
                    tqdm.write("  " + ", ".join(f"{k} {v}" for k, v in results.get_nowait().items()))
                except queue.Empty:
                    break
    value, error = outcome["run"]
    if error is not None:
        raise error
    return value


def _attempt(call):
    try:
        return call(), None
    except BaseException as exc:  # re-raised in the main thread
        return None, exc


def print_summary(stats: dict) -> None:
    """Per rank: batches, stall and where it trained (its pipeline actor ran there too); the CPU helpers."""
    for rank, timing in sorted(stats["ranks"].items()):
        where = stats["attached"].get(rank, {})
        stall = "-" if timing["stall_total"] is None else f"{100 * timing['stall_total']:.0f}%"
        print(
            f"rank {rank}: {timing['batches']} batches, waited for input {stall} of the time; "
            f"trained on node {where.get('node_id', '?')[:8]}, GPU {where.get('gpu')}"
        )
    helpers = stats["helpers"]
    print(f"CPU helpers: {helpers['mode']} requested, {len(helpers['running'])} running at the end")


if __name__ == "__main__":
    main()
