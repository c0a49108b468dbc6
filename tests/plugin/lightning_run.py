"""A 2-process DDP Lightning run (CPU, gloo) over a raypipe service, for tests/plugin/test_lightning.py.

Run as ``python -m tests.plugin.lightning_run SERVICE OUT [--ckpt PATH] [--kill-at STEP]`` with
``RAY_ADDRESS`` naming the service's cluster; Lightning starts the second rank by running the same
command. Every training step appends one JSON line to ``OUT/rank<r>.jsonl``: its epoch, batch
index, the samples' labels (the ``indexed`` pipeline labels each sample with its index), the
loader's ``last_sample_indices`` and ``last_is_pad``, and the epoch's length. ``--kill-at STEP``:
every rank SIGKILLs its own process when it starts global step STEP (after writing its line).
Checkpoints go to ``OUT/ckpt`` every 3 steps.
"""

from __future__ import annotations

import argparse
import json
import os
import signal

import lightning.pytorch as pl
import torch
import torch.nn.functional as F

from raypipe.plugin.lightning import RaypipeDataModule

CHECKPOINT_EVERY = 3


class Recorder(pl.LightningModule):
    """A linear model over 32x32 images that writes down every batch it trains on."""

    def __init__(self, out: str, kill_at: int | None):
        super().__init__()
        self.net = torch.nn.Linear(32 * 32 * 3, 32)
        self.out, self.kill_at = out, kill_at

    def training_step(self, batch, batch_idx):
        images, labels = batch
        loader = self.trainer.datamodule.loader
        record = {
            "pid": os.getpid(),
            "epoch": self.current_epoch,
            "batch_idx": batch_idx,
            "step": self.global_step,
            "labels": labels.view(-1).tolist(),
            "indices": loader.last_sample_indices.tolist(),
            "pad": loader.last_is_pad.tolist(),
            "len": len(self.trainer.train_dataloader),
        }
        with open(os.path.join(self.out, f"rank{self.global_rank}.jsonl"), "a") as f:
            f.write(json.dumps(record) + "\n")
        if self.global_step == self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        x = images.float().flatten(1) / 255
        return F.cross_entropy(self.net(x), labels.long().view(-1))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("service")
    parser.add_argument("out")
    parser.add_argument("--ckpt")
    parser.add_argument("--kill-at", type=int)
    args = parser.parse_args()
    pl.seed_everything(0, verbose=False)
    checkpoints = pl.callbacks.ModelCheckpoint(
        dirpath=os.path.join(args.out, "ckpt"), filename="{step}", every_n_train_steps=CHECKPOINT_EVERY, save_top_k=-1
    )
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=2,
        strategy="ddp",
        max_epochs=2,
        callbacks=[checkpoints],
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        default_root_dir=args.out,
    )
    trainer.fit(Recorder(args.out, args.kill_at), datamodule=RaypipeDataModule(args.service), ckpt_path=args.ckpt)


if __name__ == "__main__":
    main()
