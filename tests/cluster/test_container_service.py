"""Every container reader under ``rp.serve``: each epoch delivers every sample exactly once,
with ``shuffle="global"`` (random access) and ``shuffle="buffer"`` (sequential extents)."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe.convert.plan import list_source
from raypipe.convert.run import convert
from raypipe.formats.registry import FORMATS, get
from tests.cluster.pipelines import converted

WORLD = 2


@pytest.fixture(scope="module")
def containers(tmp_path_factory, jpeg_files):
    """The 24 JPEGs in every format, labelled with their sample index."""
    root = tmp_path_factory.mktemp("containers")
    listing = root / "list.txt"
    listing.write_text("".join(f"{p} {i}\n" for i, p in enumerate(jpeg_files)))
    source = list_source(str(listing))
    out = {}
    for fmt in FORMATS:
        out[fmt] = str(root / fmt)
        convert(source, out[fmt], get(fmt), part_size=7, workers=1)
    return out


@pytest.mark.parametrize("shuffle", ["global", "buffer"])
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_each_reader_serves_every_sample_exactly_once(cluster, containers, jpeg_files, fmt, shuffle):
    name = f"svc-{fmt}-{shuffle}"
    svc = rp.serve(
        converted,
        name=name,
        dst=containers[fmt],
        world_size=WORLD,
        seed=3,
        shuffle=shuffle,
        block_size=4,
        initial_fill=8,
        num_cpus_per_actor=0.25,
        replace=True,
    )
    try:
        loaders = [rp.loader(name, rank=r, world_size=WORLD, output="numpy") for r in range(WORLD)]
        orders = []
        for epoch in (0, 1):
            seen = []
            for ld in loaders:
                ld.set_epoch(epoch)
                for images, labels in ld:
                    assert images.shape[1:] == (32, 32, 3) and labels.dtype == np.int32
                    seen += [int(s) for s, pad in zip(labels.ravel(), ld.last_is_pad) if not pad]
            assert sorted(seen) == list(range(len(jpeg_files))), f"{fmt}/{shuffle} epoch {epoch}: exactly once"
            orders.append(seen)
        assert orders[0] != orders[1], "a new order each epoch"
        reads = [a["reads"] for a in svc.stats()["actors"]]
        if shuffle == "buffer" and fmt not in ("caffe", "caffe2"):  # LMDB is memory-mapped: no counts
            assert all(r["extent_reads"] > 0 and r["direct_reads"] == 0 for r in reads), reads
        elif shuffle == "global" and fmt not in ("caffe", "caffe2"):
            assert all(r["direct_reads"] > 0 and r["extent_reads"] == 0 for r in reads), reads
    finally:
        svc.shutdown()
