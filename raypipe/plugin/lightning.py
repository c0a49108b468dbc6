"""PyTorch Lightning: a ``LightningDataModule`` over a raypipe service (``rp.loader``).

Each Lightning process (one DDP rank) opens its own rank's loader, with the trainer's global
rank and world size, the first time Lightning asks for the training data. Every epoch starts
with ``set_epoch(trainer.current_epoch)``, and ``len()`` is the epoch's batch count, equal on
every rank.

The loader's position travels in Lightning's checkpoints through Lightning's own support for
stateful dataloaders: what ``train_dataloader()`` returns has ``state_dict``/``load_state_dict``,
so the fit loop saves the position beside its progress counters and loads it back exactly when
it resumes an unfinished epoch (``trainer.fit(..., ckpt_path=...)``), before it makes the
epoch's iterator. Lightning counts the batches done before the checkpoint and asks for the rest
of the epoch, without skipping or replaying any itself; the loader continues at the next batch
after the checkpoint. The position is global, so the checkpoint rank 0 writes serves every rank.
Resume with the world size that wrote the checkpoint: Lightning's batch counters count its steps.

``lightning`` is an extra: ``pip install "raypipe[lightning]"``.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from lightning.pytorch import LightningDataModule

from ..errors import ArgumentError

if TYPE_CHECKING:
    from lightning.pytorch import Trainer

    from cluster.loader import Loader

__all__ = ["RaypipeDataModule", "TrainBatches"]

#: What the trainer gives the loader, never the user.
FROM_TRAINER = ("rank", "world_size")


class TrainBatches:
    """What ``train_dataloader()`` returns: the loader's batches of the trainer's current epoch.

    ``len()`` counts the whole epoch (Lightning counts the batches done before a mid-epoch
    checkpoint itself); ``state_dict``/``load_state_dict`` are the loader's, which makes Lightning
    keep the position in its checkpoints."""

    def __init__(self, loader: Loader, trainer: Trainer):
        self.loader = loader
        self.trainer = trainer
        self._loaded = False  # a checkpoint's position waits for the next iteration

    def __len__(self) -> int:
        """Batches in a whole epoch, equal on every rank."""
        return self.loader.config.plan(self.trainer.current_epoch).num_batches

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        """The current epoch's batches; after ``load_state_dict``, those from the loaded position
        on. Lightning makes that iterator while its epoch counter may still name the epoch the
        checkpoint ended (a checkpoint at an epoch's last batch), and trains the next epoch on it."""
        if not self._loaded:
            self.loader.set_epoch(self.trainer.current_epoch)
        self._loaded = False
        return iter(self.loader)

    def state_dict(self) -> dict[str, Any]:
        """The loader's global position (a small plain dict)."""
        return self.loader.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Continue at ``state_dict``'s position with the next iteration."""
        self.loader.load_state_dict(state_dict)
        self._loaded = True


class RaypipeDataModule(LightningDataModule):
    """Training batches of the raypipe service ``service_name`` for every Lightning process.

    ``loader_kwargs`` go to ``rp.loader`` (``output``, ``prefetch``, ``device``, ``normalize``);
    rank and world size come from the trainer. The service must serve the trainer's world size
    (``rp.serve(..., world_size=trainer.world_size)``)."""

    def __init__(self, service_name: str, **loader_kwargs: Any):
        super().__init__()
        if not isinstance(service_name, str) or not service_name:
            raise ArgumentError(f"RaypipeDataModule: service_name must be a non-empty str, got {service_name!r}")
        given = [k for k in FROM_TRAINER if k in loader_kwargs]
        if given:
            raise ArgumentError(f"RaypipeDataModule: {' and '.join(given)} come from the Lightning trainer, not kwargs")
        accepted = _loader_keywords()
        unknown = sorted(set(loader_kwargs) - accepted)
        if unknown:
            raise ArgumentError(f"RaypipeDataModule: unknown loader arguments {unknown} (accepted: {sorted(accepted)})")
        self.service_name = service_name
        self.loader_kwargs = loader_kwargs
        self._train: TrainBatches | None = None

    @property
    def loader(self) -> Loader | None:
        """This process's rank loader (``last_sample_indices``, ``last_is_pad``...), once
        ``train_dataloader()`` opened it."""
        return self._train.loader if self._train is not None else None

    def train_dataloader(self) -> TrainBatches:
        """This rank's batches: its loader is opened on the first call and kept for the next ones
        (a later ``fit`` with another Trainer reads that trainer's epochs)."""
        trainer = self.trainer
        if trainer is None:
            raise ArgumentError("RaypipeDataModule: train_dataloader() needs a Trainer (pass it to trainer.fit)")
        if self._train is None:
            import raypipe as rp

            loader = rp.loader(
                self.service_name, rank=trainer.global_rank, world_size=trainer.world_size, **self.loader_kwargs
            )
            self._train = TrainBatches(loader, trainer)
        self._train.trainer = trainer
        return self._train


def _loader_keywords() -> set[str]:
    """The keyword arguments ``rp.loader`` accepts besides the service, rank and world size."""
    from cluster.loader import Loader

    parameters = inspect.signature(Loader.__init__).parameters
    return set(parameters) - {"self", "name", *FROM_TRAINER}
