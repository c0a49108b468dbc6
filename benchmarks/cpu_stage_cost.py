"""Host CPU time per sample of the ResNet-50 training pipeline's CPU stage when the GPU decodes
(nvImageCodec): read the file, parse the JPEG header, draw the crop window and the mirror flip.
No GPU is needed: the stage is the one a GPU node runs (``decode_on_gpu``), built and run here.

    python benchmarks/cpu_stage_cost.py [--batch 256] [--threads 4] [--rounds 40] [--samples 512]
    python benchmarks/cpu_stage_cost.py --source files tfrecord webdataset recordio caffe

``--source`` chooses what the pipeline reads (one column each, their rounds interleaved): the
folder of JPEGs, or the same JPEGs converted by ``raypipe convert`` into a container format (the
preset reads a conversion with its format's reader), read a record at a time in a shuffled
order, as under the service's global shuffle.

As the executor runs it for ``--batch`` and ``--threads``: chunks of ``executor.chunk_size``
samples, each run by one pool thread (one core is measured), a batch's results alive until the
next batch is done, then dropped by the pool thread within the timed work (freeing and unmapping
count). Each part is timed alone the same way, on the
same files; "the rest" is the whole stage less its parts. CPU time of the working thread,
best of ``--rounds`` short rounds (other machines share this one's cores, so the slowest rounds
measure them). The host-decode stage (the crop decoded on the CPU, ROI JPEG decode) is timed in the
same run for reference. Where nvImageCodec is installed the code streams the executor's CPU stage
makes for the GPU decoder (``RAYPIPE_GPU_CODE_STREAMS=cpu``, the default) are timed too, alone and
with the whole stage.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from file_read_cost import read_into

from raypipe.bench.dataset import cache_dir, prepare
from raypipe.convert.plan import list_source
from raypipe.convert.run import convert
from raypipe.cpu_stage import CpuStage
from raypipe.executor import chunk_size
from raypipe.formats.registry import get
from raypipe.gpu_decode import code_stream_maker, nvimgcodec_installed
from raypipe.jpeg_header import frame_size, read_frame
from raypipe.keyed_random import SampleContext
from raypipe.operators.crop_window import DRAWS, random_crop_windows
from raypipe.operators.readers import FileReader
from raypipe.operators.record_reader import RecordReader
from raypipe.presets import resnet50_train

TARGET_US = 20.0
READ = "read the samples (the reader, a chunk at a time)"
DECODER = "decoder, all of it (run_chunk)"
COIN = "mirror coin flip (run_chunk)"
WHOLE = "whole CPU stage"
HOST = "host decode"
FLOOR = "floor"
STREAMS = "nvImageCodec code streams for the crop windows"
WHOLE_STREAMS = "whole CPU stage with the code streams"
SOURCE_NAMES = {
    "files": "folder of JPEG files",
    "tfrecord": "TFRecord",
    "webdataset": "WebDataset tar",
    "recordio": "MXNet RecordIO",
    "caffe": "Caffe LMDB",
}


def stage_of(root: str, batch: int, decode_on_gpu: bool) -> CpuStage:
    """The ResNet-50 training pipeline's CPU stage on a GPU node (decoder ``device="mixed"``);
    ``root`` is the folder of JPEGs or a conversion of it (the preset reads either)."""
    pipe = resnet50_train(root, batch_size=batch, num_threads=1, decoder_device="mixed", seed=0)
    return pipe.engine.cpu_stage({"on_gpu": True, "decode_on_gpu": decode_on_gpu})


def source_root(data_root: str, source: str) -> str:
    """The folder the pipeline reads for ``source``: the JPEGs, or their conversion into a container
    format (written once into the benchmark cache, then reused)."""
    if source == "files":
        return data_root
    listed = list_source(data_root)
    where = os.path.join(cache_dir(), f"containers-{len(listed.samples)}", source)
    convert(listed, where, get(source), part_size=256, workers=2)
    return where


class Part:
    """One thing timed as the executor runs it: ``work(first, count)`` per chunk on the pool thread,
    results kept until a batch later; its rounds continue where the last one stopped."""

    def __init__(self, work: Callable[[int, int], object], chunk: int, batch: int):
        self.work, self.chunk, self.batch = work, chunk, batch
        self.alive: list = []
        self.best = float("inf")

    def _one(self, first: int, count: int, stale: list) -> tuple[object, float]:
        began = time.thread_time()
        out = self.work(first, count)
        stale.clear()  # dropping a batch's results is part of its cost (freeing, unmapping)
        return out, time.thread_time() - began

    def round(self, pool: ThreadPoolExecutor, samples: int) -> None:
        """Time ``samples`` samples; keep the best CPU microseconds per sample so far."""
        spent = 0.0
        for first in range(0, samples, self.chunk):
            stale: list = []
            if len(self.alive) * self.chunk >= 2 * self.batch:
                stale = self.alive[: max(1, self.batch // self.chunk)]
                del self.alive[: len(stale)]
            out, seconds = pool.submit(self._one, first, min(self.chunk, samples - first), stale).result()
            del stale
            spent += seconds
            self.alive.append(out)
        self.best = min(self.best, 1e6 * spent / samples)


def parts_of(root: str, batch: int, threads: int, samples: int) -> dict[str, Part]:
    """The deferred stage, its parts and the host-decode stage, chunked as the executor would."""
    stage = stage_of(root, batch, decode_on_gpu=True)
    host = stage_of(root, batch, decode_on_gpu=False)
    ops = {node.op.schema.name: node.op for node in stage.graph.host_nodes}
    reader = stage.graph.host_nodes[0].op
    decoder, coin = ops["decoders.image_random_crop"], ops["random.coin_flip"]
    plan = next(iter(stage.graph.decode_plans.values()))  # deferred: the header and window only
    size = len(reader)
    ctxs = [SampleContext(0, 0, i % size) for i in range(samples)]
    encoded = [reader.read(i)[0] for i in range(size)]
    data = [encoded[i % size] for i in range(samples)]
    sizes = [frame_size(d) for d in data]
    chunk = chunk_size(batch, threads, cheap=stage.by_node)
    attempts = decoder.num_attempts

    def draws_of(first: int, n: int) -> np.ndarray:
        return decoder.draws(ctxs[first : first + n], DRAWS * attempts).reshape(DRAWS, attempts, n)

    drawn = {first: draws_of(first, min(chunk, samples - first)) for first in range(0, samples, chunk)}
    works: dict[str, Callable[[int, int], object]] = {
        READ: lambda f, n: reader.run_chunk([], {}, ctxs[f : f + n]),
        "JPEG header: size and EXIF block (marker walk)": lambda f, n: [read_frame(d) for d in data[f : f + n]],
        f"keyed draws for the window ({DRAWS * attempts} a sample)": draws_of,
        "crop windows from the draws": lambda f, n: random_crop_windows(
            np.array(sizes[f : f + n]).T, decoder.random_area, decoder.random_aspect_ratio, drawn[f]
        ).tolist(),
        DECODER: lambda f, n: decoder.run_chunk([data[f : f + n]], {}, ctxs[f : f + n], plan),
        COIN: lambda f, n: coin.run_chunk([], {}, ctxs[f : f + n]),
        WHOLE: lambda f, n: stage.run_chunk(ctxs[f : f + n], 0, None),
    }
    if nvimgcodec_installed():  # as the executor's CPU stage on a GPU node
        windows = [e.window for f in range(0, samples, chunk) for e in works[DECODER](f, min(chunk, samples - f))]
        make = code_stream_maker()
        works[STREAMS] = lambda f, n: [make(d, w) for d, w in zip(data[f : f + n], windows[f : f + n])]
        works[WHOLE_STREAMS] = lambda f, n: with_code_streams(stage, stage.run_chunk(ctxs[f : f + n], 0, None))
    floor = floor_reads(reader, [c.sample_index for c in ctxs], max(d.size for d in encoded))
    if floor is not None:
        works[FLOOR] = floor
    parts = {name: Part(work, chunk, batch) for name, work in works.items()}
    parts[HOST] = Part(lambda f, n: host.run_chunk(ctxs[f : f + n], 0, None), chunk_size(batch, threads), batch)
    return parts


def floor_reads(reader: object, indices: list[int], largest: int) -> Callable[[int, int], object] | None:
    """The reads of the samples' bytes alone, each into the same buffer: the file (a folder of
    files) or the record (a container read one record at a time, as under a global shuffle). None
    for a database (LMDB), whose reads go through its library."""
    spare = np.empty(largest + (1 << 16), np.uint8)
    if isinstance(reader, FileReader):
        paths = [reader.paths[i] for i in indices]
        return lambda f, n: [read_into(path, spare) for path in paths[f : f + n]]
    if not isinstance(reader, RecordReader):
        return None
    table = reader.table
    fds = [os.open(path, os.O_RDONLY) for path in table.paths]  # open as long as the reads are
    where = [(fds[int(table.file_index[i])], int(table.offsets[i]), int(table.sizes[i])) for i in indices]

    def reads(f: int, n: int) -> list[int]:
        return [os.preadv(fd, [spare[:size]], offset) for fd, offset, size in where[f : f + n]]

    weakref.finalize(reads, lambda: [os.close(fd) for fd in fds])
    return reads


def with_code_streams(stage: CpuStage, results: list) -> list:
    """``results`` of the CPU stage with each deferred image's code stream, made as the executor's
    CPU stage makes them (``Executor._run_chunk``)."""
    make = code_stream_maker()
    for result in results:
        for d in stage.graph.deferred:
            result[d] = result[d].with_code_stream(make)
    return results


def measure(
    roots: dict[str, str], batch: int, threads: int, rounds: int, samples: int
) -> tuple[dict[str, dict[str, float]], int]:
    """Best CPU microseconds per sample of every part of every source over ``rounds`` rounds, the
    sources and parts interleaved within each; and the chunk."""
    parts = {source: parts_of(root, batch, threads, samples) for source, root in roots.items()}
    with ThreadPoolExecutor(1) as pool:
        for of_source in parts.values():
            for part in of_source.values():
                part.round(pool, samples)  # warm-up: first calls, the batches in flight
                part.best = float("inf")
        for _ in range(rounds):
            for of_source in parts.values():
                for name, part in of_source.items():
                    part.round(pool, samples if name != HOST else max(part.chunk, samples // 16))
    best = {source: {name: part.best for name, part in of_source.items()} for source, of_source in parts.items()}
    return best, next(iter(parts.values()))[WHOLE].chunk


def report(best: dict[str, dict[str, float]], args: argparse.Namespace, chunk: int, described: str) -> None:
    """One column per source; the verdict against the target for each."""
    sources = list(best)
    first = best[sources[0]]
    subparts = [n for n in first if n not in (READ, DECODER, COIN, WHOLE, HOST, FLOOR, STREAMS, WHOLE_STREAMS)]

    def row(label: str, value: Callable[[dict[str, float]], float | None], digits: int = 1, bold: bool = False) -> str:
        cells = []
        for source in sources:
            v = value(best[source])
            text = "-" if v is None else f"{v:,.{digits}f}"
            cells.append(f"**{text}**" if bold else text)
        return f"| {f'**{label}**' if bold else label} | " + " | ".join(cells) + " |"

    def rest(b: dict[str, float]) -> float:
        return b[WHOLE] - b[READ] - b[DECODER] - b[COIN]

    print(f"\nCPU stage of the ResNet-50 training pipeline with GPU decoding, host CPU us per sample ({described};")
    print(
        f"batch {args.batch}, chunks of {chunk} as for {args.threads} threads, run by 1 pool thread; "
        f"best of {args.rounds} rounds of {args.samples} samples)"
    )
    print("| part | " + " | ".join(SOURCE_NAMES[s] for s in sources) + " |")
    print("|---|" + "---|" * len(sources))
    print(row(READ, lambda b: b[READ]))
    print(row(DECODER, lambda b: b[DECODER]))
    for name in subparts:
        print(row(f"- {name}", lambda b, name=name: b[name], 2))
    print(row(COIN, lambda b: b[COIN]))
    print(row("the rest: the stage's own calls, labels, caches the parts alone miss (whole less the above)", rest))
    print(row("whole CPU stage, GPU decode", lambda b: b[WHOLE], bold=True))
    print(row("the same less the read", lambda b: b[WHOLE] - b[READ]))
    if STREAMS in first:
        print(row(f"{STREAMS} (moved here from the Mixed stage)", lambda b: b[STREAMS]))
        print(row(WHOLE_STREAMS, lambda b: b[WHOLE_STREAMS]))
    print(row("for reference: the same bytes read into one reused buffer (the copy alone)", lambda b: b.get(FLOOR)))
    print(row("for reference: whole CPU stage, host ROI decode of the crop", lambda b: b[HOST], 0))
    print()
    for source in sources:
        whole = best[source][WHOLE]
        verdict = "meets" if whole <= TARGET_US else "misses"
        print(
            f"{SOURCE_NAMES[source]}: {whole:.1f} us per sample: {verdict} the target of at most "
            f"{TARGET_US:.0f} us per sample on one core"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--threads", type=int, default=4, help="the pipeline's threads (they set the chunk size)")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--samples", type=int, default=512, help="samples per round")
    parser.add_argument("--images", type=int, default=1000, help="generated JPEGs")
    parser.add_argument(
        "--source", nargs="+", choices=tuple(SOURCE_NAMES), default=["files"],
        help="what the pipeline reads: the folder of JPEGs, or its conversion into a container format; one column each",
    )  # fmt: skip
    args = parser.parse_args(argv)
    data = prepare(None, args.images)
    described = (
        f"{len(data.paths):,} generated JPEGs, {data.mean_width:.0f}x{data.mean_height:.0f} on average, "
        f"{data.mean_kib:.0f} KiB"
    )
    roots = {source: source_root(data.root, source) for source in dict.fromkeys(args.source)}
    best, chunk = measure(roots, args.batch, args.threads, args.rounds, args.samples)
    report(best, args, chunk, described)
    return 0


if __name__ == "__main__":
    sys.exit(main())
