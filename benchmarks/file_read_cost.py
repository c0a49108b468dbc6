"""Reading the encoded files for the GPU path: a copy (``readers.file``'s ``preadv`` into a new
array) against a read-only memory map of the file (DALI's readers map by default) and a direct
read past the page cache (DALI's ``use_o_direct``), in host CPU time per file.

    python benchmarks/file_read_cost.py [--files 1000] [--seconds 4] [--rounds 3]

Two settings, on the same generated JPEGs (the ones ``raypipe bench`` uses):

- alone: one thread reads a file and walks its JPEG header, 64 files at a time, and drops the
  files of the chunk before last (as the CPU stage of the GPU path does). Thread CPU time.
- with a consumer: the same thread hands each chunk to a second thread that copies every file into
  a reused staging buffer (as the host-to-device copy of the decode does) and drops it. The CPU time
  of the whole process per file, and files per second.

A map saves the copy out of the page cache, but creating and tearing one down changes the
process's address space: in a process with other busy threads that costs more than the copy.
A direct read (``O_DIRECT``) also copies nothing on the CPU, but reads the disk every time.

A third table says where the copy's time goes: the same bytes copied from one file again and again
(in the CPU's caches), from every file once (from memory), with each file's open and close, and as
records of one file written at once (a container).
"""

from __future__ import annotations

import argparse
import mmap
import os
import queue
import sys
import tempfile
import threading
import time
from collections.abc import Callable

import numpy as np

from raypipe.bench.dataset import prepare
from raypipe.jpeg_header import read_frame
from raypipe.operators.readers import read_file

CHUNK = 64
_MAP_FLAGS = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)


def map_file(path: str) -> np.ndarray:
    """The file at ``path`` mapped read-only, its pages populated at once; unmapped with the array."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return np.frombuffer(mmap.mmap(fd, 0, flags=_MAP_FLAGS, prot=mmap.PROT_READ), np.uint8)
    finally:
        os.close(fd)


_BLOCK = 4096


def read_direct(path: str) -> np.ndarray:
    """The file at ``path`` read with ``O_DIRECT`` (DALI's ``use_o_direct``): from the disk into a
    block-aligned array, past the page cache, so the CPU copies nothing."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        size = os.lseek(fd, 0, os.SEEK_END)
        blocks = -(-size // _BLOCK) * _BLOCK
        raw = np.empty(blocks + _BLOCK, np.uint8)
        start = -raw.ctypes.data % _BLOCK
        data = raw[start : start + blocks]
        got = os.preadv(fd, [data], 0) if size else 0
        if got < size:
            raise OSError(f"{path}: O_DIRECT read {got} of {size} bytes")
        return data[:size]
    finally:
        os.close(fd)


READERS: dict[str, Callable[[str], np.ndarray]] = {
    "copy (preadv)": read_file,
    "memory map": map_file,
    "direct read (O_DIRECT, no page cache)": read_direct,
}


def alone(read: Callable[[str], np.ndarray], paths: list[str], seconds: float) -> float:
    """Thread CPU microseconds per file: read, header walk, drop two chunks later."""
    alive: list[list[np.ndarray]] = []
    files, began, spent = 0, time.perf_counter(), 0.0
    while time.perf_counter() - began < seconds:
        start = files % len(paths)
        chunk_paths = paths[start : start + CHUNK]
        clock = time.thread_time()
        chunk = [read(path) for path in chunk_paths]
        for data in chunk:
            read_frame(data)
        alive.append(chunk)
        if len(alive) > 2:
            del alive[0]
        spent += time.thread_time() - clock
        files += len(chunk_paths)
    return 1e6 * spent / files


def with_consumer(read: Callable[[str], np.ndarray], paths: list[str], seconds: float) -> tuple[float, float]:
    """Files per second and process CPU microseconds per file, a consumer thread copying each file."""
    chunks: queue.Queue = queue.Queue(maxsize=4)
    stop = threading.Event()
    consumed = [0]

    def produce() -> None:
        files = 0
        while not stop.is_set():
            start = files % len(paths)
            chunk = [read(path) for path in paths[start : start + CHUNK]]
            for data in chunk:
                read_frame(data)
            while not stop.is_set():
                try:
                    chunks.put(chunk, timeout=0.1)
                    break
                except queue.Full:
                    pass
            files += len(chunk)

    def consume() -> None:
        staging = np.empty(1 << 24, np.uint8)
        while not stop.is_set():
            try:
                chunk = chunks.get(timeout=0.1)
            except queue.Empty:
                continue
            for data in chunk:
                staging[: data.size] = data
            consumed[0] += len(chunk)
            del chunk

    threads = [threading.Thread(target=produce), threading.Thread(target=consume)]
    for thread in threads:
        thread.start()
    time.sleep(0.5)
    files, cpu, wall = consumed[0], time.process_time(), time.perf_counter()
    time.sleep(seconds)
    files, cpu, wall = consumed[0] - files, time.process_time() - cpu, time.perf_counter() - wall
    stop.set()
    for thread in threads:
        thread.join()
    return files / wall, 1e6 * cpu / files


COPY_FLOOR = (
    "one file again and again (its bytes stay in the CPU's caches)",
    "each file once, by an open descriptor (from memory)",
    "each file once, opened, sized and closed as readers.file does",
    "the same bytes as records of one file, in a shuffled order (a container read a record at a time)",
)


def copy_floor(paths: list[str], folder: str, rounds: int) -> dict[str, float]:
    """Thread CPU microseconds per file of copying the files' bytes out of the page cache into one
    reused buffer, in each way of :data:`COPY_FLOOR` (best of ``rounds``): what the copy costs when
    the bytes are in the CPU's caches, from memory, with the file's open and close, and from one
    file written at once (as a container is)."""
    sizes = [os.path.getsize(p) for p in paths]
    spare = np.empty(max(sizes), np.uint8)
    fds = [os.open(p, os.O_RDONLY) for p in paths]
    container = os.path.join(folder, "records.bin")
    with open(container, "wb") as f:
        f.write(b"".join(read_file(p).tobytes() for p in paths))
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).tolist()
    order = np.random.default_rng(0).permutation(len(paths)).tolist()
    whole = os.open(container, os.O_RDONLY)
    read_file(container)  # into the page cache
    ways: list[Callable[[], object]] = [
        lambda: [os.preadv(fds[0], [spare[: sizes[0]]], 0) for _ in paths],
        lambda: [os.preadv(fd, [spare[:size]], 0) for fd, size in zip(fds, sizes)],
        lambda: [read_into(p, spare) for p in paths],
        lambda: [os.preadv(whole, [spare[: sizes[i]]], offsets[i]) for i in order],
    ]
    best = dict.fromkeys(COPY_FLOOR, float("inf"))
    try:
        for _ in range(rounds):
            for name, way in zip(COPY_FLOOR, ways):
                clock = time.thread_time()
                way()
                best[name] = min(best[name], 1e6 * (time.thread_time() - clock) / len(paths))
    finally:
        for fd in [*fds, whole]:
            os.close(fd)
        os.remove(container)
    return best


def read_into(path: str, buffer: np.ndarray) -> int:
    """The file's bytes into ``buffer``, always the same memory: the read without a new array."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.preadv(fd, [buffer[: os.lseek(fd, 0, os.SEEK_END)]], 0)
    finally:
        os.close(fd)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=4.0, help="per setting and round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    data = prepare(None, args.files)
    paths = list(data.paths)
    for path in paths:  # into the page cache
        read_file(path)
    readers = dict(READERS)
    try:
        if not np.array_equal(read_direct(paths[0]), read_file(paths[0])):
            raise OSError("it read other bytes")
    except OSError as exc:  # tmpfs and some network filesystems refuse O_DIRECT
        print(f"O_DIRECT is not measured here: {exc}")
        del readers["direct read (O_DIRECT, no page cache)"]
    best_alone = {name: float("inf") for name in readers}
    rates: dict[str, list[float]] = {name: [] for name in readers}
    cpus: dict[str, list[float]] = {name: [] for name in readers}
    for _ in range(args.rounds):
        for name, read in readers.items():
            best_alone[name] = min(best_alone[name], alone(read, paths, args.seconds / 2))
            rate, cpu = with_consumer(read, paths, args.seconds)
            rates[name].append(rate)
            cpus[name].append(cpu)
    print(
        f"\nReading {len(paths):,} generated JPEGs ({data.mean_kib:.0f} KiB on average) for the GPU path; "
        f"{args.rounds} alternating rounds, medians (alone: the best round)"
    )
    print("| read | alone: thread CPU us/file | with a consumer: files/s | with a consumer: process CPU us/file |")
    print("|---|---|---|---|")
    for name in readers:
        print(f"| {name} | {best_alone[name]:.1f} | {np.median(rates[name]):,.0f} | {np.median(cpus[name]):.1f} |")
    with tempfile.TemporaryDirectory(dir=os.path.dirname(paths[0])) as folder:  # the files' filesystem
        floor = copy_floor(paths, folder, max(5, 2 * args.rounds))
    print("\nWhere the copy's time goes: the same bytes into one reused buffer, thread CPU us per file (best round)")
    print("| copy | us/file |")
    print("|---|---|")
    for name, value in floor.items():
        print(f"| {name} | {value:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
