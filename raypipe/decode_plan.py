"""How staging places each image decoder, recorded in the staged graph instead of on the operator.

Staging decides per decoder whether the Mixed stage decodes it on the GPU (``deferred``) and,
when every consumer resizes its output to one fixed size, that size (for DCT-domain scaling)
and whether the resize runs on the host with it (then the decoder resizes while decoding). The
operator stays as it was configured: the CPU stage passes the decoder its :class:`DecodePlan`
with each call, so the same graph staged twice (on a GPU, then for the host, or by a CPU helper)
runs each staging's own way.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .graph import DataNode, OpNode


@dataclass(frozen=True)
class DecodePlan:
    """What staging decided for one decoder: ``deferred`` (the CPU stage only reads the header and
    picks the window; the Mixed stage decodes on the GPU), ``target_size`` (``(width, height)``
    every consumer resizes to; None: no fixed size) and ``resize_on_host`` (that resize runs on the
    host too, so the decoder does it)."""

    deferred: bool = False
    target_size: tuple[int, int] | None = None
    resize_on_host: bool = False


#: A decoder staged on the host with no fixed-size consumer: decode the whole window, no resize.
HOST_DECODE = DecodePlan()


def plan_decoders(
    ordered: Sequence[OpNode], outputs: Sequence[DataNode], host: Collection[OpNode], defer: bool
) -> dict[OpNode, DecodePlan]:
    """A plan for every decoder among the ``host`` nodes (those with ``decode_on_device``), in graph
    order: deferred when ``defer`` and the decoder is mixed; with the size of the one fixed-size
    resize that every consumer applies, when the decoder takes a size hint (``takes_size_hint``)
    and its output is not a pipeline output, resized on the host when the decoder and all those
    consumers run there."""
    plans: dict[OpNode, DecodePlan] = {}
    for node in ordered:
        if node not in host or not hasattr(node.op, "decode_on_device"):
            continue
        deferred = defer and node.device == "mixed"
        size = _fixed_size(node, ordered, outputs) if getattr(node.op, "takes_size_hint", False) else None
        on_host = size is not None and all(c in host for c in _consumers(node, ordered))
        plans[node] = DecodePlan(deferred, size, on_host)
    return plans


def _consumers(node: OpNode, ordered: Sequence[OpNode]) -> list[OpNode]:
    return [c for c in ordered if node.outputs[0] in c.upstream()]


def _fixed_size(node: OpNode, ordered: Sequence[OpNode], outputs: Sequence[DataNode]) -> tuple[int, int] | None:
    """The ``(width, height)`` every consumer of ``node``'s output resizes it to, when they all take
    it as a data input and agree on one fixed size and it is not a pipeline output; else None."""
    if node.outputs[0] in outputs:
        return None
    consumers = _consumers(node, ordered)
    sizes = {getattr(c.op, "fixed_output_size", lambda: None)() for c in consumers}
    if consumers and all(node.outputs[0] in c.inputs for c in consumers) and len(sizes) == 1:
        return sizes.pop()
    return None
