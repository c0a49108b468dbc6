"""``segmentation.select_masks``: the polygons (and their vertices) of the masks a sample's
``mask_ids`` names, in the COCO reader's polygon format, as DALI's.

``polygons`` rows are ``[mask_id, first_vertex, end_vertex)`` into ``vertices``. The output holds
the selected masks in the order ``mask_ids`` gives them, each mask's polygons in their input order,
its vertices copied after those before, and the rows renumbered into the new vertices; with
``reindex_masks`` a mask's id becomes its place in ``mask_ids``. DALI 2.4 keeps only the last
polygon of a mask that has several (COCO objects often do); here every polygon is kept.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..operator import Operator, Schema, register

OP = "segmentation.select_masks"


@register
class SelectMasks(Operator):
    """The polygons and vertices of the selected masks."""

    schema = Schema(OP, devices=("cpu",), min_inputs=3, max_inputs=3, num_outputs=2)

    def configure(self, reindex_masks: bool = False) -> None:
        self.reindex_masks = bool(reindex_masks)

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        return ""

    def compute(self, xp, inputs, args, ctx):
        ids, polygons, vertices = (np.asarray(x) for x in inputs)
        ids = ids.reshape(-1)
        if polygons.ndim != 2 or polygons.shape[1] != 3 or polygons.dtype.kind not in "iu":
            raise ValueError(f"{OP}: polygons must be integer rows of [mask_id, start, end], got {polygons.shape}")
        if vertices.ndim != 2:
            raise ValueError(f"{OP}: vertices must be 2-D (a row of coordinates each), got {vertices.shape}")
        repeated = sorted({int(i) for i in ids if (ids == i).sum() > 1})
        if repeated:
            raise ValueError(f"{OP}: mask_ids repeats {repeated}")
        rows, pieces, cursor = [], [], 0
        for place, mask in enumerate(ids.tolist()):
            chosen = polygons[polygons[:, 0] == mask]
            if not len(chosen):
                raise ValueError(
                    f"{OP}: mask id {mask} is in no polygon of the sample (ids {sorted(set(polygons[:, 0].tolist()))})"
                )
            for _, start, end in chosen.tolist():
                if not 0 <= start <= end <= len(vertices):
                    raise ValueError(
                        f"{OP}: mask {mask}'s polygon [{start}, {end}) is outside the sample's {len(vertices)} vertices"
                    )
                pieces.append(vertices[start:end])
                rows.append((place if self.reindex_masks else mask, cursor, cursor + end - start))
                cursor += end - start
        out_polygons = np.array(rows, dtype=np.int32).reshape(-1, 3)
        out_vertices = np.concatenate(pieces) if pieces else np.empty((0, vertices.shape[1]), vertices.dtype)
        return out_polygons, np.ascontiguousarray(out_vertices)
