"""The frozen configuration of a service: the one home of every fact its ranks share.

The coordinator, every pipeline actor and every rank loader hold the same
:class:`ServiceConfig`; the epoch plan, batch counts and position states all derive
from it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from .epoch_plan import EpochPlan, plan
from .errors import ArgumentError
from .position import make_state, read_state


@dataclass(frozen=True)
class ServiceConfig:
    """Who reads what: the dataset (length and digest of its sample list), the order
    (seed, shuffle, block and window sizes) and the batching (world size, per-rank batch
    size, last-batch policy)."""

    name: str
    world_size: int
    batch_size: int
    dataset_len: int
    dataset_digest: str
    seed: int = 0
    shuffle: str = "global"
    last_batch: str = "pad"
    block_size: int = 256
    initial_fill: int = 1024

    def __post_init__(self):
        object.__setattr__(self, "last_batch", self.plan(0).last_batch)  # the plan validates every field

    def plan(self, epoch: int, start: int = 0) -> EpochPlan:
        """Epoch ``epoch`` of this service, picking up at stream position ``start``."""
        return plan(
            self.dataset_len, self.seed, epoch, self.world_size, self.batch_size,
            self.shuffle, self.last_batch, self.block_size, self.initial_fill, start,
        )  # fmt: skip

    def order_fields(self) -> dict[str, Any]:
        """What a position depends on: everything but the name and the world size."""
        fields = asdict(self)
        del fields["name"], fields["world_size"]
        return fields

    def state(self, epoch: int, start: int, next_batch: int, **info: Any) -> dict[str, Any]:
        """The position state of a rank about to read batch ``next_batch`` of the epoch that
        began at stream position ``start``: (epoch, stream offset), world-size free."""
        p = self.plan(epoch, start)
        if next_batch >= p.num_batches:
            return make_state(self.order_fields(), epoch + 1, 0, world_size=self.world_size, **info)
        return make_state(self.order_fields(), epoch, p.offset_after(next_batch), world_size=self.world_size, **info)

    def resume(self, state: Any, *, owner: str, strict: bool = True) -> tuple[int, int]:
        """(epoch, start) at which ``state`` continues in this service, any world size."""
        epoch, offset = read_state(state, self.order_fields(), owner=owner, strict=strict)
        if offset >= self.dataset_len:
            if strict:
                raise ArgumentError(f"{owner}: state offset {offset} is past the {self.dataset_len} samples")
            return epoch + 1, 0
        return epoch, offset
