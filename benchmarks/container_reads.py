"""Read throughput of the file folder and of every container format on the same images, and
how far ``shuffle="buffer"`` is from a uniform shuffle.

    python benchmarks/container_reads.py                 # 2,000 generated JPEGs, cold and warm page cache
    python benchmarks/container_reads.py --images 500 --rounds 1

Reads only (no decode): a reader-only pipeline, 2 threads, batch 64, driven by the service's
epoch plan for one rank with ``shuffle="none"`` (sequential), ``"buffer"`` and ``"global"``
(random access), as the service reads them (whole extents read ahead for the first two, one
``pread`` per record for the last). "cold" evicts the files from the page cache first (``posix_fadvise``
DONTNEED), "warm" reads them from it. Prints one table per part; ratios compare with the
folder of files in the same run."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

import raypipe as rp
from raypipe import fn
from raypipe.bench.dataset import cache_dir, prepare
from raypipe.convert.plan import list_source
from raypipe.convert.run import convert
from raypipe.epoch_plan import plan
from raypipe.formats.registry import get, read_converted

FORMATS = ("caffe", "caffe2", "tfrecord", "webdataset", "recordio")
ORDERS = ("none", "buffer", "global")


def reader_node(source: str, where: str):
    """The reader of ``source`` (``files`` or a format converted into ``where``)."""
    if source == "files":
        return fn.readers.file(file_root=where, name="Reader")
    return read_converted(where, name="Reader")


@rp.pipeline_def(batch_size=64, num_threads=2, device_id=None, seed=0)
def read_only(source: str, where: str):
    data, label = reader_node(source, where)
    return data, label


def data_files(source: str, where: str) -> list[str]:
    if source == "files":
        return [os.path.join(d, f) for d, _, fs in os.walk(where) for f in fs]
    if source in ("caffe", "caffe2"):
        return [os.path.join(where, "data.mdb")]
    return [os.path.join(where, f) for f in os.listdir(where) if f.startswith("shard-")]


def evict(paths: list[str]) -> None:
    """Drop ``paths`` from the page cache (clean pages only: they were written and synced)."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def time_epoch(source: str, where: str, order: str, cold: bool, n: int) -> tuple[float, float]:
    """Samples/s and MB/s reading one epoch in ``order``."""
    pipe = read_only(source=source, where=where)
    pipe.build()
    epoch = plan(n, seed=0, epoch=0, world_size=1, batch_size=64, shuffle=order, last_batch="partial")
    if cold:
        evict(data_files(source, where))
    began = time.perf_counter()
    pipe.engine.drive((epoch.batch(0, k) for k in range(epoch.num_batches)), sequential=order != "global")
    samples = nbytes = 0
    while True:
        try:
            data, _ = pipe.run()
        except StopIteration:
            break
        samples += len(data)
        nbytes += sum(np.asarray(data.at(i)).nbytes for i in range(len(data)))
    seconds = time.perf_counter() - began
    pipe.close()
    return samples / seconds, nbytes / 1e6 / seconds


def order_quality(n: int, fills: tuple[int, ...], block_size: int = 256) -> list[tuple]:
    """For ``shuffle="buffer"`` with each window, and for a global shuffle: mean displacement
    (fraction of N; a uniform shuffle gives 1/3), Spearman rank correlation between sample and
    position (uniform: 0), and the fraction of consecutive positions holding samples less than a
    block apart (uniform: about 2 x block / N)."""
    rows = []
    for name, shuffle, fill in [("global", "global", 1024)] + [(f"buffer, window {f}", "buffer", f) for f in fills]:
        p = plan(
            n, seed=0, epoch=0, world_size=1, batch_size=n, shuffle=shuffle, initial_fill=fill, block_size=block_size
        )
        order = p.batch(0, 0).sample_indices.astype(np.int64)
        position = np.empty(n, np.int64)
        position[order] = np.arange(n)
        displacement = float(np.abs(position - np.arange(n)).mean() / n)
        rho = float(np.corrcoef(np.arange(n), position)[0, 1])
        near = float(np.mean(np.abs(np.diff(order)) < block_size))
        rows.append((name, displacement, rho, near))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--order-n", type=int, default=1_281_167, help="dataset size for the order statistics")
    args = parser.parse_args(argv)

    data = prepare(None, args.images)
    source = list_source(data.root)
    n = len(source.samples)
    print(f"{n} JPEGs, {data.mean_kib:.0f} KiB mean ({data.source})", flush=True)
    where = {"files": data.root}
    for name in FORMATS:
        where[name] = os.path.join(cache_dir(), f"containers-{n}", name)
        summary = convert(source, where[name], get(name), part_size=256, workers=2)
        print(f"  {name}: {summary.bytes / 1e6:.0f} MB in {summary.parts} parts", flush=True)

    results: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
    for _ in range(args.rounds):
        for src in ("files", *FORMATS):
            for order in ORDERS:
                for cold in (True, False):
                    key = (src, order, "cold" if cold else "warm")
                    results.setdefault(key, []).append(time_epoch(src, where[src], order, cold, n))
                    print(".", end="", flush=True)
    print()
    print(f"\nRead throughput (samples/s, MB/s; median of {args.rounds}), reader only, 2 threads, batch 64")
    print("| source | order | cache | samples/s | MB/s | vs files |")
    print("|---|---|---|---|---|---|")
    for (src, order, cache), values in results.items():
        rate = statistics.median(v[0] for v in values)
        mbs = statistics.median(v[1] for v in values)
        ref = statistics.median(v[0] for v in results[("files", order, cache)])
        print(f"| {src} | {order} | {cache} | {rate:,.0f} | {mbs:,.0f} | {rate / ref:.2f}x |")
    print(f"\nOrder of shuffle='buffer' against a uniform shuffle, N = {args.order_n:,}, block 256")
    print("| order | mean displacement / N | Spearman rho | neighbours < 1 block apart |")
    print("|---|---|---|---|")
    for name, disp, rho, near in order_quality(args.order_n, (1024, 16384)):
        print(f"| {name} | {disp:.3f} | {rho:+.4f} | {near:.4f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
